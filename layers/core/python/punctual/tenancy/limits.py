"""An owner's effective limits: its tenant record over the deployment's defaults (``Settings``).

A limit of None means unlimited. A field the tenant record leaves None takes the default, so an
operator sets only what differs for that owner. ``weight`` (default 1) is the owner's share of
the embedded queue's round-robin hand-out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields, replace

from punctual.clock import Clock
from punctual.config import Settings
from punctual.port import Store, Tenant

LIMIT_NAMES = ("max_jobs", "max_runs_per_minute", "max_concurrency", "api_requests_per_second")
CACHE_TTL_MS = 10_000  # how stale a worker's or the API's view of a tenant's limits may be


@dataclass(frozen=True, slots=True)
class Limits:
    max_jobs: int | None = None  # active + paused jobs; creating one more is refused (409)
    max_runs_per_minute: int | None = None  # run starts per minute; more wait for the next window
    max_concurrency: int | None = None  # runs executing at once; more wait for a slot
    api_requests_per_second: int | None = None  # API requests; more are refused (429, Retry-After)
    weight: int = 1  # share of the round-robin hand-out (embedded queue)

    @property
    def limits_starts(self) -> bool:
        """True if the lease path has anything to check (and to write) for this owner."""
        return self.max_concurrency is not None or self.max_runs_per_minute is not None


UNLIMITED = Limits()


def defaults_from(settings: Settings) -> Limits:
    """The deployment's defaults (``PUNCTUAL_TENANT_MAX_JOBS`` ...): the limits of owners with no record."""
    return Limits(
        max_jobs=settings.tenant_max_jobs,
        max_runs_per_minute=settings.tenant_max_runs_per_minute,
        max_concurrency=settings.tenant_max_concurrency,
        api_requests_per_second=settings.tenant_api_requests_per_second,
    )


def effective(tenant: Tenant | None, defaults: Limits) -> Limits:
    """``tenant``'s limits, each field it leaves None taken from ``defaults``."""
    if tenant is None:
        return defaults
    values = {name: getattr(tenant, name) for name in LIMIT_NAMES if getattr(tenant, name) is not None}
    return replace(defaults, weight=tenant.weight, **values)


def as_dict(limits: Limits) -> dict[str, int | None]:
    return {f.name: getattr(limits, f.name) for f in fields(limits)}


class LimitCache:
    """Effective limits per owner, read from the store at most once per ``ttl_ms`` per owner.

    Hot paths (every lease, every API request) read limits; a read per run would double the
    store's read load for nothing (operators change limits rarely). A change takes effect within
    ``ttl_ms``. Thread-safe.
    """

    def __init__(self, store: Store, defaults: Limits, clock: Clock, *, ttl_ms: int = CACHE_TTL_MS) -> None:
        self.store, self.defaults, self.clock, self.ttl_ms = store, defaults, clock, ttl_ms
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[int, Limits]] = {}

    def get(self, owner: str) -> Limits:
        now = self.clock.now_ms()
        # No lock to read: a dict lookup is atomic, and this runs for every run a worker leases and
        # settles (a lock taken by several threads per run showed up as GIL hand-offs in profiles).
        hit = self._cached.get(owner)
        if hit is not None and hit[0] > now:
            return hit[1]
        limits = effective(self.store.get_tenant(owner), self.defaults)
        with self._lock:
            if len(self._cached) > 100_000:  # bounded: owners come and go
                self._cached.clear()
            self._cached[owner] = (now + self.ttl_ms, limits)
        return limits
