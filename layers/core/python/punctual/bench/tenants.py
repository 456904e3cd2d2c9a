"""``punctual bench tenants``: the noisy neighbour, measured on the embedded engine.

Tenant A has ``flood`` one-time jobs due at second T, tenant B has ``few`` jobs due at the same T;
every run calls a no-op HTTP target that answers after ``delay_ms``. A real scheduler claims them
(in this process) and real ``punctual worker`` processes execute them. The figure that matters is
B's start lateness (its attempt's start minus T) while A's backlog drains: with the fair hand-out
(``punctual.tenancy.fairness``) B's runs are handed out between A's, not behind them.

``fair=False`` sends the same runs without an owner group (one queue order for everyone, as before
issue 12), for comparison.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from punctual import metrics as m
from punctual.bench.scenario import embedded_scenario
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Job, Run, RunState
from punctual.port import Dispatch

NOISY, QUIET = "tenant-a", "tenant-b"


def bench_noisy_neighbour(
    flood: int = 10_000,
    few: int = 50,
    *,
    delay_ms: int = 200,
    processes: int = 2,
    concurrency: int = 64,
    fair: bool = True,
    lookahead_ms: int | None = None,
) -> dict[str, Any]:
    setting = embedded_scenario(
        "punctual-tenants-",
        delay_ms=delay_ms,
        processes=processes,
        max_in_flight=concurrency,
        lookahead_ms=lookahead_ms,
    )
    with setting as scenario:
        engine, clock, due_at, lookahead_ms = scenario.engine, scenario.clock, scenario.due_at, scenario.lookahead_ms
        a, b = scenario.jobs(flood, NOISY), scenario.jobs(few, QUIET)
        if not fair:
            _drop_groups(engine)
        sink = m.InMemoryMetrics(reservoir=flood + few + 10)
        scenario.claim([*a, *b], sink)
        quiet_done = _wait_for(engine, b, due_at, until_ms=due_at + 120_000)
        deadline = due_at + 120_000 + flood * (delay_ms + 5)  # bounded: A's drain at one run at a time, at worst
        while engine.queue.depth() and clock.now_ms() < deadline:
            time.sleep(0.2)
        runs_a = [engine.store.get_run(job.id, due_at) for job in a]
        runs_b = [engine.store.get_run(job.id, due_at) for job in b]
    return {
        "fair": fair,
        "tenant_a_runs": flood,
        "tenant_b_runs": few,
        "target_delay_ms": delay_ms,
        "worker_processes": processes,
        "max_in_flight_per_worker": concurrency,
        "lookahead_ms": lookahead_ms,
        "b_all_started_after_ms": quiet_done,
        "available_lateness_ms_p99": sink.percentile(m.DISPATCH_LATENESS_MS, 99),
        "available_lateness_ms_max": sink.percentile(m.DISPATCH_LATENESS_MS, 100),
        **_figures("a", runs_a),
        **_figures("b", runs_b),
    }


def _drop_groups(engine: EmbeddedEngine) -> None:
    """The comparison without fairness: every dispatch in one group, oldest first (as before)."""
    queue = engine.queue
    send = queue.send

    def ungrouped(dispatches: Sequence[Dispatch]) -> None:
        send([Dispatch(d.run_id, d.not_before, d.delay_s) for d in dispatches])

    queue.send = ungrouped  # type: ignore[method-assign]


def _wait_for(engine: EmbeddedEngine, jobs: list[Job], due_at: int, *, until_ms: int) -> int | None:
    """Ms after ``due_at`` when every run of ``jobs`` had started (None if not by ``until_ms``)."""
    clock = SystemClock()
    pending = list(jobs)
    while pending and clock.now_ms() < until_ms:
        pending = [j for j in pending if engine.store.get_run(j.id, due_at).state is RunState.SCHEDULED]
        if pending:
            time.sleep(0.1)
    return None if pending else clock.now_ms() - due_at


def _figures(prefix: str, runs: list[Run]) -> dict[str, Any]:
    started = sorted(max(0, (r.attempts[0].started_at or 0) - r.scheduled_at) for r in runs if r.attempts)
    done = [r for r in runs if r.state is RunState.SUCCEEDED]
    last = max((r.finished_at or 0) - r.scheduled_at for r in done) if done else None
    return {
        f"{prefix}_succeeded": len(done),
        f"{prefix}_start_lateness_ms_p50": m.percentile(started, 50),
        f"{prefix}_start_lateness_ms_p99": m.percentile(started, 99),
        f"{prefix}_start_lateness_ms_max": started[-1] if started else None,
        f"{prefix}_last_finish_after_ms": last,
    }
