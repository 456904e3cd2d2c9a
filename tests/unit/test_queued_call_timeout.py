"""A call that waited for a connection behind the per-host cap (``--max-connections-per-host``) until
its timeout never reached the target: found by the HTTP attack of 2026-12-02 (attack16_6.py), where
84 of 100 runs to a slow webhook, behind a cap of 8 connections per worker, ended ``dead`` after one
attempt recorded as "target did not answer within 2 s" while the webhook never saw their requests.
docs/api.md says a lower cap costs lateness. The attempt's result says what happened: no connection
within the timeout, a retryable failure that does not blame the target for a request never sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from punctual.execution.targets.aio import AsyncTargets
from punctual.model import HttpTarget
from tests.unit.local_target import INVOCATION, LOCAL, job_with, run_of
from tests.unit.test_async_targets import OK, raw

pytestmark = pytest.mark.unit
__all__ = ["raw"]  # the fixture


def test_a_call_that_never_got_a_connection_is_not_recorded_as_unanswered_by_the_target(raw: Any) -> None:
    # Given one connection allowed per host, to a server that never answers the first request
    srv = raw([b"HANG", OK])
    targets = AsyncTargets(LOCAL, max_connections_per_host=1)
    first = job_with(HttpTarget(url=f"http://127.0.0.1:{srv.port}/a"))
    second = job_with(HttpTarget(url=f"http://127.0.0.1:{srv.port}/b"))

    async def go() -> list[Any]:
        try:
            # When two attempts start at once, each with a 0.3 s timeout
            return list(
                await asyncio.gather(
                    targets.execute(first, run_of(first), INVOCATION.attempt, 0.3),
                    targets.execute(second, run_of(second), INVOCATION.attempt, 0.3),
                )
            )
        finally:
            targets.close()

    hung, waited = asyncio.run(go())
    # Then the server saw one connection (the second request was never written), the first attempt
    # timed out unanswered, and the second's result does not say the target did not answer
    assert srv.connections == 1
    assert not hung.ok and "did not answer" in (hung.error or "")
    assert not waited.ok and "did not answer" not in (waited.error or "")
    assert waited.retryable and not waited.timed_out
    assert (waited.error or "").startswith("no connection to the target's host within 0.3 s")
