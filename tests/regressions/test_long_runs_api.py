"""The API refuses a job ``timeout_s`` the deployment cannot serve (issue 15 item 1), on both engines:
a 422 naming ``timeout_s``, nothing written; and a trigger of a long job sends a long-run dispatch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.port import Dispatch, Engine
from tests.regressions.conftest import OWNER, TARGET, api_event

LAMBDA_MAX_S = 870


class Recording:
    """The engine's queue, remembering what was sent."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self.sent: list[Dispatch] = []

    def send(self, dispatches: list[Dispatch]) -> None:
        self.sent.extend(dispatches)
        self._queue.send(dispatches)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


@pytest.fixture
def services(engine: Engine, tmp_path: Path, clock: ManualClock) -> Services:
    settings = Settings(data_dir=str(tmp_path), shards=4, max_timeout_s=LAMBDA_MAX_S, long_run_after_s=600)
    services = Services.of(engine, settings, clock)
    return dataclasses.replace(services, queue=Recording(services.queue))


def _call(services: Services, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = handle(api_event(method, path, body), None, services)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def test_a_create_or_patch_beyond_the_deployment_limit_is_a_422_naming_timeout_s(services: Services) -> None:
    job = {"name": "nightly", "schedule": "0 3 * * *", "target": TARGET}
    status, body = _call(services, "POST", "/jobs", {**job, "timeout_s": LAMBDA_MAX_S + 1})
    assert status == 422 and "fargate_workers" in body["message"]
    assert [d["field"] for d in body["details"]] == ["timeout_s"]
    assert services.store.list_jobs(OWNER, limit=10).items == []
    status, created = _call(services, "POST", "/jobs", {**job, "timeout_s": LAMBDA_MAX_S})
    assert status == 201
    status, body = _call(services, "PATCH", f"/jobs/{created['id']}", {"timeout_s": 3_600})
    assert status == 422 and "timeout_s" in json.dumps(body)
    assert services.store.get_job(created["id"]).timeout_s == LAMBDA_MAX_S


def test_a_triggered_long_job_is_dispatched_as_a_long_run(services: Services) -> None:
    job = {"name": "report", "schedule": "0 3 * * *", "target": TARGET}
    _, long_job = _call(services, "POST", "/jobs", {**job, "timeout_s": 700})
    _, short_job = _call(services, "POST", "/jobs", {**job, "timeout_s": 60})
    assert _call(services, "POST", f"/jobs/{long_job['id']}/trigger")[0] == 202
    assert _call(services, "POST", f"/jobs/{short_job['id']}/trigger")[0] == 202
    assert [d.long_run for d in services.queue.sent] == [True, False]  # type: ignore[attr-defined]
