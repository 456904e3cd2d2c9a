"""Request and response models of the HTTP API: pydantic at the edge.

Requests reuse the domain's :class:`~punctual.model.JobSpec` (``POST /jobs`` keeps the seed's
field names). Responses are separate models so the stored shape (epoch ms, owner, index
attributes) never leaks: times are ISO 8601 UTC strings (``punctual.clock.iso``), and the owner
is implied by the caller.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from punctual.clock import from_datetime, iso
from punctual.dependencies.graph import Waiting
from punctual.model import (
    MAX_BACKFILL,
    MAX_JITTER_S,
    MAX_PAUSE_AFTER_FAILURES,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    WHOLE,
    Attempt,
    AttemptOutcome,
    Catchup,
    Completion,
    DeadlineSeconds,
    DependsOn,
    HttpTarget,
    Job,
    JobLimit,
    JobName,
    JobSpec,
    JobStatus,
    Notification,
    NotificationState,
    Notify,
    NotifyEvent,
    Overlap,
    RetryPolicy,
    Rfc3339,
    Run,
    RunState,
    Target,
    Trigger,
)
from punctual.model.callbacks import MAX_HEARTBEAT_TIMEOUT_S, MIN_HEARTBEAT_TIMEOUT_S
from punctual.model.limits import MAX_JOB_LIMITS, Priority
from punctual.model.timing import DstRepeated, DstSkipped, JobCalendar

IsoTime = Annotated[
    str,
    Field(
        description="ISO 8601 in UTC with milliseconds",
        examples=["2027-01-15T08:00:00.000Z"],
        json_schema_extra={"format": "date-time"},
    ),
]

JobCreate = JobSpec  # the body of POST /jobs is exactly the domain's spec
HeartbeatSeconds = Annotated[int, Field(strict=True, ge=MIN_HEARTBEAT_TIMEOUT_S, le=MAX_HEARTBEAT_TIMEOUT_S), WHOLE]

Shown = TypeVar("Shown", bound=BaseModel)


def shown(model: type[Shown], source: object, *, times: Collection[str] = (), **given: Any) -> Shown:
    """A response ``model`` of a domain object: each field is ``source``'s attribute of the same name,
    but for the ``given`` ones; the fields named in ``times`` (epoch ms, or None) as ISO 8601 text
    (``punctual.clock.iso``). Raises AttributeError for a field ``source`` lacks and none gives."""
    values = {name: getattr(source, name) for name in model.model_fields if name not in given}
    values.update({name: iso(values[name]) for name in times})
    return model(**values, **given)


def _required_never_null(schema: dict[str, Any]) -> None:
    """A merge patch's null resets a field to its default; ``name`` and ``target`` have none (a null
    is 422, field required), so the document does not offer null for them."""
    for name in ("name", "target"):
        prop = schema["properties"][name]
        kept = [option for option in prop.pop("anyOf") if option != {"type": "null"}]
        prop.pop("default", None)
        prop.update(kept[0])


class JobPatch(BaseModel):
    """A partial job spec (JSON merge patch): present fields replace, ``null`` resets to the default.

    ``target``, ``retry`` and ``depends_on`` are replaced whole. To turn a cron job into a one-time
    job send ``{"schedule": null, "run_at": "..."}`` (and the reverse; likewise for ``depends_on``).
    The merged job is validated as a whole.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, json_schema_extra=_required_never_null)
    name: JobName | None = None
    schedule: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    timezone: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    dst_repeated: DstRepeated | None = None
    dst_skipped: DstSkipped | None = None
    calendar: JobCalendar | None = None
    run_at: Rfc3339 | None = None
    depends_on: DependsOn | None = None
    payload: Any = None
    target: Target | None = None
    timeout_s: Annotated[int, Field(strict=True, ge=1, le=MAX_TIMEOUT_S), WHOLE] | None = None
    max_retries: Annotated[int, Field(strict=True, ge=0, le=MAX_RETRIES), WHOLE] | None = None
    retry: RetryPolicy | None = None
    jitter_s: Annotated[int, Field(strict=True, ge=0, le=MAX_JITTER_S), WHOLE] | None = None
    overlap: Overlap | None = None
    catchup: Catchup | None = None
    max_backfill: Annotated[int, Field(strict=True, ge=1, le=MAX_BACKFILL), WHOLE] | None = None
    pause_after_failures: Annotated[int, Field(strict=True, ge=1, le=MAX_PAUSE_AFTER_FAILURES), WHOLE] | None = None
    notify: Notify | None = None
    deadline_s: Annotated[DeadlineSeconds, WHOLE] | None = None
    priority: Priority | None = None
    limits: Annotated[list[JobLimit], Field(max_length=MAX_JOB_LIMITS)] | None = None
    completion: Completion | None = None
    heartbeat_timeout_s: HeartbeatSeconds | None = None

    def changes(self) -> dict[str, Any]:
        """The fields the client sent (explicit nulls included), as plain JSON-like values."""
        return self.model_dump(mode="json", include=self.model_fields_set)


class LimitView(BaseModel):
    """A keyed limit as a job shows it: a number not given is null."""

    key: str
    max_concurrency: int | None
    max_runs_per_minute: int | None


class UpstreamRun(BaseModel):
    """An upstream run already collected for a dependent's next release."""

    job_id: str
    run_id: str
    finished_at: IsoTime


class DependencyStatus(BaseModel):
    """What a dependent job waits for before its next run."""

    since: IsoTime = Field(description="its last dependency-triggered run (or, before the first, its creation)")
    waiting_for: list[str] = Field(description="upstream jobs without a qualifying run since then")
    satisfied: list[UpstreamRun] = Field(description="upstream runs already collected for the next run")

    @classmethod
    def from_waiting(cls, waiting: Waiting) -> DependencyStatus:
        return cls(
            since=_iso(waiting.since),
            waiting_for=waiting.waiting_for,
            satisfied=[
                UpstreamRun(job_id=s.upstream_id, run_id=s.run_id, finished_at=_iso(s.finished_at))
                for s in waiting.satisfied
            ],
        )


class JobResponse(BaseModel):
    """A job as the API shows it: its spec, its state, and when it runs next."""

    id: str
    name: str
    status: JobStatus
    schedule: str | None
    timezone: str
    dst_repeated: DstRepeated | None = Field(description="a repeated wall time (fall back); null: cron's rule")
    dst_skipped: DstSkipped | None = Field(description="a skipped wall time (spring forward); null: cron's rule")
    calendar: JobCalendar | None = Field(description="the owner's calendar its times follow (skip, or move)")
    run_at: IsoTime | None
    depends_on: DependsOn | None = Field(description="runs after these jobs' runs (instead of a schedule)")
    dependencies: DependencyStatus | None = Field(
        default=None, description="GET /jobs/{id} of a job with depends_on: what it is still waiting for"
    )
    next_run_at: IsoTime | None = Field(description="when it is due next; null unless active")
    last_run_at: IsoTime | None = Field(
        description="scheduled time of its newest run due by now that was not cancelled, from its schedule, a"
        " trigger, a dependency release or a replay (not whether it started: its runs say that); null before its"
        " first run, and while its runs were all cancelled (skipped by overlap or its calendar)"
    )
    payload: Any
    target: Target
    timeout_s: int
    max_retries: int
    retry: RetryPolicy
    jitter_s: int
    overlap: Overlap
    catchup: Catchup
    max_backfill: int
    pause_after_failures: int | None = Field(default=None, description="runs in a row that end failed or dead pause it")
    notify: Notify | None = Field(default=None, description="the webhook told of its run outcomes")
    deadline_s: int | None = Field(default=None, description="a run unfinished this long after it was due alerts")
    paused_after: str | None = Field(
        default=None, description="the run whose failure streak paused it (pause_after_failures); cleared by a resume"
    )
    completion: Completion = Field(description="response: the answer ends an attempt; callback: a 202 accepts it")
    heartbeat_timeout_s: int | None = Field(
        description="completion callback: an accepted attempt silent this long times out (null otherwise)"
    )
    priority: int = Field(description="0-9, higher first among this owner's runs competing for a limit")
    limits: list[LimitView] = Field(description="keyed ceilings its runs share (docs/api.md, Keyed limits)")
    created_at: IsoTime
    updated_at: IsoTime
    version: int

    @classmethod
    def from_job(
        cls, job: Job, waiting: Waiting | None = None, *, last_run_at: int | None, next_run_at: int | None
    ) -> JobResponse:
        """``last_run_at``: when it last ran (:func:`punctual.jobs.runs.last_run_times`); ``next_run_at``:
        when it is due next (:func:`punctual.jobs.runs.next_run_times`)."""
        return shown(
            cls,
            job,
            times=("created_at", "updated_at"),
            run_at=None if job.run_at is None else _iso(from_datetime(job.run_at)),
            dependencies=None if waiting is None else DependencyStatus.from_waiting(waiting),
            next_run_at=iso(next_run_at),
            last_run_at=iso(last_run_at),
            target=job.target.redacted() if isinstance(job.target, HttpTarget) else job.target,
            heartbeat_timeout_s=job.heartbeat_ms // 1000 if job.completion is Completion.CALLBACK else None,
            limits=[LimitView(**limit.model_dump()) for limit in job.limits],
        )


class AttemptResponse(BaseModel):
    """One execution attempt of a run: its log entry."""

    number: int
    worker_id: str | None
    started_at: IsoTime | None
    finished_at: IsoTime | None
    outcome: AttemptOutcome
    status_code: int | None
    error: str | None
    response_excerpt: str | None
    waited: str | None = Field(description="the owner's limit this attempt's start waited for, if any")

    @classmethod
    def from_attempt(cls, attempt: Attempt) -> AttemptResponse:
        return shown(cls, attempt, times=("started_at", "finished_at"))


class NotificationTryResponse(BaseModel):
    """One try to deliver a run's notification."""

    number: int
    at: IsoTime
    status_code: int | None
    error: str | None


class NotificationResponse(BaseModel):
    """What a run's outcome told its job's ``notify`` webhook (one signed POST, at least once)."""

    events: list[NotifyEvent]
    url: str
    state: NotificationState
    next_try_at: IsoTime | None = Field(description="when a pending notification is tried again")
    tries: list[NotificationTryResponse]

    @classmethod
    def from_notification(cls, notification: Notification) -> NotificationResponse:
        pending = notification.state is NotificationState.PENDING
        return cls(
            events=notification.events,
            url=notification.url,
            state=notification.state,
            next_try_at=iso(notification.next_at) if pending else None,
            tries=[
                NotificationTryResponse(number=t.number, at=_iso(t.at), status_code=t.status_code, error=t.error)
                for t in notification.tries
            ],
        )


class RunResponse(BaseModel):
    """One run of a job, with its attempts (the run's logs)."""

    run_id: str
    job_id: str
    scheduled_at: IsoTime
    state: RunState
    trigger: Trigger
    attempt: int = Field(description="number of the current (or last) attempt; 0 before the first")
    worker_id: str | None
    lease_expires_at: IsoTime | None
    started_at: IsoTime | None
    finished_at: IsoTime | None
    next_attempt_at: IsoTime | None = Field(description="when a retrying run is attempted again")
    note: str | None = Field(
        description="why the run waits (e.g. 'waiting: max_runs_per_minute 6': an owner's limit; cleared when it"
        " starts, and kept as its attempt's 'waited'), or why it was skipped, cancelled or dead"
    )
    released_by: list[str] | None = Field(
        default=None, description="trigger dependency: the upstream runs that released it"
    )
    replay_of: str | None = Field(default=None, description="trigger replay: the run it replays")
    heartbeat_deadline_at: IsoTime | None = Field(
        default=None,
        description="accepted (completion callback): the attempt times out unless a heartbeat or its completion"
        " comes by then",
    )
    heartbeat_at: IsoTime | None = Field(default=None, description="the last heartbeat its callback sent")
    progress: str | None = Field(default=None, description="the last heartbeat's progress note")
    attempts: list[AttemptResponse]
    notification: NotificationResponse | None = Field(
        default=None, description="GET /runs/{id}: what its job's notify webhook was told of it, with every try"
    )

    @classmethod
    def from_run(cls, run: Run, notification: Notification | None = None) -> RunResponse:
        return shown(
            cls,
            run,
            times=("scheduled_at", "lease_expires_at", "started_at", "finished_at", "next_attempt_at", "heartbeat_at"),
            heartbeat_deadline_at=iso(run.lease_expires_at) if run.state is RunState.ACCEPTED else None,
            attempts=[AttemptResponse.from_attempt(a) for a in run.attempts],
            notification=None if notification is None else NotificationResponse.from_notification(notification),
        )


class JobPage(BaseModel):
    items: list[JobResponse]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last page")


class RunPage(BaseModel):
    items: list[RunResponse]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last page")


class ErrorDetail(BaseModel):
    field: str | None = Field(description="the field at fault, e.g. 'schedule', 'target.url', 'limit'")
    message: str


class ErrorBody(BaseModel):
    """Every error the API returns has this shape."""

    code: str = Field(description="machine-readable, e.g. invalid_schedule, job_not_found", examples=["invalid_input"])
    message: str = Field(description="what is wrong, in words a user can act on")
    details: list[ErrorDetail] = Field(default_factory=list)


def _iso(ms: int) -> str:
    value = iso(ms)
    assert value is not None
    return value
