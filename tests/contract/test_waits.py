"""Where a waiting message waits (``punctual.execution.waits``), on both engines and both worker paths.

A retry's backoff longer than a message is held in flight is re-sent with a delay (so it is not in
flight meanwhile); a backoff longer than a message's delay is parked in the run's row, and the
reaper sends it again before it is due; a crash between any two of those steps loses nothing, and
the duplicate it may leave is harmless (the run's row decides).

moto's SQS runs on real time, so the thresholds are scaled down here (held up to 1 s, re-sent up to
3 s, parked 2 s ahead): the protocol is the same at 60 s / 900 s / 10 min.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution import batch, batch_finish
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.model import AttemptOutcome, Job, RetryPolicy, Run, RunState
from punctual.port import Delivery, Dispatch, Engine, Queue
from punctual.reaping.reaper import ReapOptions, reap_once
from punctual.runs.alerts import LogAlerter
from punctual.runs.retry import Jitter
from tests.contract.factories import SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-waits"
OK = TargetResult(ok=True, status_code=200)
BOOM = TargetResult(ok=False, status_code=503, error="HTTP 503", retryable=True)
WAITS = ExecutionOptions(
    lease_margin_s=1, jitter=Jitter.NONE, hold_max_ms=1_000, parked_lead_ms=2_000, resend_max_ms=3_000
)
REAP = ReapOptions(grace_ms=0, min_age_ms=0)
RECEIVE_VISIBILITY_S = 2  # a message left where it was comes back after this (real seconds on moto)


class Crash(Exception):
    """The worker process dies here."""


class CrashOnDelete:
    """The engine's queue; the worker dies at its first delete (after whatever it sent before)."""

    def __init__(self, inner: Queue) -> None:
        self.inner = inner
        self.sent: list[Dispatch] = []

    def send(self, dispatches: Any) -> None:
        self.sent.extend(dispatches)
        self.inner.send(dispatches)

    def delete(self, receipt: str) -> None:
        raise Crash("before delete")

    def delete_many(self, receipts: Any) -> None:
        raise Crash("before delete_many")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def create_job(engine: Engine, clock: ManualClock, backoff_s: int) -> Job:
    job = make_job(
        OWNER,
        clock,
        shards=engine.store.shards,
        retry=RetryPolicy(backoff_s=backoff_s, max_backoff_s=backoff_s),
        timeout_s=1,
        max_retries=3,
    )
    engine.store.create_job(job)
    return job


def schedule_run(engine: Engine, clock: ManualClock, job: Job) -> Run:
    run = make_run(job, clock.now_ms(), clock)
    assert engine.store.insert_runs([run]) == [True]
    engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at, group=OWNER)])
    return run


def receive(engine: Engine, engine_kind: str, *, expect: int) -> list[Delivery]:
    """``expect`` visible messages (on moto: polling real time for a few seconds)."""
    got: list[Delivery] = []
    for _ in range(1 if expect == 0 else 10):
        got += engine.queue.receive(10, RECEIVE_VISIBILITY_S, 0.0 if engine_kind == "embedded" else 0.5)
        if len(got) >= expect and expect:
            break
    assert len(got) == expect, got
    return got


def stored(engine: Engine, run: Run) -> Run:
    return engine.store.get_run(run.job_id, run.scheduled_at)


def attempt_with(path: str, engine: Engine, clock: ManualClock, queue: Any) -> Callable[[Delivery, TargetResult], Any]:
    """One delivery through the thread worker (``process_delivery``) or the batch steps
    (``batch.prepare`` then ``batch_finish.settle``), with a target that answers ``result``."""

    def thread(delivery: Delivery, result: TargetResult) -> Outcome:
        class Targets:
            def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
                return result

        return process_delivery(
            delivery, store=engine.store, queue=queue, targets=Targets(), clock=clock, worker_id="w1", options=WAITS
        )

    def batched(delivery: Delivery, result: TargetResult) -> Outcome:
        if 0 < delivery.not_before - clock.now_ms() <= WAITS.max_early_ms:  # the worker waits for the instant
            clock.set(delivery.not_before)
        port = batch.Port(engine.store, queue, engine.finish_and_ack, clock, "w1", WAITS, LogAlerter())
        prepared = batch.prepare(port, [delivery])
        if not prepared.leased:
            return prepared.settled[0][1]
        now = clock.now_ms()
        return batch_finish.settle(port, [batch_finish.Done(prepared.leased[0], result, now, now)])[0]

    return thread if path == "thread" else batched


def in_flight(engine: Engine, engine_kind: str) -> int:
    """Messages received and not deleted (what SQS's 120,000 limit counts)."""
    if engine_kind == "aws":
        attributes = engine.queue._client.get_queue_attributes(  # type: ignore[attr-defined]
            QueueUrl=engine.queue.url,  # type: ignore[attr-defined]
            AttributeNames=["ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesNotVisible"])
    db = engine.queue._db  # type: ignore[attr-defined]
    row = db.connection().execute("SELECT count(*) FROM queue WHERE receive_count > 0").fetchone()
    return int(row[0])


PATHS = pytest.mark.parametrize("path", ["thread", "batch"])


@PATHS
def test_a_backoff_longer_than_a_hold_is_resent_with_a_delay_not_held_in_flight(
    engine, engine_kind, clock, elapse, path
):
    # Given a run whose first attempt fails, with a backoff (2 s) longer than a message is held (1 s)
    job = create_job(engine, clock, backoff_s=2)
    run = schedule_run(engine, clock, job)
    attempt = attempt_with(path, engine, clock, engine.queue)
    [delivery] = receive(engine, engine_kind, expect=1)
    assert attempt(delivery, BOOM) is Outcome.RETRYING
    retrying = stored(engine, run)
    assert retrying.state is RunState.RETRYING and retrying.next_attempt_at == clock.now_ms() + 2 * SECOND
    # Then its message is not in flight: it was re-sent with a delay, and the received one deleted
    assert in_flight(engine, engine_kind) == 0
    assert engine.queue.depth() == 1
    receive(engine, engine_kind, expect=0)
    # and the new message comes at the backoff's end, carrying it as not_before, received for the first time
    elapse(2)
    [again] = receive(engine, engine_kind, expect=1)
    assert (again.not_before, again.receive_count) == (retrying.next_attempt_at, 1)
    assert attempt(again, OK) is Outcome.SUCCEEDED
    done = stored(engine, run)
    assert [a.outcome for a in done.attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]
    assert engine.queue.depth() == 0


@PATHS
def test_a_backoff_longer_than_a_delay_is_parked_and_resent_by_the_reaper_in_time(
    engine, engine_kind, clock, elapse, path
):
    # Given a run whose first attempt fails, with a backoff (10 s) longer than a message's delay (3 s)
    job = create_job(engine, clock, backoff_s=10)
    run = schedule_run(engine, clock, job)
    attempt = attempt_with(path, engine, clock, engine.queue)
    [delivery] = receive(engine, engine_kind, expect=1)
    assert attempt(delivery, BOOM) is Outcome.RETRYING
    # Then the run carries the wait: its deadline comes parked_lead_ms before its next attempt,
    # and no message is left at all, in flight or delayed
    parked = stored(engine, run)
    due = parked.next_attempt_at
    assert due == clock.now_ms() + 10 * SECOND and parked.deadline_at == due - 2 * SECOND
    assert engine.queue.depth() == 0
    # The reaper leaves it alone before its deadline
    assert reap_once(engine.store, engine.queue, None, LogAlerter(), clock, options=REAP).redispatched == 0
    # When the reaper passes after its deadline, before it is due
    clock.advance(due - 1_500 - clock.now_ms())
    stats = reap_once(engine.store, engine.queue, None, LogAlerter(), clock, options=REAP)
    # Then it sends its message again, delayed to its next attempt, and moves its deadline past it
    assert stats.redispatched == 1
    assert stored(engine, run).deadline_at == due + REAP.redispatch_grace_ms
    assert reap_once(engine.store, engine.queue, None, LogAlerter(), clock, options=REAP).redispatched == 0
    receive(engine, engine_kind, expect=0)
    elapse(1)
    [again] = receive(engine, engine_kind, expect=1)
    assert (again.not_before, again.receive_count) == (due, 1)
    # and the next attempt begins at its instant (the worker waits out the last half second)
    assert attempt(again, OK) is Outcome.SUCCEEDED
    done = stored(engine, run)
    assert done.attempt == 2 and done.attempts[-1].started_at == due
    assert engine.queue.depth() == 0


@PATHS
def test_a_crash_between_the_resend_and_the_delete_leaves_a_harmless_duplicate(
    engine, engine_kind, clock, elapse, path
):
    # Given a worker that dies after re-sending a failed run's message for its backoff (2 s),
    # before deleting the message it received
    job = create_job(engine, clock, backoff_s=2)
    run = schedule_run(engine, clock, job)
    dying = CrashOnDelete(engine.queue)
    [delivery] = receive(engine, engine_kind, expect=1)
    with pytest.raises(Crash):
        attempt_with(path, engine, clock, dying)(delivery, BOOM)
    assert [d.not_before for d in dying.sent] == [stored(engine, run).next_attempt_at]
    # When both messages come back (the received one after its visibility, the re-sent one after its delay)
    elapse(RECEIVE_VISIBILITY_S)
    both = receive(engine, engine_kind, expect=2)
    assert sorted(d.receive_count for d in both) == [1, 2]
    # Then one brings the next attempt and the other is dropped as a duplicate: one call per attempt
    attempt = attempt_with(path, engine, clock, engine.queue)
    outcomes = sorted(attempt(d, OK) for d in both)
    assert outcomes == sorted([Outcome.SUCCEEDED, Outcome.DUPLICATE])
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 2
    assert [a.outcome for a in done.attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]
    assert engine.queue.depth() == 0


@PATHS
def test_a_crash_before_a_parked_runs_message_is_deleted_loses_nothing(engine, engine_kind, clock, elapse, path):
    # Given a worker that dies after parking a failed run (backoff 10 s), before deleting its message
    job = create_job(engine, clock, backoff_s=10)
    run = schedule_run(engine, clock, job)
    [delivery] = receive(engine, engine_kind, expect=1)
    with pytest.raises(Crash):
        attempt_with(path, engine, clock, CrashOnDelete(engine.queue))(delivery, BOOM)
    due = stored(engine, run).next_attempt_at
    assert due is not None
    # When the message comes back early, it finds the run parked and is deleted (not held in flight)
    elapse(RECEIVE_VISIBILITY_S)
    [back] = receive(engine, engine_kind, expect=1)
    attempt = attempt_with(path, engine, clock, engine.queue)
    assert attempt(back, OK) is Outcome.NOT_READY
    assert engine.queue.depth() == 0
    # Then the reaper sends it again in time, and the run's next attempt runs
    clock.advance(due - 1_000 - clock.now_ms())
    assert reap_once(engine.store, engine.queue, None, LogAlerter(), clock, options=REAP).redispatched == 1
    elapse(1)
    [again] = receive(engine, engine_kind, expect=1)
    assert attempt(again, OK) is Outcome.SUCCEEDED
    assert [a.outcome for a in stored(engine, run).attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]
    assert engine.queue.depth() == 0


def test_a_run_held_longer_than_a_hold_has_its_duplicate_resent_for_the_lease_end(engine, engine_kind, clock):
    # Given a run another worker leased for 5 s, and a duplicate of its message
    job = create_job(engine, clock, backoff_s=1)
    run = schedule_run(engine, clock, job)
    lease = engine.store.lease_run(run.job_id, run.scheduled_at, "w0", clock.now_ms(), 5 * SECOND)
    assert lease.run is not None and lease.run.lease_expires_at is not None
    [delivery] = receive(engine, engine_kind, expect=1)
    # When a worker receives the duplicate
    assert attempt_with("batch", engine, clock, engine.queue)(delivery, OK) is Outcome.HELD
    # Then it is not held in flight until the lease ends: it is re-sent for then (after the longest delay)
    assert in_flight(engine, engine_kind) == 0
    receive(engine, engine_kind, expect=0)
    assert stored(engine, run).worker_id == "w0"
