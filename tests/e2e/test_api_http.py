"""The HTTP API through real HTTP against the local server, on both engines.

Every test runs twice (``[embedded]`` and ``[aws]``, see conftest.py), and every response is
checked against the served OpenAPI document by the client.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from punctual.clock import iso
from punctual.model import Run, RunState
from tests.e2e.conftest import ApiClient, Stack, cron_spec, dumps, error_of, fields_of

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ISO_UTC = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


def future(days: float = 1, offset_hours: int = 2) -> str:
    zone = timezone(timedelta(hours=offset_hours))
    return (datetime.now(UTC) + timedelta(days=days)).astimezone(zone).replace(microsecond=0).isoformat()


def one_time_spec(**overrides: Any) -> dict[str, Any]:
    return cron_spec(schedule=None, run_at=future(), **overrides)


@pytest.fixture
def alice(stack: Stack) -> ApiClient:
    return stack.client()


# -- the happy paths, route by route ---------------------------------------------------------------


def test_create_cron_job_then_get_and_list(alice: ApiClient) -> None:
    # Given a cron spec in the seed's names
    created = alice.post("/jobs", json=cron_spec())
    # Then it is created, active, due at the next top of an hour, with times in ISO 8601 UTC
    assert created.status_code == 201, created.text
    job = created.json()
    assert created.headers["location"] == f"/jobs/{job['id']}"
    assert job["status"] == "active" and job["schedule"] == "0 * * * *" and job["timezone"] == "Europe/Berlin"
    next_run = datetime.fromisoformat(job["next_run_at"].replace("Z", "+00:00"))
    assert next_run.minute == 0 and next_run > datetime.now(UTC)
    for name in ("next_run_at", "created_at", "updated_at"):
        assert re.match(ISO_UTC, job[name]), job[name]
    assert job["payload"] == {"any": "json"} and job["target"]["url"] == "https://example.com/hook"
    # And reading and listing show the same job
    assert alice.get(f"/jobs/{job['id']}").json() == job
    page = alice.get("/jobs").json()
    assert [j["id"] for j in page["items"]] == [job["id"]] and page["next_cursor"] is None


def test_create_one_time_job(alice: ApiClient) -> None:
    run_at = future(days=2, offset_hours=-5)
    job = alice.create(schedule=None, run_at=run_at)
    expected = datetime.fromisoformat(run_at).astimezone(UTC)
    assert datetime.fromisoformat(job["run_at"].replace("Z", "+00:00")) == expected
    assert job["next_run_at"] == job["run_at"] and job["schedule"] is None


def test_list_jobs_pages_with_a_cursor(alice: ApiClient) -> None:
    # Given five jobs
    made = [alice.create(name=f"job-{i}")["id"] for i in range(5)]
    # When listing two at a time
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = alice.get("/jobs", params=params).json()
        assert len(page["items"]) <= 2
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # Then every job appears once, newest first
    assert seen == list(reversed(made))


def test_list_jobs_filters_by_status(alice: ApiClient) -> None:
    active, paused = alice.create(name="a")["id"], alice.create(name="p")["id"]
    assert alice.post(f"/jobs/{paused}/pause").status_code == 200
    assert [j["id"] for j in alice.get("/jobs", params={"status": "paused"}).json()["items"]] == [paused]
    assert [j["id"] for j in alice.get("/jobs", params={"status": "active"}).json()["items"]] == [active]


def test_patch_recomputes_next_run_at_only_when_the_schedule_changes(alice: ApiClient) -> None:
    job = alice.create()
    # A payload change keeps the due time and bumps the version
    changed = alice.patch(f"/jobs/{job['id']}", json={"payload": {"v": 2}, "timeout_s": 30})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert body["payload"] == {"v": 2} and body["timeout_s"] == 30
    assert body["next_run_at"] == job["next_run_at"] and body["version"] == job["version"] + 1
    # A schedule change moves it
    moved = alice.patch(f"/jobs/{job['id']}", json={"schedule": "30 3 * * *", "timezone": "UTC"}).json()
    assert moved["schedule"] == "30 3 * * *" and moved["next_run_at"].endswith("T03:30:00.000Z")
    # Switching to a one-time job: schedule null, run_at given (merge-patch semantics)
    run_at = future(days=3)
    once = alice.patch(f"/jobs/{job['id']}", json={"schedule": None, "run_at": run_at}).json()
    assert once["schedule"] is None and once["next_run_at"] == once["run_at"]
    # A new target replaces the old one whole
    target = {"type": "http", "url": "https://example.org/other", "method": "PUT"}
    assert alice.patch(f"/jobs/{job['id']}", json={"target": target}).json()["target"]["method"] == "PUT"
    # The merge-patch media type is JSON too
    merge = {"Content-Type": "application/merge-patch+json"}
    renamed = alice.patch(f"/jobs/{job['id']}", content=dumps({"name": "renamed"}), headers=merge)
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"


def test_pause_and_resume(alice: ApiClient) -> None:
    job = alice.create()
    paused = alice.post(f"/jobs/{job['id']}/pause")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert paused.json()["next_run_at"] is None
    # Pausing again is a no-op (safe to retry), not an error
    again = alice.post(f"/jobs/{job['id']}/pause").json()
    assert again["status"] == "paused" and again["version"] == paused.json()["version"]
    resumed = alice.post(f"/jobs/{job['id']}/resume").json()
    assert resumed["status"] == "active" and resumed["next_run_at"] is not None


def test_trigger_creates_a_manual_run_visible_in_runs_and_by_id(alice: ApiClient) -> None:
    job = alice.create()
    triggered = alice.post(f"/jobs/{job['id']}/trigger")
    assert triggered.status_code == 202, triggered.text
    run = triggered.json()
    assert run["job_id"] == job["id"] and run["trigger"] == "manual" and run["state"] == "scheduled"
    assert triggered.headers["location"] == f"/runs/{run['run_id']}"
    assert alice.get(f"/runs/{run['run_id']}").json() == run
    assert [r["run_id"] for r in alice.get(f"/jobs/{job['id']}/runs").json()["items"]] == [run["run_id"]]
    # when the job last ran counts the manual run (issue 31 item 3: it stayed null), in every answer
    assert job["last_run_at"] is None
    assert alice.get(f"/jobs/{job['id']}").json()["last_run_at"] == run["scheduled_at"]
    assert [j["last_run_at"] for j in alice.get("/jobs").json()["items"]] == [run["scheduled_at"]]
    assert alice.post(f"/jobs/{job['id']}/pause").json()["last_run_at"] == run["scheduled_at"]


def test_runs_are_newest_first_filtered_and_paged(alice: ApiClient) -> None:
    job = alice.create()
    made = []
    for _ in range(3):
        made.append(alice.post(f"/jobs/{job['id']}/trigger").json())
        time.sleep(0.005)  # runs are unique per (job, millisecond)
    ids = [r["run_id"] for r in reversed(made)]
    # Paged two at a time, newest first
    first = alice.get(f"/jobs/{job['id']}/runs", params={"limit": 2}).json()
    second = alice.get(f"/jobs/{job['id']}/runs", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [r["run_id"] for r in first["items"] + second["items"]] == ids and second["next_cursor"] is None
    # State filters (repeatable)
    runs = f"/jobs/{job['id']}/runs"
    assert len(alice.get(runs, params={"state": ["scheduled", "running"]}).json()["items"]) == 3
    assert alice.get(runs, params={"state": "succeeded"}).json()["items"] == []
    # Time filters: since/until are inclusive bounds on scheduled_at
    middle = made[1]["scheduled_at"]
    assert [r["run_id"] for r in alice.get(runs, params={"since": middle}).json()["items"]] == ids[:2]
    assert [r["run_id"] for r in alice.get(runs, params={"until": middle}).json()["items"]] == ids[1:]


def test_delete_keeps_the_job_readable_but_out_of_lists(alice: ApiClient) -> None:
    job = alice.create()
    run = alice.post(f"/jobs/{job['id']}/trigger").json()
    deleted = alice.delete(f"/jobs/{job['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert alice.delete(f"/jobs/{job['id']}").status_code == 204  # idempotent
    shown = alice.get(f"/jobs/{job['id']}").json()
    assert shown["status"] == "deleted" and shown["next_run_at"] is None
    assert alice.get("/jobs").json()["items"] == []
    assert [j["id"] for j in alice.get("/jobs", params={"status": "deleted"}).json()["items"]] == [job["id"]]
    assert alice.get(f"/runs/{run['run_id']}").status_code == 200  # history stays until retention
    # A deleted job can no longer change
    for action in ("pause", "resume", "trigger"):
        refused = alice.post(f"/jobs/{job['id']}/{action}")
        assert refused.status_code == 409 and error_of(refused)["code"] == "invalid_transition"
    assert alice.patch(f"/jobs/{job['id']}", json={"name": "again"}).status_code == 409


# -- bad input: a 4xx with our shape, and nothing written --------------------------------------------

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
PAST = "2020-01-01T00:00:00+00:00"

# (id, method, path ("{job}" is the victim's job), request kwargs, status, code, field)
BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any], int, str, str | None]] = [
    ("malformed-json", "POST", "/jobs", {"content": '{"name": ', "headers": JSON}, 400, "malformed_json", "body"),
    (
        "nan-is-not-json",
        "POST",
        "/jobs",
        {"content": dumps(cron_spec())[:-1] + ',"payload":NaN}', "headers": JSON},
        400,
        "malformed_json",
        "body",
    ),
    ("not-utf8", "POST", "/jobs", {"content": b"\xff\xfe{}", "headers": JSON}, 400, "malformed_json", "body"),
    (
        "nested-too-deep",
        "POST",
        "/jobs",
        {"content": dumps(cron_spec())[:-1] + ',"payload":' + "[" * 40 + "]" * 40 + "}", "headers": JSON},
        400,
        "malformed_json",
        "body",
    ),
    (
        "metadata-target",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "http", "url": "http://169.254.169.254/latest/meta-data/"})},
        422,
        "target_refused",
        "target.url",
    ),
    (
        "pause-bad-body",
        "POST",
        "/jobs/{job}/pause",
        {"content": b"{bad", "headers": JSON},
        400,
        "malformed_json",
        "body",
    ),
    ("trigger-with-options", "POST", "/jobs/{job}/trigger", {"json": {"x": 1}}, 422, "invalid_input", "body"),
    ("number-as-string", "POST", "/jobs", {"json": cron_spec(max_retries="3")}, 422, "invalid_input", "max_retries"),
    ("host-timezone", "POST", "/jobs", {"json": cron_spec(timezone="localtime")}, 422, "invalid_timezone", "timezone"),
    (
        "numeric-metadata-target",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "http", "url": "http://0xa9fea9fe/latest/meta-data/"})},
        422,
        "target_refused",
        "target.url",
    ),
    (
        "loopback-target",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "http", "url": "http://127.0.0.1:8080/hook"})},
        422,
        "target_refused",
        "target.url",
    ),
    (
        "patch-private-target",
        "PATCH",
        "/jobs/{job}",
        {"json": {"target": {"type": "http", "url": "http://10.0.0.8/hook"}}},
        422,
        "target_refused",
        "target.url",
    ),
    ("unknown-field", "POST", "/jobs", {"json": cron_spec(color="blue")}, 422, "invalid_input", "color"),
    ("bad-cron", "POST", "/jobs", {"json": cron_spec(schedule="61 * * * *")}, 422, "invalid_schedule", "schedule"),
    ("cron-seconds", "POST", "/jobs", {"json": cron_spec(schedule="0 0 * * * *")}, 422, "invalid_schedule", "schedule"),
    (
        "bad-timezone",
        "POST",
        "/jobs",
        {"json": cron_spec(timezone="Mars/Olympus")},
        422,
        "invalid_timezone",
        "timezone",
    ),
    ("run-at-past", "POST", "/jobs", {"json": cron_spec(schedule=None, run_at=PAST)}, 422, "invalid_input", "run_at"),
    (
        "run-at-naive",
        "POST",
        "/jobs",
        {"json": cron_spec(schedule=None, run_at="2031-01-01T00:00:00")},
        422,
        "invalid_input",
        "run_at",
    ),
    (
        "schedule-and-run-at",
        "POST",
        "/jobs",
        {"json": cron_spec(run_at="2031-01-01T00:00:00Z")},
        422,
        "invalid_input",
        "body",
    ),
    ("no-schedule", "POST", "/jobs", {"json": cron_spec(schedule=None)}, 422, "invalid_input", "body"),
    ("oversized-payload", "POST", "/jobs", {"json": cron_spec(payload="x" * 9_000)}, 422, "invalid_input", "payload"),
    ("wrong-type", "POST", "/jobs", {"json": cron_spec(timeout_s="soon")}, 422, "invalid_input", "timeout_s"),
    ("out-of-range", "POST", "/jobs", {"json": cron_spec(max_retries=99)}, 422, "invalid_input", "max_retries"),
    (
        "target-without-url",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "http"})},
        422,
        "invalid_input",
        "target.url",
    ),
    (
        "unknown-target",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "ftp", "url": "ftp://x"})},
        422,
        "invalid_input",
        "target",
    ),
    (
        "bad-url",
        "POST",
        "/jobs",
        {"json": cron_spec(target={"type": "http", "url": "not a url"})},
        422,
        "invalid_input",
        "target.url",
    ),
    ("empty-name", "POST", "/jobs", {"json": cron_spec(name="")}, 422, "invalid_input", "name"),
    ("not-an-object", "POST", "/jobs", {"json": [1, 2]}, 422, "invalid_input", "body"),
    ("empty-body", "POST", "/jobs", {"content": b"", "headers": JSON}, 422, "invalid_input", "body"),
    (
        "form-body",
        "POST",
        "/jobs",
        {"content": "name=x", "headers": FORM},
        415,
        "unsupported_media_type",
        "Content-Type",
    ),
    (
        "too-large",
        "POST",
        "/jobs",
        {"content": b"{" + b" " * 300_000 + b"}", "headers": JSON},
        413,
        "request_too_large",
        "body",
    ),
    (
        "bad-idempotency-key",
        "POST",
        "/jobs",
        {"json": cron_spec(), "headers": {"Idempotency-Key": "has space"}},
        422,
        "invalid_input",
        "Idempotency-Key",
    ),
    ("bad-job-id", "GET", "/jobs/not-a-job", {}, 422, "invalid_id", "job_id"),
    ("bad-run-id", "GET", "/runs/run_nothex_12", {}, 422, "invalid_id", "run_id"),
    ("bad-cursor", "GET", "/jobs", {"params": {"cursor": "bm90LWEtY3Vyc29y"}}, 422, "invalid_cursor", "cursor"),
    ("limit-zero", "GET", "/jobs", {"params": {"limit": 0}}, 422, "invalid_input", "limit"),
    ("limit-huge", "GET", "/jobs", {"params": {"limit": 1000}}, 422, "invalid_input", "limit"),
    ("limit-text", "GET", "/jobs", {"params": {"limit": "many"}}, 422, "invalid_input", "limit"),
    ("bad-status", "GET", "/jobs", {"params": {"status": "sleeping"}}, 422, "invalid_input", "status"),
    ("runs-bad-cursor", "GET", "/jobs/{job}/runs", {"params": {"cursor": "zz"}}, 422, "invalid_cursor", "cursor"),
    ("runs-bad-state", "GET", "/jobs/{job}/runs", {"params": {"state": "asleep"}}, 422, "invalid_input", "state"),
    (
        "runs-naive-since",
        "GET",
        "/jobs/{job}/runs",
        {"params": {"since": "2027-01-01T00:00:00"}},
        422,
        "invalid_input",
        "since",
    ),
    (
        "runs-since-after-until",
        "GET",
        "/jobs/{job}/runs",
        {"params": {"since": "2027-01-02T00:00:00Z", "until": "2027-01-01T00:00:00Z"}},
        422,
        "invalid_input",
        "since",
    ),
    ("patch-malformed", "PATCH", "/jobs/{job}", {"content": "{", "headers": JSON}, 400, "malformed_json", "body"),
    ("patch-unknown-field", "PATCH", "/jobs/{job}", {"json": {"color": "blue"}}, 422, "invalid_input", "color"),
    ("patch-bad-cron", "PATCH", "/jobs/{job}", {"json": {"schedule": "* * * *"}}, 422, "invalid_schedule", "schedule"),
    (
        "patch-bad-timezone",
        "PATCH",
        "/jobs/{job}",
        {"json": {"timezone": "Nowhere/Land"}},
        422,
        "invalid_timezone",
        "timezone",
    ),
    ("patch-null-name", "PATCH", "/jobs/{job}", {"json": {"name": None}}, 422, "invalid_input", "name"),
    (
        "patch-run-at-past",
        "PATCH",
        "/jobs/{job}",
        {"json": {"schedule": None, "run_at": PAST}},
        422,
        "invalid_input",
        "run_at",
    ),
    (
        "patch-both-schedules",
        "PATCH",
        "/jobs/{job}",
        {"json": {"run_at": "2031-01-01T00:00:00Z"}},
        422,
        "invalid_input",
        "body",
    ),
    ("patch-wrong-type", "PATCH", "/jobs/{job}", {"json": {"jitter_s": [1]}}, 422, "invalid_input", "jitter_s"),
    ("patch-bad-job-id", "PATCH", "/jobs/job_XYZ", {"json": {"name": "x"}}, 422, "invalid_id", "job_id"),
    ("unknown-route", "GET", "/nothing/here", {}, 404, "route_not_found", None),
    ("wrong-method", "PUT", "/jobs", {"json": {}}, 405, "method_not_allowed", None),
]


@pytest.fixture(scope="module")
def victim(stack: Stack) -> tuple[ApiClient, dict[str, Any]]:
    """An owner with one job, which no bad request may change."""
    client = stack.client()
    return client, client.create(name="victim")


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code", "field"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
)
def test_bad_input_is_a_4xx_with_our_shape_and_writes_nothing(
    victim: tuple[ApiClient, dict[str, Any]],
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    code: str,
    field: str | None,
) -> None:
    client, job = victim
    before = client.get(f"/jobs/{job['id']}").json()
    response = client.request(method, path.replace("{job}", job["id"]), **kwargs)
    assert response.status_code == status, response.text
    body = error_of(response)
    assert body["code"] == code and body["message"]
    if field is not None:
        assert field in fields_of(response), body
    if code == "invalid_schedule":
        assert "field" in body["message"] or "fields" in body["message"], body  # it names the cron field
    # Nothing written: still exactly the one job, unchanged
    assert [j["id"] for j in client.get("/jobs").json()["items"]] == [job["id"]]
    assert client.get(f"/jobs/{job['id']}").json() == before


# -- idempotent create ---------------------------------------------------------------------------------


def test_same_idempotency_key_returns_the_same_job_and_never_creates_two(stack: Stack, alice: ApiClient) -> None:
    headers = {"Idempotency-Key": "create-nightly-1"}
    first = alice.post("/jobs", json=cron_spec(), headers=headers)
    again = alice.post("/jobs", json=cron_spec(), headers=headers)
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert len(alice.get("/jobs").json()["items"]) == 1
    # The same key with a different body is refused, and still nothing new is written
    other = alice.post("/jobs", json=cron_spec(name="something-else"), headers=headers)
    assert other.status_code == 409 and error_of(other)["code"] == "idempotency_key_reused"
    assert fields_of(other) == ["Idempotency-Key"]
    assert len(alice.get("/jobs").json()["items"]) == 1
    # Keys belong to their owner: another owner's identical key creates that owner's own job
    bob = stack.client()
    theirs = bob.post("/jobs", json=cron_spec(), headers=headers)
    assert theirs.status_code == 201 and theirs.json()["id"] != first.json()["id"]


def test_idempotent_replay_of_a_one_time_job_after_its_time_passed(stack: Stack, alice: ApiClient) -> None:
    # Given a one-time job created with a key
    run_at = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    headers = {"Idempotency-Key": "once-1"}
    first = alice.post("/jobs", json=cron_spec(schedule=None, run_at=run_at), headers=headers)
    assert first.status_code == 201, first.text
    # When the client's retry arrives after run_at (the API's clock moved 2 minutes on)
    stack.clock.offset_ms += 120_000
    try:
        again = alice.post("/jobs", json=cron_spec(schedule=None, run_at=run_at), headers=headers)
        fresh = alice.post("/jobs", json=cron_spec(schedule=None, run_at=run_at))
    finally:
        stack.clock.offset_ms -= 120_000
    # Then it is still a replay, not a "run_at in the past" error (which a new create is)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert fresh.status_code == 422 and fields_of(fresh) == ["run_at"]


def test_a_keyed_replay_starts_each_run_once_repeated_or_at_once(stack: Stack, alice: ApiClient) -> None:
    # Given 12 dead runs of alice's job, an hour old
    job = alice.create()
    now = int(time.time() * 1000)
    dead = [
        Run(job_id=job["id"], scheduled_at=now - 3_600_000 + i * 1_000, owner=str(alice.owner), state=RunState.DEAD,
            attempt=1, finished_at=now - 3_500_000, deadline_at=now, created_at=now - 3_600_000)
        for i in range(12)
    ]  # fmt: skip
    assert all(stack.engine.store.insert_runs(dead))
    window = {"from": iso(now - 7_200_000), "to": iso(now), "states": ["dead"]}

    def replays() -> list[str]:
        runs = alice.get(f"/jobs/{job['id']}/runs", params={"limit": 100}).json()["items"]
        return sorted(r["replay_of"] for r in runs if r["trigger"] == "replay")

    # When two identical requests with one key arrive at once
    barrier, answers = threading.Barrier(2), queue.Queue[httpx.Response]()

    def send() -> None:
        barrier.wait(timeout=10)
        answers.put(alice.post("/runs/replay", json=window, headers={"Idempotency-Key": "replay-at-once"}))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # the one that carried it out first: both may answer 202, and then the replayed one says so
    both = sorted(
        (answers.get_nowait() for _ in range(2)),
        key=lambda r: (r.status_code, r.headers.get("idempotent-replayed") == "true"),
    )
    # Then each run started once: one carried it out, the other answered its count or "in use"
    assert both[0].status_code == 202 and both[0].json()["count"] == 12, both[0].text
    if both[1].status_code == 202:
        assert both[1].json()["count"] == 12 and both[1].headers["idempotent-replayed"] == "true"
    else:
        assert error_of(both[1])["code"] == "idempotency_key_in_use" and int(both[1].headers["retry-after"]) >= 1
    assert replays() == sorted(r.run_id for r in dead)
    # And a retry later answers the same count, starting nothing; the key with another body is refused
    again = alice.post("/runs/replay", json=window, headers={"Idempotency-Key": "replay-at-once"})
    assert (again.status_code, again.json()["count"], again.headers["idempotent-replayed"]) == (202, 12, "true")
    other = alice.post(
        "/runs/replay", json={**window, "states": ["failed"]}, headers={"Idempotency-Key": "replay-at-once"}
    )
    assert other.status_code == 409 and fields_of(other) == ["Idempotency-Key"]
    assert replays() == sorted(r.run_id for r in dead)


# -- tenancy ----------------------------------------------------------------------------------------


def test_one_owner_can_never_see_or_change_anothers_jobs_or_runs(stack: Stack, alice: ApiClient) -> None:
    job = alice.create()
    run = alice.post(f"/jobs/{job['id']}/trigger").json()
    mallory = stack.client()
    attempts = [
        ("GET", f"/jobs/{job['id']}", {}),
        ("PATCH", f"/jobs/{job['id']}", {"json": {"name": "mine-now"}}),
        ("POST", f"/jobs/{job['id']}/pause", {}),
        ("POST", f"/jobs/{job['id']}/resume", {}),
        ("POST", f"/jobs/{job['id']}/trigger", {}),
        ("GET", f"/jobs/{job['id']}/runs", {}),
        ("GET", f"/runs/{run['run_id']}", {}),
        ("DELETE", f"/jobs/{job['id']}", {}),
    ]
    for method, path, kwargs in attempts:
        response = mallory.request(method, path, **kwargs)
        assert response.status_code == 404, (method, path, response.text)
        assert error_of(response)["code"] in {"job_not_found", "run_not_found"}
    # Not found looks the same as "never existed": nothing reveals the job exists
    ghost = "job_" + "0" * 32
    assert mallory.get(f"/jobs/{ghost}").json()["message"] == f"no job {ghost}"
    assert mallory.get(f"/jobs/{job['id']}").json()["message"] == f"no job {job['id']}"
    assert mallory.get("/jobs").json()["items"] == []
    # And the owner's job and runs are untouched
    assert alice.get(f"/jobs/{job['id']}").json() == {**job, "last_run_at": run["scheduled_at"]}  # its trigger only
    assert [r["run_id"] for r in alice.get(f"/jobs/{job['id']}/runs").json()["items"]] == [run["run_id"]]


def test_requests_without_a_valid_key_get_401(stack: Stack) -> None:
    for client in (stack.anonymous(), stack.anonymous("not-a-key-we-know-of-123")):
        for method, path in (("GET", "/jobs"), ("POST", "/jobs"), ("GET", "/runs/run_x_1"), ("GET", "/nowhere")):
            response = client.request(method, path, json=cron_spec() if method == "POST" else None)
            assert response.status_code == 401, (method, path, response.text)
            assert error_of(response)["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
    # Malformed Authorization headers too
    raw = httpx.get(f"{stack.url}/jobs", headers={"Authorization": "Basic dXNlcjpwYXNz"}, timeout=10)
    assert raw.status_code == 401
    # The documentation is public
    assert stack.anonymous().get("/openapi.json").status_code == 200
    docs = httpx.get(f"{stack.url}/docs", timeout=10)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


# -- the Lambda entry point, on the aws engine ------------------------------------------------------


class FakeLambdaContext:
    function_name = "punctual-api"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:punctual-api"
    aws_request_id = "req-1"


@pytest.fixture
def lambda_handler(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    for name in ("name_prefix", "jobs_table", "runs_table", "leases_table", "dispatch_queue_url"):
        monkeypatch.setenv(f"PUNCTUAL_{name.upper()}", str(getattr(stack.settings, name)))
    monkeypatch.setenv("PUNCTUAL_DEAD_LETTER_QUEUE_URL", str(stack.settings.dead_letter_queue_url))
    monkeypatch.setenv("PUNCTUAL_SHARDS", str(stack.settings.shards))
    monkeypatch.setenv("PUNCTUAL_OPEN_SHARDS", str(stack.settings.open_shards))
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    spec = importlib.util.spec_from_file_location("punctual_api_lambda", ROOT / "functions" / "api" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # importing does no I/O: the engine is built on the first call
    assert module.services.cache_info().currsize == 0
    yield module
    module.services.cache_clear()


def iam_event(method: str, path: str, session: str, body: Any = None) -> dict[str, Any]:
    role_session = f"arn:aws:sts::123456789012:assumed-role/reporting/{session}"
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "requestContext": {
            "stage": "prod",
            "path": f"/prod{path}",
            "requestId": "req-1",
            "identity": {"userArn": role_session, "caller": f"AROAEXAMPLE:{session}"},
        },
        "body": None if body is None else dumps(body),
        "isBase64Encoded": False,
    }


@pytest.mark.parametrize("stack", ["aws"], indirect=True)
def test_lambda_handler_serves_the_same_api_with_iam_owners(lambda_handler: ModuleType) -> None:
    context = FakeLambdaContext()
    created = lambda_handler.handler(iam_event("POST", "/jobs", "s1", cron_spec(name="from-lambda")), context)
    assert created["statusCode"] == 201, created["body"]
    # Another session of the same role is the same owner (sessions change, the role does not)
    listed = lambda_handler.handler(iam_event("GET", "/jobs", "s2"), context)
    assert listed["statusCode"] == 200 and '"from-lambda"' in listed["body"]
    unsigned = iam_event("GET", "/jobs", "s3")
    unsigned["requestContext"]["identity"] = {}
    assert lambda_handler.handler(unsigned, context)["statusCode"] == 401


# -- punctual dev ---------------------------------------------------------------------------------


def _start_dev(data_dir: Path) -> tuple[subprocess.Popen[str], str, str]:
    """Start `punctual dev` on a free port; return the process, its URL and its key (bounded wait)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PUNCTUAL_API_KEYS", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "punctual.cli", "dev", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=data_dir.parent,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    url_line, key_line = lines.get(timeout=30), lines.get(timeout=5)
    assert url_line.startswith("Punctual API: http://127.0.0.1:"), url_line
    assert key_line.startswith("API key: "), key_line
    return process, url_line.split(": ", 1)[1].strip(), key_line.split(": ", 1)[1].strip()


def _stop(process: subprocess.Popen[str], sig: signal.Signals) -> int:
    process.send_signal(sig)
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def test_punctual_dev_prints_url_and_key_stops_on_signals_and_keeps_jobs(tmp_path: Path) -> None:
    data_dir = tmp_path / ".punctual"
    process, url, key = _start_dev(data_dir)
    try:
        auth = {"Authorization": f"Bearer {key}"}
        created = httpx.post(f"{url}/jobs", json=cron_spec(), headers=auth, timeout=10)
        assert created.status_code == 201, created.text
    finally:
        assert _stop(process, signal.SIGTERM) == 0
    # Restart (Ctrl-C this time): same key from the data dir, and the job is still there
    process, url, key_again = _start_dev(data_dir)
    try:
        assert key_again == key
        listed = httpx.get(f"{url}/jobs", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
        assert [j["id"] for j in listed["items"]] == [created.json()["id"]]
    finally:
        assert _stop(process, signal.SIGINT) == 0
