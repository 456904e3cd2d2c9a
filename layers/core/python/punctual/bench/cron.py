"""Micro-benchmark: next-fire computations per second, ours against plain croniter.

Measures three ways of answering "when does this job fire next after t?" over the same mix of
expressions, time zones (UTC, America/New_York, Europe/Berlin) and instants across 2026:

* ``cached``: :func:`punctual.scheduling.cron.next_fire` (compiled once per expression and zone);
* ``croniter_new``: a new ``croniter(expr, start_dt)`` and ``get_next`` per call;
* ``croniter_reused``: one croniter per (expression, zone), ``set_current`` + ``get_next``.

Only measures; asserts nothing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter

from punctual.scheduling.cron import next_fire

EXPRESSIONS = ("*/5 * * * *", "0 9 * * MON-FRI", "30 2 * * *", "0 0 1 * *", "15,45 8-18 * * *", "@hourly")
ZONES = ("UTC", "America/New_York", "Europe/Berlin")
YEAR_2026_MS = (1_767_225_600_000, 1_798_761_600_000)


def _cases(n: int) -> list[tuple[str, str, int]]:
    rng = random.Random(2026)
    pairs = [(e, z) for e in EXPRESSIONS for z in ZONES]
    return [(*pairs[i % len(pairs)], rng.randrange(*YEAR_2026_MS)) for i in range(n)]


def _rate(cases: list[tuple[str, str, int]], call: Callable[[str, str, int], object]) -> float:
    start = time.perf_counter()
    for expr, zone, t in cases:
        call(expr, zone, t)
    return len(cases) / (time.perf_counter() - start)


def bench_cron(n: int = 20000) -> dict[str, float]:
    """Next-fire computations per second for each approach (``n`` calls each)."""
    cases = _cases(n)
    zones = {z: ZoneInfo(z) for z in ZONES}
    reused = {(e, z): croniter(e, datetime(2026, 1, 1, tzinfo=zones[z])) for e in EXPRESSIONS for z in ZONES}
    for expr, zone, t in cases[:100]:  # warm the compile cache, as a running scheduler has it
        next_fire(expr, zone, t)

    def new_iterator(expr: str, zone: str, t: int) -> object:
        return croniter(expr, datetime.fromtimestamp(t / 1000, zones[zone])).get_next(float)

    def reuse_iterator(expr: str, zone: str, t: int) -> object:
        it = reused[(expr, zone)]
        it.set_current(t / 1000)  # keeps the zone it was built with
        return it.get_next(float)

    cached = _rate(cases, next_fire)
    new = _rate(cases, new_iterator)
    reuse = _rate(cases, reuse_iterator)
    return {
        "cached_per_s": cached,
        "cached_us_per_call": 1e6 / cached,
        "croniter_new_per_s": new,
        "croniter_reused_per_s": reuse,
        "speedup_vs_new": cached / new,
        "speedup_vs_reused": cached / reuse,
    }
