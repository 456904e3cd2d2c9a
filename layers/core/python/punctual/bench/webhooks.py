"""The webhook of ``punctual bench minute``: a real HTTP server in its own process on 127.0.0.1 that
logs when each request arrived and its ``Idempotency-Key`` (the run id).

nginx where installed (Debian's ``nginx-light``: ``scripts/install-nginx``), from a config generated
into a temporary folder: one worker process, ``backlog=4096`` (as the project's target; nginx's
default on Linux is 511), ``return 200``, or with a delay the echo module's ``echo_sleep`` (which
``nginx-light`` depends on). It logs ``$msec`` (when the request ended) and ``$request_time``
(since its first byte was read): arrival = their difference. Without nginx, or without the echo module
when a delay is asked for, the project's no-op target (:mod:`punctual.bench.target`, its own process)
stands in; :attr:`Webhook.description` says which one answered.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from punctual.bench.target import NoOpTarget, noop_target_process

ECHO_MODULE = Path("/usr/lib/nginx/modules/ngx_http_echo_module.so")  # Debian's libnginx-mod-http-echo
BACKLOG = 4096
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Arrival:
    at_ms: float  # epoch milliseconds the request arrived
    key: str | None  # its Idempotency-Key (None: it had none)
    new_connection: bool | None = None  # the first request on its connection (None: not known)


class Webhook(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def description(self) -> str: ...

    def arrivals(self) -> list[Arrival]:
        """Requests that arrived since the last call (or the last :meth:`finish`)."""
        ...

    def finish(self) -> list[Arrival]:
        """Stop the server (its log flushed) and return the arrivals not yet returned."""
        ...


@contextmanager
def webhook(delay_ms: int = 0, kind: str = "auto") -> Iterator[Webhook]:
    """The webhook answering after ``delay_ms``, stopped when the block ends. ``kind``: ``nginx``
    (raises :class:`RuntimeError` if it cannot), ``noop`` (the project's no-op target), or ``auto``:
    nginx if it is installed (found on PATH or in /usr/sbin) and can delay as asked, else the no-op target."""
    binary = find_nginx() if kind != "noop" else None
    usable = binary is not None and (delay_ms <= 0 or ECHO_MODULE.exists())
    if kind == "nginx" and not usable:
        raise RuntimeError(f"nginx is missing, or cannot delay without {ECHO_MODULE}: scripts/install-nginx")
    if binary is not None and usable:
        with nginx_webhook(binary, delay_ms) as server:
            yield server
        return
    if kind == "noop":
        why = "asked for"
    elif binary is None:
        why = "nginx not installed: scripts/install-nginx"
    else:
        why = f"nginx cannot delay without its echo module, {ECHO_MODULE}"
    with noop_target_process(delay_ms, keys=True) as target:
        yield NoOpWebhook(target, f"punctual no-op target, 204, answering after {delay_ms} ms ({why})")


def find_nginx() -> str | None:
    found = shutil.which("nginx")
    if found is None and Path("/usr/sbin/nginx").exists():  # not on a non-root user's PATH on Debian
        found = "/usr/sbin/nginx"
    return found


@dataclass
class NoOpWebhook:
    """The project's no-op target (:mod:`punctual.bench.target`) as a :class:`Webhook`."""

    target: NoOpTarget
    description: str

    @property
    def url(self) -> str:
        return self.target.url

    def arrivals(self) -> list[Arrival]:
        return [Arrival(at * 1000, key) for at, key in self.target.keyed_arrivals()]

    def finish(self) -> list[Arrival]:
        return self.arrivals()  # the block that started the target stops it


@dataclass
class NginxWebhook:
    """A running nginx and the access log it writes (read from ``offset`` on)."""

    url: str
    description: str
    process: subprocess.Popen[bytes]
    log: Path
    offset: int = 0
    stopped: bool = field(default=False)

    def arrivals(self) -> list[Arrival]:
        try:
            with self.log.open("rb") as log:
                log.seek(self.offset)
                text = log.read()
        except FileNotFoundError:
            return []
        complete = text.rfind(b"\n") + 1  # nginx flushes its buffer each second: a line may be cut
        self.offset += complete
        return [arrival for line in text[:complete].splitlines() if (arrival := _parse(line)) is not None]

    def finish(self) -> list[Arrival]:
        self.stop()
        return self.arrivals()

    def stop(self) -> None:
        """A graceful stop (SIGQUIT: the log buffer is written), SIGKILL after a bounded wait."""
        if self.stopped:
            return
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)


@contextmanager
def nginx_webhook(binary: str, delay_ms: int = 0) -> Iterator[NginxWebhook]:
    """nginx from ``binary`` on a free port of 127.0.0.1, answering 200 (after ``delay_ms``)."""
    with tempfile.TemporaryDirectory(prefix="punctual-nginx-") as folder:
        root = Path(folder)
        root.chmod(0o755)  # started as root, nginx's worker runs as nobody: it must reach its temp paths
        port = _free_port()
        config = root / "nginx.conf"
        config.write_text(nginx_config(root, port, delay_ms))
        command = [binary, "-p", str(root), "-c", str(config), "-e", str(root / "error.log"), "-g", "daemon off;"]
        with (root / "output").open("wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)  # noqa: S603
        answer = f"echo_sleep {delay_ms / 1000:g}, 200" if delay_ms > 0 else "return 200"
        version = _version(binary)
        server = NginxWebhook(
            f"http://127.0.0.1:{port}/hook",
            f"{version} ({answer}; 1 worker process, backlog {BACKLOG})",
            process,
            root / "access.log",
        )
        try:
            _wait_listening(port, process, root)
            yield server
        finally:
            server.stop()


def nginx_config(root: Path, port: int, delay_ms: int) -> str:
    """The config: everything under ``root``, listening on 127.0.0.1:``port`` only."""
    answer = f"echo_sleep {delay_ms / 1000:g}; echo_status 200;" if delay_ms > 0 else "return 200;"
    module = f"load_module {ECHO_MODULE};\n" if delay_ms > 0 else ""
    # room for every worker's connections (punctual worker --max-connections-per-host, 4,096 each)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    connections = 16_384 if hard == resource.RLIM_INFINITY else max(1024, min(16_384, hard - 64))
    temp = "\n".join(
        f"    {kind}_temp_path {root / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{module}worker_processes 1;
worker_rlimit_nofile {connections + 64};
pid {root / "nginx.pid"};
error_log {root / "error.log"} warn;
events {{ worker_connections {connections}; }}
http {{
    log_format arrivals '$msec $request_time $connection_requests $http_idempotency_key';
    access_log {root / "access.log"} arrivals buffer=256k flush=1s;
{temp}
    server {{
        listen 127.0.0.1:{port} backlog={BACKLOG};
        location / {{ {answer} }}
    }}
}}
"""


def _parse(line: bytes) -> Arrival | None:
    """One access-log line: ``$msec $request_time $connection_requests $http_idempotency_key``."""
    parts = line.split()
    if len(parts) < 3:
        return None
    ended_s, took_s, requests = float(parts[0]), float(parts[1]), int(parts[2])
    key = parts[3].decode("latin-1") if len(parts) > 3 and parts[3] != b"-" else None
    return Arrival(round((ended_s - took_s) * 1000, 3), key, requests == 1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes], root: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    log = "".join(p.read_text(errors="replace") for p in (root / "output", root / "error.log") if p.exists())
    raise RuntimeError(f"nginx did not start on 127.0.0.1:{port}: {log[-2000:]}")


def _version(binary: str) -> str:
    shown = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
    return (shown.stderr or shown.stdout).strip().removeprefix("nginx version: ") or "nginx"
