"""The setting the embedded execution benches share (``punctual bench tenants``, ``priority``): a
no-op HTTP target, a SQLite file in a temporary directory, real ``punctual worker`` processes, one
second T far enough ahead that the scheduler's lookahead precomputes it, and a real scheduler (in
this process) that claims the benches' one-time jobs due at T.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from punctual import metrics as m
from punctual.bench.burst import LEAD_MS, SHARDS, _run_until_claimed, _start_worker
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Job
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions

CLAIM_WINDOW_MS = 20_000  # the scheduler claims until this long after T at the latest


@dataclass(frozen=True)
class Scenario:
    engine: EmbeddedEngine
    clock: SystemClock
    url: str  # the no-op target's
    now: int  # when the scenario began (epoch ms)
    due_at: int  # T, a whole second
    lookahead_ms: int

    def jobs(self, count: int, owner: str) -> list[Job]:
        """``count`` one-time jobs of ``owner`` due at T, calling the no-op target (not stored yet)."""
        made = bench_jobs(count, now=self.now, due_at=self.due_at, shards=SHARDS, cron=None, url=self.url, owner=owner)
        return list(made)

    def claim(self, jobs: list[Job], metrics: m.Metrics) -> None:
        """Store ``jobs`` and tick a scheduler once a second until it dispatched a run of each (or
        ``CLAIM_WINDOW_MS`` after T); its dispatch figures go to ``metrics``."""
        store: Any = self.engine.store
        store.bulk_load_jobs(jobs)
        options = SchedulerOptions(lookahead_ms=self.lookahead_ms)
        scheduler = Scheduler(self.engine, self.clock, metrics=metrics, options=options)
        _run_until_claimed(scheduler, len(jobs), until_ms=self.due_at + CLAIM_WINDOW_MS)


@contextmanager
def embedded_scenario(
    prefix: str, *, delay_ms: int, processes: int, max_in_flight: int, lookahead_ms: int | None = None
) -> Iterator[Scenario]:
    """The setting of the module docstring: a target answering after ``delay_ms``, ``processes``
    workers of ``max_in_flight`` each, the scheduler's ``lookahead_ms`` (default: the settings').
    On exit the workers are stopped and the engine closed; the directory (``prefix``) goes."""
    from punctual.bench.target import noop_target

    clock = SystemClock()
    settings = Settings()
    lookahead_ms = settings.lookahead_ms if lookahead_ms is None else lookahead_ms
    with noop_target(delay_ms) as url, tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        engine = EmbeddedEngine(Path(tmp) / "punctual.db", shards=SHARDS, clock=clock)
        workers = [_start_worker(tmp, max_in_flight, settings.prelease_s) for _ in range(processes)]
        try:
            now = clock.now_ms()
            due_at = (now + LEAD_MS + lookahead_ms) // 1000 * 1000 + 1000
            yield Scenario(engine, clock, url, now, due_at, lookahead_ms)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(30)
            engine.close()
