"""Retry rules, as pure functions: which failures are retried, how long to wait, what a run becomes.

The worker (``punctual.execution.delivery``) and the reaper apply these; nothing here does I/O.

What a finished attempt makes of a run (``verdict``)::

    target ok ───────────────────────────────────────────────> succeeded
    target 202, job completion callback ──────────────────────> accepted (its callback ends it later)
    failure, not retryable (the target refused the run as sent) ─> failed   (terminal, owner alerted)
    failure, retryable, attempt <= max_retries ───────────────> retrying (same message, after backoff)
    failure, retryable, attempt >  max_retries ───────────────> dead     (terminal, owner alerted)

So a job that always fails retryably ends ``dead`` after exactly ``max_retries + 1`` attempts.

Backoff before attempt ``n + 1`` (after attempt ``n`` failed): ``backoff_s * 2**(n-1)``, capped at
``max_backoff_s``, spread by a jitter of ±20 % and never above the cap. Deterministic jitter (the
default) derives the spread from the run id and attempt, so a repeated computation (a retried
finish, a test) yields the same instant; random jitter is available for callers that prefer it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from enum import StrEnum

from punctual import ids, rules
from punctual.model import RetryPolicy

JITTER_FRACTION = 0.2  # backoffs are spread over [-20 %, +20 %] so retries of a burst do not align
MAX_VISIBILITY_S = 43_200  # SQS: a message can be hidden for at most 12 h

# 4xx answers that mean "try again later" rather than "this request is wrong":
# 408 Request Timeout, 409 Conflict (e.g. the same Idempotency-Key is still being processed),
# 425 Too Early, 429 Too Many Requests.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 425, 429})


class Jitter(StrEnum):
    DETERMINISTIC = "deterministic"  # spread derived from (run id, attempt): reproducible
    RANDOM = "random"  # spread drawn at random on every computation
    NONE = "none"  # exact exponential backoff (tests, or targets that want predictability)


class Verdict(StrEnum):
    SUCCEEDED = "succeeded"
    ACCEPTED = "accepted"  # a callback job's target took the work (202): the run waits for its callback
    RETRY = "retry"
    FAILED = "failed"
    DEAD = "dead"


def verdict(*, ok: bool, retryable: bool, attempt: int, max_retries: int, accepted: bool = False) -> Verdict:
    """What attempt number ``attempt`` (1-based) makes of its run, given the target's answer;
    ``accepted``: the answer accepts the work of a callback job (``execution.changes.accepts``)."""
    if ok:
        return Verdict.ACCEPTED if accepted else Verdict.SUCCEEDED
    if not retryable:
        return Verdict.FAILED
    return Verdict.RETRY if rules.attempt_allowed(attempt + 1, max_retries) else Verdict.DEAD


def backoff_ms(
    policy: RetryPolicy,
    attempt: int,
    *,
    key: str,
    jitter: Jitter = Jitter.DETERMINISTIC,
    rng: Callable[[], float] = random.random,
) -> int:
    """Milliseconds to wait after attempt ``attempt`` (1-based) failed, before the next one.

    ``key`` (the run id) seeds deterministic jitter. The result is in
    ``[0.8 * base, min(1.2 * base, max_backoff_s)]`` where ``base = min(backoff_s * 2**(attempt-1), max_backoff_s)``.
    """
    exponent = min(max(attempt, 1) - 1, 30)  # 2**30 s is far past any cap; avoids huge ints
    base_ms = min(policy.backoff_s * 2**exponent, policy.max_backoff_s) * 1000
    spread = jitter_fraction(key, attempt, jitter, rng)
    return min(int(base_ms * (1 + spread)), policy.max_backoff_s * 1000)


def jitter_fraction(key: str, attempt: int, jitter: Jitter, rng: Callable[[], float] = random.random) -> float:
    """A fraction in ``[-JITTER_FRACTION, +JITTER_FRACTION)`` for this (key, attempt)."""
    if jitter is Jitter.NONE:
        return 0.0
    unit = ids.unit_fraction(f"{key}#{attempt}") if jitter is Jitter.DETERMINISTIC else rng()
    return (2 * unit - 1) * JITTER_FRACTION


def http_status_retryable(status: int) -> bool:
    """Whether a failed HTTP answer may succeed if sent again.

    Retryable: 5xx and 408/409/425/429. Not retryable: every other 4xx (400, 401, 403, 404, 405,
    410, 413, 422, ...: the request is wrong as sent, and sending it again cannot help) and 3xx
    (redirects are not followed: following one could lead the worker to an address the target
    policy refuses).
    """
    return status >= 500 or status in RETRYABLE_CLIENT_STATUSES


def visibility_s(delay_ms: int) -> int:
    """Whole seconds (rounded up, so a message never reappears early) to hide a message for ``delay_ms``.

    At least 1 (0 would make it visible at once) and at most the SQS maximum of 12 h.
    """
    return min(max(1, math.ceil(delay_ms / 1000)), MAX_VISIBILITY_S)
