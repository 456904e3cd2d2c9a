"""The figures of ``punctual bench minute``: per minute, what the webhook saw and what the store
recorded; and the report as a readable table.

Arrival lateness = when the request arrived at the webhook minus the minute boundary its run was
scheduled for (read from the run id, which the ``Idempotency-Key`` carries); the first arrival of each
run counts. Start lateness = the worker's start stamp of the run's first attempt (the store's run
history) minus the same boundary. Neither is clamped at 0: a negative one would break the contract
(``started_at`` ≥ ``scheduled_at``), and ``arrived_before_boundary`` counts them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from punctual import ids
from punctual.bench.webhooks import Arrival
from punctual.errors import InvalidId
from punctual.metrics import percentile
from punctual.model import Run, RunState

# The keys every minute carries (kept stable: scripts and CI read them).
MINUTE_KEYS = (
    "arrived",
    "distinct_runs",
    "duplicates",
    "arrival_lateness_ms_p50",
    "arrival_lateness_ms_p99",
    "arrival_lateness_ms_max",
    "start_lateness_ms_p99",
)
TOP_KEYS = ("minutes", "worker_cpu_ms_per_run", "scheduler_cpu_ms_per_run", "peak_rss_mib")


def by_instant(arrivals: Iterable[Arrival], job_ids: Collection[str]) -> dict[int, list[Arrival]]:
    """The arrivals of the given jobs' runs, by the instant the run was scheduled for (from its key)."""
    grouped: dict[int, list[Arrival]] = defaultdict(list)
    for arrival in arrivals:
        try:
            job_id, scheduled_at = ids.parse_run_id(arrival.key or "")
        except InvalidId:
            continue
        if job_id in job_ids:
            grouped[scheduled_at].append(arrival)
    return grouped


def minute_figures(
    minute: int, boundary: int, expected: int, arrivals: list[Arrival], runs: Iterable[Run]
) -> dict[str, Any]:
    """One minute: ``arrivals`` and ``runs`` are those scheduled for ``boundary`` (epoch ms)."""
    first: dict[str | None, float] = {}
    for arrival in arrivals:
        first[arrival.key] = min(arrival.at_ms, first.get(arrival.key, arrival.at_ms))
    late = sorted(round(at - boundary) for at in first.values())
    runs = list(runs)
    started = sorted(
        run.attempts[0].started_at - boundary for run in runs if run.attempts and run.attempts[0].started_at
    )
    connections = [a.new_connection for a in arrivals]
    return {
        "minute": minute,
        "boundary": iso(boundary),
        "expected": expected,
        "arrived": len(arrivals),
        "distinct_runs": len(first),
        "duplicates": len(arrivals) - len(first),
        "missing": expected - len(first),
        "arrived_before_boundary": sum(1 for x in late if x < 0),
        "arrival_lateness_ms_p50": percentile(late, 50),
        "arrival_lateness_ms_p99": percentile(late, 99),
        "arrival_lateness_ms_max": late[-1] if late else None,
        "start_lateness_ms_p50": percentile(started, 50),
        "start_lateness_ms_p99": percentile(started, 99),
        "start_lateness_ms_max": started[-1] if started else None,
        "runs_started": len(started),
        "runs_succeeded": sum(1 for run in runs if run.state is RunState.SUCCEEDED),
        # requests that opened a connection to the webhook (nginx logs it; None with the no-op target)
        "new_connections": None if None in connections else sum(1 for c in connections if c),
        "arrivals_by_100ms": timeline(arrivals, boundary),
    }


def timeline(arrivals: Iterable[Arrival], boundary: int, bucket_ms: int = 100) -> list[list[int]]:
    """``[start ms after the boundary, requests arrived, of which on a new connection]`` for each
    ``bucket_ms`` with an arrival: how the burst reached the webhook (a connection opened late shows)."""
    buckets: dict[int, list[int]] = {}
    for arrival in arrivals:
        start = int((arrival.at_ms - boundary) // bucket_ms) * bucket_ms
        counts = buckets.setdefault(start, [start, 0, 0])
        counts[1] += 1
        counts[2] += 1 if arrival.new_connection else 0
    return [buckets[start] for start in sorted(buckets)]


def per_run_ms(cpu_seconds: Mapping[str, float], names: Iterable[str], runs: int) -> float | None:
    """CPU milliseconds per run of the named processes together."""
    total = sum(cpu_seconds[name] for name in names)
    return round(total * 1000 / runs, 4) if runs else None


def iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(result: Mapping[str, Any]) -> str:
    """The report as a person reads it."""
    create = result["create"]
    lines = [
        f"Minute bench: {result['jobs']:,} every-minute jobs, {len(result['minutes'])} minute(s); separate api,"
        f" scheduler, {result['worker_processes']} worker and reaper processes on the embedded engine",
        f"Webhook: {result['target']} on 127.0.0.1",
        f"Created {create['jobs']:,} jobs via {create['via']} in {create['seconds']} s"
        f" ({create['creates_per_second']:,} creates/s"
        + (f", {create['connections']} connections)" if create["connections"] else ")"),
    ]
    if result["warmup_runs_arrived"]:
        lines.append(
            f"Before the first measured minute (while creating): {result['warmup_runs_arrived']:,} runs arrived"
        )
    lines.append("")
    head = (
        "minute",
        "boundary (UTC)",
        "arrived",
        "distinct",
        "dup",
        "arrival p50",
        "p99",
        "max",
        "start p99",
        "new conn",
    )
    rows = [head] + [
        (
            str(m["minute"]),
            m["boundary"][11:19],
            f"{m['arrived']:,}",
            f"{m['distinct_runs']:,}",
            f"{m['duplicates']:,}",
            _ms(m["arrival_lateness_ms_p50"]),
            _ms(m["arrival_lateness_ms_p99"]),
            _ms(m["arrival_lateness_ms_max"]),
            _ms(m["start_lateness_ms_p99"]),
            "-" if m["new_connections"] is None else f"{m['new_connections']:,}",
        )
        for m in result["minutes"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    rss = ", ".join(f"{name} {mib}" for name, mib in result["peak_rss_mib"].items())
    lines += [
        "",
        f"CPU per run: workers {result['worker_cpu_ms_per_run']} ms, scheduler {result['scheduler_cpu_ms_per_run']} ms"
        f" (CPU of the {result['cpu_window_seconds']} s from the first minute's claims to the last minute's arrivals)",
        f"Peak RSS (MiB): {rss}",
    ]
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"
