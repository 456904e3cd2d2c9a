"""Deadline alerts end to end over HTTP on the embedded engine (issue 33, section 2): a job created
with ``deadline_s`` whose target is slow gets a ``deadline_missed`` alert for its run, and its cron
instant that no scheduler claimed (none runs here) a ``run_missed`` alert, both in ``GET /alerts``,
once each however often the reaper ticks. The API's clock is moved forward by hand (the stack's
clock is a SystemClock with an offset); the worker really holds the slow call meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from punctual.clock import SystemClock
from punctual.runtime.assembly import Runtime
from tests.e2e.conftest import ApiClient
from tests.e2e.contract_http import wait_for
from tests.e2e.local_stack import local_stack
from tests.faults.real_workers import Target, serving

pytestmark = pytest.mark.e2e

KEY, OWNER = "deadlines-key-0123456789", "deadlines-owner"
WAIT_S = 20.0


class Slow(Target):
    """Answers 200 once the test releases it (bounded), counting the calls that arrived."""

    def do_POST(self) -> None:
        self.read_body()
        self.server.arrived.set()
        self.server.release.wait(WAIT_S)
        self.answer()


@pytest.fixture(scope="module")
def slow() -> Iterator[Any]:
    yield from serving(Slow, arrived=threading.Event(), release=threading.Event())


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiClient, Runtime, SystemClock]]:
    with local_stack(tmp_path_factory.mktemp("deadlines"), KEY, OWNER) as stack:
        yield stack.api, stack.runtime, stack.clock


def test_a_slow_run_and_an_unclaimed_instant_alert_their_owner_once(system, slow):
    api, runtime, clock = system
    spec = {
        "name": "hourly-export",
        "schedule": "*/5 * * * *",
        "target": {"url": f"http://127.0.0.1:{slow.server_address[1]}/export"},
        "timeout_s": 900,  # the lease outlives the jump below: the reaper leaves the run to its worker
        "max_retries": 0,
        "deadline_s": 60,
    }
    # a bad deadline is refused, naming the field, and creates nothing
    bad = api.post("/jobs", json={**spec, "deadline_s": 30})
    assert (bad.status_code, [d["field"] for d in bad.json()["details"]]) == (422, ["deadline_s"])
    created = api.post("/jobs", json=spec)
    assert (created.status_code, created.json()["deadline_s"]) == (201, 60), created.text
    job = created.json()
    run = api.post(f"/jobs/{job['id']}/trigger").json()
    assert slow.arrived.wait(WAIT_S)  # the worker holds the slow call

    # ten minutes later (the clock moved by hand): the run is still running, and the job's next
    # instant (within 5 minutes of its creation) passed over a minute ago with no scheduler to claim it
    clock.offset_ms += 10 * 60_000
    reaper = runtime.reaper(interval_s=0.3)
    assert reaper.tick().deadline_alerts == 2
    assert reaper.tick().deadline_alerts == 0  # once each, however often it looks
    alerts = [a for a in api.get("/alerts").json()["items"] if a["job_id"] == job["id"]]
    by_kind = {a["kind"]: a for a in alerts}
    assert sorted(by_kind) == ["deadline_missed", "run_missed"] and len(alerts) == 2
    assert by_kind["deadline_missed"]["run_id"] == run["run_id"]
    assert "deadline_s=60" in by_kind["deadline_missed"]["reason"]
    assert (
        by_kind["run_missed"]["run_id"] == f"run_{job['id'][4:]}_{runtime.engine.store.get_job(job['id']).next_run_at}"
    )

    # an edit moves the deadline, and null removes it
    assert api.patch(f"/jobs/{job['id']}", json={"deadline_s": 120}).json()["deadline_s"] == 120
    assert api.patch(f"/jobs/{job['id']}", json={"deadline_s": None}).json()["deadline_s"] is None

    # the slow call answers at last: the run succeeds, and its alert stays the one it had
    slow.release.set()
    wait_for(lambda: api.get(f"/runs/{run['run_id']}").json()["state"] == "succeeded", WAIT_S)
    assert len([a for a in api.get("/alerts").json()["items"] if a["job_id"] == job["id"]]) == 2
