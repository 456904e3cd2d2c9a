"""Configuration: one pydantic model, validated once at the edge (CLI start, Lambda cold start).

Values come from ``PUNCTUAL_*`` environment variables (and CLI flags, which override them).
AWS endpoints are not configured here: boto3 reads the standard ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>`` settings, so the same code talks to moto, LocalStack or AWS.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from punctual.errors import ConfigError

DEFAULT_RETENTION_DAYS = 30
DEFAULT_RETENTION_S = DEFAULT_RETENTION_DAYS * 86_400


class EngineKind(StrEnum):
    EMBEDDED = "embedded"  # one SQLite file: punctual dev, one machine
    AWS = "aws"  # DynamoDB + SQS: what cdk deploy runs


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: EngineKind = EngineKind.EMBEDDED
    data_dir: str = ".punctual"
    shards: Annotated[int, Field(ge=1, le=4096)] = 16
    open_shards: Annotated[int, Field(ge=1, le=4096)] = 16
    # the runs table's sparse open index (2 write units per run); without it the reaper sweeps
    open_index: bool = True
    sweep_pages: Annotated[int, Field(ge=1, le=10_000)] = 8  # runs-table Scan pages per reaper pass without it
    # aws engine: the per-owner minute counters behind GET /stats' run figures (1 write unit per
    # run); without them GET /stats answers the queue figures and marks the run figures unavailable.
    # The embedded engine derives its figures from an index and ignores this.
    stats_counters: bool = True
    # aws engine: physical names (the CDK app sets them; local bootstrap derives them from prefix)
    name_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = "punctual"
    jobs_table: str | None = None
    runs_table: str | None = None
    leases_table: str | None = None
    dispatch_queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    # the dispatch queue's visibility timeout as deployed (the CDK app raises it to 6x the worker's
    # timeout): how long a message a Lambda worker received stays hidden unless the worker changes it
    dispatch_visibility_s: Annotated[int | None, Field(ge=0, le=43_200)] = None
    # Long runs (aws, with Fargate workers): runs of jobs whose timeout_s exceeds long_run_after_s
    # are dispatched to the long-run queue, which only the long-running workers consume.
    long_run_queue_url: str | None = None
    long_run_after_s: Annotated[int | None, Field(ge=1, le=43_200)] = None
    # The longest job timeout_s this deployment can execute: the API refuses longer ones (422).
    max_timeout_s: Annotated[int, Field(ge=1, le=43_200)] = 43_200
    region: str = "us-east-1"
    # aws engine: DynamoDB requests one at a time per process. Only for moto, whose conditional
    # writes are not atomic under concurrent requests (a real table's are); never in production.
    aws_serialize: bool = False
    alert_topic_arn: str | None = None  # SNS topic for owner alerts (aws); locally alerts are logged
    # aws engine: KMS keys (the CDK app sets them; local bootstrap creates them): secrets at rest
    # (symmetric) and request-signing secrets (HMAC_256)
    secrets_key_id: str | None = None
    signing_key_id: str | None = None
    # where HTTP targets may point besides public addresses (the SSRF guard, punctual.execution.targets.policy)
    target_allow_loopback: bool = False  # punctual dev turns this on: a target on the same laptop
    target_allow_private: bool = False
    # history
    retention_days: Annotated[int, Field(ge=1, le=3650)] = DEFAULT_RETENTION_DAYS
    # scheduling
    # 5 s: a 20,000-run burst is claimed, enqueued and pre-leased before its second on 2 cores (the
    # CDK app's default too, from the capacity plan); docs/decisions/0094
    lookahead_ms: Annotated[int, Field(ge=0, le=60_000)] = 5_000
    # Claim an on-time cron job's times up to a window boundary at once (punctual.scheduling.planning):
    # its head and due-index key move once per window, not once per run (docs/capacity.md). 0: one
    # time per claim. At most 780 s, so that lookahead + window + pre-lease fit one SQS delay (900 s).
    claim_window_s: Annotated[int, Field(ge=0, le=780)] = 0
    # A scheduler loop gives up after this many ticks in a row in which nothing succeeded: the Lambda
    # invocation fails (its Errors metric counts it), `punctual scheduler` exits 1. 0: never give up.
    # (punctual.scheduling.health)
    scheduler_max_failed_ticks: Annotated[int, Field(ge=0, le=86_400)] = 30
    lease_margin_s: Annotated[int, Field(ge=1, le=600)] = 30
    # Pre-leasing: messages turn visible up to prelease_s + 1 s before their instant and a
    # long-running worker leases them on arrival, so that only the target call is left at the
    # instant (docs/decisions/0093, 0123). 0: every run is leased at its instant.
    prelease_s: Annotated[int, Field(ge=0, le=10)] = 2
    # tenants: the limits of owners without a tenant record (punctual.tenancy); None: unlimited
    tenant_max_jobs: Annotated[int | None, Field(ge=1, le=100_000_000)] = None
    tenant_max_runs_per_minute: Annotated[int | None, Field(ge=1, le=10_000_000)] = None
    tenant_max_concurrency: Annotated[int | None, Field(ge=1, le=1_000_000)] = None
    tenant_api_requests_per_second: Annotated[int | None, Field(ge=1, le=1_000_000)] = None
    # principals (owners) allowed to call the admin routes (/admin/...), comma-separated
    admin_principals: str = ""
    # The API's base URL (the stage URL on AWS, the dev API's locally): each attempt of a completion
    # callback job carries <it>/runs/<run id> as X-Punctual-Callback-Url (punctual.runs.tokens)
    callback_base_url: Annotated[str | None, Field(pattern=r"^https?://[^\s]+$", max_length=2048)] = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``PUNCTUAL_<FIELD>`` variables, then ``overrides`` (non-None only).

        Raises :class:`ConfigError` naming the variable and what is wrong with it.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = environ.get(f"PUNCTUAL_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"PUNCTUAL_{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
            )
            raise ConfigError(f"invalid configuration: {problems}") from exc

    @property
    def retention_s(self) -> int:
        """How long run history and deleted jobs are kept, in seconds."""
        return self.retention_days * 86_400

    @property
    def admins(self) -> frozenset[str]:
        """The owners the admin routes answer (``PUNCTUAL_ADMIN_PRINCIPALS``)."""
        return frozenset(p.strip() for p in self.admin_principals.split(",") if p.strip())

    def table_name(self, logical: str) -> str:
        explicit = {"jobs": self.jobs_table, "runs": self.runs_table, "leases": self.leases_table}.get(logical)
        return explicit or f"{self.name_prefix}-{logical}"
