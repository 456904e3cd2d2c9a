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
minutes at 10M): every due job yields exactly one run at every size, so the figures compare. Every
size is claimed in three rounds and the median round reported: small sizes (their claim lasts
well under a second) on a fresh file each; larger ones on one file, a minute apart (the due jobs
advanced by the round before are due again one minute later, as a minutely job is: each round
claims each of them once more, the same pages of the file). The rounds of the sizes alternate
(:func:`bench_sizes`), so a change in the machine's load between rounds hits every size alike.
After each claim the WAL is copied back into the file before the next round starts
(``writeback_seconds``: the claim's pages written into the database file, work the engine's
checkpoint thread does after a burst; not part of the claim's time).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
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
ROUNDS_UP_TO = 100_000  # sizes up to this get a fresh file per round, larger ones one file
ROUNDS = 3


def bench_sizes(sizes: Sequence[int], due: int = 20_000, page: int = 500) -> list[dict[str, Any]]:
    """Per size: load ``stored`` jobs (``due`` of them due), claim every due one in :data:`ROUNDS`
    rounds, time the reads; return the figures of each size (its median round).

    The rounds alternate between the sizes (the first round of every size, then the second...): a
    change in the machine's load between two rounds hits every size alike, so the sizes compare.
    """
    with contextlib.ExitStack() as stack:
        benches = [stack.enter_context(_SizeBench(stored, min(due, stored), page)) for stored in sizes]
        for n in range(ROUNDS):
            for bench in benches:
                bench.claim_round(n)
        return [bench.figures() for bench in benches]


def bench_claims(stored: int, due: int = 20_000, page: int = 500) -> dict[str, Any]:
    """:func:`bench_sizes` for one size."""
    return bench_sizes([stored], due, page)[0]


class _SizeBench:
    """The rounds of one size: on a fresh file each (up to :data:`ROUNDS_UP_TO` jobs), or on one
    file loaded on entry, a minute apart."""

    def __init__(self, stored: int, due: int, page: int) -> None:
        self.stored, self.due, self.page = stored, due, page
        self.fresh = stored <= ROUNDS_UP_TO
        self.rounds: list[dict[str, Any]] = []
        self.reads: dict[str, Any] = {}
        self._file: _LoadedFile | None = None

    def __enter__(self) -> _SizeBench:
        if not self.fresh:
            self._file = _LoadedFile(self.stored, self.due)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()

    def claim_round(self, n: int) -> None:
        if self._file is not None:
            self.rounds.append(self._file.claim(n, self.page))
            return
        file = _LoadedFile(self.stored, self.due)
        try:
            self.rounds.append(file.claim(0, self.page))
            if n == ROUNDS - 1:
                self.reads = file.reads()
        finally:
            file.close()

    def figures(self) -> dict[str, Any]:
        if self._file is not None:
            self.reads = self._file.reads()
        median = sorted(self.rounds, key=lambda r: r["claims_per_second"] or 0)[len(self.rounds) // 2]
        keys = ("claims_per_second", "claims_per_cpu_second")
        every = {f"{key}_rounds": [r[key] for r in self.rounds] for key in keys}
        return {**median, "claim_rounds": len(self.rounds), **every, **self.reads}


class _LoadedFile:
    """A fresh file in a temporary directory with ``stored`` jobs loaded, ``due`` of them due now."""

    def __init__(self, stored: int, due: int) -> None:
        self.stored, self.due = stored, due
        self._tmp = tempfile.TemporaryDirectory(prefix="punctual-bench-")
        clock = SystemClock()
        path = Path(self._tmp.name) / "bench.db"
        try:
            self.engine = EmbeddedEngine(path, shards=SHARDS, clock=clock)
            self.now = clock.now_ms()
            self.due_at = self.now - DUE_BEFORE_MS
            load_started, load_cpu = time.perf_counter(), time.process_time()
            template = next(bench_jobs(1, now=self.now, due_at=self.due_at, shards=SHARDS))
            self.engine.store.bulk_load_copies(template, _copies(stored, due, self.now, self.due_at))
            _flush(path)
        except BaseException:
            self.close()
            raise
        load_s = time.perf_counter() - load_started
        self.load = {
            "load_seconds": round(load_s, 1),
            "load_cpu_seconds": round(time.process_time() - load_cpu, 1),
            "jobs_loaded_per_second": round(stored / load_s) if load_s else None,
        }

    def claim(self, n: int, page: int) -> dict[str, Any]:
        """Round ``n``: claim every job due ``n`` minutes after the first due instant (each job due
        once), then copy the WAL back into the file."""
        return _claim_round(self.engine, self.stored, self.due, self.due_at + n * MINUTE_MS, page) | self.load

    def reads(self) -> dict[str, Any]:
        return _reads(self.engine, self.stored, self.now)

    def close(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
        self._tmp.cleanup()


def _claim_round(engine: EmbeddedEngine, stored: int, due: int, at: int, page: int) -> dict[str, Any]:
    """Claim every job due at ``at``, then copy the WAL back into the file (timed apart)."""
    claim_cpu = time.process_time()
    total, elapsed = _claim_all(engine, at, page)
    claim_cpu = time.process_time() - claim_cpu
    writeback_started = time.perf_counter()
    engine.checkpoint()
    writeback_s = time.perf_counter() - writeback_started
    return {
        "stored_jobs": stored,
        "due_jobs": due,
        "runs_claimed": total.inserted,
        "claim_seconds": round(elapsed, 3),
        "claims_per_second": round(total.inserted / elapsed) if elapsed else None,
        # CPU seconds of this process: on a shared machine they vary far less than the wall clock
        "claims_per_cpu_second": round(total.inserted / claim_cpu) if claim_cpu else None,
        "writeback_seconds": round(writeback_s, 3),
    }


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
