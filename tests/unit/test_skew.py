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
