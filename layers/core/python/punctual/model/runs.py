"""Runs: one (job, scheduled_at) execution and the attempts it logs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from punctual import ids
from punctual.model.bounds import MAX_ERROR_CHARS, MAX_EXCERPT_CHARS
from punctual.model.callbacks import MAX_PROGRESS_CHARS
from punctual.model.states import OPEN_STATES, AttemptOutcome, RunState, Trigger


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
    # the tenant limit this attempt's start waited for (the run's note while it waited), if any
    waited: Annotated[str, Field(max_length=MAX_ERROR_CHARS)] | None = None


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
    # why it waits (a tenant limit: cleared by its lease, kept as the attempt's ``waited``), or why it
    # was skipped, cancelled or ended dead, for history
    note: str | None = None
    released_by: list[str] | None = None  # trigger dependency: the upstream run ids that released it
    # trigger replay: the run it replays (POST /runs/replay); left out of the stored run while unset
    replay_of: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # completion callback (punctual.model.callbacks): the last heartbeat of the accepted attempt, and
    # its progress note; left out of the stored run while unset (every run of a response job)
    heartbeat_at: int | None = Field(default=None, exclude_if=lambda value: value is None)
    progress: Annotated[str, Field(max_length=MAX_PROGRESS_CHARS)] | None = Field(
        default=None, exclude_if=lambda value: value is None
    )
    attempts: list[Attempt] = Field(default_factory=list)

    @property
    def run_id(self) -> str:
        return ids.run_id_for(self.job_id, self.scheduled_at)

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


def copy_run(run: Run, update: dict[str, Any]) -> Run:
    """``run.model_copy(update=update)`` (no validation either), without the ``copy`` module's
    generic dispatch that ``model_copy`` spends about half its time in: the worker copies every
    run it finishes. The same steps as pydantic's ``BaseModel.__copy__`` for a model that has no
    extra fields (``extra="forbid"``) and no private attributes; tests/unit/test_embedded_batches.py holds
    it to ``model_copy``."""
    copied = Run.__new__(Run)
    object.__setattr__(copied, "__dict__", {**run.__dict__, **update})
    object.__setattr__(copied, "__pydantic_fields_set__", run.__pydantic_fields_set__ | update.keys())
    object.__setattr__(copied, "__pydantic_extra__", None)
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied
