"""Metrics, injected: Powertools Metrics on Lambda, an in-memory sink locally.

Names are shared with the CloudWatch dashboard and alarms (``infra/``), so they live here once.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Protocol

RUNS_DISPATCHED = "RunsDispatched"  # runs sent to the queue: the scheduler's, released dependents, triggers (dev)
RUNS_SUCCEEDED = "RunsSucceeded"
RUNS_FAILED = "RunsFailed"
RUNS_DEAD = "RunsDead"
DISPATCH_LATENESS_MS = "DispatchLatenessMs"
SCHEDULER_SKEW_MS = "SchedulerSkewMs"
CLAIM_CONFLICTS = "ClaimConflicts"
SHARDS_OWNED = "ShardsOwned"  # gauge, once per 10 s window: the shards held as it began (SHARDS_OWNED_EVERY_MS)
# The scheduler's health (punctual.scheduling.health), reported after every tick of its loop:
SCHEDULER_TICK_FAILURES = "SchedulerTickFailures"  # count: ticks in which a claim failed, or that failed
SCHEDULER_FAILED_TICKS_IN_A_ROW = "SchedulerFailedTicksInARow"  # gauge: 0 after a tick that fully succeeded
CLAIM_LAG_MS = "ClaimLagMs"  # gauge: now - the oldest due next_run_at no claim has taken, over owned shards
# a first attempt's start - its instant (scheduled_at + the job's jitter); not for starts that waited
# for their owner's limits (punctual.execution.leasing.observe_start)
START_LATENESS_MS = "StartLatenessMs"


class Metrics(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...

    def observe(self, name: str, value: float) -> None:
        """One sample of a distribution (milliseconds), e.g. dispatch lateness."""
        ...

    def gauge(self, name: str, value: float) -> None: ...


class InMemoryMetrics:
    """Counters, last gauge values and a bounded reservoir of recent samples per name (thread-safe)."""

    def __init__(self, reservoir: int = 20_000) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, float] = defaultdict(float)
        self.gauges: dict[str, float] = {}
        self.samples: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=reservoir))

    def count(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.counters[name] += value

    def observe(self, name: str, value: float) -> None:
        with self._lock:
            self.samples[name].append(value)

    def gauge(self, name: str, value: float) -> None:
        with self._lock:
            self.gauges[name] = value

    def percentile(self, name: str, q: float) -> float | None:
        with self._lock:
            values = sorted(self.samples.get(name, ()))
        return percentile(values, q)

    def summary(self) -> str:
        """One readable line, for the ``punctual dev`` status output."""
        parts = [f"{k}={v:g}" for k, v in sorted(self.counters.items())]
        parts += [f"{k}={v:g}" for k, v in sorted(self.gauges.items())]
        for name in sorted(self.samples):
            p50, p99 = self.percentile(name, 50), self.percentile(name, 99)
            if p50 is not None and p99 is not None:
                parts.append(f"{name} p50={p50:.0f} p99={p99:.0f}")
        return " ".join(parts) or "no activity yet"


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[rank]
