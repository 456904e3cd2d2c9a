"""Tests for punctual.scheduling.cron: validation, DST rules, and a brute-force reference model."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from punctual.errors import InvalidSchedule, InvalidTimezone
from punctual.model.cron_syntax import validate_cron
from punctual.model.times import validate_timezone
from punctual.scheduling.cron import fire_times, latest_fire_at_or_before, next_fire

pytestmark = pytest.mark.unit

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def ms(tz: str, y: int, mo: int, d: int, h: int = 0, mi: int = 0, *, fold: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz), fold=fold).timestamp() * 1000)


def local(tz: str, t_ms: int) -> str:
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M%z")


def fires_on(cron: str, tz: str, day: tuple[int, int, int]) -> list[str]:
    """Every fire time on a local calendar day (plus a margin), as local strings."""
    start = ms(tz, *day) - HOUR_MS
    return [
        local(tz, t)
        for t in fire_times(cron, tz, start, start + DAY_MS + 2 * HOUR_MS, 500)
        if local(tz, t).startswith("{:04d}-{:02d}-{:02d}".format(*day))
    ]


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "normalized"),
    [
        ("* * * * *", "* * * * *"),
        ("  0   9 *  * MON-FRI ", "0 9 * * MON-FRI"),
        ("*/15 0-6,18-23 1,15 JAN-jun sun", "*/15 0-6,18-23 1,15 JAN-jun sun"),
        ("0 0 29 2 *", "0 0 29 2 *"),
        ("0 12 * * 7", "0 12 * * 7"),
        ("5-5 10/3 1-31/2 */3 0-7", "5-5 10/3 1-31/2 */3 0-7"),
        ("0\t0 * * *", "0 0 * * *"),
        ("@daily", "@daily"),
        ("@HOURLY", "@hourly"),
        ("@yearly", "@yearly"),
        ("@annually", "@annually"),
        ("@monthly", "@monthly"),
        ("@weekly", "@weekly"),
        ("@midnight", "@midnight"),
    ],
)
def test_validate_accepts(expr: str, normalized: str) -> None:
    assert validate_cron(expr) == normalized


@pytest.mark.parametrize(
    ("expr", "fragments"),
    [
        ("0 24 * * *", ["'hour'", "value 24", "out of range 0-23"]),
        ("60 * * * *", ["'minute'", "value 60", "0-59"]),
        ("0 0 0 * *", ["'day-of-month'", "value 0", "1-31"]),
        ("0 0 32 * *", ["'day-of-month'", "value 32"]),
        ("0 0 * 13 *", ["'month'", "value 13", "1-12"]),
        ("0 0 * * 8", ["'day-of-week'", "value 8", "0-7"]),
        ("0 0 * FOO *", ["'month'", "'FOO'", "JAN-DEC"]),
        ("0 0 * * FUNDAY", ["'day-of-week'", "'FUNDAY'", "SUN-SAT"]),
        ("0 MON * * *", ["'hour'", "'MON'"]),
        ("*/0 * * * *", ["'minute'", "step '0'"]),
        ("1-60 * * * *", ["'minute'", "value 60"]),
        ("1,,2 * * * *", ["'minute'", "invalid item ''"]),
        ("-1 * * * *", ["'minute'", "invalid item '-1'"]),
        ("0 0 ? * *", ["'day-of-month'", "'?'"]),
        ("H * * * *", ["'minute'", "'H'", "not supported"]),
        ("0 0 * * * *", ["5 fields", "got 6", "seconds"]),
        ("0 0 * * * * 2030", ["5 fields", "got 7"]),
        ("0 0 * *", ["5 fields", "got 4"]),
        ("", ["empty"]),
        ("   ", ["empty"]),
        ("@reboot", ["@reboot", "@daily"]),
        ("@daily 5", ["@daily 5"]),
        ("0 0 30 2 *", ["never fires", "30", "FEB"]),
        ("0 0 31 4,6,9,11 *", ["never fires", "APR"]),
        ("0 0 * * *" + " " * 300, ["longer than 256"]),
        ("0\u00a00 * * *", ["5 fields"]),
    ],
)
def test_validate_rejects_with_actionable_message(expr: str, fragments: list[str]) -> None:
    with pytest.raises(InvalidSchedule) as info:
        validate_cron(expr)
    for fragment in fragments:
        assert fragment in info.value.message
    assert info.value.code == "invalid_schedule"


def test_restricted_weekday_rescues_an_impossible_day_of_month() -> None:
    # Day-of-month OR day-of-week: Mondays in February still fire.
    assert validate_cron("0 0 30 2 MON") == "0 0 30 2 MON"
    assert local("UTC", next_fire("0 0 30 2 MON", "UTC", ms("UTC", 2026, 1, 1))) == ("2026-02-02 00:00+0000")


def test_invalid_schedule_raised_by_computations() -> None:
    with pytest.raises(InvalidSchedule):
        next_fire("0 25 * * *", "UTC", 0)


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Europe/Berlin", "America/New_York"])
def test_validate_timezone_accepts(name: str) -> None:
    assert validate_timezone(name) == name


@pytest.mark.parametrize(
    "name", ["Mars/Base", "", "utc/", "../../etc/passwd", "/etc/localtime", "localtime", "posixrules", "Factory"]
)
def test_validate_timezone_rejects(name: str) -> None:
    with pytest.raises(InvalidTimezone) as info:
        validate_timezone(name)
    assert info.value.message.startswith(f"unknown time zone {name!r}")


def test_bad_timezone_raised_by_computations() -> None:
    with pytest.raises(InvalidTimezone, match="Mars/Base"):
        next_fire("* * * * *", "Mars/Base", 0)


# -- plain semantics --------------------------------------------------------------------------


def test_next_fire_is_strictly_after_and_minute_aligned() -> None:
    t = ms("UTC", 2026, 5, 1, 12, 0)
    assert next_fire("* * * * *", "UTC", t) == t + MINUTE_MS
    assert next_fire("* * * * *", "UTC", t - 1) == t
    assert next_fire("* * * * *", "UTC", t + 59_999) == t + MINUTE_MS


def test_equal_range_is_a_single_value() -> None:
    t = ms("UTC", 2026, 5, 1, 12, 0)
    assert fire_times("5-5 9-9 * * *", "UTC", t, t + 3 * DAY_MS, 10) == [ms("UTC", 2026, 5, d, 9, 5) for d in (2, 3, 4)]


def test_feb_29_and_yearly_search() -> None:
    t = ms("UTC", 2097, 1, 1)
    assert local("UTC", next_fire("0 0 29 2 *", "UTC", t)) == "2104-02-29 00:00+0000"
    assert local("UTC", latest_fire_at_or_before("0 0 29 2 *", "UTC", t) or 0) == ("2096-02-29 00:00+0000")


def test_latest_fire_none_when_nothing_in_range() -> None:
    assert latest_fire_at_or_before("0 0 29 2 *", "UTC", ms("UTC", 3, 1, 1)) is None


@pytest.mark.parametrize(
    "expr",
    [
        "*/7 * * * *",
        "0 9 * * MON-FRI",
        "30 4 1,15 * *",
        "0 0 1 */3 *",
        "15 10 * * 0",
        "0 12 13 * 5",
        "@weekly",
        "59 23 31 12 *",
    ],
)
def test_agrees_with_croniter_in_utc(expr: str) -> None:
    start = datetime(2025, 12, 30, 7, 13, tzinfo=UTC)
    it = croniter(expr, start)
    expected = [int(it.get_next(float)) * 1000 for _ in range(30)]
    start_ms = int(start.timestamp() * 1000)
    assert fire_times(expr, "UTC", start_ms, 2**62, 30) == expected


# -- DST --------------------------------------------------------------------------------------

NY, BERLIN = "America/New_York", "Europe/Berlin"
NY_SPRING, NY_FALL = (2026, 3, 8), (2026, 11, 1)
BER_SPRING, BER_FALL = (2026, 3, 29), (2026, 10, 25)


@pytest.mark.parametrize(
    ("tz", "day", "expected"),
    [(NY, NY_SPRING, "2026-03-08 03:00-0400"), (BERLIN, BER_SPRING, "2026-03-29 03:00+0200")],
)
def test_spring_forward_missing_time_runs_once_after_the_gap(tz: str, day: tuple[int, int, int], expected: str) -> None:
    assert fires_on("30 2 * * *", tz, day) == [expected]
    assert fires_on("0,15,30,45 2 * * *", tz, day) == [expected]


def test_fall_back_fixed_time_runs_once_at_first_occurrence() -> None:
    assert fires_on("30 1 * * *", NY, NY_FALL) == ["2026-11-01 01:30-0400"]
    assert fires_on("30 2 * * *", BERLIN, BER_FALL) == ["2026-10-25 02:30+0200"]
    assert fires_on("*/20 1 * * *", NY, NY_FALL) == [
        "2026-11-01 01:00-0400",
        "2026-11-01 01:20-0400",
        "2026-11-01 01:40-0400",
    ]


def test_fall_back_from_inside_the_second_pass() -> None:
    second_pass = ms(NY, 2026, 11, 1, 1, 10, fold=1)
    assert local(NY, next_fire("30 1 * * *", NY, second_pass)) == "2026-11-02 01:30-0500"
    assert local(NY, next_fire("*/30 * * * *", NY, second_pass)) == "2026-11-01 01:30-0500"
    assert local(NY, latest_fire_at_or_before("30 1 * * *", NY, second_pass) or 0) == "2026-11-01 01:30-0400"


@pytest.mark.parametrize(
    ("tz", "day", "first", "last", "count"),
    [
        (NY, NY_SPRING, "00:00-0500", "23:30-0400", 46),
        (NY, NY_FALL, "00:00-0400", "23:30-0500", 50),
        (BERLIN, BER_SPRING, "00:00+0100", "23:30+0200", 46),
        (BERLIN, BER_FALL, "00:00+0200", "23:30+0100", 50),
    ],
)
def test_interval_jobs_follow_elapsed_time(
    tz: str, day: tuple[int, int, int], first: str, last: str, count: int
) -> None:
    times = fires_on("*/30 * * * *", tz, day)
    assert (times[0][11:], times[-1][11:], len(times)) == (first, last, count)
    midnight = ms(tz, *day)
    seen = [midnight, *fire_times("*/30 * * * *", tz, midnight, midnight + DAY_MS, 100)]
    gaps = {b - a for a, b in itertools.pairwise(seen)}
    assert gaps == {30 * MINUTE_MS}  # every 30 real minutes straight through both transitions


def test_hourly_runs_in_both_passes() -> None:
    assert fires_on("0 * * * *", NY, NY_FALL)[:4] == [
        "2026-11-01 00:00-0400",
        "2026-11-01 01:00-0400",
        "2026-11-01 01:00-0500",
        "2026-11-01 02:00-0500",
    ]
    assert "2026-03-08 02:00" not in " ".join(fires_on("0 * * * *", NY, NY_SPRING))


@pytest.mark.parametrize(("tz", "days"), [(NY, (NY_SPRING, NY_FALL)), (BERLIN, (BER_SPRING, BER_FALL))])
def test_midnight_unaffected(tz: str, days: tuple[tuple[int, int, int], ...]) -> None:
    for day in days:
        assert fires_on("0 0 * * *", tz, day) == [local(tz, ms(tz, *day))]


def test_gap_at_midnight() -> None:
    # Santiago springs forward from 00:00 to 01:00: a midnight job runs at 01:00.
    assert fires_on("0 0 * * *", "America/Santiago", (2026, 9, 6)) == ["2026-09-06 01:00-0300"]


# -- properties against a brute-force reference -----------------------------------------------

ZONES = [
    "UTC",
    NY,
    BERLIN,
    "Australia/Lord_Howe",
    "America/Santiago",
    "Europe/Dublin",
    "Antarctica/Troll",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/St_Johns",
]
START, END = ms("UTC", 2020, 1, 1), ms("UTC", 2030, 12, 31)
WINDOW_MINUTES = 3 * 24 * 60  # the reference looks this far; keeps each example ~10 ms


def _offset(tz: ZoneInfo, t_ms: int) -> int:
    delta = datetime.fromtimestamp(t_ms // 1000, tz).utcoffset()
    assert delta is not None
    return int(delta.total_seconds()) * 1000


@cache
def transitions(name: str) -> tuple[int, ...]:
    """Instants (ms) where the zone's offset changes, 2020-2030: daily scan, then bisect."""
    tz, found = ZoneInfo(name), []
    for day in range(START, END, DAY_MS):
        lo, hi = day, day + DAY_MS
        if _offset(tz, lo) != _offset(tz, hi):
            while hi - lo > MINUTE_MS:
                mid = (lo + hi) // 2 // MINUTE_MS * MINUTE_MS
                lo, hi = (mid, hi) if _offset(tz, mid) == _offset(tz, lo) else (lo, mid)
            found.append(hi)
    return tuple(found)


FieldSpec = tuple[str, frozenset[int]]


@st.composite
def field(
    draw: st.DrawFn, lo: int, hi: int, star_weight: int = 1, names: tuple[str, ...] = (), alias7: bool = False
) -> FieldSpec:
    """A field text and the set of values it means, from a small cron grammar."""

    def norm(values: range | list[int]) -> frozenset[int]:
        return frozenset(0 if alias7 and v == 7 else v for v in values)

    def atom(v: int) -> str:
        return names[v - lo].upper() if names and v - lo < len(names) and draw(st.booleans()) else str(v)

    def item() -> FieldSpec:
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, min(hi, a + draw(st.sampled_from([0, 2, 5, 30])))))
        step = draw(st.integers(1, max(1, (hi - lo) // 2)))
        return draw(
            st.sampled_from(
                [
                    (atom(a), norm([a])),
                    (f"{atom(a)}-{atom(b)}", norm(range(a, b + 1))),
                    (f"{atom(a)}-{atom(b)}/{step}", norm(range(a, b + 1, step))),
                    (f"*/{step}", norm(range(lo, min(hi, 6 if alias7 else hi) + 1, step))),
                ]
            )
        )

    if draw(st.integers(0, star_weight)) > 0:
        return "*", norm(range(lo, hi + 1))
    items = [item() for _ in range(draw(st.integers(1, 3)))]
    return ",".join(t for t, _ in items), frozenset().union(*(s for _, s in items))


@st.composite
def dst_hours(draw: st.DrawFn) -> FieldSpec:
    """An hour field that is an interval or holds the hours where offsets change."""
    if draw(st.integers(0, 2)) == 0:
        step = draw(st.integers(1, 5))
        return ("*" if step == 1 else f"*/{step}"), frozenset(range(0, 24, step))
    values = draw(st.sets(st.sampled_from([0, 1, 2, 3, 23]), min_size=1, max_size=3))
    return ",".join(map(str, sorted(values))), frozenset(values)


@st.composite
def cron_exprs(draw: st.DrawFn, dst_focus: bool = False) -> tuple[str, list[frozenset[int]]]:
    months = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    days = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
    fields = [
        draw(field(0, 59, star_weight=1)),
        draw(dst_hours() if dst_focus else field(0, 23, star_weight=2)),
        draw(field(1, 31, star_weight=4 + 20 * dst_focus)),
        draw(field(1, 12, star_weight=6 + 20 * dst_focus, names=months)),
        draw(field(0, 7, star_weight=3 + 20 * dst_focus, names=days, alias7=True)),
    ]
    doms, mons, dows = (s for _, s in fields[2:])
    assume(
        len(dows) < 7 or any(d <= (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[m - 1] for d in doms for m in mons)
    )  # else it never fires: invalid
    return " ".join(t for t, _ in fields), [s for _, s in fields]


@st.composite
def instants(draw: st.DrawFn, zone: str, before_ms: int = 2 * DAY_MS, after_ms: int = DAY_MS) -> int:
    """Uniform over 2020-2030, or close to one of the zone's offset changes."""
    near = transitions(zone)
    close = draw(st.booleans())
    if near and close:
        return draw(st.sampled_from(near)) + draw(st.integers(-before_ms, after_ms))
    return draw(st.integers(START, END))


class Reference:
    """Minute-by-minute model of the documented contract, independent of the library."""

    def __init__(self, expr: str, sets: list[frozenset[int]], zone: str) -> None:
        self.minutes, self.hours, self.doms, self.months, self.dows = sets
        self.interval = expr.split()[1].startswith("*")
        self.tz = ZoneInfo(zone)

    def matches(self, w: datetime) -> bool:
        if w.minute not in self.minutes or w.hour not in self.hours or w.month not in self.months:
            return False
        dom, dow = w.day in self.doms, w.isoweekday() % 7 in self.dows
        if len(self.doms) < 31 and len(self.dows) < 7:
            return dom or dow
        return dom and dow

    def fires(self, t_ms: int) -> bool:
        w = datetime.fromtimestamp(t_ms // 1000, self.tz)
        if self.matches(w) and not (w.fold == 1 and not self.interval):
            return True  # fixed-time jobs skip the second pass of a repeated hour
        if self.interval:
            return False
        # A forward jump exactly at t: fixed-time jobs make up a skipped matching minute.
        before, after = _offset(self.tz, t_ms - MINUTE_MS), _offset(self.tz, t_ms)
        skipped = range(t_ms + before, t_ms + after, MINUTE_MS)
        return any(self.matches(datetime.fromtimestamp(s // 1000, UTC)) for s in skipped)

    def next_fire(self, after_ms: int) -> int | None:
        first = after_ms // MINUTE_MS * MINUTE_MS + MINUTE_MS
        return next((t for t in range(first, first + WINDOW_MINUTES * MINUTE_MS, MINUTE_MS) if self.fires(t)), None)

    def latest(self, at_ms: int) -> int | None:
        last = at_ms // MINUTE_MS * MINUTE_MS
        return next((t for t in range(last, last - WINDOW_MINUTES * MINUTE_MS, -MINUTE_MS) if self.fires(t)), None)


PROPERTY = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
DST_ZONES = [z for z in ZONES if z not in ("UTC", "Asia/Kolkata")]


def check_next(text: str, sets: list[frozenset[int]], zone: str, after: int) -> None:
    got = next_fire(text, zone, after)
    want = Reference(text, sets, zone).next_fire(after)
    if want is None:
        assert got >= after // MINUTE_MS * MINUTE_MS + (WINDOW_MINUTES + 1) * MINUTE_MS
    else:
        assert got == want, (local(zone, got), local(zone, want))


def check_latest(text: str, sets: list[frozenset[int]], zone: str, at: int) -> None:
    got = latest_fire_at_or_before(text, zone, at)
    want = Reference(text, sets, zone).latest(at)
    assert got is not None  # every valid expression fires within 10 years
    if want is None:
        assert got <= at // MINUTE_MS * MINUTE_MS - WINDOW_MINUTES * MINUTE_MS
    else:
        assert got == want, (local(zone, got), local(zone, want))


@PROPERTY
@given(st.data(), cron_exprs(), st.sampled_from(ZONES))
def test_next_fire_matches_reference(data: st.DataObject, expr: tuple[str, list[frozenset[int]]], zone: str) -> None:
    check_next(*expr, zone, data.draw(instants(zone)))


@PROPERTY
@given(st.data(), cron_exprs(), st.sampled_from(ZONES))
def test_latest_fire_matches_reference(data: st.DataObject, expr: tuple[str, list[frozenset[int]]], zone: str) -> None:
    check_latest(*expr, zone, data.draw(instants(zone)))


@PROPERTY
@given(st.data(), cron_exprs(dst_focus=True), st.sampled_from(DST_ZONES))
def test_around_offset_changes_matches_reference(
    data: st.DataObject, expr: tuple[str, list[frozenset[int]]], zone: str
) -> None:
    at = data.draw(instants(zone, before_ms=4 * HOUR_MS, after_ms=2 * HOUR_MS))
    check_next(*expr, zone, at)
    check_latest(*expr, zone, at)


DST_EXPRS = {  # expression -> field sets, for an exhaustive sweep over real transitions
    "30 2 * * *": [frozenset({30}), frozenset({2})],
    "*/20 0-3 * * *": [frozenset({0, 20, 40}), frozenset(range(4))],
    "15 1,2 * * *": [frozenset({15}), frozenset({1, 2})],
    "0 0 * * *": [frozenset({0}), frozenset({0})],
    "45 23 * * *": [frozenset({45}), frozenset({23})],
    "0 * * * *": [frozenset({0}), frozenset(range(24))],
    "*/7 */2 * * *": [frozenset(range(0, 60, 7)), frozenset(range(0, 24, 2))],
}
ALL_DAYS = [frozenset(range(1, 32)), frozenset(range(1, 13)), frozenset(range(7))]


@pytest.mark.parametrize("zone", DST_ZONES)
def test_every_2026_transition_matches_reference(zone: str) -> None:
    for t in (t for t in transitions(zone) if ms("UTC", 2026, 1, 1) <= t < ms("UTC", 2027, 1, 1)):
        for text, sets in DST_EXPRS.items():
            for at in (
                t - 3 * HOUR_MS,
                t - HOUR_MS - 1,
                t - 1,
                t,
                t + 30 * MINUTE_MS,
                t + HOUR_MS,
                t + 2 * HOUR_MS + 1,
            ):
                check_next(text, sets + ALL_DAYS, zone, at)
                check_latest(text, sets + ALL_DAYS, zone, at)


@settings(max_examples=100, deadline=None)
@given(st.data(), cron_exprs(), st.sampled_from(ZONES))
def test_sequences_are_consistent(data: st.DataObject, expr: tuple[str, list[frozenset[int]]], zone: str) -> None:
    text, _ = expr
    after = data.draw(instants(zone))
    times = fire_times(text, zone, after, after + 30 * DAY_MS, 40)
    assert times == sorted(set(times)) and all(t > after for t in times)
    chained, t = [], after
    for _ in times:
        t = next_fire(text, zone, t)
        chained.append(t)
    assert chained == times
    assert all(t % MINUTE_MS == 0 for t in times)
    for fire in times[:5]:
        assert latest_fire_at_or_before(text, zone, fire) == fire
        assert latest_fire_at_or_before(text, zone, fire - 1) != fire
        assert next_fire(text, zone, fire - 1) == fire
    if times:
        assert latest_fire_at_or_before(text, zone, times[-1] + 1) == times[-1]


def test_limit_and_bounds_of_fire_times() -> None:
    t = ms("UTC", 2026, 1, 1)
    assert fire_times("* * * * *", "UTC", t, t + 10 * MINUTE_MS, 3) == [
        t + MINUTE_MS,
        t + 2 * MINUTE_MS,
        t + 3 * MINUTE_MS,
    ]
    assert len(fire_times("* * * * *", "UTC", t, t + 10 * MINUTE_MS, 100)) == 10  # (t, until]
    assert fire_times("* * * * *", "UTC", t, t + 10 * MINUTE_MS, 0) == []
    assert fire_times("* * * * *", "UTC", t, t, 5) == []


def test_threads_share_the_cache_safely() -> None:
    exprs = ["*/5 * * * *", "30 1 * * *", "0 9 * * MON-FRI", "0 * * * *"]
    base = ms(NY, 2026, 10, 31, 12)
    expected = {e: fire_times(e, NY, base, base + 3 * DAY_MS, 200) for e in exprs}
    errors: list[str] = []

    def work(expr: str) -> None:
        for _ in range(20):
            if fire_times(expr, NY, base, base + 3 * DAY_MS, 200) != expected[expr]:
                errors.append(expr)

    threads = [threading.Thread(target=work, args=(e,)) for e in exprs * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
