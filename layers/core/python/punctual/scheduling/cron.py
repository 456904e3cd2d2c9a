"""Cron schedules: fire-time computation in a job's time zone (the syntax is checked by
``punctual.model.cron_syntax``, with which the model validates ``JobSpec.schedule``).

Times are integer epoch milliseconds (UTC). Every function is pure: no I/O, no clock.

The contract:

* Syntax: five fields ``minute hour day-of-month month day-of-week`` with ``*``, numbers,
  lists ``a,b``, ranges ``a-b`` (a range may wrap, e.g. ``FRI-MON``), steps ``*/n``, ``a-b/n``
  and ``a/n``, month names JAN-DEC and day names SUN-SAT (day-of-week 7 is Sunday), plus the
  macros @yearly @annually @monthly @weekly @daily @midnight @hourly, plus the day specials
  of Quartz and EventBridge (see ``model.cron_days``): ``L``, ``LW`` and ``nW`` in day-of-month,
  ``dL`` (``5L``: the last Friday) and ``d#k`` (``1#2``: the second Monday) in day-of-week,
  alone or in lists (``1,L``), never in ranges or steps. croniter parses the plain items; its
  other extensions (seconds/year fields, ``?``, ``H``, ``L-n``) and @reboot are rejected.
  ``a-a`` means the single value ``a`` (croniter would widen it to the whole field).
  Expressions that can never fire (``0 0 30 2 *``), or fire less than once in 8 years
  (``0 0 * 2 MON#5``, a fifth Monday in February: once in 28-40 years), are rejected.
* Day matching: a day field whose plain values cover its whole range counts as ``*``. When
  both day-of-month and day-of-week are restricted, a day matches if either matches (POSIX);
  otherwise the restricted one (if any) must match. Specials are restrictions like any value.
* Evaluation is on wall-clock time in the job's zone, minute resolution: fire times are the
  instants at which the local clock shows a matching minute with seconds = 0.
* DST, following Vixie cron unless the job chose otherwise (``punctual.model.timing``). A job is an
  *interval job* when its hour field starts with ``*`` (``*``, ``*/n``, and @hourly); every other
  job is a *fixed-time job*.
  - Spring forward (wall times that do not exist): a fixed-time job with any matching minute
    in the gap fires once, at the first instant after the gap (``30 2 * * *`` runs at 03:00 on
    the night New York or Berlin skips 02:00-02:59). Interval jobs have no runs in the gap.
    ``DstSkipped.SHIFT`` / ``SKIP`` choose either answer for any job.
  - Fall back (wall times that occur twice): a fixed-time job fires once, at the first
    (daylight-time) occurrence; interval jobs fire in both occurrences, following elapsed time.
    ``DstRepeated.ONCE_FIRST`` / ``ONCE_LAST`` / ``TWICE`` choose for any job.
* Results are strictly increasing: ``next_fire(c, tz, t) > t``; fires that coincide are one fire.

Speed: parsing happens once per (expression, zone) in an LRU cache; the compiled schedule is
an immutable set of lookup tables, so computing a fire time is a short walk over the fields
with no shared mutable state (safe from any number of threads).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

from punctual.model.cron_days import DaySpecial, special_days, weekday
from punctual.model.cron_syntax import expand
from punctual.model.times import zone
from punctual.model.timing import CRON_RULE, DstPolicy, DstRepeated, DstSkipped

SEARCH_YEARS = 10  # the rarest schedules fire at most 8 years apart (Feb 29: 2096 -> 2104)
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_Wall = tuple[int, int, int, int, int]  # a local wall-clock minute: year, month, day, hour, minute
_NORMAL, _REPEATED, _GAP = 0, 1, 2  # what a wall minute is in its zone (_Schedule._instants)
_KINDS = ("normal", "repeated", "gap")


def next_fire(cron: str, tz: str, after_ms: int, dst: DstPolicy = CRON_RULE) -> int:
    """The first fire time strictly after ``after_ms``."""
    return _compile(cron, tz, dst).next_after(after_ms)


def latest_fire_at_or_before(cron: str, tz: str, at_ms: int, dst: DstPolicy = CRON_RULE) -> int | None:
    """The most recent fire time <= ``at_ms``; None if there is none in SEARCH_YEARS years."""
    return _compile(cron, tz, dst).latest_at_or_before(at_ms)


def fire_times(
    cron: str, tz: str, after_ms: int, until_ms: int, limit: int, *, dst: DstPolicy = CRON_RULE
) -> list[int]:
    """Fire times in ``(after_ms, until_ms]``, at most ``limit`` of them, in order."""
    sched, out, t = _compile(cron, tz, dst), list[int](), after_ms
    while len(out) < limit and (t := sched.next_after(t)) <= until_ms:
        out.append(t)
    return out


def policy_in_force(cron: str, tz: str, dst: DstPolicy = CRON_RULE) -> tuple[DstRepeated, DstSkipped]:
    """The DST policy the schedule runs under: ``dst``, each field left None taken from cron's rule."""
    return _compile(cron, tz, dst).policy


@dataclass(frozen=True, slots=True)
class WallMinute:
    """A wall minute the schedule names, and what its zone makes of it (to explain fires: preview).

    ``kind``: ``normal``, ``repeated`` (it happens twice: ``first`` and ``second``) or ``gap`` (it
    never happens: ``first`` is the instant the gap ends). ``fires``: the job's fires for it under its
    DST policy. Times in epoch ms; ``wall`` is (year, month, day, hour, minute) in the job's zone.
    """

    wall: _Wall
    kind: str
    first: int
    second: int | None
    fires: tuple[int, ...]


def wall_minutes(cron: str, tz: str, after_ms: int, dst: DstPolicy = CRON_RULE) -> Iterator[WallMinute]:
    """The schedule's wall minutes in wall-clock order, from the first that may fire after ``after_ms``
    (a minute whose every occurrence is <= ``after_ms`` is left out). Endless: the caller stops."""
    sched = _compile(cron, tz, dst)
    wall = sched._start(after_ms // 1000, forward=True)
    while True:
        wall = sched._next_wall(*wall)
        kind, first, second = sched._instants(*wall)
        fires = tuple(f * 1000 for f in sched._fires(kind, first, second))
        if max(first, second or first) * 1000 > after_ms:
            yield WallMinute(wall, _KINDS[kind], first * 1000, None if second is None else second * 1000, fires)
        wall = (*wall[:4], wall[4] + 1)


# -- compiled schedules -----------------------------------------------------------------------


@lru_cache(maxsize=1024)  # few distinct value sets in practice; sharing them keeps schedules small
def _tables(allowed: frozenset[int], size: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(next, prev): next[x] = smallest allowed >= x, prev[x] = largest allowed <= x, -1 if none.

    ``next`` has one extra entry (-1) past the end so a walk can step to ``size`` unchecked.
    """
    nxt, prv, best = [-1] * (size + 1), [-1] * size, -1
    for x in reversed(range(size)):
        best = x if x in allowed else best
        nxt[x] = best
    best = -1
    for x in range(size):
        best = x if x in allowed else best
        prv[x] = best
    return tuple(nxt), tuple(prv)


def _secs(delta: timedelta | None) -> int:
    assert delta is not None  # every tzinfo we build is aware
    return delta.days * 86400 + delta.seconds


def _wall_seconds(y: int, mo: int, d: int, h: int, mi: int) -> int:
    """Seconds since the epoch of a wall-clock time read as if it were UTC."""
    return (date(y, mo, d).toordinal() - _EPOCH_ORDINAL) * 86400 + h * 3600 + mi * 60


def _month_days(y: int, mo: int) -> int:
    if mo == 2 and not (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        return 28
    return _MONTH_DAYS[mo]


@lru_cache(maxsize=16384)  # ~0.2 ms to build (mostly croniter); entries share their tables
def _compile(cron: str, tz: str, dst: DstPolicy = CRON_RULE) -> _Schedule:
    local = zone(tz)
    exp = expand(cron)
    repeated, skipped = dst.resolved(exp.interval)
    minutes, hours, days, months, weekdays = exp.sets
    (nmin, pmin), (nhour, phour) = _tables(minutes, 60), _tables(hours, 24)
    (ndom, pdom), (nmon, pmon) = _tables(days, 32), _tables(months, 13)
    never = 99  # a day distance past any month: "no weekday value", when only specials remain
    return _Schedule(
        tz=local,
        utc=local is UTC,
        policy=(repeated, skipped),
        # which occurrences of a repeated wall time fire, and whether a skipped one fires after the gap
        first_pass=repeated is not DstRepeated.ONCE_LAST,
        second_pass=repeated is not DstRepeated.ONCE_FIRST,
        shift=skipped is DstSkipped.SHIFT,
        nmin=nmin,
        pmin=pmin,
        nhour=nhour,
        phour=phour,
        nmon=nmon,
        pmon=pmon,
        ndom=ndom,
        pdom=pdom,
        # days from weekday w to the next (previous) allowed weekday, Sunday = 0
        ndow=tuple(min(((v - w) % 7 for v in weekdays), default=never) for w in range(7)),
        pdow=tuple(min(((w - v) % 7 for v in weekdays), default=never) for w in range(7)),
        dom_any=len(days) == 31,
        dow_any=len(weekdays) == 7,
        dom_specials=exp.dom_specials,
        dow_specials=exp.dow_specials,
    )


@dataclass(frozen=True, slots=True)
class _Schedule:
    """Lookup tables for one (expression, zone). Immutable, so shareable across threads.

    ``n*`` tables give the next allowed value >= x (-1: none), ``p*`` the previous <= x.
    Wall-clock walks accept one-past-the-end components (minute 60, hour 24, day 32, month 13)
    and, going back, day 0 and month 0, so they can step without normalizing. Hour and minute
    never go below 0: index -1 would silently wrap around a table.
    """

    tz: tzinfo
    utc: bool
    policy: tuple[DstRepeated, DstSkipped]  # in force: the job's, each field it left None by its kind
    first_pass: bool
    second_pass: bool
    shift: bool
    nmin: tuple[int, ...]
    pmin: tuple[int, ...]
    nhour: tuple[int, ...]
    phour: tuple[int, ...]
    nmon: tuple[int, ...]
    pmon: tuple[int, ...]
    ndom: tuple[int, ...]
    pdom: tuple[int, ...]
    ndow: tuple[int, ...]
    pdow: tuple[int, ...]
    dom_any: bool
    dow_any: bool
    dom_specials: frozenset[DaySpecial]  # empty for most schedules: then no per-month work
    dow_specials: frozenset[DaySpecial]

    def next_after(self, after_ms: int) -> int:
        """The first fire > ``after_ms``.

        Every fire of a wall minute is at or after its *lower* instant: its first occurrence, or,
        for a minute in a gap, the instant the gap ends. Lower instants never decrease as the wall
        clock advances, so the walk over matching wall minutes ends at the first minute whose lower
        instant is past the best fire found; for an ordinary minute, that is the minute itself.
        Only second occurrences of a repeated hour come after a later minute's first, which is why
        the walk starts early (at ``now``'s other reading) when ``now`` is itself in a repeated hour.
        """
        wall = self._start(after_ms // 1000, forward=True)
        best: int | None = None
        while True:
            wall = self._next_wall(*wall)
            kind, first, second = self._instants(*wall)
            if best is not None and first * 1000 >= best:
                return best
            if kind == _NORMAL:
                if first * 1000 > after_ms:
                    return first * 1000  # below best (checked above), and nothing later comes before it
            else:
                for fire in self._fires(kind, first, second):
                    if fire * 1000 > after_ms and (best is None or fire * 1000 < best):
                        best = fire * 1000
            wall = (*wall[:4], wall[4] + 1)

    def latest_at_or_before(self, at_ms: int) -> int | None:
        wall = self._start(at_ms // 1000, forward=False)
        floor = max(1, wall[0] - SEARCH_YEARS)
        while True:
            found = self._prev_wall(*wall, floor=floor)
            if found is None:
                return None
            fits = [fire for fire in self._fires(*self._instants(*found)) if fire * 1000 <= at_ms]
            if fits:
                break
            step_back = datetime(*found) - timedelta(minutes=1)  # none here (a gap skipped, a pass not fired)
            wall = (step_back.year, step_back.month, step_back.day, step_back.hour, step_back.minute)
        # a fire <= at_ms; step forward over the fires between it and at_ms (second passes)
        fire = max(fits) * 1000
        while (later := self.next_after(fire)) <= at_ms:
            fire = later
        return fire

    def _start(self, sec: int, *, forward: bool) -> _Wall:
        """The wall minute to walk from: the one after ``sec``'s (forward) or ``sec``'s own (back).

        In a repeated hour ``sec``'s wall clock reads two ways; the walk starts from the reading
        that covers both passes: the earlier wall time going forward, the later going back.
        """
        now = datetime.fromtimestamp(sec, self.tz)
        if not self.utc:
            offset = _secs(now.utcoffset())
            other = _secs(now.replace(fold=1 - now.fold).utcoffset())
            if offset != other:
                now = datetime.fromtimestamp(sec + (min(offset, other) if forward else max(offset, other)), UTC)
        return now.year, now.month, now.day, now.hour, now.minute + (1 if forward else 0)

    def _instants(self, y: int, mo: int, d: int, h: int, mi: int) -> tuple[int, int, int | None]:
        """(kind, first, second) for wall time y-mo-d h:mi, in epoch seconds: an ordinary minute's
        instant; a repeated minute's two occurrences; for a minute in a gap, the instant it ends."""
        wall = _wall_seconds(y, mo, d, h, mi)
        if self.utc:
            return _NORMAL, wall, None
        local = datetime(y, mo, d, h, mi, tzinfo=self.tz)
        before = _secs(local.utcoffset())  # fold=0: the offset in force before a transition
        after = _secs(local.replace(fold=1).utcoffset())
        if before == after:
            return _NORMAL, wall - before, None
        if before > after:  # fall back: the wall time happens twice
            return _REPEATED, wall - before, wall - after
        return _GAP, self._transition(wall - after, wall - before), None  # spring forward: it never happens

    def _fires(self, kind: int, first: int, second: int | None) -> tuple[int, ...]:
        """The fires of one matching wall minute (see :meth:`_instants`) under the job's DST policy."""
        if kind == _NORMAL:
            return (first,)
        if kind == _REPEATED:
            assert second is not None
            return ((first,) if self.first_pass else ()) + ((second,) if self.second_pass else ())
        return (first,) if self.shift else ()

    def _transition(self, lo: int, hi: int) -> int:
        """The instant in (lo, hi] where the offset changes (binary search, seconds)."""
        start = _secs(datetime.fromtimestamp(lo, self.tz).utcoffset())
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _secs(datetime.fromtimestamp(mid, self.tz).utcoffset()) == start:
                lo = mid
            else:
                hi = mid
        return hi

    def _next_wall(self, y: int, mo: int, d: int, h: int, mi: int) -> _Wall:
        """The first matching wall minute >= the given one (coarsest field first)."""
        limit = y + SEARCH_YEARS
        while y <= limit:
            if (month := self.nmon[mo]) != mo:
                y, mo, d, h, mi = (y, month, 1, 0, 0) if month > 0 else (y + 1, 1, 1, 0, 0)
            elif (day := self._next_day(y, mo, d)) != d:
                mo, d, h, mi = (mo, day, 0, 0) if day > 0 else (mo + 1, 1, 0, 0)
            elif (hour := self.nhour[h]) != h:
                d, h, mi = (d, hour, 0) if hour >= 0 else (d + 1, 0, 0)
            elif (minute := self.nmin[mi]) != mi:
                h, mi = (h, minute) if minute >= 0 else (h + 1, 0)
            else:
                return y, mo, d, h, mi
        raise ValueError(f"no fire time within {SEARCH_YEARS} years")  # validated: unreachable

    def _prev_wall(self, y: int, mo: int, d: int, h: int, mi: int, *, floor: int) -> _Wall | None:
        """The last matching wall minute <= the given one, not before year ``floor``."""
        while y >= floor:
            if (month := self.pmon[mo]) != mo:  # pmon[0] == -1
                y, mo, d, h, mi = (y, month, 31, 23, 59) if month > 0 else (y - 1, 12, 31, 23, 59)
            elif (day := self._prev_day(y, mo, min(d, _month_days(y, mo)))) != d:
                mo, d, h, mi = (mo, day, 23, 59) if day > 0 else (mo - 1, 31, 23, 59)
            elif (hour := self.phour[h]) != h:
                d, h, mi = (d, hour, 59) if hour >= 0 else (d - 1, 23, 59)
            elif (minute := self.pmin[mi]) != mi:
                # never let hour or minute go below 0: index -1 would wrap around the table
                d, h, mi = (d, h, minute) if minute >= 0 else (d, h - 1, 59) if h > 0 else (d - 1, 23, 59)
            else:
                return y, mo, d, h, mi
        return None

    def _next_day(self, y: int, mo: int, d: int) -> int:
        """The first matching day >= d in this month, or -1."""
        last = _month_days(y, mo)
        if d > last:
            return -1
        if self.dom_any and self.dow_any:
            return d
        best = 99
        if not self.dom_any:
            if self.ndom[d] > 0:
                best = self.ndom[d]
            if self.dom_specials:
                best = min(best, next((s for s in special_days(self.dom_specials, y, mo) if s >= d), 99))
        if not self.dow_any:  # both restricted: either may match (POSIX OR)
            best = min(best, d + self.ndow[weekday(y, mo, d)])
            if self.dow_specials:
                best = min(best, next((s for s in special_days(self.dow_specials, y, mo) if s >= d), 99))
        return best if best <= last else -1

    def _prev_day(self, y: int, mo: int, d: int) -> int:
        """The last matching day <= d in this month, or -1."""
        if d < 1:
            return -1
        if self.dom_any and self.dow_any:
            return d
        best = -1
        if not self.dom_any:
            best = self.pdom[d]
            if self.dom_specials:
                best = max(best, max((s for s in special_days(self.dom_specials, y, mo) if s <= d), default=-1))
        if not self.dow_any:
            best = max(best, d - self.pdow[weekday(y, mo, d)])
            if self.dow_specials:
                best = max(best, max((s for s in special_days(self.dow_specials, y, mo) if s <= d), default=-1))
        return best if best >= 1 else -1
