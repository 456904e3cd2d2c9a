"""The scheduler's clock follows the service clock measured from AWS ``Date`` headers."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from punctual.clock import ManualClock, SkewCorrectedClock
from punctual.engines.aws.clients import ServiceClock

pytestmark = pytest.mark.unit


def test_now_is_corrected_by_the_measured_skew() -> None:
    local = ManualClock(1_800_000_000_000)
    service = ServiceClock(wall_ms=local.now_ms)
    clock = SkewCorrectedClock(local, service)
    assert clock.now_ms() == local.now_ms()  # nothing measured yet: no correction
    # AWS's clock is 30 s ahead; responses arrive 20 ms after the request
    for step in range(8):
        sent = local.now_ms()
        local.advance(20)
        server_ms = sent + 30_000 + 10
        service.observe(formatdate(server_ms / 1000, usegmt=True), sent, local.now_ms())
        local.advance(137 * step)  # different sub-second phases narrow the bounds
    assert abs(clock.skew() - 30_000) < 1_000
    assert abs(clock.now_ms() - (local.now_ms() + 30_000)) < 1_000


class Moving:
    """A skew estimate that moves as samples arrive."""

    def __init__(self) -> None:
        self.skew_ms: int | None = 500


def test_a_narrowed_estimate_holds_the_clock_still_instead_of_turning_it_back() -> None:
    # A notification stamped at one reading must be due at the next: the estimate moving back by
    # 300 ms (a round trip) holds the clock still until the time catches up
    local = ManualClock(1_800_000_000_000)
    moving = Moving()
    clock = SkewCorrectedClock(local, moving)
    stamped = clock.now_ms()
    moving.skew_ms = 200
    assert clock.now_ms() == stamped
    local.advance(100)
    assert clock.now_ms() == stamped  # still behind the first reading
    local.advance(250)
    assert clock.now_ms() == stamped + 50  # caught up: runs again
    # a stepped clock (the estimate 30 s back) is taken at once
    moving.skew_ms = -29_800
    assert clock.now_ms() == local.now_ms() - 29_800
