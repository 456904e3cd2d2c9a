"""A calendar and its bases, resolved: which dates are business days, and where an excluded one moves.

Pure and immutable once built: a :class:`BusinessDays` answers from sets, memoizing per date, and is
hashable by its content, so the timeline can cache what it computed for a day per calendar content.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import date, timedelta, tzinfo

from punctual.model.calendars import MAX_BASE_DEPTH, Calendar, CalendarSpec
from punctual.model.times import zone
from punctual.model.timing import CalendarMode

MAX_SHIFT_DAYS = 31  # a business day further than this from an excluded one is "none": the time is skipped
_MEMO_MAX = 20_000  # dates remembered per resolved calendar


class BusinessDays:
    """The business days of calendar ``name`` (the first of ``chain``), in the first one's time zone.

    ``chain`` is the calendar followed by its ``based_on`` calendars, each once. ``missing`` names a
    calendar of the chain that does not exist (deleted meanwhile): then no day is a business day.
    """

    def __init__(self, name: str, chain: Sequence[CalendarSpec], *, missing: str | None = None) -> None:
        self.name, self.missing = name, missing
        self.timezone = chain[0].timezone if chain else "UTC"
        self.tz: tzinfo = zone(self.timezone)
        self._rules = [_Rules(spec) for spec in chain]
        content = [name, missing, [spec.model_dump(mode="json") for spec in chain]]
        self.key = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
        self._memo: dict[date, str | None] = {}

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BusinessDays) and other.key == self.key

    def business(self, day: date) -> bool:
        return self.why_not(day) is None

    def why_not(self, day: date) -> str | None:
        """Why ``day`` is not a business day (None: it is one), in words for a run's note."""
        if day in self._memo:
            return self._memo[day]
        if self.missing is not None:
            reason: str | None = f"calendar {self.missing} does not exist"
        else:
            reason = next((r for rules in self._rules if (r := rules.excludes(day)) is not None), None)
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[day] = reason
        return reason

    def moved(self, day: date, mode: CalendarMode) -> date | None:
        """The business day an excluded ``day`` moves to under ``mode`` (within MAX_SHIFT_DAYS), or None."""
        if mode is CalendarMode.SKIP:
            return None
        step = timedelta(days=1 if mode is CalendarMode.NEXT_BUSINESS_DAY else -1)
        other = day
        for _ in range(MAX_SHIFT_DAYS):
            other += step
            if self.business(other):
                return other
        return None


class _Rules:
    """One calendar's own rules (its base's are another ``_Rules``)."""

    def __init__(self, spec: CalendarSpec) -> None:
        self.spec = spec
        self.dates = frozenset(spec.exclude_dates)
        self.ranges = sorted(r.bounds for r in spec.exclude_ranges)
        self.weekdays = frozenset(w.iso for w in spec.exclude_weekdays)
        self.only = None if spec.include_only is None else frozenset(spec.include_only)

    def excludes(self, day: date) -> str | None:
        if day in self.dates:
            return f"{day} is one of its excluded dates"
        if day.isoweekday() in self.weekdays:
            return f"{day.strftime('%a').upper()} {day} is an excluded weekday"
        if any(start <= day <= end for start, end in self.ranges):
            return f"{day} is in an excluded range"
        if self.only is not None and day not in self.only:
            return f"{day} is not one of its include_only days"
        return None


def resolve(name: str, read: Callable[[str], Calendar | None]) -> BusinessDays:
    """The business days of calendar ``name``, reading it and its bases with ``read`` (name -> calendar).

    A chain is at most MAX_BASE_DEPTH long (the API refuses longer ones and cycles; a chain that two
    concurrent edits made into a cycle ends at the first calendar seen twice). A calendar of the chain
    that ``read`` does not find makes every day excluded: no time runs on a day nobody can vouch for.
    """
    chain: list[CalendarSpec] = []
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current not in seen and len(chain) < MAX_BASE_DEPTH:
        seen.add(current)
        found = read(current)
        if found is None:
            return BusinessDays(name, chain, missing=current)
        chain.append(found)
        current = found.based_on
    return BusinessDays(name, chain)
