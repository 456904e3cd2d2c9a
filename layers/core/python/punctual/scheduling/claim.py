"""The claim sequence: due jobs of one shard become runs on the dispatch queue.

Written once against the port, it runs unchanged on both engines. Per page of due jobs:

1. insert the runs (``attribute_not_exists``: a (job_id, scheduled_at) gets one row, ever);
2. send every open run of the page to the queue, including runs that already existed: they may
   have been inserted by a claim that crashed before sending;
3. advance the jobs (conditional on ``next_run_at`` being unchanged).

A crash between any two steps leaves the job un-advanced, so the next tick repeats the page:
step 1 finds the rows (no second row), step 2 resends (a duplicate message, dropped by the
worker's conditional lease), step 3 advances. Sending *before* advancing closes the dual-write
gap without an outbox: a run can never be inserted, advanced past, and unsent.
Two schedulers on one shard race harmlessly the same way: one row per time, at worst a duplicate
message, and one of the two advances fails (a counted conflict).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from punctual.errors import PunctualError, RunNotFound
from punctual.model import Overlap, Run, RunState
from punctual.port import DueJob, Queue, Store
from punctual.runs.cancel import cancel_open_run
from punctual.scheduling.planning import Plan, PlanOptions, plan

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ClaimStats:
    due: int = 0  # due jobs read from the index
    inserted: int = 0  # run rows this pass created
    existed: int = 0  # run rows found already there (a retried or raced claim)
    dispatched: int = 0  # messages sent
    advanced: int = 0  # jobs moved to their next time
    conflicts: int = 0  # advances refused: another scheduler or an edit moved the job first
    skipped: int = 0  # runs recorded as cancelled by overlap=forbid
    replaced: int = 0  # open runs cancelled by overlap=replace
    errors: int = 0  # jobs that could not be planned (logged; they stay due)

    def add(self, other: ClaimStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


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
) -> ClaimStats:
    """Claim one page (at most ``limit``) of ``shard``'s jobs due by ``now + lookahead_ms``.

    Returns what happened; ``stats.due < limit`` means the shard had no more due jobs.
    ``on_plans`` sees the plans before anything is written (the scheduler measures lateness).
    """
    options = options or PlanOptions()
    stats = ClaimStats()
    due = store.due_jobs(shard, now + lookahead_ms, limit)
    stats.due = len(due)
    plans = _plan_all(due, now, options, stats)
    if not plans:
        return stats
    plans = [_apply_overlap(store, p, now, stats) for p in plans]
    if on_plans is not None:
        on_plans(plans)

    runs = [run for p in plans for run in p.runs]
    inserted = store.insert_runs(runs)  # step 1
    stats.inserted = sum(inserted)
    stats.existed = len(inserted) - stats.inserted

    dispatches = [d for p in plans for run, d in zip(p.runs, p.dispatches, strict=True) if run.is_open]
    queue.send(dispatches)  # step 2
    stats.dispatched = len(dispatches)

    advanced = store.advance_jobs([p.advance for p in plans])  # step 3
    stats.advanced = sum(advanced)
    stats.conflicts = len(advanced) - stats.advanced
    return stats


def _plan_all(due: list[DueJob], now: int, options: PlanOptions, stats: ClaimStats) -> list[Plan]:
    plans = []
    for job in due:
        try:
            plans.append(plan(job, now, options))
        except (PunctualError, ValueError, KeyError) as exc:  # a job we cannot plan must not stop the shard
            stats.errors += 1
            logger.error("cannot plan job %s: %s", job.job_id, exc)
    return plans


def _apply_overlap(store: Store, p: Plan, now: int, stats: ClaimStats) -> Plan:
    """Apply the job's overlap policy against its previous run (only read when the policy needs it)."""
    job = p.job
    if job.overlap is Overlap.ALLOW or job.last_run_at is None or not p.runs:
        return p
    previous = _open_run(store, job.job_id, job.last_run_at)
    if previous is None or previous.scheduled_at >= p.runs[0].scheduled_at:
        return p
    if job.overlap is Overlap.FORBID:
        stats.skipped += len(p.runs)
        note = f"skipped: previous run {previous.run_id} was still {previous.state} (overlap=forbid)"
        skipped = [_as_skipped(run, note, now) for run in p.runs]
        # last_run_at keeps pointing at the open run, so the next time is checked against it too
        return Plan(job, skipped, p.dispatches, replace(p.advance, last_run_at=previous.scheduled_at))
    cancel_open_run(store, previous, f"replaced by run {p.runs[0].run_id} (overlap=replace)", now, tries=2)
    stats.replaced += 1
    return p


def _open_run(store: Store, job_id: str, scheduled_at: int) -> Run | None:
    try:
        run = store.get_run(job_id, scheduled_at)
    except RunNotFound:
        return None
    return run if run.is_open else None


def _as_skipped(run: Run, note: str, now: int) -> Run:
    # "finished" at its own time: a precomputed skip is decided a few seconds before it
    return run.model_copy(update={"state": RunState.CANCELLED, "note": note, "finished_at": max(now, run.scheduled_at)})
