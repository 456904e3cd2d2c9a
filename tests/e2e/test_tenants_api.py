"""Tenant limits over HTTP on both engines: GET /limits, the admin routes (403 for owners),
max_jobs (409), api_requests_per_second (429 with Retry-After), and a run waiting for
max_runs_per_minute, which says so wherever it is listed. Every response is checked
against the OpenAPI document (see conftest)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from punctual.cli import main
from punctual.execution.delivery import process_delivery
from punctual.execution.options import Outcome
from punctual.execution.targets import TargetResult
from punctual.model import Run, RunState
from punctual.port import Delivery, Dispatch
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import UNLIMITED, LimitCache
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


class _Ok:
    """A target that answers 200 at once (``process_delivery``'s targets)."""

    def execute(self, job: object, run: object, attempt: int, deadline: float) -> TargetResult:
        return TargetResult(ok=True, status_code=200)


def test_a_waiting_run_says_why_wherever_it_is_listed(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    # Given an owner with max_runs_per_minute 1 and two runs of its job due now
    owner, admin = stack.client(), stack.client(ADMIN_OWNER)
    _set(admin, owner.owner, max_runs_per_minute=1)
    job_id = owner.create(schedule="0 0 1 1 *")["id"]
    store, now = stack.engine.store, stack.clock.now_ms()
    runs = [Run(job_id=job_id, scheduled_at=now + i, owner=owner.owner, deadline_at=now + 600_000, created_at=now)
            for i in range(2)]  # fmt: skip
    store.insert_runs(runs)
    stack.engine.queue.send([Dispatch(r.run_id, r.scheduled_at) for r in runs])
    gate = Gate(store, LimitCache(store, UNLIMITED, stack.clock, ttl_ms=0), stack.clock)
    deliveries = [d for _ in range(20) for d in stack.engine.queue.receive(10, 60, 0.2)][:2]
    assert len(deliveries) == 2

    def deliver(delivery: Delivery) -> Outcome:
        return process_delivery(
            delivery, store=store, queue=stack.engine.queue, targets=_Ok(), clock=stack.clock,  # type: ignore[arg-type]
            worker_id="w", gate=gate,
        )  # fmt: skip

    # When a worker takes both: one starts, the other must wait for the next minute
    assert sorted(deliver(d) for d in deliveries) == [Outcome.SUCCEEDED, Outcome.THROTTLED]
    waiting = next(r for r in runs if store.get_run(job_id, r.scheduled_at).state is RunState.SCHEDULED)
    reason = "waiting: max_runs_per_minute 1"
    # Then the wait is in the run's note: in GET /jobs/{id}/runs, GET /runs/{id} and `punctual runs`
    listed = {r["run_id"]: r for r in owner.get(f"/jobs/{job_id}/runs").json()["items"]}
    assert listed[waiting.run_id]["note"] == reason and listed[waiting.run_id]["state"] == "scheduled"
    assert owner.get(f"/runs/{waiting.run_id}").json()["note"] == reason
    cli = ["--api-url", stack.url, "--api-key", owner.key or ""]
    assert main(["runs", job_id, *cli]) == 0
    assert reason in capsys.readouterr().out
    # When the limit is raised and the run's message comes back
    _set(admin, owner.owner, max_runs_per_minute=60)
    again = next(d for d in deliveries if d.run_id == waiting.run_id)
    assert deliver(replace(again, receive_count=2)) is Outcome.SUCCEEDED
    # Then it started: the note is gone, and its attempt's log entry says what it waited for
    shown = owner.get(f"/runs/{waiting.run_id}").json()
    assert shown["note"] is None and shown["state"] == "succeeded"
    assert shown["attempts"][0]["waited"] == "max_runs_per_minute 1"
    assert main(["run", waiting.run_id, *cli]) == 0
    assert "max_runs_per_minute 1" in capsys.readouterr().out


# -- a job's priority and keyed limits (docs/api.md, Priority and Keyed limits) --------------------


def test_priority_and_keyed_limits_round_trip_through_the_cli_and_the_api(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = stack.client()
    cli = ["--api-url", stack.url, "--api-key", owner.key or ""]
    create = ["jobs", "create", "--name", "keyed", "--schedule", "0 * * * *", "--url", "https://example.com/hook"]
    limit = "key=customer:{payload.customer_id},max_concurrency=2"
    more = ["--payload", '{"customer_id": 42}', "--priority", "9", "--limit", limit, "--json"]
    assert main([*create, *more, *cli]) == 0
    job_id = json.loads(capsys.readouterr().out)["id"]
    job = owner.get(f"/jobs/{job_id}").json()
    assert job["priority"] == 9
    assert job["limits"] == [
        {"key": "customer:{payload.customer_id}", "max_concurrency": 2, "max_runs_per_minute": None}
    ]
    assert main(["jobs", "get", job_id, *cli]) == 0
    assert "key=customer:{payload.customer_id},max_concurrency=2" in capsys.readouterr().out
    # a bad key is a 422 naming it, and changes nothing; null puts priority back to 5
    bad = owner.request("PATCH", f"/jobs/{job_id}", json={"limits": [{"key": "{customer}", "max_concurrency": 1}]})
    assert bad.status_code == 422 and error_of(bad)["details"][0]["field"] == "limits.0.key"
    assert owner.get(f"/jobs/{job_id}").json()["limits"] == job["limits"]
    patched = owner.request("PATCH", f"/jobs/{job_id}", json={"priority": None, "limits": None}).json()
    assert patched["priority"] == 5 and patched["limits"] == []


def test_a_run_waiting_for_a_keyed_limit_says_which(stack: Stack) -> None:
    owner = stack.client()
    limits = [{"key": "upstream-api", "max_runs_per_minute": 1}]
    job_ids = [owner.create(schedule="0 0 1 1 *", limits=limits)["id"] for _ in range(2)]
    store, now = stack.engine.store, stack.clock.now_ms()
    runs = [Run(job_id=j, scheduled_at=now, owner=owner.owner, deadline_at=now + 600_000, created_at=now)
            for j in job_ids]  # fmt: skip
    store.insert_runs(runs)
    stack.engine.queue.send([Dispatch(r.run_id, r.scheduled_at) for r in runs])
    gate = Gate(store, LimitCache(store, UNLIMITED, stack.clock, ttl_ms=0), stack.clock)
    deliveries: list[Delivery] = []
    for _ in range(20):  # bounded: moto's queue may take a moment
        deliveries += stack.engine.queue.receive(10, 60, 0.2)
        if len(deliveries) >= 2:
            break

    def deliver(delivery: Delivery) -> Outcome:
        return process_delivery(
            delivery, store=store, queue=stack.engine.queue, targets=_Ok(), clock=stack.clock,  # type: ignore[arg-type]
            worker_id="w", gate=gate,
        )  # fmt: skip

    outcomes = [deliver(d) for d in deliveries]
    # the two jobs share the key's one start a minute: the second run waits, and says for which key
    assert sorted(outcomes) == [Outcome.SUCCEEDED, Outcome.THROTTLED]
    waiting = next(r for r in runs if store.get_run(r.job_id, now).state is RunState.SCHEDULED)
    shown = owner.get(f"/runs/{waiting.run_id}").json()
    assert shown["note"] == "waiting: limit upstream-api max_runs_per_minute 1"
