"""The confirm merged into the finish, on both engines (``Finish.confirm``, ``execution.reserving``).

A pre-leasing worker reserves a run before its instant and calls it at the instant; a call answered
before the confirm batch goes out is finished by one write that also confirms the attempt (the run
still scheduled, reserved by this worker at the attempt seen); a call still in flight is confirmed,
then finished, as before. A reservation lost meanwhile refuses the write: nothing is written, the
run comes back and is called again, and only the calls whose attempt was written are counted
(invariant (a), docs/execution.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from punctual import rules
from punctual.execution import batch, batch_finish, reserving
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets.types import TargetResult
from punctual.model import RunState
from punctual.port import Dispatch, Finish, LeaseOutcome, LeaseRequest, RunChange
from punctual.runs.alerts import LogAlerter
from tests.contract.factories import SECOND, attempt, drain, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-confirmed-finish"
OK = TargetResult(ok=True, status_code=200, excerpt="fine")


class Writes:
    """The store's run writes as the worker makes them: (method, how many items), in order."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.log = engine, []

    def store(self) -> Any:
        log, store = self.log, self.engine.store

        class Counted:
            def __getattr__(self, name: str) -> Any:
                method = getattr(store, name)
                if name not in {"lease_runs", "reserve_runs", "finish_runs", "heartbeat_runs"}:
                    return method
                return lambda items, *args: log.append((name, len(items))) or method(items, *args)

        return Counted()

    def complete(self, finishes: Any) -> Any:
        self.log.append(("finish_and_ack", [f.confirm for f in finishes]))
        return self.engine.finish_and_ack(finishes)


def _held(engine, clock, count: int, worker: str = "w1"):
    """``count`` runs of fresh jobs due 2 s from now, received, reserved by ``worker`` and begun at their instant."""
    store = engine.store
    at = clock.now_ms() + 2 * SECOND
    jobs = [make_job(OWNER, clock, shards=store.shards) for _ in range(count)]
    for job in jobs:
        store.create_job(job)
    runs = [make_run(job, at, clock) for job in jobs]
    assert store.insert_runs(runs) == [True] * count
    engine.queue.send([Dispatch(run.run_id, at) for run in runs])
    writes = Writes(engine)
    options = ExecutionOptions(lease_margin_s=1, prelease_s=2)
    port = batch.Port(writes.store(), engine.queue, writes.complete, clock, worker, options, LogAlerter())
    holding = reserving.hold_and_reserve(port, drain(engine.queue), instant=at)
    assert len(holding.reserved) == count
    clock.advance(2 * SECOND - reserving.BEGIN_AHEAD_MS)
    reserved = [(d, holding.reserved[d.receipt]) for d in holding.deliveries]
    begun = reserving.begin_reserved(port, reserved, holding.jobs, at=at)
    assert len(begun.calls) == count and begun.now == at
    clock.advance(reserving.BEGIN_AHEAD_MS)
    writes.log.clear()  # what follows the reservation
    return port, writes, begun, at


def test_an_answer_before_the_confirm_is_one_write_and_one_after_it_two(engine, clock):
    # Given two runs reserved by w1 and called at their instant
    store = engine.store
    port, writes, begun, at = _held(engine, clock, 3)
    first, second, third = begun.calls
    # When the first call's answer is in before the confirm batch goes out
    clock.advance(100)
    [outcome] = batch_finish.settle(port, [batch_finish.Done(first, OK, at, at + 100, confirm=True)])
    # Then one write confirms and finishes it: succeeded at attempt 1, started at the instant, its
    # record kept, as the confirm then the finish would have left it
    assert outcome is Outcome.SUCCEEDED
    assert writes.log == [("finish_and_ack", [True])]
    run = store.get_run(first.run.job_id, at)
    assert (run.state, run.attempt, run.worker_id, run.lease_expires_at) == (RunState.SUCCEEDED, 1, None, None)
    assert run.started_at == at and run.finished_at == clock.now_ms()
    assert [(a.number, a.worker_id, a.status_code) for a in run.attempts] == [(1, "w1", 200)]
    # When the second call is still in flight at the confirm batch, and answers after it
    pending = reserving.Begun(now=begun.now, calls=[second], seen=begun.seen)
    assert reserving.confirm(port, pending) == [True]
    leased = store.get_run(second.run.job_id, at)
    assert leased == rules.leased(begun.seen[second.delivery.receipt], "w1", at, second.lease_ms)
    clock.advance(100)
    [later] = batch_finish.settle(port, [batch_finish.Done(second, OK, at, clock.now_ms())])
    # Then it is confirmed, then finished, as before: two writes, the same run at the end
    assert later is Outcome.SUCCEEDED
    assert writes.log[1:] == [("lease_runs", 1), ("finish_and_ack", [False])]
    other = store.get_run(second.run.job_id, at)
    assert (other.state, other.attempt, other.started_at, len(other.attempts)) == (RunState.SUCCEEDED, 1, at, 1)
    # and a confirmed finish returns the run as written; repeated, it is refused (nothing written)
    record = attempt(1, "w1", at, clock.now_ms(), status_code=200)
    change = RunChange(RunState.SUCCEEDED, clock.now_ms(), clock.now_ms(), append=record, finished_at=clock.now_ms())
    confirmed = Finish(third.hold, change, leased=third.run, confirm=True)
    [written] = store.finish_runs([confirmed])
    assert written is not None and written == store.get_run(third.run.job_id, at)
    assert written == rules.apply_change(third.run, change) and written.attempt == 1
    assert store.finish_runs([confirmed]) == [None] and store.get_run(third.run.job_id, at) == written


def test_a_lost_reservation_refuses_the_confirmed_finish_and_the_run_is_called_again(engine, clock):
    # Given a run reserved by w1 and called at its instant, whose worker stalls past the reservation
    store = engine.store
    port, writes, begun, at = _held(engine, clock, 2)
    lost, kept = begun.calls
    clock.advance(rules.RESERVATION_GRACE_MS + SECOND)
    # and meanwhile w2 leases the first once its reservation ended (its message came back), and calls it
    later = clock.now_ms()
    [taken] = store.lease_runs([LeaseRequest(lost.run.job_id, at, 30 * SECOND)], "w2", later)
    assert taken.outcome is LeaseOutcome.LEASED and taken.run is not None and taken.run.attempt == 1
    # When w1's answers come in and its finishes also confirm
    done = [batch_finish.Done(one, OK, at, later, confirm=True) for one in (lost, kept)]
    outcomes = batch_finish.settle(port, done)
    # Then the first is refused (nothing written: w2's attempt 1 stands, with no record of w1's call)
    # while the second, whose expired reservation nobody took, is confirmed and finished (as a confirm is)
    assert outcomes == [Outcome.LEASE_LOST, Outcome.SUCCEEDED]
    assert writes.log == [("finish_and_ack", [True, True])]
    run = store.get_run(lost.run.job_id, at)
    assert (run.state, run.attempt, run.worker_id, run.attempts) == (RunState.RUNNING, 1, "w2", [])
    assert store.get_run(kept.run.job_id, at).state is RunState.SUCCEEDED
    # and w2's call finishes it: one attempt counted, the call whose lease was written
    record = attempt(1, "w2", later, later + 100)
    change = RunChange(RunState.SUCCEEDED, later + 100, later + 100, append=record, finished_at=later + 100)
    final = store.finish_run(lost.run.job_id, at, "w2", 1, change)
    assert (final.state, final.attempt, [a.worker_id for a in final.attempts]) == (RunState.SUCCEEDED, 1, ["w2"])


class ByJob:
    """Answers each call at once, or after ``slow_s`` for the jobs in ``slow`` (past the confirms)."""

    def __init__(self, slow: set[str], slow_s: float) -> None:
        self.slow, self.slow_s = slow, slow_s

    async def execute(self, job: Any, run: Any, attempt: int, timeout_s: float) -> TargetResult:
        if job.id in self.slow:
            await asyncio.sleep(self.slow_s)
        return OK

    def close(self) -> None:
        pass


def test_the_worker_confirms_answered_calls_by_their_finish_and_the_rest_by_a_confirm(tmp_path: Any) -> None:
    from punctual.clock import SystemClock
    from punctual.execution.loop import Tuning
    from punctual.execution.worker import Worker
    from tests.conftest import make_embedded_engine
    from tests.contract.test_worker import serving, wait_for_successes

    # Given four runs due 1.5 s from now on a pre-leasing worker (real time), two of whose targets
    # answer at once and two only after the confirms went out
    clock = SystemClock()
    engine = make_embedded_engine(tmp_path, clock)  # type: ignore[arg-type]
    try:
        store = engine.store
        at = clock.now_ms() + 1_500
        jobs = [make_job(OWNER, clock, shards=store.shards) for _ in range(4)]  # type: ignore[arg-type]
        for job in jobs:
            store.create_job(job)
        runs = [make_run(job, at, clock) for job in jobs]  # type: ignore[arg-type]
        assert store.insert_runs(runs) == [True] * 4
        engine.queue.send([Dispatch(run.run_id, at) for run in runs])
        slow = {jobs[2].id, jobs[3].id}
        writes = Writes(engine)
        confirms: list[str] = []
        lease_runs = store.lease_runs

        def counted(requests: Any, *args: Any) -> Any:
            confirms.extend(r.job_id for r in requests if r.confirm)
            return lease_runs(requests, *args)

        store.lease_runs = counted  # type: ignore[method-assign]
        options = ExecutionOptions(lease_margin_s=1, prelease_s=2, min_heartbeat_s=0.2)
        worker = Worker(
            engine,
            clock,
            targets=lambda: ByJob(slow, 2 * reserving.CONFIRM_WAIT_S),
            options=options,
            tuning=Tuning(max_in_flight=16, receive_batch=10, receivers=1, wait_s=0.1),
            worker_id="w1",
            complete=writes.complete,
        )
        # When it serves them
        with serving(worker) as stop:
            wait_for_successes(worker, len(runs), stop)
        # Then the answered calls were finished by writes that confirmed them, and only the slow ones
        # were confirmed on their own, then finished: one attempt each, started at the instant
        assert worker.outcomes[Outcome.SUCCEEDED] == 4
        assert sorted(confirms) == sorted(slow)
        flags = [flag for _, batch_flags in writes.log for flag in batch_flags]
        assert sorted(flags) == [False, False, True, True]
        for job in jobs:
            run = store.get_run(job.id, at)
            assert (run.state, run.attempt, len(run.attempts)) == (RunState.SUCCEEDED, 1, 1)
            assert run.started_at is not None and run.started_at >= at
        assert engine.queue.depth() == 0
    finally:
        engine.close()
