"""Whether a claimed instant is still one of its job's times, judged at the instant.

The scheduler claims a run up to a lookahead before its instant (and a catch-up run after it).
If the user changes the job's schedule, time zone, DST policy or ``run_at`` in between, the run was claimed
under a schedule that no longer holds: what the user committed before the instant decides
(docs/execution.md, the run contract), so an instant the new schedule lacks is not called.

Only jobs changed recently pay for the check: a change older than :data:`CLAIM_HORIZON_MS`
before the instant came before any claim of it (a claim is never earlier than the lookahead),
so that claim already followed it. The cron check is cached per (schedule, time zone, instant):
20,000 jobs on one schedule cost one computation.
"""

from __future__ import annotations

from functools import lru_cache

from punctual.clock import from_datetime
from punctual.model import Job
from punctual.model.timing import DstPolicy
from punctual.scheduling import cron

# A claim of an instant is never earlier than this before it: the largest lookahead
# (Settings.lookahead_ms <= 60 s) plus the early dispatch of pre-leasing (prelease_s <= 10 s), and margin.
CLAIM_HORIZON_MS = 120_000


def still_planned(job: Job, scheduled_at: int) -> bool:
    """``scheduled_at`` is one of ``job``'s times as the job is now, or the job's schedule has not
    changed since the instant could have been claimed. A job changed meanwhile to have neither a
    schedule nor a ``run_at`` (it now waits for other jobs: ``depends_on``) has no times at all:
    False. Its dependency runs are not concerned (``rules.withdrawn`` withdraws only schedule and
    catch-up runs for a schedule change)."""
    changed = job.rescheduled_at
    if changed is None or changed < scheduled_at - CLAIM_HORIZON_MS:
        return True
    if job.run_at is not None:
        return from_datetime(job.run_at) == scheduled_at
    if job.schedule is not None:
        return _fires_at(job.schedule, job.timezone, scheduled_at, job.dst)
    return False


@lru_cache(maxsize=4_096)
def _fires_at(schedule: str, timezone: str, instant: int, dst: DstPolicy) -> bool:
    return cron.next_fire(schedule, timezone, instant - 1, dst) == instant
