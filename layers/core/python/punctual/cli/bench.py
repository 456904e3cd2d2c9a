"""``punctual bench core|burst|tenants|priority|minute``: measured figures, readably or as one JSON object."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from punctual.cli import bench_priority
from punctual.cli.bench_runs import measured, report
from punctual.runtime.process import collect_rarely


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("bench", help="measure throughput and latency")
    kinds = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    core = kinds.add_parser(
        "core", help="claims/s, listing and run history at 10k and 1M stored jobs; cached vs plain croniter"
    )
    core.add_argument(
        "--sizes",
        default="10000,1000000",
        help="stored job counts (comma separated); 10000000 takes minutes and ~7.5 GB of disk (never in CI)",
    )
    core.add_argument("--due", type=int, default=20_000, help="due jobs claimed per size")
    core.add_argument("--json", action="store_true", help="print one JSON object")
    core.set_defaults(func=run_core)
    burst = kinds.add_parser("burst", help="N jobs due at one second: enqueue rate and availability lateness")
    burst.add_argument("--sizes", default="1000,10000,20000", help="burst sizes (comma separated)")
    burst.add_argument("--execute", action="store_true", help="also execute the runs against a no-op HTTP target")
    burst.add_argument("--processes", type=int, default=2, help="worker processes with --execute")
    burst.add_argument(
        "--max-in-flight", type=int, default=10_000, help="runs in flight per worker process with --execute"
    )
    burst.add_argument(
        "--target-delay-ms", type=int, default=0, help="the no-op target answers after this long (a real webhook)"
    )
    burst.add_argument(
        "--target-host",
        default="127.0.0.1",
        help="how the jobs' URL names the no-op target, which listens on 127.0.0.1 (a name such as"
        " localhost: every attempt resolves it, as for a real webhook)",
    )
    burst.add_argument(
        "--target-tls",
        action="store_true",
        help="serve the no-op target over HTTPS (a certificate from a throwaway CA the workers trust)",
    )
    burst.add_argument(
        "--target",
        choices=("noop", "nginx", "auto"),
        default="noop",
        help="what answers with --execute: the project's no-op target (default), nginx (plain HTTP on"
        " 127.0.0.1; scripts/install-nginx), or nginx where installed",
    )
    burst.add_argument(
        "--lookahead-ms", type=int, default=None, help="the scheduler's lookahead (default: the settings')"
    )
    burst.add_argument(
        "--prelease-s",
        type=int,
        default=None,
        help="lease runs up to this long ahead of their instant (default: the settings' prelease_s; 0: off)",
    )
    burst.add_argument(
        "--repeat", type=int, default=1, help="execute each size this many times; also print the median of each figure"
    )
    burst.add_argument("--json", action="store_true", help="print one JSON object")
    burst.set_defaults(func=run_burst)
    tenants = kinds.add_parser("tenants", help="noisy neighbour: A floods, B's start lateness (embedded engine)")
    tenants.add_argument("--flood", type=int, default=10_000, help="tenant A's runs due at second T")
    tenants.add_argument("--few", type=int, default=50, help="tenant B's runs due at the same T")
    tenants.add_argument("--delay-ms", type=int, default=200, help="the no-op target's answer delay")
    tenants.add_argument("--processes", type=int, default=2, help="worker processes")
    tenants.add_argument("--concurrency", type=int, default=64, help="--max-in-flight of each worker process")
    tenants.add_argument(
        "--lookahead-ms", type=int, default=None, help="the scheduler's lookahead (default: the settings')"
    )
    tenants.add_argument("--unfair", action="store_true", help="also measure without owner groups (comparison)")
    tenants.add_argument("--json", action="store_true", help="print one JSON object")
    tenants.set_defaults(func=run_tenants)
    bench_priority.register(kinds)
    aws = kinds.add_parser(
        "aws", help="CPU per run of the async worker and per claim of the scheduler on the aws engine (moto)"
    )
    aws.add_argument("--runs", type=int, default=300, help="runs the worker executes (moto: ~100-200 writes/s)")
    aws.add_argument("--claims", type=int, default=1_000, help="jobs the scheduler claims")
    aws.add_argument("--max-in-flight", type=int, default=1_000, help="the worker's --max-in-flight")
    aws.add_argument(
        "--stats-counters", action="store_true", help="keep GET /stats' run counters (one more write per run)"
    )
    aws.add_argument("--repeat", type=int, default=1, help="measure this many times; also print the medians")
    aws.add_argument("--json", action="store_true", help="print one JSON object")
    aws.set_defaults(func=run_aws)
    minute = kinds.add_parser(
        "minute",
        help="N every-minute cron jobs for M minutes: separate api, scheduler, worker and reaper processes;"
        " arrival lateness at a real webhook (nginx where installed), per minute",
    )
    minute.add_argument("--jobs", type=int, default=20_000, help="every-minute cron jobs (default 20,000)")
    minute.add_argument("--minutes", type=int, default=3, help="whole minutes measured (default 3)")
    minute.add_argument(
        "--target-delay-ms", type=int, default=0, help="the webhook answers after this long (default 0: at once)"
    )
    minute.add_argument(
        "--create",
        choices=["api", "bulk"],
        default="api",
        help="api: POST /jobs, as a user (default); bulk: loaded straight into the embedded store (no API path)",
    )
    minute.add_argument("--workers", type=int, default=2, help="punctual worker processes (default 2)")
    minute.add_argument(
        "--target",
        choices=["auto", "nginx", "noop"],
        default="auto",
        help="the webhook: nginx (scripts/install-nginx), the project's no-op target, or auto: nginx where"
        " installed (default)",
    )
    minute.add_argument("--json", action="store_true", help="print one JSON object")
    minute.set_defaults(func=run_minute)


def run_core(args: argparse.Namespace) -> int:
    from punctual.bench.core import bench_sizes
    from punctual.bench.cron import bench_cron

    collect_rarely()  # the bench plays the scheduler process, which runs with these settings
    started = time.perf_counter()
    claims = bench_sizes([int(size) for size in args.sizes.split(",")], due=args.due)
    cron = bench_cron()
    total_s = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps({"claims": claims, "cron": cron, "total_seconds": total_s}))
        return 0
    print("Claims on the embedded engine (one SQLite file, 16 shards, pages of 500):")
    for c in claims:
        print(
            f"  {c['stored_jobs']:>10,} jobs stored, {c['runs_claimed']:,} due claimed in {c['claim_seconds']} s"
            f" -> {c['claims_per_second']:,} claims/s   (load {c['load_seconds']} s,"
            f" {c['jobs_loaded_per_second']:,} jobs/s)"
        )
        print(
            f"  {'':>10}  GET /jobs: a page of 50 in {c['list_jobs_page_ms']} ms, all {c['owner_jobs']:,} of an owner"
            f" in {c['list_jobs_all_ms']} ms; run history ({c['history_runs']:,} runs): a page of 50 in"
            f" {c['run_history_page_ms']} ms, all in {c['run_history_all_ms']} ms;"
            f" GET /runs/{{id}} {c['get_run_ms']} ms"
        )
    print("Next-fire computations per second:")
    for key, value in cron.items():
        print(f"  {key:<28} {value:,.1f}" if isinstance(value, float) else f"  {key:<28} {value}")
    print(f"Total: {total_s} s")
    return 0


def run_burst(args: argparse.Namespace) -> int:
    from punctual.bench.burst import bench_burst, bench_burst_execution

    collect_rarely()  # the bench plays the scheduler process; its workers are `punctual worker` processes
    sizes = [int(size) for size in args.sizes.split(",")]
    results = [bench_burst(size) for size in sizes]
    executed = [
        bench_burst_execution(
            size,
            processes=args.processes,
            max_in_flight=args.max_in_flight,
            target_delay_ms=args.target_delay_ms,
            prelease_s=args.prelease_s,
            lookahead_ms=args.lookahead_ms,
            target_host=args.target_host,
            target_tls=args.target_tls,
            target=args.target,
        )
        for size in sizes
        for _ in range(max(1, args.repeat))
        if args.execute
    ]
    medians = _medians(executed) if args.repeat > 1 else []
    if args.json:
        print(
            json.dumps({"burst": results, "execution": executed, **({"execution_median": medians} if medians else {})})
        )
        return 0
    print("Burst: N jobs due at the same second, embedded engine, real scheduler:")
    for r in results:
        print(
            f"  N={r['jobs']:>6,}: enqueued {r['runs_enqueued']:,} at {r['runs_enqueued_per_second']:,} runs/s;"
            f" available lateness p50={r['available_lateness_ms_p50']} ms p99={r['available_lateness_ms_p99']} ms"
            f" max={r['available_lateness_ms_max']} ms; within 1 s: {r['available_within_1s']:,}/{r['jobs']:,}"
        )
    if executed:
        print(
            f"Execution: {args.processes} punctual worker processes, up to {args.max_in_flight:,} runs in flight each,"
            f" against {executed[0]['target']}:"
        )
    for e in executed:
        print(
            f"  N={e['jobs']:>6,}: {e['runs_succeeded']:,} succeeded at {e['runs_completed_per_second']:,} runs/s;"
            f" start lateness p50={e['start_lateness_ms_p50']} ms p99={e['start_lateness_ms_p99']} ms"
            f" max={e['start_lateness_ms_max']} ms; arrival at the target p50={e['target_arrival_lateness_ms_p50']} ms"
            f" p99={e['target_arrival_lateness_ms_p99']} ms max={e['target_arrival_lateness_ms_max']} ms;"
            f" worker CPU {e['worker_cpu_seconds_per_1000_runs']} s per 1,000 runs,"
            f" peak RSS {e['worker_peak_rss_mib']} MiB"
        )
    for e in medians:
        print(
            f"  median of {args.repeat}, N={e['jobs']:>6,}: {e['runs_completed_per_second']:,} runs/s;"
            f" start lateness p50={e['start_lateness_ms_p50']} ms p99={e['start_lateness_ms_p99']} ms"
            f" max={e['start_lateness_ms_max']} ms; arrival p99={e['target_arrival_lateness_ms_p99']} ms"
        )
    return 0


def _medians(executed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per burst size, the median of every numeric figure over the repeated runs."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for run in executed:
        by_size.setdefault(run["jobs"], []).append(run)
    medians = []
    for size, runs in by_size.items():
        numeric = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
        values = {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in numeric}
        medians.append({**values, "jobs": size, "runs": len(runs)})
    return medians


def run_tenants(args: argparse.Namespace) -> int:
    from punctual.bench.tenants import bench_noisy_neighbour

    options = {
        "delay_ms": args.delay_ms,
        "processes": args.processes,
        "concurrency": args.concurrency,
        "lookahead_ms": args.lookahead_ms,
    }
    results = measured(bench_noisy_neighbour, (args.flood, args.few), options, {"fair": False} if args.unfair else None)

    def line(r: dict[str, Any]) -> str:
        return (
            f"{'fair hand-out' if r['fair'] else 'one queue order'}: B start lateness"
            f" p50={r['b_start_lateness_ms_p50']} ms p99={r['b_start_lateness_ms_p99']} ms"
            f" max={r['b_start_lateness_ms_max']} ms;"
            f" A p50={r['a_start_lateness_ms_p50']} ms p99={r['a_start_lateness_ms_p99']} ms,"
            f" A drained after {r['a_last_finish_after_ms']} ms;"
            f" succeeded A {r['a_succeeded']:,} B {r['b_succeeded']:,}"
        )

    header = (
        f"Noisy neighbour, embedded engine: A has {args.flood:,} runs and B {args.few:,} runs due at one second;"
        f" no-op target answering after {args.delay_ms} ms; {args.processes} worker processes,"
        f" --max-in-flight {args.concurrency}:"
    )
    report(results, key="noisy_neighbour", as_json=args.json, header=header, line=line)
    return 0


def run_aws(args: argparse.Namespace) -> int:
    from punctual.bench.aws import bench_aws

    collect_rarely()  # this process plays the worker and the scheduler, which run with these settings
    results = [
        bench_aws(args.runs, claims=args.claims, max_in_flight=args.max_in_flight, stats_counters=args.stats_counters)
        for _ in range(max(1, args.repeat))
    ]
    median = {
        "worker_cpu_ms_per_run": statistics.median(r["worker"]["cpu_ms_per_run"] for r in results),
        "worker_cpu_ms_per_run_net": statistics.median(r["worker"]["cpu_ms_per_run_net"] for r in results),
        "scheduler_cpu_ms_per_claim": statistics.median(r["scheduler"]["cpu_ms_per_claim"] for r in results),
        "scheduler_cpu_ms_per_empty_poll": statistics.median(r["scheduler"]["cpu_ms_per_empty_poll"] for r in results),
    }
    if args.json:
        print(json.dumps({"aws": results, "median": median}))
        return 0
    print("The aws engine against a moto server in another process (the measured process's CPU only):")
    for r in results:
        w, s = r["worker"], r["scheduler"]
        print(
            f"  worker: {w['runs_succeeded']:,} runs (no-op HTTP target) in {w['window_seconds']} s on moto: CPU"
            f" {w['cpu_ms_per_run']} ms per run, {w['cpu_ms_per_run_net']} ms net of idle;"
            f" {w['requests_per_run']} requests per run"
        )
        print(
            f"  scheduler: {s['claims']:,} claims in {s['claim_seconds_on_moto']} s on moto:"
            f" CPU {s['cpu_ms_per_claim']} ms per claim ({s['claims_per_cpu_second']:,} per CPU-second);"
            f" an empty shard's poll {s['cpu_ms_per_empty_poll']} ms"
        )
    if len(results) > 1:
        print("  medians: " + ", ".join(f"{k} {v}" for k, v in median.items()))
    return 0


def run_minute(args: argparse.Namespace) -> int:
    from punctual.bench.minute import bench_minute
    from punctual.bench.minute_figures import table

    if args.jobs < 1 or args.minutes < 1 or args.workers < 1 or args.target_delay_ms < 0:
        print(
            "punctual bench minute: --jobs, --minutes and --workers must be at least 1, --target-delay-ms at least 0",
            file=sys.stderr,
        )
        return 2
    result = bench_minute(
        args.jobs,
        args.minutes,
        target_delay_ms=args.target_delay_ms,
        create=args.create,
        workers=args.workers,
        target=args.target,
        log=lambda line: print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True),
    )
    print(json.dumps(result) if args.json else table(result))
    return 0
