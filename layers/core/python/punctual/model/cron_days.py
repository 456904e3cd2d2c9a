"""Cron day specials (Quartz / EventBridge syntax), resolved to concrete days one month at a time.

Day-of-month:
  ``L``   the last day of the month;
  ``LW``  the last weekday (Monday-Friday) of the month;
  ``nW``  the weekday nearest day ``n``, never leaving the month: a Saturday moves to Friday
          (``1W`` on a Saturday moves to Monday the 3rd), a Sunday to Monday (a Sunday that is
          the month's last day moves to Friday). A month shorter than ``n`` days has no such day,
          as plain ``n`` does not fire there (croniter would clamp ``31W`` to the month's end).
Day-of-week (a day number 0-7 or a name SUN-SAT, then):
  ``dL``  the last such weekday of the month (``5L``, ``FRIL``: the last Friday);
  ``d#k`` the k-th such weekday of the month, k = 1-5 (``1#2``: the second Monday); a month
          without a fifth one has no ``d#5``.

A special is a tuple ``(kind, a, b)``. Which days of a month it names depends only on the month,
so the days of a field's specials are computed per (specials, year, month) and cached.
"""

from __future__ import annotations

import calendar
from datetime import date
from functools import lru_cache

LAST = "L"  # (LAST, 0, 0)
LAST_WEEKDAY = "LW"  # (LAST_WEEKDAY, 0, 0)
NEAREST_WEEKDAY = "W"  # (NEAREST_WEEKDAY, n, 0)
LAST_OF = "dL"  # (LAST_OF, weekday, 0)
NTH_OF = "#"  # (NTH_OF, weekday, k)

DaySpecial = tuple[str, int, int]
_SATURDAY, _SUNDAY = 6, 0


def weekday(y: int, mo: int, d: int) -> int:
    """Sunday = 0 ... Saturday = 6, as cron numbers days."""
    return date(y, mo, d).toordinal() % 7


def month_length(y: int, mo: int) -> int:
    return calendar.monthrange(y, mo)[1]


@lru_cache(maxsize=8192)  # a handful of months per schedule are live at any time
def special_days(specials: frozenset[DaySpecial], y: int, mo: int) -> tuple[int, ...]:
    """The days of month (y, mo) that any of ``specials`` names, ascending."""
    return days_named(specials, y, mo)


def days_named(specials: frozenset[DaySpecial], y: int, mo: int) -> tuple[int, ...]:
    """``special_days`` without the cache, for one-off sweeps."""
    last = month_length(y, mo)
    days = {day for special in specials if 1 <= (day := _resolve(special, y, mo, last)) <= last}
    return tuple(sorted(days))


def fires_every_month(specials: frozenset[DaySpecial]) -> bool:
    """True if some special names a day in every month (only ``d#5`` and ``nW`` may miss one)."""
    return any(kind in (LAST, LAST_WEEKDAY, LAST_OF) or (kind == NTH_OF and k <= 4) for kind, _, k in specials)


def _resolve(special: DaySpecial, y: int, mo: int, last: int) -> int:
    """The day a special names in (y, mo); outside 1..last when it names none."""
    kind, a, b = special
    if kind == LAST:
        return last
    if kind == LAST_WEEKDAY:
        return _nearest_weekday(y, mo, last, last)
    if kind == NEAREST_WEEKDAY:
        return _nearest_weekday(y, mo, a, last) if a <= last else 0
    if kind == LAST_OF:
        return last - (weekday(y, mo, last) - a) % 7
    first = 1 + (a - weekday(y, mo, 1)) % 7  # NTH_OF
    return first + 7 * (b - 1)


def _nearest_weekday(y: int, mo: int, d: int, last: int) -> int:
    wd = weekday(y, mo, d)
    if wd == _SATURDAY:
        return d + 2 if d == 1 else d - 1
    if wd == _SUNDAY:
        return d - 2 if d == last else d + 1
    return d
