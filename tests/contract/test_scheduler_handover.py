"""The minute hand-over of a scheduler Lambda instance, on both engines (``punctual.scheduling.invocation``).

Consecutive invocations of one instance, the second started late by EventBridge (or not at all),
leave no shard unscanned for more than a tick, and claim the same shards together only for the few
seconds after the successor's first tick: never in the claim window before the minute's top. A
successor takes its predecessor's live leases (a generation in the owner name), and the predecessor
stops claiming at its next lease refresh.

The invocations are simulated on a ManualClock with the real Scheduler, shard leases and store:
each active invocation ticks every second, as ``Scheduler.run`` does, from its start until the
deadline the Lambda handler computes (or until a successor relieved it). Every due-index query is
recorded per shard and invocation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.port import Engine
from punctual.scheduling import invocation
from punctual.scheduling.invocation import HAND_OVER_BY_S, PERIOD_MS, SAFETY_MS, TIMEOUT_S
from punctual.scheduling.scheduler import SHARDS_OWNED_EVERY_MS, Scheduler, SchedulerOptions

pytestmark = pytest.mark.contract

TIMEOUT_MS = TIMEOUT_S * 1000
COLD_START_MS = 800  # the handler reads its remaining time after the runtime and imports started
OPTIONS = SchedulerOptions()
TICK_MS = OPTIONS.tick_ms
RENEW_MS = OPTIONS.ownership.renew_every_ms


class OwnedReports(m.InMemoryMetrics):
    """The metrics of one invocation, recording each ShardsOwned report as (window, value)."""

    def __init__(self, clock: ManualClock, reports: list[tuple[int, float]]) -> None:
        super().__init__()
        self._clock, self._reports = clock, reports

    def gauge(self, name: str, value: float) -> None:
        if name == m.SHARDS_OWNED:
            self._reports.append((self._clock.now_ms() // SHARDS_OWNED_EVERY_MS, value))
        super().gauge(name, value)


class ScanRecorder:
    """The store, recording (time, shard, invocation) of every due-index query."""

    def __init__(self, store: Any, clock: ManualClock, scans: list[tuple[int, int, str]], name: str) -> None:
        self._store, self._clock, self._scans, self._name = store, clock, scans, name

    def due_jobs(self, shard: int, *args: Any, **kwargs: Any) -> Any:
        self._scans.append((self._clock.now_ms(), shard, self._name))
        return self._store.due_jobs(shard, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclass
class Invocation:
    name: str
    started_at: int
    until: int
    scheduler: Scheduler


@dataclass
class Fleet:
    engine: Engine
    clock: ManualClock
    scans: list[tuple[int, int, str]] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    owned: list[tuple[int, float]] = field(default_factory=list)  # every ShardsOwned report: (window, value)

    def invoke(self, instance: int, instances: int, minute: int, started_at: int) -> Invocation:
        """What the handler does for the event of ``minute`` delivered at ``started_at``."""
        name = invocation.owner(instance, minute)
        recorder = ScanRecorder(self.engine.store, self.clock, self.scans, name)
        view = SimpleNamespace(store=recorder, queue=self.engine.queue)
        scheduler = Scheduler(
            view,  # type: ignore[arg-type]
            self.clock,
            metrics=OwnedReports(self.clock, self.owned),
            instance=instance,
            instances=instances,
            owner=name,
        )
        now = started_at + COLD_START_MS
        until = invocation.run_until_ms(now, TIMEOUT_MS - COLD_START_MS, minute)
        one = Invocation(name, now, until, scheduler)
        self.invocations.append(one)
        return one

    def run_until(self, end: int) -> None:
        """Each invocation ticks on its own one-second cadence from its own start, while on duty
        (``Scheduler.run``); one that stops releases its leases."""
        ticks = sorted(
            (inv.started_at + k * TICK_MS, n)
            for n, inv in enumerate(self.invocations)
            for k in range((inv.until - inv.started_at) // TICK_MS + 2)  # the last one finds it past its deadline
        )
        stopped: set[int] = set()
        for at, n in ticks:
            if at > end:
                break
            inv = self.invocations[n]
            self.clock.set(at)
            if n in stopped:
                continue
            if not inv.scheduler._on_duty(inv.until):
                inv.scheduler.ownership.release_all()
                stopped.add(n)
                continue
            inv.scheduler.tick()

    def scans_of(self, name: str) -> list[int]:
        return [at for at, _, who in self.scans if who == name]


def longest_gaps(scans: list[tuple[int, int, str]], shards: int, start: int, end: int) -> dict[int, int]:
    by_shard: dict[int, list[int]] = {s: [] for s in range(shards)}
    for at, shard, _ in scans:
        by_shard[shard].append(at)
    return {
        shard: max(b - a for a, b in pairwise(sorted({start, *(t for t in scanned if start <= t <= end), end})))
        for shard, scanned in by_shard.items()
    }


def first_minute(clock: ManualClock) -> int:
    return clock.now_ms() // PERIOD_MS + 1


def test_the_timeout_lets_an_invocation_tick_until_its_hand_over_deadline() -> None:
    # An invocation of minute G started up to SAFETY_MS late still ticks until G+1:40, its timeout
    # (110 s) not cutting it short; one started much later stops SAFETY_MS before its timeout.
    minute = 29_000_000
    for late in (0, COLD_START_MS, SAFETY_MS):
        start = minute * PERIOD_MS + late
        deadline = (minute + 1) * PERIOD_MS + HAND_OVER_BY_S * 1000
        assert invocation.run_until_ms(start, TIMEOUT_MS - COLD_START_MS, minute) == deadline
    assert invocation.run_until_ms(minute * PERIOD_MS + 30_000, 50_000, minute) == minute * PERIOD_MS + 75_000
    assert invocation.owner(3, minute) == "scheduler-3@29000000"


@pytest.mark.parametrize("late_ms", [0, 3_000, 12_000, 38_000])
def test_a_late_successor_leaves_no_gap_and_the_predecessor_stops_once_it_took_over(
    engine: Engine, clock: ManualClock, late_ms: int
) -> None:
    # Given instance 0's invocation of minute G, and the next minute's, delivered late_ms late
    fleet = Fleet(engine, clock)
    g = first_minute(clock)
    old = fleet.invoke(0, 1, g, g * PERIOD_MS)
    new = fleet.invoke(0, 1, g + 1, (g + 1) * PERIOD_MS + late_ms)
    end = new.started_at + 20_000
    fleet.run_until(end)
    # Then every shard was scanned at least once a tick, through the whole hand-over
    gaps = longest_gaps(fleet.scans, engine.store.shards, old.started_at, end)
    assert max(gaps.values()) <= TICK_MS, gaps
    # and the predecessor claimed nothing more than a lease refresh after the successor's first tick
    assert max(fleet.scans_of(old.name)) < new.started_at + RENEW_MS
    assert old.scheduler.ownership.handed_over and old.scheduler.ownership.shards == []
    # so the two never scanned together in the claim window before the minute's top
    window = ((g + 1) * PERIOD_MS - OPTIONS.lookahead_ms, (g + 1) * PERIOD_MS)
    assert not [at for at in fleet.scans_of(new.name) if window[0] <= at < window[1]]
    # and the successor holds every lease, under its own generation, each taken over (a new epoch)
    leases = engine.store.shard_leases()
    assert {lease.owner for lease in leases} == {new.name} and len(leases) == engine.store.shards


@pytest.mark.parametrize("late_ms", [0, 3_000, 12_000])
def test_shards_owned_counts_each_shard_once_through_the_hand_over(
    engine: Engine, clock: ManualClock, late_ms: int
) -> None:
    # Given instance 0's invocation of minute G, and the next minute's, delivered late_ms late
    fleet = Fleet(engine, clock)
    g = first_minute(clock)
    old = fleet.invoke(0, 1, g, g * PERIOD_MS)
    new = fleet.invoke(0, 1, g + 1, (g + 1) * PERIOD_MS + late_ms)
    end = new.started_at + 30_000
    fleet.run_until(end)
    # Then the fleet's ShardsOwned reports add up to the shard count in every window, the one of the
    # hand-over too (counted by the predecessor, which held the shards as it began), from the first
    # window the predecessor ran through to the last complete one: the alarm's sum / 6 is exact
    windows = range(old.started_at // SHARDS_OWNED_EVERY_MS + 1, end // SHARDS_OWNED_EVERY_MS)
    totals = dict.fromkeys(windows, 0.0)
    for window, value in fleet.owned:
        if window in totals:
            totals[window] += value
    assert totals == dict.fromkeys(windows, float(engine.store.shards))


def test_an_invocation_without_successor_hands_its_shards_to_the_other_instances_before_the_window(
    engine: Engine, clock: ManualClock
) -> None:
    # Given two instances; instance 0's invocation of minute G gets no successor (EventBridge lost it)
    fleet = Fleet(engine, clock)
    g = first_minute(clock)
    lost = fleet.invoke(0, 2, g, g * PERIOD_MS)
    fleet.invoke(1, 2, g, g * PERIOD_MS)
    fleet.invoke(1, 2, g + 1, (g + 1) * PERIOD_MS + 1_000)
    end = (g + 1) * PERIOD_MS + 55_000  # the next claim window begins
    fleet.run_until(end)
    # Then it stopped at second 40 and released its shards, which instance 1 took over at once:
    # no shard waited for a lease to expire, and all are held before the claim window
    hand_over_by = (g + 1) * PERIOD_MS + HAND_OVER_BY_S * 1000
    assert max(fleet.scans_of(lost.name)) < hand_over_by
    gaps = longest_gaps(fleet.scans, engine.store.shards, lost.started_at, end)
    assert max(gaps.values()) <= RENEW_MS + TICK_MS, gaps
    held = {lease.shard: lease.owner for lease in engine.store.shard_leases() if lease.expires_at >= end}
    assert held == dict.fromkeys(range(engine.store.shards), invocation.owner(1, g + 1))


def test_a_predecessor_delivered_after_its_successor_claims_nothing(engine: Engine, clock: ManualClock) -> None:
    # Given minute G+1's invocation holds the shards, and minute G's event arrives only now
    fleet = Fleet(engine, clock)
    g = first_minute(clock)
    new = fleet.invoke(0, 1, g + 1, (g + 1) * PERIOD_MS)
    fleet.run_until(new.started_at + 2_000)
    stale = fleet.invoke(0, 1, g, new.started_at + 2_500)
    fleet.run_until(new.started_at + 10_000)
    # Then the stale invocation sees its successor at its first refresh and stops without a scan
    assert fleet.scans_of(stale.name) == []
    assert stale.scheduler.ownership.handed_over
    assert {lease.owner for lease in engine.store.shard_leases()} == {new.name}


def test_a_successor_takes_live_leases_of_its_own_instance_only(engine: Engine, clock: ManualClock) -> None:
    # The store's hand-over rule (rules.succeeds), on both engines
    store, now, ttl = engine.store, clock.now_ms(), 10_000
    held = store.acquire_shard(0, "scheduler-0@100", now, ttl)
    assert held is not None
    for stranger in ("scheduler-0@99", "scheduler-0@100x", "scheduler-1@101", "scheduler-0", "other@101"):
        assert store.acquire_shard(0, stranger, now + 1, ttl) is None, stranger
    taken = store.acquire_shard(0, "scheduler-0@101", now + 1, ttl)
    assert taken is not None and taken.epoch == held.epoch + 1 and taken.owner == "scheduler-0@101"
    # the predecessor's lease is fenced off: it can neither renew nor release the successor's
    assert store.renew_shard(held, now + 2, ttl) is None
    store.release_shard(held)
    (lease,) = store.shard_leases()
    assert (lease.owner, lease.epoch, lease.expires_at) == ("scheduler-0@101", taken.epoch, now + 1 + ttl)
