"""Cron day specials (L, LW, nW, dL, d#k): validation, known dates, and agreement with independent
implementations: cronsim (L, LW, dL, d#k, in DST zones with Vixie semantics), croniter (nW, UTC),
and a per-month model that computes the named days with the calendar module."""

from __future__ import annotations

import calendar
import random
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from punctual.errors import InvalidSchedule
from punctual.model.cron_syntax import validate_cron
from punctual.scheduling.cron import fire_times, latest_fire_at_or_before, next_fire
from tests.unit.test_schedule import DST_ZONES, ZONES, local, ms, transitions

pytestmark = pytest.mark.unit

MINUTE_MS = 60_000
DAY_MS = 86_400_000
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def days(cron: str, tz: str = "UTC", start: tuple[int, int, int] = (2026, 1, 1), n: int = 6) -> list[str]:
    return [local(tz, t)[:10] for t in fire_times(cron, tz, ms(tz, *start), 2**62, n)]


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "0 0 L * *",
        "0 0 l * *",
        "0 0 LW * *",
        "0 0 15W * *",
        "0 0 1W,15W * *",
        "0 0 1,L * *",
        "0 0 L,LW,10-12 * *",
        "0 0 * * 5L",
        "0 0 * * FRIL",
        "0 0 * * 7L",
        "0 0 * * 1#2",
        "0 0 * * MON#2,FRI#4",
        "0 0 * * 1#5",
        "0 0 L * 1",
        "0 0 * 3,4 MON#5",  # a fifth Monday of March or April: at least every 6 years
        "0 0 1 2 MON#5",  # OR-ed with a day-of-month that fires every February
    ],
)
def test_specials_are_accepted(expr: str) -> None:
    assert validate_cron(expr) == expr


@pytest.mark.parametrize(
    ("expr", "fragments"),
    [
        ("0 0 L-2 * *", ["'day-of-month'", "'L'", "stands alone"]),
        ("0 0 15W-20 * *", ["'day-of-month'", "'15W'", "never in a range"]),
        ("0 0 L/2 * *", ["'day-of-month'", "'L'"]),
        ("0 0 32W * *", ["'day-of-month'", "value 32", "1-31"]),
        ("0 0 0W * *", ["'day-of-month'", "value 0"]),
        ("0 0 W * *", ["'day-of-month'", "'W'"]),
        ("0 0 * * L", ["'day-of-week'", "'5L'"]),
        ("0 0 * * 8L", ["'day-of-week'", "value 8", "0-7"]),
        ("0 0 * * 1#6", ["'day-of-week'", "'1#6'", "1-5"]),
        ("0 0 * * 1#0", ["'day-of-week'", "1-5"]),
        ("0 0 * * 1#", ["'day-of-week'", "1-5"]),
        ("0 0 * * MON#2-3", ["'day-of-week'", "invalid item", "'d#k'"]),
        ("0 0 * * 5L-6", ["'day-of-week'", "'5L'"]),
        ("0 0 1#2 * *", ["'day-of-month'", "invalid item"]),
        ("0 0 * * 15W", ["'day-of-week'", "'15W'"]),
        ("L * * * *", ["'minute'", "day-of-month"]),
        ("0 0 * L *", ["'month'", "day-of-month"]),
        ("0 0 30W 2 *", ["never fires", "30", "FEB"]),
        ("0 0 * 2 MON#5", ["less than once in 8 years", "40 years", "FEB"]),
        ("0 0 30 2 1#5", ["less than once in 8 years"]),
        ("0 0 ? * *", ["'?'"]),
    ],
)
def test_bad_specials_are_refused_with_a_message_naming_the_field(expr: str, fragments: list[str]) -> None:
    with pytest.raises(InvalidSchedule) as info:
        validate_cron(expr)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message


# -- known dates ------------------------------------------------------------------------------


def test_last_day_of_month_follows_month_lengths_and_leap_years() -> None:
    assert days("0 0 L * *", start=(2028, 1, 1), n=4) == ["2028-01-31", "2028-02-29", "2028-03-31", "2028-04-30"]
    assert days("0 0 L 2 *", start=(2026, 1, 1), n=3) == ["2026-02-28", "2027-02-28", "2028-02-29"]


def test_nearest_weekday_stays_in_the_month() -> None:
    # 2026-08-01 is a Saturday: 1W moves forward to Monday the 3rd, not back into July.
    assert days("0 0 1W 8 *", n=1) == ["2026-08-03"]
    # 2026-02-15 is a Sunday: 15W moves to Monday the 16th; 2026-08-15 (a Saturday) to Friday the 14th.
    assert days("0 0 15W 2,8 *", n=2) == ["2026-02-16", "2026-08-14"]
    # 2026-05-31 is a Sunday and the month's last day: 31W moves back to Friday the 29th.
    assert days("0 0 31W 5 *", n=1) == ["2026-05-29"]
    # A month shorter than n days has no nW, as plain n does not fire there.
    assert days("0 0 31W * *", n=3) == ["2026-01-30", "2026-03-31", "2026-05-29"]
    assert days("0 0 LW * *", n=3) == ["2026-01-30", "2026-02-27", "2026-03-31"]


def test_last_and_nth_weekday() -> None:
    assert days("0 0 * * 5L", n=3) == ["2026-01-30", "2026-02-27", "2026-03-27"]
    assert days("0 0 * * 0L", n=2) == days("0 0 * * 7L", n=2) == days("0 0 * * SUNL", n=2)
    assert days("0 0 * * 1#2", n=3) == ["2026-01-12", "2026-02-09", "2026-03-09"]
    assert days("0 0 * * MON#5", n=3) == ["2026-03-30", "2026-06-29", "2026-08-31"]
    assert days("0 0 * * MON#1,MON#3", n=4) == ["2026-01-05", "2026-01-19", "2026-02-02", "2026-02-16"]


def test_a_special_is_a_restriction_so_posix_or_applies() -> None:
    # L OR Mondays, as "0 0 31 * 1" would be the 31st OR Mondays.
    assert days("0 0 L * 1", n=6) == [
        "2026-01-05",
        "2026-01-12",
        "2026-01-19",
        "2026-01-26",
        "2026-01-31",
        "2026-02-02",
    ]
    # A special with a full day-of-week field is day-of-month alone.
    assert days("0 0 L * *", n=1) == ["2026-01-31"]


def test_vixie_dst_rules_hold_for_special_days() -> None:
    ny = "America/New_York"
    # 2026-03-08 (the second Sunday of March) skips 02:00-02:59: a fixed-time job runs at 03:00.
    assert [local(ny, t) for t in fire_times("30 2 * * 0#2", ny, ms(ny, 2026, 3, 1), ms(ny, 2026, 3, 9), 5)] == [
        "2026-03-08 03:00-0400"
    ]
    # 2026-11-01 (the first Sunday of November) repeats 01:00-01:59: fixed-time once, interval twice.
    nov = (ms(ny, 2026, 10, 31), ms(ny, 2026, 11, 2))
    assert [local(ny, t) for t in fire_times("30 1 * * 0#1", ny, *nov, 5)] == ["2026-11-01 01:30-0400"]
    assert [local(ny, t) for t in fire_times("30 * * * 0#1", ny, *nov, 30)][1:3] == [
        "2026-11-01 01:30-0400",
        "2026-11-01 01:30-0500",
    ]
    berlin = "Europe/Berlin"  # the EU switches on the last Sunday: 0L
    assert [local(berlin, t) for t in fire_times("30 2 * * 0L", berlin, ms(berlin, 2026, 3, 1), 2**62, 2)] == [
        "2026-03-29 03:00+0200",
        "2026-04-26 02:30+0200",
    ]


def test_latest_fire_and_next_fire_agree_on_specials() -> None:
    for cron in ("0 9 L * *", "0 9 LW * *", "15 3 15W * *", "0 0 * * 5L", "0 12 * * 2#3", "0 0 * * 1#5"):
        t = ms("UTC", 2026, 1, 1)
        for fire in fire_times(cron, "UTC", t, 2**62, 24):
            assert latest_fire_at_or_before(cron, "UTC", fire) == fire
            assert latest_fire_at_or_before(cron, "UTC", fire + DAY_MS) == fire or next_fire(cron, "UTC", fire) <= (
                fire + DAY_MS
            )
            assert next_fire(cron, "UTC", latest_fire_at_or_before(cron, "UTC", fire - 1) or 0) == fire


# -- an independent per-month model of the named days -----------------------------------------


def model_days(y: int, mo: int, item: str) -> set[int]:
    """The days of (y, mo) one special names, computed from the calendar module's month grid."""
    weeks = calendar.Calendar(firstweekday=6).monthdayscalendar(y, mo)  # rows Sunday..Saturday
    last = calendar.monthrange(y, mo)[1]
    workdays = [d for row in weeks for d in row[1:6] if d]
    if item == "L":
        return {last}
    if item == "LW":
        return {max(workdays)}
    if item.endswith("W"):
        n = int(item[:-1])
        if n > last:
            return set()
        return {min(workdays, key=lambda d: (abs(d - n), d))}  # ties cannot happen within a month
    if item.endswith("L"):
        column = int(item[:-1]) % 7
        return {max(row[column] for row in weeks)}
    column, nth = (int(x) for x in item.split("#"))
    found = [row[column % 7] for row in weeks if row[column % 7]]
    return {found[nth - 1]} if nth <= len(found) else set()


@pytest.mark.parametrize(
    "item",
    ["L", "LW", "1W", "2W", "14W", "15W", "28W", "29W", "30W", "31W", "0L", "5L", "6L", "7L", "1#1", "0#5", "3#4"],
)
def test_named_days_match_the_calendar_model_for_40_years(item: str) -> None:
    dom = item.endswith("W") or item in ("L", "LW")
    cron = f"0 12 {item} * *" if dom else f"0 12 * * {item}"
    fires = fire_times(cron, "UTC", ms("UTC", 2000, 1, 1), ms("UTC", 2040, 1, 1), 2000)
    got = {(int(s[:4]), int(s[5:7]), int(s[8:10])) for s in (local("UTC", t) for t in fires)}
    want = {(y, mo, d) for y in range(2000, 2040) for mo in range(1, 13) for d in model_days(y, mo, item)}
    assert got == want


@pytest.mark.parametrize("n", range(1, 29))
def test_nearest_weekday_agrees_with_croniter(n: int) -> None:
    # croniter implements nW (not LW, dL); it clamps n to short months, so only n <= 28 compares.
    start = datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    it = croniter(f"0 6 {n}W * *", start)
    expected = [int(it.get_next(float)) * 1000 for _ in range(60)]
    assert fire_times(f"0 6 {n}W * *", "UTC", int(start.timestamp() * 1000), 2**62, 60) == expected


# -- cronsim: random expressions x zones x DST transitions ------------------------------------


def _cronsim_fires(expr: str, zone: str, after_ms: int, n: int) -> list[int]:
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    it = CronSim(expr, datetime.fromtimestamp(after_ms / 1000, tz))
    return [int(next(it).timestamp()) * 1000 for _ in range(n)]


def _unambiguous(zone: str, t_ms: int) -> bool:
    """cronsim restarts fixed-time jobs from the wall clock: a start in a repeated hour is ambiguous."""
    if zone == "UTC":
        return True
    at = datetime.fromtimestamp(t_ms / 1000, ZoneInfo(zone))
    return at.utcoffset() == at.replace(fold=1 - at.fold).utcoffset()


def _cronsim_agrees_on(expr: str, zone: str) -> bool:
    """Where cronsim's interval-job walk (3,600 s steps from wherever a gap left it) departs from
    Vixie cron, which follows elapsed time: a zone that falls back by 30 minutes (Lord Howe: it
    fires the repeated half hour once), and stepped hours across a gap (`*/2` fires at 01:00 after
    Santiago's midnight gap, skips 04:15 after Chatham's). Those cases are checked against
    test_schedule's minute-by-minute model instead."""
    hours = expr.split()[1]
    if zone == "Australia/Lord_Howe" and hours.startswith("*"):
        return False
    return zone == "UTC" or not hours.startswith("*/")


def _compare(expr: str, zone: str, after_ms: int, n: int = 8) -> None:
    ours = fire_times(expr, zone, after_ms, 2**62, n)
    theirs = _cronsim_fires(expr, zone, after_ms, n)
    assert ours == theirs, (expr, zone, [local(zone, t) for t in ours], [local(zone, t) for t in theirs])


@st.composite
def plain_items(draw: st.DrawFn, lo: int, hi: int) -> str:
    """A list of plain items neither implementation reads differently: no '*', no wrapping range."""
    items = []
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, hi))
        forms = [str(a), f"{a}-{b}"] + ([f"{a}-{b}/{draw(st.integers(1, 7))}"] if b > a else [])  # cronsim: a-a/n = a/n
        items.append(draw(st.sampled_from(forms)))
    return ",".join(items)


@st.composite
def special_exprs(draw: st.DrawFn) -> str:
    """5-field expressions with day specials, in the subset cronsim reads as we do.

    cronsim differs from Vixie cron (and us) on: day fields starting with '*' other than '*'
    itself (it ANDs), a minute starting with '*' under a fixed hour (it treats the job as an
    interval job), nW (unsupported), and names before L. None of those are drawn here.
    """
    minute = draw(plain_items(0, 59))
    hour = draw(st.sampled_from(["*", f"*/{draw(st.integers(2, 6))}", draw(plain_items(0, 23)), "1,2,3", "2", "0"]))
    dom_items = draw(st.lists(st.sampled_from(["L", "LW", "1", "15", "28-31", "29", "30", "31"]), max_size=2))
    dow_items = draw(
        st.lists(
            st.sampled_from([f"{d}L" for d in range(8)] + [f"{d}#{k}" for d in range(8) for k in range(1, 6)])
            | st.sampled_from([f"{name}#{k}" for name in DAYS for k in (1, 2, 5)])
            | st.sampled_from(["1", "5", "0", "2-4"]),
            max_size=3,
        )
    )
    assume(dom_items or dow_items)
    months = draw(st.sampled_from(["*", "*", "2", "3,10,11", "4-9", "1-6/2", "feb,mar"]))
    return f"{minute} {hour} {','.join(dom_items) or '*'} {months} {','.join(dow_items) or '*'}"


def _valid(expr: str) -> bool:
    try:
        validate_cron(expr)
    except InvalidSchedule:
        return False
    return True


@cache
def _transitions_2020s(zone: str) -> tuple[int, ...]:
    return tuple(t for t in transitions(zone) if t < ms("UTC", 2030, 1, 1))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data(), special_exprs(), st.sampled_from(ZONES))
def test_specials_agree_with_cronsim(data: st.DataObject, expr: str, zone: str) -> None:
    assume(_valid(expr) and _cronsim_agrees_on(expr, zone))
    near = _transitions_2020s(zone)
    if near and data.draw(st.booleans()):
        after = data.draw(st.sampled_from(near)) + data.draw(st.integers(-40 * DAY_MS, 2 * 3_600_000))
    else:
        after = data.draw(st.integers(ms("UTC", 2020, 1, 1), ms("UTC", 2030, 1, 1)))
    assume(_unambiguous(zone, after))
    _compare(expr, zone, after)


def _named(y: int, mo: int, d: int) -> list[str]:
    """Every special that names the day y-mo-d (the day-of-week ones with cronsim's syntax)."""
    last = calendar.monthrange(y, mo)[1]
    wd = datetime(y, mo, d).isoweekday() % 7
    names = [f"{wd}#{(d - 1) // 7 + 1}"] + ([f"{wd}L"] if d + 7 > last else [])
    return names + (["L"] if d == last else []) + (["LW"] if model_days(y, mo, "LW") == {d} else [])


@pytest.mark.parametrize("zone", DST_ZONES)
def test_every_transition_day_named_by_a_special_agrees_with_cronsim(zone: str) -> None:
    """For each offset change of the 2020s, schedules whose special names that very day, at the
    hours around the change (fixed-time and interval), fire as cronsim says."""
    rng = random.Random(zone)
    checked = 0
    for t in _transitions_2020s(zone):
        day = datetime.fromtimestamp(t / 1000, ZoneInfo(zone)) - timedelta(minutes=1)
        for special in _named(day.year, day.month, day.day):
            dom, dow = (special, "*") if special in ("L", "LW") else ("*", special)
            for hours in (f"{day.hour}", f"{day.hour},{(day.hour + 1) % 24}", "*", "*/2"):
                minute = rng.choice(["0", "30", "15,45", "0-59/20", str(day.minute)])
                expr = f"{minute} {hours} {dom} * {dow}"
                for start in (t - 2 * DAY_MS - rng.randrange(DAY_MS), t - 3_600_000 - rng.randrange(3_600_000)):
                    if _valid(expr) and _unambiguous(zone, start) and _cronsim_agrees_on(expr, zone):
                        _compare(expr, zone, start, n=6)
                        checked += 1
    assert checked >= 40  # every zone here changes offset at least 14 times in the 2020s
