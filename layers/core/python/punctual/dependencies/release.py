"""Releasing dependent jobs when an upstream run turns terminal.

Call :func:`release_dependents` wherever a run reaches a terminal state, *before* the evidence
of that run is acknowledged (the worker deletes its message, the dead-letter handler deletes the
dead-letter message, the reaper sends a message for a run it buries). A crash anywhere after the
terminal write therefore leads to a redelivery that calls it again, and every step is idempotent:

    run terminal ─> fill slot ─> all slots full? ─> insert run ─> send ─────────> complete
                    (conditional) └ no: wait for     (id derived   (a crash: the    (generation
                                    the others        from slots)   reaper resends)  compare-and-set)

A dependent's release record holds one slot per upstream job: the *first* qualifying run of that
upstream that finished after the last release. Once every upstream of the dependent has a slot,
the released run's ``scheduled_at`` is the latest ``finished_at`` among the slots (the release
moment), so its run id is a function of the releasing runs: two callers that both see the full
record insert the same run (one row), and only one of them completes the record (generation).
A caller whose own slot is blocked by a full record helps complete that release, then retries.

Paused dependents drop the releases that complete while they are paused (the record is completed
without a run); resume does not backfill them. Deleted dependents are skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from punctual.config import DEFAULT_RETENTION_S
from punctual.errors import JobNotFound
from punctual.model import DependencyWhen, Job, JobStatus, Run, RunState, Trigger
from punctual.port import Queue, ReleaseSlot, ReleaseState, Store
from punctual.scheduling.planning import PlanOptions, dispatch_for, is_long_run

logger = logging.getLogger(__name__)

# The upstream states each ``when`` accepts. Cancelled runs (skipped, replaced, job deleted) never
# ran and release nothing, so deleting or pausing an upstream leaves its dependents waiting.
QUALIFYING: dict[DependencyWhen, frozenset[RunState]] = {
    DependencyWhen.SUCCEEDED: frozenset({RunState.SUCCEEDED}),
    DependencyWhen.FINISHED: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD}),
    DependencyWhen.FAILED: frozenset({RunState.FAILED, RunState.DEAD}),
}
RELEASING_STATES = QUALIFYING[DependencyWhen.FINISHED]
_ROUNDS = 8  # fill/complete rounds per dependent before leaving it to a redelivery (contention)


@dataclass(frozen=True, slots=True)
class ReleaseOptions:
    dispatch_grace_ms: int = PlanOptions().dispatch_grace_ms  # a released run not leased by then is reaped
    retention_s: int = DEFAULT_RETENTION_S
    long_run_after_s: int | None = None  # released runs of jobs with a longer timeout_s go to the long-run queue


def needs_release(upstream: Job, run: Run) -> bool:
    """Whether ``run`` of ``upstream`` can release anything (False costs the caller nothing more)."""
    return upstream.has_dependents and run.state in RELEASING_STATES and run.finished_at is not None


def release_dependents(
    store: Store, queue: Queue, upstream: Job, run: Run, now: int, *, options: ReleaseOptions | None = None
) -> list[Run]:
    """Offer the terminal ``run`` of ``upstream`` to every dependent; return the dependent runs it released.

    Safe to repeat for the same run (a redelivered finish releases nothing twice). Jobs without
    dependents return at once without any I/O. Storage and queue errors propagate: the caller must
    then leave its evidence (message) in place so that the call is repeated.
    """
    if not needs_release(upstream, run):
        return []
    assert run.finished_at is not None
    options = options or ReleaseOptions()
    slot = ReleaseSlot(upstream.id, run.run_id, run.finished_at)
    released: list[Run] = []
    for dependent_id in store.dependents_of(upstream.id):
        dependent = _dependent(store, dependent_id, upstream.id)
        if dependent is None or dependent.depends_on is None or run.state not in QUALIFYING[dependent.depends_on.when]:
            continue
        released += _offer(store, queue, dependent, slot, now=now, options=options)
    return released


def release_instant(state: ReleaseState, upstream_ids: list[str]) -> int:
    """The release moment of a full record: the newest finish among the slots (after the last release)."""
    at = max(slot.finished_at for slot in _slots(state, upstream_ids))
    return at if state.released_at is None else max(at, state.released_at + 1)


def is_full(state: ReleaseState, upstream_ids: list[str]) -> bool:
    return all(state.slot(upstream_id) is not None for upstream_id in upstream_ids)


# -- one dependent ------------------------------------------------------------------------------


def _dependent(store: Store, dependent_id: str, upstream_id: str) -> Job | None:
    """The dependent job if it still exists, is not deleted and still depends on ``upstream_id``."""
    try:
        job = store.get_job(dependent_id)
    except JobNotFound:
        return None  # a stale edge: the dependent's creation crashed, or it was purged
    if job.status is JobStatus.DELETED or job.depends_on is None or upstream_id not in job.depends_on.jobs:
        return None
    return job


def _offer(
    store: Store, queue: Queue, dependent: Job, slot: ReleaseSlot, *, now: int, options: ReleaseOptions
) -> list[Run]:
    assert dependent.depends_on is not None
    upstreams = list(dependent.depends_on.jobs)
    released: list[Run] = []
    state = store.get_release(dependent.id)  # read first: a repeated call then writes nothing
    for _ in range(_ROUNDS):
        if is_full(state, upstreams):
            run = _release(store, queue, dependent, state, now=now, options=options)
            if run is not None:
                released.append(run)
            store.complete_release(state, release_instant(state, upstreams))  # False: another caller did
            if slot in state.slots:
                return released  # our run was part of this release
            state = store.get_release(dependent.id)
            continue  # our own run may belong to the next collection
        stale = state.released_at is not None and slot.finished_at <= state.released_at
        if stale or state.slot(slot.upstream_id) is not None:
            return released  # recorded already, or an earlier run of the same upstream holds the slot
        applied, state = store.fill_release(dependent.id, slot)
        if applied and not is_full(state, upstreams):
            return released
    logger.warning("release of %s by %s kept changing; left to a redelivery", dependent.id, slot.run_id)
    return released


def _release(
    store: Store, queue: Queue, dependent: Job, state: ReleaseState, *, now: int, options: ReleaseOptions
) -> Run | None:
    """Insert (idempotently) and send the run a full record releases; None for a paused dependent."""
    assert dependent.depends_on is not None
    upstreams = list(dependent.depends_on.jobs)
    at = release_instant(state, upstreams)
    if dependent.status is not JobStatus.ACTIVE:
        logger.info("dependent %s is %s: release at %d dropped", dependent.id, dependent.status, at)
        return None
    run = Run(
        job_id=dependent.id,
        scheduled_at=at,
        owner=dependent.owner,
        trigger=Trigger.DEPENDENCY,
        released_by=sorted(slot.run_id for slot in _slots(state, upstreams)),
        deadline_at=now + options.dispatch_grace_ms,
        created_at=now,
        expires_at=now // 1000 + options.retention_s,
    )
    if not store.insert_runs([run])[0]:
        run = store.get_run(dependent.id, at)  # inserted by an earlier (crashed or racing) call
    if run.is_open:  # possibly a second message for it: the worker's conditional lease drops duplicates
        long = is_long_run(dependent.timeout_s, options.long_run_after_s)
        queue.send([dispatch_for(run, dependent.jitter_s, now, long_run=long, priority=dependent.priority)])
    return run


def _slots(state: ReleaseState, upstream_ids: list[str]) -> list[ReleaseSlot]:
    slots = [state.slot(upstream_id) for upstream_id in upstream_ids]
    return [slot for slot in slots if slot is not None]
