"""The claim sequence: due jobs of one shard become runs on the dispatch queue.

Written once against the port, it runs unchanged on both engines. Per page of due jobs:

1. insert the runs (``attribute_not_exists``: a (job_id, scheduled_at) gets one row, ever);
2. send every open run of the page to the queue, including runs that already existed: they may
   have been inserted by a claim that crashed before sending;
3. advance the jobs (conditional on ``next_run_at`` being unchanged).

A crash between any two steps leaves the job un-advanced, so the next tick repeats the page:
step 1 finds the rows (no second row), step 2 resends (a duplicate message, dropped by the
worker's conditional lease), step 3 advances. Sending *before* advancing closes the dual-write
gap without an outbox: a run can never be inserted, advanced past, and unsent. When the next
tick comes so late that the catch-up policy plans another time than the job's stored one, step 2
also resends the run at the stored time if one is there and still ``scheduled`` (one read, on the
catch-up path only): so no run depends on the reaper's open-runs index to get its message.
Two schedulers on one shard race harmlessly the same way: one row per time, at worst a duplicate
message, and one of the two advances fails (a counted conflict).

A job that names a calendar is planned with the calendar as ``calendars`` gives it (a short-lived
cache: ``punctual.calendars.cache``), by ``punctual.scheduling.calendar_planning``.

The claim never applies a job's overlap policy: it runs up to the lookahead before a run's time,
when nobody can know whether the previous run will still be open at that time. The policy is
decided by the run's first lease, at its instant (``rules.overlap_*``, ``Store.lease_run``).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import partial

from punctual.calendars.cache import Calendars, read_business_days
from punctual.errors import PunctualError, RunNotFound
from punctual.model import Run, RunState
from punctual.port import Dispatch, DueJob, Queue, Store
from punctual.scheduling.calendar_planning import calendar_plan
from punctual.scheduling.planning import Plan, PlanOptions, dispatch_for, plan

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ClaimStats:
    due: int = 0  # due jobs read from the index
    inserted: int = 0  # run rows this pass created
    existed: int = 0  # run rows found already there (a retried or raced claim)
    dispatched: int = 0  # messages sent
    advanced: int = 0  # jobs moved to their next time
    conflicts: int = 0  # advances refused: another scheduler or an edit moved the job first
    errors: int = 0  # jobs that could not be planned (logged; they stay due)
    pages: int = 0  # claim pages that completed (a page that raised counts in ``failed`` instead)
    failed: int = 0  # claim pages that raised (set by the scheduler; the shard is retried next tick)
    # How long the oldest job read had been due when its page was read (0: none was past due). The
    # index lists a shard's jobs oldest first, so a page's first job gives it for free: this is the
    # claim lag, the age of the oldest due job that no claim has taken yet. Added as a maximum.
    lag_ms: int = 0

    def add(self, other: ClaimStats) -> None:
        for f in fields(self):
            combine = max if f.name == "lag_ms" else operator.add
            setattr(self, f.name, combine(getattr(self, f.name), getattr(other, f.name)))


def claim_page(
    store: Store,
    queue: Queue,
    shard: int,
    now: int,
    *,
    lookahead_ms: int,
    limit: int = 500,
    options: PlanOptions | None = None,
    on_plans: Callable[[list[Plan]], None] | None = None,
    calendars: Calendars | None = None,
) -> ClaimStats:
    """Claim one page (at most ``limit``) of ``shard``'s jobs due by ``now + lookahead_ms``.

    Returns what happened; ``stats.due < limit`` means the shard had no more due jobs, and
    ``stats.lag_ms`` how long the page's oldest job had been due (0 if it was not yet).
    ``on_plans`` sees the plans before anything is written (the scheduler measures lateness).
    ``calendars`` resolves the calendars of jobs that name one (default: read from ``store`` each time).
    """
    options = options or PlanOptions()
    due = store.due_jobs(shard, now + lookahead_ms, limit)
    stats = ClaimStats(due=len(due), pages=1, lag_ms=max(0, now - due[0].next_run_at) if due else 0)
    plans = _plan_all(due, now, options, stats, calendars or partial(read_business_days, store))
    if not plans:
        return stats
    if on_plans is not None:
        on_plans(plans)

    runs = [run for p in plans for run in p.runs]
    inserted = store.insert_runs(runs, window=True) if options.window_ms > 0 else store.insert_runs(runs)  # step 1
    stats.inserted = sum(inserted)
    stats.existed = len(inserted) - stats.inserted

    dispatches = [d for p in plans for run, d in zip(p.runs, p.dispatches, strict=True) if run.is_open]
    dispatches += _passed_over(store, plans, now, options.early_s)
    queue.send(dispatches)  # step 2
    stats.dispatched = len(dispatches)

    advanced = store.advance_jobs([p.advance for p in plans])  # step 3
    stats.advanced = sum(advanced)
    stats.conflicts = len(advanced) - stats.advanced
    return stats


def _plan_all(due: list[DueJob], now: int, options: PlanOptions, stats: ClaimStats, calendars: Calendars) -> list[Plan]:
    plans = []
    for job in due:
        try:
            if job.calendar is None:
                plans.append(plan(job, now, options))
            else:
                plans.append(calendar_plan(job, now, options, calendars(job.owner, job.calendar.name)))
        except (PunctualError, ValueError, KeyError) as exc:  # a job we cannot plan must not stop the shard
            stats.errors += 1
            logger.error("cannot plan job %s: %s", job.job_id, exc)
    return plans


def _passed_over(store: Store, plans: list[Plan], now: int, early_s: int) -> list[Dispatch]:
    """Dispatches for runs at a job's stored time that its plan moved past and that were never sent.

    Such a run exists only if a claim inserted it and died before sending, and no claim came back
    before the time counted as missed. It is still ``scheduled``; resending is harmless otherwise.
    """
    found = []
    for p in plans:
        if any(run.scheduled_at == p.job.next_run_at and run.is_open for run in p.runs):
            continue  # the plan covers the stored time itself (a calendar's skip record does not: it is not sent)
        run = _open_run(store, p.job.job_id, p.job.next_run_at)
        if run is not None and run.state is RunState.SCHEDULED:
            found.append(dispatch_for(run, p.job.jitter_s, now, early_s=early_s, priority=p.job.priority))
    return found


def _open_run(store: Store, job_id: str, scheduled_at: int) -> Run | None:
    try:
        run = store.get_run(job_id, scheduled_at)
    except RunNotFound:
        return None
    return run if run.is_open else None
