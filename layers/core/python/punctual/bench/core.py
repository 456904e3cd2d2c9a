"""``punctual bench core``: claims per second on the embedded engine at 10k and 1M (or 10M) stored jobs,
and the listing (``GET /jobs``) and run-history (``GET /jobs/{id}/runs``) reads at that size.

Of the stored jobs, ``due`` are due now and the rest a day away, spread evenly through the table
(every ``stored // due``-th job is due), so the figure shows whether the due index keeps a claim's
cost independent of the table size and the advances land on pages all over the file. Jobs belong
to ``stored // 1000`` owners (1,000 jobs each); one job gets a day of minutely history.
Jobs are bulk loaded as prepared copies of one job (``EmbeddedStore.bulk_load_copies``), with ids
that increase in load order; their due shards still come from a hash of the id. The load ends with
the file on disk (checkpointed and synced), so the claims that follow do not pay its write-back.

The claim runs at the instant the due jobs are due (not the wall clock after the load, which took
minutes at 10M): every due job yields exactly one run at every size, so the figures compare. Small
sizes, whose claim lasts well under a second, are measured in three rounds (a fresh file each) and
the median round reported; a 10M round is measured once.
"""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from punctual.bench.jobs import BENCH_OWNER, bench_jobs
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.jobs import runs as job_runs
from punctual.jobs import service
from punctual.model import Run
from punctual.port import RunQuery
from punctual.scheduling.claim import ClaimStats, claim_page

SHARDS = 16
JOBS_PER_OWNER = 1_000
HISTORY_RUNS = 1_440  # a day of a minutely job
MINUTE_MS = 60_000
DUE_BEFORE_MS = 1_000  # due jobs are due this long before the load started
ROUNDS_UP_TO = 100_000  # sizes up to this are measured in ROUNDS rounds (median), larger ones once
ROUNDS = 3


def bench_claims(stored: int, due: int = 20_000, page: int = 500) -> dict[str, Any]:
    """Load ``stored`` jobs (``due`` of them due), claim every due one, time the reads; return the figures."""
    count = ROUNDS if stored <= ROUNDS_UP_TO else 1
    rounds = [_round(stored, min(due, stored), page, reads=n == count - 1) for n in range(count)]
    median = sorted((claims for claims, _ in rounds), key=lambda r: r["claims_per_second"] or 0)[count // 2]
    return {**median, "claim_rounds": count, **rounds[-1][1]}


def _round(stored: int, due: int, page: int, *, reads: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """One fresh file: load, claim; with ``reads``, the read figures too. Returns (claim figures, read figures)."""
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="punctual-bench-") as tmp:
        engine = EmbeddedEngine(Path(tmp) / "bench.db", shards=SHARDS, clock=clock)
        try:
            now = clock.now_ms()
            due_at = now - DUE_BEFORE_MS
            load_started, load_cpu = time.perf_counter(), time.process_time()
            template = next(bench_jobs(1, now=now, due_at=due_at, shards=SHARDS))
            engine.store.bulk_load_copies(template, _copies(stored, due, now, due_at))
            _flush(Path(tmp) / "bench.db")
            load_s, load_cpu = time.perf_counter() - load_started, time.process_time() - load_cpu
            claim_cpu = time.process_time()
            total, elapsed = _claim_all(engine, due_at, page)
            claim_cpu = time.process_time() - claim_cpu
            figures = _reads(engine, stored, now) if reads else {}
        finally:
            engine.close()
    claims = {
        "stored_jobs": stored,
        "due_jobs": due,
        "runs_claimed": total.inserted,
        "claim_seconds": round(elapsed, 3),
        "claims_per_second": round(total.inserted / elapsed) if elapsed else None,
        # CPU seconds of this process: on a shared machine they vary far less than the wall clock
        "claims_per_cpu_second": round(total.inserted / claim_cpu) if claim_cpu else None,
        "load_seconds": round(load_s, 1),
        "load_cpu_seconds": round(load_cpu, 1),
        "jobs_loaded_per_second": round(stored / load_s) if load_s else None,
    }
    return claims, figures


def _flush(path: Path) -> None:
    """End the load on disk (the bulk load checkpointed the WAL into the file): the file synced."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copies(stored: int, due: int, now: int, due_at: int) -> Iterator[tuple[str, str, int]]:
    """(job id, owner, next_run_at) of each job: every ``stored // due``-th one due at ``due_at``."""
    prefix = secrets.randbits(64)
    every = max(1, stored // due)
    owners = max(1, stored // JOBS_PER_OWNER)
    far = now + 86_400_000
    for i in range(stored):
        is_due = i % every == 0 and i // every < due
        yield f"job_{prefix:016x}{i:016x}", f"{BENCH_OWNER}-{i % owners}", due_at if is_due else far


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


def _reads(engine: EmbeddedEngine, stored: int, now: int) -> dict[str, Any]:
    """Median milliseconds of the service calls behind GET /jobs and GET /jobs/{id}/runs."""
    store = engine.store
    owner = f"{BENCH_OWNER}-0"
    first = service.list_jobs(store, owner, limit=50)
    job = first.items[0]
    runs = [
        Run.model_construct(**{**_run_fields(job.id, owner, now - k * MINUTE_MS, now)}) for k in range(1, HISTORY_RUNS)
    ]
    store.insert_runs(runs)

    def all_jobs() -> None:
        cursor: str | None = None
        while True:
            page = service.list_jobs(store, owner, limit=100, cursor=cursor)
            if page.cursor is None:
                return
            cursor = page.cursor

    def all_runs() -> None:
        cursor: str | None = None
        while True:
            page = job_runs.list_runs(store, owner, job.id, RunQuery(limit=100, cursor=cursor))
            if page.cursor is None:
                return
            cursor = page.cursor

    return {
        "list_jobs_page_ms": _median_ms(lambda: service.list_jobs(store, owner, limit=50)),
        "list_jobs_all_ms": _median_ms(all_jobs),
        "owner_jobs": min(JOBS_PER_OWNER, stored),
        "run_history_page_ms": _median_ms(lambda: job_runs.list_runs(store, owner, job.id, RunQuery(limit=50))),
        "run_history_all_ms": _median_ms(all_runs),
        "history_runs": HISTORY_RUNS,
        "get_run_ms": _median_ms(lambda: job_runs.get_run(store, owner, runs[len(runs) // 2].run_id)),
    }


def _run_fields(job_id: str, owner: str, scheduled_at: int, now: int) -> dict[str, Any]:
    from punctual.model import RunState, Trigger

    return {
        "job_id": job_id, "scheduled_at": scheduled_at, "owner": owner, "state": RunState.SUCCEEDED,
        "trigger": Trigger.SCHEDULE, "attempt": 1, "worker_id": "bench", "lease_expires_at": None,
        "started_at": scheduled_at, "finished_at": scheduled_at + 100, "next_attempt_at": None,
        "deadline_at": scheduled_at + 120_000, "created_at": scheduled_at, "expires_at": now // 1000 + 86_400,
        "note": None, "attempts": [],
    }  # fmt: skip


def _median_ms(call: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)
