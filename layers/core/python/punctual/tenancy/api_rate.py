"""``api_requests_per_second``: a token bucket per owner, in the API process.

An owner with a limit of R may send R requests in any one second, then R per second (the bucket
holds R tokens and refills at R per second). A request finding the bucket empty is refused with
429 and ``Retry-After`` (whole seconds until a token is back, at least 1).

The buckets live in memory: exact for the local server (one process), per execution environment
on Lambda, where API Gateway's per-client throttling is the deployment-wide bound (see
docs/decisions/0081). Owners without a limit get no bucket.
"""

from __future__ import annotations

import math
import threading

from punctual.clock import Clock
from punctual.errors import TooManyRequests
from punctual.tenancy.limits import LimitCache

MAX_BUCKETS = 100_000  # owners remembered at once; beyond it the idle buckets are dropped (they were full)


class ApiRateLimiter:
    def __init__(self, limits: LimitCache, clock: Clock) -> None:
        self.limits, self.clock = limits, clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, int]] = {}  # owner -> (tokens, at epoch ms)

    def check(self, owner: str) -> None:
        """Take one token of ``owner``'s bucket; raises :class:`TooManyRequests` if there is none."""
        rate = self.limits.get(owner).api_requests_per_second
        if rate is None:
            return
        now = self.clock.now_ms()
        with self._lock:
            tokens, at = self._buckets.get(owner, (float(rate), now))
            tokens = min(float(rate), tokens + max(0, now - at) * rate / 1000)
            if tokens >= 1:
                if len(self._buckets) >= MAX_BUCKETS and owner not in self._buckets:
                    self._buckets.clear()
                self._buckets[owner] = (tokens - 1, now)
                return
            self._buckets[owner] = (tokens, now)
        retry_after = max(1, math.ceil((1 - tokens) / rate))
        raise TooManyRequests(
            f"more than {rate} requests per second (this owner's api_requests_per_second); retry in {retry_after} s",
            retry_after_s=retry_after,
        )
