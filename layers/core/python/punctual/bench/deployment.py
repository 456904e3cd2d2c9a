"""A one-machine deployment for benchmarks: ``punctual api``, ``punctual scheduler``, workers and
``punctual reaper``, each its own process (the plain CLI, default settings), on one embedded data dir.

Everything listens on 127.0.0.1. Each process's output goes to a file in the deployment's folder
(shown when one exits early). Every wait is bounded; :meth:`Deployment.stop` ends exactly the
processes it started (SIGTERM, SIGKILL after a grace period). CPU and peak RSS are read from
``/proc`` (Linux).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60.0  # imports on a busy 2-core machine
STOP_GRACE_S = 15.0


class DeploymentFailed(RuntimeError):
    """A process of the deployment did not start, or exited while it should run."""


@dataclass
class Process:
    """One started process and the file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    output: Path

    def check(self) -> None:
        """Raise :class:`DeploymentFailed` (with its last output) if the process exited."""
        if self.popen.poll() is not None:
            raise DeploymentFailed(f"{self.name} exited with {self.popen.returncode}: {self.tail()}")

    def tail(self, size: int = 3_000) -> str:
        try:
            return self.output.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """User + system CPU so far (``/proc/<pid>/stat``: utime and stime, in clock ticks)."""
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float | None:
        """The process's peak resident set so far (``VmHWM``), in MiB."""
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
        return None

    def stop(self) -> int | None:
        """SIGTERM (each component stops cleanly on it), SIGKILL after the grace period."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_GRACE_S)
        return self.popen.returncode


@dataclass
class Deployment:
    """The components of one deployment on ``root / "data"``, each its own process."""

    root: Path
    workers: int = 2
    api_key: str = field(default_factory=lambda: f"bench-{secrets.token_hex(16)}")
    processes: list[Process] = field(default_factory=list)
    api_url: str = ""

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def start(self) -> None:
        """The API first (it creates the data file), then the scheduler, the workers and the reaper;
        returns once each has started (imports done: its CPU stops climbing)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        api = self._spawn("api", "api", "--port", "0", "--api-key", self.api_key)
        self.api_url = _wait_for_line(api, "Punctual API: ").strip()
        self._spawn("scheduler", "scheduler")
        for index in range(1, self.workers + 1):
            name = f"worker-{index}"
            self._spawn(name, "worker", "--allow-loopback", "--worker-id", name)
        self._spawn("reaper", "reaper")
        _wait_until_idle(self.processes)

    def check(self) -> None:
        for process in self.processes:
            process.check()

    def by_role(self, role: str) -> list[Process]:
        return [p for p in self.processes if p.name == role or p.name.startswith(f"{role}-")]

    def cpu_seconds(self) -> dict[str, float]:
        return {p.name: p.cpu_seconds() for p in self.processes}

    def peak_rss_mib(self) -> dict[str, float | None]:
        return {p.name: p.peak_rss_mib() for p in self.processes}

    def stop(self) -> None:
        """Every process, the API last (the others stop first: nothing is left half done)."""
        for process in reversed(self.processes):
            process.stop()

    def _spawn(self, name: str, *argv: str) -> Process:
        command = [sys.executable, "-m", "punctual.cli", *argv]
        command += ["--engine", "embedded", "--data-dir", str(self.data_dir)]
        # PUNCTUAL_* variables of the caller reach every process (to try a setting); loopback targets
        # are allowed, for the API's check at create as for the workers
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PUNCTUAL_TARGET_ALLOW_LOOPBACK": "true"}
        output = self.root / f"{name}.log"
        with output.open("ab") as log:
            popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)  # noqa: S603
        process = Process(name, popen, output)
        self.processes.append(process)
        return process


@contextmanager
def deployment(root: Path, *, workers: int = 2) -> Iterator[Deployment]:
    """A :class:`Deployment` under ``root`` (the caller starts it); stopped when the block ends."""
    system = Deployment(root, workers)
    try:
        yield system
    finally:
        system.stop()


def _wait_for_line(process: Process, marker: str) -> str:
    """What follows ``marker`` on the first line of the process's output that has it."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        process.check()
        for line in process.tail(100_000).splitlines():
            if marker in line:
                return line.split(marker, 1)[1]
        time.sleep(0.1)
    raise DeploymentFailed(f"{process.name} did not print {marker!r} within {START_TIMEOUT_S:.0f} s: {process.tail()}")


def _wait_until_idle(processes: list[Process]) -> None:
    """Until every process's start-up is over (none used more than 20 ms of CPU in 0.25 s), for
    ``START_TIMEOUT_S`` at most: a machine busy with other work may never look idle."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = [-1.0] * len(processes)
    while time.monotonic() < deadline:
        for process in processes:
            process.check()
        now = [p.cpu_seconds() for p in processes]
        if all(n - prev < 0.02 for n, prev in zip(now, last, strict=True)):
            return
        last = now
        time.sleep(0.25)
