"""A pre-leasing worker makes an instant's calls ahead of it and lets them go at the instant
(``Worker._arm``, ``AsyncTargets.arm``): nothing reaches the target before the instant, the starts
are stamped at it, and every run is delivered once."""

from __future__ import annotations

from typing import Any

import pytest

from punctual.clock import SystemClock
from punctual.execution import reserving
from punctual.execution.loop import Tuning
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets.abilities import Cancellable, Reply
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.wire_call import Volley
from punctual.execution.worker import Worker
from punctual.model import HttpTarget, Job, Run, RunState
from tests.conftest import make_embedded_engine
from tests.contract.test_worker import serving, wait_for_successes
from tests.contract.test_worker_signing import LOCAL, schedule
from tests.unit.test_signing_wire import Receiver, receiver

pytestmark = pytest.mark.contract
__all__ = ["receiver"]  # the fixture


def test_an_instants_calls_are_made_ahead_and_none_reaches_the_target_before_it(
    tmp_path: Any, receiver: Receiver
) -> None:
    # Given six runs due 1.5 s from now, to a real HTTP server, on a worker that pre-leases (real time)
    clock = SystemClock()
    engine = make_embedded_engine(tmp_path, clock)  # type: ignore[arg-type]
    armed_at: list[int] = []
    released: list[tuple[int, int]] = []  # (when, requests the target had by then)

    class Recording(AsyncTargets):
        def arm(
            self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply, *, volley: Volley
        ) -> Cancellable | None:
            call = super().arm(job, run, attempt, timeout_s, reply, volley=volley)
            if call is not None:
                armed_at.append(clock.now_ms())
            return call

        def release(self, volley: Volley) -> None:
            released.append((clock.now_ms(), len(receiver.received)))
            super().release(volley)

    try:
        at = clock.now_ms() + 1500
        targets = [HttpTarget(url=f"http://127.0.0.1:{receiver.port}/hook/{i}") for i in range(6)]
        runs = schedule(engine, clock, targets, at)
        worker = Worker(
            engine,
            clock,
            targets=lambda: Recording(LOCAL, keys=engine.keys),
            options=ExecutionOptions(lease_margin_s=1, prelease_s=2, min_heartbeat_s=0.2),
            tuning=Tuning(max_in_flight=16, receive_batch=10, receivers=1, wait_s=0.1),
            worker_id="w1",
        )
        # When it serves them
        with serving(worker) as stop:
            wait_for_successes(worker, len(runs), stop)
        # Then every call was made before the instant and let go at it, when the target had seen
        # nothing yet; each run was delivered once, its attempt started at the instant or after
        assert worker.outcomes[Outcome.SUCCEEDED] == len(runs)
        assert len(armed_at) == len(runs) and max(armed_at) < at
        assert len(released) == 1 and released[0][0] >= at and released[0][1] == 0
        assert sorted(one.headers["x-punctual-run-id"] for one in receiver.received) == sorted(r.run_id for r in runs)
        for run in runs:
            stored = engine.store.get_run(run.job_id, at)
            assert stored is not None and (stored.state, stored.attempt) == (RunState.SUCCEEDED, 1)
            assert stored.started_at is not None and stored.started_at >= at
    finally:
        engine.close()


def test_an_armed_call_is_not_taken_for_a_lease_by_a_heartbeat_before_its_instant(
    tmp_path: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given runs whose calls are armed 1.3 s before their instant, with heartbeats due every 0.67 s
    # (a 1 s timeout and a 1 s margin: a third of the 2 s lease)
    monkeypatch.setattr(reserving, "BEGIN_AHEAD_MS", 1_300)
    clock = SystemClock()
    engine = make_embedded_engine(tmp_path, clock)  # type: ignore[arg-type]
    try:
        at = clock.now_ms() + 1_500
        targets = [HttpTarget(url=f"http://127.0.0.1:{receiver.port}/beat/{i}") for i in range(3)]
        runs = schedule(engine, clock, targets, at, timeout_s=1)
        worker = Worker(
            engine,
            clock,
            policy=LOCAL,
            options=ExecutionOptions(lease_margin_s=1, prelease_s=2, min_heartbeat_s=0.1),
            tuning=Tuning(max_in_flight=16, receive_batch=10, receivers=1, wait_s=0.1),
            worker_id="w1",
        )
        # When it serves them
        with serving(worker) as stop:
            wait_for_successes(worker, len(runs), stop)
        # Then no heartbeat cut an armed call (a reserved run has no lease to extend before its
        # confirm): each run was called once, at its instant, in one attempt
        assert worker.outcomes[Outcome.SUCCEEDED] == len(runs) and worker.outcomes[Outcome.LEASE_LOST] == 0
        assert len(receiver.received) == len(runs)
        for run in runs:
            stored = engine.store.get_run(run.job_id, at)
            assert stored is not None and (stored.state, stored.attempt, len(stored.attempts)) == (
                RunState.SUCCEEDED,
                1,
                1,
            )
    finally:
        engine.close()
