"""``punctual bench minute``: N every-minute cron jobs, run for M whole minutes by a one-machine
deployment, measured where the user sees it: when each request arrives at a real webhook.

1. A webhook starts in its own process (:mod:`punctual.bench.webhooks`: nginx where installed, else
   the project's no-op target), then ``punctual api``, ``punctual scheduler``, the workers and
   ``punctual reaper``, each its own process on one embedded data dir (:mod:`punctual.bench.deployment`).
2. The jobs are created over the API (timed: creates/s), or bulk-loaded into the store (timed apart).
   If creating them might not end a lookahead (+3 s) before the next minute, it starts just after
   that minute instead, so that the first minute measured is the first the jobs exist for (the
   deployment's first minute of work, connections cold).
3. The measured minutes are the M boundaries from the first one at least a lookahead (+3 s) after the
   last create. Runs of any earlier boundary (a create that overran) are counted apart.
4. After the last boundary it waits until every run of that minute arrived (at most 45 s: the next
   minute's claims begin 55 s after it), then a second more, so a late duplicate would show.
5. Every process is stopped; the webhook's log and the store's run history give the figures
   (:mod:`punctual.bench.minute_figures`). CPU per run counts from a second before the first
   boundary's claims to the end of the last minute's arrivals (start-up and creating excluded).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from punctual.bench.deployment import Deployment, deployment
from punctual.bench.minute_create import Created, bulk_load, create_over_api
from punctual.bench.minute_figures import by_instant, iso, minute_figures, per_run_ms
from punctual.bench.webhooks import Arrival, Webhook, webhook
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines import open_engine
from punctual.model import Run

MINUTE_MS = 60_000
LEAD_MARGIN_MS = 3_000  # beyond the lookahead: the first measured boundary is this much further from the last create
CREATE_RATE_GUESS = 400  # creates/s assumed (measured ~600) when deciding whether creating fits before a boundary
DRAIN_MAX_MS = 45_000  # after the last boundary, stop waiting for its runs (the next minute's claims begin at 55 s)
SETTLE_S = 1.0  # after the last expected arrival: a late duplicate would arrive here
CHECK_EVERY_S = 5.0  # how often the processes are checked while the minutes run


def bench_minute(
    jobs: int,
    minutes: int,
    *,
    target_delay_ms: int = 0,
    create: str = "api",
    workers: int = 2,
    target: str = "auto",
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the bench (see the module's docstring) and return its figures (``minute_figures.TOP_KEYS``
    at the top, ``minute_figures.MINUTE_KEYS`` in each of ``minutes``). Raises
    :class:`punctual.bench.deployment.DeploymentFailed` if a process fails, and
    :class:`punctual.bench.minute_create.CreateFailed` if the API refuses the jobs."""
    say = log or (lambda _: None)
    started = time.monotonic()
    clock = SystemClock()
    settings = Settings.from_env()
    lead_ms = settings.lookahead_ms + LEAD_MARGIN_MS
    with (
        tempfile.TemporaryDirectory(prefix="punctual-minute-") as folder,
        webhook(target_delay_ms, target) as hook,
        deployment(Path(folder), workers=workers) as system,
    ):
        say(f"webhook: {hook.description}; starting api, scheduler, {workers} workers, reaper")
        system.start()
        created = _create(system, target=hook, count=jobs, how=create, lead_ms=lead_ms, clock=clock, say=say)
        first = max(_ceil_minute(clock.now_ms() + lead_ms), created.first_due or 0)
        boundaries = [first + MINUTE_MS * k for k in range(minutes)]
        say(f"created via {created.via} in {created.seconds:.1f} s; measuring {iso(first)} .. {iso(boundaries[-1])}")
        cpu_from = first - settings.lookahead_ms - 1_000  # a second before the first claim can happen
        _sleep_until(cpu_from, clock, system)
        cpu_before, window_start = system.cpu_seconds(), clock.now_ms()
        arrivals: list[Arrival] = []
        _sleep_until(boundaries[-1] + 2_000, clock, system)
        say(f"waiting for the runs of {iso(boundaries[-1])} to arrive")
        _drain(
            hook,
            arrivals=arrivals,
            job_ids=set(created.job_ids),
            boundary=boundaries[-1],
            count=jobs,
            clock=clock,
            system=system,
        )
        cpu_after, window_end = system.cpu_seconds(), clock.now_ms()
        peaks = system.peak_rss_mib()
        system.stop()
        arrivals += hook.finish()
        runs = _runs(system, created.job_ids, boundaries)
        description = hook.description
    cpu = {name: round(cpu_after[name] - cpu_before[name], 3) for name in cpu_after}
    grouped = by_instant(arrivals, set(created.job_ids))
    per_minute = [
        minute_figures(k + 1, b, jobs, grouped.get(b, []), (r for r in runs if r.scheduled_at == b))
        for k, b in enumerate(boundaries)
    ]
    delivered = sum(m["distinct_runs"] for m in per_minute)
    return {
        "jobs": jobs,
        "worker_processes": workers,
        "target": description,
        "target_delay_ms": target_delay_ms,
        "create": created.figures(),
        "lookahead_ms": settings.lookahead_ms,
        "prelease_s": settings.prelease_s,
        "warmup_runs_arrived": sum(len(v) for b, v in grouped.items() if b < first),
        "minutes": per_minute,
        "worker_cpu_ms_per_run": per_run_ms(cpu, [n for n in cpu if n.startswith("worker-")], delivered),
        "scheduler_cpu_ms_per_run": per_run_ms(cpu, ["scheduler"], delivered),
        "cpu_seconds": cpu,
        "cpu_window_seconds": round((window_end - window_start) / 1000, 1),
        "peak_rss_mib": peaks,
        "total_seconds": round(time.monotonic() - started, 1),
    }


def _create(
    system: Deployment,
    *,
    target: Webhook,
    count: int,
    how: str,
    lead_ms: int,
    clock: SystemClock,
    say: Callable[[str], None],
) -> Created:
    """Create the jobs over the API, first waiting out the current minute if creating them at
    ``CREATE_RATE_GUESS`` might end less than ``lead_ms`` before its end; or bulk-load them."""
    now = clock.now_ms()
    if how == "bulk":
        return bulk_load(system.data_dir, count, target.url, due_at=_ceil_minute(now + lead_ms + 5_000))
    needed_ms = count * 1000 // CREATE_RATE_GUESS + lead_ms
    next_minute = _ceil_minute(now)
    if next_minute - now < needed_ms <= MINUTE_MS:
        say(f"waiting for {iso(next_minute)}, so that creating {count:,} jobs ends well before the next minute")
        _sleep_until(next_minute + 200, clock, system)
    say(f"creating {count:,} jobs over the API")
    return create_over_api(system.api_url, system.api_key, count, target.url)


def _drain(
    target: Webhook,
    *,
    arrivals: list[Arrival],
    job_ids: set[str],
    boundary: int,
    count: int,
    clock: SystemClock,
    system: Deployment,
) -> None:
    """Collect arrivals until all ``count`` runs of ``boundary`` arrived (or ``DRAIN_MAX_MS`` after
    it), then for ``SETTLE_S`` more."""
    seen: set[str] = set()
    while clock.now_ms() < boundary + DRAIN_MAX_MS:
        fresh = target.arrivals()
        arrivals += fresh
        seen.update(a.key for a in by_instant(fresh, job_ids).get(boundary, []) if a.key)
        if len(seen) >= count:
            break
        system.check()
        time.sleep(0.5)
    time.sleep(SETTLE_S)
    arrivals += target.arrivals()


def _runs(system: Deployment, job_ids: list[str], boundaries: list[int]) -> list[Run]:
    """The measured minutes' runs from the store (every process stopped: nothing changes them)."""
    settings = Settings.from_env(engine="embedded", data_dir=str(system.data_dir))
    engine = open_engine(settings, clock=SystemClock())
    try:
        found = engine.store.get_runs([(job_id, b) for b in boundaries for job_id in job_ids])
    finally:
        engine.close()
    return list(found.values())


def _sleep_until(at_ms: int, clock: SystemClock, system: Deployment) -> None:
    """Sleep until the clock reads ``at_ms``, checking every ``CHECK_EVERY_S`` that no process died."""
    while (left_ms := at_ms - clock.now_ms()) > 0:
        system.check()
        time.sleep(min(left_ms / 1000, CHECK_EVERY_S))


def _ceil_minute(epoch_ms: int) -> int:
    """The first minute boundary at or after ``epoch_ms``."""
    return -(-epoch_ms // MINUTE_MS) * MINUTE_MS
