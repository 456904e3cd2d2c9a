"""``GET /jobs/{id}/preview``: a job's next times with its DST policy and calendar applied, and why
each time that does not run as the schedule says was shifted or skipped (``punctual.scheduling.preview``).

A Powertools :class:`Router` included by ``punctual.api.app``; it shares the app's per-request
context (``services`` and ``owner``).
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from punctual import ids
from punctual.api import openapi
from punctual.api.caller import Services, caller
from punctual.api.schemas import IsoTime, shown
from punctual.calendars.cache import read_business_days
from punctual.jobs import service as jobs
from punctual.scheduling.preview import MAX_COUNT, Cause, Fate, PreviewItem, preview

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated

JobId = Annotated[str, Path(description="job_ followed by 32 hex digits", pattern=ids.JOB_ID_PATTERN)]
DEFAULT_COUNT = 20

_EXAMPLE: dict[str, Any] = {
    "job_id": "job_0123456789abcdef0123456789abcdef",
    "timezone": "America/New_York",
    "items": [
        {
            "at": "2026-03-07T07:30:00.000Z",
            "scheduled": "2026-03-07T07:30:00.000Z",
            "local": "2026-03-07T02:30",
            "fate": "run",
            "cause": None,
            "detail": None,
        },
        {
            "at": "2026-03-08T07:00:00.000Z",
            "scheduled": None,
            "local": "2026-03-08T02:30",
            "fate": "shifted",
            "cause": "dst_skipped",
            "detail": "02:30 does not exist on 2026-03-08 in America/New_York (clocks spring forward);"
            " dst_skipped=shift runs it at 03:00, the first instant after the gap",
        },
    ],
}


class PreviewEntry(BaseModel):
    """One of the job's coming times: it runs as scheduled, runs shifted, or is skipped, and why."""

    at: IsoTime | None = Field(
        description="when it runs (run, shifted), or would have (skipped); null: a wall time that never happens"
    )
    scheduled: IsoTime | None = Field(description="the instant the schedule gives; null: its wall time never happens")
    local: str = Field(description="the schedule's wall time in the job's time zone", examples=["2026-03-08T02:30"])
    fate: Fate
    cause: Cause | None = Field(description="why it does not run as scheduled, or why it is listed (a repeated hour)")
    detail: str | None = Field(description="the rule that decided it, in words")

    @classmethod
    def of(cls, item: PreviewItem) -> PreviewEntry:
        return shown(cls, item, times=("at", "scheduled"))


class JobPreview(BaseModel):
    """The job's next times after now, in order: runs and the times that do not run."""

    model_config = ConfigDict(json_schema_extra={"examples": cast(Any, [_EXAMPLE])})
    job_id: str
    timezone: str
    items: list[PreviewEntry]


@router.get(
    "/jobs/<job_id>/preview",
    operation_id="previewJob",
    tags=["jobs"],
    summary="The job's next times, with DST and its calendar applied: which run, which shift or skip, and why",
    responses=openapi.responses({200: ("The coming times", JobPreview)}, openapi.READ_ERRORS),
)
def preview_job(
    job_id: JobId,
    count: Annotated[
        int, Query(ge=1, le=MAX_COUNT, description=f"items to list, runs and non-runs alike (1-{MAX_COUNT})")
    ] = DEFAULT_COUNT,
) -> JobPreview:
    services, owner = _caller()
    job = jobs.get_job(services.store, owner, job_id)
    days = None if job.calendar is None else read_business_days(services.store, owner, job.calendar.name)
    items = preview(job, services.clock.now_ms(), count, days)
    return JobPreview(job_id=job.id, timezone=job.timezone, items=[PreviewEntry.of(i) for i in items])


def _caller() -> tuple[Services, str]:
    return caller(router.context)
