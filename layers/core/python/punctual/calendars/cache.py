"""The scheduler's view of calendars: resolved once per ``CACHE_TTL_MS`` per calendar, not per job.

A claim plans every due job that names a calendar with that calendar's business days. Reading the
calendar (and its ``based_on`` chain) for each job would cost a read per claimed run; a calendar used
by a million jobs is read instead once per ``CACHE_TTL_MS`` by each scheduler process, whatever the
number of jobs (and an edit writes one item, never the jobs).

Staleness bound: a claim that starts ``CACHE_TTL_MS`` (10 s) after an edit was committed applies it.
A claim is made up to the scheduler's lookahead (3 s by default) before its instant, so an edit made
13 s before an instant decides that instant's run; within that window the run may follow the old
calendar. A run already claimed (its row inserted) is never decided again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from punctual.calendars.days import BusinessDays, resolve
from punctual.clock import Clock
from punctual.port import Store

CACHE_TTL_MS = 10_000
_MAX_ENTRIES = 10_000

# (owner, calendar name) -> the calendar's business days (a calendar that does not exist: none)
Calendars = Callable[[str, str], BusinessDays]


def read_business_days(store: Store, owner: str, name: str) -> BusinessDays:
    """Calendar ``name`` of ``owner`` with its bases, read from ``store`` now (no cache)."""
    return resolve(name, lambda each: store.get_calendar(owner, each))


class CalendarCache:
    """:data:`Calendars` read through a cache: each (owner, name) at most once per ``ttl_ms``. Thread-safe."""

    def __init__(self, store: Store, clock: Clock, *, ttl_ms: int = CACHE_TTL_MS) -> None:
        self.store, self.clock, self.ttl_ms = store, clock, ttl_ms
        self._lock = threading.Lock()
        self._cached: dict[tuple[str, str], tuple[int, BusinessDays]] = {}

    def __call__(self, owner: str, name: str) -> BusinessDays:
        now = self.clock.now_ms()
        hit = self._cached.get((owner, name))
        if hit is not None and hit[0] > now:
            return hit[1]
        days = read_business_days(self.store, owner, name)
        if hit is not None and hit[1] == days:
            days = hit[1]  # the same content: keep the instance (the timeline's caches are keyed on it)
        with self._lock:
            if len(self._cached) >= _MAX_ENTRIES:
                self._cached.clear()
            self._cached[(owner, name)] = (now + self.ttl_ms, days)
        return days
