"""Delivering the notifications runs owe their jobs' ``notify`` webhooks (``punctual.runs.outcomes``):
the reaper drains the outbox after each of its ticks (:class:`Notifier`, ``punctual.reaping.reaper``).

Each try is one POST of the notification's body (JSON) to its ``url`` through the HTTP target's
client (``punctual.execution.targets.http``): under the same target policy (the SSRF guard, checked
again at every try), signed as a target call is (``Punctual-Signature``, v2, with the owner's signing
secret), with the headers every call carries: ``Idempotency-Key`` and ``X-Punctual-Run-Id`` are the
run's id (one notification per run: a receiver deduplicates on it), ``X-Punctual-Attempt`` the try's
number. Its outcome is appended to the notification (a compare-and-set on the tries seen), which is
what ``GET /runs/{id}`` shows as the run's notification log:

- 2xx: delivered;
- an answer sending again cannot fix (a 4xx other than 408/409/425/429, a redirect, an address the
  policy refuses, a URL no request can be built from): failed, at once;
- anything else: tried again after a backoff (30 s, doubling, capped at an hour, spread ±20 %), at
  most ``max_tries`` times in all (over about an hour with the defaults), then failed.

Delivery is at least once: a reaper that dies between the POST and the record leaves the
notification pending, and it is sent again; two reapers that read it at once may both send it, and
one records its try.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from punctual.execution.targets import http
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.types import Invocation, TargetResult
from punctual.model import (
    MAX_ERROR_CHARS,
    HttpTarget,
    Notification,
    NotificationState,
    NotificationTry,
    RetryPolicy,
    Signatures,
    truncate,
)
from punctual.port import Keys, Store
from punctual.runs.retry import Jitter, backoff_ms

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NotifyOptions:
    timeout_s: float = 5.0  # one try, connection and answer
    max_tries: int = 8
    backoff: RetryPolicy = field(default_factory=lambda: RetryPolicy(backoff_s=30, max_backoff_s=3_600))
    batch: int = 64  # notifications tried per round, at most
    # tries in flight at once: a round lasts batch / concurrency x timeout_s at worst (20 s)
    concurrency: int = 16
    jitter: Jitter = Jitter.DETERMINISTIC


@dataclass(slots=True)
class NotifyStats:
    tried: int = 0
    delivered: int = 0
    failed: int = 0  # given up
    conflicts: int = 0  # tries another reaper recorded first


class Notifier:
    """Tries the due notifications of a store (see the module docstring). ``keys`` sign the calls
    (the engine's: each owner's signing secret), ``policy`` bounds where they may go."""

    def __init__(self, keys: Keys | None, policy: TargetPolicy, options: NotifyOptions | None = None) -> None:
        self.keys, self.policy = keys, policy
        self.options = options or NotifyOptions()

    def drain(self, store: Store, now: int, *, until_ms: int | None = None) -> NotifyStats:
        """One round: every notification due by ``now`` (up to ``options.batch``, and no more than can
        be tried before ``until_ms`` at the worst) tried once and its try recorded. Storage errors of
        the listing propagate; a notification whose try or record fails is logged and left pending
        (tried again next round)."""
        stats = NotifyStats()
        batch = self.options.batch
        if until_ms is not None:  # a Lambda's remaining time: rounds of tries that may each take the timeout
            rounds = max(0, (until_ms - now) // int(self.options.timeout_s * 1000))
            batch = min(batch, rounds * self.options.concurrency)
        if batch <= 0:
            return stats
        due = store.due_notifications(now, batch)
        if not due:
            return stats
        workers = min(self.options.concurrency, len(due))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="punctual-notify") as pool:
            results = list(pool.map(self.send, due))
        for notification, result in zip(due, results, strict=True):
            stats.tried += 1
            try:
                updated = after_try(notification, result, now, self.options)
                if not store.update_notification(notification, updated):
                    stats.conflicts += 1
                elif updated.state is NotificationState.DELIVERED:
                    stats.delivered += 1
                elif updated.state is NotificationState.FAILED:
                    stats.failed += 1
                    logger.warning("notification of run %s failed for good: %s", notification.run_id, result.error)
            except Exception:  # one bad record must not keep the others from being written
                logger.exception("could not record the try of the notification of run %s", notification.run_id)
        return stats

    def send(self, notification: Notification) -> TargetResult:
        """One try of ``notification``: the signed POST of its body. Never raises."""
        try:
            secret = None if self.keys is None else self.keys.signing_secret(notification.owner)
            target = HttpTarget(url=notification.url, method="POST", signature=Signatures.V2)
            payload = json.loads(notification.body)
            number = len(notification.tries) + 1
            invocation = Invocation(
                notification.run_id, notification.job_id, notification.scheduled_at, number, payload, {}, secret
            )
            return http.send(target, invocation, self.policy, time.monotonic() + self.options.timeout_s)
        except Exception as exc:  # a bug or an outage of the keys: a retryable failure, logged as the try
            logger.exception("notification of run %s could not be sent", notification.run_id)
            return TargetResult(ok=False, error=f"{type(exc).__name__}: {exc}", retryable=True)


def after_try(notification: Notification, result: TargetResult, now: int, options: NotifyOptions) -> Notification:
    """``notification`` with the try of ``result`` appended: delivered, failed (not retryable, or the
    last try), or pending until its next try."""
    tries = [*notification.tries, _try(len(notification.tries) + 1, now, result)]
    if result.ok:
        state, next_at = NotificationState.DELIVERED, now
    elif not result.retryable or len(tries) >= options.max_tries:
        state, next_at = NotificationState.FAILED, now
    else:
        wait = backoff_ms(options.backoff, len(tries), key=notification.run_id, jitter=options.jitter)
        state, next_at = NotificationState.PENDING, now + wait
    return notification.model_copy(update={"tries": tries, "state": state, "next_at": next_at})


def _try(number: int, now: int, result: TargetResult) -> NotificationTry:
    error = None if result.ok else truncate(result.error or "failed", MAX_ERROR_CHARS)
    return NotificationTry(number=number, at=now, status_code=result.status_code, error=error)
