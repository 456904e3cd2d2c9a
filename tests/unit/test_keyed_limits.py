"""Priority and keyed limits without a store: the fields, key templates, their resolution into
ceilings, the CLI's ``--limit``, the aws items and the gate's order (``punctual.model.limits``,
``punctual.tenancy.keyed``, ``punctual.tenancy.admission``)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from pydantic import ValidationError

from punctual.cli.client import CliError
from punctual.cli.human import parse_limit
from punctual.clock import ManualClock
from punctual.engines.aws import job_items as ji
from punctual.jobs.validation import invalid_input
from punctual.model import Job, JobLimit, JobSpec, resolve_key
from punctual.model.limits import KEY_PATTERN
from punctual.port import SlotOutcome
from punctual.tenancy.admission import Gate
from punctual.tenancy.keyed import KEY_SCOPE_PREFIX, key_scope, keyed_ceilings, keyed_slot_scopes
from punctual.tenancy.limits import UNLIMITED, LimitCache, Limits

pytestmark = pytest.mark.unit

BASE: dict[str, Any] = {"name": "a", "schedule": "* * * * *", "target": {"url": "https://example.com/hook"}}
T = 1_800_000_000_000


def _details(body: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({**BASE, **body})
    return invalid_input(caught.value).details or []


def _job(**fields: Any) -> Job:
    values = {**BASE, "id": "job_" + "a" * 32, "owner": "alice", "created_at": T, "updated_at": T, "next_run_at": T}
    values.update(fields)
    return Job.model_validate(values)


def test_priority_defaults_to_5_and_takes_0_to_9() -> None:
    assert JobSpec.model_validate(BASE).priority == 5
    assert JobSpec.model_validate({**BASE, "priority": 9.0}).priority == 9  # JSON's integer 9
    assert _details({"priority": 10}) == [{"field": "priority", "message": "Input should be less than or equal to 9"}]
    assert _details({"priority": "9"})[0]["field"] == "priority"


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("customer:{customer_id}", "unknown placeholder {customer_id}: use {job_id} or {payload.<field>}"),
        ("{payload}", "unknown placeholder {payload}"),
        ("{payload.a..b}", "unknown placeholder {payload.a..b}"),
        ("a b", "a key is literal letters, digits and ._:/@#=+-"),
        ("open{", "balanced braces"),
    ],
)
def test_a_bad_key_is_refused_naming_its_field(key: str, says: str) -> None:
    [detail] = _details({"limits": [{"key": "ok", "max_concurrency": 1}, {"key": key, "max_concurrency": 1}]})
    assert detail["field"] == "limits.1.key" and says in detail["message"]


def test_a_limit_needs_a_number_and_at_most_four_entries() -> None:
    assert _details({"limits": [{"key": "k"}]}) == [
        {"field": "limits.0", "message": "give max_concurrency, max_runs_per_minute or both"}
    ]
    assert _details({"limits": [{"key": "k", "max_concurrency": 0}]})[0]["field"] == "limits.0.max_concurrency"
    assert _details({"limits": [{"key": f"k{i}", "max_concurrency": 1} for i in range(5)]})[0]["field"] == "limits"


def test_the_document_states_the_key_syntax_the_server_checks() -> None:
    from punctual.api.app import openapi_json

    schema = json.loads(openapi_json())["components"]["schemas"]
    limit = next(v for k, v in schema.items() if k.startswith("JobLimit"))
    assert limit["properties"]["key"]["pattern"] == KEY_PATTERN
    assert limit["anyOf"] == [{"required": ["max_concurrency"]}, {"required": ["max_runs_per_minute"]}]
    for key in ("upstream-api", "{job_id}", "c:{payload.customer_id}/{payload.a.b-c_d}", "x=1+y@z#/."):
        assert re.fullmatch(KEY_PATTERN, key) and JobLimit(key=key, max_concurrency=1).key == key


def test_keys_resolve_from_the_job_id_the_payload_and_literals() -> None:
    payload = {"customer_id": 42, "tier": "gold plus", "deep": {"x": [1, 2]}, "flag": True}
    assert resolve_key("upstream-api", "job_1", payload) == "upstream-api"
    assert resolve_key("per-job:{job_id}", "job_1", payload) == "per-job:job_1"
    assert resolve_key("c:{payload.customer_id}/{payload.tier}", "j", payload) == "c:42/gold plus"
    assert resolve_key("{payload.deep.x}:{payload.flag}", "j", payload) == "[1,2]:true"
    # a missing field is the empty text: such runs share one key, never escape the limit
    assert resolve_key("c:{payload.missing}", "j", payload) == "c:"
    assert resolve_key("c:{payload.customer_id}", "j", None) == "c:"


def test_ceilings_merge_entries_of_one_key_and_keep_owners_apart() -> None:
    job = _job(
        payload={"customer_id": 7},
        limits=[
            {"key": "customer:{payload.customer_id}", "max_concurrency": 3},
            {"key": "customer:7", "max_concurrency": 2, "max_runs_per_minute": 60},
            {"key": "upstream", "max_runs_per_minute": 10},
        ],
    )
    [customer, upstream] = keyed_ceilings(job)
    assert (customer.name, customer.max_concurrency, customer.max_runs_per_minute) == ("limit customer:7 ", 2, 60)
    assert (upstream.name, upstream.max_concurrency, upstream.max_runs_per_minute) == ("limit upstream ", None, 10)
    assert customer.scope == key_scope("alice", "customer:7") != key_scope("bob", "customer:7")
    assert customer.scope.startswith(KEY_SCOPE_PREFIX) and len(customer.scope) == len(KEY_SCOPE_PREFIX) + 64
    assert keyed_slot_scopes(job) == [customer.scope]
    assert keyed_ceilings(_job()) == [] and keyed_slot_scopes(_job()) == []


def test_the_cli_parses_a_limit_flag() -> None:
    assert parse_limit("key=customer:{payload.id},max_concurrency=2") == {
        "key": "customer:{payload.id}",
        "max_concurrency": 2,
    }
    assert parse_limit("key=a=b, max_runs_per_minute=6") == {"key": "a=b", "max_runs_per_minute": 6}
    for bad in ("max_concurrency=2", "key=a,max_concurrency=two", "key=a,burst=3", "key=a,key=b"):
        with pytest.raises(CliError):
            parse_limit(bad)


def test_the_aws_items_keep_priority_and_limits_and_nothing_when_unset() -> None:
    plain = _job()
    _, spec = ji.job_to_items(plain, retention_days=30)
    assert "priority" not in spec and "limits" not in spec  # a job without them is stored as before
    for job in (_job(priority=0, limits=[{"key": "{job_id}", "max_concurrency": 1}]), _job(priority=9), plain):
        head, spec = ji.job_to_items(job, retention_days=30)
        assert ji.items_to_job(head, spec) == job


class _Store:
    """Just the slot calls of a Store, recording them (the gate's order, without an engine)."""

    def __init__(self, full: set[str]) -> None:
        self.full, self.calls = full, []  # type: ignore[var-annotated]

    def get_tenant(self, owner: str) -> None:
        return None

    def take_slot(self, scope: str, run_id: str, limit: int, now: int, *, priority: int | None = None) -> SlotOutcome:
        self.calls.append(("take", scope, priority))
        return SlotOutcome.FULL if scope in self.full else SlotOutcome.TAKEN

    def release_slot(self, scope: str, run_id: str) -> bool:
        self.calls.append(("release", scope, None))
        return True

    def mark_slot_wait(self, scope: str, priority: int, until: int) -> None:
        self.calls.append(("mark", scope, priority))


def test_a_refused_keyed_slot_gives_back_the_slots_taken_before_it_and_marks_its_priority() -> None:
    job = _job(priority=7, limits=[{"key": "a", "max_concurrency": 1}, {"key": "b", "max_concurrency": 1}])
    a, b = key_scope("alice", "a"), key_scope("alice", "b")
    store = _Store(full={b})
    clock = ManualClock(T)
    gate = Gate(store, LimitCache(store, Limits(max_concurrency=3), clock), clock, rng=random.Random(1))  # type: ignore[arg-type]
    refused = gate.admit("alice", "run_1", T, job=job)
    assert not refused.admitted and refused.reason == "limit b max_concurrency 1 reached"
    assert store.calls == [
        ("take", "alice", 7),
        ("take", a, 7),
        ("take", b, 7),
        ("release", "alice", None),
        ("release", a, None),
        ("mark", b, 7),
    ]
    # a second refusal soon after writes no second mark (one per worker, scope and priority per second)
    store.calls.clear()
    gate.admit("alice", "run_2", T + 10, job=job)
    assert ("mark", b, 7) not in store.calls
    # without its job (a caller that knows only the owner) the gate applies the owner's limits alone
    assert gate.admit("alice", "run_3", T, job=None).slots == (("alice", SlotOutcome.TAKEN),)
    assert Gate(store, LimitCache(store, UNLIMITED, clock), clock).admit("o", "r", T).admitted  # type: ignore[arg-type]
