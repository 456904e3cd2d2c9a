"""A job's DST policy through the API and the claim, on both engines (issue 32, section 2).

The claim plans from the ``due`` index's projection, so the policy must travel in it: a job that
runs ``twice`` in the repeated hour is advanced from the first occurrence to the second, not to the
next day (which is what the default, ``once_first``, does for a fixed-time job)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.port import Engine, RunQuery
from punctual.scheduling.scheduler import Scheduler
from tests.contract.api_calls import call

pytestmark = pytest.mark.contract

NY = ZoneInfo("America/New_York")
TARGET = {"type": "http", "url": "https://example.com/hook"}


def _ms(*wall: int, fold: int = 0) -> int:
    return int(datetime(*wall, tzinfo=NY, fold=fold).timestamp() * 1000)  # type: ignore[misc]


def test_twice_runs_both_occurrences_of_the_repeated_hour(engine: Engine, clock: ManualClock) -> None:
    # Given the evening before New York falls back (2026-11-01 02:00 EDT -> 01:00 EST)
    clock.set(_ms(2026, 10, 31, 20))
    spec = {"name": "nightly", "schedule": "30 1 * * *", "timezone": "America/New_York", "target": TARGET}
    status, body = call(engine, clock, "POST", "/jobs", {**spec, "dst_repeated": "twice"})
    assert status == 201, body
    assert (body["dst_repeated"], body["dst_skipped"]) == ("twice", None)
    first, second = _ms(2026, 11, 1, 1, 30), _ms(2026, 11, 1, 1, 30, fold=1)
    assert engine.store.get_job(body["id"]).next_run_at == first
    # When the scheduler claims the first 01:30, then the second
    for instant in (first, second):
        clock.set(instant)
        Scheduler(engine, clock, metrics=m.InMemoryMetrics()).tick()
    # Then both occurrences ran, an hour apart, and the job moved on to the next night
    runs = engine.store.list_runs(body["id"], RunQuery(limit=10)).items
    assert sorted(r.scheduled_at for r in runs) == [first, second]
    assert engine.store.get_job(body["id"]).next_run_at == _ms(2026, 11, 2, 1, 30)
    # And a PATCH back to cron's rule (null) keeps the next time (one run a night from now on)
    status, patched = call(engine, clock, "PATCH", f"/jobs/{body['id']}", {"dst_repeated": None})
    assert status == 200 and patched["dst_repeated"] is None, patched


def test_a_policy_on_a_one_time_job_is_refused_naming_the_field(engine: Engine, clock: ManualClock) -> None:
    clock.set(_ms(2026, 10, 31, 20))
    body = {"name": "once", "run_at": "2026-11-05T09:00:00-05:00", "dst_skipped": "skip", "target": TARGET}
    status, error = call(engine, clock, "POST", "/jobs", body)
    assert status == 422 and [d["field"] for d in error["details"]] == ["dst_skipped"], error
    status, error = call(engine, clock, "POST", "/jobs", {**body, "dst_skipped": "sometimes", "run_at": None})
    assert status == 422 and "dst_skipped" in [d["field"] for d in error["details"]], error


def test_preview_lists_the_next_times_with_dst_applied(engine: Engine, clock: ManualClock) -> None:
    # Given a fixed-time job on 02:30 New York the day before clocks spring forward, skipping such times
    clock.set(_ms(2026, 3, 6, 12))
    spec = {"name": "n", "schedule": "30 2 * * *", "timezone": "America/New_York", "target": TARGET}
    status, body = call(engine, clock, "POST", "/jobs", {**spec, "dst_skipped": "skip"})
    assert status == 201, body
    # When its preview is read, then 2026-03-08 02:30 is listed as skipped, with the reason
    status, listed = call(engine, clock, "GET", f"/jobs/{body['id']}/preview?count=3")
    assert status == 200, listed
    assert [(i["local"], i["fate"], i["cause"]) for i in listed["items"]] == [
        ("2026-03-07T02:30", "run", None),
        ("2026-03-08T02:30", "skipped", "dst_skipped"),
        ("2026-03-09T02:30", "run", None),
    ]
    assert listed["items"][1]["at"] is None and "does not exist" in listed["items"][1]["detail"]
    # And a bad count is 422 naming it; another owner's job is 404
    for bad in ("0", "101", "x"):
        status, error = call(engine, clock, "GET", f"/jobs/{body['id']}/preview?count={bad}")
        assert status == 422 and error["details"][0]["field"] == "count", error
    status, _ = call(engine, clock, "GET", f"/jobs/{body['id']}/preview", owner="someone-else")
    assert status == 404
