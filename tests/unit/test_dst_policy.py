"""The DST policy (``dst_repeated``, ``dst_skipped``): every offset change of 2026-2030 in 11 zones.

Each transition is walked wall minute by wall minute (a model independent of the cron walk: every
local minute of the hours around it, read with both folds), and every policy is checked against
that model. The defaults (no policy) are also checked against cronsim, the reference for cron's own
DST rule, on the expressions cronsim reads as Vixie cron does (tests/unit/test_cron_specials.py).

Zones: the common ones (New York, Berlin), Lord Howe (a 30-minute shift), Troll (2 hours),
Chatham (changes at :45), St John's (a :30 offset), Dublin (negative DST), Santiago (at midnight),
and three zones whose rules changed recently: Cairo (DST again since 2023, at midnight), Nuuk
(new standard offset and rules in 2023: changes at 23:00 local, across the date) and Casablanca
(Ramadan-dependent, predicted year by year by tzdata).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from punctual.model.timing import CRON_RULE, DstPolicy, DstRepeated, DstSkipped
from punctual.scheduling.cron import fire_times, latest_fire_at_or_before, next_fire

pytestmark = pytest.mark.unit

MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
ZONES = (
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "Pacific/Chatham",
    "America/St_Johns",
    "Europe/Dublin",
    "America/Santiago",
    "Africa/Cairo",
    "America/Nuuk",
    "Africa/Casablanca",
)
# cron's rule (both fields left None) and every explicit pair; a field left None is cron's rule for
# the job's kind, which the defaults already walk
POLICIES = [CRON_RULE, *(DstPolicy(r, s) for r in DstRepeated for s in DstSkipped)]
WINDOW_MS = 4 * HOUR_MS  # checked on each side of a transition (Troll shifts 2 hours)


def ms(tz: str, y: int, mo: int, d: int, h: int = 0, mi: int = 0, *, fold: int = 0) -> int:
    return int(datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz), fold=fold).timestamp() * 1000)


def local(tz: str, t_ms: int) -> str:
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M%z")


def _offset(tz: ZoneInfo, t_ms: int) -> int:
    delta = datetime.fromtimestamp(t_ms // 1000, tz).utcoffset()
    assert delta is not None
    return int(delta.total_seconds())


@cache
def transitions(zone: str) -> tuple[int, ...]:
    """Instants (ms) where the zone's offset changes, 2026-2030: a daily scan, then bisection."""
    tz, found = ZoneInfo(zone), []
    for day in range(ms("UTC", 2026, 1, 1), ms("UTC", 2031, 1, 1), DAY_MS):
        lo, hi = day, day + DAY_MS
        if _offset(tz, lo) != _offset(tz, hi):
            while hi - lo > MINUTE_MS:
                mid = (lo + hi) // 2 // MINUTE_MS * MINUTE_MS
                lo, hi = (mid, hi) if _offset(tz, mid) == _offset(tz, lo) else (lo, mid)
            found.append(hi)
    return tuple(found)


@dataclass(frozen=True)
class Minute:
    """One local wall minute near a transition, as the zone makes it."""

    wall: datetime  # naive
    instants: tuple[int, ...]  # ms: one, two (repeated) or none (in the gap)


@cache
def wall_minutes(zone: str, t: int) -> tuple[Minute, ...]:
    """Every wall minute whose instants may fall within WINDOW_MS of transition ``t``."""
    tz = ZoneInfo(zone)
    start = datetime.fromtimestamp((t - WINDOW_MS - 3 * HOUR_MS) / 1000, UTC).replace(tzinfo=None)
    out = []
    for i in range((2 * WINDOW_MS + 6 * HOUR_MS) // MINUTE_MS):
        wall = start + timedelta(minutes=i) + timedelta(seconds=_offset(tz, t - WINDOW_MS))
        found = set()
        for fold in (0, 1):
            instant = int(wall.replace(tzinfo=tz, fold=fold).timestamp() * 1000)
            back = datetime.fromtimestamp(instant / 1000, tz).replace(tzinfo=None)
            if back == wall:  # this reading exists (in a gap, neither does)
                found.add(instant)
        out.append(Minute(wall, tuple(sorted(found))))
    return tuple(out)


@dataclass(frozen=True)
class Expr:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]

    @property
    def interval(self) -> bool:
        return self.text.split()[1].startswith("*")

    def matches(self, wall: datetime) -> bool:
        return wall.minute in self.minutes and wall.hour in self.hours


def expressions(zone: str, t: int) -> list[Expr]:
    """Schedules aimed at the hours the transition touches (from its local hour), and intervals."""
    tz = ZoneInfo(zone)
    h = datetime.fromtimestamp((t - MINUTE_MS) / 1000, tz).hour  # the hour the change begins in
    hours = [h % 24, (h + 1) % 24, (h + 2) % 24]
    out = [Expr(f"{m} {hr} * * *", frozenset({m}), frozenset({hr})) for m in (0, 15, 30, 45) for hr in hours[:2]]
    out += [
        Expr(f"0,20,40 {hours[0]},{hours[1]} * * *", frozenset({0, 20, 40}), frozenset(hours[:2])),
        Expr(f"*/10 {hours[1]} * * *", frozenset(range(0, 60, 10)), frozenset({hours[1]})),
        Expr("*/15 * * * *", frozenset(range(0, 60, 15)), frozenset(range(24))),
        Expr("5 * * * *", frozenset({5}), frozenset(range(24))),
        Expr("0 */2 * * *", frozenset({0}), frozenset(range(0, 24, 2))),
    ]
    return out


def model_fires(zone: str, t: int, expr: Expr, policy: DstPolicy) -> list[int]:
    """The fires the policy table gives, from the wall minutes themselves (within WINDOW_MS of t)."""
    repeated, skipped = policy.resolved(expr.interval)
    fires = set()
    for minute in wall_minutes(zone, t):
        if not expr.matches(minute.wall):
            continue
        if len(minute.instants) == 1:
            fires.add(minute.instants[0])
        elif len(minute.instants) == 2:
            first, second = minute.instants
            if repeated is not DstRepeated.ONCE_LAST:
                fires.add(first)
            if repeated is not DstRepeated.ONCE_FIRST:
                fires.add(second)
        elif skipped is DstSkipped.SHIFT:
            fires.add(t)  # the first instant after the gap is the transition itself
    return sorted(f for f in fires if t - WINDOW_MS < f <= t + WINDOW_MS)


def all_transitions() -> list[tuple[str, int]]:
    return [(zone, t) for zone in ZONES for t in transitions(zone)]


def test_every_zone_has_its_transitions_in_range() -> None:
    counts = {zone: len(transitions(zone)) for zone in ZONES}
    assert all(count >= 10 for count in counts.values()), counts  # two a year, Casablanca more


@pytest.mark.parametrize("zone", ZONES)
def test_every_transition_2026_2030_follows_the_policy_table(zone: str) -> None:
    """Each policy (and the defaults) x schedules around each change: the walk agrees with the model,
    forward from before the window and from points inside it, and backward from them."""
    checked = 0
    for t in transitions(zone):
        probes = [t - 2 * HOUR_MS, t - HOUR_MS - 1, t - 1, t, t + 29 * MINUTE_MS, t + HOUR_MS, t + 2 * HOUR_MS + 1]
        for expr, policy in itertools.product(expressions(zone, t), POLICIES):
            want = model_fires(zone, t, expr, policy)
            got = fire_times(expr.text, zone, t - WINDOW_MS, t + WINDOW_MS, 500, dst=policy)
            assert got == want, (expr.text, policy, [local(zone, f) for f in got], [local(zone, f) for f in want])
            for probe in probes:
                after = [f for f in want if f > probe]
                if after:
                    assert next_fire(expr.text, zone, probe, policy) == after[0], (expr.text, policy, probe)
                before = [f for f in want if f <= probe]
                if before:
                    assert latest_fire_at_or_before(expr.text, zone, probe, policy) == before[-1], (expr, policy)
            checked += 1
    assert checked >= 10 * 13 * len(POLICIES)
    assert DstPolicy(DstRepeated.TWICE).resolved(interval=False) == (DstRepeated.TWICE, DstSkipped.SHIFT)


def test_the_default_is_cron_rule_for_each_kind() -> None:
    assert CRON_RULE.resolved(interval=False) == (DstRepeated.ONCE_FIRST, DstSkipped.SHIFT)
    assert CRON_RULE.resolved(interval=True) == (DstRepeated.TWICE, DstSkipped.SKIP)
    assert DstPolicy(DstRepeated.ONCE_LAST).resolved(interval=True) == (DstRepeated.ONCE_LAST, DstSkipped.SKIP)


# -- the defaults against cronsim -----------------------------------------------------------------


def _cronsim(expr: str, zone: str, after_ms: int, n: int) -> list[int]:
    it = CronSim(expr, datetime.fromtimestamp(after_ms / 1000, ZoneInfo(zone)))
    return [int(next(it).timestamp()) * 1000 for _ in range(n)]


def _cronsim_reads_as_vixie(expr: Expr, zone: str) -> bool:
    """cronsim treats a minute starting with '*' under a fixed hour as an interval job, and walks
    interval jobs in 3,600 s steps from wherever a gap left it: at Lord Howe (a 30-minute shift) and
    for stepped hours across a gap that departs from elapsed time (see test_cron_specials)."""
    minute, hour = expr.text.split()[:2]
    if minute.startswith("*") and not hour.startswith("*"):
        return False
    if hour.startswith("*"):
        return hour == "*" and zone != "Australia/Lord_Howe"
    return True


def _unambiguous(zone: str, t_ms: int) -> bool:
    at = datetime.fromtimestamp(t_ms / 1000, ZoneInfo(zone))
    return at.utcoffset() == at.replace(fold=1 - at.fold).utcoffset()


@pytest.mark.parametrize("zone", ZONES)
def test_defaults_agree_with_cronsim_at_every_transition(zone: str) -> None:
    checked = 0
    for t in transitions(zone):
        for expr in expressions(zone, t):
            if not _cronsim_reads_as_vixie(expr, zone):
                continue
            for start in (t - 3 * HOUR_MS, t - HOUR_MS - 7 * MINUTE_MS, t + 3 * HOUR_MS):
                if _unambiguous(zone, start):  # cronsim restarts fixed-time jobs from the wall clock
                    ours = fire_times(expr.text, zone, start, 2**62, 4)
                    theirs = _cronsim(expr.text, zone, start, 4)
                    assert ours == theirs, (expr.text, [local(zone, f) for f in ours], [local(zone, f) for f in theirs])
                    checked += 1
    assert checked >= 10 * 8


# -- the cases by name ----------------------------------------------------------------------------

ONCE_FIRST, ONCE_LAST, TWICE = (DstPolicy(repeated=r) for r in DstRepeated)
SHIFT, SKIP = (DstPolicy(skipped=s) for s in DstSkipped)


def fires_near(cron: str, zone: str, day: tuple[int, int, int], policy: DstPolicy) -> list[str]:
    start = ms(zone, *day) - 2 * HOUR_MS
    return [local(zone, f) for f in fire_times(cron, zone, start, start + DAY_MS + 4 * HOUR_MS, 50, dst=policy)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (CRON_RULE, ["2026-04-05 01:45+1100"]),
        (ONCE_FIRST, ["2026-04-05 01:45+1100"]),
        (ONCE_LAST, ["2026-04-05 01:45+1030"]),
        (TWICE, ["2026-04-05 01:45+1100", "2026-04-05 01:45+1030"]),
    ],
)
def test_lord_howe_repeats_half_an_hour(policy: DstPolicy, expected: list[str]) -> None:
    # 2026-04-05 02:00 +11:00 becomes 01:30 +10:30: 01:30-01:59 happen twice, 30 minutes apart
    assert fires_near("45 1 * * *", "Australia/Lord_Howe", (2026, 4, 5), policy)[:2][: len(expected)] == expected


@pytest.mark.parametrize(
    ("policy", "expected"), [(CRON_RULE, ["2026-10-04 02:30+1100"]), (SHIFT, ["2026-10-04 02:30+1100"]), (SKIP, [])]
)
def test_lord_howe_skips_half_an_hour(policy: DstPolicy, expected: list[str]) -> None:
    # 2026-10-04 02:00 +10:30 becomes 02:30 +11:00: 02:15 never happens
    got = [
        f for f in fires_near("15 2 * * *", "Australia/Lord_Howe", (2026, 10, 4), policy) if f.startswith("2026-10-04")
    ]
    assert got == expected


def test_interval_jobs_can_run_once_in_the_repeated_hour() -> None:
    day = (2026, 11, 1)
    every_half_hour = fires_near("*/30 * * * *", "America/New_York", day, CRON_RULE)
    assert "2026-11-01 01:30-0400" in every_half_hour and "2026-11-01 01:30-0500" in every_half_hour
    first = fires_near("*/30 * * * *", "America/New_York", day, ONCE_FIRST)
    assert "2026-11-01 01:30-0400" in first and "2026-11-01 01:30-0500" not in first
    last = fires_near("*/30 * * * *", "America/New_York", day, ONCE_LAST)
    assert "2026-11-01 01:30-0400" not in last and "2026-11-01 01:30-0500" in last


def test_interval_jobs_can_make_up_the_skipped_hour() -> None:
    # 02:15 and 02:45 do not exist on 2026-03-08; shifted, they become one run at 03:00 (not a cron time)
    shifted = fires_near("15,45 * * * *", "America/New_York", (2026, 3, 8), SHIFT)
    assert "2026-03-08 03:00-0400" in shifted
    assert "2026-03-08 03:00-0400" not in fires_near("15,45 * * * *", "America/New_York", (2026, 3, 8), CRON_RULE)


@pytest.mark.parametrize(
    ("zone", "cron", "since", "policy", "expected"),
    [
        # Cairo springs forward at midnight (2026-04-24 00:00 -> 01:00) and falls back at 24:00 (Oct 29)
        ("Africa/Cairo", "30 0 * * *", (2026, 4, 23, 12), CRON_RULE, ["2026-04-24 01:00+0300"]),
        ("Africa/Cairo", "30 0 * * *", (2026, 4, 23, 12), SKIP, []),
        ("Africa/Cairo", "30 23 * * *", (2026, 10, 29, 12), ONCE_LAST, ["2026-10-29 23:30+0200"]),
        ("Africa/Cairo", "30 23 * * *", (2026, 10, 29, 12), TWICE, ["2026-10-29 23:30+0300", "2026-10-29 23:30+0200"]),
        # Nuuk changes at 23:00 local: 2026-03-28 23:00 -> 00:00 (the gap ends the day), Oct 24 repeats 23:00
        ("America/Nuuk", "30 23 * * *", (2026, 3, 28, 12), CRON_RULE, ["2026-03-29 00:00-0100"]),
        ("America/Nuuk", "30 23 * * *", (2026, 3, 28, 12), SKIP, []),
        ("America/Nuuk", "30 23 * * *", (2026, 10, 24, 12), ONCE_LAST, ["2026-10-24 23:30-0200"]),
        # Troll repeats two hours (+02 -> +00): 01:30 happens at 23:30Z and 01:30Z
        (
            "Antarctica/Troll",
            "30 1 * * *",
            (2026, 10, 24, 18),
            TWICE,
            ["2026-10-25 01:30+0200", "2026-10-25 01:30+0000"],
        ),
        ("Antarctica/Troll", "30 2 * * *", (2026, 3, 28, 18), CRON_RULE, ["2026-03-29 03:00+0200"]),
    ],
)
def test_zones_that_changed_or_shift_oddly(
    zone: str, cron: str, since: tuple[int, int, int, int], policy: DstPolicy, expected: list[str]
) -> None:
    """The fires in the 13 hours from ``since`` (local): around the change, not the next day's."""
    start = ms(zone, *since)
    assert [local(zone, f) for f in fire_times(cron, zone, start, start + 13 * HOUR_MS, 10, dst=policy)] == expected
