"""Aggregates of an owner's finished runs, as the engines compute them for ``GET /stats``.

What is counted: every run that reached a terminal state, once, in the minute it finished
(``finished_at``, or ``scheduled_at`` for a run closed without one, e.g. skipped), by terminal
state; and for the runs that started, the start lateness ``started_at - scheduled_at`` in a fixed
histogram. A histogram (not a list of samples) is what lets the aws engine keep the figures as
counters that DynamoDB adds to, and both engines answer the same numbers: p50/p99 are reported
as the upper bound of the bucket that holds them.

Nothing here does I/O; the engines fill :class:`RunStats`, what ``Store.run_stats`` returns (so it
is the port's: a kernel imports no capability package).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field

from punctual.model import TERMINAL_STATES, Run, RunState

MINUTE_MS = 60_000

# Upper bounds (ms, inclusive) of the lateness buckets; one more bucket holds everything above.
LATENESS_BOUNDS_MS: tuple[int, ...] = (
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000,
)  # fmt: skip
BUCKETS = len(LATENESS_BOUNDS_MS) + 1
STATES: tuple[RunState, ...] = tuple(sorted(TERMINAL_STATES))


def lateness_bucket(lateness_ms: int) -> int:
    """The index of the bucket that holds ``lateness_ms`` (negative lateness counts as 0)."""
    return bisect_left(LATENESS_BOUNDS_MS, max(0, lateness_ms))


def minute_of(epoch_ms: int) -> int:
    """The start of the minute (epoch ms) that holds ``epoch_ms``."""
    return epoch_ms - epoch_ms % MINUTE_MS


def counted_at(run: Run) -> int:
    """When a terminal run is counted: it finished then (or, closed without a finish time, at its time)."""
    return run.finished_at if run.finished_at is not None else run.scheduled_at


def lateness_of(run: Run) -> int | None:
    """Start lateness in ms, None for a run that never started."""
    return None if run.started_at is None else run.started_at - run.scheduled_at


@dataclass(slots=True)
class RunStats:
    """An owner's terminal runs counted in ``[since, until)`` (both minute-aligned epoch ms).

    ``per_minute`` maps a minute's start to counts by terminal state (minutes without runs are
    absent); ``lateness`` holds one count per bucket of :data:`LATENESS_BOUNDS_MS` plus overflow.
    """

    since: int
    until: int
    per_minute: dict[int, dict[RunState, int]] = field(default_factory=dict)
    lateness: list[int] = field(default_factory=lambda: [0] * BUCKETS)

    def add(self, minute: int, state: RunState, bucket: int | None, count: int = 1) -> None:
        """Count ``count`` runs that ended in ``state`` at ``minute`` (and started late by ``bucket``)."""
        counts = self.per_minute.setdefault(minute, {})
        counts[state] = counts.get(state, 0) + count
        if bucket is not None:
            self.lateness[bucket] += count

    @property
    def finished(self) -> int:
        return sum(sum(counts.values()) for counts in self.per_minute.values())

    @property
    def started(self) -> int:
        return sum(self.lateness)

    def totals(self) -> dict[RunState, int]:
        totals = dict.fromkeys(STATES, 0)
        for counts in self.per_minute.values():
            for state, count in counts.items():
                totals[state] += count
        return totals

    def percentile(self, q: float) -> int | None:
        """Upper bound (ms) of the bucket holding the nearest-rank ``q``-th percentile of lateness.

        None without samples; for the overflow bucket, the last bound (the figure is "above it").
        """
        total = self.started
        if total == 0:
            return None
        rank = max(1, math.ceil(q / 100 * total))  # nearest rank, at least the first sample
        seen = 0
        for index, count in enumerate(self.lateness):
            seen += count
            if seen >= rank:
                return LATENESS_BOUNDS_MS[min(index, len(LATENESS_BOUNDS_MS) - 1)]
        return LATENESS_BOUNDS_MS[-1]  # unreachable: the counts add up to total


# A window's bucket width by its length: per minute up to 6 h, coarser beyond, so that a chart
# of any window has at most 360 bars (24 h: 288 of 5 min; 3 days: 288 of 15 min; 7 days: 168 of 1 h).
BUCKET_STEPS: tuple[tuple[int, int], ...] = ((360, 1), (1_440, 5), (4_320, 15), (10_080, 60))
MAX_WINDOW_MINUTES = BUCKET_STEPS[-1][0]


def bucket_minutes(minutes: int) -> int:
    """The bucket width (minutes) of a window of ``minutes`` (at most :data:`MAX_WINDOW_MINUTES`)."""
    return next((width for longest, width in BUCKET_STEPS if minutes <= longest), BUCKET_STEPS[-1][1])


def window(now: int, minutes: int, bucket: int = 1) -> tuple[int, int]:
    """``[since, until)``: ``minutes`` whole minutes, the current one (up to its end) and those before it.

    With ``bucket`` > 1 the start moves back to a multiple of ``bucket`` minutes (UTC), so every
    bucket but the current one is whole and starts on a round time.
    """
    until = minute_of(now) + MINUTE_MS
    since = until - minutes * MINUTE_MS
    return since - since % (bucket * MINUTE_MS), until


@dataclass(frozen=True, slots=True)
class OpenRuns:
    """An owner's open runs that are due now (``Store.open_runs``).

    ``waiting``: scheduled or retrying (not started yet, or between attempts); ``executing``:
    running, or accepted (a callback job's target works on it). ``complete`` is False when the
    engine stopped reading at its bound: the counts are then lower bounds.
    """

    waiting: int
    executing: int
    complete: bool = True
