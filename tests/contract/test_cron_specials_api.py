"""Cron day specials through the API and the scheduler, on both engines (issue 10, item 8).

`0 0 L * *` answered 422 before: L, W and # were refused. Now a monthly billing job is created,
scheduled on the month's last day in its zone, claimed there and advanced to the next month's."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual import metrics as m
from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.port import Engine, RunQuery
from punctual.scheduling.scheduler import Scheduler

pytestmark = pytest.mark.contract

OWNER = "billing-owner"
TARGET = {"type": "http", "url": "https://example.com/hook"}
BERLIN = ZoneInfo("Europe/Berlin")


def _call(engine: Engine, clock: ManualClock, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    services = Services.of(engine, Settings(shards=engine.store.shards), clock)
    event = {
        "httpMethod": method,
        "path": path,
        "resource": path,
        "headers": {"Content-Type": "application/json"},
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "requestContext": {
            "authorizer": {"principalId": OWNER},
            "stage": "test",
            "requestId": "req",
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
        },
    }
    response = handle(event, None, services)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def _ms(*wall: int) -> int:
    return int(datetime(*wall, tzinfo=BERLIN).timestamp() * 1000)  # type: ignore[misc]


def test_last_day_of_month_job_is_created_claimed_and_advanced(engine: Engine, clock: ManualClock) -> None:
    # Given the clock on 2027-01-15 (Berlin), when a job on "0 0 L * *" is created
    status, body = _call(
        engine,
        clock,
        "POST",
        "/jobs",
        {"name": "bill", "schedule": "0 0 L * *", "timezone": "Europe/Berlin", "target": TARGET},
    )
    # Then it is accepted (it answered 422 before) and due at midnight on January 31st, Berlin time
    assert status == 201, body
    job = engine.store.get_job(body["id"])
    assert job.next_run_at == _ms(2027, 1, 31)
    # When the scheduler ticks at that instant, one run is created for it and the job moves to Feb 28
    clock.set(_ms(2027, 1, 31))
    Scheduler(engine, clock, metrics=m.InMemoryMetrics()).tick()
    runs = engine.store.list_runs(job.id, RunQuery(limit=10)).items
    assert [r.scheduled_at for r in runs] == [_ms(2027, 1, 31)]
    assert engine.store.get_job(job.id).next_run_at == _ms(2027, 2, 28)


@pytest.mark.parametrize(
    ("schedule", "first"),
    [("0 9 * * 5L", (2027, 1, 29, 9)), ("0 9 * * MON#2", (2027, 2, 8, 9)), ("30 8 LW * *", (2027, 1, 29, 8, 30))],
)
def test_specials_are_accepted_by_create_and_patch(
    engine: Engine, clock: ManualClock, schedule: str, first: tuple[int, ...]
) -> None:
    status, body = _call(
        engine,
        clock,
        "POST",
        "/jobs",
        {"name": "j", "schedule": "0 0 * * *", "timezone": "Europe/Berlin", "target": TARGET},
    )
    assert status == 201, body
    status, patched = _call(engine, clock, "PATCH", f"/jobs/{body['id']}", {"schedule": schedule})
    assert status == 200, patched
    assert patched["schedule"] == schedule
    assert engine.store.get_job(body["id"]).next_run_at == _ms(*first)


def test_a_bad_special_is_a_422_naming_the_field_and_writes_nothing(engine: Engine, clock: ManualClock) -> None:
    status, body = _call(engine, clock, "POST", "/jobs", {"name": "j", "schedule": "0 0 * * 1#6", "target": TARGET})
    assert status == 422
    assert "'day-of-week'" in json.dumps(body) and "1-5" in json.dumps(body)
    assert engine.store.list_jobs(OWNER).items == []
