"""``max_runs_per_minute``'s rule (``punctual.tenancy.rates.decide``) without a store, on random traffic.

Each run knocks on the gate; a refused run comes back at the instant the rule named, plus a random
lateness (whole-second visibility, a long poll, a busy worker). Properties:

- the ceiling: every start made under limit L has at most L starts (itself included) in the 60 s
  that end with it, to the millisecond, whatever the lateness and however the limit changes (and
  with a constant limit, in the 62 s that end with it: the margin for workers' clocks and calls'
  trips to the target);
- the floor: with a backlog and lateness within the rule's slack, every 60 s window of the backlog
  holds at least floor(0.9 R) starts, and the backlog gets at least 90 % of R a minute.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.port import RateState
from punctual.tenancy import rates
from tests.faults import rate_windows as rw

pytestmark = pytest.mark.unit

T0 = 1_800_000_003_300


def drain(
    count: int, limits: list[tuple[int, int]], *, late_ms: int, seed: int, until: int | None = None
) -> list[tuple[int, int]]:
    """``count`` runs due at T0 through the rule; ``limits``: (from when, limit), in order. Returns
    the starts as (instant, limit it was made under)."""
    rng = random.Random(seed)
    knocks = [(T0, run) for run in range(count)]
    heapq.heapify(knocks)
    state: RateState | None = None
    starts: list[tuple[int, int]] = []
    while knocks:
        now, run = heapq.heappop(knocks)
        if until is not None and now > until:
            break
        limit = next(value for since, value in reversed(limits) if since <= now)
        admitted, written, retry_at = rates.decide(state, "o", limit, now)
        if written is not None:
            state = replace(written, version=(state.version if state else 0) + 1)
        if admitted:
            starts.append((now, limit))
        else:
            assert retry_at is not None and retry_at > now
            heapq.heappush(knocks, (retry_at + rng.randint(0, late_ms), run))
    return starts


def test_the_spacing_spreads_r_starts_over_64_seconds() -> None:
    assert rates.interval_ms(6) == 10_667
    assert rates.interval_ms(60) == 1_067
    assert rates.interval_ms(1) == 64_000
    with pytest.raises(ValueError):
        rates.interval_ms(0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 120),
    st.lists(st.tuples(st.integers(1, 400_000), st.integers(1, 120)), max_size=4),
    st.integers(0, 5_000),
    st.integers(1, 300),
    st.integers(0, 2**32),
)
def test_no_window_ever_holds_more_starts_than_the_limit_they_were_made_under(first, changes, late_ms, count, seed):
    limits = [(0, first), *sorted((T0 + at, limit) for at, limit in changes)]
    starts = drain(count, limits, late_ms=late_ms, seed=seed, until=T0 + 600_000)
    times = sorted(t for t, _ in starts)
    for at, limit in starts:
        assert rw.count_in(times, at - rw.WINDOW_MS + 1) <= limit, (at - T0, limit)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 240), st.integers(0, 1_100), st.integers(0, 2**32))
def test_a_backlog_gets_at_least_90_percent_of_its_rate_in_every_window(rate, late_ms, seed):
    count = 3 * rate + 2  # about three minutes of backlog
    times = sorted(t for t, _ in drain(count, [(0, rate)], late_ms=late_ms, seed=seed))
    assert len(times) == count
    assert max(rw.count_in(times, t - 62_000 + 1) for t in times) <= rate  # with the margin
    fewest = rw.fewest_in_backlog(times, T0)
    assert fewest is not None and fewest >= rw.floor_for(rate), (fewest, rw.per_minute(times, T0, 4))
    minutes = (times[-1] - T0) / 60_000
    assert count - 1 >= 0.9 * rate * minutes


def test_waiting_runs_get_turns_one_interval_apart_and_no_further_than_the_horizon() -> None:
    step = rates.interval_ms(6)
    state: RateState | None = None
    turns = []
    for _ in range(10):
        admitted, written, retry_at = rates.decide(state, "o", 6, T0)
        state = written or state
        turns.append(None if admitted else retry_at)
    assert turns[0] is None  # the first starts at once
    assert turns[1:6] == [T0 + k * step - rates.SLACK_MS for k in range(1, 6)]
    assert turns[6:] == [T0 + rates.HORIZON_MS] * 4  # further back: look again in a minute


class _Records:
    """The two store methods ``rates`` uses, on a dict (compare-and-set on the version)."""

    def __init__(self) -> None:
        self.records: dict[str, RateState] = {}

    def get_rate_state(self, owner: str) -> RateState | None:
        return self.records.get(owner)

    def put_rate_state(self, state: RateState) -> bool:
        stored = self.records.get(state.owner)
        if (stored.version if stored else 0) != state.version - 1:
            return False
        self.records[state.owner] = state
        return True


def test_a_start_given_back_frees_its_interval_and_its_count() -> None:
    store = _Records()
    assert rates.take(store, "o", 6, T0) is None  # type: ignore[arg-type]
    assert rates.take(store, "o", 6, T0 + 1) == T0 + rates.interval_ms(6) - rates.SLACK_MS  # type: ignore[arg-type]
    # the first start's run turned out to be held elsewhere: its start goes back
    assert rates.give_back(store, "o", 6, T0) is True  # type: ignore[arg-type]
    assert store.records["o"].recent == {}
    assert rates.take(store, "o", 6, T0 + 2) is None  # type: ignore[arg-type]
    assert rates.started_in_last_minute(store, "o", T0 + 2) == 1  # type: ignore[arg-type]
    # a limit changed meanwhile: nothing is given back (the start stays counted: the safe side)
    assert rates.take(store, "o", 4, T0 + 3) is None  # type: ignore[arg-type]  # 2 of 4 in the window
    assert rates.give_back(store, "o", 6, T0 + 2) is False  # type: ignore[arg-type]
