"""Worker sizing: Lambda concurrency (standard or provisioned pollers) or Fargate tasks, and the burst
model's input for a plan."""

from __future__ import annotations

import math

from punctual.capacity.constants import value
from punctual.capacity.figures import QuotaWarning, Scheduling, Throughput, Workers
from punctual.capacity.load import Load, WorkerKind
from punctual.capacity.simulate import BurstResult, BurstSettings, simulate
from punctual.capacity.synth import Deployment

HEADROOM = 1.2  # reserve 20 % above the computed peak
WARM_STEP = 1_000  # quota requests rounded up to this


def invocation_seconds(load: Load, batch_size: int) -> float:
    """One worker invocation: it waits for the latest instant in its batch, then runs the batch at once.

    The wait is the expected maximum of ``batch_size`` evenly spread early arrivals (up to 1 s):
    n / (n + 1) seconds.
    """
    hold = batch_size / (batch_size + 1)
    return hold + load.target_duration_ms / 1000 + value("worker_batch_overhead_s")


def size_workers(load: Load, s: Scheduling, tables: list[Throughput], warnings: list[QuotaWarning]) -> Workers:
    r = load.peak_runs_per_second
    batch = int(value("sqs_batch"))
    invocation = invocation_seconds(load, batch)
    in_flight = math.ceil(r * invocation)
    limit = int(value("sqs_in_flight"))
    if in_flight > limit:
        warnings.append(
            QuotaWarning(
                "sqs_in_flight",
                f"{in_flight:,} messages in flight at the peak, above the {limit:,} limit of one standard queue"
                " (a hard limit): receives fail over it; shorten target calls or split the load across stacks",
            )
        )
    scheduler_reserved = 2 * s.scheduler_instances
    if load.worker is WorkerKind.FARGATE:
        tasks = math.ceil(r / value("worker_runs_per_vcpu"))
        return Workers(
            kind="fargate",
            in_flight_runs=in_flight,
            sqs_in_flight_limit=limit,
            batch_size=batch,
            invocation_s=round(invocation, 3),
            concurrency=in_flight,
            mode="fargate",
            max_concurrency=in_flight,
            min_pollers=0,
            max_pollers=0,
            reserved_concurrency=0,
            account_concurrency_needed=_account(scheduler_reserved, warnings),
            fargate_tasks=tasks,
            fargate_in_flight_per_task=math.ceil(in_flight / tasks),
        )
    concurrency = _lambda_concurrency(load, s, tables, math.ceil(r / batch * invocation))
    reserved = math.ceil(concurrency * HEADROOM)
    per_poller = int(value("lambda_invocations_per_poller"))
    if reserved <= value("lambda_sqs_max_concurrency"):
        mode, max_concurrency, min_pollers, max_pollers = "standard", reserved, 0, 0
    else:
        mode = "provisioned"
        min_pollers = min(int(value("lambda_min_pollers_max")), math.ceil(concurrency / per_poller))
        max_pollers = min(int(value("lambda_max_pollers_max")), math.ceil(reserved / per_poller))
        # the pollers drive up to max_pollers x 10 invocations; the reservation caps them (the stack's
        # ReservedConcurrentExecutions, given in the deploy line as worker_reserved_concurrency)
        max_concurrency = min(max_pollers * per_poller, reserved)
        if min_pollers * per_poller < concurrency:
            warnings.append(
                QuotaWarning(
                    "lambda_min_pollers",
                    f"the peak needs {concurrency:,} concurrent invocations ready, but at most"
                    f" {int(value('lambda_min_pollers_max'))} minimum pollers ({min_pollers * per_poller:,}) can be"
                    " kept: the rest scales at +1,000/min (see the first-burst lateness)",
                )
            )
    if concurrency >= value("lambda_poller_max_concurrency"):
        warnings.append(
            QuotaWarning(
                "lambda_poller_ceiling",
                f"the peak needs the SQS event source's ceiling of {int(value('lambda_poller_max_concurrency')):,}"
                " concurrent invocations or more: use Fargate workers (--worker fargate) or split the load",
            )
        )
    return Workers(
        kind="lambda",
        in_flight_runs=in_flight,
        sqs_in_flight_limit=limit,
        batch_size=batch,
        invocation_s=round(invocation, 3),
        concurrency=concurrency,
        mode=mode,
        max_concurrency=max_concurrency,
        min_pollers=min_pollers,
        max_pollers=max_pollers,
        reserved_concurrency=reserved,
        account_concurrency_needed=_account(reserved + scheduler_reserved, warnings),
        fargate_tasks=0,
        fargate_in_flight_per_task=0,
    )


def _lambda_concurrency(load: Load, s: Scheduling, tables: list[Throughput], estimate: int) -> int:
    """The smallest concurrency (x1.5 steps from Little's law with full batches) meeting the target.

    Full batches are the best case: messages arrive spread over the second before their instant,
    so at low rates an invocation receives fewer than 10 and holds them until then. The burst
    model (warm environments, concurrency already scaled) decides.
    """
    ceiling = int(value("lambda_poller_max_concurrency"))
    concurrency = max(1, min(estimate, ceiling))
    for _ in range(16):
        steady = _burst(load, s, tables, ready=concurrency, maximum=concurrency, scale=0.0, warm=concurrency)
        if p99(simulate(steady)) <= load.target_latency_ms or concurrency >= ceiling:
            break
        concurrency = min(ceiling, math.ceil(concurrency * 1.5))
    return concurrency


# What the account quota must hold besides workers and schedulers, as the CDK app reserves it
# (infra.config.InfraConfig.worker_reserved_concurrency): 100 Lambda keeps unreserved, the API's
# 100 (api_reserved_concurrency) and the reaper's 4.
OTHER_FUNCTIONS_CONCURRENCY = 100 + 100 + 4


def _account(reserved: int, warnings: list[QuotaWarning]) -> int:
    needed = int(math.ceil((reserved + OTHER_FUNCTIONS_CONCURRENCY) / WARM_STEP) * WARM_STEP)
    default = int(value("lambda_account_concurrency"))
    if reserved + OTHER_FUNCTIONS_CONCURRENCY > default:
        warnings.append(
            QuotaWarning(
                "lambda_account_concurrency",
                f"Lambda needs {reserved + OTHER_FUNCTIONS_CONCURRENCY:,} concurrent executions, above the account"
                f" default of {default:,}: request {needed:,} (Service Quotas, Lambda, Concurrent executions)",
            )
        )
    return needed


def p99(result: BurstResult) -> float:
    return result.lateness_ms.get("p99", math.inf) if result.started == result.runs else math.inf


def burst_settings(load: Load, s: Scheduling, w: Workers, tables: list[Throughput], *, steady: bool) -> BurstSettings:
    """The simulation's input for this plan (recommended pre-warming applied).

    ``steady``: bursts every minute keep environments warm and concurrency scaled; otherwise the
    first burst after a deploy or a quiet hour (cold environments, concurrency at its minimum).
    Lambda workers go through :func:`plan_deployment`, the figures the deploy line's stack has, as
    ``punctual burst-model`` reads them from the template.
    """
    if w.mode == "fargate":
        slots = w.fargate_tasks * w.fargate_in_flight_per_task
        rate = w.fargate_tasks * value("worker_runs_per_vcpu")
        return _burst(load, s, tables, ready=slots, maximum=slots, scale=0.0, warm=slots, fargate_rate=rate)
    return plan_deployment(load, s, w, tables).burst(
        load.peak_runs_per_second,
        burst_seconds=load.burst_seconds,
        target_duration_ms=load.target_duration_ms,
        steady=steady,
    )


def plan_deployment(load: Load, s: Scheduling, w: Workers, tables: list[Throughput]) -> Deployment:
    """The deployment the plan's deploy line synthesizes (Lambda workers), as ``punctual.capacity.synth`` reads it."""
    return Deployment(
        shards=s.due_shards,
        lookahead_ms=s.lookahead_ms,
        scheduler_instances=s.scheduler_instances,
        batch_size=w.batch_size,
        max_concurrency=w.max_concurrency,
        min_pollers=w.min_pollers,
        max_pollers=w.max_pollers,
        reserved_concurrency=w.reserved_concurrency,
        open_index=load.open_index,
        warm_writes={t.name: t.warm_writes for t in tables if t.warm_writes},
        fargate_tasks=0,
    )


def _burst(
    load: Load,
    s: Scheduling,
    tables: list[Throughput],
    *,
    ready: int,
    maximum: int,
    scale: float,
    warm: int,
    fargate_rate: float = 0.0,
) -> BurstSettings:
    by_name = {t.name: t for t in tables}

    def throughput(name: str) -> float:
        return float(by_name[name].warm_writes or value("ddb_warm_writes"))

    return BurstSettings(
        burst_runs_per_second=load.peak_runs_per_second,
        burst_seconds=load.burst_seconds,
        lookahead_ms=s.lookahead_ms,
        scheduler_instances=s.scheduler_instances,
        due_shards=s.due_shards,
        batch_size=int(value("sqs_batch")),
        worker_mode="fargate"
        if fargate_rate
        else ("provisioned" if maximum > value("lambda_sqs_max_concurrency") else "standard"),
        ready_concurrency=ready,
        max_concurrency=maximum,
        scale_per_min=scale,
        fargate_runs_per_s=fargate_rate,
        target_duration_s=load.target_duration_ms / 1000,
        cold_start_s=0.0 if fargate_rate else 0.8,
        warm_environments=warm,
        jobs_write_throughput=throughput("jobs"),
        due_write_throughput=throughput("jobs.due"),
        runs_write_throughput=throughput("runs"),
        runs_writes_per_run=4 if load.open_index else 3,
    )
