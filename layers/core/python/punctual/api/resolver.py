"""The Powertools resolver the API runs on: one request's state per request, so requests run at once.

Powertools keeps the request it resolves in shared places: the event and the Lambda context in
class attributes of ``BaseRouter`` (shared by every resolver of the process), the routing context
(``_route``, ``_route_args``, and our ``services`` and ``owner``) in one dict per resolver, and it
builds a route's middleware stack on the route's first call. Two requests resolved at once by
threads of one process (``punctual api``: uvicorn hands each request to a thread) would read each
other's event, owner and path arguments. The API used to serialize every request behind one lock
for that reason, so one owner's slow request (a graph of 1,000 jobs) delayed everyone's.

:class:`ConcurrentResolver` gives each request its own state, as Powertools' own ``HttpResolverLocal``
does for ASGI tasks: ``current_event``, ``lambda_context``, ``context`` and the debug stack frames
are properties over a ``ContextVar`` set for the duration of :meth:`ConcurrentResolver.resolve_with`
(each thread, and each call run through ``anyio``/``asyncio.to_thread``, has its own value).
A route's middleware stack is built once, under a lock. Everything else a request touches is
either per call or thread-safe: the engines' stores (the embedded engine opens one SQLite
connection per thread; boto3 clients are thread-safe), the limit cache and the API rate limiter
(locks of their own).

It also refuses query parameters that a route does not declare (422 naming them, as for a bad
value of a declared one): a misspelt ``?limt=5`` would otherwise be silently ignored.

A route matches the whole path, with at most one trailing slash. Powertools ends its patterns in
``/*$``: ``$`` also matches before a final newline and ``/*`` takes any number of slashes, so
``/jobs/%0A`` and ``/jobs/%2F`` (a job id of a newline or a slash, decoded) were the list's path,
and a ``PATCH`` or ``DELETE`` of them a 405 that the document does not list. They are now 404
(no such route), as every other job id that is not one path segment of route characters.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from punctual.errors import InvalidInput

# Query parameters Powertools' own routes read without declaring them (the Swagger UI's oauth2 page).
UNDECLARED_QUERY = {"/docs": frozenset({"format"})}


@dataclass
class _Request:
    """What Powertools keeps about the request it resolves (see the module docstring)."""

    event: BaseProxyEvent | None = None
    lambda_context: Any = None
    context: dict[str, Any] = field(default_factory=dict)
    processed_stack_frames: list[str] = field(default_factory=list)


class ConcurrentResolver(APIGatewayRestResolver):
    """An ``APIGatewayRestResolver`` whose request state is the calling request's own."""

    def __init__(self, **kwargs: Any) -> None:
        self._startup = _Request()  # before and outside requests: route registration, include_router
        self._request: ContextVar[_Request | None] = ContextVar("punctual_api_request", default=None)
        self._building = threading.Lock()
        self._declared_query: dict[int, frozenset[str]] = {}
        super().__init__(**kwargs)
        self.use(middlewares=[self._known_query_only])

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}/*$") -> re.Pattern[str]:
        """Powertools' route pattern with one trailing slash at most, anchored at the very end of
        the path (``\\Z``, not ``$``): see the module docstring."""
        pattern = APIGatewayRestResolver._compile_regex(rule, base_regex).pattern
        return re.compile(pattern.removesuffix("/*$") + "/?\\Z" if pattern.endswith("/*$") else pattern)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        return self.resolve_with(event, context)

    def resolve_with(self, event: Mapping[str, Any], lambda_context: Any, **context: Any) -> dict[str, Any]:
        """:meth:`resolve` ``event`` with ``context`` in the routing context (what routes read as
        ``app.context``), all of it this request's own."""
        state = _Request(event=self._to_proxy_event(dict(event)), lambda_context=lambda_context, context=context)
        token = self._request.set(state)
        try:
            return super().resolve(event, lambda_context)
        finally:
            self._request.reset(token)

    @property
    def _state(self) -> _Request:
        return self._request.get() or self._startup

    # Powertools declares these as attributes (and assigns the event on BaseRouter, for every
    # resolver at once); as properties each request reads and writes its own.
    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        event = self._state.event
        if event is None:
            raise RuntimeError("no request is being resolved")
        return event

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        self._state.event = value

    @property  # type: ignore[override]
    def lambda_context(self) -> Any:
        return self._state.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._state.lambda_context = value

    @property  # type: ignore[override]
    def context(self) -> dict[str, Any]:
        return self._state.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._state.context = value

    @property  # type: ignore[override]
    def processed_stack_frames(self) -> list[str]:
        return self._state.processed_stack_frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._state.processed_stack_frames = value

    def _resolve(self) -> ResponseBuilder[Any]:
        """Powertools' resolution, except that a path a static route names is that route's alone: a
        method it does not take is a 405 (``punctual.api.errors``), not a dynamic route's match
        (``GET /runs/replay`` is no request for a run whose id is ``replay``)."""
        method = self.current_event.http_method.upper()
        path = self._remove_prefix(self.current_event.path)
        named = [route for route in self._static_routes if route.rule.match(path)]
        if named and all(route.method != method for route in named):
            self.append_context(_path=path)  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated
            return self._handle_not_found(method=method, path=path)
        return super()._resolve()

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        if not route._middleware_stack_built:  # built on a route's first call: once, not by two threads
            with self._building:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)
        return super()._call_route(route, route_arguments)

    def _known_query_only(self, app: APIGatewayRestResolver, next_middleware: Callable[..., Response[Any]]) -> Any:
        """Refuse the request if it names a query parameter its route does not declare (422, one
        detail per parameter). Requests that match no route go on to their 404."""
        route = self.context.get("_route")
        declared = self._declared(route) if isinstance(route, Route) else None
        if isinstance(route, Route) and declared is not None:
            event = self.current_event
            sent = {*(event.query_string_parameters or {}), *(event.multi_value_query_string_parameters or {})}
            unknown = sorted(sent - declared)
            if unknown:
                takes = ", ".join(sorted(declared)) or "no query parameters"
                message = f"unknown query parameter (this route takes: {takes})"
                raise InvalidInput(
                    f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                    f"{route.method} {route.openapi_path} takes {takes}",
                    field=unknown[0],
                    details=[{"field": name, "message": message} for name in unknown],
                )
        return next_middleware(app)

    def _declared(self, route: Route) -> frozenset[str] | None:
        """The query parameters ``route`` reads, or None for a route that is not registered (a 404)."""
        found = self._declared_query.get(id(route))
        if found is None:
            if not any(route is r for r in (*self._static_routes, *self._dynamic_routes)):
                return None
            names = frozenset(param.alias for param in route.dependant.query_params)
            found = names | UNDECLARED_QUERY.get(route.path, frozenset())
            self._declared_query[id(route)] = found
        return found
