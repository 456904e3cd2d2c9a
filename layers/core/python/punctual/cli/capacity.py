"""``punctual capacity``: AWS settings, quota raises, lateness and cost for a target load."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from punctual.errors import ConfigError


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "capacity", help="size an AWS deployment for a target load: settings, quotas, lateness, monthly cost"
    )
    parser.add_argument("--jobs", type=int, required=True, help="scheduled jobs stored")
    parser.add_argument("--peak-runs-per-second", type=int, required=True, help="runs due per second at the peak")
    parser.add_argument("--burst-seconds", type=int, default=1, help="how long the peak lasts (default 1)")
    parser.add_argument("--burst-interval-s", type=int, default=60, help="the peak repeats this often (default 60)")
    parser.add_argument("--target-latency-ms", type=int, default=1000, help="p99 start lateness to meet (default 1000)")
    parser.add_argument("--retention-days", type=int, default=30, help="run history kept (default 30)")
    parser.add_argument("--region", default="us-east-1", help="AWS region (prices are us-east-1's)")
    parser.add_argument("--target-duration-ms", type=int, default=500, help="mean target call (default 500)")
    parser.add_argument(
        "--worker", choices=("lambda", "fargate"), default="lambda", help="worker kind (default lambda)"
    )
    parser.add_argument("--no-open-index", action="store_true", help="size a stack deployed with -c open_index=false")
    parser.add_argument("--api-requests-per-month", type=int, default=1_000_000, help="API requests (default 1M)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run_capacity)


def run_capacity(args: argparse.Namespace) -> int:
    from punctual.capacity import Load, report
    from punctual.capacity.render import render

    try:
        load = Load(
            jobs=args.jobs,
            peak_runs_per_second=args.peak_runs_per_second,
            burst_seconds=args.burst_seconds,
            burst_interval_s=args.burst_interval_s,
            target_latency_ms=args.target_latency_ms,
            retention_days=args.retention_days,
            region=args.region,
            target_duration_ms=args.target_duration_ms,
            worker=args.worker,
            open_index=not args.no_open_index,
            api_requests_per_month=args.api_requests_per_month,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid load: {problems}") from exc
    result = report(load)
    print(json.dumps(result) if args.json else render(result))
    return 0
