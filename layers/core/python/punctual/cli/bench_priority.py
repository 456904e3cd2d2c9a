"""``punctual bench priority``: an owner's urgent runs against its backlog under a concurrency limit."""

from __future__ import annotations

import argparse
from typing import Any

from punctual.cli.bench_runs import measured, report


def register(kinds: Any) -> None:
    """Add ``priority`` to the ``punctual bench`` kinds."""
    priority = kinds.add_parser(
        "priority", help="urgent runs (priority 9) against a backlog (priority 5) of one owner at a limit (embedded)"
    )
    priority.add_argument("--low", type=int, default=10_000, help="priority 5 runs due at second T")
    priority.add_argument("--high", type=int, default=100, help="priority 9 runs due at the same T (created last)")
    priority.add_argument("--limit", type=int, default=50, help="the owner's max_concurrency")
    priority.add_argument("--delay-ms", type=int, default=20, help="the no-op target's answer delay")
    priority.add_argument("--processes", type=int, default=1, help="worker processes")
    priority.add_argument(
        "--max-in-flight", type=int, default=12_000, help="--max-in-flight of each worker (default: the whole burst)"
    )
    priority.add_argument("--compare", action="store_true", help="also measure with every run at priority 5")
    priority.add_argument("--json", action="store_true", help="print one JSON object")
    priority.set_defaults(func=run_priority)


def run_priority(args: argparse.Namespace) -> int:
    from punctual.bench.priority import HIGH, bench_priority

    options = {
        "limit": args.limit,
        "delay_ms": args.delay_ms,
        "processes": args.processes,
        "max_in_flight": args.max_in_flight,
    }
    results = measured(bench_priority, (args.low, args.high), options, {"urgent_priority": 5} if args.compare else None)

    def line(r: dict[str, Any]) -> str:
        kind = f"urgent at priority {r['urgent_priority']}" + (" (no priority)" if r["urgent_priority"] != HIGH else "")
        return (
            f"{kind}: urgent p50 {r['high_start_ms_p50']}, last {r['high_start_ms_max']};"
            f" backlog p10 {r['low_start_ms_p10']}, p50 {r['low_start_ms_p50']}, last {r['low_start_ms_max']};"
            f" every urgent run before the backlog's p10: {'yes' if r['high_all_before_low_p10'] else 'NO'}"
        )

    header = (
        f"Priority, embedded engine: one owner with max_concurrency {args.limit}, {args.low:,} runs of priority 5"
        f" and {args.high:,} urgent runs (created last) due at one second; no-op target answering after"
        f" {args.delay_ms} ms; {args.processes} worker processes. Starts in ms after the second:"
    )
    report(results, key="priority", as_json=args.json, header=header, line=line)
    return 0 if results[0]["high_all_before_low_p10"] else 1
