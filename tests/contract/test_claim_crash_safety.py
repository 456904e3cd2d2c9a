"""Contract: the claim sequence (insert runs -> send -> advance) survives a crash at every step.

A proxy around the store or the queue "crashes" (raises) at the k-th call of one step:

- ``before``:  the process died before the write reached the engine;
- ``after``:   the write was applied, but the process died before it learned so;
- ``partial``: the first half of the batch was applied, then the process died.

Then a scheduler (the same or another one) claims the shard again with the real store and queue.
Whatever the crash point: every due time has exactly one run row, every open run row has at
least one message, every message names a run row, and each job moved exactly past its claimed times.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC
from typing import Any

import pytest

from punctual.clock import ManualClock, to_datetime
from punctual.model import Catchup, Job, JobStatus, Overlap, RunState
from punctual.port import Engine, RunQuery
from punctual.scheduling import cron as schedule
from punctual.scheduling.claim import claim_page
from punctual.scheduling.planning import PlanOptions
from tests.contract.factories import MINUTE, SECOND, all_pages, drain, make_job, make_run

pytestmark = pytest.mark.contract

SHARD = 1
PAGE = 4  # 7 jobs: two pages, so the crash can hit the first or the second page's call
LOOKAHEAD_MS = 3_000


class Crash(RuntimeError):
    """The simulated death of the scheduler process."""


class CrashAt:
    """Delegates to ``target`` but crashes the ``call``-th call of ``method`` in the given ``mode``."""

    def __init__(self, target: Any, method: str, call: int, mode: str) -> None:
        self._target, self._method, self._call, self._mode = target, method, call, mode
        self.calls = 0
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        return self._intercept(attr) if name == self._method else attr

    def _intercept(self, real: Callable[[Sequence[Any]], Any]) -> Callable[[Sequence[Any]], Any]:
        def call(items: Sequence[Any]) -> Any:
            self.calls += 1
            if self.calls != self._call:
                return real(items)
            self.crashed = True
            if self._mode == "after":
                real(items)
            elif self._mode == "partial":
                real(list(items)[: max(1, len(items) // 2)])
            raise Crash(f"crashed {self._mode} {self._method} call {self.calls}")

        return call


def _tick(engine: Engine, store: Any, queue: Any, now: int) -> None:
    """One scheduler pass over the shard (pages until it runs dry)."""
    for _ in range(20):
        stats = claim_page(store, queue, SHARD, now, lookahead_ms=LOOKAHEAD_MS, limit=PAGE, options=PlanOptions())
        if stats.due < PAGE:
            return
    raise AssertionError("the shard never ran out of due jobs")


class World:
    """Seven due jobs of every kind, and what the claim must make of them."""

    def __init__(self, engine: Engine, clock: ManualClock) -> None:
        self.engine, self.clock = engine, clock
        t0 = self.t0 = clock.now_ms()
        shards = engine.store.shards

        def job(**fields: Any) -> Job:
            return make_job("alice", clock, shards=shards, shard=SHARD, **fields)

        self.plain = [job(), job(), job(jitter_s=1)]
        self.backfill = job(catchup=Catchup.BACKFILL, next_run_at=t0 - 3 * MINUTE)  # four runs in one plan
        self.one_time = job(run_at=to_datetime(t0 - SECOND).astimezone(UTC), next_run_at=t0 - SECOND)
        # overlap: each has an open run from the previous minute (the claim leaves the policy to the lease)
        self.forbid = job(overlap=Overlap.FORBID, last_run_at=t0 - MINUTE)
        self.replace = job(overlap=Overlap.REPLACE, last_run_at=t0 - MINUTE)
        self.jobs = [*self.plain, self.backfill, self.one_time, self.forbid, self.replace]
        for j in self.jobs:
            engine.store.create_job(j)
        self.previous = {j.id: make_run(j, t0 - MINUTE, clock) for j in (self.forbid, self.replace)}
        engine.store.insert_runs(list(self.previous.values()))

    def expected_times(self, job: Job) -> list[int]:
        t0 = self.t0
        if job is self.backfill:
            return [t0 - 3 * MINUTE, t0 - 2 * MINUTE, t0 - MINUTE, t0]
        if job is self.one_time:
            return [t0 - SECOND]
        if job in (self.forbid, self.replace):
            return [t0 - MINUTE, t0]
        return [t0]

    def check(self) -> None:
        store = self.engine.store
        rows = []
        for job in self.jobs:
            runs = [
                r
                for page in all_pages(lambda c, j=job: store.list_runs(j.id, RunQuery(limit=100, cursor=c)))
                for r in page
            ]
            times = [r.scheduled_at for r in runs]
            assert sorted(times) == self.expected_times(job), f"{job.id}: one run row per due time"
            rows += runs

            stored = store.get_job(job.id)
            if job is self.one_time:
                assert stored.status is JobStatus.COMPLETED
                assert stored.next_run_at is None
                assert stored.last_run_at == self.t0 - SECOND
            else:
                assert stored.status is JobStatus.ACTIVE
                assert stored.next_run_at == schedule.next_fire("* * * * *", "UTC", self.t0), "advanced once"
                assert stored.last_run_at == self.t0

        # overlap is decided at the lease: the claim leaves both runs of each job open
        for job in (self.forbid, self.replace):
            assert store.get_run(job.id, self.t0).state is RunState.SCHEDULED
            assert store.get_run(job.id, self.t0 - MINUTE).state is RunState.SCHEDULED

        messages = drain(self.engine.queue)
        sent = Counter(m.run_id for m in messages)
        setup = {r.run_id for r in self.previous.values()}  # inserted by the test, never sent
        open_rows = {r.run_id for r in rows if r.is_open and r.run_id not in setup}
        missing = open_rows - set(sent)
        assert not missing, f"open runs without a message (lost): {sorted(missing)}"
        assert set(sent) <= {r.run_id for r in rows}, "a message names a run that has no row"
        not_before: dict[str, set[int]] = {}
        for m in messages:
            not_before.setdefault(m.run_id, set()).add(m.not_before)
        assert all(len(v) == 1 for v in not_before.values()), "a redispatch must land on the same instant"


INJECTIONS = [
    pytest.param(target, method, call, mode, id=f"{method}-{call}-{mode}")
    for target, method in (("store", "insert_runs"), ("queue", "send"), ("store", "advance_jobs"))
    for call in (1, 2)
    for mode in ("before", "after", "partial")
]


@pytest.mark.parametrize(("target", "method", "call", "mode"), INJECTIONS)
def test_a_crash_at_any_step_loses_no_run_and_duplicates_none(
    engine: Engine, clock: ManualClock, target: str, method: str, call: int, mode: str
) -> None:
    world = World(engine, clock)
    store: Any = engine.store
    queue: Any = engine.queue
    faulty = CrashAt(store if target == "store" else queue, method, call, mode)
    if target == "store":
        store = faulty
    else:
        queue = faulty

    # When the scheduler dies at the injection point
    with pytest.raises(Crash):
        _tick(engine, store, queue, clock.now_ms())
    assert faulty.crashed

    # and a scheduler claims the shard again a moment later
    clock.advance(1_500)
    _tick(engine, engine.store, engine.queue, clock.now_ms())

    # Then
    world.check()


@pytest.mark.parametrize("mode", ["before", "after", "partial"])
def test_repeated_crashes_then_recovery(engine: Engine, clock: ManualClock, mode: str) -> None:
    # every step crashes once, one after the other, before a clean pass
    world = World(engine, clock)
    for target, method in (("store", "insert_runs"), ("queue", "send"), ("store", "advance_jobs")):
        faulty = CrashAt(engine.store if target == "store" else engine.queue, method, 1, mode)
        store: Any = faulty if target == "store" else engine.store
        queue: Any = faulty if target == "queue" else engine.queue
        with contextlib.suppress(Crash):
            _tick(engine, store, queue, clock.now_ms())
        clock.advance(500)
    _tick(engine, engine.store, engine.queue, clock.now_ms())
    world.check()


@pytest.mark.parametrize("catchup", [Catchup.LATEST, Catchup.SKIP, Catchup.BACKFILL])
def test_a_run_orphaned_by_a_long_outage_is_resent_by_the_catch_up(
    engine: Engine, clock: ManualClock, catchup: Catchup
) -> None:
    # Given a claim that inserted a run and died before sending it
    t0 = clock.now_ms()
    job = make_job("alice", clock, shards=engine.store.shards, shard=SHARD, catchup=catchup, max_backfill=2)
    engine.store.create_job(job)
    with pytest.raises(Crash):
        _tick(engine, engine.store, CrashAt(engine.queue, "send", 1, "before"), t0)

    # When no scheduler claims the shard for longer than late_after (catch-up plans other times)
    clock.advance(3 * MINUTE)
    _tick(engine, engine.store, engine.queue, clock.now_ms())

    # Then the catch-up claim sent the orphan too: it does not wait for the reaper
    orphan = engine.store.get_run(job.id, t0)
    assert orphan.state is RunState.SCHEDULED
    assert orphan.run_id in {m.run_id for m in drain(engine.queue)}
    # and, were it lost again, its deadline passed: the reaper's query returns it
    overdue = engine.store.past_deadline_runs(clock.now_ms(), clock.now_ms(), 100)
    assert orphan.run_id in {r.run_id for r in overdue}


def test_catch_up_reads_nothing_extra_on_time(engine: Engine, clock: ManualClock) -> None:
    # an on-time claim plans the stored time itself: no read of a passed-over run
    job = make_job("alice", clock, shards=engine.store.shards, shard=SHARD)
    engine.store.create_job(job)
    reads: list[Any] = []

    class CountingStore:
        def __getattr__(self, name: str) -> Any:
            attr = getattr(engine.store, name)
            if name != "get_run":
                return attr
            return lambda *args, **kwargs: reads.append(args) or attr(*args, **kwargs)

    _tick(engine, CountingStore(), engine.queue, clock.now_ms())
    assert reads == []
    assert engine.store.get_job(job.id).next_run_at == job.next_run_at + MINUTE  # it was claimed
