"""``punctual bench core``: claims per second on the embedded engine at 10k and 1M stored jobs.

Of the stored jobs, ``due`` are due now and the rest far in the future, so the figure shows
whether the due index keeps a claim's cost independent of the table size.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.scheduling.claim import ClaimStats, claim_page

SHARDS = 16


def bench_claims(stored: int, due: int = 20_000, page: int = 500) -> dict[str, Any]:
    """Load ``stored`` jobs (``due`` of them due now), claim every due one; return the figures."""
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="punctual-bench-") as tmp:
        engine = EmbeddedEngine(Path(tmp) / "bench.db", shards=SHARDS, clock=clock)
        try:
            now = clock.now_ms()
            load_started = time.perf_counter()
            store: Any = engine.store
            store.bulk_load_jobs(bench_jobs(min(due, stored), now=now, due_at=now - 1000, shards=SHARDS))
            if stored > due:
                far = now + 86_400_000
                store.bulk_load_jobs(bench_jobs(stored - due, now=now, due_at=far, shards=SHARDS))
            load_s = time.perf_counter() - load_started
            total, elapsed = _claim_all(engine, clock.now_ms(), page)
        finally:
            engine.close()
    return {
        "stored_jobs": stored,
        "due_jobs": min(due, stored),
        "runs_claimed": total.inserted,
        "claim_seconds": round(elapsed, 3),
        "claims_per_second": round(total.inserted / elapsed) if elapsed else None,
        "load_seconds": round(load_s, 1),
    }


def _claim_all(engine: EmbeddedEngine, now: int, page: int) -> tuple[ClaimStats, float]:
    total = ClaimStats()
    started = time.perf_counter()
    for shard in range(SHARDS):
        while True:
            stats = claim_page(engine.store, engine.queue, shard, now, lookahead_ms=0, limit=page)
            total.add(stats)
            if stats.due < page:
                break
    return total, time.perf_counter() - started
