"""Cron syntax: parse and validate an expression into value sets and day specials.

The syntax contract is written in ``punctual.scheduling.cron``, which computes the fire times;
this module checks it with messages that name the field and the item, and refuses what can never
fire (or fires less than once in 8 years). croniter expands the plain items; the day specials are
ours (``cron_days``). It is the grammar of ``JobSpec.schedule``, so it lives with the model, which
validates a spec with it (a kernel imports no capability package).
"""

from __future__ import annotations

import itertools
import re
from typing import NamedTuple

from croniter import CroniterError, croniter

from punctual.errors import InvalidSchedule
from punctual.model.cron_days import (
    LAST,
    LAST_OF,
    LAST_WEEKDAY,
    NEAREST_WEEKDAY,
    NTH_OF,
    DaySpecial,
    days_named,
    fires_every_month,
)

MAX_CRON_LENGTH = 256
MAX_GAP_MONTHS = 8 * 12  # validation refuses schedules with longer gaps (a fifth weekday in Feb)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, low, high, names, hint): day-of-week accepts 7 for Sunday, as every cron does.
_Field = tuple[str, int, int, dict[str, int], str]
_FIELDS: tuple[_Field, ...] = (
    ("minute", 0, 59, {}, ""),
    ("hour", 0, 23, {}, ""),
    ("day-of-month", 1, 31, {}, ""),
    ("month", 1, 12, {n: i + 1 for i, n in enumerate(_MONTHS)}, " or a name (JAN-DEC)"),
    ("day-of-week", 0, 7, {n: i for i, n in enumerate(_DAYS)}, " or a name (SUN-SAT)"),
)
_ITEM = re.compile(r"^(?:(\*)|(\w+)(?:-(\w+))?)(?:/(\w+))?$", re.ASCII)
_DOM_SPECIAL = re.compile(r"^(?:(L)|(LW)|(\d+)W)$", re.ASCII | re.IGNORECASE)
_DOW_SPECIAL = re.compile(r"^(\w+?)(?:(L)|#(\w*))$", re.ASCII | re.IGNORECASE)
_DOM, _DOW = 2, 4  # field positions
_WS = re.compile(r"\s+", re.ASCII)
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29 for "can it fire"


class Expanded(NamedTuple):
    normalized: str
    sets: list[frozenset[int]]  # the plain values allowed per field
    interval: bool  # the hour field starts with "*" (Vixie cron's DST rule)
    dom_specials: frozenset[DaySpecial]
    dow_specials: frozenset[DaySpecial]


def validate_cron(expr: str) -> str:
    """Return the expression with whitespace collapsed, or raise InvalidSchedule."""
    return expand(expr).normalized


def expand(expr: str) -> Expanded:
    """Validate; return the expression normalized, its plain value sets and its day specials."""
    parsed = _parse(expr)
    try:
        expanded = croniter.expand(parsed.text)[0]
    except CroniterError as exc:  # a shape our own checks let through
        raise InvalidSchedule(f"cron expression {parsed.normalized!r} is not valid: {exc}") from None
    sets = [
        frozenset()
        if specials_only
        else frozenset(range(lo, hi + 1))
        if values == ["*"]
        else frozenset(map(int, values))
        for values, (lo, hi), specials_only in zip(expanded, croniter.RANGES[:5], parsed.specials_only, strict=True)
    ]
    result = Expanded(
        parsed.normalized, sets, parsed.text.split()[1].startswith("*"), parsed.dom_specials, parsed.dow_specials
    )
    _check_can_fire(result)
    return result


def _check_can_fire(exp: Expanded) -> None:
    days, months, weekdays = exp.sets[2], exp.sets[3], exp.sets[4]
    dow_restricted = len(weekdays) < 7
    if dow_restricted and (weekdays or fires_every_month(exp.dow_specials)):
        return  # such a day-of-week occurs in every month (alone, or OR-ed with day-of-month)
    nearest = {n for kind, n, _ in exp.dom_specials if kind == NEAREST_WEEKDAY}  # fires where n would
    dom_fires = any(kind in (LAST, LAST_WEEKDAY) for kind, _, _ in exp.dom_specials) or any(
        d <= _MONTH_DAYS[m] for d in days | nearest for m in months
    )
    if dom_fires and (len(days) < 31 or not dow_restricted):
        return  # day-of-month fires (OR-ed with a rare day-of-week, or alone)
    if not dow_restricted:
        raise InvalidSchedule(
            f"cron expression {exp.normalized!r} never fires: day-of-month "
            f"{','.join(map(str, sorted(days | nearest)))} does not occur in "
            f"{','.join(_MONTHS[m - 1].upper() for m in sorted(months))}"
        )
    # Only "d#5" items are left: a fifth such weekday may be rare (Feb: once in 28-40 years).
    cycle = 400 * 12  # the Gregorian calendar, weekdays included, repeats every 400 years
    firing = [
        i for i in range(cycle) if (i % 12 + 1) in months and days_named(exp.dow_specials, 2000 + i // 12, i % 12 + 1)
    ]
    gaps = [b - a for a, b in itertools.pairwise([*firing, firing[0] + cycle])] if firing else [cycle]
    if max(gaps) > MAX_GAP_MONTHS:
        raise InvalidSchedule(
            f"cron expression {exp.normalized!r} fires less than once in {MAX_GAP_MONTHS // 12} years "
            f"(up to {max(gaps) // 12} years apart): a fifth such weekday is rare in "
            f"{','.join(_MONTHS[m - 1].upper() for m in sorted(months))}"
        )


# -- parsing ---------------------------------------------------------------------------------


class _Parsed(NamedTuple):
    normalized: str
    text: str  # the plain items, as croniter should read them ("*" for a field of specials only)
    specials_only: tuple[bool, ...]  # per field: it holds day specials and no plain item
    dom_specials: frozenset[DaySpecial]
    dow_specials: frozenset[DaySpecial]


def _parse(expr: str) -> _Parsed:
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidSchedule("cron expression is empty")
    if len(expr) > MAX_CRON_LENGTH:
        raise InvalidSchedule(f"cron expression is longer than {MAX_CRON_LENGTH} characters")
    fields = _WS.split(expr.strip())
    if fields[0].startswith("@"):
        macro = fields[0].lower()
        if len(fields) != 1 or macro not in _MACROS:
            raise InvalidSchedule(f"unsupported cron macro {expr.strip()!r}; use one of " + ", ".join(_MACROS))
        return _Parsed(macro, _MACROS[macro], (False,) * 5, frozenset(), frozenset())
    if len(fields) != 5:
        hint = " (seconds and years are not supported)" if len(fields) in (6, 7) else ""
        raise InvalidSchedule(
            f"cron expression must have 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}{hint}"
        )
    parsed = [_parse_field(f, i) for i, f in enumerate(fields)]
    return _Parsed(
        " ".join(fields),
        " ".join(plain or "*" for plain, _ in parsed),
        tuple(not plain for plain, _ in parsed),
        parsed[_DOM][1],
        parsed[_DOW][1],
    )


def _parse_field(text: str, position: int) -> tuple[str, frozenset[DaySpecial]]:
    """Check one field with messages that name it: (its plain items for croniter, its specials)."""
    spec = _FIELDS[position]
    name = spec[0]
    items, specials = [], set[DaySpecial]()
    for written in text.split(","):
        special = _special(written, position)
        if special is not None:
            specials.add(special)
            continue
        m = _ITEM.match(written)
        if not m:
            raise InvalidSchedule(
                f"cron field {name!r} has invalid item {written!r}: use numbers"
                ", names, '*', ranges 'a-b', steps '/n' and lists 'a,b'" + _SPECIALS_HINT.get(position, "")
            )
        star, first, last, step = m.groups()
        if step is not None and (not step.isdigit() or int(step) == 0):
            raise InvalidSchedule(f"cron field {name!r} step {step!r} must be a number >= 1")
        values = [_value(v, spec) for v in (first, last) if v is not None]
        # "a-a" is just a (croniter would widen it to the whole field).
        items.append(first if star is None and len(values) == 2 and values[0] == values[1] else written)
    return ",".join(items), frozenset(specials)


_SPECIALS_HINT = {
    _DOM: " (specials: 'L', 'LW', 'nW')",
    _DOW: " (specials: 'dL' such as '5L', 'd#k' such as '1#2')",
}


def _special(written: str, position: int) -> DaySpecial | None:
    """The day special an item spells, None if it spells none; InvalidSchedule if it is a bad one."""
    if position == _DOM and (m := _DOM_SPECIAL.match(written)):
        last, last_weekday, near = m.groups()
        if last or last_weekday:
            return (LAST, 0, 0) if last else (LAST_WEEKDAY, 0, 0)
        return (NEAREST_WEEKDAY, _value(near, _FIELDS[_DOM]), 0)
    if position == _DOW and (m := _DOW_SPECIAL.match(written)):
        day_token, last, nth = m.groups()
        day = _value(day_token, _FIELDS[_DOW]) % 7
        if last:
            return (LAST_OF, day, 0)
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise InvalidSchedule(f"cron field 'day-of-week' item {written!r}: the n in 'day#n' must be 1-5")
        return (NTH_OF, day, int(nth))
    return None


def _value(token: str, spec: _Field) -> int:
    field, low, high, names, hint = spec
    if token.isdigit():
        if not low <= int(token) <= high:
            raise InvalidSchedule(f"cron field {field!r} value {int(token)} is out of range {low}-{high}")
        return int(token)
    if token.lower() in names:
        return names[token.lower()]
    upper = token.upper()
    if upper.endswith(("L", "W")) or "#" in upper:  # a day special in the wrong place
        if field == "day-of-week" and upper == "L":
            hint += "; for the last given weekday of the month write e.g. '5L' (the last Friday)"
        elif field in ("day-of-month", "day-of-week"):
            hint += "; a special (L, LW, nW, dL, d#k) stands alone as a list item, never in a range or step"
        else:
            hint += "; L and W belong in day-of-month, dL and d#k in day-of-week"
    raise InvalidSchedule(f"cron field {field!r} value {token!r} is not a number{hint} (? and H are not supported)")
