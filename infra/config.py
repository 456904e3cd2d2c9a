"""Context parameters: one validated model, with defaults for a small deployment that works as is.

Every field is a CDK context parameter of the same name: ``npx cdk deploy -c shards=64
-c fargate_workers=true``. Values given on the command line arrive as strings and are converted
("64" -> 64, "true" -> True; lists as "a,b" or a JSON list). An invalid or unknown parameter
stops synthesis with one message naming the parameter and the problem.

The defaults are what ``punctual capacity --jobs 1000000 --peak-runs-per-second 1000 --worker lambda
--dynamodb on-demand`` prints
(``infra.sizing``; a test keeps the two equal): a plain ``npx cdk deploy`` carries
1 million jobs and 1,000 runs/s at the top of a minute in an account with default quotas, with no
pre-warming and standard SQS polling. Larger loads deploy the line ``punctual capacity`` prints
for them (docs/capacity.md); synthesis without any sizing parameter says so (``infra.sizing``).

- ``shards`` / ``open_shards`` = 16: each run moves its job's key in the ``due`` index (2 write
  units) and puts then deletes its row in the ``open`` index (2 more); a shard (one partition key
  value) may use a third of a partition's 1,000 WRU/s, and 16 is the plan's minimum.
- ``scheduler_instances`` = 1 (K) at ``scheduler_memory_mb`` = 512 (0.29 vCPU): with a 35 s
  ``lookahead_ms`` the 1,000 runs due at second :00 are claimed during the 35 s before it, 29 runs/s,
  which 512 MB claims with room (4.9 ms of CPU a claim, measured; punctual.capacity.fleet). The
  busiest instance owns ceil(shards / K) shards (instance i prefers the shards with shard % K == i).
- ``worker_max_concurrency`` = 176: the SQS event source's cap in standard mode (at most 1,000).
  Little's law with batches of 10 and ~1.46 s per invocation, x1.2 headroom.

Concurrency isolation (``lambda_concurrency_quota``, the account's concurrent-executions quota in
the region, which ``punctual capacity`` also reads): the API, the reaper and the scheduler fleet
get reserved concurrency, and the worker is reserved at ``worker_reserved_concurrency`` (its cap in
every mode; by default ``worker_max_concurrency`` in standard mode, or what the provisioned pollers
can drive, ``worker_max_pollers`` x 10), never more than the quota leaves after the others and
after the 100 executions AWS keeps unreserved. So workers can never take the slots that the API
and the reaper need exactly when the system is overloaded. Reservations fail to deploy in an
account whose quota is lower than the value given here: check it first (docs/deploy.md).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infra import constants

# ARNs a worker may deliver runs to: Lambda functions, Step Functions state machines, SQS queues,
# EventBridge buses. Wildcards are allowed in the resource part (an operator's choice).
_TARGET_ARN = re.compile(r"^arn:aws[a-z-]*:(lambda|states|sqs|events):[a-z0-9-*]*:(\d{12}|\*):\S+$")
# Our parameters are plain snake_case; CDK's own context keys contain ':', '@' or '-'.
_OWN_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
# A regional WAFv2 web ACL (API Gateway stages take only regional ones).
_WEB_ACL_ARN = r"^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:\d{12}:regional/webacl/[A-Za-z0-9_-]{1,128}/[0-9a-f-]{36}$"


class InfraConfigError(ValueError):
    """Invalid context parameters; the message names each parameter and what is wrong with it."""


class ContextSource(Protocol):
    """What the config reads from: a construct node (``app.node``)."""

    def get_all_context(self, defaults: dict[str, Any] | None = None) -> Any: ...


class InfraConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stack_name: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,63}$")] = constants.DEFAULT_STACK_NAME

    # -- scheduling (see the module docstring for the sizing) ----------------------------------
    shards: Annotated[int, Field(ge=1, le=4096, description="due-index shards (PUNCTUAL_SHARDS)")] = 16
    open_shards: Annotated[int, Field(ge=1, le=4096, description="open-runs index shards")] = 16
    # The runs table's sparse open index costs 2 write units per run (8 instead of 6); without it
    # the reaper sweeps the runs table, sweep_pages Scan pages (<= 1 MB) a minute (docs/capacity.md)
    open_index: bool = True
    # GET /stats' run figures: per-owner minute counters, 1 write unit per run (the 7th of 7, or the
    # 9th of 9); false: 6 units per run with open_index=false, and GET /stats marks them unavailable
    stats_counters: bool = True
    sweep_pages: Annotated[int, Field(ge=1, le=10_000, description="reaper Scan pages per pass")] = 8
    scheduler_instances: Annotated[int, Field(ge=1, le=100, description="K scheduler Lambdas per minute")] = 1
    # 1,769 MB = one vCPU; the plan sizes it from the measured CPU of a claim (punctual.capacity.fleet)
    scheduler_memory_mb: Annotated[int, Field(ge=128, le=10_240, description="1,769 MB = one vCPU")] = 512
    lookahead_ms: Annotated[int, Field(ge=0, le=60_000, description="claim runs this far ahead")] = 35_000
    # a claim takes a cron job's times up to its window boundary: its due-index move paid once per
    # window, not per run (punctual.scheduling.planning; 0: one time per claim); the plan's 600 s
    # takes 10 runs of a minute job per claim
    claim_window_s: Annotated[int, Field(ge=0, le=780, description="claim a job's times this far at once")] = 600
    retention_days: Annotated[int, Field(ge=1, le=3650, description="run history TTL")] = 30

    # -- workers --------------------------------------------------------------------------------
    worker_max_concurrency: Annotated[int, Field(ge=2, le=1000, description="SQS event source cap")] = 176
    # The worker's reserved concurrency, its cap in every mode (provisioned mode has no other);
    # None: worker_max_concurrency (standard mode) or worker_max_pollers x 10 (provisioned mode),
    # either at most what lambda_concurrency_quota leaves (see worker_reservation)
    worker_reserved_concurrency: Annotated[
        int | None, Field(ge=2, le=1_000_000, description="reserved for the worker Lambda")
    ] = None
    worker_batch_size: Annotated[int, Field(ge=1, le=10_000, description="runs per worker invocation")] = 10
    # SQS requires a batching window of >= 1 s above 10 records; the records of a batch run concurrently
    worker_batching_window_s: Annotated[int, Field(ge=0, le=300, description="wait to fill a batch")] = 0
    # Provisioned mode (set a minimum): pollers kept warm, +1,000 concurrency/min up to 20,000 (standard
    # mode starts at 5 concurrent batches and adds 300/min); MaximumConcurrency does not apply then.
    worker_min_pollers: Annotated[int | None, Field(ge=1, le=200, description="provisioned pollers")] = None
    worker_max_pollers: Annotated[int, Field(ge=1, le=2_000, description="provisioned pollers cap")] = 200
    worker_timeout_s: Annotated[int, Field(ge=30, le=900, description="longest run a Lambda worker executes")] = (
        constants.WORKER_FUNCTION.timeout_s
    )
    target_arns: tuple[str, ...] = ()  # AWS targets workers may call; empty: HTTP targets only
    fargate_workers: bool = False  # an ECS Fargate worker service for runs longer than 15 minutes
    fargate_worker_count: Annotated[int, Field(ge=1, le=100)] = 2  # tasks at least (and when idle)
    # tasks at most, scaling on queue depth (never below fargate_worker_count)
    fargate_worker_max_count: Annotated[int, Field(ge=1, le=100)] = 10
    fargate_worker_concurrency: Annotated[int, Field(ge=1, le=20_000)] = 5_000  # runs in flight per task
    # tasks raised to this at minute 59 of every hour (back to fargate_worker_count at minute 5): warm for the
    # top-of-hour burst; None: scale on queue depth only
    fargate_prewarm_count: Annotated[int | None, Field(ge=1, le=100)] = None
    # The Fargate worker tier (punctual capacity recommends it when it is the cheapest): the Lambda
    # worker's event source is deployed disabled, the Fargate service alone consumes the dispatch queue,
    # and runs are leased up to fargate_prelease_s ahead (PUNCTUAL_PRELEASE_S). Needs fargate_workers=true.
    lambda_workers: bool = True
    fargate_prelease_s: Annotated[int, Field(ge=0, le=10)] = 2
    # tasks of the long-run queue's service; None: fargate_worker_count
    fargate_long_run_count: Annotated[int | None, Field(ge=1, le=100)] = None

    # -- concurrency isolation (see the module docstring) ------------------------------------------
    lambda_concurrency_quota: Annotated[
        int, Field(ge=200, le=1_000_000, description="the account's Lambda concurrent executions quota")
    ] = 1_000
    api_reserved_concurrency: Annotated[
        int, Field(ge=1, le=10_000, description="reserved for the API: requests/s x seconds per request")
    ] = 100

    # -- data -----------------------------------------------------------------------------------
    deletion_protection: bool = True
    # Pre-warm the tables and indexes (billed once per increase): new on-demand tables and indexes
    # start at ~4,000 writes/s, and the design target writes 40,000/s into the due and open indexes.
    warm_throughput: bool = False
    # "table" or "table.index" -> write units per second to pre-warm; ``punctual capacity`` computes
    # them for a target load (JSON on the command line). Defaults: the design target's peak.
    warm_write_units: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        default_factory=lambda: dict(constants.DESIGN_WARM_WRITE_UNITS)
    )
    # The same for reads (a new table starts at ~12,000 reads/s; the design target reads 20,000 jobs/s)
    warm_read_units: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        default_factory=lambda: dict(constants.DESIGN_WARM_READ_UNITS)
    )
    # DynamoDB capacity mode: on-demand, or provisioned with auto scaling (its minimum at the given
    # units, its maximum 4x, 70 % target utilization) on burst credits (docs/capacity.md); every table
    # and index not listed in the units maps gets 1
    dynamodb_billing: Literal["on-demand", "provisioned"] = "on-demand"
    provisioned_write_units: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(default_factory=dict)
    provisioned_read_units: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(default_factory=dict)
    retain_data: bool = True  # RETAIN tables on stack deletion; False only for throwaway stacks
    log_retention_days: int = 30

    # -- API ------------------------------------------------------------------------------------
    api_throttle_rate: Annotated[int, Field(ge=1, le=10_000, description="stage requests/s")] = 1_000
    api_throttle_burst: Annotated[int, Field(ge=1, le=5_000, description="stage burst")] = 2_000
    api_usage_plan: bool = False  # require an API key per tenant as well, throttled by a usage plan
    api_tenant_throttle_rate: Annotated[int, Field(ge=1, le=10_000, description="per API key")] = 100
    api_tenant_throttle_burst: Annotated[int, Field(ge=1, le=5_000, description="per API key")] = 200
    # API Gateway's logging role is one setting per account and region: setting it here would
    # overwrite another stack's role. Set it once (docs/deploy.md) or ask this stack to with true.
    api_cloudwatch_role: bool = False
    # X-Ray: the API stage's sampling rule traces 1 request a second and this share of the rest
    xray_sampling_rate: Annotated[float, Field(ge=0, le=1)] = 0.01
    # An existing regional WAFv2 web ACL to associate with the API stage (docs/deploy.md, "WAF")
    web_acl_arn: Annotated[str | None, Field(pattern=_WEB_ACL_ARN)] = None

    # -- alarms ---------------------------------------------------------------------------------
    alarm_email: Annotated[str | None, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] = None
    alarm_lateness_p99_ms: Annotated[int, Field(ge=1)] = 2_000
    alarm_dlq_depth: Annotated[int, Field(ge=0)] = 0
    alarm_start_lateness_p99_ms: Annotated[int, Field(ge=1)] = 5_000  # scheduled_at -> leased by a worker
    alarm_lambda_error_rate_percent: Annotated[float, Field(gt=0, le=100)] = 1.0
    alarm_api_5xx_rate_percent: Annotated[float, Field(gt=0, le=100)] = 1.0
    alarm_lambda_throttles: Annotated[int, Field(ge=0)] = 0
    # A visible message older than this means nothing consumes the queue (retries hide their
    # message only up to their next attempt, so raise it above the longest retry backoff in use).
    alarm_oldest_message_s: Annotated[int, Field(ge=60, le=14 * 24 * 3600)] = 3_600
    alarm_visible_depth: Annotated[int, Field(ge=0)] = 1_000  # ready messages left for DEPTH_ALARM_MINUTES
    alarm_dynamodb_throttles: Annotated[int, Field(ge=0)] = 0
    # A due job unclaimed this long after its next_run_at: the scheduler fleet is behind or stopped.
    alarm_claim_lag_ms: Annotated[int, Field(ge=1_000)] = 30_000
    # A scheduler invocation fails (Errors counts it) after this many ticks in a row achieved nothing
    # (PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS; punctual.scheduling.health).
    scheduler_max_failed_ticks: Annotated[int, Field(ge=1, le=60)] = 30

    @field_validator("target_arns", mode="before")
    @classmethod
    def _split_arns(cls, value: Any) -> Any:
        """Accept a JSON list or a comma-separated string (what ``-c target_arns=...`` gives)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("target_arns")
    @classmethod
    def _check_arns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [arn for arn in value if not _TARGET_ARN.match(arn)]
        if bad:
            raise ValueError(f"not a Lambda, Step Functions, SQS or EventBridge ARN: {', '.join(bad)}")
        return value

    @field_validator(
        "warm_write_units", "warm_read_units", "provisioned_write_units", "provisioned_read_units", mode="before"
    )
    @classmethod
    def _parse_units(cls, value: Any) -> Any:
        """Accept a JSON object (what ``-c warm_write_units='{"jobs.due": 40000}'`` gives)."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("warm_write_units", "warm_read_units", "provisioned_write_units", "provisioned_read_units")
    @classmethod
    def _check_units(cls, value: dict[str, int]) -> dict[str, int]:
        known = constants.warmable_resources()
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"no such table or index: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _check_retention(cls, value: int) -> int:
        if value not in constants.LOG_RETENTION:
            raise ValueError(f"CloudWatch Logs accepts only {', '.join(map(str, constants.LOG_RETENTION))}")
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> InfraConfig:
        if self.scheduler_instances > self.shards:
            raise ValueError(
                f"scheduler_instances ({self.scheduler_instances}) > shards ({self.shards}): idle instances"
            )
        if not self.retain_data and self.deletion_protection:
            raise ValueError(
                "retain_data=false needs deletion_protection=false (the stack could not delete the tables)"
            )
        if self.api_throttle_burst < self.api_throttle_rate // 10:
            raise ValueError("api_throttle_burst below a tenth of api_throttle_rate rejects ordinary bursts")
        if self.worker_batch_size > 10 and self.worker_batching_window_s < 1:
            raise ValueError("worker_batch_size above 10 needs worker_batching_window_s >= 1 (an SQS rule)")
        if not self.lambda_workers and not self.fargate_workers:
            raise ValueError("lambda_workers=false needs fargate_workers=true (something must consume the runs)")
        if self.worker_min_pollers is not None and self.worker_min_pollers > self.worker_max_pollers:
            raise ValueError("worker_min_pollers must be <= worker_max_pollers")
        if self.worker_reserved_concurrency is not None and self.worker_reserved_concurrency > self._worker_room:
            raise ValueError(
                f"worker_reserved_concurrency ({self.worker_reserved_concurrency}) is more than "
                f"lambda_concurrency_quota ({self.lambda_concurrency_quota}) leaves for workers ({self._worker_room}) "
                f"after the API ({self.api_reserved_concurrency}), the reaper "
                f"({constants.REAPER_RESERVED_CONCURRENCY}), the scheduler ({self.scheduler_reserved_concurrency})"
                f" and the {constants.UNRESERVED_CONCURRENCY} AWS keeps unreserved: give the raised quota too"
                " (punctual capacity prints both)"
            )
        if self.worker_reservation < constants.MIN_WORKER_CONCURRENCY:
            raise ValueError(
                f"lambda_concurrency_quota ({self.lambda_concurrency_quota}) leaves "
                f"{self.worker_reservation} executions for workers after the API "
                f"({self.api_reserved_concurrency}), the reaper ({constants.REAPER_RESERVED_CONCURRENCY}), the "
                f"scheduler ({self.scheduler_reserved_concurrency}) and the {constants.UNRESERVED_CONCURRENCY} "
                "AWS keeps unreserved: raise the quota (and this value) or lower the reservations"
            )
        return self

    @property
    def prelease_s(self) -> int:
        """``PUNCTUAL_PRELEASE_S``: the Fargate tier pre-leases; Lambda workers never do (their wait is billed)."""
        return 0 if self.lambda_workers else self.fargate_prelease_s

    @property
    def long_run_tasks(self) -> int:
        return self.fargate_long_run_count or self.fargate_worker_count

    @property
    def fargate_max_tasks(self) -> int:
        return max(self.fargate_worker_count, self.fargate_worker_max_count)

    @property
    def scheduler_reserved_concurrency(self) -> int:
        return self.scheduler_instances * constants.SCHEDULER_CONCURRENCY_PER_INSTANCE

    @property
    def lambda_max_run_s(self) -> int:
        """The longest job ``timeout_s`` a Lambda worker can execute: its timeout minus the lease margin."""
        return self.worker_timeout_s - constants.LEASE_MARGIN_S

    @property
    def max_timeout_s(self) -> int:
        """The longest job ``timeout_s`` the deployment serves (the API refuses longer: 422)."""
        return constants.MAX_TIMEOUT_S if self.fargate_workers else self.lambda_max_run_s

    @property
    def provisioned_pollers(self) -> bool:
        """Whether the worker's event source runs in provisioned mode (``worker_min_pollers`` given)."""
        return self.worker_min_pollers is not None

    @property
    def worker_reservation(self) -> int:
        """The worker's reserved concurrency as deployed, which is also its cap in every mode.

        ``worker_reserved_concurrency`` when given (validated to fit the quota); otherwise what the
        event source can use (``worker_max_concurrency``, or in provisioned mode
        ``worker_max_pollers`` x 10 invocations) or what the account quota leaves after every
        other reservation, whichever is smaller.
        """
        if self.worker_reserved_concurrency is not None:
            return self.worker_reserved_concurrency
        if self.provisioned_pollers:
            wanted = self.worker_max_pollers * constants.INVOCATIONS_PER_POLLER
        else:
            wanted = self.worker_max_concurrency
        return min(wanted, self._worker_room)

    @property
    def worker_event_source_max_concurrency(self) -> int | None:
        """Standard mode's MaximumConcurrency (never above the reservation); None in provisioned mode."""
        return None if self.provisioned_pollers else min(self.worker_max_concurrency, self.worker_reservation)

    @property
    def _worker_room(self) -> int:
        """What the account quota leaves for workers after every other reservation."""
        return (
            self.lambda_concurrency_quota
            - constants.UNRESERVED_CONCURRENCY
            - self.api_reserved_concurrency
            - constants.REAPER_RESERVED_CONCURRENCY
            - constants.CALLBACK_AUTHORIZER_RESERVED_CONCURRENCY
            - self.scheduler_reserved_concurrency
        )

    @classmethod
    def from_context(cls, node: ContextSource) -> InfraConfig:
        """Read every field from the context of ``node`` (cdk.json, ``-c`` flags, ``App(context=)``).

        Raises :class:`InfraConfigError` for an invalid value, or for a context key that looks like
        one of ours (snake_case) but is not a parameter: a typo would otherwise be silently ignored.
        """
        context: dict[str, Any] = dict(node.get_all_context() or {})
        return cls.from_values({k: v for k, v in context.items() if _OWN_KEY.match(k) and v is not None})

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> InfraConfig:
        """Validate ``values`` (context parameter -> value). Raises :class:`InfraConfigError`."""
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise InfraConfigError(
                f"unknown context parameter(s): {', '.join(unknown)}; known: {', '.join(sorted(cls.model_fields))}"
            )
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise InfraConfigError(
                "invalid context parameters: " + "; ".join(_describe(e) for e in exc.errors())
            ) from exc


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "(combination)"
    given = error.get("input")
    shown = "" if isinstance(given, dict) else f" (got {given!r})"
    return f"{where}: {error['msg']}{shown}"
