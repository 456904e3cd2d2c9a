"""Regressions: bad input that once reached a 500 (and in one case a partial write) through the API.

DESIGN.md §4/§5: bad input gets a 4xx with a clear message, never a 5xx, never a partial write.
The API is driven through punctual.api.app.handle (the Lambda/local entry point) on the embedded
engine under tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.port import Engine
from tests.conftest import make_embedded_engine

pytestmark = pytest.mark.unit

OWNER = "review-owner"
TARGET = {"type": "http", "url": "https://example.com/hook"}


@pytest.fixture
def api(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[Engine, Any]]:
    engine = make_embedded_engine(tmp_path, clock)
    services = Services.of(engine, Settings(data_dir=str(tmp_path), shards=4), clock)

    def call(method: str, path: str, body: Any = None, *, raw: str | None = None, query: dict[str, str] | None = None):
        event = {
            "httpMethod": method,
            "path": path,
            "resource": path,
            "headers": {"Content-Type": "application/json"},
            "body": raw if raw is not None else (None if body is None else json.dumps(body)),
            "isBase64Encoded": False,
            "queryStringParameters": query,
            "multiValueQueryStringParameters": None if query is None else {k: [v] for k, v in query.items()},
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

    yield engine, call
    engine.close()


def test_a_run_at_past_year_9999_in_utc_is_refused_and_writes_nothing(api: tuple[Engine, Any]) -> None:
    """run_at 9999-12-31T23:59:59-14:00 is year 10000 in UTC: the job is stored, then rendering
    next_run_at (clock.iso -> datetime.fromtimestamp) raises ValueError: a 500 after a write, and from
    then on every GET /jobs of the owner is a 500 too (the listing renders the stored job)."""
    engine, call = api
    status, _ = call("POST", "/jobs", {"name": "far", "run_at": "9999-12-31T23:59:59-14:00", "target": TARGET})
    listed, _ = call("GET", "/jobs")
    assert (status, engine.store.list_jobs(OWNER).items, listed) == (422, [], 200)


def test_a_payload_with_a_lone_surrogate_is_a_clear_4xx(api: tuple[Engine, Any]) -> None:
    """ "\\ud800" is valid JSON text but no valid Unicode: storing it fails deep in serialization (500)."""
    _, call = api
    body = '{"name": "s", "schedule": "* * * * *", "payload": "\\ud800", "target": {"type": "http", "url": "https://example.com/hook"}}'
    status, error = call("POST", "/jobs", raw=body)
    assert 400 <= status < 500, (status, error)


def test_a_target_url_with_a_broken_ipv6_literal_is_a_clear_4xx(api: tuple[Engine, Any]) -> None:
    """targets.policy.check_target calls urlsplit, which raises ValueError("Invalid IPv6 URL") (500)."""
    _, call = api
    status, error = call("POST", "/jobs", {"name": "v6", "schedule": "* * * * *",
                                           "target": {"type": "http", "url": "https://[::1"}})  # fmt: skip
    assert 400 <= status < 500, (status, error)


def test_a_forged_cursor_with_a_huge_position_is_a_clear_4xx(api: tuple[Engine, Any]) -> None:
    """The cursor checksum is an unkeyed blake2b, so anyone can forge a well-formed cursor; an integer
    position beyond 64 bits passes _field() and SQLite raises OverflowError (500)."""
    _, call = api
    cursor = ids.encode_cursor("jobs", {"for": OWNER, "created_at": 2**70, "job_id": "job_x"})
    status, error = call("GET", "/jobs", query={"cursor": cursor})
    assert status == 422, (status, error)
