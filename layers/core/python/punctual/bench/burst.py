"""``punctual bench burst``: N jobs all due at the same second, on the embedded engine.

A real scheduler (real clock, default lookahead) claims them; the figures are the rate at which
runs are enqueued and the lateness of the moment each run becomes available to a worker
(visible on the queue) relative to its scheduled time. Precomputed runs are visible up to a second
early (SQS-style whole-second delays); a worker waits out the rest, so lateness counts from 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from punctual import metrics as m
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Run, RunState
from punctual.scheduling.claim import ClaimStats
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions

SHARDS = 16
LEAD_MS = 4_000  # the burst second is this far after loading, so the lookahead precomputes it


def bench_burst(count: int, *, lookahead_ms: int = 3_000) -> dict[str, Any]:
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="punctual-burst-") as tmp:
        engine = EmbeddedEngine(Path(tmp) / "burst.db", shards=SHARDS, clock=clock)
        try:
            now = clock.now_ms()
            due_at = (now + LEAD_MS + lookahead_ms) // 1000 * 1000 + 1000
            store: Any = engine.store
            store.bulk_load_jobs(bench_jobs(count, now=now, due_at=due_at, shards=SHARDS))
            sink = m.InMemoryMetrics(reservoir=count + 10)
            scheduler = Scheduler(engine, clock, metrics=sink, options=SchedulerOptions(lookahead_ms=lookahead_ms))
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
    count: int, *, lookahead_ms: int = 3_000, processes: int = 2, concurrency: int = 16
) -> dict[str, Any]:
    """N one-time jobs due at one second, executed by ``processes`` real ``punctual worker``
    processes (``concurrency`` threads each) against a no-op HTTP target.

    Start lateness = the moment the target call began (the attempt's ``started_at``) minus the
    scheduled time; throughput = runs completed per second from the first start to the last finish.
    """
    from punctual.bench.target import noop_target

    clock = SystemClock()
    with noop_target() as url, tempfile.TemporaryDirectory(prefix="punctual-burst-") as tmp:
        engine = EmbeddedEngine(Path(tmp) / "punctual.db", shards=SHARDS, clock=clock)
        workers = [_start_worker(tmp, concurrency) for _ in range(processes)]
        try:
            now = clock.now_ms()
            due_at = (now + LEAD_MS + lookahead_ms) // 1000 * 1000 + 1000
            jobs = list(bench_jobs(count, now=now, due_at=due_at, shards=SHARDS, cron=None, url=url))
            store: Any = engine.store
            store.bulk_load_jobs(jobs)
            options = SchedulerOptions(lookahead_ms=lookahead_ms)
            scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), options=options)
            _run_until_claimed(scheduler, count, until_ms=due_at + 10_000)
            deadline = due_at + 60_000 + count * 5  # bounded: a minute plus 5 ms per run
            while engine.queue.depth() and clock.now_ms() < deadline:  # a message is deleted when its run ends
                time.sleep(0.05)
            runs = [engine.store.get_run(job.id, due_at) for job in jobs]
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(30)
            engine.close()
    return _execution_figures(runs, count, processes, concurrency)


def _start_worker(data_dir: str, concurrency: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "punctual.cli", "worker", "--engine", "embedded", "--data-dir", data_dir]
    command += ["--shards", str(SHARDS), "--max-in-flight", str(concurrency), "--allow-loopback", "--wait-s", "0.2"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603 - our own CLI


def _execution_figures(runs: list[Run], count: int, processes: int, concurrency: int) -> dict[str, Any]:
    done = [r for r in runs if r.state is RunState.SUCCEEDED and r.attempts]
    lateness = sorted(max(0, (r.attempts[0].started_at or 0) - r.scheduled_at) for r in done)
    first = min((r.attempts[0].started_at or 0) for r in done) if done else 0
    last = max((r.attempts[-1].finished_at or 0) for r in done) if done else 0
    span_s = (last - first) / 1000
    return {
        "jobs": count,
        "runs_succeeded": len(done),
        "worker_processes": processes,
        "threads_per_worker": concurrency,
        "start_lateness_ms_p50": m.percentile(lateness, 50),
        "start_lateness_ms_p99": m.percentile(lateness, 99),
        "start_lateness_ms_max": lateness[-1] if lateness else None,
        "runs_completed_per_second": round(len(done) / span_s) if span_s > 0 else None,
    }
