"""``punctual bench burst``: N jobs all due at the same second, on the embedded engine.

A real scheduler (real clock, default lookahead) claims them; the figures are the rate at which
runs are enqueued and the lateness of the moment each run becomes available to a worker
(visible on the queue) relative to its scheduled time. Precomputed runs are visible up to a second
early (SQS-style whole-second delays); a worker waits out the rest, so lateness counts from 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from punctual import metrics as m
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.errors import RunNotFound
from punctual.model import Run, RunState
from punctual.scheduling.claim import ClaimStats
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions, options_from_settings

SHARDS = 16
LEAD_MS = 4_000  # the burst second is this far after loading, so the lookahead precomputes it


def bench_burst(count: int, *, lookahead_ms: int | None = None) -> dict[str, Any]:
    lookahead_ms = Settings().lookahead_ms if lookahead_ms is None else lookahead_ms
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="punctual-burst-") as tmp:
        engine = EmbeddedEngine(Path(tmp) / "burst.db", shards=SHARDS, clock=clock)
        try:
            now = clock.now_ms()
            due_at = (now + LEAD_MS + lookahead_ms) // 1000 * 1000 + 1000
            store: Any = engine.store
            store.bulk_load_jobs(bench_jobs(count, now=now, due_at=due_at, shards=SHARDS))
            sink = m.InMemoryMetrics(reservoir=count + 10)
            scheduler = Scheduler(engine, clock, metrics=sink, options=_scheduler_options(lookahead_ms))
            busy_s, stats = _run_until_claimed(scheduler, count, until_ms=due_at + 10_000)
        finally:
            engine.close()
    samples = sorted(sink.samples[m.DISPATCH_LATENESS_MS])
    return {
        "jobs": count,
        "runs_enqueued": stats.dispatched,
        "enqueue_seconds": round(busy_s, 3),
        "runs_enqueued_per_second": round(stats.dispatched / busy_s) if busy_s else None,
        "available_lateness_ms_p50": m.percentile(samples, 50),
        "available_lateness_ms_p99": m.percentile(samples, 99),
        "available_lateness_ms_max": samples[-1] if samples else None,
        "available_within_1s": sum(1 for s in samples if s <= 1000),
    }


def _run_until_claimed(scheduler: Scheduler, count: int, *, until_ms: int) -> tuple[float, ClaimStats]:
    """Tick once a second (as the real loop does) until ``count`` runs were dispatched."""
    total = ClaimStats()
    busy = 0.0
    stop = threading.Event()
    clock = scheduler.clock
    while total.dispatched < count and clock.now_ms() < until_ms:
        started = time.perf_counter()
        stats = scheduler.tick()
        if stats.dispatched:
            busy += time.perf_counter() - started
        total.add(stats)
        stop.wait((1000 - clock.now_ms() % 1000) / 1000)
    scheduler.ownership.release_all()
    return busy, total


def bench_burst_execution(
    count: int,
    *,
    lookahead_ms: int | None = None,
    processes: int = 2,
    max_in_flight: int = 10_000,
    target_delay_ms: int = 0,
    prelease_s: int | None = None,
    target_host: str = "127.0.0.1",
    target_tls: bool = False,
    target: str = "noop",
) -> dict[str, Any]:
    """N one-time jobs due at one second, executed by ``processes`` real ``punctual worker``
    processes (up to ``max_in_flight`` runs each) against a no-op HTTP target that answers after
    ``target_delay_ms``, named ``target_host`` in the jobs' URL (it listens on 127.0.0.1), over
    HTTPS with ``target_tls`` (a certificate from a throwaway CA that only the workers trust).
    ``target``: ``noop`` (the project's no-op target), ``nginx`` (a target nobody here wrote; plain
    HTTP on 127.0.0.1 only) or ``auto`` (nginx where installed and the URL allows it).

    Start lateness = the moment the target call began (the attempt's ``started_at``) minus the
    scheduled time; throughput = runs completed per second from the first start to the last finish;
    worker CPU and peak RSS come from each worker process's resource usage at its exit (its whole
    life, idle polling before the burst included).
    """
    lookahead_ms = Settings().lookahead_ms if lookahead_ms is None else lookahead_ms
    clock = SystemClock()
    with (
        _burst_target(target, target_delay_ms, target_host, target_tls) as hook,
        tempfile.TemporaryDirectory(prefix="punctual-burst-") as tmp,
    ):
        engine = EmbeddedEngine(Path(tmp) / "punctual.db", shards=SHARDS, clock=clock)
        prelease_s = Settings().prelease_s if prelease_s is None else prelease_s
        workers = [_start_worker(tmp, max_in_flight, prelease_s, hook.ca) for _ in range(processes)]
        usage: list[Any] = []
        try:
            _wait_until_started(workers)
            now = clock.now_ms()
            due_at = (now + LEAD_MS + lookahead_ms) // 1000 * 1000 + 1000
            jobs = list(bench_jobs(count, now=now, due_at=due_at, shards=SHARDS, cron=None, url=hook.url))
            hook.arrivals_ms()  # none yet: the clock of arrivals starts here
            store: Any = engine.store
            store.bulk_load_jobs(jobs)
            options = _scheduler_options(lookahead_ms, prelease_s)
            scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), options=options)
            # The burst's CPU counts from its first claim (the tick a second before due_at - lookahead at
            # the earliest): until then the workers only wait on an empty queue (~11 ms a second each).
            time.sleep(max(0, due_at - lookahead_ms - 1_000 - clock.now_ms()) / 1000)
            cpu_before = [_cpu_seconds(worker.pid) for worker in workers]  # start-up (imports) excluded
            # the scheduler shares the SQLite file's write lock with the workers: give it a minute
            _run_until_claimed(scheduler, count, until_ms=due_at + 60_000)
            deadline = due_at + 60_000 + count * 5  # bounded: a minute plus 5 ms per run
            while engine.queue.depth() and clock.now_ms() < deadline:  # a message is deleted when its run ends
                time.sleep(0.05)
            cpu_after = [_cpu_seconds(worker.pid) for worker in workers]
            arrivals = sorted(max(0, round(at) - due_at) for at in hook.finish_ms())
            runs = _runs_of(engine, jobs, due_at)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            usage = [_exit_usage(worker) for worker in workers]
            engine.close()
    figures = _execution_figures(runs, count, processes, max_in_flight)
    cpu_s = sum(u.ru_utime + u.ru_stime for u in usage if u is not None)
    done = figures["runs_succeeded"]
    figures["target_delay_ms"] = target_delay_ms
    figures["target"] = hook.description
    # when each request reached the target, after the runs' instant: the lateness the webhook sees
    # (start lateness is stamped when the worker begins the attempt, before any handshake)
    figures["target_arrival_lateness_ms_p50"] = m.percentile(arrivals, 50)
    figures["target_arrival_lateness_ms_p99"] = m.percentile(arrivals, 99)
    figures["target_arrival_lateness_ms_max"] = arrivals[-1] if arrivals else None
    figures["target_host"] = target_host
    figures["target_tls"] = target_tls
    figures["prelease_s"] = prelease_s
    figures["lookahead_ms"] = lookahead_ms
    figures["worker_cpu_seconds"] = round(cpu_s, 2)  # whole life: start-up and idle polling included
    burst_s = sum(a - b for a, b in zip(cpu_after, cpu_before, strict=True))
    figures["worker_cpu_seconds_burst"] = round(burst_s, 2)
    # from the scheduler's first claim to the last run's end: what executing the burst cost
    figures["worker_cpu_seconds_per_1000_runs"] = round(burst_s * 1000 / done, 3) if done else None
    peaks = [u.ru_maxrss / 1024 for u in usage if u is not None]  # ru_maxrss is KiB on Linux
    figures["worker_peak_rss_mib"] = round(max(peaks), 1) if peaks else None
    return figures


@dataclass(frozen=True)
class _BurstTarget:
    url: str
    ca: Path | None  # over HTTPS: the CA the workers are to trust
    description: str
    arrivals_ms: Callable[[], list[float]]  # epoch ms of each request that arrived since the last call
    finish_ms: Callable[[], list[float]]  # the same, after every request in flight was logged


@contextmanager
def _burst_target(kind: str, delay_ms: int, host: str, tls: bool) -> Iterator[_BurstTarget]:
    """The target the burst calls (see :func:`bench_burst_execution`'s ``target``)."""
    from punctual.bench.target import noop_target_process
    from punctual.bench.webhooks import webhook

    if kind not in ("noop", "nginx", "auto"):
        raise ValueError(f"--target must be noop, nginx or auto, not {kind!r}")
    plain = not tls and host == "127.0.0.1"
    if kind == "nginx" and not plain:
        raise ValueError("the nginx target serves plain HTTP on 127.0.0.1: no --target-tls or --target-host")
    if kind == "noop" or not plain:
        with noop_target_process(delay_ms, host, tls=tls) as target:

            def arrivals() -> list[float]:
                return [at * 1000 for at in target.arrivals()]

            scheme = "HTTPS" if tls else "HTTP"
            description = f"punctual no-op target, {scheme}, named {host}, answering after {delay_ms} ms"
            yield _BurstTarget(target.url, target.ca, description, arrivals, arrivals)
        return
    with webhook(delay_ms, kind) as server:

        def drained() -> list[float]:
            return [arrival.at_ms for arrival in server.arrivals()]

        def finished() -> list[float]:
            return [arrival.at_ms for arrival in server.finish()]

        yield _BurstTarget(server.url, None, server.description, drained, finished)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process so far (Linux ``/proc``: utime and stime, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_started(workers: list[subprocess.Popen[bytes]], timeout_s: float = 60.0) -> None:
    """Until every worker's start-up (imports, engine) is over: its CPU stops climbing."""
    deadline = time.monotonic() + timeout_s
    last = [-1.0] * len(workers)
    while time.monotonic() < deadline:
        now = [_cpu_seconds(worker.pid) for worker in workers]
        if all(n - prev < 0.02 for n, prev in zip(now, last, strict=True)):  # idle polling only
            return
        last = now
        time.sleep(0.25)


def _runs_of(engine: EmbeddedEngine, jobs: list[Any], due_at: int) -> list[Run]:
    """The burst's runs (a run the scheduler did not create in time is missing: not executed)."""
    runs = []
    for job in jobs:
        with contextlib.suppress(RunNotFound):
            runs.append(engine.store.get_run(job.id, due_at))
    return runs


def _scheduler_options(lookahead_ms: int, prelease_s: int | None = None) -> SchedulerOptions:
    """The deployed scheduler's options (``Settings`` defaults) with the bench's lookahead."""
    settings = Settings() if prelease_s is None else Settings(prelease_s=prelease_s)
    return replace(options_from_settings(settings), lookahead_ms=lookahead_ms)


def _start_worker(
    data_dir: str, max_in_flight: int, prelease_s: int, ca: Path | None = None
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "punctual.cli", "worker", "--engine", "embedded", "--data-dir", data_dir]
    command += ["--shards", str(SHARDS), "--max-in-flight", str(max_in_flight), "--allow-loopback", "--wait-s", "0.2"]
    env = {**os.environ, "PUNCTUAL_PRELEASE_S": str(prelease_s)}
    if ca is not None:  # the target's throwaway CA, and no other: the workers verify its certificate
        env["SSL_CERT_FILE"] = str(ca)
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)  # noqa: S603


def _exit_usage(worker: subprocess.Popen[bytes], timeout_s: float = 60.0) -> Any:
    """The worker's resource usage once it exited (None if it had to be killed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(worker.pid, os.WNOHANG)
        if pid:
            worker.returncode = os.waitstatus_to_exitcode(status)
            return usage
        time.sleep(0.05)
    worker.kill()
    worker.wait(10)
    return None


def _execution_figures(runs: list[Run], count: int, processes: int, max_in_flight: int) -> dict[str, Any]:
    done = [r for r in runs if r.state is RunState.SUCCEEDED and r.attempts]
    lateness = sorted(max(0, (r.attempts[0].started_at or 0) - r.scheduled_at) for r in done)
    first = min((r.attempts[0].started_at or 0) for r in done) if done else 0
    last = max((r.attempts[-1].finished_at or 0) for r in done) if done else 0
    span_s = (last - first) / 1000
    return {
        "jobs": count,
        "runs_succeeded": len(done),
        "worker_processes": processes,
        "max_in_flight_per_worker": max_in_flight,
        "start_lateness_ms_p50": m.percentile(lateness, 50),
        "start_lateness_ms_p99": m.percentile(lateness, 99),
        "start_lateness_ms_max": lateness[-1] if lateness else None,
        "runs_completed_per_second": round(len(done) / span_s) if span_s > 0 else None,
    }
