"""A sourced constant: a value with its unit, its kind and where and when it was taken; :func:`sourced`
writes the constants of one source as rows of a table."""

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
Row = tuple[str, float, str, Kind, str]  # key, value, unit, kind, what


def sourced(source: str, *rows: Row, as_of: str = AS_OF) -> tuple[Constant, ...]:
    """The constants of ``rows`` (key, value, unit, kind, what), all taken from ``source`` on ``as_of``."""
    return tuple(Constant(key, value, unit, kind, what, source, as_of) for key, value, unit, kind, what in rows)
