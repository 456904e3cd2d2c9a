"""``punctual bench burst``: N jobs all due at the same second, on the embedded engine.

A real scheduler (real clock, default lookahead) claims them; the figures are the rate at which
runs are enqueued and the lateness of the moment each run becomes available to a worker
(visible on the queue) relative to its scheduled time. Precomputed runs are visible up to a second
early (SQS-style whole-second delays); a worker waits out the rest, so lateness counts from 0.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from punctual import metrics as m
from punctual.bench.jobs import bench_jobs
from punctual.claim import ClaimStats
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.scheduler import Scheduler, SchedulerOptions

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
