"""The monthly cost of a capacity plan, and EventBridge Scheduler's for the same load.

List prices from ``punctual.capacity.constants`` (us-east-1, no free tiers, no savings plans);
request counts from ``punctual.capacity.counts``. Each line says what it counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from punctual.capacity.constants import value
from punctual.capacity.load import SECONDS_PER_MONTH, Load

if TYPE_CHECKING:
    from punctual.capacity.figures import CapacityPlan

MILLION = 1_000_000
GIB = 1024**3
WORKER_MEMORY_GB = 0.5  # infra.constants.WORKER_FUNCTION
SCHEDULER_MEMORY_GB = 1.769  # infra.constants.SCHEDULER_FUNCTION: one vCPU
REAPER_MEMORY_GB = 1.0
REAPER_SECONDS_PER_MINUTE = 3.0  # estimate: one pass a minute
API_SECONDS_PER_REQUEST = 0.05  # estimate: a warm API Lambda request
API_MEMORY_GB = 1.0
FARGATE_TASK_VCPU = 1.0  # infra/constructs/fargate.py: cpu=1024, 2 GiB
FARGATE_TASK_GB = 2.0


@dataclass(frozen=True, slots=True)
class CostLine:
    service: str
    item: str
    monthly_usd: float
    verified: bool = True  # False: the price is not verified; the line is shown but left out of the total


@dataclass(frozen=True, slots=True)
class CostTable:
    lines: list[CostLine]
    monthly_usd: float
    per_million_runs_usd: float
    eventbridge_scheduler: dict[str, Any]
    region_note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def by_service(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in (line for line in self.lines if line.verified):
            out[line.service] = round(out.get(line.service, 0.0) + line.monthly_usd, 2)
        return out


def monthly_cost(load: Load, plan: CapacityPlan) -> CostTable:
    """Price ``plan`` for a month of ``load`` (730 hours)."""
    runs = load.runs_per_month
    per_run = plan.per_run
    w = plan.workers
    lines = [
        *_dynamodb(load, plan, runs),
        CostLine(
            "SQS",
            f"{per_run['sqs_requests']} requests per run + idle long polls",
            (per_run["sqs_requests"] * runs + value("sqs_idle_receives_per_s") * SECONDS_PER_MONTH)
            * value("sqs_request_usd")
            / MILLION,
        ),
        *_compute(load, plan, runs),
        CostLine(
            "API Gateway",
            f"{load.api_requests_per_month:,} REST requests",
            load.api_requests_per_month * value("apigw_request_usd") / MILLION,
        ),
        *_cloudwatch(load, runs),
        CostLine("KMS", "one customer-managed key (SNS topics)", value("kms_key_usd")),
    ]
    if w.mode == "provisioned":
        lines.append(
            CostLine(
                "Lambda",
                f"{w.min_pollers} provisioned event pollers all month (price not verified: not in the total)",
                w.min_pollers * value("month_hours") * value("lambda_epu_hour_usd"),
                verified=False,
            )
        )
    lines = [CostLine(line.service, line.item, round(line.monthly_usd, 2), line.verified) for line in lines]
    total = round(sum(line.monthly_usd for line in lines if line.verified), 2)
    return CostTable(
        lines=lines,
        monthly_usd=total,
        per_million_runs_usd=round(total / (runs / MILLION), 3) if runs else 0.0,
        eventbridge_scheduler=eventbridge_scheduler(load),
        region_note=(
            "us-east-1 list prices"
            if load.region == "us-east-1"
            else f"us-east-1 list prices: {load.region} prices differ (check the AWS pricing pages)"
        ),
    )


def eventbridge_scheduler(load: Load) -> dict[str, Any]:
    """EventBridge Scheduler for the same load: one schedule per job, one invocation per run.

    Its targets are AWS APIs: calling an HTTP endpoint needs a Lambda function per invocation,
    priced here at 128 MB for the target's duration. It keeps no run history.
    """
    runs = load.runs_per_month
    invocations = runs * value("ebs_invocation_usd") / MILLION
    target_lambda = runs * (
        value("lambda_request_usd") / MILLION + load.target_duration_ms / 1000 * 0.125 * value("lambda_gb_s_usd")
    )
    total = invocations + target_lambda
    drain_s = load.burst_runs / value("ebs_invocations_per_s")
    return {
        "monthly_usd": round(total, 2),
        "per_million_runs_usd": round(total / (runs / MILLION), 3) if runs else 0.0,
        "invocations_usd": round(invocations, 2),
        "target_lambda_usd": round(target_lambda, 2),
        "schedules_quota_ok": load.jobs <= value("ebs_schedules"),
        "burst_drain_s_at_default_quota": round(drain_s, 1),
        "precision_s": int(value("ebs_precision_s")),
        "run_history": False,
    }


def _dynamodb(load: Load, plan: CapacityPlan, runs: int) -> list[CostLine]:
    per_run = plan.per_run
    due_queries = plan.scheduling.due_shards * 0.5 * SECONDS_PER_MONTH  # each shard queried every second
    storage_gb = plan.storage.total_gb
    sweep = (
        [
            CostLine(
                "DynamoDB",
                f"reaper sweep of the runs table every {plan.storage.sweep_period_hours:g} h (no open index)",
                plan.storage.sweep_rru_per_month * value("ddb_rru_usd") / MILLION,
            )
        ]
        if plan.storage.sweep_pages
        else []
    )
    return [
        *sweep,
        CostLine(
            "DynamoDB",
            f"writes: {per_run['write_units_total']} WRU per run",
            per_run["write_units_total"] * runs * value("ddb_wru_usd") / MILLION,
        ),
        CostLine(
            "DynamoDB",
            f"reads: {per_run['dynamodb_reads']:g} per run + due-index polling",
            (per_run["dynamodb_reads"] * runs + due_queries) * value("ddb_rru_usd") / MILLION,
        ),
        CostLine(
            "DynamoDB",
            f"storage {storage_gb:,.1f} GB ({load.retention_days} days of history) + PITR",
            storage_gb * (value("ddb_storage_usd") + value("ddb_pitr_usd")),
        ),
    ]


def _compute(load: Load, plan: CapacityPlan, runs: int) -> list[CostLine]:
    w, s = plan.workers, plan.scheduling
    month_s = SECONDS_PER_MONTH
    lines = [
        CostLine(
            "Lambda",
            f"scheduler fleet: {s.scheduler_instances} x {SCHEDULER_MEMORY_GB} GB all month",
            s.scheduler_instances * SCHEDULER_MEMORY_GB * month_s * value("lambda_gb_s_usd"),
        ),
        CostLine(
            "Lambda",
            "reaper: one pass a minute",
            REAPER_MEMORY_GB * REAPER_SECONDS_PER_MINUTE * month_s / 60 * value("lambda_gb_s_usd"),
        ),
        CostLine(
            "Lambda",
            "API function",
            load.api_requests_per_month
            * (
                value("lambda_request_usd") / MILLION
                + API_SECONDS_PER_REQUEST * API_MEMORY_GB * value("lambda_gb_s_usd")
            ),
        ),
    ]
    if w.kind == "fargate":
        hours = value("month_hours")
        lines.append(
            CostLine(
                "Fargate",
                f"{w.fargate_tasks} worker tasks (1 vCPU, 2 GB, Arm) all month",
                w.fargate_tasks
                * hours
                * (FARGATE_TASK_VCPU * value("fargate_vcpu_hour_usd") + FARGATE_TASK_GB * value("fargate_gb_hour_usd")),
            )
        )
        return lines
    invocations = runs / w.batch_size
    lines.append(
        CostLine(
            "Lambda",
            f"workers: {invocations / MILLION:,.1f} M invocations of {w.invocation_s} s at {WORKER_MEMORY_GB} GB",
            invocations
            * (value("lambda_request_usd") / MILLION + w.invocation_s * WORKER_MEMORY_GB * value("lambda_gb_s_usd")),
        )
    )
    return lines


def _cloudwatch(load: Load, runs: int) -> list[CostLine]:
    log_gb = runs * value("log_bytes_per_run") / GIB
    return [
        CostLine(
            "CloudWatch",
            f"logs and EMF metrics: {log_gb:,.0f} GB ingested, kept {30} days",
            log_gb * (value("cw_log_ingest_usd") + value("cw_log_store_usd")),
        ),
        CostLine(
            "CloudWatch",
            f"{int(value('custom_metrics'))} metrics, {int(value('alarms'))} alarm metrics, 1 dashboard",
            value("custom_metrics") * value("cw_metric_usd")
            + value("alarms") * value("cw_alarm_usd")
            + value("cw_dashboard_usd"),
        ),
    ]
