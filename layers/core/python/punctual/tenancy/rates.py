"""``max_runs_per_minute`` as a ceiling that a backlog fills: starts spaced evenly, turns for the waiting.

The promise (docs/execution.md, "Owner limits"; DESIGN 7.6): never more than R starts in any 60 s
window (sliding, to the millisecond), and while runs wait, the owner gets its rate: every 60 s
window holds at least floor(0.9 R) starts (R - 1 for R <= 10), about 94 % of R over a long backlog.

The rule is a virtual schedule (GCRA, the "generic cell rate algorithm" of ATM networks): the
owner's record holds ``next_at``, the instant of the next start if starts were exactly
``interval_ms(R) = (60 s + SLACK_MS + MARGIN_MS) / R`` apart. A start qualifies from
``next_at - SLACK_MS`` on, and moves ``next_at`` to ``max(next_at, now) + interval``. So R + 1
starts span at least ``R * interval - SLACK_MS >= 62 s``: never R + 1 in one window, whatever order
the workers come in, with ``MARGIN_MS`` to spare for workers whose clocks differ a little and for
calls whose trips to the target differ. The slack lets a start come up to 2 s early or late
without losing its place, so a waiting run that returns a little late costs nothing; over a long
backlog the owner gets 60 / 64 of R.

Waiting runs are given turns, so that a backlog does not knock on the gate all at once: a refused
run is told to return at ``max(queue_end, next_at - SLACK_MS)``, and ``queue_end`` moves one
interval on. Turns are handed out at most ``HORIZON_MS`` ahead; a run further back looks again
after ``HORIZON_MS`` (so a raised limit reaches the whole backlog within a minute). A turn is a
hint, not a reservation: the run is checked again when it returns, and a run that never returns
(its job deleted meanwhile) costs one interval at most.

A changed limit starts a fresh spacing, and for the next minute a start also needs room among
the starts of the last 61 seconds (``recent``, per second): a lowered limit holds back until the
starts made under the old one leave the window, a raised one speeds up at once. Only owners with
a limit have a record; each start or wait reads it and writes it once (compare-and-set on its
version, :meth:`Store.put_rate_state`).
"""

from __future__ import annotations

from dataclasses import replace

from punctual.port import RateState, Store

WINDOW_MS = 60_000
SLACK_MS = 2_000  # how early (or late) a start may come without losing its place
# R + 1 starts span 62 s by the workers' clocks: the ceiling holds in true time, and at the target,
# across workers whose corrected clocks differ by up to 1 s each way, or calls whose trips differ
MARGIN_MS = 2_000
HORIZON_MS = 60_000  # the farthest turn handed out; a run further back looks again after this
# A record decides nothing once this long has passed since the latest of its next_at, queue_end and
# guard_until: its starts have left every window (61 s, to the second), its turns and its guard are
# over, and a missing record would decide the same. An engine may delete it then.
FORGET_AFTER_MS = WINDOW_MS + SLACK_MS + MARGIN_MS
CAS_TRIES = 8  # writers racing for one owner's record: after this many lost races, wait a moment
RACE_WAIT_MS = 500


def interval_ms(limit: int) -> int:
    """The spacing of starts for ``limit`` per minute (rounded up, so R intervals span >= 64 s)."""
    if limit < 1:
        raise ValueError(f"max_runs_per_minute must be at least 1, not {limit}")
    return -(-(WINDOW_MS + SLACK_MS + MARGIN_MS) // limit)


def decide(
    read: RateState | None, owner: str, limit: int, now: int, *, returning: bool = False
) -> tuple[bool, RateState | None, int | None]:
    """May one start of ``owner`` happen at ``now`` under ``limit`` per minute? Pure.

    Returns (admitted, the record to write or None if nothing changes, when to come back if not
    admitted). Admitted: ``next_at`` moves one interval on and the start is counted in ``recent``.
    Not admitted: a turn (``queue_end`` moves on), or a look again after ``HORIZON_MS``.
    """
    state = current(read, owner, limit, now)
    step = interval_ms(limit)
    opens = max(state.next_at - SLACK_MS, _guard_opens(state, limit) if now < state.guard_until else 0)
    if now >= opens:
        recent = pruned(state.recent, now)
        recent[now // 1000] = recent.get(now // 1000, 0) + 1
        return True, replace(state, next_at=max(state.next_at, now) + step, recent=recent), None
    if returning and opens - now <= SLACK_MS:
        # A near miss: a run back for its turn a little before the start opens (a run before it
        # started late and pushed the spacing, or its worker's clock is a little behind). It comes
        # back when the start opens, keeping its place, instead of going to the end of the line
        # (which would leave an interval unused). Fresh arrivals still get turns, one interval apart.
        return False, (None if state == read else state), opens
    turn = max(state.queue_end, opens)
    if turn - now > HORIZON_MS:  # far back in the line: no turn yet, look again later
        return False, (None if state == read else state), now + HORIZON_MS
    return False, replace(state, queue_end=turn + step), turn


def current(read: RateState | None, owner: str, limit: int, now: int) -> RateState:
    """The record ``decide`` works on: a fresh one, or ``read`` after a change of the limit.

    A changed limit starts a fresh spacing at ``now`` (turns handed out at the old spacing are
    forgotten: their runs are checked again when they return), and for the next minute and 2 s a
    start also needs fewer than ``limit`` starts in the last 61 seconds (``guard_until``): so
    the starts made under the old limit count against the new one until they leave the window.
    """
    if read is None:
        return RateState(owner=owner, limit=limit, next_at=now, queue_end=now)
    if read.limit == limit:
        return read
    until = now + WINDOW_MS + SLACK_MS
    return replace(read, limit=limit, next_at=now, queue_end=now, guard_until=until)


def _guard_opens(state: RateState, limit: int) -> int:
    """When the starts counted in ``recent`` leave room for one more under ``limit``: the second
    after the limit-th most recent one has left the last 61 seconds (0: there is room)."""
    seen = 0
    for second in sorted(state.recent, reverse=True):
        seen += state.recent[second]
        if seen >= limit:
            return (second + WINDOW_MS // 1000 + 1) * 1000
    return 0


def pruned(recent: dict[int, int], now: int, *, seconds: int = WINDOW_MS // 1000 + 1) -> dict[int, int]:
    """``recent`` without the seconds before the last ``seconds`` ones up to ``now``'s (a copy).

    The default keeps 61 seconds: every second a 60 s window ending at ``now`` touches."""
    first = now // 1000 - seconds + 1
    return {second: count for second, count in recent.items() if second >= first}


def take(store: Store, owner: str, limit: int, now: int, *, returning: bool = False) -> int | None:
    """Count one start of ``owner`` at ``now`` if the limit allows it: None if counted, else the
    instant (epoch ms) the run should come back (its turn, written to the record). ``returning``:
    the run waited before (see :func:`decide`'s near miss)."""
    for _ in range(CAS_TRIES):
        read = store.get_rate_state(owner)
        admitted, state, retry_at = decide(read, owner, limit, now, returning=returning)
        if state is None or store.put_rate_state(_next_version(state, read)):
            return None if admitted else retry_at
    return now + RACE_WAIT_MS


def turn(store: Store, owner: str, limit: int, now: int, *, returning: bool = False) -> int | None:
    """None if a start of ``owner`` may be counted now (nothing is written: :func:`take` counts it),
    else the run's turn (written to the record), as :func:`take` would refuse it."""
    for _ in range(CAS_TRIES):
        read = store.get_rate_state(owner)
        admitted, state, retry_at = decide(read, owner, limit, now, returning=returning)
        if admitted:
            return None
        if state is None or store.put_rate_state(_next_version(state, read)):
            return retry_at
    return now + RACE_WAIT_MS


def give_back(store: Store, owner: str, limit: int, started_at: int) -> bool:
    """Undo one counted start at ``started_at`` whose run did not start after all (its lease found it
    held or finished): ``next_at`` moves one interval back. Safe for the ceiling, since the
    record then says no more than it would have without that start. False if the record changed
    its limit meanwhile or kept changing (the start then stays counted: the safe side)."""
    for _ in range(CAS_TRIES):
        read = store.get_rate_state(owner)
        if read is None or read.limit != limit:
            return False
        recent = dict(read.recent)
        second = started_at // 1000
        if recent.get(second, 0) > 1:
            recent[second] -= 1
        else:
            recent.pop(second, None)
        state = replace(read, next_at=read.next_at - interval_ms(limit), recent=recent)
        if store.put_rate_state(_next_version(state, read)):
            return True
    return False


def started_in_last_minute(store: Store, owner: str, now: int) -> int:
    """Starts counted in the last minute (to the second; ``GET /limits``)."""
    state = store.get_rate_state(owner)
    return 0 if state is None else sum(pruned(state.recent, now, seconds=WINDOW_MS // 1000).values())


def _next_version(state: RateState, read: RateState | None) -> RateState:
    return replace(state, version=(0 if read is None else read.version) + 1)
