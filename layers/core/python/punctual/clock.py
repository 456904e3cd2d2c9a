"""Time, injected.

All protocol code takes ``now`` as epoch milliseconds from a :class:`Clock`. Correctness never
depends on clocks (only conditional writes decide); time only decides *when* something happens.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Current time as integer epoch milliseconds (UTC)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall clock, optionally corrected by a measured skew (see the scheduler's skew estimator)."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to: for tests and simulations."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, ms: int) -> None:
        self._now = ms

    def sleep(self, seconds: float) -> None:
        self._now += int(seconds * 1000)


def to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def from_datetime(value: datetime) -> int:
    """Epoch ms of an aware datetime (naive datetimes are refused by the models before this)."""
    return int(value.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    """ISO 8601 UTC with milliseconds and a ``Z`` suffix, as every API response shows times."""
    if ms is None:
        return None
    return to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
