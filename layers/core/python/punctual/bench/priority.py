"""``punctual bench priority``: an owner's urgent runs start before its backlog, on the embedded engine.

One owner with ``max_concurrency`` ``limit`` has ``low`` one-time jobs of priority 5 and ``high`` of
priority 9, all due at second T (the urgent ones created last, so nothing but their priority puts
them first). Every run calls a no-op HTTP target that answers after ``delay_ms``. A real scheduler
claims them (in this process) and real ``punctual worker`` processes execute them. The figure that
matters: when the last urgent run started, against the 10th percentile of the routine runs' starts
(``high_all_before_low_p10``). Without priority the urgent runs' starts would spread like the
others' (``punctual.tenancy.admission``: a run of lower priority yields a free slot to a waiting one
of higher priority; each worker admits a batch highest priority first).
"""

from __future__ import annotations

import time
from typing import Any

from punctual import metrics as m
from punctual.bench.scenario import embedded_scenario
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Job, Run, RunState
from punctual.port import Tenant

OWNER = "bench-priority"
HIGH = 9


def bench_priority(
    low: int = 10_000,
    high: int = 100,
    *,
    limit: int = 50,
    delay_ms: int = 20,
    processes: int = 1,
    max_in_flight: int = 12_000,
    timeout_s: float = 600.0,
    urgent_priority: int = HIGH,
    until_decided: bool = False,
    lookahead_ms: int | None = None,
) -> dict[str, Any]:
    """Run the scenario of the module docstring; returns its figures (start lateness in ms after T).
    ``urgent_priority=5`` gives the urgent runs no priority: the comparison without it.
    ``until_decided``: stop once every urgent run and a tenth of the backlog started (what the
    ordering property needs; CI's small version), instead of when every run succeeded."""
    setting = embedded_scenario(
        "punctual-priority-",
        delay_ms=delay_ms,
        processes=processes,
        max_in_flight=max_in_flight,
        lookahead_ms=lookahead_ms,
    )
    with setting as scenario:
        engine, due_at = scenario.engine, scenario.due_at
        engine.store.put_tenant(Tenant(owner=OWNER, max_concurrency=limit))
        made = scenario.jobs(low + high, OWNER)
        jobs = [job if i < low else job.model_copy(update={"priority": urgent_priority}) for i, job in enumerate(made)]
        scenario.claim(jobs, m.InMemoryMetrics())
        deadline = time.monotonic() + timeout_s
        done = _decided if until_decided else _all_done
        while not done(engine, jobs, due_at, low) and time.monotonic() < deadline:
            time.sleep(0.5)
        runs = engine.store.get_runs([(job.id, due_at) for job in jobs])
    return _figures(jobs[:low], jobs[low:], runs, due_at, low) | {
        "urgent_priority": urgent_priority,
        "limit": limit,
        "target_delay_ms": delay_ms,
        "worker_processes": processes,
        "max_in_flight_per_worker": max_in_flight,
    }


def _all_done(engine: EmbeddedEngine, jobs: list[Job], due_at: int, low: int) -> bool:
    runs = engine.store.get_runs([(job.id, due_at) for job in jobs])
    return len(runs) == len(jobs) and all(run.state is RunState.SUCCEEDED for run in runs.values())


def _decided(engine: EmbeddedEngine, jobs: list[Job], due_at: int, low: int) -> bool:
    """Every urgent run started, and at least a tenth of the backlog (the p10 is then known)."""
    runs = engine.store.get_runs([(job.id, due_at) for job in jobs])
    started = [bool(r is not None and r.attempts) for r in (runs.get((job.id, due_at)) for job in jobs)]
    return all(started[low:]) and sum(started[:low]) * 10 >= low


def _figures(
    routine: list[Job], urgent: list[Job], runs: dict[tuple[str, int], Run], due_at: int, count: int
) -> dict[str, Any]:
    high, low = _starts(urgent, runs, due_at), _starts(routine, runs, due_at)
    # the p10 of all the backlog's starts, also when only its first starts are in (until_decided)
    low_p10 = low[max(0, -(-count // 10) - 1)] if len(low) * 10 >= count and low else None
    high_last = high[-1] if high else None
    return {
        "high_runs": len(urgent),
        "low_runs": len(routine),
        "high_started": len(high),
        "low_started": len(low),
        "high_start_ms_p50": m.percentile(high, 50),
        "high_start_ms_max": high_last,
        "low_start_ms_p10": low_p10,
        "low_start_ms_p50": m.percentile(low, 50) if len(low) == count else None,
        "low_start_ms_max": low[-1] if len(low) == count else None,
        "high_all_before_low_p10": high_last is not None and low_p10 is not None and high_last < low_p10,
    }


def _starts(jobs: list[Job], runs: dict[tuple[str, int], Run], due_at: int) -> list[int]:
    """The first attempts' starts of the runs of ``jobs`` at ``due_at``, in ms after it, sorted."""
    found = (runs.get((job.id, due_at)) for job in jobs)
    return sorted(r.attempts[0].started_at - due_at for r in found if r and r.attempts and r.attempts[0].started_at)
