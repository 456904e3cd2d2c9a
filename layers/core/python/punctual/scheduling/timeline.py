"""A job's times with its calendar applied: which run, which are skipped, which move to a business day.

The job's own times (*raws*: its cron fires under its DST policy, or its ``run_at``) are mapped one by
one, in the calendar's time zone:

- on a business day: a run at that time (``RUN``);
- on an excluded day, ``mode: skip`` (or no business day within ``MAX_SHIFT_DAYS``): no run; the
  claim records a cancelled run at that time whose note says why (``SKIPPED``);
- on an excluded day, ``next_business_day`` / ``previous_business_day``: a run on that business day
  at the same wall-clock time (``SHIFTED``; a wall time the clocks skip that day resolves to the first
  instant after the gap, a repeated one to its first occurrence).

Events at one instant are one run (a Saturday and a Sunday time moved to Monday 09:00 join Monday's
own 09:00): its kind is ``RUN`` if the schedule gives that instant itself.

The scheduler claims a calendar job at each of its raw times *and* at each moved time: its due time
(``next_run_at``) is :meth:`Timeline.next_due`, the earlier of the two. So an edit of the calendar is
seen at the job's next claim, whatever it changes (a day made a business day again runs at its own
time), and each claim decides only the event at its instant (:meth:`Timeline.event_at`). A calendar
edit costs no write per job: nothing stored depends on the calendar's content.

Pure: every answer is a function of the job's timing, the resolved calendar and the instant asked.
What a day holds is computed once per (schedule, calendar content, day) and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from functools import lru_cache

from punctual.calendars.days import MAX_SHIFT_DAYS, BusinessDays
from punctual.model import JobSpec
from punctual.model.timing import CRON_RULE, CalendarMode, DstPolicy
from punctual.scheduling import cron

MAX_SCAN_DAYS = 400  # days one due-time search looks through for moved times, at most
_DAY_MS = 86_400_000


class EventKind(StrEnum):
    RUN = "run"  # a time the schedule gives, on a business day
    SHIFTED = "shifted"  # a time moved from an excluded day to a business day
    SKIPPED = "skipped"  # a time on an excluded day that does not run


@dataclass(frozen=True, slots=True)
class Event:
    at: int  # epoch ms: the run's scheduled_at (RUN, SHIFTED), or the skipped time (SKIPPED)
    kind: EventKind
    raw: int  # the schedule's time it comes from (SHIFTED: the earliest of those moved here)
    note: str | None = None  # why it moved or is skipped, for the run's note


@dataclass(frozen=True, slots=True)
class Raws:
    """A job's own times: its cron schedule in ``timezone`` under ``dst``, or one ``run_at``."""

    schedule: str | None
    timezone: str
    dst: DstPolicy = CRON_RULE
    run_at: int | None = None

    def next_after(self, t: int) -> int | None:
        if self.schedule is not None:
            return cron.next_fire(self.schedule, self.timezone, t, self.dst)
        return self.run_at if self.run_at is not None and self.run_at > t else None

    def latest_at_or_before(self, t: int) -> int | None:
        if self.schedule is not None:
            return cron.latest_fire_at_or_before(self.schedule, self.timezone, t, self.dst)
        return self.run_at if self.run_at is not None and self.run_at <= t else None

    def is_fire(self, t: int) -> bool:
        return self.next_after(t - 1) == t

    def between(self, lo: int, hi: int) -> list[int]:
        """The times in [lo, hi)."""
        if self.schedule is not None:
            return cron.fire_times(self.schedule, self.timezone, lo - 1, hi - 1, 4_000, dst=self.dst)
        return [self.run_at] if self.run_at is not None and lo <= self.run_at < hi else []


def timeline_for(spec: JobSpec, days: BusinessDays) -> Timeline:
    """The timeline of a job (or spec) that names a calendar, with that calendar's business days."""
    assert spec.calendar is not None
    run_at = None if spec.run_at is None else int(spec.run_at.timestamp() * 1000)
    return Timeline(Raws(spec.schedule, spec.timezone, spec.dst, run_at), days, spec.calendar.mode)


@dataclass(frozen=True, slots=True)
class Timeline:
    """The events of ``raws`` under calendar ``days`` in ``mode`` (see the module docstring)."""

    raws: Raws
    days: BusinessDays
    mode: CalendarMode

    def event_for(self, raw: int) -> Event:
        """What the calendar makes of one of the job's times, before events at one instant are joined."""
        day = self.day_of(raw)
        why = self.days.why_not(day)
        if why is None:
            return Event(raw, EventKind.RUN, raw)
        target = self.days.moved(day, self.mode)
        if target is None:
            beyond = "" if self.mode is CalendarMode.SKIP else f"; no business day within {MAX_SHIFT_DAYS} days"
            return Event(raw, EventKind.SKIPPED, raw, f"calendar {self.days.name}: {why}{beyond}")
        at = self.at_wall(target, raw)
        note = f"calendar {self.days.name}: moved from {self.local(raw)} ({why}; {self.mode.value})"
        return Event(at, EventKind.SHIFTED, raw, note)

    def event_at(self, at: int) -> Event | None:
        """The event at instant ``at`` (joined), or None: no time of the job's comes to ``at``."""
        day = self.day_of(at)
        for receiving in (day, day - timedelta(days=1)):  # a moved wall time may resolve past midnight
            if self._receives(receiving) and (event := _events_on(self, receiving).get(at)) is not None:
                return event
        if self._receives(day) or not self.raws.is_fire(at):  # a receiving day's events are all listed
            return None
        event = self.event_for(at)
        return event if event.at == at else None  # moved away: nothing happens here

    def next_due(self, after: int) -> int | None:
        """When the job is next due after ``after``: its next own time or the next time moved onto a
        business day, whichever is earlier (None: neither, a one-time job that is done)."""
        best = self.raws.next_after(after)
        last = self.day_of(best) if best is not None else self.day_of(after) + timedelta(days=MAX_SHIFT_DAYS + 1)
        day = self.day_of(after)
        for _ in range(MAX_SCAN_DAYS):
            if day > last:
                break
            if self._receives(day):
                moved = [e.at for e in _events_on(self, day).values() if e.at > after]
                if moved and (best is None or min(moved) < best):
                    best = min(moved)
                    break  # days come in order: nothing later moves before this
            day += timedelta(days=1)
        return best

    def previous_due(self, at: int) -> int | None:
        """The latest time <= ``at`` at which the job was due (its own time or a moved one), or None."""
        best = self.raws.latest_at_or_before(at)
        first = self.day_of(best) if best is not None else self.day_of(at) - timedelta(days=MAX_SHIFT_DAYS + 1)
        day = self.day_of(at)
        for _ in range(MAX_SCAN_DAYS):
            if day < first:
                break
            if self._receives(day):
                moved = [e.at for e in _events_on(self, day).values() if e.at <= at]
                if moved and (best is None or max(moved) > best):
                    best = max(moved)
                    break
            day -= timedelta(days=1)
        return best

    def first_source(self, after: int) -> int:
        """No time of the job's before this instant has an event after ``after`` (a next_business_day
        move is the only way forward, from the excluded days just before ``after``'s day)."""
        if self.mode is not CalendarMode.NEXT_BUSINESS_DAY:
            return after
        day = self.day_of(after)
        for _ in range(MAX_SHIFT_DAYS):
            if self.days.business(day - timedelta(days=1)):
                break
            day -= timedelta(days=1)
        return min(after, self.start_of(day))

    def lower_bound(self, raw: int) -> int:
        """No event of a time >= ``raw`` comes before this instant (a previous_business_day move is
        the only way back, and never before the start of the day ``raw``'s day moves to)."""
        if self.mode is not CalendarMode.PREVIOUS_BUSINESS_DAY:
            return raw
        day = self.day_of(raw)
        target = self.days.moved(day, self.mode) if not self.days.business(day) else None
        return raw if target is None else min(raw, self.start_of(target))

    # -- days in the calendar's zone ------------------------------------------------------------

    def day_of(self, at: int) -> date:
        return datetime.fromtimestamp(at / 1000, UTC).astimezone(self.days.tz).date()

    def start_of(self, day: date) -> int:
        return self._resolve(datetime(day.year, day.month, day.day))

    def at_wall(self, day: date, raw: int) -> int:
        """``raw``'s wall-clock time in the calendar's zone, on ``day``."""
        wall = datetime.fromtimestamp(raw / 1000, UTC).astimezone(self.days.tz).replace(tzinfo=None)
        return self._resolve(datetime.combine(day, wall.time())) + raw % 1000

    def local(self, at: int) -> str:
        return datetime.fromtimestamp(at / 1000, UTC).astimezone(self.days.tz).strftime("%Y-%m-%d %H:%M")

    def _resolve(self, wall: datetime) -> int:
        """The first instant the zone's clock shows ``wall`` (after the gap if it never does)."""
        first = int(wall.replace(tzinfo=self.days.tz, fold=0).timestamp() * 1000)
        other = int(wall.replace(tzinfo=self.days.tz, fold=1).timestamp() * 1000)
        lo, hi = min(first, other), max(first, other)
        if datetime.fromtimestamp(lo / 1000, UTC).astimezone(self.days.tz).replace(tzinfo=None) == wall:
            return lo  # exists (repeated: its first occurrence)
        while hi - lo > 1_000:  # in a gap: the instant it ends, to the second (offsets are whole seconds)
            mid = (lo + hi) // 2 // 1000 * 1000
            shown = datetime.fromtimestamp(mid / 1000, UTC).astimezone(self.days.tz).replace(tzinfo=None)
            lo, hi = (mid, hi) if shown < wall else (lo, mid)
        return hi

    def _receives(self, day: date) -> bool:
        """Times of other days move onto ``day``: a business day next to an excluded one."""
        if self.mode is CalendarMode.SKIP or not self.days.business(day):
            return False
        neighbour = day - timedelta(days=1) if self.mode is CalendarMode.NEXT_BUSINESS_DAY else day + timedelta(days=1)
        return not self.days.business(neighbour)


@lru_cache(maxsize=4_096)
def _events_on(timeline: Timeline, day: date) -> dict[int, Event]:
    """Every event at an instant of business ``day``'s (its own times, and those moved onto it), joined."""
    step = timedelta(days=-1 if timeline.mode is CalendarMode.NEXT_BUSINESS_DAY else 1)
    sources, other = [day], day + step
    while len(sources) <= MAX_SHIFT_DAYS and not timeline.days.business(other):
        sources.append(other)
        other += step
    events: dict[int, Event] = {}
    for source in sources:
        for raw in timeline.raws.between(timeline.start_of(source), timeline.start_of(source + timedelta(days=1))):
            event = timeline.event_for(raw)
            held = events.get(event.at)
            if event.kind is EventKind.SKIPPED or (held is not None and held.kind is EventKind.RUN):
                continue
            if held is None or event.kind is EventKind.RUN or event.raw < held.raw:
                events[event.at] = event
    return events
