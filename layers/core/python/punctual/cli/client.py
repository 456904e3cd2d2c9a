"""The CLI's HTTP client for the Punctual API, and where it finds the API's address and key.

The address comes from ``--api-url`` (env ``PUNCTUAL_URL``, default http://127.0.0.1:8080) and the
key from ``--api-key`` (env ``PUNCTUAL_API_KEY``, else the key ``punctual dev`` keeps in
``<data dir>/api-key``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import httpx

from punctual.api.auth import KEY_FILE

DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT_S = 15.0


class ApiError(Exception):
    """The API answered with an error body."""

    def __init__(self, status: int, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        self.status = status
        self.code = str(body.get("code", "http_error"))
        self.message = str(body.get("message", f"HTTP {status}"))
        self.details = [d for d in body.get("details") or [] if isinstance(d, dict)]
        super().__init__(self.message)


class CliError(Exception):
    """A problem on our side of the wire (unreachable API, unreadable --file)."""


class Client:
    """A small JSON client for the Punctual API."""

    def __init__(self, url: str, api_key: str | None, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, *, body: Any = None, params: Any = None, headers: Any = None) -> Any:
        """The decoded JSON answer (None for 204). Raises :class:`ApiError` or :class:`CliError`."""
        try:
            response = self._http.request(method, path, json=body, params=params, headers=headers)
        except httpx.ConnectError:
            raise CliError(
                f"cannot reach the Punctual API at {self.url}: is `punctual dev` running? "
                "(or set --api-url / PUNCTUAL_URL)"
            ) from None
        except httpx.TimeoutException:
            raise CliError(f"the Punctual API at {self.url} did not answer within {TIMEOUT_S:.0f} s") from None
        except httpx.HTTPError as exc:
            raise CliError(f"talking to {self.url} failed: {exc}") from None
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_error:
            raise ApiError(response.status_code, data)
        return data

    def close(self) -> None:
        self._http.close()


def api_url(args: argparse.Namespace) -> str:
    return str(args.api_url or os.environ.get("PUNCTUAL_URL") or DEFAULT_URL)


def api_key(args: argparse.Namespace) -> str | None:
    if args.api_key or os.environ.get("PUNCTUAL_API_KEY"):
        return str(args.api_key or os.environ["PUNCTUAL_API_KEY"])
    path = Path(os.environ.get("PUNCTUAL_DATA_DIR") or ".punctual") / KEY_FILE
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
