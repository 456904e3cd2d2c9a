"""A worker killed with SIGKILL in the middle of a run: another worker takes the run over (attempt + 1)
and completes it; the run ends succeeded with both attempts in its log (embedded engine, real processes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import AttemptOutcome, HttpTarget, Job, Run, RunState
from punctual.port import Dispatch

pytestmark = pytest.mark.faults

TIMEOUT_S = 3  # the job's timeout; lease = 3 + 1 (PUNCTUAL_LEASE_MARGIN_S) = 4 s


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


def start_worker(data_dir: Path, worker_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "punctual.cli", "worker", "--engine", "embedded", "--data-dir", str(data_dir)),
            *("--concurrency", "1", "--wait-s", "0.2", "--visibility-s", "1", "--allow-loopback"),
            *("--worker-id", worker_id),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PUNCTUAL_LEASE_MARGIN_S": "1", "PYTHONUNBUFFERED": "1"},
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_run_whose_worker_is_killed_is_completed_by_another_worker(tmp_path: Path, target: Any) -> None:
    # Given a run due now whose HTTP target hangs on the first request
    clock = SystemClock()
    engine = EmbeddedEngine.from_settings(Settings(data_dir=str(tmp_path)), clock=clock)
    now = clock.now_ms()
    job = Job(
        id=ids.new_job_id(),
        owner="owner-kill",
        name="kill-me",
        schedule="* * * * *",
        target=HttpTarget(url=f"http://127.0.0.1:{target.server_address[1]}/hook"),
        timeout_s=TIMEOUT_S,
        max_retries=0,  # a takeover is not a retry: the run still completes
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
    a = start_worker(tmp_path, "worker-a")
    b: subprocess.Popen[bytes] | None = None
    try:
        assert wait_for(lambda: len(target.requests) == 1, timeout_s=20), "worker A never called the target"
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        leased = current()
        assert leased.state is RunState.RUNNING and leased.attempt == 1 and leased.worker_id == "worker-a/0"

        # Then worker B takes the run over once A's lease has expired, and completes it
        b = start_worker(tmp_path, "worker-b")
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
        (1, "worker-a/0", AttemptOutcome.LEASE_EXPIRED),
        (2, "worker-b/0", AttemptOutcome.SUCCEEDED),
    ]
    assert [(h["Idempotency-Key"], h["X-Punctual-Attempt"]) for h in target.requests] == [
        (run.run_id, "1"),
        (run.run_id, "2"),
    ]
    assert engine.queue.depth() == 0
    engine.close()
