"""Regressions (issue 10, "The API document must be exact"), over HTTP on both engines: what
schemathesis found where the API and its OpenAPI document disagreed.

- Path ids had no pattern in the document, yet a malformed id answered 422: the patterns are now
  declared (malformed: 422 invalid_id; well-formed but unknown: 404).
- ``?until=0.5`` was accepted (read as epoch seconds) although the document says date-time; a
  number for ``run_at`` too.
- An unknown route (a path the local router could not match, e.g. with a decoded newline, or an
  unknown method) answered ``text/plain`` "Not Found" instead of the JSON error shape.
- A deleted job answers 200 on purpose (soft delete): the document says so.
"""

from __future__ import annotations

import httpx
import pytest

from punctual import ids
from tests.e2e.conftest import Stack, cron_spec, error_of, fields_of

pytestmark = pytest.mark.e2e


def test_path_id_patterns_are_declared_and_match_what_the_api_accepts(stack: Stack) -> None:
    paths = stack.contract.document["paths"]
    job_id = next(p for p in paths["/jobs/{job_id}"]["get"]["parameters"] if p["name"] == "job_id")
    run_id = next(p for p in paths["/runs/{run_id}"]["get"]["parameters"] if p["name"] == "run_id")
    assert job_id["schema"]["pattern"] == ids.JOB_ID_PATTERN
    assert run_id["schema"]["pattern"] == ids.RUN_ID_PATTERN
    client = stack.client()
    malformed = client.get("/jobs/not-a-job")
    assert (malformed.status_code, error_of(malformed)["code"]) == (422, "invalid_id")
    assert client.get(f"/jobs/job_{'0' * 32}").status_code == 404
    assert client.get(f"/runs/run_{'0' * 32}_1").status_code == 404


@pytest.mark.parametrize("value", ["0.5", "1800000000", "2027-01-15", "2027-01-15T08:00:00"])
def test_since_and_until_must_be_rfc3339_date_times(stack: Stack, value: str) -> None:
    client = stack.client()
    job = client.create()
    for name in ("since", "until"):
        response = client.get(f"/jobs/{job['id']}/runs", params={name: value})
        assert (response.status_code, fields_of(response)) == (422, [name]), response.text
    ok = client.get(f"/jobs/{job['id']}/runs", params={"until": "2027-01-15T08:00:00.5+01:00"})
    assert ok.status_code == 200


def test_run_at_must_be_a_date_time_string_not_a_number(stack: Stack) -> None:
    client = stack.client()
    response = client.post("/jobs", json=cron_spec(schedule=None, run_at=1900000000))
    assert (response.status_code, fields_of(response)) == (422, ["run_at"]), response.text
    assert client.job_ids() == []


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/jobs/a%0Ab"), ("POST", "/jobs/a%0Ab/pause"), ("TRACE", "/jobs")]
)
def test_unroutable_requests_answer_json_in_the_error_shape(stack: Stack, method: str, path: str) -> None:
    client = stack.client()
    response = httpx.request(method, f"{stack.url}{path}", headers={"Authorization": f"Bearer {client.key}"})
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/json")
    error_of(response)


def test_reading_a_deleted_job_is_documented(stack: Stack) -> None:
    operation = stack.contract.document["paths"]["/jobs/{job_id}"]["get"]
    assert "deleted" in operation["responses"]["200"]["description"]
    client = stack.client()
    job = client.create()
    assert client.delete(f"/jobs/{job['id']}").status_code == 204
    assert client.get(f"/jobs/{job['id']}").json()["status"] == "deleted"
