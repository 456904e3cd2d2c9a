"""``punctual console --api-url URL``: the console on 127.0.0.1, in front of any deployment's API.

The page is served as by ``punctual dev``; every other request is forwarded to ``URL`` with the
caller's credentials added here, never in the browser:

- a deployed stack (API Gateway with IAM authorization): each request is signed with SigV4,
  service ``execute-api``, with the AWS credentials botocore finds (environment, profile, SSO,
  instance role), refreshed as they rotate;
- an API that takes API keys (``punctual api``, ``punctual dev``): ``Authorization: Bearer <key>``.

A browser page on any other site could send requests to a local port, and the proxy would sign
them. So the proxy forwards only requests that carry its session token (``Authorization: Bearer
<token>``; a cross-site page cannot set that header without a CORS preflight, which is never
answered) and name this server in ``Host`` (against DNS rebinding). The token is random per run and
travels to the page in the URL fragment of the printed ``Console:`` line, like the local API key.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from punctual.api import errors
from punctual.console import web
from punctual.errors import ConfigError

SERVICE = "execute-api"
FORWARDED_REQUEST_HEADERS = ("accept", "content-type", "idempotency-key")
FORWARDED_RESPONSE_HEADERS = ("content-type", "location", "retry-after", "idempotent-replayed")
UPSTREAM_TIMEOUT_S = 30.0
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


class Signer(Protocol):
    """Adds the caller's credentials to an outgoing request's headers (in place)."""

    def __call__(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None: ...


class SigV4Signer:
    """SigV4 for API Gateway (``execute-api``) with credentials from a botocore credential provider.

    ``credentials`` is a botocore ``Credentials`` (e.g. ``boto3.Session().get_credentials()``); its
    frozen view is taken per request, so refreshable credentials rotate without a restart.
    """

    def __init__(self, credentials: Any, region: str) -> None:
        if credentials is None:
            raise ConfigError("no AWS credentials found: configure a profile, environment or role (as for the AWS CLI)")
        self.credentials = credentials
        self.region = region

    def __call__(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        frozen = self.credentials.get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(frozen, SERVICE, self.region).add_auth(request)
        headers.update({k: str(v) for k, v in request.headers.items()})


class BearerSigner:
    """An API key, for an API that takes keys (``punctual api``)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        headers["Authorization"] = f"Bearer {self.key}"


def region_of(api_url: str) -> str | None:
    """The region in an API Gateway URL (``https://<id>.execute-api.<region>.amazonaws.com/...``)."""
    match = _EXECUTE_API_HOST.match(urlsplit(api_url).hostname or "")
    return match.group(1) if match else None


def new_token() -> str:
    return secrets.token_urlsafe(32)


def proxy_app(
    api_url: str,
    signer: Signer,
    token: str,
    *,
    allowed_hosts: Callable[[], set[str]],
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """The console's routes plus a forwarding route for everything else (see the module docstring).

    ``allowed_hosts`` returns the ``Host`` values this server answers to (known once it listens).
    """
    base = api_url.rstrip("/")
    client = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT_S, transport=transport, follow_redirects=False)

    async def forward(request: Request) -> Response:
        if request.headers.get("host", "") not in allowed_hosts():
            return _error(403, "forbidden", "this console proxy answers only to its own address")
        presented = request.headers.get("authorization", "")
        if not hmac.compare_digest(presented.encode(), f"Bearer {token}".encode()):
            return _error(401, "unauthorized", "open the console with the link `punctual console` printed")
        body = await request.body()
        if len(body) > errors.MAX_BODY_BYTES:
            return _error(413, "request_too_large", f"the body is larger than {errors.MAX_BODY_BYTES} bytes")
        url = base + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
        headers["host"] = urlsplit(base).netloc
        signer(request.method, url, headers, body)
        try:
            upstream = await client.request(request.method, url, headers=headers, content=body)
        except httpx.HTTPError as exc:
            return _error(502, "bad_gateway", f"the API at {base} did not answer: {type(exc).__name__}")
        kept = {k: v for k, v in upstream.headers.items() if k.lower() in FORWARDED_RESPONSE_HEADERS}
        return Response(content=upstream.content, status_code=upstream.status_code, headers=kept)

    routes = [*web.routes(), Route("/{path:path}", forward, methods=_METHODS)]
    return Starlette(routes=routes)  # the client lives as long as the process (lifespan is off)


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"code": code, "message": message, "details": []}, status_code=status)
