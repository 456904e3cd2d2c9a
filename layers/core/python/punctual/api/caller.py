"""Who a route acts for: the :class:`Services` and owner ``punctual.api.app.handle`` put in the
resolver's context.

Every router of the API (jobs in ``app``, ``alerts``, ``stats``, ``tenants``, ``signing``) reads them
through :func:`caller`, typed, so a request without services (a wiring bug: 500) or without an owner
(401) is refused the same way everywhere, and no route reaches into the services with ``getattr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from punctual.clock import Clock
from punctual.config import Settings
from punctual.errors import ConfigError, Unauthorized
from punctual.metrics import Metrics
from punctual.port import Engine, Keys, Queue, SkewSource, Store
from punctual.tenancy.api_rate import ApiRateLimiter
from punctual.tenancy.limits import LimitCache, defaults_from


@dataclass(frozen=True, slots=True)
class Services:
    """What a request needs: the engine's store and queue, a clock, and the settings; for
    ``GET /stats`` also the dead-letter queue and the engine's service clock (aws only)."""

    store: Store
    queue: Queue
    clock: Clock
    settings: Settings
    dead_letters: Queue | None = None
    skew: SkewSource | None = None
    keys: Keys | None = None  # seals secret headers; signing secrets (GET /signing-secret)
    limits: LimitCache | None = None  # owners' tenant limits, cached (None: read per request)
    api_rate: ApiRateLimiter | None = None  # api_requests_per_second (None: not applied)
    metrics: Metrics | None = None  # counts the runs a trigger dispatches (punctual dev's status line)

    @classmethod
    def of(cls, engine: Engine, settings: Settings, clock: Clock, metrics: Metrics | None = None) -> Services:
        limits = LimitCache(engine.store, defaults_from(settings), clock)
        return cls(
            store=engine.store,
            queue=engine.queue,
            clock=clock,
            settings=settings,
            dead_letters=engine.dead_letters,
            skew=engine.clock_skew,
            keys=engine.keys,
            limits=limits,
            api_rate=ApiRateLimiter(limits, clock),
            metrics=metrics,
        )


def caller(context: Mapping[str, Any]) -> tuple[Services, str]:
    """The services and owner of the current request; raises ConfigError or Unauthorized."""
    services = context.get("services")
    if not isinstance(services, Services):
        raise ConfigError("the API was called without services; call punctual.api.app.handle")
    owner = context.get("owner")
    if not owner:
        raise Unauthorized("authentication required")
    return services, str(owner)
