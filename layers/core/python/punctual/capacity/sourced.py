"""A sourced constant: a value with its unit, its kind and where and when it was taken."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    LIMIT = "limit"  # an AWS quota or hard limit
    PRICE = "price"  # an AWS list price (us-east-1)
    MEASURED = "measured"  # measured in this repository (test or benchmark named in the source)
    ESTIMATE = "estimate"  # a planning assumption; replace it with your own measurement


@dataclass(frozen=True, slots=True)
class Constant:
    key: str
    value: float
    unit: str
    kind: Kind
    what: str
    source: str
    as_of: str  # when the value was taken from its source


AS_OF = "2026-11-30"
