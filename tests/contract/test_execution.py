"""The worker's per-message protocol (``punctual.execution.delivery``) and the reaper, on both engines.

Targets are scripted test doubles here (the real HTTP and AWS targets are tested in
tests/unit/test_targets.py); the store and the queue are the real engines. Store time is the
ManualClock; moto's SQS visibility runs on real time, so backoffs are 1 s and ``elapse`` sleeps
for real on ``aws`` only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.model import AttemptOutcome, Job, JobStatus, RetryPolicy, Run, RunState
from punctual.port import Alert, Delivery, Dispatch, Engine, RunChange
from punctual.reaping.reaper import ReapOptions, reap_once
from punctual.runs.alerts import LogAlerter
from punctual.runs.retry import Jitter
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-exec"
OK = TargetResult(ok=True, status_code=200, excerpt="fine")
BOOM = TargetResult(ok=False, status_code=500, error="HTTP 500", excerpt="boom", retryable=True)
GONE = TargetResult(ok=False, status_code=410, error="HTTP 410", retryable=False)
OPTIONS = ExecutionOptions(lease_margin_s=1, jitter=Jitter.NONE)

Script = TargetResult | Callable[[Job, Run, int], TargetResult]


class FakeTargets:
    """Answers attempt n with ``script[n-1]`` (the last entry repeats); a callable is called."""

    def __init__(self, *script: Script) -> None:
        self.script = list(script)
        self.calls: list[int] = []

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        self.calls.append(attempt)
        item = self.script[min(len(self.calls), len(self.script)) - 1]
        return item(job, run, attempt) if callable(item) else item


class RecordingAlerter(LogAlerter):
    def __init__(self) -> None:
        self.published: list[Alert] = []

    def publish(self, alert: Alert) -> None:
        self.published.append(alert)
        super().publish(alert)


@pytest.fixture
def alerter() -> RecordingAlerter:
    return RecordingAlerter()


def create_job(engine: Engine, clock: ManualClock, **fields: Any) -> Job:
    fields.setdefault("retry", RetryPolicy(backoff_s=1, max_backoff_s=1))
    fields.setdefault("timeout_s", 5)
    job = make_job(OWNER, clock, shards=engine.store.shards, **fields)
    engine.store.create_job(job)
    return job


def schedule_run(engine: Engine, clock: ManualClock, job: Job, *, send: bool = True, **fields: Any) -> Run:
    """Insert a run of ``job`` at now (and send its dispatch unless ``send`` is False)."""
    run = make_run(job, clock.now_ms(), clock, **fields)
    assert engine.store.insert_runs([run]) == [True]
    if send:
        engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    return run


def receive_one(engine: Engine, engine_kind: str, queue: Any = None, visibility_s: int = 60) -> Delivery:
    """The next visible message (on moto: polling real time for up to ~5 s)."""
    queue = queue or engine.queue
    for _ in range(10):
        got = queue.receive(1, visibility_s, 0.0 if engine_kind == "embedded" else 1.0)
        if got:
            return got[0]
    raise AssertionError(f"no message on {queue.name}")


def assert_no_message(engine: Engine, engine_kind: str) -> None:
    assert engine.queue.receive(10, 60) == []  # deletes and hides take effect at once on both engines


def process(engine: Engine, clock: ManualClock, delivery: Delivery, targets: Any, alerter: Any, **kw: Any) -> Outcome:
    return process_delivery(
        delivery,
        store=engine.store,
        queue=engine.queue,
        targets=targets,
        clock=clock,
        worker_id=kw.pop("worker_id", "w1"),
        options=kw.pop("options", OPTIONS),
        alerter=alerter,
        metrics=kw.pop("metrics", None),
    )


def stored(engine: Engine, run: Run) -> Run:
    return engine.store.get_run(run.job_id, run.scheduled_at)


# -- the happy path and retries -------------------------------------------------------------------


def test_success_finishes_the_run_and_deletes_the_message(engine, engine_kind, clock, alerter):
    # Given a scheduled run with its dispatch
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job)
    # When a worker handles the message and the target accepts the run
    outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter)
    # Then the run succeeded on attempt 1 with its log, and no message is left
    assert outcome is Outcome.SUCCEEDED
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 1 and done.finished_at == clock.now_ms()
    assert [(a.number, a.outcome, a.status_code, a.worker_id, a.response_excerpt) for a in done.attempts] == [
        (1, AttemptOutcome.SUCCEEDED, 200, "w1", "fine")
    ]
    assert done.worker_id is None and done.lease_expires_at is None
    assert_no_message(engine, engine_kind)
    assert alerter.published == []


def test_a_failed_attempt_is_retried_with_the_same_message_after_the_backoff(
    engine, engine_kind, clock, alerter, elapse
):
    job = create_job(engine, clock, max_retries=3)
    run = schedule_run(engine, clock, job)
    targets = FakeTargets(BOOM, OK)
    # When the first attempt fails
    assert process(engine, clock, receive_one(engine, engine_kind), targets, alerter) is Outcome.RETRYING
    # Then the run is retrying with a backoff of backoff_s, and the message is hidden for it
    retrying = stored(engine, run)
    assert retrying.state is RunState.RETRYING and retrying.next_attempt_at == clock.now_ms() + 1 * SECOND
    assert retrying.attempts[-1].outcome is AttemptOutcome.FAILED and retrying.attempts[-1].error == "HTTP 500"
    assert engine.queue.receive(1, 60) == []
    # When the backoff has passed, the same message comes back and the second attempt succeeds
    elapse(1.1)
    assert process(engine, clock, receive_one(engine, engine_kind), targets, alerter) is Outcome.SUCCEEDED
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 2
    assert [a.outcome for a in done.attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]
    assert targets.calls == [1, 2]
    assert_no_message(engine, engine_kind)


def test_a_poison_job_is_dead_after_max_retries_plus_one_attempts_with_one_alert(
    engine, engine_kind, clock, alerter, elapse
):
    job = create_job(engine, clock, max_retries=2)
    run = schedule_run(engine, clock, job)
    targets = FakeTargets(BOOM)
    outcomes = [process(engine, clock, receive_one(engine, engine_kind), targets, alerter)]
    for _ in range(2):
        elapse(1.1)
        outcomes.append(process(engine, clock, receive_one(engine, engine_kind), targets, alerter))
    assert outcomes == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DEAD]
    dead = stored(engine, run)
    assert dead.state is RunState.DEAD and dead.attempt == 3 and dead.finished_at is not None
    assert [a.number for a in dead.attempts] == [1, 2, 3]
    assert "dead after 3 attempts" in (dead.note or "")
    # exactly one alert, recorded and published
    assert [(a.run_id, a.owner) for a in engine.store.list_alerts(OWNER)] == [(run.run_id, OWNER)]
    assert [a.run_id for a in alerter.published] == [run.run_id]
    assert targets.calls == [1, 2, 3]
    assert_no_message(engine, engine_kind)


def test_a_non_retryable_failure_fails_the_run_at_once_and_alerts(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock, max_retries=5)
    run = schedule_run(engine, clock, job)
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(GONE), alerter) is Outcome.FAILED
    failed = stored(engine, run)
    assert failed.state is RunState.FAILED and failed.attempt == 1
    assert "not retryable" in (failed.note or "")
    assert len(engine.store.list_alerts(OWNER)) == 1
    assert_no_message(engine, engine_kind)


def test_a_hanging_target_is_cut_at_timeout_and_recorded_as_timeout(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock, timeout_s=1, max_retries=1)
    run = schedule_run(engine, clock, job)
    release = threading.Event()

    def hang(job: Job, run: Run, attempt: int) -> TargetResult:
        release.wait(10)
        return OK

    started = time.monotonic()
    try:
        outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(hang), alerter)
    finally:
        release.set()
    assert 0.9 <= time.monotonic() - started < 3
    assert outcome is Outcome.RETRYING
    attempt = stored(engine, run).attempts[-1]
    assert attempt.outcome is AttemptOutcome.TIMEOUT and "within 1 s" in (attempt.error or "")


# -- duplicates, takeovers, lost leases ---------------------------------------------------------------


def test_a_duplicate_delivery_is_held_while_running_and_dropped_once_finished(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job)
    engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])  # a second message for the run
    first = receive_one(engine, engine_kind)
    second = receive_one(engine, engine_kind)
    seen: list[Outcome] = []

    def meanwhile(job: Job, run: Run, attempt: int) -> TargetResult:
        seen.append(process(engine, clock, second, FakeTargets(OK), alerter, worker_id="w2"))
        return OK

    assert process(engine, clock, first, FakeTargets(meanwhile), alerter) is Outcome.SUCCEEDED
    assert seen == [Outcome.HELD]  # hidden until the lease ends, not executed twice
    assert process(engine, clock, second, FakeTargets(OK), alerter, worker_id="w2") is Outcome.DUPLICATE
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 1 and len(done.attempts) == 1


def test_a_slow_worker_whose_lease_was_taken_over_cannot_overwrite_the_newer_attempt(
    engine, engine_kind, clock, alerter
):
    job = create_job(engine, clock, timeout_s=30, max_retries=3)
    run = schedule_run(engine, clock, job)
    started, release = threading.Event(), threading.Event()

    def slow_then_fail(job: Job, run: Run, attempt: int) -> TargetResult:
        started.set()
        release.wait(10)
        return BOOM

    result: list[Outcome] = []
    slow = threading.Thread(
        target=lambda: result.append(
            process(
                engine, clock, receive_one(engine, engine_kind), FakeTargets(slow_then_fail), alerter, worker_id="slow"
            )
        )
    )
    slow.start()
    try:
        assert started.wait(10)
        # When the slow worker's lease (31 s) expires and the run is redelivered to another worker
        clock.advance(32 * SECOND)
        engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
        fast = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter, worker_id="fast")
    finally:
        release.set()
        slow.join(10)
    # Then the takeover succeeded as attempt 2, and the slow worker's late failure was refused
    assert fast is Outcome.SUCCEEDED
    assert result == [Outcome.LEASE_LOST]
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 2
    assert [(a.number, a.worker_id, a.outcome) for a in done.attempts] == [
        (1, "slow", AttemptOutcome.LEASE_EXPIRED),
        (2, "fast", AttemptOutcome.SUCCEEDED),
    ]


def test_a_run_cancelled_while_its_target_runs_keeps_the_attempt_in_its_log(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock, timeout_s=30)
    run = schedule_run(engine, clock, job)
    started, release = threading.Event(), threading.Event()

    def slow_ok(job: Job, run: Run, attempt: int) -> TargetResult:
        started.set()
        release.wait(10)
        return OK

    result: list[Outcome] = []
    worker = threading.Thread(
        target=lambda: result.append(
            process(engine, clock, receive_one(engine, engine_kind), FakeTargets(slow_ok), alerter, worker_id="w")
        )
    )
    worker.start()
    try:
        assert started.wait(10)
        # When the run is cancelled under the running attempt (as overlap=replace does)
        running = stored(engine, run)
        now = clock.now_ms()
        cancel = RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note="replaced")
        engine.store.transition_run(running, cancel)
    finally:
        release.set()
        worker.join(10)
    # Then the worker's finish is refused, the run stays cancelled, and its log shows the call
    assert result == [Outcome.LEASE_LOST]
    done = stored(engine, run)
    assert (done.state, done.note) == (RunState.CANCELLED, "replaced")
    assert [(a.number, a.worker_id, a.outcome) for a in done.attempts] == [(1, "w", AttemptOutcome.SUCCEEDED)]


def test_a_worker_that_loses_its_lease_at_a_heartbeat_abandons_the_attempt(engine, engine_kind, clock, alerter):
    # lease = timeout 3 s + margin 1 s: heartbeats every 1.33 s (real time)
    job = create_job(engine, clock, timeout_s=3)
    run = schedule_run(engine, clock, job)
    release = threading.Event()
    taken_over: list[Outcome] = []

    def hang_while_taken_over(job: Job, run: Run, attempt: int) -> TargetResult:
        clock.advance(5 * SECOND)  # the lease expires...
        engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
        delivery = receive_one(engine, engine_kind)
        taken_over.append(process(engine, clock, delivery, FakeTargets(OK), alerter, worker_id="w2"))
        release.wait(10)  # ...and this attempt hangs on
        return BOOM

    started = time.monotonic()
    try:
        outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(hang_while_taken_over), alerter)
    finally:
        release.set()
    assert outcome is Outcome.LEASE_LOST and taken_over == [Outcome.SUCCEEDED]
    assert time.monotonic() - started < 3  # abandoned at the first heartbeat, not at the timeout
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.attempt == 2


def test_heartbeats_extend_the_lease_while_the_target_runs(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock, timeout_s=3)  # lease 4 s, a heartbeat every 1.33 s
    schedule_run(engine, clock, job)
    seen: list[int | None] = []

    def slow(job: Job, run: Run, attempt: int) -> TargetResult:
        clock.advance(2 * SECOND)
        time.sleep(1.6)  # one heartbeat happens meanwhile
        seen.append(stored(engine, run).lease_expires_at)
        return OK

    start = clock.now_ms()
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(slow), alerter) is Outcome.SUCCEEDED
    assert seen == [start + 2 * SECOND + 4 * SECOND]


# -- messages that lease nothing ----------------------------------------------------------------------


def test_a_message_for_a_deleted_job_cancels_its_run(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job)
    engine.store.update_job(job.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), job.version)
    targets = FakeTargets(OK)
    assert process(engine, clock, receive_one(engine, engine_kind), targets, alerter) is Outcome.CANCELLED
    assert stored(engine, run).state is RunState.CANCELLED and targets.calls == []
    assert_no_message(engine, engine_kind)


def test_a_message_that_names_no_run_is_dropped(engine, engine_kind, clock, alerter):
    engine.queue.send([Dispatch("not-a-run-id", not_before=clock.now_ms())])
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.INVALID
    assert_no_message(engine, engine_kind)


def test_a_message_far_too_early_is_hidden_again_without_leasing(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    engine.queue.send([Dispatch(run.run_id, not_before=clock.now_ms() + 5 * SECOND)])
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.NOT_READY
    assert stored(engine, run).state is RunState.SCHEDULED


def test_a_message_slightly_early_waits_for_its_instant(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    not_before = clock.now_ms() + 700
    engine.queue.send([Dispatch(run.run_id, not_before=not_before)])
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.SUCCEEDED
    assert stored(engine, run).attempts[0].started_at == not_before


def test_a_dead_run_found_by_a_redelivery_gets_its_missing_alert(engine, engine_kind, clock, alerter):
    # Given a worker crashed after marking the run dead but before alerting (the message remained)
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, state=RunState.DEAD, note="dead after 4 attempts")
    # When the message comes back
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.DUPLICATE
    # Then the owner is alerted once, and only once however often it comes back
    engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.DUPLICATE
    assert [a.run_id for a in alerter.published] == [run.run_id]
    assert_no_message(engine, engine_kind)


# -- the reaper --------------------------------------------------------------------------------------------


def reap(engine: Engine, clock: ManualClock, alerter: Any):
    return reap_once(engine.store, engine.queue, engine.dead_letters, alerter, clock, options=ReapOptions())


def test_a_lost_dispatch_is_resent_by_the_reaper_and_the_run_completes(engine, engine_kind, clock, alerter):
    # Given a run that was inserted but whose message was lost
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    # Before its deadline (+ grace) the reaper leaves it alone
    assert reap(engine, clock, alerter).redispatched == 0
    clock.advance(3 * MINUTE)
    stats = reap(engine, clock, alerter)
    assert (stats.examined, stats.redispatched) == (1, 1)
    assert stored(engine, run).deadline_at == clock.now_ms() + ReapOptions().redispatch_grace_ms
    assert reap(engine, clock, alerter).redispatched == 0  # its deadline moved: not resent again
    # Then a worker completes it
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.SUCCEEDED
    assert stored(engine, run).state is RunState.SUCCEEDED


@pytest.mark.parametrize("max_retries", [1, 0])
def test_a_run_whose_worker_vanished_is_requeued_or_buried(engine, engine_kind, clock, alerter, max_retries):
    # Given a worker leased the run, then vanished, and its message is gone too
    job = create_job(engine, clock, max_retries=max_retries)
    run = schedule_run(engine, clock, job, send=False)
    engine.store.lease_run(run.job_id, run.scheduled_at, "ghost", clock.now_ms(), 6 * SECOND)
    clock.advance(2 * MINUTE)
    stats = reap(engine, clock, alerter)
    after = stored(engine, run)
    assert after.attempts[-1].outcome is AttemptOutcome.LEASE_EXPIRED and after.attempts[-1].worker_id == "ghost"
    if max_retries:
        # Then it is retried at once: a worker completes it as attempt 2
        assert stats.requeued == 1 and after.state is RunState.RETRYING
        outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter)
        assert outcome is Outcome.SUCCEEDED and stored(engine, run).attempt == 2
        assert alerter.published == []
    else:
        # Then, out of retries, it is dead and its owner alerted once
        assert stats.dead == 1 and stats.alerts == 1 and after.state is RunState.DEAD
        assert reap(engine, clock, alerter).dead == 0
        assert [a.run_id for a in alerter.published] == [run.run_id]


def test_a_dead_lettered_message_marks_its_run_dead_with_one_alert(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    engine.dead_letters.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    stats = reap(engine, clock, alerter)
    assert (stats.dead_letters, stats.dead, stats.alerts) == (1, 1, 1)
    dead = stored(engine, run)
    assert dead.state is RunState.DEAD and dead.attempts[-1].outcome is AttemptOutcome.DEAD_LETTERED
    # a second copy of the message changes nothing and alerts nobody again
    engine.dead_letters.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    stats = reap(engine, clock, alerter)
    assert (stats.dead_letters, stats.dead) == (1, 0)
    assert len(engine.store.list_alerts(OWNER)) == 1 and len(alerter.published) == 1
    assert engine.dead_letters.receive(10, 60) == []


def test_the_reaper_cancels_open_runs_of_deleted_jobs(engine, engine_kind, clock, alerter):
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    engine.store.update_job(job.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), job.version)
    clock.advance(3 * MINUTE)
    assert reap(engine, clock, alerter).cancelled == 1
    assert stored(engine, run).state is RunState.CANCELLED
