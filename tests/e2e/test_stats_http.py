"""GET /stats over HTTP on both engines: the caller's figures only (the deployment's queues to
operators only), the documented shape, windows up to 7 days in coarser buckets, bad input 422."""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.model import RunState
from punctual.port import RunChange
from punctual.port.stats import LATENESS_BOUNDS_MS
from tests.contract.factories import make_run
from tests.e2e.conftest import ADMIN_OWNER, Stack

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
    assert body["bucket_minutes"] == 1
    assert (body["clock_skew_ms"] is None) == (stack.name == "embedded")
    assert body["runs_counted"] is True
    assert theirs.status_code == 200 and theirs.json()["totals"]["succeeded"] == 0
    assert theirs.json()["lateness"]["p50_ms"] is None


def test_an_owner_sees_its_own_backlog_and_never_the_deployments_queue(stack: Stack) -> None:
    # Given alice with one due run waiting (triggered, no worker here) and bob with none
    alice, bob, operator = stack.client(), stack.client(), stack.client(ADMIN_OWNER)
    job = alice.create(name="backlog-probe")
    assert alice.post(f"/jobs/{job['id']}/trigger").status_code == 202

    # When each asks for its figures
    mine, theirs, ops = (c.get("/stats", params={"minutes": 5}).json() for c in (alice, bob, operator))

    # Then each owner sees its own backlog, and no owner gets the queue figures (shared by every
    # owner: a depth would tell one owner how busy the others are); an operator gets them
    assert mine["open_runs"] == {"waiting": 1, "executing": 0, "complete": True}
    assert theirs["open_runs"] == {"waiting": 0, "executing": 0, "complete": True}
    assert mine["queue"] is None and theirs["queue"] is None
    assert ops["queue"]["depth"] is not None and ops["queue"]["dead_letters"] is not None


@pytest.mark.parametrize(("minutes", "bucket", "buckets"), [(360, 1, 360), (1440, 5, 288), (10080, 60, 168)])
def test_long_windows_come_in_coarser_buckets(stack: Stack, minutes: int, bucket: int, buckets: int) -> None:
    alice = stack.client()
    job = alice.create(name="window-probe")
    _finish_a_run(stack, job["id"], late_ms=30, state=RunState.SUCCEEDED)

    body = alice.get("/stats", params={"minutes": minutes}).json()

    assert body["bucket_minutes"] == bucket
    # whole buckets on round times, the last one holding the current minute
    assert buckets <= len(body["per_minute"]) <= buckets + 1
    assert all(int(m["minute"][14:16]) % bucket == 0 for m in body["per_minute"])
    assert sum(m["succeeded"] for m in body["per_minute"]) == body["totals"]["succeeded"] == 1


@pytest.mark.parametrize("minutes", ["0", "10081", "x"])
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

    # Then the run figures are null and marked so, the backlog still answered (and documented)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["runs_counted"] is False
    assert (body["totals"], body["per_minute"], body["lateness"]) == (None, None, None)
    assert body["open_runs"] == {"waiting": 0, "executing": 0, "complete": True}
    assert body["since"] < body["until"]

    # And nothing was written for it: with the counters back on, the run is still not counted
    monkeypatch.setattr(stack.engine.store, "stats_counters", True)
    counted = alice.get("/stats", params={"minutes": 5}).json()
    assert counted["runs_counted"] is True and counted["totals"]["succeeded"] == 0
