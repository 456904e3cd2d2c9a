"""A worker killed with SIGKILL in the middle of a run (or of batches: some executing, some waiting for
their instant): another worker takes the runs over (attempt + 1)
and completes it; the run ends succeeded with both attempts in its log (real worker processes, on both
engines: SQLite under tmp_path, and DynamoDB + SQS on a moto server bound to 127.0.0.1).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.model import AttemptOutcome, HttpTarget, Job, Run, RunState
from punctual.port import Dispatch, Engine

pytestmark = pytest.mark.faults

TIMEOUT_S = 3  # the job's timeout; lease = 3 + 1 (PUNCTUAL_LEASE_MARGIN_S) = 4 s
LEASE_MARGIN_S = 1
SHARDS, OPEN_SHARDS = 4, 2  # aws engine
DEAD_ENDPOINT = "http://127.0.0.1:9"  # nothing listens there: a worker that ignored --endpoint-url fails here
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


class BlockFirst(BaseHTTPRequestHandler):
    """The first request hangs until the test ends (its worker gets killed); later ones answer 200."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests.append(dict(self.headers))
            first = len(self.server.requests) == 1
        if first:
            self.server.release.wait(30)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def target() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), BlockFirst)
    srv.daemon_threads = True
    srv.requests, srv.lock, srv.release = [], threading.Lock(), threading.Event()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


@dataclass
class Backend:
    """The engine the test reads and writes through, and how a worker process reaches the same storage."""

    engine: Engine
    worker_args: list[str]  # engine flags and engine-specific worker flags
    worker_env: dict[str, str]  # PUNCTUAL_* (and AWS_*) settings of the worker processes


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


def start_worker(backend: Backend, worker_id: str, max_in_flight: int = 1) -> subprocess.Popen[bytes]:
    # Nothing AWS_* or PUNCTUAL_* leaks in from the developer's shell. On aws, the endpoint reaches the
    # worker only through --endpoint-url: AWS_ENDPOINT_URL is a dead loopback port the flag must override,
    # so even a broken flag sends nothing beyond 127.0.0.1.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PUNCTUAL_"))}
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "punctual.cli", "worker", *backend.worker_args),
            *("--max-in-flight", str(max_in_flight), "--visibility-s", "1", "--allow-loopback"),
            *("--worker-id", worker_id),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={
            **inherited,
            **backend.worker_env,
            "PUNCTUAL_LEASE_MARGIN_S": str(LEASE_MARGIN_S),
            "PYTHONUNBUFFERED": "1",
        },
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_run_whose_worker_is_killed_is_completed_by_another_worker(backend: Backend, target: Any) -> None:
    # Given a run due now whose HTTP target hangs on the first request
    engine = backend.engine
    now = SystemClock().now_ms()
    job = Job(
        id=ids.new_job_id(),
        owner="owner-kill",
        name="kill-me",
        schedule="* * * * *",
        target=HttpTarget(url=f"http://127.0.0.1:{target.server_address[1]}/hook"),
        timeout_s=TIMEOUT_S,
        max_retries=1,  # the killed attempt used one retry (as the reaper counts it); the second completes
        created_at=now,
        updated_at=now,
        next_run_at=now + 3_600_000,
    )
    engine.store.create_job(job)
    run = Run(job_id=job.id, scheduled_at=now, owner=job.owner, deadline_at=now + 120_000, created_at=now)
    engine.store.insert_runs([run])
    engine.queue.send([Dispatch(run.run_id, not_before=now)])
    current = lambda: engine.store.get_run(job.id, now)  # noqa: E731

    # When worker A is killed with SIGKILL while the target is executing the run
    a = start_worker(backend, "worker-a")
    b: subprocess.Popen[bytes] | None = None
    try:
        assert wait_for(lambda: len(target.requests) == 1, timeout_s=20), "worker A never called the target"
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        leased = current()
        assert leased.state is RunState.RUNNING and leased.attempt == 1 and leased.worker_id == "worker-a"

        # Then worker B takes the run over once A's lease has expired, and completes it
        b = start_worker(backend, "worker-b")
        assert wait_for(lambda: current().state is RunState.SUCCEEDED, timeout_s=20), current()
        # and B stops gracefully on SIGTERM
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=10) == 0
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    done = current()
    assert done.attempt == 2
    assert [(a.number, a.worker_id, a.outcome) for a in done.attempts] == [
        (1, "worker-a", AttemptOutcome.LEASE_EXPIRED),
        (2, "worker-b", AttemptOutcome.SUCCEEDED),
    ]
    assert [(h["Idempotency-Key"], h["X-Punctual-Attempt"]) for h in target.requests] == [
        (run.run_id, "1"),
        (run.run_id, "2"),
    ]
    assert engine.queue.depth() == 0
    assert engine.dead_letters.depth() == 0  # the takeover's redeliveries did not redrive the message


class BlockWhileA(BaseHTTPRequestHandler):
    """Every request hangs until ``release`` is set (worker A is killed meanwhile); then 200."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests.append(dict(self.headers))
        self.server.release.wait(30)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def blocking_target() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), BlockWhileA)
    srv.daemon_threads = True
    srv.requests, srv.lock, srv.release = [], threading.Lock(), threading.Event()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def test_a_worker_killed_with_batches_in_flight_and_waiting_loses_no_run_and_repeats_none(
    backend: Backend, blocking_target: Any
) -> None:
    # Given 10 runs due now and 10 due 3 s from now (their messages arrive ~1 s early: the worker
    # pre-leases them on arrival and holds them until their instant)
    engine = backend.engine
    url = f"http://127.0.0.1:{blocking_target.server_address[1]}/hook"
    now = SystemClock().now_ms()
    runs: list[Run] = []
    for i in range(20):
        at = now if i < 10 else now + 3_000
        job = Job(
            id=ids.new_job_id(),
            owner="owner-kill",
            name=f"batch-{i}",
            schedule="0 0 1 1 *",
            target=HttpTarget(url=url),
            timeout_s=TIMEOUT_S,
            max_retries=1,
            created_at=now,
            updated_at=now,
            next_run_at=now + 86_400_000,
        )
        engine.store.create_job(job)
        runs.append(Run(job_id=job.id, scheduled_at=at, owner=job.owner, deadline_at=at + 120_000, created_at=now))
    engine.store.insert_runs(runs)
    engine.queue.send(
        [Dispatch(r.run_id, not_before=r.scheduled_at, delay_s=2 if r.scheduled_at > now else 0) for r in runs]
    )
    current = lambda r: engine.store.get_run(r.job_id, r.scheduled_at)  # noqa: E731

    # When worker A (hundreds in flight) is killed while its first batch is executing and the second waits
    a = start_worker(backend, "worker-a", max_in_flight=500)
    b: subprocess.Popen[bytes] | None = None
    try:
        assert wait_for(lambda: len(blocking_target.requests) >= 10, timeout_s=30), "worker A never called the targets"
        wait_for(lambda: SystemClock().now_ms() >= now + 2_300, timeout_s=5)
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        blocking_target.release.set()

        # Then worker B completes every run: A's executing runs by takeover once their leases expired
        b = start_worker(backend, "worker-b", max_in_flight=500)
        done = lambda: all(current(r).state is RunState.SUCCEEDED for r in runs)  # noqa: E731
        assert wait_for(done, timeout_s=60), [current(r).state for r in runs]
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=15) == 0
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    calls: dict[str, list[str]] = {}
    for headers in blocking_target.requests:
        calls.setdefault(headers["Idempotency-Key"], []).append(headers["X-Punctual-Attempt"])
    taken_over = 0
    for run in runs:
        final = current(run)
        attempts = [(a.number, a.worker_id, a.outcome) for a in final.attempts]
        # no run lost: each ended succeeded by B; an earlier attempt exists only as A's expired lease
        assert attempts[-1][1:] == ("worker-b", AttemptOutcome.SUCCEEDED), attempts
        assert all(w == "worker-a" and o is AttemptOutcome.LEASE_EXPIRED for _, w, o in attempts[:-1]), attempts
        assert [n for n, _, _ in attempts] == list(range(1, len(attempts) + 1))
        # a pre-leased attempt starts at the run's instant, never before it (nor does its takeover)
        assert final.started_at is not None and final.started_at >= run.scheduled_at, final
        assert all(a.started_at is None or a.started_at >= run.scheduled_at for a in final.attempts), final.attempts
        # none executed twice except by that takeover: the target saw each attempt at most once (A may have
        # died between a lease and its call), and B's attempt exactly once
        seen = calls.get(run.run_id, [])
        assert len(seen) == len(set(seen)) and set(seen) <= {str(n) for n, _, _ in attempts}, (run.run_id, seen)
        assert str(attempts[-1][0]) in seen
        taken_over += len(attempts) == 2
    assert taken_over >= 10  # A had called the target 10 times: those runs were taken over after their leases
    assert engine.queue.depth() == 0
    assert engine.dead_letters.depth() == 0
