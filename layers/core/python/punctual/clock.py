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


class Skewed(Protocol):
    @property
    def skew_ms(self) -> int | None:
        """Service clock minus local clock, as last measured (None before the first measure)."""
        ...


MAX_HOLD_MS = 1_000  # a corrected clock stands still rather than step back by less than this


class SkewCorrectedClock:
    """``now`` corrected by the service's clock as measured from AWS response ``Date`` headers.

    Every component that decides *when* by the clock uses it (the scheduler, the workers, the
    reaper): a worker whose clock runs ahead would call early and take over live leases. Only
    *when* things happen depends on it; a wrong clock (±30 s) delays or advances dispatch but
    cannot create a second run: the claim's conditional writes decide that.
    """

    def __init__(self, base: Clock, source: Skewed | None) -> None:
        self.base = base
        self.source = source
        self._last = 0  # the latest reading given: small corrections never turn the clock back

    def skew(self) -> int:
        return (self.source.skew_ms or 0) if self.source is not None else 0

    def now_ms(self) -> int:
        """The corrected time. As new ``Date`` headers narrow the estimate it moves by up to a round
        trip, either way; a move back of up to :data:`MAX_HOLD_MS` holds the clock still instead (a
        time stamped a moment ago, a notification's ``next_at``, must not be in the future the next
        moment); a larger one is a stepped clock, taken at once."""
        now = self.base.now_ms() + self.skew()
        last = self._last
        if last - MAX_HOLD_MS < now < last:
            return last
        self._last = now
        return now

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)


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
