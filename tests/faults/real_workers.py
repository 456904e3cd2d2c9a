"""Real ``punctual worker`` processes against both engines, and a local HTTP target for them: the
scaffolding of the worker-kill and tenant-limit fault tests.

``backend`` (a fixture) is the engine a test reads and writes through and how worker processes
reach the same storage: SQLite under tmp_path, or DynamoDB + SQS on a moto server bound to
127.0.0.1. :func:`start_workers` starts the processes with nothing AWS_* or PUNCTUAL_* leaking in
from the developer's shell, :func:`stop` ends them, :func:`serving` runs a target on 127.0.0.1.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.model import HttpTarget, Job
from punctual.port import Engine

TIMEOUT_S = 3  # the jobs' timeout; lease = 3 + 1 (PUNCTUAL_LEASE_MARGIN_S) = 4 s
LEASE_MARGIN_S = 1
SHARDS, OPEN_SHARDS = 4, 2  # aws engine
DEAD_ENDPOINT = "http://127.0.0.1:9"  # nothing listens there: a worker that ignored --endpoint-url fails here
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


@dataclass
class Backend:
    """The engine the test reads and writes through, and how a worker process reaches the same storage."""

    engine: Engine
    worker_args: list[str]  # engine flags and engine-specific worker flags
    worker_env: dict[str, str]  # PUNCTUAL_* (and AWS_*) settings of the worker processes

    @property
    def embedded(self) -> bool:
        return "embedded" in self.worker_args


@pytest.fixture(params=["embedded", "aws"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    if request.param == "embedded":
        from punctual.engines.embedded import EmbeddedEngine

        engine: Engine = EmbeddedEngine.from_settings(Settings(data_dir=str(tmp_path)), clock=SystemClock())
        # --wait-s 0.2: the embedded queue polls SQLite; a short wait keeps the takeover quick
        yield Backend(engine, ["--engine", "embedded", "--data-dir", str(tmp_path), "--wait-s", "0.2"], {})
        engine.close()
        return

    from moto.server import ThreadedMotoServer

    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # for this process's boto3 clients (read lazily)
        prefix = f"kill{uuid.uuid4().hex[:8]}"
        settings = ensure_resources(
            Settings(engine=EngineKind.AWS, shards=SHARDS, open_shards=OPEN_SHARDS, name_prefix=prefix)
        )
        engine = AwsEngine(settings, clock=SystemClock(), serialize=True)
        env = {
            **FAKE_AWS,
            "AWS_ENDPOINT_URL": DEAD_ENDPOINT,
            "PUNCTUAL_NAME_PREFIX": prefix,
            "PUNCTUAL_SHARDS": str(SHARDS),
            "PUNCTUAL_OPEN_SHARDS": str(OPEN_SHARDS),
        }
        # --wait-s 1: an SQS long poll is whole seconds (0 would spin on empty receives against moto)
        args = ["--engine", "aws", "--endpoint-url", endpoint, "--wait-s", "1"]
        yield Backend(engine, args, env)
        engine.close()
    finally:
        moto.stop()


def start_workers(
    backend: Backend,
    names: list[str],
    *,
    max_in_flight: int,
    visibility_s: int,
    env: dict[str, str] | None = None,
) -> list[subprocess.Popen[bytes]]:
    """One ``punctual worker`` process per name (its --worker-id), allowed to call loopback targets,
    with the backend's settings, PUNCTUAL_LEASE_MARGIN_S and ``env``.

    Nothing AWS_* or PUNCTUAL_* leaks in from the developer's shell. On aws, the endpoint reaches the
    worker only through --endpoint-url: AWS_ENDPOINT_URL is a dead loopback port the flag must
    override, so even a broken flag sends nothing beyond 127.0.0.1.
    """
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PUNCTUAL_"))}
    settings = {
        **inherited,
        **backend.worker_env,
        "PUNCTUAL_LEASE_MARGIN_S": str(LEASE_MARGIN_S),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    command = [sys.executable, "-m", "punctual.cli", "worker", *backend.worker_args, "--allow-loopback"]
    return [
        subprocess.Popen(
            [*command, "--max-in-flight", str(max_in_flight), "--visibility-s", str(visibility_s), "--worker-id", name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=settings,
        )
        for name in names
    ]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process still running (a graceful stop), then wait; kill what does not stop in 15 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class Target(BaseHTTPRequestHandler):
    """A local HTTP target: quiet, and :meth:`answer` replies 200 "ok" (subclasses decide when)."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def read_body(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def serving(handler: type[Target], **state: Any) -> Iterator[Any]:
    """A threaded HTTP server of ``handler`` on 127.0.0.1 with ``state`` as attributes, for a fixture
    to yield; on exit it sets ``release`` (if the state has one), so nothing waits on it any longer."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    for name, value in state.items():
        setattr(srv, name, value)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    if isinstance(state.get("release"), threading.Event):
        state["release"].set()
    srv.shutdown()
    srv.server_close()


def hook_job(target: Any, *, owner: str, name: str, schedule: str, max_retries: int, now: int, next_run_at: int) -> Job:
    """A job calling ``target``'s /hook, with the TIMEOUT_S the leases here are sized for."""
    return Job(
        id=ids.new_job_id(),
        owner=owner,
        name=name,
        schedule=schedule,
        target=HttpTarget(url=f"http://127.0.0.1:{target.server_address[1]}/hook"),
        timeout_s=TIMEOUT_S,
        max_retries=max_retries,
        created_at=now,
        updated_at=now,
        next_run_at=next_run_at,
    )
