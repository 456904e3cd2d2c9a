"""Who a route acts for: the services and owner ``punctual.api.app.handle`` put in the resolver's context.

Every router of the API (jobs in ``app``, ``alerts``, ``stats``, ``tenants``, ``signing``) reads them
through :func:`caller`, so a request without services (a wiring bug: 500) or without an owner
(401) is refused the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from punctual.errors import ConfigError, Unauthorized


def caller(context: Mapping[str, Any]) -> tuple[Any, str]:
    """The services and owner of the current request; raises ConfigError or Unauthorized."""
    services: Any = context.get("services")
    if services is None or not hasattr(services, "store"):
        raise ConfigError("the API was called without services; call punctual.api.app.handle")
    owner = context.get("owner")
    if not owner:
        raise Unauthorized("authentication required")
    return services, str(owner)
