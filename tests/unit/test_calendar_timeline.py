"""Calendars and a job's times (``punctual.scheduling.timeline``, issue 32 section 1).

The scheduler walks a calendar job from due time to due time (``next_due``), deciding at each the event
at that instant (``event_at``). That walk must give exactly the events a brute-force model gives: every
time of the job's mapped by the calendar (run, skipped, or moved to a business day at the same local
time), events at one instant joined. The preview must list the same runs.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from punctual.calendars.days import MAX_SHIFT_DAYS, BusinessDays, resolve
from punctual.model import JobSpec
from punctual.model.calendars import Calendar, CalendarSpec
from punctual.model.timing import CalendarMode
from punctual.scheduling.preview import Fate, preview
from punctual.scheduling.timeline import Event, EventKind, Raws, Timeline

pytestmark = pytest.mark.unit

DAY_MS = 86_400_000
STARTS = (date(2026, 10, 20), date(2027, 2, 20))  # 40 days over the fall-back, over spring-forward
SCHEDULES = ["0 9 * * *", "30 2 * * *", "0 */6 * * *", "15 8 * * 6", "0 0 1 * *", "*/50 7-9 * * 1-5"]
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]


def ms(zone: str, d: date, h: int = 0, mi: int = 0) -> int:
    return int(datetime(d.year, d.month, d.day, h, mi, tzinfo=ZoneInfo(zone)).timestamp() * 1000)


@st.composite
def calendars(draw: st.DrawFn, start: date) -> CalendarSpec:
    days = [start + timedelta(days=i) for i in range(70)]
    spec: dict[str, object] = {
        "timezone": draw(st.sampled_from(ZONES)),
        "exclude_weekdays": draw(st.lists(st.sampled_from(["SAT", "SUN", "MON", "FRI"]), unique=True, max_size=2)),
        "exclude_dates": [d.isoformat() for d in draw(st.lists(st.sampled_from(days), max_size=8))],
    }
    if draw(st.booleans()):
        a = draw(st.sampled_from(days))
        spec["exclude_ranges"] = [
            {"start": a.isoformat(), "end": (a + timedelta(days=draw(st.integers(0, 6)))).isoformat()}
        ]
    if draw(st.integers(0, 4)) == 0:
        spec["include_only"] = [d.isoformat() for d in days if draw(st.integers(0, 3)) > 0]
    return CalendarSpec.model_validate(spec)


def model_events(timeline: Timeline, lo: int, hi: int) -> list[tuple[int, EventKind]]:
    """Every time of the job's in a wide window mapped, joined per instant, those in (lo, hi]."""
    joined: dict[int, Event] = {}
    for raw in timeline.raws.between(lo - (MAX_SHIFT_DAYS + 2) * DAY_MS, hi + (MAX_SHIFT_DAYS + 2) * DAY_MS):
        event = timeline.event_for(raw)
        held = joined.get(event.at)
        if held is None or (held.kind is not EventKind.RUN and event.kind is EventKind.RUN):
            joined[event.at] = event
    return [(at, e.kind) for at, e in sorted(joined.items()) if lo < at <= hi]


def walked_events(timeline: Timeline, lo: int, hi: int) -> list[tuple[int, EventKind]]:
    """What the scheduler does: from due time to due time, the event at each."""
    out, due = [], timeline.next_due(lo)
    while due is not None and due <= hi:
        event = timeline.event_at(due)
        if event is not None:
            assert event.at == due
            out.append((due, event.kind))
        nxt = timeline.next_due(due)
        assert nxt is None or nxt > due
        due = nxt
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(SCHEDULES), st.sampled_from(ZONES), st.sampled_from(list(CalendarMode)))
def test_the_scheduler_walk_gives_the_model_events(
    data: st.DataObject, schedule: str, zone: str, mode: CalendarMode
) -> None:
    start = data.draw(st.sampled_from(STARTS))
    spec = data.draw(calendars(start))
    days = BusinessDays("cal", [spec])
    timeline = Timeline(Raws(schedule, zone), days, mode)
    lo, hi = ms("UTC", start + timedelta(days=5)), ms("UTC", start + timedelta(days=45))
    assert walked_events(timeline, lo, hi) == model_events(timeline, lo, hi)
    # and going back: the latest due time at or before an instant is the walk's
    walked = [at for at, _ in walked_events(timeline, lo, hi)]
    for at in walked[1:6]:
        assert timeline.previous_due(at) == at
        before = timeline.previous_due(at - 1)
        assert (
            before is not None and before < at and (before in walked or before <= lo or not timeline.event_at(before))
        )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(SCHEDULES), st.sampled_from(list(CalendarMode)))
def test_the_preview_lists_the_runs_the_scheduler_makes(data: st.DataObject, schedule: str, mode: CalendarMode) -> None:
    start = data.draw(st.sampled_from(STARTS))
    spec = data.draw(calendars(start))
    job = JobSpec.model_validate(
        {"name": "p", "schedule": schedule, "timezone": spec.timezone, "calendar": {"name": "cal", "mode": mode},
         "target": {"url": "https://example.com/h"}}
    )  # fmt: skip
    days = BusinessDays("cal", [spec])
    timeline = Timeline(Raws(schedule, spec.timezone), days, mode)
    now = ms("UTC", start + timedelta(days=5))
    items = preview(job, now, 30, days)
    listed = [(i.at, i.fate) for i in items if i.at is not None]
    horizon = max(i.order for i in items)
    walked = walked_events(timeline, now, horizon)
    case = (spec.model_dump_json(), schedule, mode)
    assert [at for at, f in listed if f is not Fate.SKIPPED] == [
        at for at, k in walked if k is not EventKind.SKIPPED
    ], case
    assert {at for at, k in walked if k is EventKind.SKIPPED} <= {at for at, f in listed if f is Fate.SKIPPED}


# -- the cases by name ----------------------------------------------------------------------------

WEEKENDS = CalendarSpec.model_validate({"timezone": "Europe/Berlin", "exclude_weekdays": ["SAT", "SUN"]})
HOLIDAYS = CalendarSpec.model_validate(
    {"timezone": "Europe/Berlin", "exclude_dates": ["2026-12-25", "2026-12-28"], "based_on": "weekends"}
)
FRI, SAT, MON, TUE = date(2026, 12, 25), date(2026, 12, 26), date(2026, 12, 28), date(2026, 12, 29)


def _stored(name: str, spec: CalendarSpec) -> Calendar:
    return Calendar(**spec.model_dump(), owner="o", name=name, created_at=0, updated_at=0)


def berlin(d: date, h: int, mi: int = 0) -> int:
    return ms("Europe/Berlin", d, h, mi)


def test_a_calendar_based_on_another_excludes_both_and_says_why() -> None:
    stored = {"weekends": _stored("weekends", WEEKENDS), "holidays": _stored("holidays", HOLIDAYS)}
    days = resolve("holidays", stored.get)
    assert [d for d in (FRI, SAT, MON, TUE) if days.business(d)] == [TUE]
    assert days.why_not(FRI) == "2026-12-25 is one of its excluded dates"
    assert days.why_not(SAT) == "SAT 2026-12-26 is an excluded weekday"
    assert days.moved(FRI, CalendarMode.NEXT_BUSINESS_DAY) == TUE
    assert days.moved(MON, CalendarMode.PREVIOUS_BUSINESS_DAY) == date(2026, 12, 24)
    gone = resolve("holidays", {"holidays": stored["holidays"]}.get)  # its base was deleted meanwhile
    assert gone.missing == "weekends" and not gone.business(TUE)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # Thu 24th runs; Fri 25th to Mon 28th are excluded; Tue 29th runs
        (CalendarMode.SKIP, [(24, EventKind.RUN), (25, EventKind.SKIPPED), (26, EventKind.SKIPPED),
                             (27, EventKind.SKIPPED), (28, EventKind.SKIPPED), (29, EventKind.RUN)]),
        # the four excluded days join Tuesday's own 09:00: one run
        (CalendarMode.NEXT_BUSINESS_DAY, [(24, EventKind.RUN), (29, EventKind.RUN)]),
        # they join Thursday's own 09:00: one run, and Tuesday's
        (CalendarMode.PREVIOUS_BUSINESS_DAY, [(24, EventKind.RUN), (29, EventKind.RUN)]),
    ],
)  # fmt: skip
def test_a_daily_job_over_christmas(mode: CalendarMode, expected: list[tuple[int, EventKind]]) -> None:
    stored = {"weekends": _stored("weekends", WEEKENDS), "holidays": _stored("holidays", HOLIDAYS)}
    timeline = Timeline(Raws("0 9 * * *", "Europe/Berlin"), resolve("holidays", stored.get), mode)
    got = walked_events(timeline, berlin(date(2026, 12, 24), 0), berlin(date(2026, 12, 29), 23))
    assert got == [(berlin(date(2026, 12, d), 9), kind) for d, kind in expected]


def test_a_saturday_job_moves_to_friday_or_monday_at_the_same_local_time() -> None:
    days = BusinessDays("weekends", [WEEKENDS])
    saturday = berlin(date(2026, 12, 5), 8, 15)
    for mode, day in (
        (CalendarMode.PREVIOUS_BUSINESS_DAY, date(2026, 12, 4)),
        (CalendarMode.NEXT_BUSINESS_DAY, date(2026, 12, 7)),
    ):
        timeline = Timeline(Raws("15 8 * * 6", "Europe/Berlin"), days, mode)
        walked = walked_events(timeline, berlin(date(2026, 12, 1), 0), berlin(date(2026, 12, 8), 0))
        assert walked == [(berlin(day, 8, 15), EventKind.SHIFTED)]
        event = timeline.event_at(berlin(day, 8, 15))
        assert event is not None and event.raw == saturday
        assert (
            event.note
            == f"calendar weekends: moved from 2026-12-05 08:15 (SAT 2026-12-05 is an excluded weekday; {mode.value})"
        )
        # the Saturday itself stays a due time (nothing happens then): an edit may make it a business day
        assert timeline.next_due(saturday - 1) == saturday or timeline.next_due(saturday - 1) == berlin(day, 8, 15)
        assert timeline.event_at(saturday) is None


def test_no_business_day_within_reach_skips() -> None:
    spec = CalendarSpec.model_validate({"include_only": ["2026-01-05"]})
    timeline = Timeline(Raws("0 9 * * *", "UTC"), BusinessDays("only", [spec]), CalendarMode.NEXT_BUSINESS_DAY)
    event = timeline.event_at(ms("UTC", date(2026, 6, 1), 9))
    assert (
        event is not None and event.kind is EventKind.SKIPPED and "no business day within 31 days" in (event.note or "")
    )
