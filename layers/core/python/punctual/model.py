"""The domain: what a user submits (JobSpec), what is stored (Job, Run), and their lifecycles.

Times inside the domain are integer epoch milliseconds (UTC); the API turns them into ISO 8601.
Bounds on every field are part of the contract and documented in ``docs/decisions.md``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from punctual import ids, numbers
from punctual.errors import InvalidInput

# -- bounds -------------------------------------------------------------------------------------

MAX_PAYLOAD_BYTES = 8 * 1024  # payload rides in the job item; every claim pays for its size
MAX_PAYLOAD_DEPTH = 32  # DynamoDB allows 32 levels of nesting in an item
MAX_TIMEOUT_S = 43_200  # SQS visibility maximum (12 h); Lambda workers cap at 15 min (docs)
MAX_RETRIES = 20
MAX_JITTER_S = 600  # a jittered dispatch must fit in one SQS delay (900 s) with the lookahead
MAX_BACKFILL = 100
MAX_HEADERS = 20
REDACTED = "[redacted]"  # what the API shows for a secret header's value
MAX_SECRET_CHARS = 4096  # a secret header's value as sent (stored sealed, which is longer: up to 8192)
# The whole spec as compact JSON. Every claim rewrites the job's item, and DynamoDB charges a write
# by the item's size (1 unit per KB): a job under 1 KB claims for 3 units (1 + 2 for the due index
# key), this bound caps the worst claim at 2 + 11 (the item adds its state to the spec) where 20
# headers of 4 KiB made it ~93 (docs/decisions.md, "issue 10: job size").
MAX_JOB_BYTES = 10 * 1024
MAX_ERROR_CHARS = 1_000  # one attempt's error text
MAX_EXCERPT_CHARS = 512  # one attempt's response excerpt
MAX_ATTEMPTS_KEPT = 25  # attempts[] on a run (max_retries + 1 plus takeovers), oldest dropped
MAX_UPSTREAMS = 10  # jobs one job may depend on (bounds a release's read and the release record)


# -- times --------------------------------------------------------------------------------------

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339_only(value: Any) -> Any:
    """A time given as text must be an RFC 3339 date-time (what the API documents as
    ``format: date-time``); pydantic alone also reads ``0.5`` or ``1800000000`` as epoch seconds."""
    if isinstance(value, str) and not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with a UTC offset, e.g. 2026-12-01T09:00:00+01:00")
    if isinstance(value, int | float):  # bool included
        raise ValueError("must be an RFC 3339 date-time string, not a number")
    return value


# A datetime from Python code, or RFC 3339 text from a request (never a number).
Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339_only)]
AwareRfc3339 = Annotated[AwareDatetime, BeforeValidator(_rfc3339_only)]


# -- enums --------------------------------------------------------------------------------------


class JobStatus(StrEnum):
    ACTIVE = "active"  # in the due index; the scheduler claims it when it is due
    PAUSED = "paused"  # out of the due index; resume recomputes the next time (catch-up policy)
    COMPLETED = "completed"  # a one-time job that has been dispatched; out of the due index
    DELETED = "deleted"  # soft-deleted; kept for history until retention, never scheduled again


JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.ACTIVE: frozenset({JobStatus.PAUSED, JobStatus.COMPLETED, JobStatus.DELETED}),
    JobStatus.PAUSED: frozenset({JobStatus.ACTIVE, JobStatus.DELETED}),
    # a completed one-time job becomes active again only when given a new run_at (PATCH)
    JobStatus.COMPLETED: frozenset({JobStatus.ACTIVE, JobStatus.DELETED}),
    JobStatus.DELETED: frozenset(),
}


class RunState(StrEnum):
    SCHEDULED = "scheduled"  # inserted by the scheduler, message on the queue, not yet leased
    RUNNING = "running"  # leased by a worker until lease_expires_at
    RETRYING = "retrying"  # an attempt failed; the message reappears after the backoff
    SUCCEEDED = "succeeded"  # terminal: the target accepted the run
    FAILED = "failed"  # terminal: failed with an error that retrying cannot fix
    DEAD = "dead"  # terminal: retries exhausted or poisoned (dead-letter queue); owner alerted
    CANCELLED = "cancelled"  # terminal: skipped or replaced (overlap policy), or its job was deleted

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED})
OPEN_STATES = frozenset({RunState.SCHEDULED, RunState.RUNNING, RunState.RETRYING})

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.SCHEDULED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.DEAD}),
    # running -> running is a takeover of an expired lease (attempt + 1)
    RunState.RUNNING: frozenset(
        {
            RunState.RUNNING,
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.RETRYING,
            RunState.DEAD,
            RunState.CANCELLED,
        }
    ),
    RunState.RETRYING: frozenset({RunState.RUNNING, RunState.DEAD, RunState.CANCELLED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.DEAD: frozenset(),
    RunState.CANCELLED: frozenset(),
}


class Overlap(StrEnum):
    # Decided at the new run's instant (its first lease), never earlier.
    ALLOW = "allow"  # start the new run even if the previous one is still open
    FORBID = "forbid"  # skip this time (recorded as a cancelled run) if an earlier run is still open then
    REPLACE = "replace"  # at the new run's instant, cancel the earlier runs still open, then start it


class Catchup(StrEnum):
    LATEST = "latest"  # one run for the most recent missed time, then continue on schedule
    SKIP = "skip"  # no run for missed times; continue with the next future time
    BACKFILL = "backfill"  # one run per missed time, at most max_backfill, then continue


class Trigger(StrEnum):
    SCHEDULE = "schedule"  # an on-time fire of the job's schedule or run_at
    CATCHUP = "catchup"  # a fire for a time that was missed (scheduler down, job resumed)
    MANUAL = "manual"  # POST /jobs/{id}/trigger
    DEPENDENCY = "dependency"  # released by runs of the jobs it depends on (see punctual.dependencies)


class DependencyWhen(StrEnum):
    """Which upstream runs release a dependent job (cancelled runs never ran: they never count)."""

    SUCCEEDED = "succeeded"  # the upstream run succeeded (the default)
    FINISHED = "finished"  # it ended after running: succeeded, failed or dead
    FAILED = "failed"  # it ended failed or dead: clean-up and alerting jobs


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the target answered with an error
    TIMEOUT = "timeout"  # the target did not answer within timeout_s
    LEASE_EXPIRED = "lease_expired"  # the worker vanished; another worker took the run over
    DEAD_LETTERED = "dead_lettered"  # the message exhausted its receives (poison)
    CANCELLED = "cancelled"


# -- targets ------------------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", str_strip_whitespace=True)


class HttpTarget(BaseModel):
    """POST (or another method) the payload to a URL, with ``Idempotency-Key: <run_id>``."""

    model_config = _STRICT
    type: Literal["http"] = "http"
    url: Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^https?://[^\s]+$")]
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict, max_length=MAX_HEADERS
    )
    # Write-only (credentials: Authorization, API keys). Stored sealed by the engine's keys
    # (Engine.keys: KMS on AWS, a local key file on the embedded engine), shown as REDACTED, opened
    # only by the worker for the request, never logged. In a PATCH, a value of REDACTED keeps the
    # stored secret of that name.
    secret_headers: dict[
        Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(min_length=1, max_length=8192)]
    ] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description=f"write-only headers (credentials), each value at most {MAX_SECRET_CHARS} characters; "
        f"shown as {REDACTED!r}; in a PATCH, {REDACTED!r} keeps the stored value",
    )

    def redacted(self) -> HttpTarget:
        """This target as the API shows it: every secret header's value replaced by REDACTED."""
        return self.model_copy(update={"secret_headers": dict.fromkeys(self.secret_headers, REDACTED)})

    @model_validator(mode="after")
    def _header_names_once(self) -> HttpTarget:
        both = {name.lower() for name in self.headers} & {name.lower() for name in self.secret_headers}
        if both:
            raise ValueError(f"a header is either plain or secret, not both: {', '.join(sorted(both))}")
        if len(self.headers) + len(self.secret_headers) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers, plain and secret together")
        return self

    @field_validator("url")
    @classmethod
    def _parsable(cls, value: str) -> str:
        try:
            host = urlsplit(value).hostname
        except ValueError as exc:  # e.g. an unclosed IPv6 literal: https://[::1
            raise ValueError(f"url is not a valid URL: {exc}") from exc
        if not host:
            raise ValueError("url must name a host")
        return value


_ARN = r"^arn:aws[a-zA-Z-]*:"
_LAMBDA_ARN = _ARN + r"lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$"
_STATE_MACHINE_ARN = _ARN + r"states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$"


class LambdaTarget(BaseModel):
    """Invoke a Lambda function (asynchronously by default) with the run as the event."""

    model_config = _STRICT
    type: Literal["lambda"] = "lambda"
    function_arn: Annotated[str, Field(pattern=_LAMBDA_ARN)]
    invocation: Literal["event", "request_response"] = "event"


class SqsTarget(BaseModel):
    """Send the run as a message to an SQS queue."""

    model_config = _STRICT
    type: Literal["sqs"] = "sqs"
    queue_url: Annotated[str, Field(pattern=r"^https://[^\s]+/\d{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$")]


class StepFunctionsTarget(BaseModel):
    """Start a state machine execution named by the run id (idempotent by construction)."""

    model_config = _STRICT
    type: Literal["stepfunctions"] = "stepfunctions"
    state_machine_arn: Annotated[str, Field(pattern=_STATE_MACHINE_ARN)]


class EventBridgeTarget(BaseModel):
    """Put the run as an event on an event bus."""

    model_config = _STRICT
    type: Literal["eventbridge"] = "eventbridge"
    event_bus: Annotated[str, Field(min_length=1, max_length=1600)] = "default"
    source: Annotated[str, Field(min_length=1, max_length=256)] = "punctual"
    detail_type: Annotated[str, Field(min_length=1, max_length=128)] = "punctual.run"


Target = Annotated[
    HttpTarget | LambdaTarget | SqsTarget | StepFunctionsTarget | EventBridgeTarget,
    Field(discriminator="type"),
]


class RetryPolicy(BaseModel):
    """Exponential backoff between attempts: backoff_s * 2**(attempt-1), capped, with jitter."""

    model_config = _STRICT
    backoff_s: Annotated[int, Field(strict=True, ge=1, le=3_600)] = 10
    max_backoff_s: Annotated[int, Field(strict=True, ge=1, le=43_200)] = 600

    @model_validator(mode="after")
    def _cap_not_below_base(self) -> RetryPolicy:
        if self.max_backoff_s < self.backoff_s:
            raise ValueError("retry.max_backoff_s must be >= retry.backoff_s")
        return self


# -- jobs ---------------------------------------------------------------------------------------

JobId = Annotated[str, Field(pattern=r"^job_[0-9a-f]{32}$")]


class DependsOn(BaseModel):
    """Run the job once each of ``jobs`` has a run that met ``when`` since the job's last such run."""

    model_config = _STRICT
    jobs: Annotated[list[JobId], Field(min_length=1, max_length=MAX_UPSTREAMS)]
    when: DependencyWhen = DependencyWhen.SUCCEEDED

    @field_validator("jobs")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("depends_on.jobs names a job twice")
        return value


JobName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._:/-]*$")]


class JobSpec(BaseModel):
    """What a user submits. Exactly one of ``schedule`` (cron, in ``timezone``), ``run_at`` and
    ``depends_on`` (after runs of other jobs of the same owner)."""

    model_config = _STRICT
    name: JobName
    schedule: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    run_at: Rfc3339 | None = None
    depends_on: DependsOn | None = None
    payload: Any = None
    target: Target
    timeout_s: Annotated[int, Field(strict=True, ge=1, le=MAX_TIMEOUT_S)] = 60
    max_retries: Annotated[int, Field(strict=True, ge=0, le=MAX_RETRIES)] = 3
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    jitter_s: Annotated[int, Field(strict=True, ge=0, le=MAX_JITTER_S)] = 0
    overlap: Overlap = Overlap.ALLOW
    catchup: Catchup = Catchup.LATEST
    max_backfill: Annotated[int, Field(strict=True, ge=1, le=MAX_BACKFILL)] = 10

    # The schedule module raises domain errors; as ValueErrors they become pydantic errors located
    # at their field, so one response names every bad field at once.
    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        from punctual.scheduling.cron import validate_cron

        try:
            return None if value is None else validate_cron(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        from punctual.scheduling.cron import validate_timezone

        try:
            return validate_timezone(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc

    @field_validator("run_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError("run_at must carry a UTC offset, e.g. 2026-12-01T09:00:00+01:00")
        try:
            in_range = value.astimezone(UTC).year < 9999
        except (OverflowError, ValueError):
            in_range = False
        if not in_range:
            raise ValueError("run_at must be before 9999-01-01T00:00:00Z")
        return value

    @field_validator("payload")
    @classmethod
    def _bounded_payload(cls, value: Any) -> Any:
        if value is None:  # most jobs: skip the walk and the size measure (every stored job is re-read)
            return None
        if _depth(value) > MAX_PAYLOAD_DEPTH:
            raise ValueError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
        bad = numbers.first_out_of_range(value, "payload")
        if bad is not None:
            path, text = bad
            raise ValueError(f"{path}: the number {text} is out of range (accepted: {numbers.RANGE})")
        try:
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
        except UnicodeEncodeError as exc:  # a lone surrogate (\ud800) is JSON text but not Unicode
            raise ValueError("payload contains a string that is not valid Unicode (a lone surrogate)") from exc
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
        return value

    @field_serializer("payload")
    def _exact_payload(self, value: Any) -> Any:
        # pydantic writes infinity and NaN as null without a word; a payload is written exactly or
        # not at all (the validator refuses them, this guards a model built without validation).
        bad = numbers.first_out_of_range(value, "payload")
        if bad is not None:
            raise ValueError(f"{bad[0]}: the number {bad[1]} cannot be written as JSON")
        return value

    @model_validator(mode="after")
    def _one_kind_of_schedule(self) -> JobSpec:
        given = [v for v in (self.schedule, self.run_at, self.depends_on) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'schedule' (cron), 'run_at' (one-time) and 'depends_on'")
        return self

    @property
    def is_recurring(self) -> bool:
        return self.schedule is not None

    def size_bytes(self) -> int:
        """The spec's size as stored: compact UTF-8 JSON of the fields that are set."""
        return len(self.model_dump_json(exclude_none=True).encode())


class Job(JobSpec):
    """A stored job: the spec plus identity, ownership and scheduling state."""

    model_config = ConfigDict(extra="forbid")
    id: str
    owner: str
    status: JobStatus = JobStatus.ACTIVE
    next_run_at: int | None = None  # epoch ms; set iff status is active
    last_run_at: int | None = None  # scheduled_at of the newest run the scheduler created
    due_shard: int = 0
    # Other jobs depend on this one (set when the first dependent is linked, never cleared): only
    # then does a finished run look for dependents to release, so other jobs pay nothing.
    has_dependents: bool = False
    created_at: int
    updated_at: int
    version: int = 1

    @property
    def spec(self) -> JobSpec:
        return JobSpec.model_validate(self.model_dump(include=set(JobSpec.model_fields)))


# -- runs ---------------------------------------------------------------------------------------


class Attempt(BaseModel):
    """One execution attempt: the run's log line."""

    model_config = ConfigDict(extra="forbid")
    number: int
    worker_id: str | None = None
    started_at: int | None = None
    finished_at: int | None = None
    outcome: AttemptOutcome
    status_code: int | None = None
    error: Annotated[str, Field(max_length=MAX_ERROR_CHARS)] | None = None
    response_excerpt: Annotated[str, Field(max_length=MAX_EXCERPT_CHARS)] | None = None


class Run(BaseModel):
    """One (job, scheduled_at) execution. Unique by construction; its id is derived from the key."""

    model_config = ConfigDict(extra="forbid")
    job_id: str
    scheduled_at: int
    owner: str
    state: RunState = RunState.SCHEDULED
    trigger: Trigger = Trigger.SCHEDULE
    attempt: int = 0  # number of the current (or last) attempt; the first lease makes it 1
    worker_id: str | None = None
    lease_expires_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    next_attempt_at: int | None = None
    deadline_at: int  # when the reaper should look if the run is still open (see port docs)
    created_at: int
    expires_at: int | None = None  # retention, epoch SECONDS (the DynamoDB TTL format)
    note: str | None = None  # why it was skipped/cancelled/dead, for history
    released_by: list[str] | None = None  # trigger dependency: the upstream run ids that released it
    attempts: list[Attempt] = Field(default_factory=list)

    @property
    def run_id(self) -> str:
        return ids.run_id_for(self.job_id, self.scheduled_at)

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


def _depth(value: Any, level: int = 0) -> int:
    """Nesting depth of a JSON value, stopping early once it is past the bound."""
    if level > MAX_PAYLOAD_DEPTH or not isinstance(value, dict | list):
        return level
    children = value.values() if isinstance(value, dict) else value
    return max((_depth(child, level + 1) for child in children), default=level + 1)


def truncate(text: str | None, limit: int) -> str | None:
    """Bound a log string, marking the cut so readers know it was cut."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."
