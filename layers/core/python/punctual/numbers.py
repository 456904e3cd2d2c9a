"""Which JSON numbers Punctual accepts, and finding the first one it does not, with its path.

A job's payload is stored as JSON and sent to targets as JSON, so every number in it must
survive both: a float must be finite (``1e400`` parses to infinity, which JSON cannot write:
``json.dumps`` emits ``Infinity``, pydantic emits ``null``, so the two engines disagreed), and an
integer must fit in 64 bits (signed or unsigned), the widest most JSON parsers read exactly.
(Python refuses to even parse an integer of more than 4,300 digits, which is how a long one used
to become a 500.)

The JSON parser hooks (:func:`parse_int`, :func:`parse_float`) keep an out-of-range number as an
:class:`OutOfRange` marker instead of failing on the spot, so :func:`first_out_of_range` can say
*where* it is (``payload.items.3.price``), which a parse error could not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_INT = -(2**63)  # int64
MAX_INT = 2**64 - 1  # uint64
_MAX_INT_DIGITS = len(str(MAX_INT))  # beyond this many digits no integer can be in range
RANGE = f"integers from {MIN_INT} to {MAX_INT} and finite floats"


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """A JSON number as written that no accepted number equals (what the parser hooks return)."""

    text: str


def parse_int(text: str) -> int | OutOfRange:
    """``json.loads(parse_int=...)``: the integer, or a marker when it is outside 64 bits."""
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return OutOfRange(text)  # never int(): past 4,300 digits that raises, and it is slow
    value = int(text)
    return value if MIN_INT <= value <= MAX_INT else OutOfRange(text)


def parse_float(text: str) -> float | OutOfRange:
    """``json.loads(parse_float=...)``: the float, or a marker when it overflows to infinity."""
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text)


def first_out_of_range(value: Any, root: str = "") -> tuple[str, str] | None:
    """``(path, number as written)`` of the first number in ``value`` that is not accepted, else None.

    ``path`` is dotted from ``root`` (``"payload.big"``, list indexes as numbers). Accepted:
    bools, integers within 64 bits, finite floats, and non-numbers. Iterative, so a deeply nested
    value cannot exhaust the stack.
    """
    pending: list[tuple[Any, str]] = [(value, root)]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            pending.extend((child, _join(path, str(key))) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend((child, _join(path, str(i))) for i, child in reversed(list(enumerate(item))))
        else:
            text = _refused(item)
            if text is not None:
                return (path or "body", text)
    return None


def _refused(item: Any) -> str | None:
    if isinstance(item, OutOfRange):
        return item.text
    if isinstance(item, bool):
        return None
    if isinstance(item, float) and not math.isfinite(item):
        return repr(item)
    if isinstance(item, int) and not MIN_INT <= item <= MAX_INT:
        return f"an integer of {item.bit_length()} bits"
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
