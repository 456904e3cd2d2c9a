"""Claiming a calendar job (``punctual.scheduling.calendar_planning``) and judging its moved runs at
their instant (``punctual.scheduling.instants``): issue 32, section 1."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from punctual.calendars.days import BusinessDays
from punctual.model import Catchup, HttpTarget, Job, Overlap, RunState, Trigger
from punctual.model.calendars import CalendarSpec
from punctual.model.timing import CalendarMode, JobCalendar
from punctual.port import DueJob
from punctual.scheduling.calendar_planning import calendar_plan
from punctual.scheduling.instants import still_planned
from punctual.scheduling.planning import PlanOptions

pytestmark = pytest.mark.unit

BERLIN = ZoneInfo("Europe/Berlin")
WEEKENDS = BusinessDays(
    "weekends", [CalendarSpec.model_validate({"timezone": "Europe/Berlin", "exclude_weekdays": ["SAT", "SUN"]})]
)


def at(d: int, h: int = 9, mi: int = 0) -> int:
    return int(datetime(2026, 12, d, h, mi, tzinfo=BERLIN).timestamp() * 1000)


def due(mode: CalendarMode = CalendarMode.SKIP, **fields: Any) -> DueJob:
    base: dict[str, Any] = {
        "job_id": "job_" + "c" * 32, "owner": "o", "next_run_at": at(5), "schedule": "0 9 * * *",
        "timezone": "Europe/Berlin", "jitter_s": 0, "overlap": Overlap.ALLOW, "catchup": Catchup.LATEST,
        "max_backfill": 10, "last_run_at": None, "due_shard": 0,
        "calendar": JobCalendar(name="weekends", mode=mode),
    }  # fmt: skip
    return DueJob(**{**base, **fields})


def test_a_skip_is_a_cancelled_run_that_is_never_sent() -> None:
    plan = calendar_plan(due(), at(5), PlanOptions(), WEEKENDS)  # Saturday 5th, on time
    [run] = plan.runs
    assert (run.scheduled_at, run.state, run.trigger) == (at(5), RunState.CANCELLED, Trigger.SCHEDULE)
    assert run.note == "calendar weekends: SAT 2026-12-05 is an excluded weekday" and not run.is_open
    assert plan.advance.next_run_at == at(6) and plan.advance.last_run_at == at(5)


def test_a_time_moved_away_claims_nothing_and_advances() -> None:
    plan = calendar_plan(due(CalendarMode.NEXT_BUSINESS_DAY), at(5), PlanOptions(), WEEKENDS)
    assert plan.runs == [] and plan.advance.next_run_at == at(6)  # Sunday's own time, then Monday


def test_catch_up_takes_the_newest_runs_of_the_missed_span() -> None:
    late = at(9, 8)  # Wednesday 08:00: Sat 5th to Tue 8th were missed
    latest = calendar_plan(due(), late, PlanOptions(), WEEKENDS)
    assert [(r.scheduled_at, r.trigger) for r in latest.runs] == [(at(8), Trigger.CATCHUP)]
    backfill = calendar_plan(due(catchup=Catchup.BACKFILL), late, PlanOptions(), WEEKENDS)
    assert [r.scheduled_at for r in backfill.runs] == [at(7), at(8)]  # the weekend's skips are not runs
    assert calendar_plan(due(catchup=Catchup.SKIP), late, PlanOptions(), WEEKENDS).runs == []
    assert latest.advance.next_run_at == at(9)


def test_a_one_time_job_moved_to_the_previous_business_day() -> None:
    saturday = at(5, 8, 15)
    job = due(CalendarMode.PREVIOUS_BUSINESS_DAY, schedule=None, next_run_at=at(4, 8, 15), run_at=saturday)
    plan = calendar_plan(job, at(4, 8, 15), PlanOptions(), WEEKENDS)
    [run] = plan.runs
    assert run.scheduled_at == at(4, 8, 15) and run.is_open and "moved from 2026-12-05 08:15" in (run.note or "")
    assert plan.advance.next_run_at == saturday  # its own time stays due: an edit may make Saturday a business day
    done = calendar_plan(replace(job, next_run_at=saturday), saturday, PlanOptions(), WEEKENDS)
    assert done.runs == [] and done.advance.next_run_at is None  # nothing at Saturday: the job completes


def _job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": "job_" + "c" * 32, "owner": "o", "name": "j", "schedule": "15 8 * * 6", "timezone": "Europe/Berlin",
        "target": HttpTarget(url="https://example.com/h"), "created_at": 0, "updated_at": 0,
        "calendar": {"name": "weekends", "mode": "next_business_day"}, "rescheduled_at": at(7, 8, 14),
    }  # fmt: skip
    return Job.model_validate({**values, **fields})


def test_a_moved_run_stays_planned_when_its_job_changed_otherwise() -> None:
    monday = at(7, 8, 15)  # moved from Saturday 5th 08:15; the job was edited just before
    assert still_planned(_job(), monday)
    assert not still_planned(_job(schedule="30 8 * * 6"), monday)  # its schedule no longer has 08:15
    assert not still_planned(_job(calendar=None), monday)  # no calendar moves it any more
    assert date(2026, 12, 7).isoweekday() == 1
