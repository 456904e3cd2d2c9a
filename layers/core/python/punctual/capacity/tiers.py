"""The worker tiers side by side: each sized for the load, its start lateness modelled, every cost line priced.

- ``lambda-standard``: the worker Lambda on the SQS event source in standard mode: 5 concurrent
  batches at a burst's start, +300 a minute while messages wait, at most 1,000.
- ``lambda-provisioned``: the same with provisioned pollers (``lambda_epu_hour_usd`` per poller-hour,
  AWS's published price): the minimum kept all month, the peak's pollers for the minute each burst
  holds them (a poller is billed per second with a one-minute minimum: a burst every minute keeps
  them all month).
- ``fargate``: ``punctual worker`` tasks (``punctual.capacity.fargate``), sized from the measured CPU.

The plan recommends the cheapest tier whose steady p99 start lateness meets the target, and says
why; ``--worker lambda|fargate`` overrides (``lambda``: standard mode, or pollers above its 1,000).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from punctual.capacity.constants import value
from punctual.capacity.cost_lines import GIB, MILLION, CostLine
from punctual.capacity.counts import per_run
from punctual.capacity.extras import Extras
from punctual.capacity.fargate import size_fargate, task_hours
from punctual.capacity.figures import Lateness, QuotaWarning, Scheduling, Throughput, TierOption, Workers
from punctual.capacity.load import SECONDS_PER_MONTH, Load, WorkerKind
from punctual.capacity.render import plural
from punctual.capacity.simulate import simulate
from punctual.capacity.workers import FARGATE_TASK_GB, FARGATE_TASK_VCPU, burst_settings, p99, size_lambda

WORKER_MEMORY_GB = 0.5  # infra.constants.WORKER_FUNCTION
TIERS = ("lambda-standard", "lambda-provisioned", "fargate")


def worker_tiers(
    load: Load,
    s: Scheduling,
    extras: Extras,
    *,
    capacity: Callable[[str], TierCapacity],
) -> list[tuple[TierOption, list[QuotaWarning]]]:
    """Each tier sized and priced; with each, the warnings its sizing raised (the plan keeps the chosen one's).

    ``capacity(tier)``: DynamoDB as that tier uses it (its tables, their provisioned writes, and the
    lines every tier shares with them: ``punctual.capacity.plan.Capacity``).
    """
    out = []
    for tier in TIERS:
        warnings: list[QuotaWarning] = []
        dynamo = capacity(tier)
        tables, provisioned = dynamo.tables, dynamo.provisioned
        if tier == "fargate":
            workers = size_fargate(load, s, tables, warnings, attempts=extras.attempts, provisioned_writes=provisioned)
        else:
            workers = size_lambda(
                load, s, tables, warnings, provisioned=tier == "lambda-provisioned", provisioned_writes=provisioned
            )
        lateness = _lateness(load, s, workers, tables, provisioned)
        lines = [line.rounded() for line in tier_lines(load, workers, extras)]
        shared = sum(line.monthly_usd for line in dynamo.common(tier == "fargate"))
        total = round(shared + sum(line.monthly_usd for line in lines), 2)
        runs = load.runs_per_month
        out.append(
            (
                TierOption(
                    tier=tier,
                    workers=workers,
                    lateness=lateness,
                    lines=lines,
                    monthly_usd=total,
                    per_million_runs_usd=round(total / (runs / MILLION), 3) if runs else 0.0,
                    meets_target=lateness.met,
                    note=_note(load, tier, workers, lateness),
                ),
                warnings,
            )
        )
    return out


class TierCapacity(Protocol):
    """What a tier needs of DynamoDB (``punctual.capacity.plan.Capacity``)."""

    @property
    def tables(self) -> list[Throughput]: ...

    @property
    def provisioned(self) -> dict[str, int] | None: ...

    def common(self, fargate: bool) -> list[CostLine]: ...


def choose(load: Load, options: list[TierOption]) -> tuple[TierOption, str]:
    """The tier the plan deploys, and why."""
    by_tier = {o.tier: o for o in options}
    if load.worker is WorkerKind.FARGATE:
        return by_tier["fargate"], "fargate: as asked (--worker fargate)"
    if load.worker is WorkerKind.LAMBDA:
        standard = by_tier["lambda-standard"]
        chosen = standard if standard.meets_target else by_tier["lambda-provisioned"]
        return chosen, f"{chosen.tier}: as asked (--worker lambda)"
    meeting = sorted((o for o in options if o.meets_target), key=lambda o: o.monthly_usd)
    if not meeting:
        best = min(options, key=lambda o: o.lateness.steady.get("p99", float("inf")))
        return best, f"{best.tier}: no tier meets the {load.target_latency_ms:,} ms target; this one comes closest"
    chosen, others = meeting[0], [o for o in options if o is not meeting[0]]
    why = [f"{chosen.tier}: the cheapest that meets p99 <= {load.target_latency_ms:,} ms (${chosen.monthly_usd:,.2f})"]
    for other in others:
        if other.meets_target:
            why.append(f"{other.tier} ${other.monthly_usd:,.2f}")
        else:
            why.append(f"{other.tier} misses it (p99 {other.lateness.steady.get('p99', float('inf')):,.0f} ms)")
    return chosen, "; ".join(why)


def _lateness(
    load: Load, s: Scheduling, w: Workers, tables: list[Throughput], provisioned: dict[str, int] | None
) -> Lateness:
    first = simulate(burst_settings(load, s, w, tables, steady=False, provisioned=provisioned))
    steady = simulate(burst_settings(load, s, w, tables, steady=True, provisioned=provisioned))
    return Lateness(
        first.lateness_ms, steady.lateness_ms, load.target_latency_ms, p99(steady) <= load.target_latency_ms
    )


def _note(load: Load, tier: str, w: Workers, lateness: Lateness) -> str:
    if tier == "fargate":
        warm = f", raised to {w.fargate_prewarm_tasks} before each hour" if w.fargate_prewarm_tasks else ""
        return (
            f"{plural(w.fargate_tasks, 'task')} of 1 vCPU{warm},"
            f" measured {value('worker_cpu_ms_per_run'):g} ms CPU per run,"
            f" runs leased up to {w.fargate_prelease_s} s ahead"
        )
    if tier == "lambda-standard" and w.concurrency >= value("lambda_sqs_max_concurrency"):
        return f"held to standard mode's {int(value('lambda_sqs_max_concurrency')):,} concurrent invocations"
    if tier == "lambda-provisioned":
        return f"{w.min_pollers}-{w.max_pollers} pollers at ${value('lambda_epu_hour_usd')} per poller-hour"
    return f"{w.concurrency:,} concurrent invocations"


def tier_lines(load: Load, w: Workers, extras: Extras) -> list[CostLine]:
    """The monthly lines that depend on the tier: compute, pollers or tasks, SQS, the workers' logs,
    traces and KMS requests."""
    runs = load.runs_per_month
    counts = per_run(worker="lambda" if w.kind == "lambda" else "process")
    sqs = counts.sqs_requests + extras.sqs_requests
    lines = [
        CostLine(
            "SQS",
            f"{sqs:.3f} requests per run (retries and waits included) + idle long polls",
            (sqs * runs + value("sqs_idle_receives_per_s") * SECONDS_PER_MONTH) * value("sqs_request_usd") / MILLION,
        )
    ]
    if w.kind == "fargate":
        return lines + _fargate_lines(load, w)
    return lines + _lambda_lines(load, w, extras)


def _lambda_lines(load: Load, w: Workers, extras: Extras) -> list[CostLine]:
    invocations = load.runs_per_month * extras.attempts / w.batch_size
    lines = [
        CostLine(
            "Lambda",
            f"workers: {invocations / MILLION:,.1f} M invocations of {w.invocation_s} s at {WORKER_MEMORY_GB} GB",
            invocations
            * (value("lambda_request_usd") / MILLION + w.invocation_s * WORKER_MEMORY_GB * value("lambda_gb_s_usd")),
        )
    ]
    if w.mode == "provisioned":
        peak = max(w.min_pollers, -(-w.concurrency // int(value("lambda_invocations_per_poller"))))
        busy = min(1.0, 60 / load.burst_interval_s)  # a poller is billed per second, one minute at least
        pollers = w.min_pollers * (1 - busy) + peak * busy
        lines.append(
            CostLine(
                "Lambda",
                f"provisioned pollers: {w.min_pollers} all month, {peak} during bursts"
                f" (${value('lambda_epu_hour_usd')} per EPU-hour, one poller each)",
                pollers * value("month_hours") * value("lambda_epu_hour_usd"),
            )
        )
    log_gb = invocations * value("lambda_log_bytes_per_invocation") / GIB
    per_s = invocations / SECONDS_PER_MONTH
    traced = min(per_s, value("xray_reservoir_per_s")) + max(0.0, per_s - value("xray_reservoir_per_s")) * value(
        "xray_fixed_rate"
    )
    starts = w.reserved_concurrency * value("month_hours") / value("lambda_environment_hours")
    lines += [
        CostLine(
            "CloudWatch",
            f"worker logs and EMF: {log_gb:,.1f} GB ingested, kept 30 days",
            log_gb * (value("cw_log_ingest_usd") + value("cw_log_store_usd")),
        ),
        CostLine(
            "X-Ray",
            f"worker traces: {traced * SECONDS_PER_MONTH / MILLION:,.1f} M (Lambda samples 1/s + 5 %)",
            traced * SECONDS_PER_MONTH * value("xray_trace_usd") / MILLION,
        ),
        _kms_requests(starts, load, runs_per_start=load.runs_per_month * extras.attempts / starts),
    ]
    return lines


def _fargate_lines(load: Load, w: Workers) -> list[CostLine]:
    hours = task_hours(w, load)
    long_run = w.fargate_long_run_tasks * value("month_hours")
    per_task_hour = FARGATE_TASK_VCPU * value("fargate_vcpu_hour_usd") + FARGATE_TASK_GB * value("fargate_gb_hour_usd")
    runs = load.runs_per_month
    log_gb = runs * value("fargate_log_bytes_per_run") / GIB
    flow_gb = runs * value("flow_log_bytes_per_run") / GIB
    starts = (w.fargate_tasks + w.fargate_prewarm_tasks + w.fargate_long_run_tasks) * value(
        "fargate_task_starts_per_month"
    )
    fleet = (
        plural(w.fargate_tasks, "worker task")
        if not w.fargate_prewarm_tasks
        else f"{w.fargate_prewarm_tasks} worker tasks 6 min an hour, {w.fargate_tasks} the rest"
    )
    return [
        CostLine("Fargate", f"{fleet} (1 vCPU, 2 GB, Arm)", hours * per_task_hour),
        CostLine("Fargate", f"long-run queue: {w.fargate_long_run_tasks} task all month", long_run * per_task_hour),
        CostLine("VPC", "a public IPv4 address per task", (hours + long_run) * value("public_ipv4_hour_usd")),
        CostLine(
            "CloudWatch",
            f"worker logs {log_gb:,.1f} GB + VPC flow logs {flow_gb:,.1f} GB, kept 30 days",
            (log_gb + flow_gb) * (value("cw_log_ingest_usd") + value("cw_log_store_usd")),
        ),
        _kms_requests(starts, load, runs_per_start=runs / starts),
    ]


def _kms_requests(process_starts: float, load: Load, *, runs_per_start: float) -> CostLine:
    """A worker process asks KMS for each owner's signing secret once (GenerateMac, cached): the
    owners it meets, at most one per run it executes."""
    owners = min(float(load.owners), runs_per_start)
    requests = process_starts * owners
    return CostLine(
        "KMS",
        f"signing secrets: {requests / MILLION:,.2f} M GenerateMac ({process_starts:,.0f} worker process starts"
        f" x {owners:,.0f} owners each)",
        requests * value("kms_request_usd") / 10_000,
    )
