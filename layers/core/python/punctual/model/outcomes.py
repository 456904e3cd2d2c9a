"""Run outcomes a job's owner hears about: the ``notify`` webhook (:class:`Notify`, its events), the
notification a run's outcome leaves (:class:`Notification`, with its delivery log), and the kinds of
owner alert (:class:`AlertKind`). The rules that decide them are ``punctual.runs.outcomes``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from punctual import ids
from punctual.model.bounds import MAX_ERROR_CHARS, STRICT
from punctual.model.stored import is_stored

MAX_PAUSE_AFTER_FAILURES = 100  # bounds the runs a failed run's settlement reads to count the streak
# deadline_s: a run not finished this long after its scheduled time alerts its owner. At least a
# reaper interval (the reaper looks each minute), at most a week (a run's history outlives it).
MIN_DEADLINE_S = 60
MAX_DEADLINE_S = 7 * 86_400
DeadlineSeconds = Annotated[int, Field(strict=True, ge=MIN_DEADLINE_S, le=MAX_DEADLINE_S)]


class NotifyEvent(StrEnum):
    """Which run outcomes a job's ``notify`` webhook hears about."""

    FAILURE = "failure"  # a run ended failed or dead
    RECOVERY = "recovery"  # a run succeeded, and the job's previous run that ended had failed (or died)
    SUCCESS = "success"  # a run succeeded


class Notify(BaseModel):
    """A webhook told of the job's run outcomes: one signed POST per run that ended with one of ``on``
    (a recovery is a success too: one notification names both), at least once, retried."""

    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={"examples": [{"on": ["failure", "recovery"], "url": "https://example.com/punctual-hook"}]},
    )
    on: Annotated[list[NotifyEvent], Field(min_length=1, max_length=3)] = Field(
        description="the outcomes to hear about; a value given twice counts once"
    )
    url: Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^https?://[^\s]+$")] = Field(
        description="where each notification is POSTed, signed as target calls are (Punctual-Signature)"
    )

    @field_validator("on")
    @classmethod
    def _once_each(cls, value: list[NotifyEvent], info: ValidationInfo) -> list[NotifyEvent]:
        return value if is_stored(info) else list(dict.fromkeys(value))


class NotificationState(StrEnum):
    PENDING = "pending"  # not delivered yet: the reaper tries it at next_at
    DELIVERED = "delivered"  # the webhook answered 2xx
    FAILED = "failed"  # given up: an answer retrying cannot fix, or every try failed


class NotificationTry(BaseModel):
    """One delivery attempt of a notification: its log line."""

    model_config = ConfigDict(extra="forbid")
    number: int
    at: int  # epoch ms
    status_code: int | None = None
    error: Annotated[str, Field(max_length=MAX_ERROR_CHARS)] | None = None


class Notification(BaseModel):
    """The notification a run's outcome owes its job's ``notify`` webhook: one per run, keyed like the
    run (job_id, scheduled_at). ``body`` is the JSON document sent, fixed when the run settled, so
    every try sends the same bytes (a receiver deduplicates on the run id)."""

    model_config = ConfigDict(extra="forbid")
    owner: str
    job_id: str
    scheduled_at: int
    events: list[NotifyEvent]
    url: str
    body: str
    created_at: int
    next_at: int  # when it is tried next (pending), or when it settled
    expires_at: int | None = None  # retention, epoch SECONDS: the run's
    state: NotificationState = NotificationState.PENDING
    tries: list[NotificationTry] = Field(default_factory=list)

    @property
    def run_id(self) -> str:
        return ids.run_id_for(self.job_id, self.scheduled_at)


class AlertKind(StrEnum):
    """What an owner alert is about."""

    RUN = "run"  # a run ended dead (or failed)
    JOB_PAUSED = "job_paused"  # a job was paused after pause_after_failures runs in a row ended failed or dead
    DEADLINE_MISSED = "deadline_missed"  # a run had not finished by scheduled_at + its job's deadline_s
    RUN_MISSED = "run_missed"  # a cron job's instant produced no run within its deadline_s
