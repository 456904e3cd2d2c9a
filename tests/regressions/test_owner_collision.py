"""Regression (issue 10, item 4): principals were truncated to 512 characters, so two of them
sharing their first 512 characters (IAM users under one long path, long authorizer principal ids)
became one owner and saw each other's jobs.
"""

from __future__ import annotations

import pytest

from punctual.api.auth import DIGEST_PREFIX, MAX_OWNER_LENGTH, owner_from_event, owner_of
from tests.regressions.conftest import TARGET, Api

PATH = "/" + "team/" * 110  # an IAM path of 550 characters (IAM allows 512 + name)


def iam(user: str) -> dict[str, object]:
    return {"requestContext": {"identity": {"userArn": f"arn:aws:iam::123456789012:user{PATH}{user}"}}}


@pytest.mark.unit
def test_long_principals_sharing_a_prefix_are_different_owners() -> None:
    alice, bob = owner_from_event(iam("alice")), owner_from_event(iam("bob"))
    assert alice is not None and bob is not None
    assert alice != bob
    assert len(alice) <= MAX_OWNER_LENGTH and alice.startswith(DIGEST_PREFIX)
    long_a, long_b = "p" * 600 + "a", "p" * 600 + "b"
    by_authorizer = [owner_from_event({"requestContext": {"authorizer": {"principalId": p}}}) for p in (long_a, long_b)]
    assert by_authorizer[0] != by_authorizer[1]


@pytest.mark.unit
def test_short_owners_stay_what_they_were_and_digests_cannot_be_impersonated() -> None:
    assert owner_of("tenant-1") == "tenant-1"
    assert owner_of("x" * MAX_OWNER_LENGTH) == "x" * MAX_OWNER_LENGTH
    long_owner = owner_of("y" * (MAX_OWNER_LENGTH + 1))
    # A principal that spells another's digest is digested itself, so it never lands on that owner.
    assert owner_of(long_owner) != long_owner
    assert owner_of(long_owner).startswith(DIGEST_PREFIX)


@pytest.mark.integration
def test_owners_with_one_long_prefix_do_not_see_each_others_jobs(api: Api) -> None:
    alice, bob = "p" * 600 + "alice", "p" * 600 + "bob"
    created = api.call("POST", "/jobs", {"name": "mine", "schedule": "* * * * *", "target": TARGET}, owner=alice)
    assert created.status == 201, created.body
    assert api.call("GET", f"/jobs/{created.body['id']}", owner=bob).status == 404
    assert api.call("GET", "/jobs", owner=bob).body["items"] == []
    assert [j["id"] for j in api.call("GET", "/jobs", owner=alice).body["items"]] == [created.body["id"]]
