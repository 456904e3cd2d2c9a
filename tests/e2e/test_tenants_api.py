"""Tenant limits over HTTP on both engines: GET /limits, the admin routes (403 for owners),
max_jobs (409) and api_requests_per_second (429 with Retry-After). Every response is checked
against the OpenAPI document (see conftest)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ADMIN_OWNER, ApiClient, Stack, cron_spec, error_of

pytestmark = pytest.mark.e2e


def _set(admin: ApiClient, owner: str, **limits: object) -> dict[str, object]:
    response = admin.request("PUT", "/admin/tenants", json={"owner": owner, **limits})
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_an_owner_reads_its_limits_and_usage(stack: Stack) -> None:
    # Given an owner without a record and with one job
    owner = stack.client()
    owner.create()
    # When it reads GET /limits
    body = owner.get("/limits").json()
    # Then it sees no limits (the deployment has no defaults) and its live job
    assert body["owner"] == owner.owner
    assert body["limits"] == {
        "max_jobs": None,
        "max_runs_per_minute": None,
        "max_concurrency": None,
        "api_requests_per_second": None,
        "weight": 1,
    }
    assert body["usage"] == {"live_jobs": 1, "running": None, "runs_this_minute": None}


def test_admin_routes_refuse_ordinary_owners_and_change_nothing(stack: Stack) -> None:
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    for response in (
        owner.get("/admin/tenants"),
        owner.request("PUT", "/admin/tenants", json={"owner": owner.owner, "max_jobs": 1_000_000}),
    ):
        assert response.status_code == 403
        assert error_of(response)["code"] == "forbidden"
    listed = admin.get("/admin/tenants", params={"owner": owner.owner}).json()["items"]
    assert listed[0]["record"] is None


def test_an_admin_sets_limits_that_the_owner_then_sees(stack: Stack) -> None:
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    body = _set(admin, owner.owner, max_concurrency=5, max_runs_per_minute=60, weight=2)
    assert body["record"] == {
        "max_jobs": None,
        "max_runs_per_minute": 60,
        "max_concurrency": 5,
        "api_requests_per_second": None,
        "weight": 2,
    }
    # a later change replaces only the fields sent; null resets one
    body = _set(admin, owner.owner, max_runs_per_minute=None, max_jobs=3)
    assert body["limits"]["max_concurrency"] == 5
    assert body["limits"]["max_runs_per_minute"] is None
    assert body["limits"]["max_jobs"] == 3
    assert owner.owner in [t["owner"] for t in admin.get("/admin/tenants").json()["items"]]
    seen = owner.get("/limits").json()
    assert seen["limits"]["max_concurrency"] == 5 and seen["limits"]["max_jobs"] == 3
    assert seen["usage"]["running"] == 0


@pytest.mark.parametrize(
    "body", [{"max_jobs": 0}, {"weight": 101}, {"max_concurrency": "5x"}, {"surprise": 1}, {}], ids=str
)
def test_bad_admin_input_is_a_4xx_and_writes_nothing(stack: Stack, body: dict[str, object]) -> None:
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    payload = body if body == {} else {"owner": owner.owner, **body}
    response = admin.request("PUT", "/admin/tenants", json=payload)
    assert response.status_code == 422, response.text
    assert admin.get("/admin/tenants", params={"owner": owner.owner}).json()["items"][0]["record"] is None


def test_max_jobs_refuses_one_more_live_job_with_409(stack: Stack) -> None:
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    _set(admin, owner.owner, max_jobs=2)
    first = owner.create()
    owner.create()
    refused = owner.post("/jobs", json=cron_spec())
    assert refused.status_code == 409
    assert error_of(refused)["code"] == "limit_exceeded"
    assert error_of(refused)["details"][0]["field"] == "max_jobs"
    assert len(owner.job_ids()) == 2  # nothing written
    # a deleted job no longer counts
    assert owner.delete(f"/jobs/{first['id']}").status_code == 204
    assert owner.post("/jobs", json=cron_spec()).status_code == 201


def test_api_requests_per_second_answers_429_with_retry_after(stack: Stack) -> None:
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    _set(admin, owner.owner, api_requests_per_second=2)
    statuses = []
    refused = None
    for _ in range(6):  # a bucket of 2 refills at 2/s: 6 back-to-back requests cannot all pass
        response = owner.get("/jobs")
        statuses.append(response.status_code)
        if response.status_code == 429:
            refused = response
    assert statuses[:2] == [200, 200]
    assert refused is not None, statuses
    assert error_of(refused)["code"] == "too_many_requests"
    assert int(refused.headers["Retry-After"]) >= 1
    other = stack.client()  # another owner is not affected
    assert all(other.get("/jobs").status_code == 200 for _ in range(6))
