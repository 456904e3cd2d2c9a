"""Starts per 60 s window: how the tenant-limit tests measure ``max_runs_per_minute``.

A *start* is one admitted attempt: the instant (epoch ms) its lease began (``Run.started_at`` of a
first attempt, or the time a worker saw its lease succeed). A window is the half-open interval
``[a, a + 60 000 ms)`` for any ``a`` (sliding, to the millisecond), never a clock minute.

- Ceiling: the most starts in any window (:func:`most_in_any_window`) is at most the limit R.
- Floor, while a backlog exists: the backlog spans ``[due, last]``, from the instant every run was
  due to the last start (a run was waiting throughout). Every window that fits inside it holds at
  least :func:`floor_for` (R) = floor(0.9 R) starts. For R <= 10 that is R - 1, which is also the
  most any strict ceiling allows once starts have any latency: the R-th start after ``s`` comes no
  earlier than ``s + 60 s``, so the window that opens 1 ms after ``s`` holds R starts only if that
  start landed on that very millisecond. Over the whole backlog, at least 0.9 R starts a minute.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

WINDOW_MS = 60_000


def count_in(starts: Sequence[int], at: int) -> int:
    return sum(1 for s in starts if at <= s < at + WINDOW_MS)


def most_in_any_window(starts: Sequence[int]) -> int:
    """The most starts in any half-open 60 s window (the busiest one opens at a start)."""
    return max((count_in(starts, s) for s in starts), default=0)


def fewest_in_backlog(starts: Sequence[int], due: int) -> int | None:
    """The fewest starts in any 60 s window inside ``[due, last start]``; None if the backlog
    lasted less than a window. The emptiest window opens at ``due`` or 1 ms after a start."""
    last = max(starts, default=due)
    openings = [due, *(s + 1 for s in starts)]
    counts = [count_in(starts, at) for at in openings if at >= due and at + WINDOW_MS <= last + 1]
    return min(counts) if counts else None


def per_minute(starts: Sequence[int], due: int, minutes: int) -> list[int]:
    """Starts in each minute from ``due`` (``[due + 60 s * m, due + 60 s * (m + 1))``)."""
    return [count_in(starts, due + m * WINDOW_MS) for m in range(minutes)]


def floor_for(limit: int) -> int:
    """The fewest starts a full window of a backlog may hold: floor(0.9 R) (see the module docstring)."""
    return 9 * limit // 10


def longest_gap(starts: Sequence[int], due: int) -> int:
    """The longest time (ms) without a start, from ``due`` to the last start."""
    points = [due, *sorted(starts)]
    return max((b - a for a, b in itertools.pairwise(points)), default=0)
