"""Calendars through the API and the scheduler, on both engines (issue 32, section 1).

A calendar is owner-scoped; a job that names one has its times skipped (a cancelled run, note
"calendar ...") or moved to a business day at the same local time; an edit of the calendar is read at
the next claim, costs no write per job, and never decides a run already claimed."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.model import RunState
from punctual.port import Engine, RunQuery
from punctual.scheduling.scheduler import Scheduler
from tests.contract.api_calls import call

pytestmark = pytest.mark.contract

BERLIN = ZoneInfo("Europe/Berlin")
TARGET = {"type": "http", "url": "https://example.com/hook"}
WEEKENDS = {"timezone": "Europe/Berlin", "exclude_weekdays": ["SAT", "SUN"]}


def _ms(*wall: int) -> int:
    return int(datetime(*wall, tzinfo=BERLIN).timestamp() * 1000)  # type: ignore[misc]


def _tick(engine: Engine, clock: ManualClock, at: int) -> None:
    clock.set(at)
    Scheduler(engine, clock, metrics=m.InMemoryMetrics()).tick()  # a new scheduler: a cold calendar cache


def _job(engine: Engine, clock: ManualClock, schedule: str, calendar: dict[str, Any], **fields: Any) -> str:
    spec = {"name": "j", "schedule": schedule, "timezone": "Europe/Berlin", "calendar": calendar, "target": TARGET}
    status, body = call(engine, clock, "POST", "/jobs", {**spec, **fields})
    assert status == 201, body
    return str(body["id"])


def _runs(engine: Engine, job_id: str) -> list[tuple[int, RunState, str | None]]:
    runs = engine.store.list_runs(job_id, RunQuery(limit=50)).items
    return sorted((r.scheduled_at, r.state, r.note) for r in runs)


def test_calendars_are_put_read_listed_and_deleted_per_owner(engine: Engine, clock: ManualClock) -> None:
    clock.set(_ms(2026, 12, 1, 12))
    assert call(engine, clock, "PUT", "/calendars/weekends", WEEKENDS)[0] == 201
    holidays = {"timezone": "Europe/Berlin", "exclude_dates": ["2026-12-25"], "based_on": "weekends"}
    status, body = call(engine, clock, "PUT", "/calendars/holidays", holidays)
    assert status == 201 and body["version"] == 1 and body["exclude_dates"] == ["2026-12-25"], body
    status, body = call(engine, clock, "PUT", "/calendars/holidays", {**holidays, "exclude_dates": ["2026-12-24"]})
    assert status == 200 and body["version"] == 2, body
    assert call(engine, clock, "GET", "/calendars/holidays")[1]["exclude_dates"] == ["2026-12-24"]
    assert [c["name"] for c in call(engine, clock, "GET", "/calendars")[1]["items"]] == ["holidays", "weekends"]
    assert call(engine, clock, "GET", "/calendars/holidays", owner="someone-else")[0] == 404
    assert call(engine, clock, "GET", "/calendars", owner="someone-else")[1]["items"] == []
    # bad input names the field and changes nothing (a body the document calls valid is never a 422:
    # a base that does not exist is 404, a cycle 409)
    for bad, field in (
        ({"exclude_dates": ["25.12.2026"]}, "exclude_dates.0"),
        ({"exclude_weekdays": ["SAT", "SAT"]}, "exclude_weekdays"),
        ({"timezone": "Mars/Base"}, "timezone"),
    ):
        status, error = call(engine, clock, "PUT", "/calendars/x", bad)
        assert status == 422 and error["details"][0]["field"] == field, error
    status, error = call(engine, clock, "PUT", "/calendars/x", {"based_on": "nope"})
    assert status == 404 and error["code"] == "calendar_not_found" and error["details"][0]["field"] == "based_on"
    status, error = call(engine, clock, "PUT", "/calendars/weekends", {**WEEKENDS, "based_on": "holidays"})
    assert status == 409 and error["code"] == "calendar_cycle", error
    assert call(engine, clock, "GET", "/calendars/x")[0] == 404
    reversed_range = {"exclude_ranges": [{"start": "2026-12-31", "end": "2026-12-24"}]}  # the same days either way
    assert call(engine, clock, "PUT", "/calendars/x", reversed_range)[0] == 201
    assert call(engine, clock, "DELETE", "/calendars/x")[0] == 204
    # in use by a job, or as another calendar's base: 409 naming them; unused: deleted
    job_id = _job(engine, clock, "0 9 * * *", {"name": "holidays"})
    status, error = call(engine, clock, "DELETE", "/calendars/holidays")
    assert status == 409 and error["code"] == "calendar_in_use" and job_id in error["message"], error
    status, error = call(engine, clock, "DELETE", "/calendars/weekends")
    assert status == 409 and "calendar holidays" in error["message"], error
    assert call(engine, clock, "PATCH", f"/jobs/{job_id}", {"calendar": None})[0] == 200
    assert call(engine, clock, "DELETE", "/calendars/holidays")[0] == 204
    assert call(engine, clock, "GET", "/calendars/holidays")[0] == 404
    status, error = call(
        engine,
        clock,
        "POST",
        "/jobs",
        {"name": "j", "schedule": "0 9 * * *", "calendar": {"name": "holidays"}, "target": TARGET},
    )
    assert status == 404 and error["details"][0]["field"] == "calendar.name", error


def test_skip_records_a_cancelled_run_and_business_days_run(engine: Engine, clock: ManualClock) -> None:
    clock.set(_ms(2026, 12, 4, 12))  # Friday
    call(engine, clock, "PUT", "/calendars/weekends", WEEKENDS)
    job_id = _job(engine, clock, "0 9 * * *", {"name": "weekends"})
    for day in (5, 6, 7):  # Saturday, Sunday, Monday
        _tick(engine, clock, _ms(2026, 12, day, 9))
    runs = _runs(engine, job_id)
    assert [(at, state) for at, state, _ in runs] == [
        (_ms(2026, 12, 5, 9), RunState.CANCELLED),
        (_ms(2026, 12, 6, 9), RunState.CANCELLED),
        (_ms(2026, 12, 7, 9), RunState.SCHEDULED),
    ]
    assert runs[0][2] == "calendar weekends: SAT 2026-12-05 is an excluded weekday"
    assert engine.store.get_job(job_id).next_run_at == _ms(2026, 12, 8, 9)


def test_moved_runs_and_edits_at_the_next_claim(engine: Engine, clock: ManualClock) -> None:
    clock.set(_ms(2026, 12, 1, 12))  # Tuesday
    call(engine, clock, "PUT", "/calendars/weekends", WEEKENDS)
    nxt = _job(engine, clock, "15 8 * * 6", {"name": "weekends", "mode": "next_business_day"})
    prev = _job(engine, clock, "15 8 * * 6", {"name": "weekends", "mode": "previous_business_day"})
    assert engine.store.get_job(prev).next_run_at == _ms(2026, 12, 4, 8, 15)  # Friday: due before Saturday
    versions = {j: engine.store.get_job(j).version for j in (nxt, prev)}
    # An edit: the calendar no longer excludes Saturdays (and now excludes Mondays). No job is written.
    call(engine, clock, "PUT", "/calendars/weekends", {**WEEKENDS, "exclude_weekdays": ["SUN", "MON"]})
    assert {j: engine.store.get_job(j).version for j in (nxt, prev)} == versions
    for at in (_ms(2026, 12, 4, 8, 15), _ms(2026, 12, 5, 8, 15)):  # the Friday and Saturday claims
        _tick(engine, clock, at)
    # The previous_business_day job's Friday claim read the edited calendar: its Saturday is a business
    # day again, so nothing moves to Friday, and the Saturday runs at its own time; the same for the other
    assert [(at, state) for at, state, _ in _runs(engine, prev)] == [(_ms(2026, 12, 5, 8, 15), RunState.SCHEDULED)]
    assert [(at, state) for at, state, _ in _runs(engine, nxt)] == [(_ms(2026, 12, 5, 8, 15), RunState.SCHEDULED)]
    # Back to weekends: the next Saturday moves to Monday 08:15, its note saying from where
    call(engine, clock, "PUT", "/calendars/weekends", WEEKENDS)
    for at in (_ms(2026, 12, 12, 8, 15), _ms(2026, 12, 14, 8, 15)):
        _tick(engine, clock, at)
    moved = _runs(engine, nxt)[-1]
    assert moved[:2] == (_ms(2026, 12, 14, 8, 15), RunState.SCHEDULED)
    assert (
        moved[2]
        == "calendar weekends: moved from 2026-12-12 08:15 (SAT 2026-12-12 is an excluded weekday; next_business_day)"
    )


def test_a_claimed_run_is_never_decided_again(engine: Engine, clock: ManualClock) -> None:
    clock.set(_ms(2026, 12, 1, 12))
    call(engine, clock, "PUT", "/calendars/weekends", WEEKENDS)
    job_id = _job(engine, clock, "0 9 * * *", {"name": "weekends"})
    _tick(engine, clock, _ms(2026, 12, 2, 9) - 2_000)  # claimed within the lookahead, before its instant
    assert _runs(engine, job_id) == [(_ms(2026, 12, 2, 9), RunState.SCHEDULED, None)]
    call(engine, clock, "PUT", "/calendars/weekends", {**WEEKENDS, "exclude_dates": ["2026-12-02"]})
    _tick(engine, clock, _ms(2026, 12, 2, 9))
    assert _runs(engine, job_id) == [(_ms(2026, 12, 2, 9), RunState.SCHEDULED, None)]  # still to run, once
    # and the preview, which reads the calendar now, says the next Wednesday-like day it excludes
    status, listed = call(engine, clock, "GET", f"/jobs/{job_id}/preview?count=4")
    assert status == 200 and [i["fate"] for i in listed["items"]] == ["run", "run", "skipped", "skipped"], listed
    assert listed["items"][2]["cause"] == "calendar" and "excluded weekday" in listed["items"][2]["detail"]
