"""Contract: ``run_stats`` counts each run once, when and how it turned terminal, per owner and window."""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.errors import LeaseLost
from punctual.model import Job, RunState
from punctual.port import RunChange, Store
from punctual.port.stats import LATENESS_BOUNDS_MS, lateness_bucket, minute_of, window
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract


@pytest.fixture
def job(store: Store, clock: ManualClock) -> Job:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    return job


def _finish(store: Store, job: Job, scheduled_at: int, *, late_ms: int, took_ms: int, state: RunState) -> int:
    """Insert a run, lease it ``late_ms`` after its time, finish it ``took_ms`` later in ``state``."""
    store.insert_runs([make_run(job, scheduled_at, ManualClock(scheduled_at))])
    started = scheduled_at + late_ms
    leased = store.lease_run(job.id, scheduled_at, "w1", started, MINUTE)
    assert leased.run is not None and leased.run.attempt == 1
    finished = started + took_ms
    change = RunChange(state=state, now=finished, deadline_at=finished, finished_at=finished)
    store.finish_run(job.id, scheduled_at, "w1", 1, change)
    return finished


def test_terminal_runs_are_counted_by_minute_state_and_lateness(store: Store, clock: ManualClock, job: Job) -> None:
    base = minute_of(clock.now_ms()) + 10 * MINUTE
    done_1 = _finish(store, job, base, late_ms=40, took_ms=5 * SECOND, state=RunState.SUCCEEDED)
    _finish(store, job, base + 1 * SECOND, late_ms=700, took_ms=SECOND, state=RunState.FAILED)
    done_3 = _finish(store, job, base + 2 * MINUTE, late_ms=3, took_ms=SECOND, state=RunState.SUCCEEDED)

    stats = store.run_stats("alice", base - 5 * MINUTE, base + 5 * MINUTE)

    assert stats.per_minute == {
        minute_of(done_1): {RunState.SUCCEEDED: 1, RunState.FAILED: 1},
        minute_of(done_3): {RunState.SUCCEEDED: 1},
    }
    expected = [0] * (len(LATENESS_BOUNDS_MS) + 1)
    for late in (40, 700, 3):
        expected[lateness_bucket(late)] += 1
    assert stats.lateness == expected
    assert stats.percentile(50) == 50 and stats.percentile(99) == 1_000
    assert stats.totals()[RunState.SUCCEEDED] == 2 and stats.finished == 3 and stats.started == 3


def test_open_runs_and_other_owners_and_other_windows_are_not_counted(
    store: Store, clock: ManualClock, job: Job
) -> None:
    base = minute_of(clock.now_ms()) + 10 * MINUTE
    _finish(store, job, base, late_ms=10, took_ms=SECOND, state=RunState.SUCCEEDED)
    store.insert_runs([make_run(job, base + SECOND, clock)])  # still scheduled
    store.lease_run(job.id, base + SECOND, "w1", base + 2 * SECOND, MINUTE)  # running
    bob = make_job("bob", clock, shards=store.shards)
    store.create_job(bob)
    _finish(store, bob, base, late_ms=10, took_ms=SECOND, state=RunState.FAILED)

    assert store.run_stats("alice", base, base + MINUTE).totals()[RunState.SUCCEEDED] == 1
    assert store.run_stats("alice", base, base + MINUTE).finished == 1
    assert store.run_stats("bob", base, base + MINUTE).totals()[RunState.FAILED] == 1
    assert store.run_stats("alice", base + MINUTE, base + 3 * MINUTE).finished == 0  # window after it
    assert store.run_stats("carol", *window(base, 60)).finished == 0


def test_a_run_is_counted_once_whichever_way_it_ends(store: Store, clock: ManualClock, job: Job) -> None:
    base = minute_of(clock.now_ms()) + 10 * MINUTE
    # a retry then success: the retrying step is not terminal, the success is counted once
    store.insert_runs([make_run(job, base, clock)])
    store.lease_run(job.id, base, "w1", base + 20, MINUTE)
    retry = RunChange(state=RunState.RETRYING, now=base + SECOND, deadline_at=base + MINUTE, next_attempt_at=base)
    store.finish_run(job.id, base, "w1", 1, retry)
    store.lease_run(job.id, base, "w2", base + 2 * SECOND, MINUTE)
    done = RunChange(state=RunState.SUCCEEDED, now=base + 3 * SECOND, deadline_at=base, finished_at=base + 3 * SECOND)
    store.finish_run(job.id, base, "w2", 2, done)
    with pytest.raises(LeaseLost):  # a late duplicate finish changes nothing and counts nothing
        store.finish_run(job.id, base, "w2", 2, done)
    # a scheduled run cancelled by a transition (never started: no lateness), and one inserted closed
    store.insert_runs([make_run(job, base + 5 * SECOND, clock)])
    read = store.get_run(job.id, base + 5 * SECOND)
    cancel = RunChange(state=RunState.CANCELLED, now=base + 6 * SECOND, deadline_at=base, finished_at=base + 6 * SECOND)
    store.transition_run(read, cancel)
    skipped = make_run(job, base + 7 * SECOND, clock, state=RunState.CANCELLED, finished_at=base + 7 * SECOND)
    store.insert_runs([skipped])
    store.insert_runs([skipped])  # already there: not counted again

    stats = store.run_stats("alice", base, base + MINUTE)

    assert stats.per_minute == {base: {RunState.SUCCEEDED: 1, RunState.CANCELLED: 2}}
    assert stats.started == 1 and stats.lateness[lateness_bucket(20)] == 1


def test_batched_finishes_are_counted_like_single_ones(store: Store, clock: ManualClock, job: Job) -> None:
    from punctual.port import Finish, Hold

    base = minute_of(clock.now_ms()) + 10 * MINUTE
    times = [base + i * SECOND for i in range(3)]
    store.insert_runs([make_run(job, at, clock) for at in times])
    for at in times:
        store.lease_run(job.id, at, "w1", at + 30, MINUTE)
    done = base + 10 * SECOND
    change = RunChange(state=RunState.SUCCEEDED, now=done, deadline_at=done, finished_at=done)
    stale = Finish(Hold(job.id, times[2], "w1", 7), change)  # not the held attempt: not finished, not counted
    finished = store.finish_runs([Finish(Hold(job.id, at, "w1", 1), change) for at in times[:2]] + [stale])
    assert [r is not None for r in finished] == [True, True, False]

    stats = store.run_stats("alice", base, base + MINUTE)

    assert stats.per_minute == {base: {RunState.SUCCEEDED: 2}}
    assert stats.lateness[lateness_bucket(30)] == 2


def test_a_week_long_window_reads_every_minute_of_it(store: Store, clock: ManualClock, job: Job) -> None:
    # GET /stats?minutes=10080 (issue 31): runs a week apart, both in the window, none outside it
    now = minute_of(clock.now_ms()) + 10 * MINUTE
    week = 7 * 24 * 60 * MINUTE
    old = _finish(store, job, now - week + MINUTE, late_ms=5, took_ms=SECOND, state=RunState.SUCCEEDED)
    new = _finish(store, job, now - MINUTE, late_ms=5, took_ms=SECOND, state=RunState.FAILED)
    _finish(store, job, now - week - 2 * MINUTE, late_ms=5, took_ms=SECOND, state=RunState.DEAD)  # before it

    stats = store.run_stats("alice", *window(now, 7 * 24 * 60))

    assert stats.per_minute == {minute_of(old): {RunState.SUCCEEDED: 1}, minute_of(new): {RunState.FAILED: 1}}


def test_open_runs_counts_the_owners_due_runs_waiting_and_executing(store: Store, clock: ManualClock, job: Job) -> None:
    # Given alice's runs: two due and waiting (one scheduled, one retrying), one executing, one not
    # due yet, one finished; and bob's runs, due and executing
    now = clock.now_ms()
    at = [now - 50 * SECOND + i * SECOND for i in range(4)]
    store.insert_runs([make_run(job, t, clock) for t in at] + [make_run(job, now + MINUTE, clock)])
    store.lease_run(job.id, at[1], "w1", now - 20 * SECOND, MINUTE)  # executing
    store.lease_run(job.id, at[2], "w1", now - 20 * SECOND, MINUTE)
    retry = RunChange(state=RunState.RETRYING, now=now - 10 * SECOND, deadline_at=now + MINUTE, next_attempt_at=now)
    store.finish_run(job.id, at[2], "w1", 1, retry)  # between attempts: waiting
    _finish(store, job, now - 2 * MINUTE, late_ms=5, took_ms=SECOND, state=RunState.SUCCEEDED)
    bob = make_job("bob", clock, shards=store.shards)
    store.create_job(bob)
    store.insert_runs([make_run(bob, t, clock) for t in at])
    store.lease_run(bob.id, at[0], "w2", now - 5 * SECOND, MINUTE)

    # When each owner asks, Then each sees its own due runs only
    alice = store.open_runs("alice", now, 1_000)
    if alice is None:  # the aws engine without its open index cannot count them
        pytest.skip("this engine does not count open runs")
    assert (alice.waiting, alice.executing, alice.complete) == (3, 1, True)  # at[0], at[2], at[3]; at[1]
    theirs = store.open_runs("bob", now, 1_000)
    assert theirs is not None and (theirs.waiting, theirs.executing) == (3, 1)
    nobody = store.open_runs("carol", now, 1_000)
    assert nobody is not None and (nobody.waiting, nobody.executing, nobody.complete) == (0, 0, True)
    bounded = store.open_runs("alice", now, 1)  # past its bound an engine says so: lower bounds
    assert bounded is not None and bounded.waiting + bounded.executing <= 4
    assert bounded.complete == (bounded.waiting + bounded.executing == 4)
