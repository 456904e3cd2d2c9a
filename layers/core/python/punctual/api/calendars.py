"""``PUT|GET|DELETE /calendars/{name}`` and ``GET /calendars``: an owner's calendars (``punctual.calendars``).

A Powertools :class:`Router` included by ``punctual.api.app``; it shares the app's per-request
context (``services`` and ``owner``). A calendar is the owner's: another owner's is 404.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from punctual.api import openapi
from punctual.api.caller import Services, caller
from punctual.api.schemas import IsoTime
from punctual.calendars import service
from punctual.clock import iso
from punctual.model.bounds import STRICT
from punctual.model.calendars import Calendar, CalendarSpec
from punctual.model.timing import CALENDAR_NAME_PATTERN

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated

Name = Annotated[
    str,
    Path(
        description="letters, digits, '.', '_' and '-', 1-64 of them",
        pattern=CALENDAR_NAME_PATTERN,
        max_length=64,
        examples=["us-business-days"],
    ),
]

_EXAMPLE: dict[str, Any] = {
    "timezone": "America/New_York",
    "description": "US federal holidays 2026-2027, on top of weekends",
    "exclude_dates": ["2026-11-26", "2026-12-25", "2027-01-01", "2027-01-18"],
    "exclude_ranges": [{"start": "2026-12-24", "end": "2026-12-26"}],
    "based_on": "weekends",
}


class CalendarBody(CalendarSpec):
    """The body of ``PUT /calendars/{name}``: the calendar's rules, replacing the stored ones whole."""

    model_config = ConfigDict(**STRICT, json_schema_extra={"examples": cast(Any, [_EXAMPLE])})


class CalendarResponse(CalendarSpec):
    """A calendar as stored, with its name and version."""

    model_config = ConfigDict(extra="forbid")
    name: str
    version: int = Field(description="bumped by every PUT")
    created_at: IsoTime
    updated_at: IsoTime

    @classmethod
    def of(cls, calendar: Calendar) -> CalendarResponse:
        return cls(
            **calendar.spec.model_dump(),
            name=calendar.name,
            version=calendar.version,
            created_at=_iso(calendar.created_at),
            updated_at=_iso(calendar.updated_at),
        )


class CalendarList(BaseModel):
    items: list[CalendarResponse] = Field(description="every calendar of the caller's, by name")


@router.put(
    "/calendars/<name>",
    operation_id="putCalendar",
    tags=["calendars"],
    summary="Create or replace a calendar (its jobs follow it from their next claim)",
    responses=openapi.responses(
        {201: ("Created", CalendarResponse), 200: ("Replaced", CalendarResponse)}, openapi.CHANGE_ERRORS
    ),
)
def put_calendar(name: Name, body: CalendarBody) -> Response[CalendarResponse]:
    services, owner = _caller()
    calendar, created = service.put_calendar(services.store, owner, name, body, services.clock.now_ms())
    return Response(
        status_code=201 if created else 200,
        content_type=content_types.APPLICATION_JSON,
        body=CalendarResponse.of(calendar),
    )


@router.get(
    "/calendars/<name>",
    operation_id="getCalendar",
    tags=["calendars"],
    summary="Get a calendar",
    responses=openapi.responses({200: ("The calendar", CalendarResponse)}, openapi.READ_ERRORS),
)
def get_calendar(name: Name) -> CalendarResponse:
    services, owner = _caller()
    return CalendarResponse.of(service.get_calendar(services.store, owner, name))


@router.get(
    "/calendars",
    operation_id="listCalendars",
    tags=["calendars"],
    summary="The caller's calendars",
    responses=openapi.responses({200: ("The calendars", CalendarList)}, openapi.LIST_ERRORS),
)
def list_calendars() -> CalendarList:
    services, owner = _caller()
    return CalendarList(items=[CalendarResponse.of(c) for c in service.list_calendars(services.store, owner)])


@router.delete(
    "/calendars/<name>",
    operation_id="deleteCalendar",
    tags=["calendars"],
    summary="Delete a calendar; 409 calendar_in_use (naming them) while jobs or calendars name it",
    responses=openapi.responses({204: ("Deleted", None)}, openapi.DELETE_ERRORS),
)
def delete_calendar(name: Name) -> Response[None]:
    services, owner = _caller()
    service.delete_calendar(services.store, owner, name)
    return Response(status_code=204, content_type=None, body=None)


def _caller() -> tuple[Services, str]:
    return caller(router.context)


def _iso(ms: int) -> str:
    value = iso(ms)
    assert value is not None
    return value
