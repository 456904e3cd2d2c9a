"""GET /stats over HTTP on both engines: the caller's figures only, the documented shape, bad input 422."""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.model import RunState
from punctual.port import RunChange
from punctual.port.stats import LATENESS_BOUNDS_MS
from tests.contract.factories import make_run
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e


def _finish_a_run(stack: Stack, job_id: str, *, late_ms: int, state: RunState) -> None:
    """A run of the job, finished now through the port, as a worker would."""
    store = stack.engine.store
    now = stack.clock.now_ms()
    job = store.get_job(job_id)
    scheduled_at = now - late_ms - 1_000
    store.insert_runs([make_run(job, scheduled_at, ManualClock(now))])
    store.lease_run(job_id, scheduled_at, "w1", scheduled_at + late_ms, 60_000)
    store.finish_run(job_id, scheduled_at, "w1", 1, RunChange(state=state, now=now, deadline_at=now, finished_at=now))


def test_stats_count_the_callers_runs_only(stack: Stack) -> None:
    alice, bob = stack.client(), stack.client()
    job = alice.create(name="stats-probe")
    _finish_a_run(stack, job["id"], late_ms=30, state=RunState.SUCCEEDED)
    _finish_a_run(stack, job["id"], late_ms=4_000, state=RunState.FAILED)

    mine = alice.get("/stats", params={"minutes": 5})
    theirs = bob.get("/stats")

    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert body["totals"] == {"succeeded": 1, "failed": 1, "dead": 0, "cancelled": 0}
    assert len(body["per_minute"]) == 5  # the current minute and the four before it
    assert sum(m["succeeded"] + m["failed"] for m in body["per_minute"]) == 2
    assert body["lateness"]["count"] == 2
    assert body["lateness"]["p50_ms"] == 50 and body["lateness"]["p99_ms"] == 5_000
    assert [b["le_ms"] for b in body["lateness"]["buckets"]] == [*LATENESS_BOUNDS_MS, None]
    assert body["queue"]["depth"] is not None and body["queue"]["dead_letters"] is not None
    assert (body["clock_skew_ms"] is None) == (stack.name == "embedded")
    assert body["runs_counted"] is True
    assert theirs.status_code == 200 and theirs.json()["totals"]["succeeded"] == 0
    assert theirs.json()["lateness"]["p50_ms"] is None


@pytest.mark.parametrize("minutes", ["0", "361", "x"])
def test_stats_window_is_checked(stack: Stack, minutes: str) -> None:
    response = stack.client().get("/stats", params={"minutes": minutes})
    assert response.status_code == 422, response.text


def test_stats_need_a_caller(stack: Stack) -> None:
    assert stack.anonymous().get("/stats").status_code == 401


def test_without_counters_the_run_figures_are_unavailable_not_zero(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    if stack.name != "aws":
        pytest.skip("stats_counters is the aws engine's option (embedded derives its figures from an index)")
    # Given a deployment without run counters (-c stats_counters=false, Settings.stats_counters)
    monkeypatch.setattr(stack.engine.store, "stats_counters", False)
    alice = stack.client()
    job = alice.create(name="stats-uncounted")

    # When a run finishes and the owner asks for the figures
    _finish_a_run(stack, job["id"], late_ms=30, state=RunState.SUCCEEDED)
    response = alice.get("/stats", params={"minutes": 5})

    # Then the run figures are null and marked so, the queue figures still answered (and documented)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["runs_counted"] is False
    assert (body["totals"], body["per_minute"], body["lateness"]) == (None, None, None)
    assert body["queue"]["depth"] is not None and body["queue"]["dead_letters"] is not None
    assert body["since"] < body["until"]

    # And nothing was written for it: with the counters back on, the run is still not counted
    monkeypatch.setattr(stack.engine.store, "stats_counters", True)
    counted = alice.get("/stats", params={"minutes": 5}).json()
    assert counted["runs_counted"] is True and counted["totals"]["succeeded"] == 0
