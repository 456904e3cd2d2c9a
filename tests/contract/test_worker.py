"""The async, batched worker (``punctual.execution.worker``) on both engines.

Targets are scripted coroutines (the real HTTP client is tested in tests/unit/test_async_targets.py);
the store and the queue are the real engines, through the batched port methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution.loop import Tuning
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.execution.worker import Worker
from punctual.model import AttemptOutcome, Job, JobStatus, RetryPolicy, Run, RunState
from punctual.port import Delivery, Dispatch, Engine
from punctual.runs.cancel import cancellation
from punctual.runs.retry import Jitter
from tests.contract.factories import drain, make_job, make_run
from tests.contract.test_execution import RecordingAlerter

pytestmark = pytest.mark.contract

OWNER = "owner-async"
OK = TargetResult(ok=True, status_code=200, excerpt="fine")
BOOM = TargetResult(ok=False, status_code=500, error="HTTP 500", retryable=True)
OPTIONS = ExecutionOptions(lease_margin_s=1, jitter=Jitter.NONE, min_heartbeat_s=0.2)


class Scripted:
    """Answers every attempt with ``result`` after ``delay_s`` (a coroutine: nothing blocks the loop)."""

    def __init__(self, result: TargetResult = OK, delay_s: float = 0.0) -> None:
        self.result, self.delay_s = result, delay_s
        self.calls: list[tuple[str, int]] = []
        self.cancelled = 0

    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        self.calls.append((run.run_id, attempt))
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.result

    def close(self) -> None:
        pass


def new_runs(engine: Engine, clock: ManualClock, count: int, **job_fields: Any) -> list[Run]:
    job_fields.setdefault("retry", RetryPolicy(backoff_s=1, max_backoff_s=1))
    job_fields.setdefault("timeout_s", 5)
    runs = []
    for _ in range(count):
        job = make_job(OWNER, clock, shards=engine.store.shards, **job_fields)
        engine.store.create_job(job)
        runs.append(make_run(job, clock.now_ms(), clock))
    assert engine.store.insert_runs(runs) == [True] * count
    engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at) for run in runs])
    return runs


def worker(engine: Engine, clock: ManualClock, targets: Scripted, alerter: Any = None) -> Worker:
    return Worker(engine, clock, targets=lambda: targets, options=OPTIONS, alerter=alerter, worker_id="w1")


def process(w: Worker, deliveries: list[Delivery]) -> list[Any]:
    async def go() -> list[Any]:
        async with w.session():
            return await w.process(deliveries)

    return asyncio.run(go())


def received(engine: Engine, count: int) -> list[Delivery]:
    got = drain(engine.queue, visibility_s=60)
    assert len(got) == count
    return got


def stored(engine: Engine, run: Run) -> Run:
    return engine.store.get_run(run.job_id, run.scheduled_at)


def process_cancelling_under_it(
    w: Worker, engine: Engine, clock: ManualClock, run: Run, deliveries: list[Delivery]
) -> list[Any]:
    """``w.process(deliveries)`` while ``run`` is cancelled under it as soon as it is leased (the
    waits bounded: 5 s for the lease, 15 s for the outcome)."""

    async def go() -> list[Any]:
        async with w.session():
            task = asyncio.ensure_future(w.process(deliveries))
            for _ in range(100):  # wait until it is leased, then cancel the run under it
                await asyncio.sleep(0.05)
                if stored(engine, run).state is RunState.RUNNING:
                    break
            engine.store.transition_run(stored(engine, run), cancellation(clock.now_ms(), "replaced"))
            return await asyncio.wait_for(task, 15)

    return asyncio.run(go())


def test_a_batch_succeeds_with_one_coroutine_per_run_and_its_messages_are_deleted(engine, clock):
    runs = new_runs(engine, clock, 5)
    targets = Scripted(OK, delay_s=0.05)
    outcomes = process(worker(engine, clock, targets), received(engine, 5))
    assert outcomes == [Outcome.SUCCEEDED] * 5
    assert sorted(targets.calls) == sorted((run.run_id, 1) for run in runs)
    for run in runs:
        done = stored(engine, run)
        assert done.state is RunState.SUCCEEDED and done.started_at is not None
        assert done.started_at >= done.scheduled_at
        assert [(a.number, a.outcome, a.worker_id) for a in done.attempts] == [(1, AttemptOutcome.SUCCEEDED, "w1")]
    assert drain(engine.queue) == []


def test_a_failed_attempt_keeps_its_message_hidden_for_the_backoff(engine, clock, elapse):
    [run] = new_runs(engine, clock, 1, max_retries=2)
    assert process(worker(engine, clock, Scripted(BOOM)), received(engine, 1)) == [Outcome.RETRYING]
    retrying = stored(engine, run)
    assert retrying.state is RunState.RETRYING and retrying.next_attempt_at == clock.now_ms() + 1000
    assert drain(engine.queue) == []  # hidden for the backoff
    elapse(1.2)
    again = received(engine, 1)
    assert process(worker(engine, clock, Scripted(OK)), again) == [Outcome.SUCCEEDED]
    assert stored(engine, run).attempt == 2


def test_exhausted_retries_end_dead_and_alert_the_owner_once(engine, clock):
    [run] = new_runs(engine, clock, 1, max_retries=0)
    alerter = RecordingAlerter()
    assert process(worker(engine, clock, Scripted(BOOM), alerter), received(engine, 1)) == [Outcome.DEAD]
    assert stored(engine, run).state is RunState.DEAD
    assert [a.run_id for a in alerter.published] == [run.run_id]
    assert drain(engine.queue) == []


def test_runs_of_deleted_jobs_are_cancelled_and_bad_messages_dropped(engine, clock):
    [run] = new_runs(engine, clock, 1)
    job = engine.store.get_job(run.job_id)
    engine.store.update_job(job.model_copy(update={"status": JobStatus.DELETED}), job.version)
    engine.queue.send([Dispatch("not-a-run-id", clock.now_ms())])
    targets = Scripted(OK)
    outcomes = process(worker(engine, clock, targets), sorted(received(engine, 2), key=lambda d: d.run_id))
    assert sorted(outcomes) == sorted([Outcome.CANCELLED, Outcome.INVALID])
    assert targets.calls == [] and stored(engine, run).state is RunState.CANCELLED
    assert drain(engine.queue) == []


def test_a_second_delivery_of_a_held_run_is_hidden_not_executed(engine, clock):
    [run] = new_runs(engine, clock, 1)
    first = received(engine, 1)
    engine.store.lease_run(run.job_id, run.scheduled_at, "other", clock.now_ms(), 60_000)
    targets = Scripted(OK)
    assert process(worker(engine, clock, targets), first) == [Outcome.HELD]
    assert targets.calls == [] and stored(engine, run).worker_id == "other"


def test_a_lease_lost_while_running_abandons_the_attempt_without_writing(engine, clock):
    # Given a run whose target takes longer than a heartbeat interval (lease 6 s: a beat every 2 s)
    [run] = new_runs(engine, clock, 1)
    targets = Scripted(OK, delay_s=10)
    w = worker(engine, clock, targets)
    deliveries = received(engine, 1)

    # When the next heartbeat finds the lease gone
    assert process_cancelling_under_it(w, engine, clock, run, deliveries) == [Outcome.LEASE_LOST]
    # Then the target call was abandoned and the cancelled run is untouched
    assert targets.cancelled == 1
    assert stored(engine, run).state is RunState.CANCELLED


@contextlib.contextmanager
def serving(w: Worker) -> Iterator[threading.Event]:
    """``w.run`` on a thread of its own; on exit it is stopped and must have returned (30 s at most)."""
    stop = threading.Event()
    thread = threading.Thread(target=w.run, args=(stop,))
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def wait_for_successes(w: Worker, count: int, stop: threading.Event) -> None:
    """Until ``w`` has executed ``count`` runs successfully (bounded: up to 30 s on moto)."""
    for _ in range(300):
        if w.outcomes[Outcome.SUCCEEDED] == count:
            return
        stop.wait(0.1)


def test_serve_receives_executes_and_stops_gracefully(engine, engine_kind, clock):
    runs = new_runs(engine, clock, 12)
    targets = Scripted(OK, delay_s=0.01)
    tuning = Tuning(max_in_flight=4, receive_batch=3, receivers=2, wait_s=0.2)
    w = Worker(engine, clock, targets=lambda: targets, options=OPTIONS, tuning=tuning, worker_id="w1")
    with serving(w) as stop:
        wait_for_successes(w, len(runs), stop)
    assert w.outcomes[Outcome.SUCCEEDED] == len(runs) and w.errors == 0
    assert all(stored(engine, run).state is RunState.SUCCEEDED for run in runs)


def test_first_attempts_report_their_start_lateness(engine, clock):
    from punctual import metrics as m
    from punctual.metrics import InMemoryMetrics

    new_runs(engine, clock, 2)
    clock.advance(250)  # leased 250 ms after their instant
    sink = InMemoryMetrics()
    w = Worker(engine, clock, targets=lambda: Scripted(OK), options=OPTIONS, worker_id="w1", metrics=sink)
    assert process(w, received(engine, 2)) == [Outcome.SUCCEEDED] * 2
    assert list(sink.samples[m.START_LATENESS_MS]) == [250, 250]
