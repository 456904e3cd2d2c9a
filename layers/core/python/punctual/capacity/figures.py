"""The capacity model's results: plain frozen dataclasses, serialized with ``asdict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class QuotaWarning:
    code: str  # stable, for scripts: ddb_table_quota, lambda_account_concurrency, ...
    message: str


@dataclass(frozen=True, slots=True)
class Throughput:
    """One table or index at the peak."""

    name: str
    peak_wru_per_s: float
    peak_rru_per_s: float
    warm_writes: int  # pre-warm to this (0: the default warm throughput suffices)
    warm_reads: int
    quota_wru_needed: int  # table-level quota to request (0: the default suffices)
    quota_rru_needed: int


@dataclass(frozen=True, slots=True)
class Scheduling:
    burst_runs: int
    lookahead_ms: int
    claim_rate_needed: float  # runs/s to claim every burst run before its time
    scheduler_instances: int
    scheduler_memory_mb: int  # each instance's: its vCPU share (1,769 MB = one vCPU)
    shards_per_instance: int  # the busiest instance's: ceil(due_shards / scheduler_instances)
    claim_capacity: float  # runs/s the fleet claims: its busiest instance's rate x its share of the shards
    due_shards: int
    due_shard_wru_per_s: float  # per shard (one partition key value) at the peak
    due_shard_utilization: float  # of one partition's 1,000 WRU/s
    open_shards: int  # 0 without the open index
    open_shard_wru_per_s: float
    open_shard_utilization: float


@dataclass(frozen=True, slots=True)
class Workers:
    kind: str
    in_flight_runs: int  # runs received and not yet finished at the peak (Little's law)
    sqs_in_flight_limit: int
    batch_size: int
    invocation_s: float  # one worker invocation: hold + target + overhead
    concurrency: int  # concurrent invocations needed at the peak
    mode: str  # standard | provisioned | fargate
    max_concurrency: int  # the event source's cap (standard) or min(max pollers x 10, reserved) (provisioned)
    min_pollers: int
    max_pollers: int
    reserved_concurrency: int
    account_concurrency_needed: int
    fargate_tasks: int
    fargate_in_flight_per_task: int
    fargate_prelease_s: int = 0  # runs leased up to this long before their instant (the Fargate tier)
    fargate_prewarm_tasks: int = 0  # hourly bursts: the tasks the schedule raises to before the hour (0: none)
    fargate_long_run_tasks: int = 0  # the long-run queue's service (runs longer than a Lambda may take)

    @property
    def tier(self) -> str:
        return "fargate" if self.kind == "fargate" else f"lambda-{self.mode}"


@dataclass(frozen=True, slots=True)
class OwnerCeiling:
    """What one owner can do whatever the deployment's size (``punctual.capacity.owners``)."""

    name: str  # stats_counters | one_time_jobs | max_runs_per_minute | max_concurrency
    runs_per_second: float
    applies_to: str


@dataclass(frozen=True, slots=True)
class Storage:
    jobs_gb: float
    runs_retained: int
    runs_gb: float
    total_gb: float
    # without the open index: the reaper's sweep of the runs table
    sweep_pages: int = 0  # Scan pages (1 MB) per one-minute reaper pass
    sweep_period_hours: float = 0.0  # one full sweep: how late a lost run can be found
    sweep_rru_per_month: float = 0.0


@dataclass(frozen=True, slots=True)
class Lateness:
    first_burst: dict[str, float]  # a cold start: no environments, concurrency from its minimum
    steady: dict[str, float]  # every minute: environments warm, concurrency already scaled
    target_ms: int
    met: bool


@dataclass(frozen=True, slots=True)
class TierOption:
    """One worker tier sized for the load: its workers, its lateness and what it costs."""

    tier: str  # lambda-standard | lambda-provisioned | fargate
    workers: Workers
    lateness: Lateness
    lines: list[Any]  # CostLine: the tier's own monthly lines
    monthly_usd: float  # the whole deployment's month with this tier (every line)
    per_million_runs_usd: float
    meets_target: bool
    note: str  # what sized it, or what holds it back


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    load: dict[str, Any]
    per_run: dict[str, Any]
    runs_per_month: int
    scheduling: Scheduling
    tables: list[Throughput]
    workers: Workers
    storage: Storage
    lateness: Lateness
    context: dict[str, Any]  # CDK context parameters: the deploy line's -c values
    busiest_owner_runs_per_second: int
    owner_ceilings: list[OwnerCeiling]
    warnings: list[QuotaWarning] = field(default_factory=list)
    worker_tiers: list[TierOption] = field(default_factory=list)
    dynamodb_modes: list[Any] = field(default_factory=list)  # punctual.capacity.modes.ModeOption
    recommendation: dict[str, str] = field(default_factory=dict)  # tier, dynamodb, and why each
    cost_lines: list[Any] = field(default_factory=list)  # CostLine: every line of the chosen deployment

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
