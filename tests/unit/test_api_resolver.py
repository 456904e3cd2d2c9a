"""The API's resolver (``punctual.api.resolver``): requests resolved at once keep their own state,
and query parameters a route does not declare are refused.

Issue 26: ``punctual api`` serialized every request behind one lock, because Powertools keeps the
request it resolves in shared state. Each request now has its own; these tests resolve requests of
several owners from many threads at once (no lock) and check that every answer is the caller's.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from tests.regressions.conftest import TARGET, api_event

pytestmark = pytest.mark.unit

THREADS = 8
ROUNDS = 25


@pytest.fixture
def services(tmp_path: Path) -> Any:
    clock = ManualClock(1_800_000_000_000)
    settings = Settings(data_dir=str(tmp_path), shards=4)
    engine = EmbeddedEngine.from_settings(settings, clock=clock)
    yield Services.of(engine, settings, clock)
    engine.close()


def call(services: Services, method: str, path: str, owner: str, body: Any = None, **query: Any) -> tuple[int, Any]:
    event = api_event(method, path, body, owner=owner)
    if query:
        event["queryStringParameters"] = {k: v[-1] if isinstance(v, list) else v for k, v in query.items()}
        event["multiValueQueryStringParameters"] = {k: v if isinstance(v, list) else [v] for k, v in query.items()}
    response = handle(event, None, services)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def create(services: Services, owner: str) -> str:
    status, body = call(services, "POST", "/jobs", owner, {"name": owner, "schedule": "0 * * * *", "target": TARGET})
    assert status == 201, body
    return str(body["id"])


def test_requests_of_many_owners_resolved_at_once_each_see_their_own(services: Services) -> None:
    # Given one job per owner
    owners = [f"owner-{i}" for i in range(THREADS)]
    jobs = {owner: create(services, owner) for owner in owners}
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def client(owner: str) -> None:
        start.wait()
        for n in range(ROUNDS):
            # a path argument, the owner, a query parameter and a body: everything a request carries
            status, body = call(services, "GET", f"/jobs/{jobs[owner]}", owner)
            if status != 200 or body["id"] != jobs[owner] or body["name"] != owner:
                failures.append(f"{owner} GET one: {status} {body}")
            status, body = call(services, "GET", "/jobs", owner, limit=str(1 + n % 5))
            if status != 200 or [j["id"] for j in body["items"]] != [jobs[owner]]:
                failures.append(f"{owner} GET list: {status} {body}")
            status, body = call(services, "PATCH", f"/jobs/{jobs[owner]}", owner, {"payload": {"by": owner, "n": n}})
            if status != 200 or body["payload"] != {"by": owner, "n": n} or body["id"] != jobs[owner]:
                failures.append(f"{owner} PATCH: {status} {body}")

    # When every owner's client runs at once, with no lock around the resolver, switching threads
    # as often as the interpreter can (so that requests interleave at every step)
    threads = [threading.Thread(target=client, args=(owner,)) for owner in owners]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(interval)
    # Then every answer was the caller's own
    assert failures == [], failures[:5]


def test_query_parameters_a_route_does_not_declare_are_refused_naming_them(services: Services) -> None:
    job = create(services, "alice")
    status, body = call(services, "GET", "/jobs", "alice", limt="5")
    assert status == 422 and [d["field"] for d in body["details"]] == ["limt"], body
    assert "cursor, limit, status" in body["details"][0]["message"]
    status, body = call(services, "GET", f"/jobs/{job}", "alice", expand="runs", verbose="1")
    assert status == 422 and [d["field"] for d in body["details"]] == ["expand", "verbose"], body
    status, body = call(services, "DELETE", f"/jobs/{job}", "alice", forse="true")
    assert status == 422 and body["details"][0]["field"] == "forse"
    assert call(services, "GET", f"/jobs/{job}", "alice")[1]["status"] == "active"  # not deleted
    # documented parameters keep working, repeated ones included
    assert call(services, "GET", "/jobs", "alice", limit="1", status="active")[0] == 200
    assert call(services, "GET", f"/jobs/{job}/runs", "alice", state=["scheduled", "running"], limit="5")[0] == 200
    assert call(services, "GET", "/stats", "alice", minutes="5")[0] == 200
    # a path that matches no route is still a 404, whatever its query
    assert call(services, "GET", "/nowhere", "alice", x="1")[0] == 404


@pytest.mark.parametrize("odd", ["\n", "\t", "\r", "/", "\t/", " \n"])
def test_a_job_id_of_a_line_break_or_a_slash_names_no_route(services: Services, odd: str) -> None:
    # Powertools' patterns end in "/*$": "$" matched before a final newline and "/*" took any
    # slashes, so /jobs/%0A and /jobs/%2F were the list's path (GET listed jobs, PATCH was a 405
    # the document does not list). Each is now a 404; one trailing slash is still the same route.
    job = create(services, "alice")
    for method, body in (("GET", None), ("PATCH", {}), ("DELETE", None), ("POST", None)):
        status, answer = call(services, method, f"/jobs/{odd}", "alice", body)
        assert status == 404 and answer["code"] == "route_not_found", (method, repr(odd), status, answer)
    status, answer = call(services, "PATCH", f"/jobs/{job}\n", "alice", {"name": "x"})
    assert status == 404, answer
    assert call(services, "GET", "/jobs/", "alice")[0] == 200
    assert call(services, "GET", f"/jobs/{job}/", "alice")[1]["name"] == "alice"  # nothing changed
    assert call(services, "PATCH", "/jobs/", "alice", {})[0] == 405  # a path that exists, a method it lacks
