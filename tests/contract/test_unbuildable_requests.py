"""A run whose request cannot be built fails once, not retryably, on both worker paths and both engines.

Issue 26 case 4: ``"headers": {"X-Price": "5 €"}`` was accepted, then every attempt failed retryably
with a UnicodeEncodeError until the run was dead, and the target was never called; so did URLs the
create check let through (full-width digits, ``%09`` in the host). The API now refuses them
(tests/e2e/test_api_http.py); a job stored before that (built here without the API) meets the same
rules when its request is built, and its run ends ``failed`` after exactly one attempt that names
the problem, on the async worker (``Worker`` with its real ``AsyncTargets``) and on the
per-message path (``process_delivery`` with the blocking ``Targets``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution.options import Outcome
from punctual.execution.targets import Targets
from punctual.execution.targets.policy import TargetPolicy
from punctual.model import AttemptOutcome, HttpTarget, RunState
from punctual.port import Engine
from tests.contract.test_execution import create_job, process, receive_one, schedule_run
from tests.contract.test_execution import stored as stored_run
from tests.contract.test_worker import new_runs, received
from tests.contract.test_worker_http import http_worker
from tests.unit.test_async_targets import OK, raw

pytestmark = pytest.mark.contract
__all__ = ["raw"]  # the fixture

LOOPBACK = TargetPolicy(allow_loopback=True)


def unbuildable(port: int) -> list[tuple[str, HttpTarget]]:
    """Targets the create check refuses now, as a job stored before it did would hold them."""
    hook = f"http://127.0.0.1:{port}/hook"
    return [
        ("header-not-latin-1", HttpTarget(url=hook, headers={"X-Price": "5 €"})),
        ("header-latin-1", HttpTarget(url=hook, headers={"X-Name": "café"})),
        ("full-width-host", HttpTarget(url=f"http://\uff11\uff12\uff17.0.0.1:{port}/hook")),
        ("tab-escaped-in-host", HttpTarget(url=f"http://127.0.0.1%09:{port}/hook")),
        ("full-width-port", HttpTarget(url="http://127.0.0.1:\uff18\uff10/hook")),
    ]


CASES = [name for name, _ in unbuildable(0)]


def target_of(case: str, port: int) -> HttpTarget:
    return dict(unbuildable(port))[case]


def assert_failed_once(run: Any) -> None:
    assert run.state is RunState.FAILED and run.attempt == 1, (run.state, run.attempt, run.attempts)
    [attempt] = run.attempts
    assert attempt.outcome is AttemptOutcome.FAILED
    assert "cannot be built" in (attempt.error or ""), attempt.error
    assert "not retryable" in (run.note or "")


@pytest.mark.parametrize("case", CASES)
def test_the_async_worker_fails_the_run_once_without_calling_the_target(
    engine: Engine, clock: ManualClock, raw: Any, case: str
) -> None:
    # Given a stored job whose request cannot be built, with retries left, and a target that would answer
    srv = raw([OK])
    [run] = new_runs(engine, clock, 1, target=target_of(case, srv.port), max_retries=3)
    w = http_worker(engine, clock)
    deliveries = received(engine, 1)

    async def go() -> list[Any]:
        async with w.session():
            return await w.process(deliveries)

    # When the async worker executes it
    outcomes = asyncio.run(go())
    # Then the run failed for good on attempt 1, saying why, and the target was never called
    assert outcomes == [Outcome.FAILED]
    assert_failed_once(engine.store.get_run(run.job_id, run.scheduled_at))
    assert srv.connections == 0


@pytest.mark.parametrize("case", CASES)
def test_the_per_message_path_fails_the_run_once_without_calling_the_target(
    engine: Engine, engine_kind: str, clock: ManualClock, raw: Any, case: str
) -> None:
    # Given the same job, handled one message at a time with the blocking targets
    srv = raw([OK])
    job = create_job(engine, clock, target=target_of(case, srv.port), max_retries=3)
    run = schedule_run(engine, clock, job)
    # When process_delivery handles its message
    outcome = process(engine, clock, receive_one(engine, engine_kind), Targets(LOOPBACK), alerter=None)
    # Then the run failed for good on attempt 1, and the target was never called
    assert outcome is Outcome.FAILED
    assert_failed_once(stored_run(engine, run))
    assert srv.connections == 0
