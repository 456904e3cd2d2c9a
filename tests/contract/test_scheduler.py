"""The scheduler on both engines: ticks, overlap and catch-up policies, shard balance and takeover,
and the fault cases of the issue that run in one process (two schedulers on one shard without
leases; clocks skewed by ±30 s)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from punctual import ids
from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.model import Catchup, Job, JobStatus, Overlap, RunState, Trigger
from punctual.port import Engine, LeaseOutcome, RunQuery
from punctual.scheduling.claim import claim_page
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions
from punctual.scheduling.shards import OwnershipOptions
from tests.contract.factories import make_job

pytestmark = pytest.mark.contract

MINUTE = 60_000


def _job(engine: Engine, clock: ManualClock, *, cron: str = "* * * * *", next_run_at: int, **fields: object) -> Job:
    job = make_job("owner-a", clock, shards=engine.store.shards, schedule=cron, next_run_at=next_run_at, **fields)
    engine.store.create_job(job)
    return job


def _runs(engine: Engine, job: Job) -> list:  # type: ignore[type-arg]
    return engine.store.list_runs(job.id, RunQuery(limit=200)).items


def _next_minute(ms: int) -> int:
    return (ms // MINUTE + 1) * MINUTE


def _scheduler(engine: Engine, clock: ManualClock, **kwargs: object) -> Scheduler:
    return Scheduler(engine, clock, metrics=m.InMemoryMetrics(), **kwargs)  # type: ignore[arg-type]


def test_tick_claims_due_jobs_once_and_precomputes_within_lookahead(engine: Engine, clock: ManualClock) -> None:
    # Given a minutely job due at the next minute, and a scheduler with a 3 s lookahead
    due = _next_minute(clock.now_ms())
    job = _job(engine, clock, next_run_at=due)
    scheduler = _scheduler(engine, clock)
    # When it ticks 5 s before the minute, nothing is due yet
    clock.set(due - 5_000)
    assert scheduler.tick().dispatched == 0
    # When it ticks 2 s before, the run is precomputed and sent with a 2 s delay
    clock.set(due - 2_000)
    stats = scheduler.tick()
    assert (stats.inserted, stats.dispatched, stats.advanced) == (1, 1, 1)
    assert [r.scheduled_at for r in _runs(engine, job)] == [due]
    assert engine.store.get_job(job.id).next_run_at == due + MINUTE
    # Then ticking again claims nothing more
    assert scheduler.tick().inserted == 0
    assert scheduler.metrics.samples[m.DISPATCH_LATENESS_MS]  # type: ignore[attr-defined]


def test_missed_times_catch_up_with_one_run_for_the_latest(engine: Engine, clock: ManualClock) -> None:
    # Given a minutely job whose time passed 10 minutes ago (the scheduler was down)
    due = _next_minute(clock.now_ms()) - 10 * MINUTE
    job = _job(engine, clock, next_run_at=due)
    latest = clock.now_ms() // MINUTE * MINUTE
    # When a scheduler ticks, one catch-up run is created for the latest missed time
    _scheduler(engine, clock).tick()
    runs = _runs(engine, job)
    assert [(r.scheduled_at, r.trigger) for r in runs] == [(latest, Trigger.CATCHUP)]
    assert engine.store.get_job(job.id).next_run_at == latest + MINUTE


def test_backfill_catch_up_is_bounded(engine: Engine, clock: ManualClock) -> None:
    due = _next_minute(clock.now_ms()) - 10 * MINUTE
    job = _job(engine, clock, next_run_at=due, catchup=Catchup.BACKFILL, max_backfill=3)
    _scheduler(engine, clock).tick()
    times = sorted(r.scheduled_at for r in _runs(engine, job))
    latest = clock.now_ms() // MINUTE * MINUTE
    assert times == [latest - 2 * MINUTE, latest - MINUTE, latest]


@pytest.mark.parametrize("overlap", [Overlap.FORBID, Overlap.REPLACE])
def test_the_claim_leaves_overlap_to_the_lease(engine: Engine, clock: ManualClock, overlap: Overlap) -> None:
    # Given a job whose previous run is still running when its next time is claimed
    due = _next_minute(clock.now_ms())
    job = _job(engine, clock, next_run_at=due, overlap=overlap)
    scheduler = _scheduler(engine, clock)
    clock.set(due)
    scheduler.tick()
    assert engine.store.lease_run(job.id, due, "worker-1", due, 10 * MINUTE).outcome is LeaseOutcome.LEASED
    # When the next time is claimed (a lookahead before it), the claim decides nothing:
    # the previous run may still finish before the new run's instant (tests/contract/test_overlap.py)
    clock.set(due + MINUTE - 2_000)
    stats = scheduler.tick()
    assert (stats.inserted, stats.dispatched) == (1, 1)
    assert engine.store.get_run(job.id, due + MINUTE).state is RunState.SCHEDULED
    assert engine.store.get_run(job.id, due).state is RunState.RUNNING
    # Then the new run's first lease, at its instant, applies the policy
    clock.set(due + MINUTE)
    lease = engine.store.lease_run(job.id, due + MINUTE, "worker-2", clock.now_ms(), 10 * MINUTE, overlap=overlap)
    if overlap is Overlap.FORBID:
        assert lease.outcome is LeaseOutcome.SKIPPED
        assert "overlap=forbid" in (engine.store.get_run(job.id, due + MINUTE).note or "")
        assert engine.store.get_run(job.id, due).state is RunState.RUNNING
    else:
        assert lease.outcome is LeaseOutcome.LEASED
        assert "overlap=replace" in (engine.store.get_run(job.id, due).note or "")
        assert engine.store.get_run(job.id, due).state is RunState.CANCELLED


def test_instances_balance_shards_and_take_over_a_stopped_one(engine: Engine, clock: ManualClock) -> None:
    options = SchedulerOptions(ownership=OwnershipOptions(ttl_ms=10_000, renew_every_ms=0))
    a = _scheduler(engine, clock, options=options, instance=0, instances=2, owner="a")
    b = _scheduler(engine, clock, options=options, instance=1, instances=2, owner="b")
    b.tick()
    a.tick()
    # b came first and took everything; after a rebalance period it gives a's shards back
    clock.advance(options.ownership.rebalance_ms)
    b.tick()
    a.tick()
    assert a.ownership.shards == [s for s in range(engine.store.shards) if s % 2 == 0]
    assert b.ownership.shards == [s for s in range(engine.store.shards) if s % 2 == 1]
    # When b stops gracefully, a takes its shards on its next tick
    b.ownership.release_all()
    clock.advance(1_000)
    a.tick()
    assert a.ownership.shards == list(range(engine.store.shards))
    # When a vanishes (no release), b takes over only after the lease expired
    b.tick()
    assert b.ownership.shards == []
    clock.advance(options.ownership.ttl_ms + 1)
    b.tick()
    assert b.ownership.shards == list(range(engine.store.shards))


def _claim_loop(engine: Engine, clock: ManualClock, shard: int, lookahead_ms: int, ticks: int) -> None:
    for _ in range(ticks):
        claim_page(engine.store, engine.queue, shard, clock.now_ms(), lookahead_ms=lookahead_ms, limit=50)


def _assert_one_run_per_time_and_one_lease(engine: Engine, jobs: list[Job], expected_times: list[int]) -> None:
    for job in jobs:
        times = [r.scheduled_at for r in _runs(engine, job)]
        assert sorted(times) == expected_times, job.id
    # Every message delivered once to a worker: each run is leased exactly once, duplicates dropped
    leased: Counter[str] = Counter()
    while deliveries := engine.queue.receive(10, visibility_s=600):
        for d in deliveries:
            job_id, at = ids.parse_run_id(d.run_id)
            if engine.store.lease_run(job_id, at, "w", 0, 600_000).outcome is LeaseOutcome.LEASED:
                leased[d.run_id] += 1
            engine.queue.delete(d.receipt)
    assert len(leased) == len(jobs) * len(expected_times)
    assert set(leased.values()) == {1}


def test_two_schedulers_on_one_shard_without_leases_create_no_second_run(engine: Engine, clock: ManualClock) -> None:
    # Given minutely jobs in shard 0, and two schedulers forced onto it (no leases), racing
    start = _next_minute(clock.now_ms())
    jobs = [_job(engine, clock, next_run_at=start) for _ in range(16)]
    for job in jobs:
        assert job.due_shard in range(engine.store.shards)
    minutes = 2
    for step in range(minutes * 60 // 20 + 1):
        clock.set(start + step * 20_000)
        threads = [
            threading.Thread(target=_claim_loop, args=(engine, clock, shard, 0, 2))
            for shard in range(engine.store.shards)
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    # Then each (job, minute) has one row, and each run is leased (executed) once
    _assert_one_run_per_time_and_one_lease(engine, jobs, [start + i * MINUTE for i in range(minutes + 1)])


@pytest.mark.parametrize("skew_ms", [30_000, -30_000])
def test_a_skewed_clock_creates_no_duplicates_and_loses_no_time(
    engine: Engine, clock: ManualClock, skew_ms: int
) -> None:
    # Given a correct scheduler and one whose clock is off by ±30 s, sharing the shards
    start = _next_minute(clock.now_ms())
    jobs = [_job(engine, clock, next_run_at=start) for _ in range(12)]
    skewed = ManualClock(clock.now_ms() + skew_ms)
    options = SchedulerOptions(ownership=OwnershipOptions(ttl_ms=5_000, renew_every_ms=0))
    good = _scheduler(engine, clock, options=options, owner="good")
    bad = _scheduler(engine, skewed, options=options, owner="skewed")
    # When both tick every 5 s for three minutes
    end = start + 3 * MINUTE
    while clock.now_ms() < end:
        good.tick()
        bad.tick()
        clock.advance(5_000)
        skewed.set(clock.now_ms() + skew_ms)
    # Then every minute up to the end has exactly one run per job, each executed once
    last = end if skew_ms > 0 else end - MINUTE
    expected = list(range(start, last + 1, MINUTE))
    for job in jobs:
        times = sorted(r.scheduled_at for r in _runs(engine, job))
        assert times[: len(expected)] == expected
        assert len(times) == len(set(times))
    assert all(engine.store.get_job(j.id).status is JobStatus.ACTIVE for j in jobs)


def test_a_scheduler_with_fewer_shards_than_the_store_was_scheduled_over_refuses_to_run(engine, clock):
    from punctual.errors import ConfigError

    # Given a store whose shard leases show it was scheduled over more shards than configured now
    # (a redeploy with a smaller shard count: jobs in the shards beyond would never be claimed)
    shards = engine.store.shards
    assert engine.store.acquire_shard(shards + 3, "an-old-fleet", clock.now_ms(), 1_000) is not None
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), owner="new-fleet")
    # Then its first tick says so, and its loop ends at once (an invocation error, not a retried tick)
    with pytest.raises(ConfigError, match="would never run"):
        scheduler.tick()
    with pytest.raises(ConfigError):
        Scheduler(engine, clock, metrics=m.InMemoryMetrics()).run(threading.Event(), until_ms=clock.now_ms() + 5_000)
