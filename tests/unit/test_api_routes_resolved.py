"""Every route's parameters are computed when the API module loads, not on its first request: the
OpenAPI document is generated from the same objects, and a request thread computing them meanwhile
made the document's generation fail (a 500 seen by the console, which fetches both at once)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_every_route_has_its_parameters_before_any_request() -> None:
    from punctual.api.app import app

    routes = [*app._static_routes, *app._dynamic_routes]
    assert len(routes) > 20
    unresolved = [route.path for route in routes if route._dependant is None]  # a body-less route's body is None
    assert unresolved == []
