"""Lambda worker sizing (standard mode or provisioned pollers), and the burst model's input for a plan
(``plan_deployment``: the deployment the deploy line synthesizes, whichever the tier)."""

from __future__ import annotations

import math

from punctual.capacity.constants import value
from punctual.capacity.figures import QuotaWarning, Scheduling, Throughput, Workers
from punctual.capacity.load import Load
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


def in_flight(load: Load, warnings: list[QuotaWarning]) -> int:
    """Messages in flight at the peak (Little's law: received and not yet deleted), checked against the
    120,000 of one standard queue."""
    in_flight_runs = math.ceil(load.peak_runs_per_second * invocation_seconds(load, int(value("sqs_batch"))))
    limit = int(value("sqs_in_flight"))
    if in_flight_runs > limit:
        warnings.append(
            QuotaWarning(
                "sqs_in_flight",
                f"{in_flight_runs:,} messages in flight at the peak, above the {limit:,} limit of one standard queue"
                " (a hard limit): receives fail over it; shorten target calls or split the load across stacks",
            )
        )
    return in_flight_runs


def size_lambda(
    load: Load,
    s: Scheduling,
    tables: list[Throughput],
    warnings: list[QuotaWarning],
    *,
    provisioned: bool | None,
    provisioned_writes: dict[str, int] | None = None,
) -> Workers:
    """Lambda workers: standard mode (``provisioned`` False: capped at its 1,000), provisioned pollers
    (True), or whichever the concurrency needs (None: standard up to 1,000, pollers above).
    ``provisioned_writes``: the tables' capacity in DynamoDB's provisioned mode (None: on-demand)."""
    r = load.peak_runs_per_second
    batch = int(value("sqs_batch"))
    invocation = invocation_seconds(load, batch)
    in_flight_runs = in_flight(load, warnings)
    limit = int(value("sqs_in_flight"))
    scheduler_reserved = 2 * s.scheduler_instances
    standard_cap = int(value("lambda_sqs_max_concurrency"))
    ceiling = standard_cap if provisioned is False else None
    concurrency = _lambda_concurrency(
        load, s, tables, math.ceil(r / batch * invocation), ceiling=ceiling, provisioned=provisioned_writes
    )
    reserved = math.ceil(concurrency * HEADROOM)
    per_poller = int(value("lambda_invocations_per_poller"))
    if provisioned is False or (provisioned is None and reserved <= standard_cap):
        reserved = min(reserved, standard_cap)
        mode, max_concurrency, min_pollers, max_pollers = "standard", reserved, 0, 0
    else:
        mode = "provisioned"
        min_pollers = max(
            int(value("lambda_sqs_min_pollers")),
            min(int(value("lambda_min_pollers_max")), math.ceil(concurrency / per_poller)),
        )
        max_pollers = max(min_pollers, min(int(value("lambda_max_pollers_max")), math.ceil(reserved / per_poller)))
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
        in_flight_runs=in_flight_runs,
        sqs_in_flight_limit=limit,
        batch_size=batch,
        invocation_s=round(invocation, 3),
        concurrency=concurrency,
        mode=mode,
        max_concurrency=max_concurrency,
        min_pollers=min_pollers,
        max_pollers=max_pollers,
        reserved_concurrency=reserved,
        account_concurrency_needed=account_concurrency(reserved + scheduler_reserved, warnings),
        fargate_tasks=0,
        fargate_in_flight_per_task=0,
    )


def _lambda_concurrency(
    load: Load,
    s: Scheduling,
    tables: list[Throughput],
    estimate: int,
    *,
    ceiling: int | None,
    provisioned: dict[str, int] | None,
) -> int:
    """The smallest concurrency (x1.5 steps from Little's law with full batches) meeting the target.

    Full batches are the best case: messages arrive spread over the second before their instant,
    so at low rates an invocation receives fewer than 10 and holds them until then. The burst
    model (warm environments, concurrency already scaled) decides.
    """
    ceiling = ceiling or int(value("lambda_poller_max_concurrency"))
    concurrency = max(1, min(estimate, ceiling))
    for _ in range(16):
        steady = _burst(load, s, tables, concurrency=concurrency, provisioned=provisioned)
        if p99(simulate(steady)) <= load.target_latency_ms or concurrency >= ceiling:
            break
        concurrency = min(ceiling, math.ceil(concurrency * 1.5))
    return concurrency


# What the account quota must hold besides workers and schedulers, as the CDK app reserves it
# (infra.config.InfraConfig.worker_reserved_concurrency): 100 Lambda keeps unreserved, the API's
# 100 (api_reserved_concurrency), the reaper's 4 and the callback authorizer's 10.
OTHER_FUNCTIONS_CONCURRENCY = 100 + 100 + 4 + 10


def account_concurrency(reserved: int, warnings: list[QuotaWarning]) -> int:
    """The account quota to hold ``reserved`` (workers and schedulers) and the other functions, rounded up."""
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


def burst_settings(
    load: Load,
    s: Scheduling,
    w: Workers,
    tables: list[Throughput],
    *,
    steady: bool,
    provisioned: dict[str, int] | None = None,
) -> BurstSettings:
    """The simulation's input for this plan: :func:`plan_deployment`, the figures the deploy line's
    stack has, as ``punctual burst-model`` reads them from the template.

    ``steady``: bursts every minute keep environments warm and concurrency scaled; otherwise the
    first burst after a deploy or a quiet hour (cold environments, concurrency at its minimum).
    """
    return plan_deployment(load, s, w, tables, provisioned).burst(
        load.peak_runs_per_second,
        burst_seconds=load.burst_seconds,
        target_duration_ms=load.target_duration_ms,
        steady=steady,
    )


def plan_deployment(
    load: Load, s: Scheduling, w: Workers, tables: list[Throughput], provisioned: dict[str, int] | None = None
) -> Deployment:
    """The deployment the plan's deploy line synthesizes, as ``punctual.capacity.synth`` reads it.

    ``provisioned``: the tables' provisioned write units in provisioned mode (None: on-demand).
    """
    fargate = w.kind == "fargate"
    return Deployment(
        shards=s.due_shards,
        lookahead_ms=s.lookahead_ms,
        scheduler_instances=s.scheduler_instances,
        batch_size=w.batch_size,
        # the Fargate tier deploys the Lambda worker idle: worker_max_concurrency=2, reserved alike
        max_concurrency=IDLE_LAMBDA_WORKER if fargate else w.max_concurrency,
        min_pollers=w.min_pollers,
        max_pollers=w.max_pollers,
        reserved_concurrency=IDLE_LAMBDA_WORKER if fargate else w.reserved_concurrency,
        open_index=load.open_index,
        warm_writes={t.name: t.warm_writes for t in tables if t.warm_writes},
        fargate_tasks=max(w.fargate_tasks, w.fargate_prewarm_tasks) if fargate else 0,
        scheduler_memory_mb=s.scheduler_memory_mb,
        lambda_workers=not fargate,
        fargate_vcpu=FARGATE_TASK_VCPU if fargate else 1.0,
        fargate_in_flight=w.fargate_in_flight_per_task,
        prelease_s=w.fargate_prelease_s,
        provisioned_writes=provisioned,
    )


FARGATE_TASK_VCPU = 1.0  # infra/constructs/fargate.py: cpu=1024 (Python runs on one core), 2 GiB
FARGATE_TASK_GB = 2.0
IDLE_LAMBDA_WORKER = 2  # the Fargate tier: the Lambda worker's reservation, its event source disabled


def _burst(
    load: Load,
    s: Scheduling,
    tables: list[Throughput],
    *,
    concurrency: int,
    provisioned: dict[str, int] | None,
) -> BurstSettings:
    """A steady burst on Lambda workers at ``concurrency`` (standard mode up to 1,000, pollers above)."""
    trial = Deployment(
        shards=s.due_shards,
        lookahead_ms=s.lookahead_ms,
        scheduler_instances=s.scheduler_instances,
        batch_size=int(value("sqs_batch")),
        max_concurrency=concurrency,
        min_pollers=0,
        max_pollers=0,
        reserved_concurrency=concurrency,
        open_index=load.open_index,
        warm_writes={t.name: t.warm_writes for t in tables if t.warm_writes},
        fargate_tasks=0,
        scheduler_memory_mb=s.scheduler_memory_mb,
        provisioned_writes=provisioned,
    )
    return trial.burst(
        load.peak_runs_per_second,
        burst_seconds=load.burst_seconds,
        target_duration_ms=load.target_duration_ms,
        steady=True,
    )
