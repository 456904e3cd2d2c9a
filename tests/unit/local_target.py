"""A local HTTP target on 127.0.0.1 and the two clients that call it, shared by the target tests.

``Recorder`` answers by path and keeps every request; :func:`send_blocking` calls it through the
blocking client (``http.send``: the Lambda workers and the threaded worker), :func:`send_async`
through the worker's asyncio one (``AsyncTargets`` over ``wire``). ``test_targets`` runs each HTTP
scenario through both; ``test_async_targets`` and ``test_signing_wire`` use the rest.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from punctual import ids
from punctual.execution.targets import Invocation, TargetPolicy, TargetResult, http
from punctual.execution.targets.aio import AsyncTargets
from punctual.model import Job, Run, RunState

LOCAL = TargetPolicy(allow_loopback=True)
STRICT = TargetPolicy()
NOW = 1_799_999_000_000
SCHEDULED_AT = 1_800_000_000_000
JOB_ID = "job_" + "a" * 32
RUN_ID = ids.run_id_for(JOB_ID, SCHEDULED_AT)
INVOCATION = Invocation(RUN_ID, JOB_ID, SCHEDULED_AT, 2, {"report": "nightly", "n": 1})


class Recorder(BaseHTTPRequestHandler):
    """Answers by path: /ok 200, /fail 503, /bad 400, /redirect 302, /big 200 with 100 KB, /slow hangs."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append((self.command, self.path, dict(self.headers), body))
        if self.path == "/slow":
            self.server.release.wait(5)
        status, reply, extra = {
            "/ok": (200, b"accepted", {}),
            "/fail": (503, b"try later", {}),
            "/bad": (400, b"bad payload", {}),
            "/redirect": (302, b"", {"Location": "http://169.254.169.254/latest/meta-data/"}),
            "/big": (200, "é".encode() * 50_000, {}),
            "/slow": (200, b"late", {}),
        }.get(self.path, (404, b"no", {}))
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()


@pytest.fixture
def server() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.requests = []
    srv.release = threading.Event()
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def url(server: Any, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def job_with(target: Any) -> Job:
    """A job of JOB_ID with ``target`` and the invocation's payload."""
    return Job(
        id=JOB_ID,
        owner="alice",
        name="n",
        target=target,
        payload=INVOCATION.payload,
        schedule="* * * * *",
        timeout_s=30,
        max_retries=3,
        created_at=NOW,
        updated_at=NOW,
        next_run_at=SCHEDULED_AT,
        due_shard=0,
    )


def run_of(job: Job) -> Run:
    """The job's run at SCHEDULED_AT, running its invocation's attempt."""
    return Run(
        job_id=job.id,
        owner=job.owner,
        scheduled_at=SCHEDULED_AT,
        state=RunState.RUNNING,
        attempt=INVOCATION.attempt,
        created_at=NOW,
        deadline_at=SCHEDULED_AT + 60_000,
    )


def send_blocking(target: Any, policy: TargetPolicy = LOCAL, timeout_s: float = 5.0) -> TargetResult:
    """The invocation sent to ``target`` by the blocking client."""
    return http.send(target, INVOCATION, policy, time.monotonic() + timeout_s)


def send_async(
    target: Any, policy: TargetPolicy = LOCAL, timeout_s: float = 5.0, targets: AsyncTargets | None = None
) -> TargetResult:
    """The invocation's attempt executed on ``target`` by the asyncio client (``targets``, or a new
    one closed after the call)."""

    async def go() -> TargetResult:
        executor = targets or AsyncTargets(policy)
        try:
            job = job_with(target)
            return await executor.execute(job, run_of(job), INVOCATION.attempt, timeout_s)
        finally:
            if targets is None:
                executor.close()

    return asyncio.run(go())
