"""``punctual capacity``: AWS settings, quota raises, lateness and cost for a target load;
``punctual burst-model``: the expected start-lateness curve of a synthesized stack at a burst."""

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
        "--worker",
        choices=("auto", "lambda", "fargate"),
        default="auto",
        help="worker tier (default auto: the cheapest that meets the target; lambda: standard mode or pollers)",
    )
    parser.add_argument(
        "--dynamodb",
        choices=("auto", "on-demand", "provisioned"),
        default="auto",
        help="DynamoDB capacity mode (default auto: the cheaper for the load)",
    )
    parser.add_argument(
        "--owners",
        type=int,
        default=1_000,
        help="distinct owners with runs (KMS signing-secret requests; default 1000)",
    )
    parser.add_argument(
        "--payload-bytes", type=int, default=1_024, help="a run's request body to its target (egress; default 1024)"
    )
    parser.add_argument("--no-open-index", action="store_true", help="size a stack deployed with -c open_index=false")
    parser.add_argument(
        "--stats-counters",
        choices=("auto", "on", "off"),
        default="auto",
        help="GET /stats run counters, 1 write unit per run (auto: kept up to 8,000 runs/s per owner)",
    )
    parser.add_argument("--api-requests-per-month", type=int, default=1_000_000, help="API requests (default 1M)")
    parser.add_argument(
        "--max-owner-runs-per-second",
        type=int,
        default=None,
        help="the busiest owner's runs/s at the peak, checked against the per-owner ceilings (default: the whole peak)",
    )
    parser.add_argument(
        "--owner-max-concurrency",
        type=int,
        default=None,
        help="the largest max_concurrency given to an owner (its concurrency-slot ceiling; default: none given)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run_capacity)
    model = subparsers.add_parser(
        "burst-model",
        help="expected start lateness of one top-of-minute burst on a synthesized stack (a planning model)",
    )
    model.add_argument("--cdk-out", default="cdk.out", help="cdk synth output: a directory or a template file")
    model.add_argument("--runs-per-second", type=int, default=20_000, help="runs due per second (default 20000)")
    model.add_argument("--burst-seconds", type=int, default=1, help="how long the burst lasts (default 1)")
    model.add_argument("--target-duration-ms", type=int, default=500, help="mean target call (default 500)")
    model.add_argument("--json", action="store_true", help="print one JSON object")
    model.set_defaults(func=run_burst_model)


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
            dynamodb=args.dynamodb,
            owners=args.owners,
            payload_bytes=args.payload_bytes,
            open_index=not args.no_open_index,
            stats_counters={"auto": None, "on": True, "off": False}[args.stats_counters],
            api_requests_per_month=args.api_requests_per_month,
            max_owner_runs_per_second=args.max_owner_runs_per_second,
            owner_max_concurrency=args.owner_max_concurrency,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid load: {problems}") from exc
    result = report(load)
    print(json.dumps(result) if args.json else render(result))
    return 0


def run_burst_model(args: argparse.Namespace) -> int:
    from dataclasses import asdict
    from pathlib import Path

    from punctual.capacity.render import describe_deployment, plural
    from punctual.capacity.simulate import simulate
    from punctual.capacity.synth import read_template

    if not 1 <= args.runs_per_second <= 10_000_000 or not 1 <= args.burst_seconds <= 3600:
        raise ConfigError("--runs-per-second must be 1..10,000,000 and --burst-seconds 1..3,600")
    if not 1 <= args.target_duration_ms <= 900_000:
        raise ConfigError("--target-duration-ms must be 1..900,000")
    deployment = read_template(Path(args.cdk_out))
    results = {
        name: simulate(
            deployment.burst(
                args.runs_per_second,
                burst_seconds=args.burst_seconds,
                target_duration_ms=args.target_duration_ms,
                steady=steady,
            )
        ).to_dict()
        for name, steady in (("first_burst", False), ("steady", True))
    }
    if args.json:
        derived = {
            "shards_per_instance": deployment.shards_per_instance,
            "worker_concurrency": deployment.worker_concurrency,
        }
        print(json.dumps({"deployment": asdict(deployment) | derived, **results}))
        return 0
    d = deployment
    print(
        f"Burst model of {args.cdk_out}: {args.runs_per_second:,} runs/s for {args.burst_seconds} s,"
        f" {args.target_duration_ms} ms targets (a planning model, not a measurement: docs/capacity.md)"
    )
    print(describe_deployment(d))
    if d.fargate_tasks:
        print(f"  ({plural(d.fargate_tasks, 'Fargate worker task')} in the stack: not modelled)")
    for name, r in results.items():
        late = ", ".join(f"{k} {v:,.0f} ms" for k, v in r["lateness_ms"].items())
        print(f"{name.replace('_', ' ')}: {r['started']:,}/{r['runs']:,} started; lateness {late}")
        print(
            f"  claim rate {r['claim_rate']:,.0f}/s ({r['claimed_late']:,} claimed late), peak concurrency"
            f" {r['peak_concurrency']:,}, execution capped at {r['execution_rate_cap']:,.0f} runs/s by table writes"
        )
        curve = "  ".join(f"{p['percent']:g}%:{p['lateness_ms']:,.0f}" for p in r["curve"][::2])
        print(f"  curve (percent of runs: ms late) {curve}")
    return 0
