"""``max_runs_per_minute`` as per-second windows: starts spread evenly over the minute.

A limit of R starts per minute gives second k of each minute (k = 0..59) the quota
``floor((k + 1) * R / 60) - floor(k * R / 60)``: the quotas of one minute add up to exactly R, and
they are spread as evenly as whole starts allow (R = 60: one start per second; R = 6: one start in
seconds 9, 19, ..., 59; R = 90: one or two per second). A burst of N due runs therefore starts at
R per minute from the first second on, rather than R at once and then nothing for a minute.

Each window is one counter (``Store.take_rate``) keyed by its epoch second, forgotten a minute
later. Only owners with a limit ever write one.
"""

from __future__ import annotations

from punctual.port import Store

WINDOW_MS = 1_000
KEEP_MS = 61_000  # a window's count is forgotten this long after it starts


def quota(limit: int, window: int) -> int:
    """Starts allowed in epoch second ``window`` for ``limit`` starts per minute."""
    k = window % 60
    return (k + 1) * limit // 60 - k * limit // 60


def next_window(limit: int, after: int) -> int:
    """The first epoch second after ``after`` whose quota is not zero."""
    for window in range(after + 1, after + 61):
        if quota(limit, window) > 0:
            return window
    raise ValueError(f"a limit of {limit} per minute allows no start in a minute")  # only for limit < 1


def take(store: Store, owner: str, limit: int, now: int) -> int | None:
    """Count one start of ``owner`` now if its window allows it: None if counted, else the epoch ms
    when the next window with room begins (the caller waits until then)."""
    window = now // WINDOW_MS
    allowed = quota(limit, window)
    if allowed > 0 and store.take_rate(owner, window, allowed, window * WINDOW_MS + KEEP_MS):
        return None
    return next_window(limit, window) * WINDOW_MS


def started_this_minute(store: Store, owner: str, limit: int, now: int) -> int:
    """Starts counted in the last 60 windows (reads only the windows that have a quota)."""
    last = now // WINDOW_MS
    return sum(store.rate_used(owner, w) for w in range(last - 59, last + 1) if quota(limit, w) > 0)
