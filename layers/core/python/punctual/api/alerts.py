"""``GET /alerts``: the caller's owner alerts (runs that ended dead or failed), newest first.

A Powertools :class:`Router`; ``punctual.api.app`` includes it (``app.include_router(router)``), and
after that the router shares the app's per-request context (``services`` and ``owner``, set by
``punctual.api.app.handle``).
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field

from punctual.api import openapi
from punctual.api.caller import caller
from punctual.api.schemas import IsoTime
from punctual.clock import iso
from punctual.model import AlertKind
from punctual.port import Alert, Store

MAX_ALERTS = 100

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated


class AlertResponse(BaseModel):
    """One owner alert: a run that needs attention (dead: retries exhausted or poisoned; failed), a
    job paused after its runs failed (``pause_after_failures``), a run not finished by its job's
    ``deadline_s`` (``deadline_missed``), or a cron instant that produced no run within it
    (``run_missed``: ``run_id`` is the id that run would have had)."""

    run_id: str
    job_id: str
    created_at: IsoTime
    reason: str = Field(description="why the run ended, e.g. its last error; or why the job was paused")
    kind: AlertKind = Field(
        default=AlertKind.RUN,
        description="run: the run ended; job_paused: its job was paused; deadline_missed: the run had not"
        " finished by scheduled_at + deadline_s; run_missed: the cron instant produced no run by then",
    )

    @classmethod
    def from_alert(cls, alert: Alert) -> AlertResponse:
        return cls(
            run_id=alert.run_id,
            job_id=alert.job_id,
            created_at=iso(alert.created_at) or "",
            reason=alert.reason,
            kind=alert.kind,
        )


class AlertList(BaseModel):
    items: list[AlertResponse]


@router.get(
    "/alerts",
    operation_id="listAlerts",
    tags=["alerts"],
    summary="List the caller's alerts (runs that ended dead or failed, paused jobs, missed deadlines), newest first",
    responses=openapi.responses({200: ("The newest alerts", AlertList)}, openapi.LIST_ERRORS),
)
def list_alerts(
    limit: Annotated[int, Query(ge=1, le=MAX_ALERTS, description="how many (newest first)")] = 50,
) -> AlertList:
    store, owner = _caller()
    return AlertList(items=[AlertResponse.from_alert(a) for a in store.list_alerts(owner, limit)])


def _caller() -> tuple[Store, str]:
    """The store and owner ``punctual.api.app.handle`` put in the (shared) context."""
    services, owner = caller(router.context)
    return services.store, owner
