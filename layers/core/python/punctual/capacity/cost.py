"""The monthly cost of a capacity plan, and EventBridge Scheduler's for the same load.

List prices from ``punctual.capacity.constants`` (us-east-1, no free tiers, no savings plans);
request counts from ``punctual.capacity.counts``; what retries and waits add from
``punctual.capacity.extras``. Every line is in the total: the lines the worker tier brings are
``punctual.capacity.tiers``', the DynamoDB capacity mode's ``punctual.capacity.modes``', the rest
(:func:`common_lines`) are the same whatever the tier. Each line says what it counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from punctual.capacity.constants import value
from punctual.capacity.cost_lines import GIB, MILLION, CostLine
from punctual.capacity.extras import Extras
from punctual.capacity.figures import Scheduling, Storage
from punctual.capacity.load import SECONDS_PER_MONTH, Load
from punctual.capacity.observed import alarm_metrics, kms_keys

if TYPE_CHECKING:
    from punctual.capacity.figures import CapacityPlan

__all__ = ["CostLine", "CostTable", "common_lines", "eventbridge_scheduler", "monthly_cost"]

REAPER_MEMORY_GB = 1.0
REAPER_SECONDS_PER_MINUTE = 3.0  # estimate: one pass a minute
API_SECONDS_PER_REQUEST = 0.05  # estimate: a warm API Lambda request
API_MEMORY_GB = 1.0


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
        for line in self.lines:
            out[line.service] = round(out.get(line.service, 0.0) + line.monthly_usd, 2)
        return out


def monthly_cost(load: Load, plan: CapacityPlan) -> CostTable:
    """Price ``plan`` for a month of ``load`` (730 hours): every line of its deployment."""
    runs = load.runs_per_month
    lines = list(plan.cost_lines)
    total = round(sum(line.monthly_usd for line in lines), 2)
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
    priced here at 128 MB for the target's duration, and sending the same request out of AWS
    (the same egress as Punctual's). It keeps no run history.
    """
    runs = load.runs_per_month
    invocations = runs * value("ebs_invocation_usd") / MILLION
    target_lambda = runs * (
        value("lambda_request_usd") / MILLION + load.target_duration_ms / 1000 * 0.125 * value("lambda_gb_s_usd")
    )
    egress = egress_usd(load, attempts=1.0)
    total = invocations + target_lambda + egress
    drain_s = load.burst_runs / value("ebs_invocations_per_s")
    return {
        "monthly_usd": round(total, 2),
        "per_million_runs_usd": round(total / (runs / MILLION), 3) if runs else 0.0,
        "invocations_usd": round(invocations, 2),
        "target_lambda_usd": round(target_lambda, 2),
        "egress_usd": round(egress, 2),
        "schedules_quota_ok": load.jobs <= value("ebs_schedules"),
        "burst_drain_s_at_default_quota": round(drain_s, 1),
        "precision_s": int(value("ebs_precision_s")),
        "run_history": False,
    }


def egress_usd(load: Load, *, attempts: float) -> float:
    """The requests to HTTP targets leave AWS: their bytes (the measured request head plus the payload)."""
    gb = load.runs_per_month * attempts * (value("target_request_bytes") + load.payload_bytes) / GIB
    return gb * value("egress_gb_usd")


def common_lines(
    load: Load,
    s: Scheduling,
    storage: Storage,
    extras: Extras,
    *,
    mode_lines: list[CostLine],
    open_index: bool,
    fargate: bool,
) -> list[CostLine]:
    """Every line whatever the worker tier: DynamoDB (the capacity mode's lines, storage), the
    scheduler fleet, the reaper, the API, CloudWatch, KMS keys, X-Ray and egress."""
    month_s = SECONDS_PER_MONTH
    sweep = (
        [
            CostLine(
                "DynamoDB",
                f"reaper sweep of the runs table every {storage.sweep_period_hours:g} h (no open index)",
                storage.sweep_rru_per_month * value("ddb_rru_usd") / MILLION,
            )
        ]
        if storage.sweep_pages
        else []
    )
    scheduler_gb = s.scheduler_memory_mb / 1024
    invocations_per_month = (s.scheduler_instances + 1) * month_s / 60  # the schedulers' and the reaper's
    # a scheduler invocation ticks every second of its minute; each one, the reaper's too, ends with a log line
    ticks = s.scheduler_instances * month_s
    control_log_gb = (
        ticks * value("scheduler_log_bytes_per_tick") + invocations_per_month * value("lambda_log_bytes_per_invocation")
    ) / GIB
    alarms = alarm_metrics(open_index=open_index, fargate=fargate)
    keys = kms_keys()
    api_traced = min(load.api_requests_per_month, value("xray_reservoir_per_s") * month_s) + max(
        0.0, load.api_requests_per_month - value("xray_reservoir_per_s") * month_s
    ) * value("xray_api_sampling_rate")
    traces = api_traced + invocations_per_month  # a scheduler or reaper invocation a minute: each traced
    lines = [
        *mode_lines,
        *sweep,
        CostLine(
            "DynamoDB",
            f"storage {storage.total_gb:,.1f} GB ({load.retention_days} days of history) + PITR",
            storage.total_gb * (value("ddb_storage_usd") + value("ddb_pitr_usd")),
        ),
        CostLine(
            "Lambda",
            f"scheduler fleet: {s.scheduler_instances} x {s.scheduler_memory_mb:,} MB all month",
            s.scheduler_instances * scheduler_gb * month_s * value("lambda_gb_s_usd"),
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
        CostLine(
            "API Gateway",
            f"{load.api_requests_per_month:,} REST requests",
            load.api_requests_per_month * value("apigw_request_usd") / MILLION,
        ),
        CostLine(
            "CloudWatch",
            f"scheduler and reaper logs: {control_log_gb:,.2f} GB",
            control_log_gb * (value("cw_log_ingest_usd") + value("cw_log_store_usd")),
        ),
        CostLine(
            "CloudWatch",
            f"{int(value('custom_metrics'))} metrics, {alarms} alarm metrics, 1 dashboard",
            value("custom_metrics") * value("cw_metric_usd")
            + alarms * value("cw_alarm_usd")
            + value("cw_dashboard_usd"),
        ),
        CostLine(
            "KMS", f"{keys} customer-managed keys (SNS topics, sealed secrets, signing)", keys * value("kms_key_usd")
        ),
        CostLine(
            "X-Ray",
            f"{traces / MILLION:,.2f} M traces: API (the stack's rule: 1/s + {value('xray_api_sampling_rate'):.0%}),"
            " scheduler and reaper",
            traces * value("xray_trace_usd") / MILLION,
        ),
        CostLine(
            "Data transfer",
            f"requests to HTTP targets: {value('target_request_bytes'):,.0f} B + a {load.payload_bytes:,} B payload"
            f" x {extras.attempts:.2f} attempts per run",
            egress_usd(load, attempts=extras.attempts),
        ),
    ]
    return [line.rounded() for line in lines]
