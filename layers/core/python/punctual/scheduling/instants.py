"""Whether a claimed instant is still one of its job's times, judged at the instant.

The scheduler claims a run up to a lookahead before its instant (and a catch-up run after it).
If the user changes the job's schedule, time zone, DST policy or ``run_at`` in between, the run was claimed
under a schedule that no longer holds: what the user committed before the instant decides
(docs/execution.md, the run contract), so an instant the new schedule lacks is not called.

Only jobs changed recently pay for the check: a change older than :data:`CLAIM_HORIZON_MS`
before the instant came before any claim of it (a claim is never earlier than the lookahead and the claim window),
so that claim already followed it. The cron check is cached per (schedule, time zone, instant):
20,000 jobs on one schedule cost one computation.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial

from punctual.calendars.days import MAX_SHIFT_DAYS
from punctual.clock import from_datetime
from punctual.model import Job
from punctual.model.times import zone
from punctual.model.timing import CalendarMode, DstPolicy
from punctual.scheduling import cron

# A claim of an instant is never earlier than this before it: the largest lookahead
# (Settings.lookahead_ms <= 60 s) plus the largest claim window (claim_window_s <= 780 s: a claim
# takes a job's times up to its window boundary) plus the early dispatch of pre-leasing
# (prelease_s <= 10 s), and margin.
CLAIM_HORIZON_MS = 1_000_000


def still_planned(job: Job, scheduled_at: int) -> bool:
    """``scheduled_at`` is one of ``job``'s times as the job is now, or the job's schedule has not
    changed since the instant could have been claimed. A job changed meanwhile to have neither a
    schedule nor a ``run_at`` (it now waits for other jobs: ``depends_on``) has no times at all:
    False. Its dependency runs are not concerned (``rules.withdrawn`` withdraws only schedule and
    catch-up runs for a schedule change)."""
    changed = job.rescheduled_at
    if changed is None or changed < scheduled_at - CLAIM_HORIZON_MS:
        return True
    moves = job.calendar is not None and job.calendar.mode is not CalendarMode.SKIP
    if job.run_at is not None:
        at = from_datetime(job.run_at)
        return at == scheduled_at or (moves and _same_wall_nearby(at, scheduled_at, job.timezone))
    if job.schedule is not None:
        fires = partial(_fires_at, job.schedule, job.timezone, dst=job.dst)
        return fires(scheduled_at) or (moves and any(fires(t) for t in _same_wall_days(scheduled_at, job.timezone)))
    return False


@lru_cache(maxsize=4_096)
def _fires_at(schedule: str, timezone: str, instant: int, *, dst: DstPolicy) -> bool:
    return cron.next_fire(schedule, timezone, instant - 1, dst) == instant


# A run a calendar moved (next/previous business day) is not one of the schedule's own times. Its
# calendar is not read here (an edit of it never decides a claimed run): such a run stays planned if
# the schedule has a time at its wall-clock time on a day within the calendar's reach of it.


def _same_wall_days(instant: int, timezone: str) -> list[int]:
    """The instants at ``instant``'s wall-clock time in ``timezone`` on the days within MAX_SHIFT_DAYS."""
    tz = zone(timezone)
    wall = datetime.fromtimestamp(instant / 1000, UTC).astimezone(tz).replace(tzinfo=None)
    days = range(-MAX_SHIFT_DAYS, MAX_SHIFT_DAYS + 1)
    return [int((wall + timedelta(days=d)).replace(tzinfo=tz).timestamp() * 1000) for d in days if d]


def _same_wall_nearby(at: int, instant: int, timezone: str) -> bool:
    return at in _same_wall_days(instant, timezone)
