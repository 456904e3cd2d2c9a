"""The local stack over real HTTP: the API server on 127.0.0.1 (port 0), on both engines.

``stack`` is module-scoped and parametrized: every test that takes it runs once against the
embedded engine (SQLite under tmp_path) and once against the aws engine (DynamoDB + SQS on a
moto server bound to 127.0.0.1, port 0). Tests isolate themselves by owner: each ``client()``
is a fresh tenant with its own key, so tests never see each other's jobs.

Every response a client receives is checked against the OpenAPI document the server serves
(:class:`Contract`): its status must be documented for the route, and its body must validate
against the documented schema. So every API test is also a contract test.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from punctual.api.auth import ApiKeys
from punctual.api.caller import Services
from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.local.server import LocalServer
from punctual.port import Engine

HTTP_TIMEOUT_S = 10.0
ADMIN_OWNER = "operator"  # the one owner the admin routes answer (Settings.admin_principals)
# Answers the API gives outside any documented operation: unknown route, wrong method, and the
# edge checks that come before routing. They must still have the error shape.
UNROUTED_STATUSES = frozenset({401, 404, 405, 413, 415})
DOCUMENTATION_PATHS = frozenset({"/openapi.json", "/docs"})  # served, but not operations of the API


@dataclass
class Recorded:
    method: str
    path: str
    template: str | None
    status: int


class Contract:
    """The served OpenAPI document, and a check of responses against it."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.recorded: list[Recorded] = []
        # Static templates first, so /jobs never matches as a {job_id}.
        templates = sorted(document["paths"], key=lambda t: (t.count("{"), t))
        self._routes: list[tuple[str, re.Pattern[str]]] = [
            # \Z, not $ (which also matches before a final newline: /jobs/%0A is no path of /jobs)
            (str(t), re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", t) + "/?\\Z"))
            for t in templates
        ]

    def template_for(self, method: str, path: str) -> str | None:
        for template, pattern in self._routes:
            if pattern.match(path) and method.lower() in self.document["paths"][template]:
                return template
        return None

    def check(self, method: str, path: str, response: httpx.Response) -> None:
        """Assert ``response`` is what the document promises for ``method path``."""
        template = self.template_for(method, path)
        self.recorded.append(Recorded(method, path, template, response.status_code))
        if template is None and path in DOCUMENTATION_PATHS and response.status_code == 200:
            return
        if template is None:
            assert response.status_code in UNROUTED_STATUSES, f"{method} {path}: {response.status_code} off-route"
            self.validate(response.json(), {"$ref": "#/components/schemas/ErrorBody"}, f"{method} {path}")
            return
        operation = self.document["paths"][template][method.lower()]
        documented = operation["responses"].get(str(response.status_code))
        assert documented is not None, (
            f"{method} {template} answered {response.status_code}, which its OpenAPI operation does not document "
            f"(documented: {sorted(operation['responses'])}); body: {response.text[:300]}"
        )
        media = (documented.get("content") or {}).get("application/json")
        if media is None:
            assert response.content == b"", f"{method} {template} {response.status_code} should have no body"
            return
        self.validate(response.json(), media["schema"], f"{method} {template} {response.status_code}")

    def validate(self, body: Any, schema: dict[str, Any], where: str) -> None:
        # The document's components sit at the root, so "#/components/schemas/X" refs resolve.
        root = {"components": self.document.get("components", {}), **schema}
        errors = sorted(Draft202012Validator(root, format_checker=FormatChecker()).iter_errors(body), key=str)
        assert not errors, f"{where}: body does not match its schema: {errors[0].message} at {list(errors[0].path)}"


class ApiClient:
    """An HTTP client for one owner; every response is checked against the contract."""

    def __init__(self, base_url: str, key: str | None, contract: Contract, owner: str | None = None) -> None:
        self.owner = owner
        self.key = key
        self.contract = contract
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=HTTP_TIMEOUT_S)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, path, **kwargs)
        self.contract.check(method, httpx.URL(path).path, response)
        return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)

    def create(self, **overrides: Any) -> dict[str, Any]:
        """Create a job from :func:`cron_spec` with ``overrides``; assert 201 and return it."""
        response = self.post("/jobs", json=cron_spec(**overrides))
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def job_ids(self) -> list[str]:
        """Every job id this owner can list (all statuses), paging to the end."""
        found: list[str] = []
        for status in ("active", "paused", "completed", "deleted"):
            cursor = None
            for _ in range(100):  # bounded: tests create tens of jobs at most
                params = {"status": status, "limit": 100, **({"cursor": cursor} if cursor else {})}
                page = self.get("/jobs", params=params).json()
                found += [j["id"] for j in page["items"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
        return sorted(found)

    def close(self) -> None:
        self.http.close()


@dataclass
class Stack:
    """A running local API on one engine."""

    name: str
    url: str
    engine: Engine
    settings: Settings
    clock: SystemClock  # the API's clock; tests may move its offset_ms forward
    keys: ApiKeys
    contract: Contract
    clients: list[ApiClient] = field(default_factory=list)

    def client(self, owner: str | None = None) -> ApiClient:
        """A client for a fresh owner (or ``owner``), with a key the server accepts."""
        owner = owner or f"owner-{uuid.uuid4().hex[:12]}"
        key = f"key-{uuid.uuid4().hex}"
        self.keys.add(key, owner)
        return self._track(ApiClient(self.url, key, self.contract, owner))

    def anonymous(self, key: str | None = None) -> ApiClient:
        """A client without a valid key (``key`` is sent as given, if any)."""
        return self._track(ApiClient(self.url, key, self.contract))

    def _track(self, client: ApiClient) -> ApiClient:
        self.clients.append(client)
        return client


def cron_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "nightly-report",
        "schedule": "0 * * * *",
        "timezone": "Europe/Berlin",
        "payload": {"any": "json"},
        "timeout_s": 300,
        "max_retries": 3,
        "jitter_s": 0,
        "target": {"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {}},
    }
    spec.update(overrides)
    return {k: v for k, v in spec.items() if v is not None}


@pytest.fixture(scope="module", params=["embedded", "aws"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    opener = _open_embedded if request.param == "embedded" else _open_aws
    with pytest.MonkeyPatch.context() as env:
        engine, settings, stop_backend = opener(tmp_path_factory.mktemp(request.param), env)
        keys = ApiKeys()
        clock = SystemClock()
        server = LocalServer(Services.of(engine, settings, clock), keys, host="127.0.0.1", port=0)
        url = server.start(timeout_s=10.0)
        stack: Stack | None = None
        try:
            document = httpx.get(f"{url}/openapi.json", timeout=HTTP_TIMEOUT_S).json()
            stack = Stack(request.param, url, engine, settings, clock, keys, Contract(document))
            yield stack
        finally:
            for client in stack.clients if stack else []:
                client.close()
            server.stop(timeout_s=5.0)
            engine.close()
            stop_backend()


def _open_embedded(tmp: Path, env: pytest.MonkeyPatch) -> tuple[Engine, Settings, Callable[[], None]]:
    from punctual.engines.embedded import EmbeddedEngine

    settings = Settings(data_dir=str(tmp), shards=4, admin_principals=ADMIN_OWNER)
    engine = EmbeddedEngine(tmp / "punctual.db", shards=settings.shards, clock=SystemClock())
    return engine, settings, lambda: None


def _open_aws(tmp: Path, env: pytest.MonkeyPatch) -> tuple[Engine, Settings, Callable[[], None]]:
    from moto.server import ThreadedMotoServer

    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    # boto3 reads the endpoint when a client is made (lazily); keep it set while the module runs.
    env.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    prefix = f"e2e{uuid.uuid4().hex[:8]}"
    settings = ensure_resources(
        Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=prefix, admin_principals=ADMIN_OWNER)
    )
    engine = AwsEngine(settings, clock=SystemClock(), serialize=True)
    return engine, settings, moto.stop


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error body, asserting it has our shape."""
    body: dict[str, Any] = response.json()
    assert set(body) == {"code", "message", "details"}, body
    assert isinstance(body["details"], list)
    return body


def fields_of(response: httpx.Response) -> list[str]:
    return [d["field"] for d in error_of(response)["details"]]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
