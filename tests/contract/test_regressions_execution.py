"""Regressions on the worker/reaper path, on both engines (each failed while its bug existed)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from punctual.clock import ManualClock
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets import TargetResult
from punctual.model import Job, RetryPolicy, Run, RunState
from punctual.port import Delivery, Dispatch, Engine, Queue
from punctual.runs.retry import Jitter
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-review"
OPTIONS = ExecutionOptions(lease_margin_s=1, jitter=Jitter.NONE)


class StubQueue(Queue):
    """Records what the worker does with its message (no real queue timing involved)."""

    name = "stub"

    def __init__(self) -> None:
        self.extended: list[int] = []
        self.deleted = 0

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        pass

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        return []

    def extend(self, receipt: str, visibility_s: int) -> None:
        self.extended.append(visibility_s)

    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        self.extended.extend(visibility_s for _ in receipts)

    def delete(self, receipt: str) -> None:
        self.deleted += 1

    def delete_many(self, receipts: Sequence[str]) -> None:
        self.deleted += len(receipts)

    def depth(self) -> int:
        return 0


class CountingTargets:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        self.calls.append(attempt)
        return TargetResult(ok=False, status_code=500, error="HTTP 500", retryable=True)


def test_a_job_that_crashes_its_workers_is_not_executed_beyond_max_retries_plus_one(
    engine: Engine, clock: ManualClock
) -> None:
    """A takeover of an expired lease increments the attempt whatever max_retries says; the worker
    must then bury the run instead of running the target again, or a run that kills its workers
    (OOM, segfault, Lambda timeout) would run until the queue's max_receives (100) dead-letters it.
    The reaper applies max_retries to the very same situation."""
    job = make_job(OWNER, clock, shards=engine.store.shards, max_retries=1, timeout_s=5,
                   retry=RetryPolicy(backoff_s=1, max_backoff_s=1))  # fmt: skip
    engine.store.create_job(job)
    run = make_run(job, clock.now_ms(), clock)
    assert engine.store.insert_runs([run]) == [True]

    # attempts 1 and 2 (= max_retries + 1) each killed their worker in the middle of the target
    for worker in ("crashed-1", "crashed-2"):
        assert engine.store.lease_run(job.id, run.scheduled_at, worker, clock.now_ms(), 6 * SECOND).run is not None
        clock.advance(7 * SECOND)
    assert engine.store.get_run(job.id, run.scheduled_at).attempt == 2

    # the message comes back once more (receive count 3 of 25)
    targets = CountingTargets()
    delivery = Delivery(run.run_id, run.scheduled_at, receipt="r", receive_count=3)
    outcome = process_delivery(
        delivery, store=engine.store, queue=StubQueue(), targets=targets, clock=clock, worker_id="w3", options=OPTIONS
    )
    after = engine.store.get_run(job.id, run.scheduled_at)
    assert targets.calls == [], f"attempt {targets.calls} executed the target after max_retries + 1 attempts"
    assert after.state is RunState.DEAD, (outcome, after.state, after.attempt)


def test_the_reaper_buries_the_same_situation(engine: Engine, clock: ManualClock) -> None:
    """The counterpart: the reaper treats the lost attempt as a used retry, as the worker now does."""
    from punctual.reaping.reaper import reap_once
    from punctual.runs.alerts import LogAlerter

    job = make_job(OWNER, clock, shards=engine.store.shards, max_retries=1, timeout_s=5)
    engine.store.create_job(job)
    run = make_run(job, clock.now_ms(), clock)
    engine.store.insert_runs([run])
    for worker in ("crashed-1", "crashed-2"):
        engine.store.lease_run(job.id, run.scheduled_at, worker, clock.now_ms(), 6 * SECOND)
        clock.advance(7 * SECOND)
    clock.advance(3 * MINUTE)
    reap_once(engine.store, StubQueue(), None, LogAlerter(), clock)
    assert engine.store.get_run(job.id, run.scheduled_at).state is RunState.DEAD
