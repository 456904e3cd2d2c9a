"""A keyed limit under real worker processes and a SIGKILL, on both engines (as test_tenant_limits.py
does for an owner's max_concurrency): jobs of one owner sharing the literal key ``upstream-api``
with max_concurrency 3, the owner itself unlimited, a burst against a 0.5 s target, a worker killed
mid-run. The target never sees more than 3 of the key's calls at once, the killed runs are taken
over in their slots, every run succeeds, no slot is left held, and the waits said which key.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from punctual.clock import SystemClock
from punctual.model import JobLimit, Run, RunState
from punctual.port import Dispatch, Engine
from punctual.tenancy.keyed import key_scope
from tests.faults import real_workers
from tests.faults.real_workers import Backend, hook_job, stop
from tests.faults.test_tenant_limits import OWNER, states, target, workers
from tests.waiting import eventually

pytestmark = pytest.mark.faults

backend = real_workers.backend
__all__ = ["backend", "target"]  # the fixtures this module uses from its neighbours
CAP = 3
KEY = "upstream-api"


def keyed_burst(engine: Engine, target: Any, count: int) -> list[Run]:
    now = SystemClock().now_ms()
    runs = []
    for i in range(count):
        job = hook_job(
            target, owner=OWNER, name=f"keyed-{i}", schedule="0 0 1 1 *", max_retries=2, now=now,
            next_run_at=now + 3_600_000,
        ).model_copy(update={"limits": [JobLimit(key=KEY, max_concurrency=CAP)]})  # fmt: skip
        engine.store.create_job(job)
        runs.append(Run(job_id=job.id, scheduled_at=now, owner=OWNER, deadline_at=now + 600_000, created_at=now))
    engine.store.insert_runs(runs)
    engine.queue.send([Dispatch(run.run_id, not_before=now, group=OWNER) for run in runs])
    return runs


def test_a_keyed_cap_holds_through_a_killed_worker(backend: Backend, target: Any) -> None:
    # Given runs of jobs sharing a keyed max_concurrency 3, executed by worker A alone at first
    engine = backend.engine
    count = 9 if backend.embedded else 6
    target.delay_s = 0.5
    runs = keyed_burst(engine, target, count)
    scope = key_scope(OWNER, KEY)
    notes: set[str | None] = set()
    [a] = workers(backend, ["keyed-a"])
    b: list[Any] = []
    try:
        assert eventually(lambda: target.in_flight >= 1, timeout_s=30), "worker A never called the target"
        time.sleep(0.3)
        notes |= {r.note for r in states(engine, runs) if r.state is RunState.SCHEDULED}
        # When A is killed mid-run (its runs hold the key's slots) and worker B starts
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        held = engine.store.slot_holders(scope)
        assert 1 <= len(held) <= CAP
        b = workers(backend, ["keyed-b"])
        done = lambda: all(r.state is RunState.SUCCEEDED for r in states(engine, runs))  # noqa: E731
        assert eventually(done, timeout_s=count * 1.0 + 90), [r.state for r in states(engine, runs)]
    finally:
        stop([a, *b])
    # Then the key's cap held throughout, only the killed attempts were retried, no slot is left
    assert 2 <= target.most <= CAP, target.most
    finished = states(engine, runs)
    assert {r.run_id for r in finished if r.attempt == 2} <= set(held)
    assert engine.store.slot_holders(scope) == {} and engine.store.slot_holders(OWNER) == {}
    assert f"waiting: limit {KEY} max_concurrency {CAP} reached" in notes
