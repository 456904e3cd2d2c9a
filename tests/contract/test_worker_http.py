"""The async worker with its real HTTP targets (``AsyncTargets``: calls by callback, no task per
run) on both engines: what the scripted targets of ``test_worker`` cannot show.

The target is a socket server on 127.0.0.1 (``RawServer`` from ``tests/unit/test_async_targets``).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.execution.loop import Running
from punctual.execution.options import Outcome
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.wire import Call
from punctual.execution.worker import Worker
from punctual.metrics import InMemoryMetrics
from punctual.model import HttpTarget, RunState
from punctual.port import Engine
from tests.contract.test_worker import OPTIONS, new_runs, process_cancelling_under_it, received, stored
from tests.unit.test_async_targets import OK, raw

pytestmark = pytest.mark.contract
__all__ = ["raw"]  # the fixture


def http_worker(engine: Engine, clock: ManualClock, metrics: InMemoryMetrics | None = None) -> Worker:
    return Worker(
        engine, clock, policy=TargetPolicy(allow_loopback=True), options=OPTIONS, worker_id="w1", metrics=metrics
    )


def test_attempts_by_callback_succeed_and_leave_no_cycle_for_the_collector(engine, clock, raw):
    # Given three runs whose target answers 200 on one keep-alive connection
    srv = raw([OK] * 3)
    runs = new_runs(engine, clock, 3, target=HttpTarget(url=f"http://127.0.0.1:{srv.port}/hook"))
    sink = InMemoryMetrics()
    w = http_worker(engine, clock, sink)
    deliveries = received(engine, 3)

    async def go() -> list[Any]:
        async with w.session():
            return await w.process(deliveries)

    # When the worker executes them with the collector off, keeping whatever it would collect
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        outcomes = asyncio.run(go())
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, Running | Call)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # Then each succeeded, was counted once, and what carried its call was freed when it ended
    # (a cycle would keep each run's job and run alive until a collection: thousands in a burst)
    assert outcomes == [Outcome.SUCCEEDED] * 3
    assert all(stored(engine, run).state is RunState.SUCCEEDED for run in runs)
    assert w.outcomes == {Outcome.SUCCEEDED: 3} and sink.counters[m.RUNS_SUCCEEDED] == 3
    assert left == []


def test_a_lease_lost_during_an_http_call_cuts_the_call_and_writes_nothing(engine, clock, raw):
    # Given a run whose HTTP target never answers
    srv = raw([b"HANG"])
    [run] = new_runs(engine, clock, 1, target=HttpTarget(url=f"http://127.0.0.1:{srv.port}/hook"), timeout_s=30)
    w = http_worker(engine, clock)
    deliveries = received(engine, 1)

    # When the next heartbeat finds the lease gone, the attempt is abandoned: the run is untouched
    assert process_cancelling_under_it(w, engine, clock, run, deliveries) == [Outcome.LEASE_LOST]
    assert stored(engine, run).state is RunState.CANCELLED
    assert w.outcomes == {Outcome.LEASE_LOST: 1}
