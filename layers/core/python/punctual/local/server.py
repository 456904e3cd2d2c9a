"""The API over local HTTP: uvicorn + starlette in front of the very same resolver as Lambda.

Each HTTP request becomes an API Gateway REST (v1) proxy event, exactly the shape Lambda gets
(path, httpMethod, headers, multiValueHeaders, query strings, body, isBase64Encoded,
requestContext); :func:`punctual.api.app.handle` answers it, and the proxy response goes back
as HTTP. The server plays the role API Gateway and its authorizer play on AWS: it resolves
``Authorization: Bearer <key>`` to an owner (:class:`punctual.api.auth.ApiKeys`) and puts the
owner in ``requestContext.authorizer.principalId``. The application never sees the key.

It binds 127.0.0.1 by default; port 0 picks a free port (read it back from :attr:`LocalServer.url`).
"""

from __future__ import annotations

import base64
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from punctual.api import errors
from punctual.api.app import handle
from punctual.api.auth import ApiKeys
from punctual.api.caller import Services
from punctual.console import web as console
from punctual.errors import ConfigError

_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_STAGE = "local"


class BackgroundServer:
    """An ASGI app served on ``host:port`` from a background thread (uvicorn).

    ``start()`` returns once the socket accepts connections (or raises); ``stop()`` finishes
    in-flight requests and returns within its timeout. Usable as a context manager.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self._app = app
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> str:
        """Bind, serve in a thread, and wait until it is up. Returns the base URL."""
        sock = _listen(self.host, self._requested_port)
        self.port = sock.getsockname()[1]
        # h11 named: uvicorn's "auto" would take httptools (installed for the wire client's answers,
        # issue 28) and change how the API parses requests, which nobody measured or asked for
        config = uvicorn.Config(
            self._app, http="h11", log_config=None, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="punctual-api", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop(timeout_s=1.0)
                raise ConfigError(f"the server did not start on {self.url}")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the server to exit, let in-flight requests finish, and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True  # requests still hanging: give up on them
                self._thread.join(1.0)

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalServer(BackgroundServer):
    """The API (and the console at ``/console``) on ``host:port``, served from a background thread."""

    def __init__(self, services: Services, keys: ApiKeys, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(asgi_app(services, keys), host=host, port=port)

    def __enter__(self) -> LocalServer:
        self.start()
        return self


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Created with proto=IPPROTO_TCP on purpose: asyncio sets TCP_NODELAY
    only on such sockets, and without it every response waits ~40 ms for a delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def asgi_app(services: Services, keys: ApiKeys) -> Starlette:
    """A Starlette app that forwards every request to the API as a Lambda proxy event."""

    async def endpoint(request: Request) -> Response:
        body = await _read_body(request)
        if body is None:
            too_large = errors.RequestTooLarge(f"the body is larger than {errors.MAX_BODY_BYTES} bytes", field="body")
            return to_response(errors.lambda_response(too_large))
        owner = keys.owner_for(request.headers.get("authorization"))
        event = to_event(request, body, owner)
        result = await run_in_threadpool(handle, event, None, services)
        return to_response(result)

    async def unrouted(request: Request, exc: Exception) -> Response:
        # Starlette's own 404/405 are text/plain: a path its router cannot match (a decoded
        # newline) or a method outside _METHODS goes to the API too, which answers in its
        # error shape (route_not_found, method_not_allowed) like API Gateway's proxy resource.
        return await endpoint(request)

    return Starlette(
        # the console's static page under /console (it calls this API like any client)
        routes=[*console.routes(), Route("/{path:path}", endpoint, methods=_METHODS)],
        exception_handlers={404: unrouted, 405: unrouted},
    )


def to_event(request: Request, body: bytes, owner: str | None) -> dict[str, Any]:
    """The API Gateway REST (v1) proxy event for ``request`` (as a ``{proxy+}`` resource)."""
    # The decoded path as the server received it, as API Gateway passes it. Not request.url.path:
    # Starlette re-parses the URL with urlsplit, which drops tabs and line breaks anywhere in it
    # (so PATCH /jobs/%09 reached the API as PATCH /jobs/, the list's path, and was a 405).
    path = request.scope.get("path") or "/"
    headers = request.headers.items()  # every pair, repeated names included
    query = request.query_params.multi_items()
    text, is_base64 = _body_text(body)
    client = request.client
    context: dict[str, Any] = {
        "accountId": "000000000000",
        "apiId": "local",
        "resourceId": "local",
        "resourcePath": "/{proxy+}",
        "httpMethod": request.method,
        "path": path,
        "stage": _STAGE,
        "requestId": str(uuid.uuid4()),
        "requestTimeEpoch": int(time.time() * 1000),
        "protocol": f"HTTP/{request.scope.get('http_version', '1.1')}",
        "domainName": request.url.netloc,
        "identity": {
            "sourceIp": client.host if client else "127.0.0.1",
            "userAgent": request.headers.get("user-agent"),
        },
    }
    if owner is not None:
        context["authorizer"] = {"principalId": owner}
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": request.method,
        "headers": dict(headers) or None,
        "multiValueHeaders": _multi(headers) or None,
        "queryStringParameters": dict(query) or None,
        "multiValueQueryStringParameters": _multi(query) or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": context,
        "body": text,
        "isBase64Encoded": is_base64,
    }


def to_response(result: Mapping[str, Any]) -> Response:
    """The HTTP response for a Lambda proxy response (single and multi-value headers merged)."""
    raw = result.get("body") or ""
    content = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
    response = Response(content=content, status_code=int(result.get("statusCode", 500)))
    multi = result.get("multiValueHeaders") or {}
    headers: dict[str, list[str]] = {str(k): [str(v) for v in vs] for k, vs in multi.items()}
    for name, value in (result.get("headers") or {}).items():
        headers.setdefault(str(name), [str(value)])
    for name, values in headers.items():
        if name.lower() == "content-length":
            continue  # starlette computes it from the content
        response.raw_headers.extend((name.lower().encode("latin-1"), v.encode("latin-1")) for v in values)
    return response


async def _read_body(request: Request) -> bytes | None:
    """The body, or None once it exceeds ``MAX_BODY_BYTES`` (read no further than that)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > errors.MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > errors.MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _body_text(body: bytes) -> tuple[str | None, bool]:
    """API Gateway sends text bodies as they are and binary ones base64-encoded."""
    if not body:
        return None, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True


def _multi(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    return grouped
