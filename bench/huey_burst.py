"""A peer measured like ``punctual bench burst --execute``: Huey (SqliteHuey) on N tasks due at one second.

Run: ``.venv/bin/python bench/huey_burst.py [--jobs 20000] [--workers 4] [--target-delay-ms 200]``
(Huey is not a Punctual dependency: ``.venv/bin/pip install huey`` first.)

The same burst as Punctual's bench: ``--jobs`` one-time tasks all due at one whole second T, each
making one HTTP POST to the no-op target (``punctual.bench.target``: its own process, 127.0.0.1,
204 after ``--target-delay-ms``). Start lateness = when the target call began minus T; throughput =
tasks completed per second from the first start to the last finish; nearest-rank percentiles as
``punctual.metrics.percentile``.

How Huey runs it, with Huey's own defaults except what the comparison needs:
- ``SqliteHuey`` on a file in a temp directory (WAL, Huey's default ``synchronous``; no fsync
  option passed), results on (default; the task returns None, which Huey does not store).
- ``huey_consumer -w 4 -k process`` (the worker count and type are the comparison's), every other
  consumer option at its default: the scheduler checks the schedule every 1 s (``-s``, counted
  from the consumer's start, not aligned to the second), an idle worker polls the queue after
  0.1 s growing by x1.15 per empty poll up to 10 s (``-d``/``-b``/``-m``), INFO logging (to a
  file in the temp directory).
- The consumer is started first and left to settle, then T is set ``--lead-s`` ahead (10 s: about
  the idle time Punctual's workers have before their burst) and the tasks are written to Huey's
  schedule as ``huey.add_schedule(task)`` writes them (eta = T), in one transaction.
  ``task.schedule(eta=T)`` ends in the same row (it enqueues the task; a worker dequeues it, sees
  the eta ahead and calls ``add_schedule``); writing the rows directly skips work that would happen
  before T anyway, as Punctual's bench bulk-loads its jobs.
- Each worker process keeps one keep-alive ``http.client`` connection (made after the fork), so
  the client is not what is measured; each task appends "index start_ms finish_ms status" to its
  process's own file (one ``os.write``), read back at the end.

Bounded: the consumer must be up within 60 s, the load must end before T, the burst gets
``--timeout-s`` after T (default: Punctual's bench's 60 s plus 5 ms per task, plus 1.5x the time 4
workers need to wait out the target's delay one call at a time); then the consumer is
stopped (SIGINT, then SIGKILL of its process group) and the temp directory removed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import importlib
import importlib.metadata
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "layers/core/python"))

from punctual.bench.target import noop_target  # noqa: E402
from punctual.metrics import percentile  # noqa: E402

DB_ENV = "PUNCTUAL_HUEY_BURST_DB"  # set: this module is the consumer's app (``huey_burst.huey``)
RESULTS_ENV = "PUNCTUAL_HUEY_BURST_RESULTS"
BODY = json.dumps({"hello": "world", "n": 1}).encode()
HEADERS = {"User-Agent": "huey-burst/0.1", "Content-Type": "application/json"}

# --- the Huey app: built only when imported by the consumer or by main() after setting DB_ENV ---

_connection: http.client.HTTPConnection | None = None  # per worker process (made after the fork)


def _post(url: str) -> int:
    global _connection
    parts = urlsplit(url)
    for attempt in (1, 2):  # a kept-alive connection the target closed: reconnect once
        if _connection is None:
            _connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        try:
            _connection.request("POST", parts.path, body=BODY, headers=HEADERS)
            response = _connection.getresponse()
            response.read()
            return response.status
        except (http.client.HTTPException, OSError):
            _connection.close()
            _connection = None
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def call_target_impl(url: str, index: int) -> None:
    """The task: one POST to the target, its start and finish recorded in this process's file."""
    started = time.time_ns() // 1_000_000
    status = _post(url)
    finished = time.time_ns() // 1_000_000
    path = Path(os.environ[RESULTS_ENV]) / f"results-{os.getpid()}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{index} {started} {finished} {status}\n".encode())
    finally:
        os.close(fd)


huey: Any = None
call_target: Any = None
if os.environ.get(DB_ENV):
    from huey import SqliteHuey

    huey = SqliteHuey("punctual-burst", filename=os.environ[DB_ENV])
    call_target = huey.task()(call_target_impl)

# --- the bench ---


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU so far of live processes (Linux ``/proc``; a process gone counts 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _start_consumer(tmp: Path, workers: int, extra: Sequence[str]) -> subprocess.Popen[bytes]:
    consumer = Path(sys.executable).with_name("huey_consumer")
    command = [str(consumer), "huey_burst.huey", "-w", str(workers), "-k", "process", *extra]
    env = {**os.environ, DB_ENV: str(tmp / "huey.db"), RESULTS_ENV: str(tmp)}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # its own session: the workers are its children, stopped together with it
    with (tmp / "consumer.log").open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait_until_started(consumer: subprocess.Popen[bytes], workers: int, timeout_s: float = 60.0) -> None:
    """Until the scheduler and every worker are forked and the consumer's CPU stops climbing."""
    deadline = time.monotonic() + timeout_s
    last = -1.0
    while time.monotonic() < deadline:
        if consumer.poll() is not None:
            raise RuntimeError(f"huey_consumer exited with {consumer.returncode}")
        pids = [consumer.pid, *_children(consumer.pid)]
        now = _cpu_seconds(pids)
        if len(pids) == workers + 2 and now - last < 0.02:
            return
        last = now
        time.sleep(0.25)
    raise RuntimeError("huey_consumer did not start within 60 s")


def _stop(consumer: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        consumer.send_signal(signal.SIGINT)  # Huey's graceful stop
    with contextlib.suppress(subprocess.TimeoutExpired):
        consumer.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(consumer.pid, signal.SIGKILL)  # the session we started: consumer and workers only
    with contextlib.suppress(subprocess.TimeoutExpired):
        consumer.wait(10)


def _finished(tmp: Path) -> int:
    """Tasks recorded so far (cheap: counts lines, polled while the burst runs)."""
    return sum(path.read_bytes().count(b"\n") for path in tmp.glob("results-*.txt"))


def _results(tmp: Path) -> list[tuple[int, int, int, int]]:
    """(index, start ms, finish ms, status) of every task recorded (complete lines only)."""
    rows = []
    for path in tmp.glob("results-*.txt"):
        for line in path.read_text().split("\n")[:-1]:
            index, started, finished, status = line.split()
            rows.append((int(index), int(started), int(finished), int(status)))
    return rows


def _load(app: Any, tasks: Sequence[Any]) -> None:
    """What ``huey.add_schedule(task)`` writes for each task, in one transaction: one commit per
    task (Huey's way) takes ~9 s for 20,000 here, longer than the lead the burst should have."""
    storage = app.storage
    rows = [(storage.name, storage.to_blob(app.serialize_task(t)), t.eta.timestamp()) for t in tasks]
    with storage.db(commit=True) as cursor:
        cursor.executemany("insert into schedule (queue, data, timestamp) values (?, ?, ?)", rows)


@dataclass(frozen=True)
class Burst:
    jobs: int = 20_000
    workers: int = 4
    target_delay_ms: int = 0
    lead_s: float = 10.0
    timeout_s: float | None = None  # after T; None: _default_timeout_s
    consumer_args: tuple[str, ...] = ()


def _default_timeout_s(burst: Burst) -> float:
    """Punctual's bound (a minute plus 5 ms per run) plus 1.5x the time the workers need to wait out
    the target's delay one call at a time (a process worker runs one task at a time: 20,000 calls
    of 200 ms on 4 workers are 1,000 s)."""
    return 60 + burst.jobs * 0.005 + 1.5 * burst.jobs * burst.target_delay_ms / 1000 / burst.workers


def bench(burst: Burst) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="huey-burst-") as tmp_name, noop_target(burst.target_delay_ms) as url:
        tmp = Path(tmp_name)
        os.environ[DB_ENV] = str(tmp / "huey.db")
        sys.path.insert(0, str(HERE))
        app = importlib.import_module("huey_burst")  # the consumer's module name, so task names match
        consumer = _start_consumer(tmp, burst.workers, burst.consumer_args)
        try:
            _wait_until_started(consumer, burst.workers)
            settled_at = time.time()
            due_s = math.ceil(settled_at + burst.lead_s)
            eta = datetime.datetime.fromtimestamp(due_s, datetime.UTC)
            _load(app.huey, [app.call_target.s(url, index, eta=eta) for index in range(burst.jobs)])
            loaded_before_due_s = due_s - time.time()
            if loaded_before_due_s < 0.5:
                raise RuntimeError(f"loading ended {loaded_before_due_s:.1f} s before T: raise --lead-s")
            time.sleep(max(0.0, due_s - 1 - time.time()))
            pids = [consumer.pid, *_children(consumer.pid)]
            cpu_before = _cpu_seconds(pids)
            limit_s = due_s + (_default_timeout_s(burst) if burst.timeout_s is None else burst.timeout_s)
            while time.time() < limit_s and _finished(tmp) < burst.jobs:
                time.sleep(0.25)
            cpu_s = _cpu_seconds(pids) - cpu_before
            rows = _results(tmp)
        finally:
            _stop(consumer)
            app.huey.storage.close()
        log_tail = (tmp / "consumer.log").read_text(errors="replace").splitlines()[-5:]
    figures = _figures(burst, rows, due_s * 1000)
    figures["loaded_seconds_before_due"] = round(loaded_before_due_s, 2)
    figures["consumer_cpu_seconds_burst"] = round(cpu_s, 2)  # consumer, scheduler and workers, from T - 1 s
    done = figures["runs_succeeded"]
    figures["consumer_cpu_seconds_per_1000_runs"] = round(cpu_s * 1000 / done, 3) if done else None
    if done < burst.jobs:
        figures["consumer_log_tail"] = log_tail
    return figures


def _figures(burst: Burst, rows: list[tuple[int, int, int, int]], due_ms: int) -> dict[str, Any]:
    done = [r for r in rows if r[3] == 204]
    lateness = sorted(max(0, started - due_ms) for _, started, _, _ in done)
    span_s = (max(r[2] for r in done) - min(r[1] for r in done)) / 1000 if done else 0
    return {
        "peer": "huey",
        "huey_version": importlib.metadata.version("huey"),
        "storage": "SqliteHuey",
        "jobs": burst.jobs,
        "runs_succeeded": len(done),
        "duplicates": len(done) - len({r[0] for r in done}),
        "worker_processes": burst.workers,
        "consumer_args": ["-w", str(burst.workers), "-k", "process", *burst.consumer_args],
        "target_delay_ms": burst.target_delay_ms,
        "start_lateness_ms_min": lateness[0] if lateness else None,
        "start_lateness_ms_p50": percentile(lateness, 50),
        "start_lateness_ms_p99": percentile(lateness, 99),
        "start_lateness_ms_max": lateness[-1] if lateness else None,
        "runs_completed_per_second": round(len(done) / span_s) if span_s > 0 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4, help="huey_consumer -w (process workers)")
    parser.add_argument("--target-delay-ms", type=int, default=0)
    parser.add_argument("--lead-s", type=float, default=10.0, help="T is this far after the consumer settled")
    parser.add_argument("--timeout-s", type=float, default=None, help="bound after T (default: see _default_timeout_s)")
    parser.add_argument("--consumer-args", default="", help='extra huey_consumer options, e.g. "-m 1"')
    args = parser.parse_args()
    try:
        importlib.import_module("huey")
    except ImportError:
        sys.exit("Huey is not installed (not a Punctual dependency): .venv/bin/pip install huey")
    burst = Burst(args.jobs, args.workers, args.target_delay_ms, args.lead_s, args.timeout_s)
    print(json.dumps(bench(replace(burst, consumer_args=tuple(shlex.split(args.consumer_args))))))


if __name__ == "__main__":
    main()
