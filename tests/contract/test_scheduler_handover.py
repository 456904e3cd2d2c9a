"""The minute hand-over of a scheduler Lambda instance, on both engines: two consecutive
invocations, the second started late by EventBridge, leave no shard unscanned for more than one
tick (``punctual.scheduling.invocation``).

The invocations are simulated on a ManualClock with the real Scheduler, shard leases and store:
each active invocation ticks every second, as ``Scheduler.run`` does, until the deadline the
Lambda handler computes from its remaining time. Every due-index query is recorded per shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.port import Engine
from punctual.scheduling.invocation import SAFETY_MS, TIMEOUT_S, overlap_ms, run_until_ms
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions

pytestmark = pytest.mark.contract

TIMEOUT_MS = TIMEOUT_S * 1000
COLD_START_MS = 800  # the handler reads its remaining time after the runtime and imports started
TICK_MS = SchedulerOptions().tick_ms


class ScanRecorder:
    """The store, recording (time, shard) of every due-index query."""

    def __init__(self, store: Any, clock: ManualClock) -> None:
        self._store, self._clock = store, clock
        self.scans: list[tuple[int, int]] = []

    def due_jobs(self, shard: int, *args: Any, **kwargs: Any) -> Any:
        self.scans.append((self._clock.now_ms(), shard))
        return self._store.due_jobs(shard, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclass
class Invocation:
    started_at: int
    until: int
    scheduler: Scheduler


def _invoke(engine: Any, clock: ManualClock, started_at: int) -> Invocation:
    """What the handler does: instance 0 of 1 under its stable owner name, ticking until its deadline."""
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), instance=0, instances=1, owner="scheduler-0")
    remaining = TIMEOUT_MS - COLD_START_MS
    return Invocation(started_at, run_until_ms(started_at + COLD_START_MS, remaining), scheduler)


def _simulate(engine: Engine, clock: ManualClock, late_ms: int) -> tuple[ScanRecorder, int, int]:
    recorder = ScanRecorder(engine.store, clock)
    view = SimpleNamespace(store=recorder, queue=engine.queue)
    t0 = (clock.now_ms() // 60_000 + 1) * 60_000
    first = _invoke(view, clock, t0)
    second = _invoke(view, clock, t0 + 60_000 + late_ms)  # EventBridge delivered it late
    end = second.started_at + 20_000
    # Each invocation ticks on its own one-second cadence from its own start.
    events = sorted(
        (inv.started_at + COLD_START_MS + k * TICK_MS, n)
        for n, inv in enumerate((first, second))
        for k in range((inv.until - inv.started_at) // TICK_MS + 1)
        if inv.started_at + COLD_START_MS + k * TICK_MS < inv.until
    )
    for at, n in events:
        if at > end:
            break
        clock.set(at)
        (first, second)[n].scheduler.tick()
    return recorder, first.started_at + COLD_START_MS, end


def _longest_gaps(recorder: ScanRecorder, shards: int, start: int, end: int) -> dict[int, int]:
    by_shard: dict[int, list[int]] = {s: [] for s in range(shards)}
    for at, shard in recorder.scans:
        by_shard[shard].append(at)
    gaps = {}
    for shard, scanned in by_shard.items():
        times = sorted({start, *scanned, end})
        gaps[shard] = max(b - a for a, b in pairwise(times))
    return gaps


def test_the_stack_gives_consecutive_invocations_an_overlap() -> None:
    # The scheduler's 75 s timeout leaves a 10 s overlap after the 5 s safety margin.
    assert overlap_ms(TIMEOUT_S) == TIMEOUT_MS - SAFETY_MS - 60_000 >= 10_000


@pytest.mark.parametrize("late_ms", [0, 3_000, 8_000])
def test_a_late_next_invocation_leaves_no_shard_unscanned_for_more_than_one_tick(
    engine: Engine, clock: ManualClock, late_ms: int
) -> None:
    # Given two consecutive invocations of one instance, the second started late_ms late
    assert late_ms + COLD_START_MS < overlap_ms(TIMEOUT_S)
    recorder, start, end = _simulate(engine, clock, late_ms)
    # Then every shard was scanned at least once a tick, through the whole hand-over
    gaps = _longest_gaps(recorder, engine.store.shards, start, end)
    assert max(gaps.values()) <= TICK_MS, gaps
    # and the second invocation holds every lease once the first has stopped
    assert {lease.owner for lease in engine.store.shard_leases()} == {"scheduler-0"}


def test_an_invocation_that_stopped_after_59_s_would_have_left_a_gap(engine: Engine, clock: ManualClock) -> None:
    # The old deadline (59 s, whatever the timeout) against a start 3 s late: the shards wait.
    recorder = ScanRecorder(engine.store, clock)
    view = SimpleNamespace(store=recorder, queue=engine.queue)
    t0 = (clock.now_ms() // 60_000 + 1) * 60_000
    old = Scheduler(view, clock, metrics=m.InMemoryMetrics(), owner="scheduler-0")  # type: ignore[arg-type]
    new = Scheduler(view, clock, metrics=m.InMemoryMetrics(), owner="scheduler-0")  # type: ignore[arg-type]
    for k in range(59):
        clock.set(t0 + k * TICK_MS)
        old.tick()
    for k in range(5):
        clock.set(t0 + 63_000 + k * TICK_MS)
        new.tick()
    gaps = _longest_gaps(recorder, engine.store.shards, t0, t0 + 67_000)
    assert max(gaps.values()) > TICK_MS
