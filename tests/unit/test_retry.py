"""Retry rules (punctual.runs.retry): verdicts, exponential backoff with jitter, status classification."""

from __future__ import annotations

import pytest

from punctual.model import RetryPolicy
from punctual.runs.retry import (
    MAX_VISIBILITY_S,
    Jitter,
    Verdict,
    backoff_ms,
    http_status_retryable,
    jitter_fraction,
    verdict,
    visibility_s,
)

pytestmark = pytest.mark.unit

POLICY = RetryPolicy(backoff_s=10, max_backoff_s=600)


@pytest.mark.parametrize(
    ("ok", "retryable", "attempt", "max_retries", "expected"),
    [
        (True, False, 1, 0, Verdict.SUCCEEDED),
        (True, True, 9, 3, Verdict.SUCCEEDED),
        (False, False, 1, 5, Verdict.FAILED),  # retrying cannot fix it, however many retries are left
        (False, True, 1, 3, Verdict.RETRY),
        (False, True, 3, 3, Verdict.RETRY),  # attempt <= max_retries
        (False, True, 4, 3, Verdict.DEAD),  # the (max_retries + 1)th attempt was the last
        (False, True, 1, 0, Verdict.DEAD),
    ],
)
def test_verdict(ok, retryable, attempt, max_retries, expected):
    assert verdict(ok=ok, retryable=retryable, attempt=attempt, max_retries=max_retries) is expected


def test_a_job_that_always_fails_gets_exactly_max_retries_plus_one_attempts():
    for max_retries in range(0, 6):
        attempts = 1
        while verdict(ok=False, retryable=True, attempt=attempts, max_retries=max_retries) is Verdict.RETRY:
            attempts += 1
        assert attempts == max_retries + 1


def test_backoff_doubles_per_attempt_and_is_capped():
    waits = [backoff_ms(POLICY, n, key="run", jitter=Jitter.NONE) for n in range(1, 10)]
    assert waits == [10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000, 600_000]


def test_backoff_survives_absurd_attempt_numbers():
    assert backoff_ms(POLICY, 10_000, key="run", jitter=Jitter.NONE) == 600_000


@pytest.mark.parametrize("attempt", [1, 2, 3, 6, 7, 12])
def test_jittered_backoff_stays_within_20_percent_and_under_the_cap(attempt):
    base = min(10 * 2 ** (attempt - 1), 600) * 1000
    for key in (f"run_{i}" for i in range(200)):
        wait = backoff_ms(POLICY, attempt, key=key)
        assert 0.8 * base <= wait <= min(1.2 * base, 600_000)


def test_deterministic_jitter_repeats_and_spreads_runs():
    assert backoff_ms(POLICY, 2, key="run_a") == backoff_ms(POLICY, 2, key="run_a")
    spread = {backoff_ms(POLICY, 2, key=f"run_{i}") for i in range(100)}
    assert len(spread) > 50  # a burst of failures does not retry in lockstep


def test_random_jitter_uses_the_given_source():
    assert jitter_fraction("k", 1, Jitter.RANDOM, rng=lambda: 0.0) == pytest.approx(-0.2)
    assert jitter_fraction("k", 1, Jitter.RANDOM, rng=lambda: 0.5) == pytest.approx(0.0)
    assert backoff_ms(POLICY, 1, key="k", jitter=Jitter.RANDOM, rng=lambda: 0.0) == 8_000


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599, 408, 409, 425, 429])
def test_retryable_statuses(status):
    assert http_status_retryable(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 413, 422, 301, 302, 307])
def test_statuses_that_retrying_cannot_fix(status):
    assert not http_status_retryable(status)


@pytest.mark.parametrize(
    ("delay_ms", "seconds"),
    [(-5_000, 1), (0, 1), (1, 1), (999, 1), (1_000, 1), (1_001, 2), (10**12, MAX_VISIBILITY_S)],
)
def test_visibility_is_whole_seconds_rounded_up_and_bounded(delay_ms, seconds):
    assert visibility_s(delay_ms) == seconds
