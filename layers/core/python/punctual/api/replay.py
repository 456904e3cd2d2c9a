"""``POST /runs/replay``: new runs for the caller's earlier runs, by time range and state
(``punctual.jobs.replay``), or with ``dry_run`` the list of what would be replayed. With an
``Idempotency-Key``, a repeat of the request starts nothing again (``punctual.jobs.replay_keys``).

A Powertools :class:`Router`; ``punctual.api.app`` includes it and shares its per-request context.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header
from pydantic import BaseModel, ConfigDict, Field

from punctual.api import openapi
from punctual.api.caller import caller
from punctual.api.schemas import IsoTime
from punctual.clock import from_datetime, iso
from punctual.jobs import checks, replay, replay_keys
from punctual.model import AwareRfc3339, JobId, RunState

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated

# The states of runs that ended: an open run is still on its way, so it cannot be replayed.
Replayable = Literal["succeeded", "failed", "dead", "cancelled"]

EXAMPLE: dict[str, Any] = {
    "from": "2027-01-15T00:00:00Z",
    "to": "2027-01-16T00:00:00Z",
    "states": ["failed", "dead"],
    "dry_run": True,
}


def _failures() -> list[Replayable]:
    return ["failed", "dead"]


class ReplayRequest(BaseModel):
    """Which of the caller's runs to replay: scheduled in [from, to), ended in one of ``states``."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, json_schema_extra={"examples": [EXAMPLE]})
    job_ids: Annotated[list[JobId], Field(min_length=1, max_length=replay.MAX_REPLAY_JOBS)] | None = Field(
        default=None, description="only these jobs' runs (absent: every job of the caller that is not deleted)"
    )
    since: AwareRfc3339 = Field(alias="from", description="scheduled at or after (RFC 3339 with offset)")
    to: AwareRfc3339 = Field(description="scheduled before (RFC 3339 with offset); after 'from'")
    states: Annotated[list[Replayable], Field(min_length=1, max_length=4)] = Field(
        default_factory=_failures, description="the states the runs ended in"
    )
    dry_run: bool = Field(default=False, strict=True, description="only list the runs a replay would start again")


class ReplayedRun(BaseModel):
    """A run that a replay starts again (a dry run lists them)."""

    run_id: str
    job_id: str
    scheduled_at: IsoTime
    state: RunState


class ReplayResponse(BaseModel):
    """What a replay did: how many runs it started (trigger replay, each with ``replay_of``); or, as
    a dry run, the runs it would start again, oldest scheduled first."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"dry_run": False, "count": 2, "runs": None}]},
    )
    dry_run: bool
    count: int = Field(description=f"runs replayed (a dry run: that would be), at most {replay.MAX_REPLAY}")
    runs: list[ReplayedRun] | None = Field(description="a dry run: the runs a replay would start again; else null")


@router.post(
    "/runs/replay",
    operation_id="replayRuns",
    tags=["runs"],
    summary=f"Start new runs for earlier ones, by time range and state (at most {replay.MAX_REPLAY} per call)",
    responses=openapi.responses(
        {
            202: (
                "Replayed: the new runs are queued (trigger replay); or, with an Idempotency-Key used before,"
                " what that request did (header Idempotent-Replayed: true)",
                ReplayResponse,
            ),
            200: ("A dry run: what a replay would start again", ReplayResponse),
        },
        openapi.REPLAY_ERRORS,
    ),
)
def replay_runs(
    body: ReplayRequest,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="retry-safe replay: a repeat of the request with this key within 24 hours starts"
            " nothing again and answers the first one's count (printable ASCII, no spaces; ignored by a dry run)",
            min_length=1,
            max_length=checks.MAX_IDEMPOTENCY_KEY,
            pattern=checks.IDEMPOTENCY_KEY_PATTERN,
        ),
    ] = None,
) -> Response[Any]:
    services, owner = caller(router.context)
    query = replay.ReplayQuery(
        since=from_datetime(body.since),
        until=from_datetime(body.to),
        states=frozenset(RunState(state) for state in body.states),
        job_ids=None if body.job_ids is None else tuple(body.job_ids),
    )
    options = replay.ReplayOptions(services.settings.retention_s, services.settings.long_run_after_s)
    if idempotency_key is not None and not body.dry_run:
        done = replay_keys.replay_with_key(
            services.store, services.queue, owner, query, idempotency_key, clock=services.clock, options=options
        )
    else:
        done = replay.replay_runs(
            services.store,
            services.queue,
            owner,
            query,
            services.clock.now_ms(),
            dry_run=body.dry_run,
            retention_s=options.retention_s,
            long_run_after_s=options.long_run_after_s,
        )
    if body.dry_run:
        runs = [
            ReplayedRun(run_id=r.run_id, job_id=r.job_id, scheduled_at=iso(r.scheduled_at) or "", state=r.state)
            for r in done.originals
        ]
        answer = ReplayResponse(dry_run=True, count=len(runs), runs=runs)
    else:
        answer = ReplayResponse(dry_run=False, count=done.count, runs=None)
    headers = {"Idempotent-Replayed": "true"} if done.repeated else None
    status = 200 if body.dry_run else 202
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=answer, headers=headers)
