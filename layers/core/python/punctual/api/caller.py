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
from punctual.dependencies.release import ReleaseOptions
from punctual.errors import ConfigError, Unauthorized
from punctual.execution.callbacks import Callbacks, Ending
from punctual.execution.options import ExecutionOptions
from punctual.metrics import Metrics
from punctual.port import Engine, Keys, Queue, SkewSource, Store
from punctual.runs.alerts import Alerter, LogAlerter
from punctual.tenancy.admission import Gate
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
    callbacks: Callbacks | None = None  # the callback routes' writes (punctual.execution.callbacks)

    @classmethod
    def of(
        cls,
        engine: Engine,
        settings: Settings,
        clock: Clock,
        metrics: Metrics | None = None,
        alerter: Alerter | None = None,
    ) -> Services:
        """``alerter``: where a run a callback ends dead or failed alerts its owner (default: the log)."""
        limits = LimitCache(engine.store, defaults_from(settings), clock)
        release = ReleaseOptions(retention_s=settings.retention_s, long_run_after_s=settings.long_run_after_s)
        ending = Ending(
            engine.store,
            engine.queue,
            alerter or LogAlerter(),
            ExecutionOptions(release=release),
            gate=Gate(engine.store, limits, clock),
            metrics=metrics,
            long_run_after_s=settings.long_run_after_s,
        )
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
            callbacks=Callbacks(ending, engine.keys, clock),
        )


def callbacks_of(context: Mapping[str, Any]) -> Callbacks:
    """The callback routes' writes of the current request (they act for no owner: the token decides)."""
    services = context.get("services")
    if not isinstance(services, Services) or services.callbacks is None:
        raise ConfigError("the API was called without services; call punctual.api.app.handle")
    return services.callbacks


def caller(context: Mapping[str, Any]) -> tuple[Services, str]:
    """The services and owner of the current request; raises ConfigError or Unauthorized."""
    services = context.get("services")
    if not isinstance(services, Services):
        raise ConfigError("the API was called without services; call punctual.api.app.handle")
    owner = context.get("owner")
    if not owner:
        raise Unauthorized("authentication required")
    return services, str(owner)
