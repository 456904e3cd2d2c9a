"""Jobs: what a user submits (``JobSpec``, validated field by field) and what is stored (``Job``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from punctual import numbers
from punctual.clock import from_datetime
from punctual.errors import InvalidInput
from punctual.model.bounds import (
    MAX_BACKFILL,
    MAX_JITTER_S,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    MAX_UPSTREAMS,
    STRICT,
)
from punctual.model.callbacks import (
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    MAX_HEARTBEAT_TIMEOUT_S,
    MIN_HEARTBEAT_TIMEOUT_S,
    Completion,
)
from punctual.model.cron_syntax import validate_cron
from punctual.model.limits import DEFAULT_PRIORITY, LIMITS_EXAMPLE, MAX_JOB_LIMITS, JobLimit, Priority
from punctual.model.outcomes import MAX_DEADLINE_S, MAX_PAUSE_AFTER_FAILURES, MIN_DEADLINE_S, Notify
from punctual.model.states import Catchup, DependencyWhen, JobStatus, Overlap
from punctual.model.stored import is_stored
from punctual.model.targets import HttpTarget, Target
from punctual.model.times import Rfc3339, TimezoneName
from punctual.model.timing import DstPolicy, DstRepeated, DstSkipped, JobCalendar, timing_text


def _whole(value: Any, info: ValidationInfo) -> Any:
    """A float with no fraction as the integer it is: JSON has one kind of number, and the document's
    ``integer`` (JSON Schema) accepts ``53.0``; ``53.5`` and ``"53"`` are still refused (strict)."""
    if not is_stored(info) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WHOLE = BeforeValidator(_whole)  # on every integer field of a submitted model, with Field(strict=True)


class RetryPolicy(BaseModel):
    """Exponential backoff between attempts: backoff_s * 2**(attempt-1), capped, with jitter."""

    model_config = STRICT
    backoff_s: Annotated[int, Field(strict=True, ge=1, le=3_600), WHOLE] = 10
    max_backoff_s: Annotated[int, Field(strict=True, ge=1, le=43_200), WHOLE] = 600

    @model_validator(mode="after")
    def _cap_not_below_base(self, info: ValidationInfo) -> RetryPolicy:
        if not is_stored(info) and self.max_backoff_s < self.backoff_s:
            raise ValueError("retry.max_backoff_s must be >= retry.backoff_s")
        return self


JobId = Annotated[str, Field(pattern=r"^job_[0-9a-f]{32}$")]


class DependsOn(BaseModel):
    """Run the job once each of ``jobs`` has a run that met ``when`` since the job's last such run."""

    model_config = STRICT
    jobs: Annotated[list[JobId], Field(min_length=1, max_length=MAX_UPSTREAMS)]
    when: DependencyWhen = DependencyWhen.SUCCEEDED

    @field_validator("jobs")
    @classmethod
    def _distinct(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if not is_stored(info) and len(set(value)) != len(value):
            raise ValueError("depends_on.jobs names a job twice")
        return value


JobName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._:/-]*$")]


class JobSpec(BaseModel):
    """What a user submits. Exactly one of ``schedule`` (cron, in ``timezone``), ``run_at`` and
    ``depends_on`` (after runs of other jobs of the same owner)."""

    model_config = STRICT
    name: JobName
    schedule: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    timezone: TimezoneName = "UTC"
    # a cron schedule's wall times that clocks repeat or skip (punctual.model.timing); None: cron's rule
    dst_repeated: DstRepeated | None = None
    dst_skipped: DstSkipped | None = None
    # the owner's calendar its times are checked against (skip, or move to a business day)
    calendar: JobCalendar | None = None
    run_at: Rfc3339 | None = None
    depends_on: DependsOn | None = None
    payload: Any = None
    target: Target
    timeout_s: Annotated[int, Field(strict=True, ge=1, le=MAX_TIMEOUT_S), WHOLE] = 60
    max_retries: Annotated[int, Field(strict=True, ge=0, le=MAX_RETRIES), WHOLE] = 3
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    jitter_s: Annotated[int, Field(strict=True, ge=0, le=MAX_JITTER_S), WHOLE] = 0
    overlap: Overlap = Overlap.ALLOW
    catchup: Catchup = Catchup.LATEST
    max_backfill: Annotated[int, Field(strict=True, ge=1, le=MAX_BACKFILL), WHOLE] = 10
    # Run outcomes (punctual.runs.outcomes), left out of the stored and shown job while unset
    pause_after_failures: Annotated[int, Field(strict=True, ge=1, le=MAX_PAUSE_AFTER_FAILURES), WHOLE] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="pause the job when this many of its runs in a row end failed or dead (a resume counts anew)",
    )
    notify: Notify | None = Field(default=None, exclude_if=lambda value: value is None)
    deadline_s: Annotated[int, Field(strict=True, ge=MIN_DEADLINE_S, le=MAX_DEADLINE_S), WHOLE] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        examples=[900],
        description="alert the owner when a run has not finished this long after its scheduled time,"
        " or a cron instant produced no run by then (punctual.reaping.deadlines)",
    )
    # async completion (punctual.model.callbacks), left out of the stored and shown job at the default
    completion: Completion = Field(
        default=Completion.RESPONSE,
        exclude_if=lambda value: value is Completion.RESPONSE,
        description="response: the target's answer ends the attempt; callback (http targets): a 202 accepts"
        " the work, and the target reports its end to X-Punctual-Callback-Url",
    )
    heartbeat_timeout_s: (
        Annotated[int, Field(strict=True, ge=MIN_HEARTBEAT_TIMEOUT_S, le=MAX_HEARTBEAT_TIMEOUT_S), WHOLE] | None
    ) = Field(
        default=None,
        exclude_if=lambda value: value is None,
        examples=[300],
        description=f"completion callback: an accepted attempt with no heartbeat or completion this long times out"
        f" (null: {DEFAULT_HEARTBEAT_TIMEOUT_S})",
    )
    priority: Priority = DEFAULT_PRIORITY  # punctual.model.limits
    limits: Annotated[list[JobLimit], Field(max_length=MAX_JOB_LIMITS, examples=[LIMITS_EXAMPLE])] = Field(
        default_factory=list
    )

    # The cron and time-zone checks raise domain errors; as ValueErrors they become pydantic errors located
    # at their field, so one response names every bad field at once.
    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str | None, info: ValidationInfo) -> str | None:
        if is_stored(info):
            return value
        try:
            return None if value is None else validate_cron(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc

    @field_validator("dst_repeated", "dst_skipped")
    @classmethod
    def _cron_only(cls, value: Any, info: ValidationInfo) -> Any:
        # ``schedule`` is validated first (declared first); absent from data only when it was refused
        if value is not None and not is_stored(info) and "schedule" in info.data and info.data["schedule"] is None:
            raise ValueError(f"applies to a cron schedule only; send {info.field_name}: null with run_at or depends_on")
        return value

    @field_validator("depends_on")
    @classmethod
    def _no_calendar(cls, value: DependsOn | None, info: ValidationInfo) -> DependsOn | None:
        if value is not None and not is_stored(info) and info.data.get("calendar") is not None:
            raise ValueError("a job released by other jobs has no times of its own for a calendar; send calendar: null")
        return value

    @field_validator("completion")
    @classmethod
    def _callback_over_http(cls, value: Completion, info: ValidationInfo) -> Completion:
        if is_stored(info):
            return value
        # ``target`` is validated first (declared first); absent from data only when it was refused
        target = info.data.get("target")
        if value is Completion.CALLBACK and not isinstance(target, HttpTarget | None):
            raise ValueError("completion callback needs an http target (its callback URL travels in a header)")
        return value

    @field_validator("heartbeat_timeout_s")
    @classmethod
    def _callback_only(cls, value: int | None, info: ValidationInfo) -> int | None:
        if is_stored(info):
            return value
        callback = info.data.get("completion", Completion.CALLBACK) is Completion.CALLBACK
        if value is not None and not callback:
            raise ValueError(
                "applies to completion: callback only; send heartbeat_timeout_s: null or completion: callback"
            )
        return value

    @field_validator("run_at")
    @classmethod
    def _aware(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is None or is_stored(info):
            return value
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
    def _bounded_payload(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None or is_stored(info):  # checked when written: every stored job is re-read
            return value
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
    def _one_kind_of_schedule(self, info: ValidationInfo) -> JobSpec:
        if is_stored(info):
            return self
        given = [v for v in (self.schedule, self.run_at, self.depends_on) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'schedule' (cron), 'run_at' (one-time) and 'depends_on'")
        return self

    @property
    def dst(self) -> DstPolicy:
        """The job's DST policy (fields left None keep cron's rule)."""
        return DstPolicy(self.dst_repeated, self.dst_skipped)

    def timing_text(self) -> str | None:
        """The stored form of its timing rules, which the due index carries (``model.timing``)."""
        once = None if self.run_at is None else from_datetime(self.run_at)
        return timing_text(self.dst, self.calendar, once, self.priority)

    @property
    def heartbeat_ms(self) -> int:
        """How long an accepted attempt may go without a heartbeat (``heartbeat_timeout_s`` or its default)."""
        seconds = DEFAULT_HEARTBEAT_TIMEOUT_S if self.heartbeat_timeout_s is None else self.heartbeat_timeout_s
        return seconds * 1000

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
    # When the user last changed the schedule, time zone, DST policy or run_at (None: never since its creation).
    # A run the scheduler claimed before such a change is checked at its instant against the job as
    # it is then (punctual.scheduling.instants): an instant the new schedule lacks is not called.
    rescheduled_at: int | None = None
    # pause_after_failures: the run whose failure streak paused the job (cleared by a resume), and
    # the last resume (runs that ended before it do not count towards a streak)
    paused_after: str | None = Field(default=None, exclude_if=lambda value: value is None)
    resumed_at: int | None = Field(default=None, exclude_if=lambda value: value is None)
    created_at: int
    updated_at: int
    version: int = 1

    @property
    def spec(self) -> JobSpec:
        return JobSpec.model_validate(self.model_dump(include=set(JobSpec.model_fields)))


def _depth(value: Any, level: int = 0) -> int:
    """Nesting depth of a JSON value, stopping early once it is past the bound."""
    if level > MAX_PAYLOAD_DEPTH or not isinstance(value, dict | list):
        return level
    children = value.values() if isinstance(value, dict) else value
    return max((_depth(child, level + 1) for child in children), default=level + 1)
