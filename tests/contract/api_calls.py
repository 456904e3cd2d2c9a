"""The HTTP API in process, for contract tests: one API Gateway event through ``punctual.api.app.handle``
on the engine under test (no server, no network)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.port import Engine


def call(
    engine: Engine, clock: ManualClock, method: str, path: str, body: Any = None, *, owner: str = "owner-a"
) -> tuple[int, Any]:
    """(status, JSON body) of one request as ``owner``; ``path`` may carry a query string."""
    services = Services.of(engine, Settings(shards=engine.store.shards), clock)
    parts = urlsplit(path)
    query = dict(parse_qsl(parts.query)) or None
    event = {
        "httpMethod": method,
        "path": parts.path,
        "resource": parts.path,
        "headers": {"Content-Type": "application/json"},
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "queryStringParameters": query,
        "multiValueQueryStringParameters": None if query is None else {k: [v] for k, v in query.items()},
        "requestContext": {
            "authorizer": {"principalId": owner},
            "stage": "test",
            "requestId": "req",
            "resourcePath": parts.path,
            "httpMethod": method,
            "path": parts.path,
        },
    }
    response = handle(event, None, services)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None
