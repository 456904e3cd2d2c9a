"""Calendars: an owner's named sets of business days, in a time zone (``PUT /calendars/{name}``).

A day is a *business day* of a calendar when the calendar's rules let it through:

- it is not one of ``exclude_dates``, in none of ``exclude_ranges`` (the dates from the earlier of
  its ends to the later, both included) and not on one of ``exclude_weekdays``;
- when ``include_only`` is given, it is one of those dates (a list of business days: a trading
  calendar), and still not excluded by the rules above;
- when the calendar is ``based_on`` another (of the same owner), it is a business day of that one
  too: a calendar adds exclusions to its base ("weekends" + "US federal holidays 2026-2030").

Days are dates in the calendar's ``timezone``: a time of a job is on the date its instant has there.
Bounds keep a calendar one small item (the claim reads it): see the constants below. Every rule a
body must keep is in the document (the zone as an enum, distinct weekdays, the bounds): a body the
document calls valid is never refused as invalid (422); a ``based_on`` that names no calendar is 404,
one that makes a cycle 409 (``punctual.calendars.service``).
"""

from __future__ import annotations

import re
from datetime import date
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from punctual.model.bounds import STRICT
from punctual.model.stored import is_stored
from punctual.model.times import TimezoneName, known_zones
from punctual.model.timing import CalendarName

MAX_DATES = 4_000  # dates in exclude_dates, and in include_only: ten years of business days fit
MAX_RANGES = 500
MAX_BASE_DEPTH = 5  # calendars in a based_on chain, the calendar itself included
MAX_CALENDARS = 1_000  # per owner
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _iso_date(value: Any, info: ValidationInfo) -> Any:
    """A date as the API writes it, "2026-12-25", never a number (pydantic also reads 1800000000)."""
    if not is_stored(info) and not (isinstance(value, date) or (isinstance(value, str) and _DATE.match(value))):
        raise ValueError("must be a date written YYYY-MM-DD, e.g. 2026-12-25")
    return value


Day = Annotated[date, BeforeValidator(_iso_date)]


class Weekday(StrEnum):
    MON = "MON"
    TUE = "TUE"
    WED = "WED"
    THU = "THU"
    FRI = "FRI"
    SAT = "SAT"
    SUN = "SUN"

    @property
    def iso(self) -> int:
        """ISO weekday number: MON 1 ... SUN 7 (``date.isoweekday()``)."""
        return list(Weekday).index(self) + 1


class DateRange(BaseModel):
    """Consecutive dates, both ends included: ``{"start": "2026-12-24", "end": "2027-01-01"}``. The
    range is the same written either way round (from the earlier end to the later one)."""

    model_config = STRICT
    start: Day
    end: Day

    @property
    def bounds(self) -> tuple[date, date]:
        return min(self.start, self.end), max(self.start, self.end)


def _zones_enum(schema: dict[str, Any]) -> None:
    """The time zones the API knows, as the document's enum (built when the document is)."""
    schema["enum"] = sorted(known_zones())


class CalendarSpec(BaseModel):
    """What an owner puts at ``PUT /calendars/{name}``: the rules, replaced whole."""

    model_config = STRICT
    timezone: Annotated[TimezoneName, Field(json_schema_extra=_zones_enum)] = "UTC"
    description: Annotated[str, Field(max_length=256)] | None = None
    exclude_dates: Annotated[list[Day], Field(max_length=MAX_DATES)] = Field(default_factory=list)
    exclude_ranges: Annotated[list[DateRange], Field(max_length=MAX_RANGES)] = Field(default_factory=list)
    exclude_weekdays: Annotated[list[Weekday], Field(max_length=7, json_schema_extra={"uniqueItems": True})] = Field(
        default_factory=list
    )
    include_only: Annotated[list[Day], Field(max_length=MAX_DATES)] | None = None
    based_on: CalendarName | None = None

    @field_validator("exclude_weekdays")
    @classmethod
    def _distinct_weekdays(cls, value: list[Weekday], info: ValidationInfo) -> list[Weekday]:
        if not is_stored(info) and len(set(value)) != len(value):
            raise ValueError("names a weekday twice")
        return value


class Calendar(CalendarSpec):
    """A stored calendar: the spec, its owner and name, and its version (bumped by every PUT)."""

    model_config = ConfigDict(extra="forbid")
    owner: str
    name: str
    version: int = 1
    created_at: int
    updated_at: int

    @property
    def spec(self) -> CalendarSpec:
        return CalendarSpec.model_validate(self.model_dump(include=set(CalendarSpec.model_fields)))
