"""``api``: the API entry point (punctual.api.app.handle) over both engines, one owner per call.

Every test that takes ``api`` runs on the embedded engine (SQLite under tmp_path) and on the aws
engine (moto in-process), from tests/conftest.py's ``engine`` fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.port import Engine

OWNER = "review-owner"
TARGET = {"type": "http", "url": "https://example.com/hook"}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def fields(self) -> list[str]:
        return [d.get("field") for d in (self.body or {}).get("details", [])]


@dataclass
class Api:
    engine: Engine
    call: Callable[..., Answer]


def api_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    owner: str = OWNER,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "httpMethod": method,
        "path": path,
        "resource": path,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": raw if raw is not None else (None if body is None else json.dumps(body)),
        "isBase64Encoded": False,
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "requestContext": {
            "authorizer": {"principalId": owner},
            "stage": "test",
            "requestId": "req",
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
        },
    }


@pytest.fixture
def api(engine: Engine, tmp_path: Path, clock: ManualClock) -> Api:
    # loopback allowed (as under punctual dev), so a test can receive a worker's request on 127.0.0.1
    settings = Settings(data_dir=str(tmp_path), shards=4, target_allow_loopback=True)
    services = Services.of(engine, settings, clock)

    def call(
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: str | None = None,
        owner: str = OWNER,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        response = handle(api_event(method, path, body, raw=raw, owner=owner, headers=headers), None, services)
        text = response.get("body")
        return Answer(response["statusCode"], json.loads(text) if text else None, response.get("headers") or {})

    return Api(engine, call)
