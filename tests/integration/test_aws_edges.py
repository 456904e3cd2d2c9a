"""The aws engine's dependency decisions on moto: what one decision sends (engines/aws/edges.py).

The contract suite (tests/contract/test_dependency_races.py) proves the outcome of races on both
engines; these tests pin the requests behind it: one transaction with a condition per job the check
read, the owner's graph sequence past 100 actions, a single write where nothing needs a
transaction, and how a cancelled transaction is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine
from punctual.engines.aws.store import DynamoStore
from punctual.errors import ConcurrentModification
from punctual.jobs import lifecycle, service
from punctual.model import HttpTarget, Job, JobSpec

pytestmark = pytest.mark.integration

OWNER = "owner-edges"
HTTP = HttpTarget(url="https://example.com/hook")


@pytest.fixture(autouse=True)
def _fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000_000)


@pytest.fixture
def engine(clock: ManualClock) -> Iterator[AwsEngine]:
    with mock_aws():
        settings = Settings(engine=EngineKind.AWS, name_prefix="edges", shards=4, open_shards=2)
        engine = AwsEngine.from_settings(settings, clock=clock, serialize=True, bootstrap=True)
        yield engine
        engine.close()


@pytest.fixture
def store(engine: AwsEngine) -> DynamoStore:
    return engine.store


class Sent:
    """The DynamoDB operations the engine sends inside the block, with their parameters."""

    def __init__(self, engine: AwsEngine) -> None:
        self._events = engine.clients.dynamodb.meta.events
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls.append((model.name, params))

    def __enter__(self) -> Sent:
        self._events.register("provide-client-params.dynamodb", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        self._events.unregister("provide-client-params.dynamodb", self._record)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def actions(self) -> list[tuple[str, str]]:
        """(kind, table suffix) of each action of the one transaction sent."""
        (items,) = [params["TransactItems"] for name, params in self.calls if name == "TransactWriteItems"]
        return [(kind, body["TableName"].rsplit("-", 1)[-1]) for action in items for kind, body in action.items()]


def cron(store: DynamoStore, clock: ManualClock, name: str) -> Job:
    return service.create_job(store, OWNER, JobSpec(name=name, schedule="0 0 * * *", target=HTTP), clock.now_ms()).job


def after(store: DynamoStore, clock: ManualClock, name: str, upstreams: list[Job]) -> Job:
    spec = JobSpec.model_validate(
        {"name": name, "depends_on": {"jobs": [u.id for u in upstreams]}, "target": HTTP.model_dump()}
    )
    return service.create_job(store, OWNER, spec, clock.now_ms()).job


def test_a_create_with_depends_on_is_one_transaction_conditioned_on_what_it_read(
    engine: AwsEngine, store: DynamoStore, clock: ManualClock
) -> None:
    root = cron(store, clock, "root")
    middle = after(store, clock, "middle", [root])
    with Sent(engine) as sent:
        after(store, clock, "leaf", [middle])
    # the graph sequence, then the walk (middle, then root), then one transaction
    assert sent.names == ["GetItem", "BatchGetItem", "BatchGetItem", "TransactWriteItems"]
    assert sent.actions() == [
        ("Put", "jobs"),  # the new job, if it does not exist
        ("Update", "jobs"),  # middle: has_dependents, version + 1; not deleted, depends_on as read
        ("Put", "leases"),  # the reverse edge middle -> leaf
        ("ConditionCheck", "jobs"),  # root: depends_on still none
        ("Update", "leases"),  # the owner's graph sequence + 1
    ]


def test_a_delete_or_a_patch_that_moves_no_edge_is_a_single_write(
    engine: AwsEngine, store: DynamoStore, clock: ManualClock
) -> None:
    root = cron(store, clock, "root")
    leaf = after(store, clock, "leaf", [root])
    lonely = cron(store, clock, "lonely")
    with Sent(engine) as sent:
        service.update_job(store, OWNER, leaf.id, {"depends_on": {"jobs": [root.id], "when": "failed"}}, clock.now_ms())
        lifecycle.delete_job(store, OWNER, lonely.id, clock.now_ms())
    assert "TransactWriteItems" not in sent.names and sent.names.count("PutItem") == 2
    assert "GetItem" not in sent.names  # no edge was read, so no graph sequence either


def test_a_check_too_large_for_one_transaction_is_conditioned_on_the_graph_sequence(
    engine: AwsEngine, store: DynamoStore, clock: ManualClock
) -> None:
    roots = [cron(store, clock, f"root-{i}") for i in range(90)]
    mids = [after(store, clock, f"mid-{i}", roots[i * 9 : i * 9 + 9]) for i in range(10)]
    with Sent(engine) as sent:
        after(store, clock, "top", mids)  # reads 100 jobs
    kinds = [kind for kind, _ in sent.actions()]
    assert "ConditionCheck" not in kinds and len(kinds) == 1 + 2 * 10 + 1
    (items,) = [params["TransactItems"] for name, params in sent.calls if name == "TransactWriteItems"]
    assert items[-1]["Update"]["ConditionExpression"] == "seq = :seen_seq"


def _cancelled(*codes: str) -> ClientError:
    reasons = [{"Code": code} for code in codes]
    return ClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}, "CancellationReasons": reasons},  # type: ignore[typeddict-unknown-key]
        "TransactWriteItems",
    )


def _fail_first(store: DynamoStore, monkeypatch: pytest.MonkeyPatch, error: ClientError) -> list[int]:
    client = store._tables.client
    real = client.transact_write_items
    calls: list[int] = []

    def transact(**request: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return real(**request)

    monkeypatch.setattr(client, "transact_write_items", transact)
    return calls


def test_a_transaction_conflict_is_decided_again(
    store: DynamoStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cron(store, clock, "root")
    calls = _fail_first(store, monkeypatch, _cancelled("None", "TransactionConflict", "None", "None"))
    leaf = after(store, clock, "leaf", [root])
    assert len(calls) == 2 and store.dependents_of(root.id) == [leaf.id]


def test_a_decision_that_keeps_losing_is_a_clear_conflict(
    store: DynamoStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cron(store, clock, "root")

    def always_lost(**_: Any) -> Any:
        raise _cancelled("None", "ConditionalCheckFailed")

    monkeypatch.setattr(store._tables.client, "transact_write_items", always_lost)
    with pytest.raises(ConcurrentModification, match="kept changing") as caught:
        after(store, clock, "leaf", [root])
    assert caught.value.field == "depends_on"
    assert store.dependents_of(root.id) == []


@pytest.mark.parametrize("reason", ["ThrottlingError", "ValidationError"])
def test_a_transaction_cancelled_for_another_reason_is_no_race(
    store: DynamoStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    root = cron(store, clock, "root")
    calls = _fail_first(store, monkeypatch, _cancelled("None", reason))
    with pytest.raises(ClientError):  # as the same error of a single write: not decided again
        after(store, clock, "leaf", [root])
    assert len(calls) == 1
