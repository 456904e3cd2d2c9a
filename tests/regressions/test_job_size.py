"""Regression (issue 10, item 5): 20 headers of 4 KiB made a job item of ~91 KB, and every claim
of it (an UpdateItem of the whole item) cost ~93 write units instead of 3. The whole job is now
bounded (``MAX_JOB_BYTES``; the write units it allows are measured in
tests/integration/test_aws_engine.py), and a larger one is a 413 that changes nothing.
"""

from __future__ import annotations

import pytest

from punctual.model import MAX_JOB_BYTES
from tests.regressions.conftest import OWNER, TARGET, Api

pytestmark = pytest.mark.integration

BIG_HEADERS = {f"x-h{i}": "v" * 4000 for i in range(20)}


def test_a_job_over_the_bound_is_a_413_and_nothing_is_stored(api: Api) -> None:
    spec = {"name": "n", "schedule": "* * * * *", "target": {**TARGET, "headers": BIG_HEADERS}}
    answer = api.call("POST", "/jobs", spec)
    assert (answer.status, answer.body["code"], answer.fields) == (413, "job_too_large", ["body"]), answer.body
    assert str(MAX_JOB_BYTES) in answer.body["message"]
    assert api.engine.store.list_jobs(OWNER).items == []


def test_a_patch_that_makes_a_job_too_large_is_a_413_and_changes_nothing(api: Api) -> None:
    created = api.call("POST", "/jobs", {"name": "n", "schedule": "* * * * *", "target": TARGET})
    answer = api.call("PATCH", f"/jobs/{created.body['id']}", {"target": {**TARGET, "headers": BIG_HEADERS}})
    assert (answer.status, answer.body["code"]) == (413, "job_too_large")
    assert api.engine.store.get_job(created.body["id"]).target.headers == {}  # type: ignore[union-attr]


def test_a_job_at_the_bound_is_accepted(api: Api) -> None:
    base = {"name": "n", "schedule": "* * * * *", "payload": "p" * 8000, "target": {**TARGET, "headers": {"x": ""}}}
    answer = api.call("POST", "/jobs", base)
    job = api.engine.store.get_job(answer.body["id"])
    pad = MAX_JOB_BYTES - job.spec.size_bytes()
    exact = {**base, "target": {**TARGET, "headers": {"x": "v" * pad}}}
    assert api.call("POST", "/jobs", exact).status == 201
    over = {**base, "target": {**TARGET, "headers": {"x": "v" * (pad + 1)}}}
    assert api.call("POST", "/jobs", over).status == 413
