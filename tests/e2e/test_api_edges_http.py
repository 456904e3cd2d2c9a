"""Issue 26's API edges over real HTTP, on both engines (each failed while its bug existed).

- Case 4: a target no request can be built from (a header value outside ASCII, a URL that only one
  of two parsers reads, a percent-escape in the host) is a 422 naming the field, at create and at
  PATCH, and nothing is written.
- Case 8: a target without ``type`` is http, as the document says (POST and PATCH).
- Duplicate keys in a JSON body are a 422 naming the key; unknown query parameters a 422 naming
  them; ``PATCH {}`` on a deleted job a 409, like every other PATCH of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import ApiClient, Stack, cron_spec, error_of, fields_of

pytestmark = pytest.mark.e2e

JSON = {"Content-Type": "application/json"}
HOOK = "https://example.com/hook"


@pytest.fixture
def alice(stack: Stack) -> ApiClient:
    return stack.client()


def http_target(**fields: Any) -> dict[str, Any]:
    return {"type": "http", "url": HOOK, **fields}


# (id, target, the field the 422 names)
UNBUILDABLE: list[tuple[str, dict[str, Any], str]] = [
    ("euro-in-a-header", http_target(headers={"X-Price": "5 €"}), "target.headers.X-Price"),
    ("latin-1-in-a-header", http_target(headers={"X-Name": "café"}), "target.headers.X-Name"),
    ("control-in-a-header", http_target(headers={"X-A": "a\x01b"}), "target.headers.X-A"),
    (
        "euro-in-a-secret",
        http_target(secret_headers={"Authorization": "Bearer 5€"}),
        "target.secret_headers.Authorization",
    ),
    ("full-width-host", http_target(url="https://\uff11\uff12\uff17.0.0.1/hook"), "target.url"),
    ("full-width-port", http_target(url="https://example.com:\uff18\uff14\uff14\uff13/hook"), "target.url"),
    ("tab-escaped-in-host", http_target(url="https://exa%09mple.com/hook"), "target.url"),
    ("zero-width-space-in-host", http_target(url="https://exam\u200bple.com/hook"), "target.url"),
    ("port-zero", http_target(url="https://example.com:0/hook"), "target.url"),
    ("header-named-twice", http_target(headers={"X-A": "1", "x-a": "2"}), "target"),
    ("event-bus-not-a-name", {"type": "eventbridge", "event_bus": "bus \u20ac"}, "target.event_bus"),
    ("credentials-in-url", http_target(url="https://user:pw@example.com/hook"), "target.url"),
    (
        "full-width-account-in-arn",
        {"type": "lambda", "function_arn": "arn:aws:lambda:us-east-1:\uff11\uff12\uff13456789012:function:f"},
        "target.function_arn",
    ),
]


@pytest.mark.parametrize(("target", "field"), [pytest.param(t, f, id=i) for i, t, f in UNBUILDABLE])
def test_a_target_no_request_can_be_built_from_is_refused_at_create_and_patch(
    alice: ApiClient, target: dict[str, Any], field: str
) -> None:
    created = alice.post("/jobs", json=cron_spec(target=target))
    assert created.status_code == 422, created.text
    assert field in fields_of(created), error_of(created)
    assert alice.get("/jobs").json()["items"] == []
    job = alice.create()
    patched = alice.patch(f"/jobs/{job['id']}", json={"target": target})
    assert patched.status_code == 422 and field in fields_of(patched), patched.text
    assert alice.get(f"/jobs/{job['id']}").json() == job


def test_a_header_of_visible_ascii_is_accepted(alice: ApiClient) -> None:
    headers = {"X-Price": "5 EUR", "X-Note": 'a\tb; c="d"'}
    job = alice.create(target=http_target(headers=headers))
    assert job["target"]["headers"] == headers


def test_a_target_without_type_is_http_on_create_and_patch(alice: ApiClient) -> None:
    created = alice.post("/jobs", json=cron_spec(target={"url": HOOK}))
    assert created.status_code == 201, created.text
    assert created.json()["target"]["type"] == "http" and created.json()["target"]["url"] == HOOK
    moved = alice.patch(
        f"/jobs/{created.json()['id']}", json={"target": {"url": "https://example.org/x", "method": "PUT"}}
    )
    assert moved.status_code == 200, moved.text
    assert (moved.json()["target"]["type"], moved.json()["target"]["method"]) == ("http", "PUT")
    # the other kinds name their type (the document requires it): without it, a target is http
    lambda_fields = alice.post(
        "/jobs", json=cron_spec(target={"function_arn": "arn:aws:lambda:us-east-1:123456789012:function:f"})
    )
    assert lambda_fields.status_code == 422 and "target.url" in fields_of(lambda_fields)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"name":"a","name":"b","schedule":"0 * * * *","target":{"url":"https://example.com/hook"}}', "name"),
        (
            '{"name":"a","schedule":"0 * * * *","target":{"url":"https://example.com/a","url":"https://example.com/b"}}',
            "target.url",
        ),
        (
            '{"name":"a","schedule":"0 * * * *","payload":{"k":1,"k":2},"target":{"url":"https://example.com/hook"}}',
            "payload.k",
        ),
    ],
    ids=["top-level", "nested", "in-the-payload"],
)
def test_a_body_naming_a_key_twice_is_refused_naming_it(alice: ApiClient, body: str, field: str) -> None:
    created = alice.post("/jobs", content=body, headers=JSON)
    assert created.status_code == 422 and fields_of(created) == [field], created.text
    assert alice.get("/jobs").json()["items"] == []
    job = alice.create()
    patched = alice.patch(f"/jobs/{job['id']}", content='{"timeout_s":30,"timeout_s":40}', headers=JSON)
    assert patched.status_code == 422 and fields_of(patched) == ["timeout_s"], patched.text
    assert alice.get(f"/jobs/{job['id']}").json() == job


def test_unknown_query_parameters_are_refused_naming_them_on_every_route(alice: ApiClient) -> None:
    job = alice.create()
    run = alice.post(f"/jobs/{job['id']}/trigger").json()
    for method, path, kwargs in [
        ("GET", "/jobs", {"params": {"limt": "5"}}),
        ("POST", "/jobs", {"params": {"dry_run": "1"}, "json": cron_spec()}),
        ("GET", f"/jobs/{job['id']}", {"params": {"limt": "5"}}),
        ("PATCH", f"/jobs/{job['id']}", {"params": {"limt": "5"}, "json": {"name": "renamed"}}),
        ("DELETE", f"/jobs/{job['id']}", {"params": {"forse": "true"}}),
        ("POST", f"/jobs/{job['id']}/pause", {"params": {"limt": "5"}}),
        ("GET", f"/jobs/{job['id']}/runs", {"params": {"states": "running"}}),
        ("GET", f"/jobs/{job['id']}/graph", {"params": {"limt": "5"}}),
        ("GET", f"/runs/{run['run_id']}", {"params": {"limt": "5"}}),
        ("GET", "/stats", {"params": {"minute": "5"}}),
        ("GET", "/alerts", {"params": {"limt": "5"}}),
        ("GET", "/limits", {"params": {"limt": "5"}}),
        ("GET", "/signing-secret", {"params": {"limt": "5"}}),
    ]:
        response = alice.request(method, path, **kwargs)
        assert response.status_code == 422, (method, path, response.text)
        assert error_of(response)["code"] == "invalid_input" and len(fields_of(response)) == 1, response.text
        assert fields_of(response)[0] in {"limt", "dry_run", "forse", "states", "minute"}
    # nothing was changed, created or deleted; and the documented parameters still work
    assert alice.get(f"/jobs/{job['id']}").json()["name"] == job["name"]
    assert [j["id"] for j in alice.get("/jobs", params={"limit": 5, "status": "active"}).json()["items"]] == [job["id"]]
    runs = alice.get(f"/jobs/{job['id']}/runs", params={"state": ["scheduled", "running"], "limit": 5})
    assert runs.status_code == 200 and len(runs.json()["items"]) == 1
    assert alice.get("/stats", params={"minutes": 5}).status_code == 200
    assert alice.get("/alerts", params={"limit": 5}).status_code == 200


def test_an_empty_patch_of_a_deleted_job_is_a_conflict(alice: ApiClient) -> None:
    job = alice.create()
    assert alice.delete(f"/jobs/{job['id']}").status_code == 204
    empty = alice.patch(f"/jobs/{job['id']}", json={})
    assert empty.status_code == 409 and error_of(empty)["code"] == "invalid_transition", empty.text
    assert alice.patch(f"/jobs/{job['id']}", json={"name": "again"}).status_code == 409
