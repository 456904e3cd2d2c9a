"""Serving the console's static page under ``/console`` (Starlette routes).

Every path under ``/console`` that is not an asset answers the same ``index.html`` (the page routes
in the browser: ``/console/jobs/<id>``, ``/console/runs/<id>``, ``/console/ops``). Every answer
carries the security headers: a CSP that allows only this origin's scripts, styles, images and API
calls (no inline script or style, no ``eval``), no framing, no referrer, no MIME sniffing. The API
key (or the signing proxy's token) travels in the URL fragment, which browsers never send to a
server, so it appears in no request line, log or Referer.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

STATIC_DIR = Path(__file__).parent / "static"
PREFIX = "/console"

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def routes() -> list[BaseRoute]:
    """The console's routes, to put before an app's catch-all route."""
    return [
        Route(PREFIX, _redirect, methods=["GET", "HEAD"]),
        Mount(f"{PREFIX}/assets", app=_Secured(StaticFiles(directory=STATIC_DIR, follow_symlink=False))),
        Route(f"{PREFIX}/{{path:path}}", _page, methods=["GET", "HEAD"]),
    ]


async def _redirect(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/", status_code=308, headers=SECURITY_HEADERS)


async def _page(request: Request) -> Response:
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=headers)


class _Secured:
    """Adds :data:`SECURITY_HEADERS` to every response of the wrapped ASGI app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))  # type: ignore[call-overload]
                raw += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]
