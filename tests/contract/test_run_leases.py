"""Contract: executing a run — lease, heartbeat, finish, compare-and-set transitions, past-deadline runs.

Timeline of the takeover tests (lease 30 s)::

    t0          t0+30s   t0+30s+1ms
    w1 leases ──────────┤ expired
                             w2 leases (attempt 2, w1's attempt recorded as lease_expired)
                             w1 heartbeat/finish ──> LeaseLost; w2's attempt stands
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from punctual.clock import ManualClock
from punctual.errors import ConcurrentModification, LeaseLost
from punctual.model import MAX_ATTEMPTS_KEPT, AttemptOutcome, Job, Run, RunState
from punctual.port import LeaseOutcome, RunChange, Store
from tests.contract.factories import MINUTE, SECOND, attempt, make_job, make_run

pytestmark = pytest.mark.contract

T = TypeVar("T")

LEASE_MS = 30 * SECOND


@pytest.fixture
def job(store: Store, clock: ManualClock) -> Job:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    return job


@pytest.fixture
def run(store: Store, clock: ManualClock, job: Job) -> Run:
    run = make_run(job, clock.now_ms(), clock)
    store.insert_runs([run])
    return run


def _lease(store: Store, run: Run, worker: str, now: int, lease_ms: int = LEASE_MS) -> Run:
    result = store.lease_run(run.job_id, run.scheduled_at, worker, now, lease_ms)
    assert result.outcome is LeaseOutcome.LEASED, result
    assert result.run is not None
    return result.run


def _success(now: int, number: int, worker: str, started_at: int) -> RunChange:
    return RunChange(
        state=RunState.SUCCEEDED,
        now=now,
        deadline_at=now,
        finished_at=now,
        append=attempt(number, worker, started_at, now, status_code=200, response_excerpt="ok"),
    )


def _retry(now: int, number: int, worker: str, next_attempt_at: int) -> RunChange:
    return RunChange(
        state=RunState.RETRYING,
        now=now,
        deadline_at=next_attempt_at + MINUTE,
        next_attempt_at=next_attempt_at,
        append=attempt(number, worker, now, now, AttemptOutcome.FAILED, status_code=500, error="boom"),
    )


# -- lease ----------------------------------------------------------------------------------------


def test_lease_a_scheduled_run(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms() + 250
    result = store.lease_run(run.job_id, run.scheduled_at, "w1", now, LEASE_MS)
    assert result.outcome is LeaseOutcome.LEASED
    leased = result.run
    assert leased is not None
    assert leased.state is RunState.RUNNING
    assert leased.attempt == 1
    assert leased.worker_id == "w1"
    assert leased.lease_expires_at == now + LEASE_MS
    assert leased.deadline_at == now + LEASE_MS
    assert leased.started_at == now
    assert leased.attempts == []
    assert store.get_run(run.job_id, run.scheduled_at) == leased
    # nothing else changed
    assert leased.model_dump(
        exclude={"state", "attempt", "worker_id", "lease_expires_at", "deadline_at", "started_at"}
    ) == run.model_dump(exclude={"state", "attempt", "worker_id", "lease_expires_at", "deadline_at", "started_at"})


def test_second_lease_while_held(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    leased = _lease(store, run, "w1", now)
    for t in (now, now + 1, now + LEASE_MS):  # held up to and including lease_expires_at
        result = store.lease_run(run.job_id, run.scheduled_at, "w2", t, LEASE_MS)
        assert result.outcome is LeaseOutcome.HELD
        assert result.run == leased
    # a duplicate delivery to the same worker is HELD too: the attempt is not restarted
    assert store.lease_run(run.job_id, run.scheduled_at, "w1", now + 5, LEASE_MS).outcome is LeaseOutcome.HELD
    assert store.get_run(run.job_id, run.scheduled_at) == leased


def test_takeover_after_the_lease_expired(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    first = _lease(store, run, "w1", now)
    clock.advance(LEASE_MS + 1)
    later = clock.now_ms()
    second = _lease(store, run, "w2", later)
    assert second.attempt == 2
    assert second.worker_id == "w2"
    assert second.lease_expires_at == later + LEASE_MS
    assert second.deadline_at == later + LEASE_MS
    assert second.started_at == first.started_at  # started_at is the first lease's
    [lost] = second.attempts
    assert lost.number == 1
    assert lost.worker_id == "w1"
    assert lost.outcome is AttemptOutcome.LEASE_EXPIRED
    assert lost.started_at == now
    assert lost.finished_at == first.lease_expires_at
    assert store.get_run(run.job_id, run.scheduled_at) == second


@pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED])
def test_lease_of_a_terminal_run(store: Store, clock: ManualClock, job: Job, state: RunState) -> None:
    now = clock.now_ms()
    done = make_run(job, now, clock, state=state, attempt=1, finished_at=now)
    store.insert_runs([done])
    result = store.lease_run(job.id, now, "w1", now + SECOND, LEASE_MS)
    assert result.outcome is LeaseOutcome.FINISHED
    assert result.run == done
    assert store.get_run(job.id, now) == done


def test_lease_of_a_finished_run(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    finished = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + 5, 1, "w1", now))
    result = store.lease_run(run.job_id, run.scheduled_at, "w2", now + 10 * LEASE_MS, LEASE_MS)
    assert result.outcome is LeaseOutcome.FINISHED
    assert result.run == finished


def test_lease_of_a_missing_run(store: Store, clock: ManualClock, job: Job) -> None:
    result = store.lease_run(job.id, clock.now_ms(), "w1", clock.now_ms(), LEASE_MS)
    assert result.outcome is LeaseOutcome.NOT_FOUND
    assert result.run is None


def test_retrying_run_waits_for_its_backoff(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    retry_at = now + 10 * SECOND
    retrying = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _retry(now + SECOND, 1, "w1", retry_at))
    assert retrying.state is RunState.RETRYING
    assert retrying.next_attempt_at == retry_at
    assert retrying.worker_id is None and retrying.lease_expires_at is None

    early = store.lease_run(run.job_id, run.scheduled_at, "w2", retry_at - 1, LEASE_MS)
    assert early.outcome is LeaseOutcome.NOT_READY
    assert early.run == retrying

    second = _lease(store, run, "w2", retry_at)
    assert second.attempt == 2
    assert second.worker_id == "w2"
    assert second.next_attempt_at is None
    assert second.started_at == now
    assert [a.outcome for a in second.attempts] == [AttemptOutcome.FAILED]  # a retry is not a takeover


# -- heartbeat ------------------------------------------------------------------------------------


def test_heartbeat_extends_the_lease_and_deadline(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    leased = _lease(store, run, "w1", now)
    until = now + 3 * LEASE_MS
    beat = store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, until)
    assert beat.lease_expires_at == until
    assert beat.deadline_at == until
    assert beat.model_dump(exclude={"lease_expires_at", "deadline_at"}) == leased.model_dump(
        exclude={"lease_expires_at", "deadline_at"}
    )
    assert store.get_run(run.job_id, run.scheduled_at) == beat
    # the extended lease holds off a takeover past the original end
    assert (
        store.lease_run(run.job_id, run.scheduled_at, "w2", now + LEASE_MS + 1, LEASE_MS).outcome is LeaseOutcome.HELD
    )


def test_heartbeat_after_own_expiry_without_takeover_is_allowed(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    beat = store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, now + 2 * LEASE_MS + 5)
    assert beat.lease_expires_at == now + 2 * LEASE_MS + 5


def test_heartbeat_by_a_non_holder_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    leased = _lease(store, run, "w1", now)
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w2", 1, now + 5 * LEASE_MS)
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 2, now + 5 * LEASE_MS)  # wrong attempt
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 0, now + 5 * LEASE_MS)
    assert store.get_run(run.job_id, run.scheduled_at) == leased


def test_heartbeat_of_a_taken_over_attempt_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    second = _lease(store, run, "w2", now + LEASE_MS + 1)
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, now + 5 * LEASE_MS)
    # the same worker id with the old attempt is fenced out too (a worker restarted under one name)
    third = _lease(store, run, "w1", now + 3 * LEASE_MS)
    assert third.attempt == 3
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, now + 5 * LEASE_MS)
    assert second.attempt == 2


def test_heartbeat_of_a_scheduled_finished_or_missing_run_is_refused(
    store: Store, clock: ManualClock, job: Job, run: Run
) -> None:
    now = clock.now_ms()
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 0, now + LEASE_MS)  # not leased yet
    _lease(store, run, "w1", now)
    store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + 1, 1, "w1", now))
    with pytest.raises(LeaseLost):
        store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, now + LEASE_MS)
    with pytest.raises(LeaseLost):
        store.heartbeat_run(job.id, now + MINUTE, "w1", 1, now + LEASE_MS)


# -- finish ---------------------------------------------------------------------------------------


def test_finish_by_the_holder(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    change = _success(now + 7, 1, "w1", now)
    finished = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, change)
    assert finished.state is RunState.SUCCEEDED
    assert finished.finished_at == now + 7
    assert finished.deadline_at == now + 7
    assert finished.attempt == 1
    assert finished.worker_id is None and finished.lease_expires_at is None
    assert finished.started_at == now
    assert finished.attempts == [change.append]
    assert store.get_run(run.job_id, run.scheduled_at) == finished


def test_finish_keeps_the_lease_fields_when_asked(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    leased = _lease(store, run, "w1", now)
    change = RunChange(
        state=RunState.FAILED,
        now=now + 1,
        deadline_at=now + 1,
        finished_at=now + 1,
        note="bad request",
        clear_lease=False,
        append=attempt(1, "w1", now, now + 1, AttemptOutcome.FAILED, status_code=400, error="400"),
    )
    finished = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, change)
    assert finished.state is RunState.FAILED
    assert finished.note == "bad request"
    assert finished.worker_id == "w1"
    assert finished.lease_expires_at == leased.lease_expires_at


def test_finish_twice_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    finished = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + 1, 1, "w1", now))
    with pytest.raises(LeaseLost):
        store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + 2, 1, "w1", now))
    assert store.get_run(run.job_id, run.scheduled_at) == finished


def test_finish_by_a_worker_whose_lease_was_taken_over_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    second = _lease(store, run, "w2", now + LEASE_MS + 1)

    with pytest.raises(LeaseLost):  # the slow worker wakes up and tries to record its result
        store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + LEASE_MS + 2, 1, "w1", now))
    assert store.get_run(run.job_id, run.scheduled_at) == second  # the newer attempt stands

    done = store.finish_run(run.job_id, run.scheduled_at, "w2", 2, _success(now + LEASE_MS + 3, 2, "w2", now))
    assert done.state is RunState.SUCCEEDED
    assert [(a.number, a.worker_id, a.outcome) for a in done.attempts] == [
        (1, "w1", AttemptOutcome.LEASE_EXPIRED),
        (2, "w2", AttemptOutcome.SUCCEEDED),
    ]

    with pytest.raises(LeaseLost):  # and after w2 finished, w1 still cannot overwrite
        store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + LEASE_MS + 4, 1, "w1", now))
    assert store.get_run(run.job_id, run.scheduled_at) == done


def test_finish_by_a_worker_with_the_wrong_attempt_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    leased = _lease(store, run, "w1", now)
    for worker, number in (("w2", 1), ("w1", 2), ("w1", 0)):
        with pytest.raises(LeaseLost):
            store.finish_run(run.job_id, run.scheduled_at, worker, number, _success(now + 1, number, worker, now))
    assert store.get_run(run.job_id, run.scheduled_at) == leased


def test_finish_after_own_lease_expired_but_no_takeover_is_allowed(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w1", now)
    late = now + 10 * LEASE_MS
    finished = store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(late, 1, "w1", now))
    assert finished.state is RunState.SUCCEEDED
    assert finished.finished_at == late


def test_finish_of_a_missing_or_scheduled_run_is_refused(store: Store, clock: ManualClock, job: Job, run: Run) -> None:
    now = clock.now_ms()
    with pytest.raises(LeaseLost):
        store.finish_run(run.job_id, run.scheduled_at, "w1", 0, _success(now, 0, "w1", now))
    assert store.get_run(run.job_id, run.scheduled_at) == run
    with pytest.raises(LeaseLost):
        store.finish_run(job.id, now + MINUTE, "w1", 1, _success(now, 1, "w1", now))


def test_attempts_are_bounded_to_the_newest(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    total = MAX_ATTEMPTS_KEPT + 2
    for number in range(1, total + 1):
        t = now + number * SECOND
        leased = _lease(store, run, f"w{number}", t)
        assert leased.attempt == number
        change = _retry(t, number, f"w{number}", t) if number < total else _success(t, number, f"w{number}", t)
        store.finish_run(run.job_id, run.scheduled_at, f"w{number}", number, change)
    final = store.get_run(run.job_id, run.scheduled_at)
    assert final.state is RunState.SUCCEEDED
    assert final.attempt == total
    assert [a.number for a in final.attempts] == list(range(total - MAX_ATTEMPTS_KEPT + 1, total + 1))


# -- transition_run: compare-and-set ----------------------------------------------------------------


def test_transition_applies_on_an_unchanged_read(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    read = store.get_run(run.job_id, run.scheduled_at)
    change = RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note="replaced")
    after = store.transition_run(read, change)
    assert after.state is RunState.CANCELLED
    assert after.note == "replaced"
    assert after.finished_at == now
    assert store.get_run(run.job_id, run.scheduled_at) == after


def test_transition_of_a_running_run(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    read = _lease(store, run, "w1", now)
    change = RunChange(
        state=RunState.DEAD,
        now=now + LEASE_MS + 1,
        deadline_at=now + LEASE_MS + 1,
        finished_at=now + LEASE_MS + 1,
        note="dead-lettered",
        append=attempt(1, "w1", now, now + LEASE_MS, AttemptOutcome.DEAD_LETTERED),
    )
    after = store.transition_run(read, change)
    assert after.state is RunState.DEAD
    assert after.worker_id is None and after.lease_expires_at is None
    assert [a.outcome for a in after.attempts] == [AttemptOutcome.DEAD_LETTERED]
    with pytest.raises(LeaseLost):  # the worker it was taken from is fenced out
        store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + 1, 1, "w1", now))


def test_transition_with_an_attempt_change(store: Store, clock: ManualClock, run: Run) -> None:
    # the reaper requeues an expired lease: running -> retrying with attempt kept, backoff now
    now = clock.now_ms()
    read = _lease(store, run, "w1", now)
    later = now + LEASE_MS + 1
    change = RunChange(
        state=RunState.RETRYING,
        now=later,
        deadline_at=later + MINUTE,
        next_attempt_at=later,
        attempt=1,
        append=attempt(1, "w1", now, now + LEASE_MS, AttemptOutcome.LEASE_EXPIRED),
    )
    after = store.transition_run(read, change)
    assert after.state is RunState.RETRYING
    assert after.next_attempt_at == later
    assert _lease(store, run, "w2", later).attempt == 2


def test_transition_after_a_change_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    read = store.get_run(run.job_id, run.scheduled_at)
    leased = _lease(store, run, "w1", now)  # the run moved on after the read
    change = RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now)
    with pytest.raises(ConcurrentModification):
        store.transition_run(read, change)
    assert store.get_run(run.job_id, run.scheduled_at) == leased


def test_transition_after_a_heartbeat_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    read = _lease(store, run, "w1", now)
    beat = store.heartbeat_run(run.job_id, run.scheduled_at, "w1", 1, now + 2 * LEASE_MS)  # lease_expires_at moved
    with pytest.raises(ConcurrentModification):
        store.transition_run(read, RunChange(state=RunState.DEAD, now=now, deadline_at=now, finished_at=now))
    assert store.get_run(run.job_id, run.scheduled_at) == beat


def test_transition_after_a_takeover_is_refused(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    read = _lease(store, run, "w1", now)
    taken = _lease(store, run, "w2", now + LEASE_MS + 1)  # same state, new attempt
    with pytest.raises(ConcurrentModification):
        store.transition_run(read, RunChange(state=RunState.DEAD, now=now, deadline_at=now, finished_at=now))
    assert store.get_run(run.job_id, run.scheduled_at) == taken


def test_transition_of_a_missing_run_is_refused(store: Store, clock: ManualClock, job: Job) -> None:
    ghost = make_run(job, clock.now_ms() + MINUTE, clock)
    now = clock.now_ms()
    with pytest.raises(ConcurrentModification):
        store.transition_run(ghost, RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now))


# -- past_deadline_runs ---------------------------------------------------------------------------


def test_past_deadline_runs(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    t = now - 10 * MINUTE
    overdue = make_run(job, t, clock, deadline_at=now - 1)
    within = make_run(job, t + SECOND, clock, deadline_at=now + MINUTE)
    at_now = make_run(job, t + 2 * SECOND, clock, deadline_at=now)  # deadline_at < now is strict
    too_young = make_run(job, now - SECOND, clock, deadline_at=now - 1)  # scheduled after scheduled_before
    retrying = make_run(
        job,
        t + 3 * SECOND,
        clock,
        state=RunState.RETRYING,
        attempt=1,
        deadline_at=now - 5,
        next_attempt_at=now - MINUTE,
    )
    finished = [
        make_run(
            job, t + (4 + i) * SECOND, clock, state=state, attempt=1, deadline_at=now - MINUTE, finished_at=now - MINUTE
        )
        for i, state in enumerate([RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED])
    ]
    store.insert_runs([overdue, within, at_now, too_young, retrying, *finished])

    found = store.past_deadline_runs(now, scheduled_before=now - MINUTE, limit=100)
    assert sorted(r.run_id for r in found) == sorted([overdue.run_id, retrying.run_id])
    assert {r.run_id: r for r in found}[overdue.run_id] == overdue  # full runs, as stored

    # scheduled_before is inclusive
    found = store.past_deadline_runs(now, scheduled_before=too_young.scheduled_at, limit=100)
    assert too_young.run_id in {r.run_id for r in found}


def test_past_deadline_runs_follow_the_lease(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    run = make_run(job, now - MINUTE, clock, deadline_at=now + MINUTE)
    store.insert_runs([run])
    leased = _lease(store, run, "w1", now)
    assert store.past_deadline_runs(now + LEASE_MS, now, 100) == []  # running within its lease
    [found] = store.past_deadline_runs(now + LEASE_MS + 1, now, 100)  # the lease ended unfinished
    assert found == leased
    store.finish_run(run.job_id, run.scheduled_at, "w1", 1, _success(now + LEASE_MS + 2, 1, "w1", now))
    assert store.past_deadline_runs(now + 10 * LEASE_MS, now, 100) == []  # terminal: out of the index


def test_past_deadline_runs_leave_after_a_transition(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    run = make_run(job, now - MINUTE, clock, deadline_at=now - 1)
    store.insert_runs([run])
    [found] = store.past_deadline_runs(now, now, 10)
    store.transition_run(found, RunChange(state=RunState.DEAD, now=now, deadline_at=now, finished_at=now))
    assert store.past_deadline_runs(now + MINUTE, now, 10) == []


def test_past_deadline_runs_limit_and_jobs(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    other = make_job("bob", clock, shards=store.shards)
    store.create_job(other)
    runs = [make_run(j, now - (i + 1) * MINUTE, clock, deadline_at=now - 1) for i in range(4) for j in (job, other)]
    store.insert_runs(runs)
    assert len(store.past_deadline_runs(now, now, 3)) == 3
    assert sorted(r.run_id for r in store.past_deadline_runs(now, now, 100)) == sorted(r.run_id for r in runs)


# -- races ------------------------------------------------------------------------------------------


def _race(n: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(0..n-1) on n threads released together; re-raise the first error."""
    start = threading.Barrier(n)

    def go(i: int) -> T:
        start.wait(timeout=10)
        return fn(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(go, range(n)))


def test_concurrent_leases_of_one_run_lease_it_once(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    results = _race(6, lambda i: store.lease_run(run.job_id, run.scheduled_at, f"w{i}", now, LEASE_MS))
    winners = [r for r in results if r.outcome is LeaseOutcome.LEASED]
    assert len(winners) == 1
    assert {r.outcome for r in results} == {LeaseOutcome.LEASED, LeaseOutcome.HELD}
    stored = store.get_run(run.job_id, run.scheduled_at)
    assert stored == winners[0].run
    assert stored.attempt == 1


def test_concurrent_takeovers_of_an_expired_lease_take_it_once(store: Store, clock: ManualClock, run: Run) -> None:
    now = clock.now_ms()
    _lease(store, run, "w0", now)
    later = now + LEASE_MS + 1
    results = _race(6, lambda i: store.lease_run(run.job_id, run.scheduled_at, f"t{i}", later, LEASE_MS))
    winners = [r for r in results if r.outcome is LeaseOutcome.LEASED]
    assert len(winners) == 1
    stored = store.get_run(run.job_id, run.scheduled_at)
    assert stored.attempt == 2
    assert stored.worker_id == winners[0].run.worker_id  # type: ignore[union-attr]
    assert [a.outcome for a in stored.attempts] == [AttemptOutcome.LEASE_EXPIRED]  # recorded once
