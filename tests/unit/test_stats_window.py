"""GET /stats' windows: up to 7 days, in buckets coarse enough that a chart has at most 360 bars."""

from __future__ import annotations

import pytest

from punctual.port.stats import MAX_WINDOW_MINUTES, MINUTE_MS, bucket_minutes, window

NOW = 1_764_600_000_000 + 37 * MINUTE_MS + 12_345  # 2025-12-01 14:57:12.345 UTC


@pytest.mark.parametrize(
    ("minutes", "bucket"), [(1, 1), (60, 1), (360, 1), (361, 5), (1_440, 5), (1_441, 15), (4_320, 15), (10_080, 60)]
)
def test_the_bucket_grows_with_the_window(minutes: int, bucket: int) -> None:
    assert bucket_minutes(minutes) == bucket
    assert minutes / bucket <= 360 or (bucket == 60 and minutes <= MAX_WINDOW_MINUTES)


@pytest.mark.parametrize("minutes", [60, 1_440, 10_080])
def test_buckets_start_on_round_times_and_the_window_ends_with_the_current_minute(minutes: int) -> None:
    bucket = bucket_minutes(minutes)
    since, until = window(NOW, minutes, bucket)
    assert until == NOW - NOW % MINUTE_MS + MINUTE_MS  # the end of the current minute
    assert since % (bucket * MINUTE_MS) == 0  # a round time in UTC
    assert 0 <= until - since - minutes * MINUTE_MS < bucket * MINUTE_MS  # at least the window asked for
