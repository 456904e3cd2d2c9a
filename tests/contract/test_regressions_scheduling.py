"""Regressions on the claim/planning path, on both engines (each failed while its bug existed)."""

from __future__ import annotations

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.model import Job, Overlap, RunState
from punctual.port import Engine, LeaseOutcome, RunQuery
from punctual.scheduling.scheduler import Scheduler
from tests.contract.factories import MINUTE, make_job

pytestmark = pytest.mark.contract


def _next_minute(ms: int) -> int:
    return (ms // MINUTE + 1) * MINUTE


def _job(engine: Engine, clock: ManualClock, **fields: object) -> Job:
    job = make_job("owner-review", clock, shards=engine.store.shards, **fields)  # type: ignore[arg-type]
    engine.store.create_job(job)
    return job


def test_overlap_forbid_keeps_forbidding_while_the_first_run_is_still_open(engine: Engine, clock: ManualClock) -> None:
    """claim.py:_apply_overlap compared against job.last_run_at, but planning.plan advanced
    last_run_at to the *skipped* (cancelled) run, so the next tick dispatched a new run although
    the original one was still running. The decision now happens at each run's lease, which looks
    past skipped runs to the one still open."""
    due = _next_minute(clock.now_ms())
    job = _job(engine, clock, schedule="* * * * *", next_run_at=due, overlap=Overlap.FORBID)
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics())
    clock.set(due)
    scheduler.tick()
    lease = engine.store.lease_run(job.id, due, "worker-1", clock.now_ms(), 60 * MINUTE)  # a long run
    assert lease.outcome is LeaseOutcome.LEASED

    for k in (1, 2):
        clock.set(due + k * MINUTE)
        scheduler.tick()
        at = due + k * MINUTE
        skipped = engine.store.lease_run(job.id, at, f"worker-{k}", at, MINUTE, overlap=Overlap.FORBID)
        assert skipped.outcome is LeaseOutcome.SKIPPED

    assert engine.store.get_run(job.id, due).state is RunState.RUNNING  # still running
    open_runs = [
        r for r in engine.store.list_runs(job.id, RunQuery(limit=50)).items if r.state is not RunState.CANCELLED
    ]
    assert [r.scheduled_at for r in open_runs] == [due], (
        "overlap=forbid started a second run while the first was still running: "
        f"{[(r.scheduled_at - due, r.state.value) for r in open_runs]}"
    )
