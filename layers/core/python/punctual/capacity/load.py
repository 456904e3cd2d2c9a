"""The input of the capacity model: a target load, validated at the edge."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SECONDS_PER_MONTH = 730 * 3600  # the AWS pricing calculator's month


class WorkerKind(StrEnum):
    AUTO = "auto"  # the cheapest tier that meets the target (punctual.capacity.tiers)
    LAMBDA = "lambda"  # worker Lambdas on the SQS event source: standard mode, or provisioned pollers above it
    FARGATE = "fargate"  # punctual worker tasks on ECS Fargate, the Lambda worker's event source disabled


class CapacityMode(StrEnum):
    AUTO = "auto"  # the cheaper for the load (punctual.capacity.modes)
    ON_DEMAND = "on-demand"
    PROVISIONED = "provisioned"  # with auto scaling, bursts on credits


class Load(BaseModel):
    """A target load: how many jobs, how sharp the peak, how fast runs must start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: Annotated[int, Field(ge=1, le=1_000_000_000, description="scheduled jobs stored")]
    peak_runs_per_second: Annotated[int, Field(ge=1, le=10_000_000, description="runs due per second at the peak")]
    burst_seconds: Annotated[int, Field(ge=1, le=3600, description="how many seconds the peak lasts")] = 1
    burst_interval_s: Annotated[int, Field(ge=1, le=86_400, description="the peak repeats this often")] = 60
    target_latency_ms: Annotated[int, Field(ge=1, le=3_600_000, description="start lateness to stay under (p99)")] = (
        1_000
    )
    retention_days: Annotated[int, Field(ge=1, le=3650, description="run history kept")] = 30
    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$", description="AWS region")] = "us-east-1"
    target_duration_ms: Annotated[int, Field(ge=1, le=900_000, description="mean target call duration")] = 500
    worker: WorkerKind = WorkerKind.AUTO
    dynamodb: CapacityMode = CapacityMode.AUTO
    # distinct owners with runs: a worker process asks KMS for each one's signing secret once
    owners: Annotated[int, Field(ge=1, le=100_000_000)] = 1_000
    payload_bytes: Annotated[int, Field(ge=0, le=262_144, description="a run's request body to its target")] = 1_024
    open_index: bool = True  # the runs table's sparse open-runs index (-c open_index=false drops it)
    # GET /stats' per-owner run counters (-c stats_counters=false drops them); None: decided by the load
    # (kept while one owner's peak fits its counter items, see punctual.capacity.plan.stats_counters_for)
    stats_counters: bool | None = None
    api_requests_per_month: Annotated[int, Field(ge=0, le=10**12)] = 1_000_000
    # The busiest owner's runs/s at the peak, checked against the per-owner ceilings
    # (punctual.capacity.owners); None: one owner may have the whole peak
    max_owner_runs_per_second: Annotated[int | None, Field(ge=1, le=10_000_000)] = None
    # The largest max_concurrency an operator gives an owner (its slot item's ceiling); None: no owner has one
    owner_max_concurrency: Annotated[int | None, Field(ge=1, le=1_000_000)] = None

    @property
    def burst_runs(self) -> int:
        return self.peak_runs_per_second * self.burst_seconds

    @property
    def runs_per_month(self) -> int:
        return self.burst_runs * (SECONDS_PER_MONTH // self.burst_interval_s)
