"""Regressions (issue 10, item 7): secrets in targets, on both engines.

- ``Authorization`` and other credentials were stored in plain text in the job item and returned by
  ``GET /jobs/{id}``. Headers under ``target.secret_headers`` are now write-only (shown redacted),
  sealed at rest by the engine's keys (a local key file; KMS on AWS), opened only for the request.
- Targets could not tell a call from this deployment from a forged or replayed one: every HTTP
  attempt is now signed with the owner's signing secret (``Punctual-Signature``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from punctual.execution.targets import TargetPolicy, Targets
from punctual.execution.targets.signing import SignatureError, signature_header, verify
from punctual.execution.targets.types import Invocation
from punctual.model import REDACTED, Run
from tests.regressions.conftest import OWNER, Api

SECRET = "Bearer s3cr3t-9f8e7d"


def secret_job(url: str = "https://example.com/hook", **secrets: str) -> dict[str, Any]:
    return {
        "name": "with-secret",
        "schedule": "* * * * *",
        "payload": {"n": 1},
        "target": {"type": "http", "url": url, "headers": {"X-Plain": "p"}, "secret_headers": secrets},
    }


@pytest.mark.integration
def test_secret_headers_are_write_only_and_sealed_at_rest(api: Api) -> None:
    created = api.call("POST", "/jobs", secret_job(Authorization=SECRET))
    assert created.status == 201, created.body
    assert created.body["target"]["secret_headers"] == {"Authorization": REDACTED}
    assert created.body["target"]["headers"] == {"X-Plain": "p"}
    shown = api.call("GET", f"/jobs/{created.body['id']}")
    assert SECRET not in json.dumps(shown.body) and SECRET not in json.dumps(api.call("GET", "/jobs").body)
    stored = api.engine.store.get_job(created.body["id"])
    token = stored.target.secret_headers["Authorization"]  # type: ignore[union-attr]
    assert SECRET not in stored.model_dump_json()
    assert api.engine.keys.open(OWNER, token) == SECRET
    assert SECRET.encode() not in _raw_storage(api)


@pytest.mark.integration
def test_a_patch_that_resends_the_redacted_value_keeps_the_secret(api: Api) -> None:
    created = api.call("POST", "/jobs", secret_job(Authorization=SECRET))
    job_id = created.body["id"]
    target = {**created.body["target"], "url": "https://example.org/moved"}  # as read, one change
    assert api.call("PATCH", f"/jobs/{job_id}", {"target": target}).status == 200
    token = api.engine.store.get_job(job_id).target.secret_headers["Authorization"]  # type: ignore[union-attr]
    assert api.engine.keys.open(OWNER, token) == SECRET
    replaced = {**target, "secret_headers": {"Authorization": "Bearer new"}}
    assert api.call("PATCH", f"/jobs/{job_id}", {"target": replaced}).status == 200
    token = api.engine.store.get_job(job_id).target.secret_headers["Authorization"]  # type: ignore[union-attr]
    assert api.engine.keys.open(OWNER, token) == "Bearer new"
    unknown = {**target, "secret_headers": {"X-Other": REDACTED}}
    refused = api.call("PATCH", f"/jobs/{job_id}", {"target": unknown})
    assert (refused.status, refused.fields) == (422, ["target.secret_headers"])


@pytest.mark.integration
def test_an_idempotent_create_with_secrets_replays(api: Api) -> None:
    body = json.dumps(secret_job(Authorization=SECRET))
    event_headers = {"Idempotency-Key": "create-1"}
    first = api.call("POST", "/jobs", raw=body, headers=event_headers)
    again = api.call("POST", "/jobs", raw=body, headers=event_headers)
    assert (first.status, again.status, again.body["id"]) == (201, 200, first.body["id"])


@pytest.mark.unit
def test_a_header_cannot_be_plain_and_secret_or_override_the_signature() -> None:
    from pydantic import ValidationError

    from punctual.execution.targets import TargetRefused, check_target
    from punctual.model import HttpTarget

    with pytest.raises(ValidationError):
        HttpTarget(url="https://example.com", headers={"authorization": "a"}, secret_headers={"Authorization": "b"})
    with pytest.raises(TargetRefused):
        check_target(HttpTarget(url="https://example.com", secret_headers={"Punctual-Signature": "x"}), TargetPolicy())


# -- the worker's side: opened for the request, signed, never logged ----------------------------------


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append((dict(self.headers.items()), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


@pytest.mark.integration
def test_the_worker_sends_the_secret_and_a_signature_the_owner_can_verify(
    api: Api, receiver: tuple[str, list[tuple[dict[str, str], bytes]]], caplog: pytest.LogCaptureFixture
) -> None:
    url, received = receiver
    created = api.call("POST", "/jobs", secret_job(url, Authorization=SECRET))
    assert created.status == 201, created.body
    job = api.engine.store.get_job(created.body["id"])
    run = Run(job_id=job.id, scheduled_at=1_800_000_000_000, owner=OWNER, deadline_at=1, created_at=1)
    targets = Targets(TargetPolicy(allow_loopback=True), keys=api.engine.keys)
    with caplog.at_level(logging.DEBUG):
        result = targets.execute(job, run, 1, time.monotonic() + 10)
    assert result.ok, result
    [(headers, body)] = received
    lowered = {k.lower(): v for k, v in headers.items()}
    assert lowered["authorization"] == SECRET and lowered["x-plain"] == "p"
    secret = api.call("GET", "/signing-secret").body["secret"]
    request = {"method": "POST", "url": url, "job_id": lowered["x-punctual-job-id"]}
    verify(secret, lowered["punctual-signature"], lowered["x-punctual-run-id"], body, **request)
    with pytest.raises(SignatureError):
        verify(
            api.engine.keys.signing_secret("someone-else"), lowered["punctual-signature"], run.run_id, body, **request
        )
    assert SECRET not in caplog.text
    assert SECRET not in repr(Invocation.of(job, run, 1, api.engine.keys))


@pytest.mark.unit
def test_verify_refuses_tampering_other_runs_replays_and_accepts_a_rotated_secret() -> None:
    secret, body, now = "psk_test", b'{"n":1}', 1_900_000_000
    line = {"job_id": "job_a", "method": "POST", "host": "example.com", "path": "/hook"}
    request = {"job_id": "job_a", "method": "POST", "url": "https://example.com/hook"}
    header = signature_header(secret, now, "run_a", body, **line, v1=True)
    assert verify(secret, header, "run_a", body, **request, now=now + 10) == now
    for args in (
        (secret, header, "run_a", b'{"n":2}'),
        (secret, header, "run_b", body),
        ("psk_other", header, "run_a", body),
    ):
        with pytest.raises(SignatureError):
            verify(*args, **request, now=now)
    with pytest.raises(SignatureError, match="replay"):
        verify(secret, header, "run_a", body, **request, now=now + 301)
    for bad in (None, "", "v1=abc", "t=x,v1=abc", "t=1,v3=abc"):
        with pytest.raises(SignatureError):
            verify(secret, bad, "run_a", body, **request, now=now)
    rotated = header + "," + signature_header("psk_new", now, "run_a", body, **line, v1=False).split(",")[1]
    assert verify("psk_new", rotated, "run_a", body, **request, now=now) == now


def _raw_storage(api: Api) -> bytes:
    """Everything the engine keeps about jobs, as bytes (the SQLite file; the DynamoDB items)."""
    engine: Any = api.engine
    if hasattr(engine, "clients"):
        items = engine.clients.dynamodb.scan(TableName=engine.store.jobs_table)["Items"]
        return json.dumps(items).encode()
    engine.store._db.connection().execute("PRAGMA wal_checkpoint(FULL)")
    return b"".join(path.read_bytes() for path in engine.path.parent.glob(engine.path.name + "*"))


@pytest.mark.integration
def test_the_async_worker_signs_and_sends_the_secret_too(
    api: Api, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]
) -> None:
    import asyncio

    from punctual.execution.targets.aio import AsyncTargets

    url, received = receiver
    created = api.call("POST", "/jobs", secret_job(url, Authorization=SECRET))
    job = api.engine.store.get_job(created.body["id"])
    run = Run(job_id=job.id, scheduled_at=1_800_000_000_000, owner=OWNER, deadline_at=1, created_at=1)
    targets = AsyncTargets(TargetPolicy(allow_loopback=True), keys=api.engine.keys)
    try:
        result = asyncio.run(targets.execute(job, run, 1, 10.0))
    finally:
        targets.close()
    assert result.ok, result
    [(headers, body)] = received
    lowered = {k.lower(): v for k, v in headers.items()}
    assert lowered["authorization"] == SECRET
    request = {"method": "POST", "url": url, "job_id": job.id}
    verify(api.engine.keys.signing_secret(OWNER), lowered["punctual-signature"], run.run_id, body, **request)


@pytest.mark.integration
def test_a_job_chooses_its_signatures_and_the_signing_secret_says_how_it_signs(api: Api) -> None:
    # issue 26, case 6: v2 covers the request; a job opts out of v1 with "signature": "v2"
    chosen = api.call(
        "POST", "/jobs", {**secret_job(), "target": {"type": "http", "url": "https://e.com/h", "signature": "v2"}}
    )
    assert chosen.status == 201, chosen.body
    assert api.call("GET", f"/jobs/{chosen.body['id']}").body["target"]["signature"] == "v2"
    unset = api.call("POST", "/jobs", secret_job())
    assert "signature" not in unset.body["target"]  # the release's default (v1+v2 until 0.2.0)
    refused = api.call(
        "POST", "/jobs", {**secret_job(), "target": {"type": "http", "url": "https://e.com/h", "signature": "v1"}}
    )
    assert refused.status == 422 and any("signature" in field for field in refused.fields), refused.body
    shown = api.call("GET", "/signing-secret").body
    assert (shown["header"], shown["scheme"], shown["v1_until"]) == ("Punctual-Signature", "v2", "0.2.0")
    assert shown["signed"].startswith("v2\\n<t>\\n<X-Punctual-Run-Id>\\n<X-Punctual-Job-Id>\\n<METHOD>")
