"""The worker's calls carry a v2 signature that ``verify()`` accepts for that request only (issue 26,
case 6), on both engines (each with its own keys: a local key file, KMS through moto).

Two paths: the per-message one (``Worker.process`` on received deliveries, as the worker Lambda
runs a batch: leased at the instant, the request built then) and the long-running worker's
(``Worker.serve`` with pre-leasing: leased and built ahead, written at the instant). The receiver
is ``tests/unit/test_signing_wire.Receiver`` (``http.server`` on 127.0.0.1 and [::1]).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from punctual.clock import SystemClock
from punctual.execution.loop import Tuning
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.worker import Worker
from punctual.model import HttpTarget, Job, Run
from punctual.port import Dispatch, Engine
from tests.conftest import make_embedded_engine
from tests.contract.factories import make_job, make_run
from tests.contract.test_worker import OPTIONS, received, serving, wait_for_successes
from tests.unit.test_signing_wire import Receiver, check_signed, receiver

pytestmark = pytest.mark.contract
__all__ = ["receiver"]  # the fixture

OWNER = "owner-signing"
LOCAL = TargetPolicy(allow_loopback=True)
SHAPES = [
    ("POST", "127.0.0.1", "/hook", {}),
    ("GET", "[::1]", "/ping?x=1&x=2&empty=", {}),
    ("DELETE", "127.0.0.1", "/accounts/42?purge=1", {}),
    ("PUT", "[::1]", "/a%2Fb/c%20d?q=%E2%82%AC", {"headers": {"X-Tenant": "acme"}}),
    ("PATCH", "127.0.0.1", "/ünï?q=ü", {"signature": "v2"}),
]


def targets_of(port: int) -> list[HttpTarget]:
    return [
        HttpTarget(url=f"http://{host}:{port}{path}", method=method, **fields) for method, host, path, fields in SHAPES
    ]


def schedule(engine: Engine, clock: Any, targets: list[HttpTarget], at: int, **fields: Any) -> list[Run]:
    """One job per target (with ``fields``), each with a run due ``at``, dispatched."""
    jobs: list[Job] = [
        make_job(OWNER, clock, shards=engine.store.shards, target=target, **fields) for target in targets
    ]
    runs = [make_run(job, at, clock) for job in jobs]
    for job in jobs:
        engine.store.create_job(job)
    assert engine.store.insert_runs(runs) == [True] * len(runs)
    engine.queue.send([Dispatch(run.run_id, not_before=at) for run in runs])
    return runs


def check(receiver: Receiver, engine: Engine) -> None:
    """Every call verifies for itself only, with v1 beside v2 unless its job opted out (PATCH)."""
    check_signed(receiver.received, engine.keys.signing_secret(OWNER), v1=None)
    assert len(receiver.received) == len(SHAPES)
    for one in receiver.received:
        assert ("v1=" in one.headers["punctual-signature"]) is (one.method != "PATCH")


def test_the_per_message_path_sends_requests_that_verify(engine: Engine, clock: Any, receiver: Receiver) -> None:
    # Given one run per method and URL shape, received as the worker Lambda receives a batch
    runs = schedule(engine, clock, targets_of(receiver.port), clock.now_ms())
    worker = Worker(engine, clock, policy=LOCAL, options=OPTIONS, worker_id="w1")

    async def go() -> list[Any]:
        async with worker.session():
            return await worker.process(received(engine, len(runs)))

    # When the worker executes them
    assert asyncio.run(go()) == [Outcome.SUCCEEDED] * len(runs)
    # Then every call verifies with the owner's secret, for its own method, URL, job and run only
    assert sorted(one.headers["x-punctual-run-id"] for one in receiver.received) == sorted(r.run_id for r in runs)
    check(receiver, engine)


def test_pre_leased_runs_send_the_requests_built_ahead_and_they_verify(tmp_path: Any, receiver: Receiver) -> None:
    # Given runs due 1.5 s from now on a worker that pre-leases (real time: the instant is waited for)
    clock = SystemClock()
    engine = make_embedded_engine(tmp_path, clock)  # type: ignore[arg-type]
    built: list[str] = []

    class Recording(AsyncTargets):
        def prebuild(self, job: Job, run: Run, attempt: int) -> None:
            super().prebuild(job, run, attempt)
            if (run.run_id, attempt) in self._prebuilt:  # built (prebuild is best effort)
                built.append(run.run_id)

    try:
        runs = schedule(engine, clock, targets_of(receiver.port), clock.now_ms() + 1500)
        options = ExecutionOptions(lease_margin_s=1, prelease_s=2, min_heartbeat_s=0.2)
        worker = Worker(
            engine,
            clock,
            targets=lambda: Recording(LOCAL, keys=engine.keys),
            options=options,
            tuning=Tuning(max_in_flight=16, receive_batch=10, receivers=1, wait_s=0.1),
            worker_id="w1",
        )
        # When it serves them
        with serving(worker) as stop:
            wait_for_successes(worker, len(runs), stop)
        # Then each was built ahead of its instant, and what it sent verifies for that request only
        assert worker.outcomes[Outcome.SUCCEEDED] == len(runs)
        assert sorted(built) == sorted(run.run_id for run in runs)
        check(receiver, engine)
    finally:
        engine.close()
