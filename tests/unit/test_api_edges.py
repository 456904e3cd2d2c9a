"""The API's edges without HTTP: owner resolution, local API keys, error mapping, field paths."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from punctual.api import errors
from punctual.api.auth import ApiKeys, load_or_create_key, owner_from_event, principal_of
from punctual.errors import (
    ConcurrentModification,
    ConfigError,
    IdempotencyKeyReused,
    InvalidCursor,
    InvalidId,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    Unauthorized,
)
from punctual.jobs.validation import details_from_errors, field_path

pytestmark = pytest.mark.unit

KEY = "k" * 20


def event(context: dict[str, Any]) -> dict[str, Any]:
    return {"requestContext": context}


def test_owner_comes_from_the_authorizer_first_then_iam() -> None:
    both = {"authorizer": {"principalId": "tenant-1"}, "identity": {"userArn": "arn:aws:iam::123456789012:user/u"}}
    assert owner_from_event(event(both)) == "tenant-1"
    assert owner_from_event(event({"authorizer": {"claims": {"sub": "cognito-sub"}}})) == "cognito-sub"
    assert owner_from_event(event({"identity": {"userArn": "arn:aws:iam::123456789012:user/u"}})) == (
        "arn:aws:iam::123456789012:user/u"
    )
    assert owner_from_event(event({"identity": {"caller": "AIDAEXAMPLE"}})) == "AIDAEXAMPLE"
    assert owner_from_event(event({"identity": {}})) is None
    assert owner_from_event({}) is None


def test_assumed_role_sessions_are_one_owner() -> None:
    session = "arn:aws:sts::123456789012:assumed-role/reporting/session-42"
    assert principal_of(session) == "arn:aws:iam::123456789012:role/reporting"
    gov = "arn:aws-us-gov:sts::123456789012:assumed-role/r/s"
    assert principal_of(gov) == "arn:aws-us-gov:iam::123456789012:role/r"
    assert principal_of("arn:aws:iam::123456789012:user/alice") == "arn:aws:iam::123456789012:user/alice"


def test_api_keys_parse_and_resolve_bearer_headers() -> None:
    keys = ApiKeys.parse(f" {KEY}=alice , {'z' * 16}=bob,")
    assert len(keys) == 2
    assert keys.owner_for(f"Bearer {KEY}") == "alice"
    assert keys.owner_for(f"bearer   {'z' * 16} ") == "bob"
    for header in (None, "", KEY, f"Basic {KEY}", "Bearer unknown-key-000000", f"Bearer {KEY} extra"):
        assert keys.owner_for(header) is None, header


@pytest.mark.parametrize("text", ["no-equals-sign", "short=alice", f"{KEY}=", f"{KEY}=has space"])
def test_bad_api_key_configuration_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        ApiKeys.parse(text)


def test_the_dev_key_is_created_once_owner_readable_only(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path / "data")
    assert load_or_create_key(tmp_path / "data") == key and len(key) > 32
    assert stat.S_IMODE((tmp_path / "data" / "api-key").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Unauthorized("x"), 401),
        (JobNotFound("x"), 404),
        (errors.RouteNotFound("x"), 404),
        (errors.MethodNotAllowed("x", ["GET"]), 405),
        (InvalidTransition("x"), 409),
        (IdempotencyKeyReused("x"), 409),
        (ConcurrentModification("x"), 409),
        (errors.MalformedJson("x"), 400),
        (errors.RequestTooLarge("x"), 413),
        (errors.UnsupportedMediaType("x"), 415),
        (InvalidSchedule("x"), 422),
        (InvalidCursor("x"), 422),
        (InvalidId("x"), 422),
        (LeaseLost("x"), 500),
        (ConfigError("x"), 500),
    ],
)
def test_each_error_maps_to_one_status(error: Any, status: int) -> None:
    assert errors.status_for(error) == status


def test_error_bodies_always_have_details_and_name_the_field() -> None:
    assert errors.error_body(JobNotFound("gone")) == {"code": "job_not_found", "message": "gone", "details": []}
    body = errors.error_body(InvalidSchedule("bad minute"))
    assert body["details"] == [{"field": "schedule", "message": "bad minute"}]
    response = errors.lambda_response(Unauthorized("who?"))
    assert response["statusCode"] == 401 and "WWW-Authenticate" in response["headers"]


def test_field_paths_read_like_the_request() -> None:
    assert field_path(("body", "target", "http", "url")) == "target.url"
    assert field_path(("body", "retry", "backoff_s")) == "retry.backoff_s"
    assert field_path(("query", "state", 0)) == "state"
    assert field_path(("header", "Idempotency-Key")) == "Idempotency-Key"
    assert field_path(("body",)) == "body"
    assert field_path(()) == "body"
    details = details_from_errors(
        [
            {"loc": ("body", "color"), "type": "extra_forbidden", "msg": "Extra inputs are not permitted"},
            {"loc": ("body", "payload"), "type": "value_error", "msg": "Value error, payload is too big"},
        ]
    )
    assert details == [
        {"field": "color", "message": "unknown field (not part of the API)"},
        {"field": "payload", "message": "payload is too big"},
    ]
