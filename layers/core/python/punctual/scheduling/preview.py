"""A job's next times, explained: which run as the schedule says, which the DST policy or the job's
calendar shifted or skipped, and why (``GET /jobs/{id}/preview``).

Pure: a function of the job's timing fields, its calendar's business days and ``now``. Every listed
run is a time the scheduler would claim, computed by the same functions (``punctual.scheduling.cron``
and ``.timeline``); the preview adds the times that do *not* run, with their cause, and a sentence
for each that names the rule. The calendar is the one stored now: an edit before a time's claim
changes what happens to it.

Items come in time order. ``count`` bounds the items listed, runs and non-runs alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from punctual.calendars.days import BusinessDays
from punctual.clock import from_datetime
from punctual.model import JobSpec
from punctual.model.times import zone
from punctual.model.timing import DstRepeated, DstSkipped
from punctual.scheduling import cron
from punctual.scheduling.timeline import EventKind, Timeline, timeline_for

MAX_COUNT = 100  # items one preview lists at most
MAX_STEPS = 50_000  # wall minutes one preview looks at, at most (an every-minute job's month of them)


class Fate(StrEnum):
    RUN = "run"  # runs at ``at``, the time the schedule gives
    SHIFTED = "shifted"  # runs at ``at`` instead of the time the schedule gives (``scheduled``)
    SKIPPED = "skipped"  # does not run; ``at`` is when it would have (None: a wall time that never happens)


class Cause(StrEnum):
    DST_REPEATED = "dst_repeated"  # the wall time happens twice (clocks fall back): the job's dst_repeated
    DST_SKIPPED = "dst_skipped"  # the wall time never happens (clocks spring forward): the job's dst_skipped
    CALENDAR = "calendar"  # the day is one the job's calendar excludes: the calendar's mode


@dataclass(frozen=True, slots=True)
class PreviewItem:
    at: int | None  # epoch ms it runs at (run, shifted) or would have (skipped; None if it never exists)
    scheduled: int | None  # the instant the schedule gives (None: its wall time never happens)
    local: str  # the schedule's wall time in the job's zone, "2026-03-08T02:30"
    fate: Fate
    cause: Cause | None = None
    detail: str | None = None
    gap_end: int | None = None  # a wall time that never happens sorts where its gap ends

    @property
    def order(self) -> int:
        """Where it sorts: its instant (for a wall time that never happens, where the gap ends)."""
        return self.at if self.at is not None else self.gap_end or 0


def preview(job: JobSpec, now: int, count: int, days: BusinessDays | None = None) -> list[PreviewItem]:
    """The next ``count`` items after ``now``: runs, and the schedule's times that do not run, in order.
    ``days``: the business days of the job's calendar (None: it names none).

    A job with ``depends_on`` has no times of its own (its runs are released by other jobs): empty.
    """
    timeline = None if days is None or job.calendar is None else timeline_for(job, days)
    if job.run_at is not None:
        at = from_datetime(job.run_at)
        item = _on_calendar(PreviewItem(at, at, _local(at, job.timezone), Fate.RUN), timeline)
        return [item] if item.order > now and count > 0 else []
    if job.schedule is None:
        return []
    return _cron_items(job, now, count, timeline)


def _cron_items(job: JobSpec, now: int, count: int, timeline: Timeline | None) -> list[PreviewItem]:
    assert job.schedule is not None
    items: list[PreviewItem] = []
    runs: dict[int, PreviewItem] = {}
    since = now if timeline is None else timeline.first_source(now)  # times moved forward past now count
    for steps, minute in enumerate(cron.wall_minutes(job.schedule, job.timezone, since, job.dst)):
        earliest = minute.first if timeline is None else timeline.lower_bound(minute.first)
        if (len(items) >= count and earliest > items[count - 1].order) or steps >= MAX_STEPS:
            break  # every later minute's items come after the count-th: the list is final
        for dst_item in _dst_items(job, minute):
            found = _on_calendar(dst_item, timeline)
            if found.order <= now:
                continue
            ran = found.at is not None and found.fate is not Fate.SKIPPED
            items.append(_one_run_per_instant(found, runs, items, job.timezone) if ran else found)
        items.sort(key=lambda i: (i.order, i.fate is Fate.SKIPPED))  # a run before what joins it
    return items[:count]


def _dst_items(job: JobSpec, minute: cron.WallMinute) -> list[PreviewItem]:
    """The items of one wall minute: one, or two for a repeated one (each pass, run or not)."""
    assert job.schedule is not None
    local = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}".format(*minute.wall)
    if minute.kind == "normal":
        return [PreviewItem(minute.first, minute.first, local, Fate.RUN)]
    repeated, skipped = cron.policy_in_force(job.schedule, job.timezone, job.dst)
    hhmm, day = local[11:], local[:10]
    if minute.kind == "gap":
        where = f"{hhmm} does not exist on {day} in {job.timezone} (clocks spring forward)"
        if skipped is DstSkipped.SKIP:
            detail = f"{where}; dst_skipped=skip: no run"
            return [PreviewItem(None, None, local, Fate.SKIPPED, Cause.DST_SKIPPED, detail, gap_end=minute.first)]
        after = _local(minute.first, job.timezone)[11:]
        detail = f"{where}; dst_skipped=shift runs it at {after}, the first instant after the gap"
        return [PreviewItem(minute.first, None, local, Fate.SHIFTED, Cause.DST_SKIPPED, detail)]
    assert minute.second is not None
    where = f"{hhmm} happens twice on {day} in {job.timezone} (clocks fall back)"
    out = []
    for which, at in (("first", minute.first), ("second", minute.second)):
        offset = _local(at, job.timezone, offset=True)[16:]
        runs = at in minute.fires
        verdict = "runs at both" if repeated is DstRepeated.TWICE else f"runs the {which}" if runs else "skips this one"
        detail = f"{where}; this is the {which} ({offset}): dst_repeated={repeated.value} {verdict}"
        out.append(PreviewItem(at, at, local, Fate.RUN if runs else Fate.SKIPPED, Cause.DST_REPEATED, detail))
    return out


def _one_run_per_instant(
    item: PreviewItem, runs: dict[int, PreviewItem], items: list[PreviewItem], tz: str
) -> PreviewItem:
    """``item`` (a run), or a non-run if another of the schedule's times already runs at its instant.
    A time the schedule gives itself takes the run from one shifted onto it (so says its wall time)."""
    assert item.at is not None
    held = runs.get(item.at)
    if held is None:
        runs[item.at] = item
        return item
    if held.fate is Fate.SHIFTED and item.fate is Fate.RUN:
        items[items.index(held)] = _merged(held, item, tz)
        runs[item.at] = item
        return item
    return _merged(item, held, tz)


def _on_calendar(item: PreviewItem, timeline: Timeline | None) -> PreviewItem:
    """``item`` (a time that runs, as far as DST goes) with the job's calendar applied."""
    if timeline is None or item.at is None or item.fate is Fate.SKIPPED:
        return item
    event = timeline.event_for(item.at)
    if event.kind is EventKind.RUN:
        return item
    detail = event.note if item.detail is None else f"{item.detail}; then {event.note}"
    fate = Fate.SKIPPED if event.kind is EventKind.SKIPPED else Fate.SHIFTED
    return PreviewItem(event.at, item.scheduled, item.local, fate, Cause.CALENDAR, detail)


def _merged(item: PreviewItem, run: PreviewItem, tz: str) -> PreviewItem:
    """``item`` made a non-run: another of the schedule's times already runs at its instant."""
    assert item.at is not None
    note = f"one run at {_local(item.at, tz)[11:]} covers it (the schedule's {run.local[11:]} runs then)"
    detail = note if item.detail is None else f"{item.detail}; {note}"
    return PreviewItem(item.at, item.scheduled, item.local, Fate.SKIPPED, item.cause, detail)


def _local(at: int, tz: str, *, offset: bool = False) -> str:
    """``at`` as the wall clock in ``tz``: "2026-03-08T03:00", or with its offset "...T03:00-04:00"."""
    text = datetime.fromtimestamp(at / 1000, UTC).astimezone(zone(tz)).isoformat(timespec="minutes")
    return text if offset else text[:16]
