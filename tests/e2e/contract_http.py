"""A harness for the run contract over HTTP: the real CLI components as separate processes.

``System`` starts ``punctual api``, ``punctual scheduler``, ``punctual worker`` (as many as a test
wants, each killable on its own) and ``punctual reaper`` on one temporary data dir (the embedded
engine), every one of them its own process, as a user runs them on one machine. A target HTTP
server runs in its own process too (``python -m tests.e2e.contract_http target ...``): it logs
each request's arrival (epoch ms), method, path, ``Idempotency-Key``, run id and attempt header
to a JSON-lines file, and answers after ``?sleep=<s>`` seconds with ``?status=<code>`` (default
200), so a test can make any path slow or failing.

Everything listens on 127.0.0.1; every wait is bounded; :meth:`System.close` ends exactly the
processes it started (SIGTERM, then SIGKILL after a grace period).

The clock: all processes read the same wall clock. ``clock_offset_ms`` shifts it for every
process alike (the API, the scheduler, the workers, the reaper and the target's log), through a
launcher that adds the offset to ``SystemClock`` (``python -m tests.e2e.contract_http cli ...``):
a test of a cron job can then put a minute boundary a few seconds ahead instead of waiting for
one. Without an offset the processes run the plain CLI.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.waiting import wait_until

if TYPE_CHECKING:  # the target's process imports this module too: it needs none of the test stack
    from tests.e2e.conftest import ApiClient, Contract

# Wider than the deployed defaults (5 s lookahead, 2 s pre-lease), so that "claimed, not yet held"
# and "held" are seconds-wide windows an edit over HTTP lands in even on a busy machine.
LOOKAHEAD_MS = 10_000
PRELEASE_S = 5

REPO = Path(__file__).resolve().parents[2]
API_KEY = "contract-e2e-key-0123456789"
START_TIMEOUT_S = 30.0  # a process prints what it listens on within this (imports on a busy machine)
STOP_GRACE_S = 15.0  # SIGTERM, then SIGKILL after this
CLOCK_OFFSET_ENV = "CONTRACT_E2E_CLOCK_OFFSET_MS"
# The e2e tier's name for the shared bounded wait (its tests import it from here).
wait_for = wait_until


# -- the target, in its own process ---------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Logs the request on arrival, waits ``?sleep`` seconds, answers ``?status`` (default 200)."""

    server: Any
    protocol_version = "HTTP/1.1"  # keep-alive, as the worker's client expects of real targets

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        arrived = _now_ms()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        entry = {
            "event": "arrived",
            "at": arrived,
            "method": self.command,
            "path": parts.path,
            "query": parts.query,
            "key": self.headers.get("Idempotency-Key"),
            "run_id": self.headers.get("X-Punctual-Run-Id"),
            "attempt": self.headers.get("X-Punctual-Attempt"),
            "scheduled_at": self.headers.get("X-Punctual-Scheduled-At"),
            "headers": dict(self.headers),
            "body": body.decode("utf-8", "replace"),
        }
        self.server.log(entry)
        sleep_s = float(query.get("sleep", 0))
        if sleep_s > 0:
            time.sleep(sleep_s)
        status = int(query.get("status", 200))
        reply = f"{parts.path} -> {status}".encode()
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            self.wfile.flush()
        except OSError:  # the caller gave up (a timeout): log it, as the caller saw it
            self.server.log({"event": "abandoned", "at": _now_ms(), "run_id": entry["run_id"], "path": parts.path})
            return
        self.server.log({"event": "answered", "at": _now_ms(), "run_id": entry["run_id"], "path": parts.path})

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000 + int(os.environ.get(CLOCK_OFFSET_ENV) or 0)


def serve_target(log_path: str, port_path: str, port: str = "0") -> None:
    """The target's process: serve on 127.0.0.1:``port`` (0: a free one), the port written to
    ``port_path``, until SIGTERM."""
    lock = threading.Lock()
    with open(log_path, "a", encoding="utf-8") as log_file:

        def log(entry: dict[str, Any]) -> None:
            with lock:
                log_file.write(json.dumps(entry) + "\n")
                log_file.flush()

        server = ThreadingHTTPServer(("127.0.0.1", int(port)), _Handler)
        server.daemon_threads = True
        server.log = log  # type: ignore[attr-defined]
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
        Path(port_path).write_text(str(server.server_address[1]))
        server.serve_forever(poll_interval=0.05)
        server.server_close()


# -- processes ------------------------------------------------------------------------------------


@dataclass
class Proc:
    """One started process and the file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    log_start: int = 0  # where this process's output begins in the (appended) log file

    def output(self, last: int = 4_000) -> str:
        """The last ``last`` characters this process wrote."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_start)
                return log.read().decode(errors="replace")[-last:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is cleaned up."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=STOP_GRACE_S)

    def stop(self) -> int | None:
        """SIGTERM (a graceful stop), SIGKILL if it does not end within the grace period."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.popen.send_signal(signal.SIGKILL)
                self.popen.wait(timeout=STOP_GRACE_S)
        self.log_file.close()
        return self.popen.returncode


@dataclass
class Target:
    """The target server's process and what it logged."""

    proc: Proc
    port: int
    log_path: Path

    def url(self, path: str, **query: Any) -> str:
        suffix = "&".join(f"{k}={v}" for k, v in query.items())
        return f"http://127.0.0.1:{self.port}{path}" + (f"?{suffix}" if suffix else "")

    def entries(self) -> list[dict[str, Any]]:
        try:
            lines = self.log_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def calls(self, path: str | None = None, *, run_id: str | None = None) -> list[dict[str, Any]]:
        """The requests that arrived (oldest first), for ``path`` and/or ``run_id`` if given."""
        return [
            e
            for e in self.entries()
            if e["event"] == "arrived"
            and (path is None or e["path"] == path)
            and (run_id is None or e["run_id"] == run_id)
        ]

    def answers(self, path: str) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e["event"] == "answered" and e["path"] == path]


@dataclass
class System:
    """The components of one Punctual deployment on one data dir, each its own process."""

    root: Path
    env: dict[str, str]
    clock_offset_ms: int = 0
    procs: list[Proc] = field(default_factory=list)
    api_url: str = ""
    target: Target | None = None
    contract: Contract | None = None
    clients: list[ApiClient] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def now_ms(self) -> int:
        """The wall clock every process of this system reads."""
        return time.time_ns() // 1_000_000 + self.clock_offset_ms

    # -- starting ---------------------------------------------------------------------------------

    def start_target(self, port: int = 0) -> Target:
        """The target server on ``port`` (0: a free one; a restarted system passes its old port)."""
        log_path, port_path = self.root / "target.jsonl", self.root / "target.port"
        port_path.unlink(missing_ok=True)
        argv = ["target", str(log_path), str(port_path), str(port)]
        proc = self._spawn("target", [sys.executable, "-m", "tests.e2e.contract_http", *argv])
        wait_until(
            lambda: port_path.exists() and port_path.read_text().strip(), START_TIMEOUT_S, "the target", proc.output
        )
        self.target = Target(proc, int(port_path.read_text()), log_path)
        return self.target

    def start_api(self) -> str:
        proc = self._punctual("api", "api", "--data-dir", str(self.data_dir), "--port", "0", "--api-key", API_KEY)
        line = wait_until(lambda: _line_with(proc, "Punctual API: "), START_TIMEOUT_S, "the API", proc.output)
        self.api_url = line.split("Punctual API: ", 1)[1].strip()
        from tests.e2e.conftest import Contract

        document = httpx.get(f"{self.api_url}/openapi.json", timeout=10).json()
        self.contract = Contract(document)
        return self.api_url

    def start_scheduler(self, *, lookahead_ms: int = 5_000) -> Proc:
        return self._punctual(
            "scheduler", "scheduler", "--data-dir", str(self.data_dir), "--lookahead-ms", str(lookahead_ms)
        )

    def start_worker(self, name: str, *, visibility_s: int = 5, wait_s: float = 0.2) -> Proc:
        return self._punctual(
            name,
            "worker",
            "--data-dir",
            str(self.data_dir),
            "--allow-loopback",
            "--wait-s",
            str(wait_s),
            "--visibility-s",
            str(visibility_s),
            "--worker-id",
            name,
        )

    def start_reaper(self, *, interval_s: float = 1.0) -> Proc:
        return self._punctual("reaper", "reaper", "--data-dir", str(self.data_dir), "--interval-s", str(interval_s))

    def client(self, key: str = API_KEY) -> ApiClient:
        """An HTTP client of the API (the dev key's owner); every answer is checked against the contract."""
        from tests.e2e.conftest import ApiClient

        assert self.contract is not None, "start_api first"
        client = ApiClient(self.api_url, key, self.contract)
        self.clients.append(client)
        return client

    # -- looking inside (the embedded engine's file, read only) -----------------------------------

    def message_of(self, run_id: str) -> dict[str, Any] | None:
        """The dispatch message of ``run_id`` as the queue has it now (receive count, visible_at), or None.

        A message received and not yet visible again is held by a worker: before the run's instant
        that is a pre-lease.
        """
        uri = f"file:{self.data_dir / 'punctual.db'}?mode=ro"
        with contextlib_closing(sqlite3.connect(uri, uri=True, timeout=5)) as conn:
            rows = conn.execute(
                "SELECT receive_count, visible_at, receipt FROM queue WHERE body LIKE ? ORDER BY id",
                (f'%"{run_id}"%',),
            ).fetchall()
        if not rows:
            return None
        count, visible_at, receipt = rows[-1]
        return {"receive_count": count, "visible_at": visible_at, "receipt": receipt, "messages": len(rows)}

    # -- stopping ---------------------------------------------------------------------------------

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for proc in reversed(self.procs):
            proc.stop()

    def outputs(self) -> str:
        """Every process's last output, for a failing test's message."""
        return "\n".join(f"--- {p.name} (rc={p.popen.poll()}) ---\n{p.output()}" for p in self.procs)

    # -- helpers ----------------------------------------------------------------------------------

    def _punctual(self, name: str, *argv: str) -> Proc:
        if self.clock_offset_ms:
            command = [sys.executable, "-m", "tests.e2e.contract_http", "cli", *argv]
        else:
            command = [sys.executable, "-m", "punctual.cli", *argv]
        return self._spawn(name, command)

    def _spawn(self, name: str, command: list[str]) -> Proc:
        log_path = self.root / f"{name}.log"
        log_file = open(log_path, "ab")  # noqa: SIM115 (closed by Proc.stop)
        start = log_file.tell()
        popen = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=self.env, cwd=REPO)
        proc = Proc(name, popen, log_path, log_file, start)
        self.procs.append(proc)
        return proc


@contextmanager
def system(
    root: Path,
    *,
    clock_offset_ms: int = 0,
    lease_margin_s: int = 2,
    prelease_s: int | None = PRELEASE_S,
    extra_env: dict[str, str] | None = None,
) -> Iterator[System]:
    """A :class:`System` under ``root`` (the caller starts what it needs); closed on exit.

    Nothing ``PUNCTUAL_*`` or ``AWS_*`` leaks in from the caller's environment. The API allows
    loopback targets (the target server is on 127.0.0.1), as every worker does (``--allow-loopback``).
    """
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PUNCTUAL_"))}
    env = {
        **inherited,
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers" / "core" / "python"), str(REPO)]),
        "PYTHONUNBUFFERED": "1",
        "PUNCTUAL_TARGET_ALLOW_LOOPBACK": "true",
        "PUNCTUAL_LEASE_MARGIN_S": str(lease_margin_s),
        CLOCK_OFFSET_ENV: str(clock_offset_ms),
        **({"PUNCTUAL_PRELEASE_S": str(prelease_s)} if prelease_s is not None else {}),
        "PUNCTUAL_LOOKAHEAD_MS": str(LOOKAHEAD_MS),
        **(extra_env or {}),
    }
    (root / "data").mkdir(parents=True, exist_ok=True)
    stack = System(root, env, clock_offset_ms)
    try:
        yield stack
    finally:
        stack.close()


def sleep_until(system_: System, at_ms: int) -> None:
    """Sleep until the system's clock reads ``at_ms`` (returns at once if it passed)."""
    wait_ms = at_ms - system_.now_ms()
    if wait_ms > 0:
        time.sleep(wait_ms / 1000)


def _line_with(proc: Proc, marker: str) -> str | None:
    if proc.popen.poll() is not None:
        raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}: {proc.output()}")
    for line in proc.output(last=100_000).splitlines():
        if marker in line:
            return line
    return None


@contextmanager
def contextlib_closing(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    try:
        yield conn
    finally:
        conn.close()


def new_name() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


# -- launchers ------------------------------------------------------------------------------------


def _shifted_cli(argv: list[str]) -> int:
    """``punctual <argv>`` with every ``SystemClock`` shifted by ``CONTRACT_E2E_CLOCK_OFFSET_MS``."""
    from punctual.cli import main
    from punctual.clock import SystemClock

    offset = int(os.environ.get(CLOCK_OFFSET_ENV) or 0)
    unshifted = SystemClock.now_ms
    SystemClock.now_ms = lambda self: unshifted(self) + offset  # type: ignore[method-assign]
    return main(argv)


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "target":
        serve_target(*rest)
    elif kind == "cli":
        sys.exit(_shifted_cli(rest))
    else:
        raise SystemExit(f"unknown launcher {kind!r}")
