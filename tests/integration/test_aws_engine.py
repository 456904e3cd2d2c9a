"""The ``aws`` engine's own behaviour, against moto (never AWS).

The cross-engine port behaviour lives in tests/contract; this file covers what only the DynamoDB/SQS
engine has: bootstrap, item layout, sparse indexes, the two-step lease takeover, the write units one
run costs, request serialization, the queue's batching and redrive, and the service clock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from punctual import ids, resources, rules
from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, DispatchFailed, ServiceClock, SqsQueue, ensure_resources
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.store import DynamoStore
from punctual.errors import ConcurrentModification, ConfigError, InvalidCursor, JobTooLarge, LeaseLost, Throttled
from punctual.jobs.checks import check_size
from punctual.model import (
    MAX_JOB_BYTES,
    MAX_PAYLOAD_BYTES,
    Attempt,
    AttemptOutcome,
    HttpTarget,
    Job,
    JobStatus,
    LambdaTarget,
    RetryPolicy,
    Run,
    RunState,
)
from punctual.port import Advance, Alert, Dispatch, LeaseOutcome, RunChange, ShardLease
from punctual.resources import DISPATCH_QUEUE, TABLES
from tests.integration.wire import WriteMeter, item_size

pytestmark = pytest.mark.integration

START_MS = 1_800_000_000_000
SECOND = 1_000
MINUTE = 60 * SECOND
SHARDS = 4
OPEN_SHARDS = 2


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials, one region, and no endpoint or profile from the developer's shell."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "engine": EngineKind.AWS,
        "name_prefix": "it",
        "shards": SHARDS,
        "open_shards": OPEN_SHARDS,
        **overrides,
    }
    return Settings(**values)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def engine(moto: None, clock: ManualClock) -> Iterator[AwsEngine]:
    engine = AwsEngine.from_settings(_settings(), clock=clock, serialize=True, bootstrap=True)
    yield engine
    engine.close()


@pytest.fixture
def store(engine: AwsEngine) -> DynamoStore:
    return engine.store


def _raw() -> Any:
    """An unserialized client for direct reads: safe inside request hooks (no lock re-entry)."""
    return boto3.client("dynamodb", region_name="us-east-1")


# -- builders --------------------------------------------------------------------------------------


def _job(owner: str = "owner-a", *, status: JobStatus = JobStatus.ACTIVE, created_at: int = START_MS, **f: Any) -> Job:
    job_id = f.pop("id", ids.new_job_id())
    values: dict[str, Any] = {
        "id": job_id,
        "owner": owner,
        "name": f"job-{job_id[-6:]}",
        "schedule": "* * * * *",
        "target": HttpTarget(url="https://example.com/hook"),
        "status": status,
        "next_run_at": START_MS if status is JobStatus.ACTIVE else None,
        "due_shard": ids.shard_of(job_id, SHARDS),
        "created_at": created_at,
        "updated_at": created_at,
        **f,
    }
    return Job(**values)


def _run(job: Job, scheduled_at: int = START_MS, **f: Any) -> Run:
    values: dict[str, Any] = {
        "job_id": job.id,
        "scheduled_at": scheduled_at,
        "owner": job.owner,
        "deadline_at": scheduled_at + MINUTE,
        "created_at": START_MS,
        "expires_at": START_MS // SECOND + 30 * 24 * 3600,  # epoch seconds, the TTL format
        **f,
    }
    return Run(**values)


def _succeeded(now: int, attempt: int = 1, worker: str = "w1") -> RunChange:
    record = Attempt(
        number=attempt, worker_id=worker, started_at=now, finished_at=now, outcome=AttemptOutcome.SUCCEEDED
    )
    return RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, append=record, finished_at=now)


def _index_keys(table: str, index: str, partition: str, value: int) -> set[str]:
    """Table keys in one partition of an index, read directly (not through the store)."""
    response = _raw().query(
        TableName=table,
        IndexName=index,
        KeyConditionExpression="#p = :v",
        ExpressionAttributeNames={"#p": partition},
        ExpressionAttributeValues={":v": {"N": str(value)}},
    )
    return {
        item["job_id"]["S"] + (f"@{item['scheduled_at']['N']}" if "scheduled_at" in item else "")
        for item in response["Items"]
    }


# -- bootstrap -------------------------------------------------------------------------------------


def test_bootstrap_is_idempotent_and_builds_the_resources_as_defined(moto: None) -> None:
    # Given resources created once
    first = ensure_resources(_settings())
    # When bootstrap runs again
    second = ensure_resources(first)
    # Then nothing changes, and every table, index, TTL and the redrive policy are as defined
    assert second == first
    assert first.jobs_table == "it-jobs" and first.runs_table == "it-runs" and first.leases_table == "it-leases"
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    for table in TABLES:
        name = first.table_name(table.logical_name)
        described = ddb.describe_table(TableName=name)["Table"]
        assert described["TableStatus"] == "ACTIVE"
        assert {i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])} == {i.name for i in table.indexes}
        ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", table.ttl_attribute)
    sqs = boto3.client("sqs", region_name="us-east-1")
    assert first.dispatch_queue_url and first.dead_letter_queue_url
    attributes = sqs.get_queue_attributes(QueueUrl=first.dispatch_queue_url, AttributeNames=["All"])["Attributes"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=first.dead_letter_queue_url, AttributeNames=["QueueArn"])
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn["Attributes"]["QueueArn"]
    assert int(redrive["maxReceiveCount"]) == DISPATCH_QUEUE.max_receives
    assert int(attributes["VisibilityTimeout"]) == DISPATCH_QUEUE.visibility_timeout_s
    assert int(attributes["MessageRetentionPeriod"]) == DISPATCH_QUEUE.retention_s


def test_engine_finds_queues_by_name_and_explains_when_they_are_missing(moto: None, clock: ManualClock) -> None:
    # Given no queue URLs in the settings
    with pytest.raises(ConfigError, match="PUNCTUAL_DISPATCH_QUEUE_URL"):
        AwsEngine(_settings(), clock=clock)
    bootstrapped = ensure_resources(_settings())
    # When the engine opens with only the prefix
    engine = AwsEngine(_settings(), clock=clock)
    # Then it found the queues by their conventional names
    assert engine.queue.url == bootstrapped.dispatch_queue_url
    assert engine.dead_letters.url == bootstrapped.dead_letter_queue_url
    assert (engine.store.shards, engine.queue.name) == (SHARDS, "it-dispatch")
    engine.close()


# -- item layout -----------------------------------------------------------------------------------


def test_items_round_trip_exactly() -> None:
    job = _job(
        schedule=None,
        run_at=datetime(2027, 1, 15, 9, 30, tzinfo=timezone(timedelta(hours=1))),
        payload={"any": ["json", 1, None, {"ü": 2.5}]},
        target=LambdaTarget(function_arn="arn:aws:lambda:us-east-1:123456789012:function:fn"),
        retry=RetryPolicy(backoff_s=5, max_backoff_s=50),
        last_run_at=START_MS - MINUTE,
    )
    assert it.item_to_job(it.job_to_item(job, retention_days=30)) == job
    paused = _job(status=JobStatus.PAUSED)
    paused_item = it.job_to_item(paused, retention_days=30)
    assert "next_run_at" not in paused_item and it.item_to_job(paused_item) == paused  # due_shard kept
    deleted_item = it.job_to_item(_job(status=JobStatus.DELETED), retention_days=30)
    assert int(deleted_item["expires_at"]["N"]) == START_MS // 1000 + 30 * 86_400  # TTL in seconds

    record = Attempt(number=1, worker_id="w", started_at=1, finished_at=2, outcome=AttemptOutcome.FAILED, error="x")
    run = _run(job, state=RunState.RETRYING, attempt=1, next_attempt_at=START_MS + 5, attempts=[record], note="n")
    assert it.item_to_run(it.run_to_item(run, open_shards=OPEN_SHARDS)) == run
    # run TTL is epoch seconds in the model too; only a finished run carries the TTL attribute
    open_run = _run(job, expires_at=START_MS // 1000 + 86_400)
    open_item = it.run_to_item(open_run, open_shards=OPEN_SHARDS)
    assert "expires_at" not in open_item and open_item["retain_until"] == {"N": str(START_MS // 1000 + 86_400)}
    assert it.item_to_run(open_item) == open_run
    done = _run(job, state=RunState.SUCCEEDED, expires_at=START_MS // 1000 + 86_400)
    done_item = it.run_to_item(done, open_shards=OPEN_SHARDS)
    assert done_item["expires_at"] == {"N": str(START_MS // 1000 + 86_400)} and "retain_until" not in done_item
    assert it.item_to_run(done_item) == done

    alert = Alert(owner="o", run_id=run.run_id, job_id=job.id, created_at=START_MS, reason="dead")
    assert it.item_to_alert(it.alert_to_item(alert, retention_days=30)) == alert


def test_reads_keep_only_the_newest_attempts() -> None:
    job = _job()
    records = [Attempt(number=i, outcome=AttemptOutcome.FAILED) for i in range(1, 41)]
    item = it.run_to_item(_run(job, attempts=records), open_shards=OPEN_SHARDS)
    assert [a.number for a in it.item_to_run(item).attempts] == [a.number for a in rules.bounded(records)]


def test_run_and_job_items_stay_small() -> None:
    # the write budget assumes items under 1 KB (one write unit each)
    job = _job(payload={"report": "nightly", "recipients": ["a@example.com", "b@example.com"]})
    run = _run(job)
    assert item_size(it.job_to_item(job, retention_days=30)) < 1024
    assert item_size(it.run_to_item(run, open_shards=OPEN_SHARDS)) < 512


def test_conditions_name_only_the_placeholders_they_use() -> None:
    assert c.names_in(c.LEASABLE) == {"#state": "state"}
    assert c.names_in(c.JOB_STILL_DUE) == {"#status": "status"}
    assert c.names_in(c.SHARD_FREE) == {}
    assert c.unchanged_since(False).endswith(c.NO_LEASE_AS_READ)


def test_store_round_trips_jobs_and_runs(store: DynamoStore) -> None:
    job = _job(payload={"k": "v"})
    store.create_job(job)
    assert store.get_job(job.id) == job
    run = _run(job)
    assert store.insert_runs([run]) == [True]
    assert store.get_run(job.id, run.scheduled_at) == run


# -- sparse indexes --------------------------------------------------------------------------------


def test_due_index_holds_only_active_jobs(engine: AwsEngine, store: DynamoStore) -> None:
    # Given an active and a paused job on the same shard
    active = _job(id=_job_id_in_shard(1))
    paused = _job(id=_job_id_in_shard(1), status=JobStatus.PAUSED)
    store.create_job(active)
    store.create_job(paused)
    table = store.jobs_table
    # Then only the active one is in the index
    assert _index_keys(table, "due", "due_shard", 1) == {active.id}
    assert [d.job_id for d in store.due_jobs(1, START_MS, 10)] == [active.id]
    # When it is paused, it leaves the index; when resumed, it comes back
    stored = store.update_job(active.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None}), 1)
    assert _index_keys(table, "due", "due_shard", 1) == set()
    resumed = stored.model_copy(update={"status": JobStatus.ACTIVE, "next_run_at": START_MS + MINUTE})
    store.update_job(resumed, stored.version)
    assert _index_keys(table, "due", "due_shard", 1) == {active.id}
    # When a one-time advance completes it, it leaves the index for good
    done = Advance(active.id, START_MS + MINUTE, None, last_run_at=START_MS + MINUTE, now=START_MS + MINUTE)
    assert store.advance_jobs([done]) == [True]
    assert _index_keys(table, "due", "due_shard", 1) == set()
    completed = store.get_job(active.id)
    assert (completed.status, completed.next_run_at, completed.due_shard) == (JobStatus.COMPLETED, None, 1)


def test_due_jobs_pages_by_next_run_at_then_job_id(store: DynamoStore) -> None:
    jobs = [_job(id=_job_id_in_shard(2), next_run_at=START_MS + (i % 2) * SECOND) for i in range(7)]
    for job in jobs:
        store.create_job(job)
    expected = sorted((j.next_run_at or 0, j.id) for j in jobs)
    seen: list[tuple[int, str]] = []
    after = None
    while page := store.due_jobs(2, START_MS + SECOND, 3, after=after):
        seen += [(d.next_run_at, d.job_id) for d in page]
        after = page[-1]
    assert seen == expected


def test_open_index_holds_only_open_runs(engine: AwsEngine, store: DynamoStore) -> None:
    job = _job()
    store.create_job(job)
    run = _run(job)
    shard = it.open_shard(job.id, run.scheduled_at, OPEN_SHARDS)
    store.insert_runs([run])
    key = f"{job.id}@{run.scheduled_at}"
    assert key in _index_keys(store.runs_table, "open", "open_shard", shard)
    leased = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, MINUTE)
    assert leased.outcome is LeaseOutcome.LEASED
    assert key in _index_keys(store.runs_table, "open", "open_shard", shard)  # a lease keeps it open
    store.finish_run(job.id, run.scheduled_at, "w1", 1, _succeeded(START_MS))
    assert key not in _index_keys(store.runs_table, "open", "open_shard", shard)


# -- listings --------------------------------------------------------------------------------------


def test_list_jobs_pages_through_filtered_items_without_skipping(store: DynamoStore) -> None:
    # Given 24 jobs of which every third is deleted, and another owner's job
    jobs = [
        _job("lister", created_at=START_MS + i, status=JobStatus.DELETED if i % 3 == 0 else JobStatus.ACTIVE)
        for i in range(24)
    ]
    for job in [*jobs, _job("someone-else")]:
        store.create_job(job)
    # When listing 5 at a time
    listed: list[str] = []
    cursor = None
    for _ in range(10):
        page = store.list_jobs("lister", limit=5, cursor=cursor)
        listed += [j.id for j in page.items]
        if (cursor := page.cursor) is None:
            break
    # Then every live job appears once, newest first; deleted ones only when asked for
    live = [j for j in jobs if j.status is not JobStatus.DELETED]
    assert listed == [j.id for j in sorted(live, key=lambda j: j.created_at, reverse=True)]
    deleted = store.list_jobs("lister", status=JobStatus.DELETED, limit=100)
    assert len(deleted.items) == 8 and deleted.cursor is None


def test_a_listing_never_silently_drops_jobs_dynamodb_left_unprocessed(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_job(_job())
    client = store._tables.client  # type: ignore[attr-defined]

    def throttled(**request: Any) -> dict[str, Any]:
        return {"Responses": {}, "UnprocessedKeys": request["RequestItems"]}

    monkeypatch.setattr(client, "batch_get_item", throttled)
    monkeypatch.setattr("punctual.engines.aws.tables.time.sleep", lambda _s: None)
    with pytest.raises(Throttled):
        store.list_jobs("owner-a")


def test_list_cursors_are_checked(store: DynamoStore) -> None:
    for i in range(3):
        store.create_job(_job("a", created_at=START_MS + i))
    cursor = store.list_jobs("a", limit=1).cursor
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        store.list_jobs("b", cursor=cursor)  # another owner's position
    with pytest.raises(InvalidCursor):
        store.list_jobs("a", cursor=cursor[:-3] + "abc")
    with pytest.raises(InvalidCursor):
        store.list_jobs("a", cursor=ids.encode_cursor("jobs", {"o": "a", "c": "1", "j": "x"}))


# -- lease takeover --------------------------------------------------------------------------------


def test_takeover_logs_the_lost_attempt_and_fences_the_old_worker(engine: AwsEngine, store: DynamoStore) -> None:
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    first = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, 10 * SECOND)
    assert first.outcome is LeaseOutcome.LEASED and first.run is not None
    # While the lease is live, another worker is refused (one request: no takeover attempted)
    with _requests(engine) as sent:
        held = store.lease_run(job.id, run.scheduled_at, "w2", START_MS + 5 * SECOND, 10 * SECOND)
    assert held.outcome is LeaseOutcome.HELD and held.run == first.run
    assert sent == ["UpdateItem"]
    # When the lease has expired, the next worker takes over in two writes
    later = START_MS + 11 * SECOND
    with _requests(engine) as sent:
        taken = store.lease_run(job.id, run.scheduled_at, "w2", later, 10 * SECOND)
    assert sent == ["UpdateItem", "UpdateItem"]
    assert taken.outcome is LeaseOutcome.LEASED and taken.run is not None
    assert taken.run == rules.leased(first.run, "w2", later, 10 * SECOND)
    assert [a.outcome for a in taken.run.attempts] == [AttemptOutcome.LEASE_EXPIRED]
    # And the slow first worker can no longer heartbeat or finish
    with pytest.raises(LeaseLost):
        store.heartbeat_run(job.id, run.scheduled_at, "w1", 1, later + MINUTE)
    with pytest.raises(LeaseLost):
        store.finish_run(job.id, run.scheduled_at, "w1", 1, _succeeded(later))
    finished = store.finish_run(job.id, run.scheduled_at, "w2", 2, _succeeded(later, attempt=2, worker="w2"))
    assert finished.state is RunState.SUCCEEDED and len(finished.attempts) == 2


def test_takeover_that_loses_the_race_reports_the_winner(engine: AwsEngine, store: DynamoStore) -> None:
    # Given an expired lease
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    store.lease_run(job.id, run.scheduled_at, "w1", START_MS, SECOND)
    later = START_MS + 5 * SECOND
    rival = DynamoStore(
        _raw(),
        jobs_table=store.jobs_table,
        runs_table=store.runs_table,
        leases_table=store.leases_table,
        open_shards=OPEN_SHARDS,
    )

    # When another worker takes it over between our failed lease and our takeover write
    def race(params: dict[str, Any], **_: Any) -> None:
        if params.get("ConditionExpression") == c.TAKEOVER and not raced:
            raced.append(rival.lease_run(job.id, run.scheduled_at, "w3", later, MINUTE).outcome)

    raced: list[LeaseOutcome] = []
    events = engine.clients.dynamodb.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", race)
    try:
        result = store.lease_run(job.id, run.scheduled_at, "w2", later, MINUTE)
    finally:
        events.unregister("before-parameter-build.dynamodb.UpdateItem", race)
    # Then the rival won, we report HELD with its run, and only one lost attempt was logged
    assert raced == [LeaseOutcome.LEASED]
    assert result.outcome is LeaseOutcome.HELD and result.run is not None
    assert (result.run.worker_id, result.run.attempt) == ("w3", 2)
    assert [a.outcome for a in store.get_run(job.id, run.scheduled_at).attempts] == [AttemptOutcome.LEASE_EXPIRED]


CHANGES: dict[str, Callable[[int], RunChange]] = {
    "retrying": lambda now: RunChange(
        state=RunState.RETRYING,
        now=now,
        deadline_at=now + MINUTE,
        append=Attempt(number=1, outcome=AttemptOutcome.FAILED, error="boom"),
        next_attempt_at=now + 10 * SECOND,
    ),
    "dead with note": lambda now: RunChange(
        state=RunState.DEAD, now=now, deadline_at=now, finished_at=now, note="retries exhausted", next_attempt_at=now
    ),
    "keep lease": lambda now: RunChange(state=RunState.RUNNING, now=now, deadline_at=now + 1, clear_lease=False),
    "reset attempt": lambda now: RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, attempt=7),
}


@pytest.mark.parametrize("name", CHANGES)
def test_finish_applies_a_change_exactly_as_the_rules_do(store: DynamoStore, name: str) -> None:
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    leased = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, MINUTE).run
    assert leased is not None
    change = CHANGES[name](START_MS + SECOND)
    finished = store.finish_run(job.id, run.scheduled_at, "w1", 1, change)
    assert finished == rules.apply_change(leased, change)
    assert store.get_run(job.id, run.scheduled_at) == finished


def test_ttl_never_applies_to_an_open_run(store: DynamoStore) -> None:
    # Given a run inserted with a retention: while it is open, DynamoDB TTL must not see it
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    key = it.run_key(job.id, run.scheduled_at)

    def stored() -> dict[str, Any]:
        item: dict[str, Any] = _raw().get_item(TableName=store.runs_table, Key=key, ConsistentRead=True)["Item"]
        return item

    assert "expires_at" not in stored() and stored()["retain_until"] == {"N": str(run.expires_at)}
    leased = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, MINUTE).run
    assert leased is not None and "expires_at" not in stored()
    # When it finishes, the TTL attribute takes the retention it was given, and the run reads the same
    done = RunChange(state=RunState.SUCCEEDED, now=START_MS + SECOND, deadline_at=START_MS, finished_at=START_MS)
    finished = store.finish_run(job.id, run.scheduled_at, "w1", 1, done)
    assert stored()["expires_at"] == {"N": str(run.expires_at)} and "retain_until" not in stored()
    assert finished.expires_at == run.expires_at


def test_transition_compares_state_attempt_and_lease(store: DynamoStore) -> None:
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    leased = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, MINUTE).run
    assert leased is not None
    cancel = RunChange(state=RunState.CANCELLED, now=START_MS, deadline_at=START_MS)
    with pytest.raises(ConcurrentModification):
        store.transition_run(run, cancel)  # read before the lease (no lease then)
    with pytest.raises(ConcurrentModification):
        store.transition_run(leased.model_copy(update={"lease_expires_at": 1}), cancel)
    assert store.transition_run(leased, cancel) == rules.apply_change(leased, cancel)


def test_past_deadline_runs_reads_every_open_shard(store: DynamoStore) -> None:
    # Given six overdue runs, three on each open shard
    job = _job()
    store.create_job(job)
    by_shard: dict[int, list[int]] = {0: [], 1: []}
    at = START_MS
    while min(len(times) for times in by_shard.values()) < 3:
        times = by_shard[it.open_shard(job.id, at, OPEN_SHARDS)]
        if len(times) < 3:
            times.append(at)
        at += SECOND
    runs = [_run(job, when, deadline_at=START_MS + i) for i, when in enumerate(sorted(by_shard[0] + by_shard[1]))]
    store.insert_runs(runs)
    # When one is leased (its deadline moves to the lease end) and one is cancelled (it leaves the index)
    store.lease_run(job.id, runs[0].scheduled_at, "w", START_MS, 10 * MINUTE)
    store.transition_run(runs[1], RunChange(state=RunState.CANCELLED, now=START_MS, deadline_at=START_MS))
    # Then the other four are found, most overdue first, from both shards
    found = store.past_deadline_runs(START_MS + SECOND, START_MS + MINUTE, 100)
    assert [r.scheduled_at for r in found] == [r.scheduled_at for r in runs[2:]]
    assert len(store.past_deadline_runs(START_MS + SECOND, START_MS + MINUTE, 2)) == 2
    assert store.past_deadline_runs(START_MS + SECOND, START_MS - 1, 100) == []  # scheduled_before bounds it


# -- shard leases ----------------------------------------------------------------------------------


def test_shard_lease_epochs_follow_the_rules(engine: AwsEngine, store: DynamoStore) -> None:
    current: ShardLease | None = None
    steps = [("a", 0), ("a", 1_000), ("b", 2_000), ("b", 20_000), ("a", 21_000), ("a", 40_000)]
    for owner, at in steps:
        expected = rules.acquired(current, 3, owner, START_MS + at, 10_000)
        with _requests(engine) as sent:
            got = store.acquire_shard(3, owner, START_MS + at, 10_000)
        if rules.may_acquire_shard(current, owner, START_MS + at):
            assert got == expected
            current = got
        else:
            assert got is None
            assert sent == ["UpdateItem"]  # another's live lease costs one request, no second write
    assert current is not None and current.epoch == 3
    assert store.renew_shard(ShardLease(3, "b", 2, 0), START_MS, 1) is None  # fenced out
    renewed = store.renew_shard(current, START_MS + 41_000, 10_000)
    assert renewed == ShardLease(3, "a", 3, START_MS + 51_000)
    store.release_shard(ShardLease(3, "b", 2, 0))  # not held: a no-op
    assert store.shard_leases() == [renewed]
    store.release_shard(renewed)
    assert store.shard_leases() == [ShardLease(3, "a", 3, 0)]


def test_alerts_are_recorded_once_per_run(store: DynamoStore) -> None:
    alerts = [Alert("o", f"run_{'0' * 32}_{i}", "job", START_MS + i, "dead") for i in range(3)]
    assert [store.record_alert(a) for a in alerts] == [True, True, True]
    assert store.record_alert(alerts[0]) is False
    assert store.list_alerts("o", limit=2) == [alerts[2], alerts[1]]
    assert store.list_alerts("nobody") == []


# -- errors ----------------------------------------------------------------------------------------


def test_only_condition_failures_become_outcomes(engine: AwsEngine) -> None:
    # A store pointed at tables that do not exist: every call must raise the ClientError unchanged.
    broken = DynamoStore(engine.clients.dynamodb, jobs_table="nope", runs_table="nope", leases_table="nope")
    job = _job()
    calls: list[Callable[[], object]] = [
        lambda: broken.create_job(job),
        lambda: broken.update_job(job, 1),
        lambda: broken.insert_runs([_run(job)]),
        lambda: broken.advance_jobs([Advance(job.id, 1, 2, 1, 1)]),
        lambda: broken.lease_run(job.id, START_MS, "w", START_MS, 1),
        lambda: broken.finish_run(job.id, START_MS, "w", 1, _succeeded(START_MS)),
        lambda: broken.acquire_shard(0, "a", START_MS, 1),
        lambda: broken.record_alert(Alert("o", "r", "j", 1, "x")),
    ]
    for call in calls:
        with pytest.raises(ClientError) as raised:
            call()
        assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"


# -- serialization ---------------------------------------------------------------------------------


def test_serialized_requests_make_races_against_moto_meaningful(store: DynamoStore) -> None:
    # Given one run and eight workers leasing it at once (moto needs serialize=True to be correct)
    job = _job()
    store.create_job(job)
    run = _run(job)
    store.insert_runs([run])
    barrier = threading.Barrier(8)
    outcomes: list[LeaseOutcome] = []

    def lease(worker: str) -> None:
        barrier.wait()
        outcomes.append(store.lease_run(job.id, run.scheduled_at, worker, START_MS, MINUTE).outcome)

    threads = [threading.Thread(target=lease, args=(f"w{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one won
    assert sorted(outcomes).count(LeaseOutcome.LEASED) == 1
    assert store.get_run(job.id, run.scheduled_at).attempt == 1


def test_batched_claim_writes_report_each_item(store: DynamoStore) -> None:
    job = _job()
    store.create_job(job)
    runs = [_run(job, START_MS + i * MINUTE) for i in range(12)]
    assert store.insert_runs(runs[:8]) == [True] * 8
    assert store.insert_runs(runs) == [False] * 8 + [True] * 4  # concurrent puts, results in order
    advances = [Advance(job.id, START_MS, START_MS + MINUTE, START_MS, START_MS)] * 3
    assert sorted(store.advance_jobs(advances)) == [False, False, True]


# -- write units -----------------------------------------------------------------------------------

# One run's happy path, in DynamoDB write units (items under 1 KB):
#   claim   advance the job: table 1 + due key moved (index delete + put) 2 (by_owner projects only
#           status, which a recurring job's claim does not change: no write there)
#   insert  the run: table 1 + open index put 1
#   lease   table 1 (the open index key, scheduled_at, never changes; KEYS_ONLY projection)
#   finish  table 1 + open index delete 1 + the owner's stats counter 1 (GET /stats; engines/aws/stats.py)
EXPECTED_UNITS = {"advance": 3, "insert": 2, "lease": 1, "finish": 3}
MAX_CLAIM_UNITS = 2 + 11  # due index move + an item of at most MAX_JOB_BYTES and its state (model/bounds.py)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, EXPECTED_UNITS),
        # the design budget (DESIGN.md 3): -c open_index=false -c stats_counters=false
        ({"open_index": False, "stats_counters": False}, {"advance": 3, "insert": 1, "lease": 1, "finish": 1}),
    ],
    ids=["default", "both-options-off"],
)
def test_write_units_of_one_run(
    moto: None, clock: ManualClock, options: dict[str, bool], expected: dict[str, int]
) -> None:
    engine = AwsEngine.from_settings(_settings(**options), clock=clock, serialize=True, bootstrap=True)
    store = engine.store
    # moto reports ConsumedCapacity, but as a constant 1.0 per request whatever the item size and
    # indexes: it cannot measure this. So the meter counts write requests and computes each one's
    # units from the item before and after it, with DynamoDB's published rules.
    probe = engine.clients.dynamodb.put_item(
        TableName=store.leases_table,
        Item={"pk": {"S": "probe"}, "sk": {"S": "probe"}, "blob": {"S": "x" * 3000}},
        ReturnConsumedCapacity="INDEXES",
    )
    assert probe["ConsumedCapacity"]["CapacityUnits"] == 1.0  # a 3 KB item really costs 3

    job = _job(payload={"report": "nightly"})
    store.create_job(job)
    due = store.due_jobs(job.due_shard, clock.now_ms(), 10)
    assert [d.job_id for d in due] == [job.id]
    run = _run(job)
    meter = WriteMeter(engine, resources.tables(open_index=store.open_index))
    with meter.phase("insert"):
        assert store.insert_runs([run]) == [True]
    with meter.phase("advance"):
        advance = Advance(job.id, START_MS, START_MS + MINUTE, last_run_at=START_MS, now=START_MS)
        assert store.advance_jobs([advance]) == [True]
    engine.queue.send([Dispatch(run.run_id, START_MS)])
    delivery = engine.queue.receive(1, 60)[0]
    with meter.phase("lease"):
        leased = store.lease_run(job.id, run.scheduled_at, "w1", START_MS, MINUTE)
    assert leased.outcome is LeaseOutcome.LEASED
    with meter.phase("finish"):
        store.finish_run(job.id, run.scheduled_at, "w1", 1, _succeeded(START_MS))
    engine.queue.delete(delivery.receipt)
    meter.close()
    engine.close()

    # the finish is one request, plus the counter's ADD when the deployment keeps GET /stats counters
    assert meter.requests == {"insert": 1, "advance": 1, "lease": 1, "finish": 2 if store.stats_counters else 1}
    assert meter.units == expected
    assert sum(meter.units.values()) == (9 if not options else 6)


def test_the_largest_job_accepted_keeps_a_claim_within_its_bound(engine: AwsEngine, store: DynamoStore) -> None:
    """Issue 10, item 5: a claim rewrites the job item and pays 1 unit per KB of it. A job at
    MAX_JOB_BYTES claims for at most MAX_CLAIM_UNITS (20 headers of 4 KiB made it ~93)."""
    headers = {f"x-h{i}": "v" * 4000 for i in range(20)}
    job = _job(target=HttpTarget(url="https://example.com/hook", headers=headers))
    with pytest.raises(JobTooLarge):
        check_size(job.spec)
    # Given the largest job the API accepts (the largest payload, then a header up to the bound)
    small = _job(
        payload="p" * (MAX_PAYLOAD_BYTES - 2), target=HttpTarget(url="https://example.com/hook", headers={"x-pad": ""})
    )
    pad = "v" * (MAX_JOB_BYTES - small.spec.size_bytes())
    job = _job(payload=small.payload, target=HttpTarget(url="https://example.com/hook", headers={"x-pad": pad}))
    check_size(job.spec)
    assert job.spec.size_bytes() == MAX_JOB_BYTES
    store.create_job(job)
    meter = WriteMeter(engine)
    with meter.phase("advance"):
        advance = Advance(job.id, START_MS, START_MS + MINUTE, last_run_at=START_MS, now=START_MS)
        assert store.advance_jobs([advance]) == [True]
    meter.close()
    assert meter.units["advance"] <= MAX_CLAIM_UNITS


# -- queue -----------------------------------------------------------------------------------------


def test_queue_batches_delays_and_receives_in_rounds(engine: AwsEngine) -> None:
    queue = engine.queue
    dispatches = [Dispatch(f"run_{'a' * 32}_{i}", START_MS + i, delay_s=0) for i in range(23)]
    delayed = Dispatch(f"run_{'b' * 32}_1", START_MS, delay_s=900)
    queue.send([*dispatches, delayed])
    assert queue.depth() == 24
    got = queue.receive(30, visibility_s=30)
    assert sorted(d.run_id for d in got) == sorted(d.run_id for d in dispatches)  # the delayed one is hidden
    first = got[0]
    assert first.receive_count == 1 and first.not_before >= START_MS and "sent_at" in first.extra
    queue.extend(first.receipt, 0)  # visible again now
    again = queue.receive(1, visibility_s=30)
    assert [(d.run_id, d.receive_count) for d in again] == [(first.run_id, 2)]
    for delivery in [*got, *again]:
        queue.delete(delivery.receipt)
    assert queue.depth() == 1  # only the delayed message is left


def test_poison_message_moves_to_the_dead_letter_queue(engine: AwsEngine) -> None:
    engine.queue.send([Dispatch(f"run_{'c' * 32}_1", START_MS)])
    counts = [d.receive_count for _ in range(DISPATCH_QUEUE.max_receives or 0) for d in engine.queue.receive(1, 0)]
    assert counts == list(range(1, (DISPATCH_QUEUE.max_receives or 0) + 1))
    assert engine.queue.receive(1, 0) == []  # moto redrives on this receive
    dead = engine.dead_letters.receive(10, 30)
    assert [d.run_id for d in dead] == [f"run_{'c' * 32}_1"]


def test_malformed_messages_are_delivered_for_the_worker_to_drop(engine: AwsEngine) -> None:
    engine.clients.sqs.send_message(QueueUrl=engine.queue.url, MessageBody="not json")
    [delivery] = engine.queue.receive(1, 30)
    assert delivery.run_id == "" and delivery.extra["malformed_body"] == "not json"


class _FlakySqs:
    """Fails the first ``failures`` attempts of every entry; SenderFault makes failures permanent."""

    def __init__(self, failures: int, sender_fault: bool = False) -> None:
        self.failures, self.sender_fault, self.calls = failures, sender_fault, 0

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        if self.calls > self.failures:
            return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}
        failed = [{"Id": e["Id"], "Code": "InternalError", "SenderFault": self.sender_fault} for e in Entries]
        return {"Successful": [], "Failed": failed}


def test_send_retries_partial_failures_then_raises() -> None:
    one = [Dispatch(f"run_{'d' * 32}_1", START_MS)]
    flaky = _FlakySqs(failures=2)
    SqsQueue(flaky, "https://sqs.us-east-1.amazonaws.com/123456789012/q").send(one)
    assert flaky.calls == 3
    with pytest.raises(DispatchFailed) as raised:
        SqsQueue(_FlakySqs(failures=99), "https://sqs/1/q").send(one)
    assert raised.value.details == {"run_ids": [one[0].run_id]}
    permanent = _FlakySqs(failures=99, sender_fault=True)
    with pytest.raises(DispatchFailed):
        SqsQueue(permanent, "https://sqs/1/q").send(one)
    assert permanent.calls == 1  # the request itself is wrong: no resend


# -- service clock ---------------------------------------------------------------------------------


def _http_date(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def test_service_clock_narrows_the_skew_from_many_responses() -> None:
    clock = ServiceClock()
    # Given a server 2.3 s ahead, responses that take 20 ms, and Date truncated to the second
    sent_times = range(START_MS, START_MS + 20_000, 370)
    for local in sent_times:
        clock.observe(_http_date(local + 10 + 2_300), local, local + 20)
    # Then the window's bounds contain the skew and are about one round trip wide
    bounds = clock.bounds_ms
    assert bounds is not None and bounds[0] <= 2_300 <= bounds[1] and bounds[1] - bounds[0] <= 60
    assert clock.skew_ms is not None and abs(clock.skew_ms - 2_300) <= 30
    assert clock.last_sample_ms is not None and abs(clock.last_sample_ms - 2_300) <= 520  # one sample: +-0.5 s
    # When the local clock steps, the intersection empties and the window restarts from the newest sample
    clock.observe(_http_date(START_MS), 0, 0)
    assert clock.samples == len(sent_times) + 1
    assert clock.bounds_ms == (START_MS, START_MS + 999)
    clock.observe("not a date", 0, 1)
    assert clock.samples == len(sent_times) + 1


def test_endpoint_from_the_environment_and_date_headers_measured(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        engine = AwsEngine.from_settings(_settings(name_prefix="srv"), clock=clock, bootstrap=True)
        job = _job()
        engine.store.create_job(job)
        assert engine.store.get_job(job.id) == job
        assert engine.service_clock.samples > 0
        skew = engine.service_clock.skew_ms
        assert skew is not None and abs(skew) < 2_000  # same host: no real skew, one-second Date resolution
        engine.close()
    finally:
        server.stop()


# -- helpers ---------------------------------------------------------------------------------------


def _job_id_in_shard(shard: int) -> str:
    while True:
        job_id = ids.new_job_id()
        if ids.shard_of(job_id, SHARDS) == shard:
            return job_id


class _requests:  # noqa: N801 - used as a context manager, reads like a phrase
    """Collect the DynamoDB operation names the engine sends inside the block."""

    def __init__(self, engine: AwsEngine) -> None:
        self._events = engine.clients.dynamodb.meta.events
        self.sent: list[str] = []

    def _record(self, model: Any, **_: Any) -> None:
        self.sent.append(model.name)

    def __enter__(self) -> list[str]:
        self._events.register("before-call.dynamodb", self._record)
        return self.sent

    def __exit__(self, *exc: object) -> None:
        self._events.unregister("before-call.dynamodb", self._record)


# One upstream run's cost of releasing its dependents (docs/decisions/0076), items under 1 KB:
#   no dependents      nothing (has_dependents is false: the hook returns before any I/O)
#   each dependent     fill its release record 1
#   each release       insert the released run (table 1 + open index put 1) 2 + complete the record 1
# so a dependent of k upstreams costs 1 per upstream run plus 3 per release; its run then costs
# what any run costs after its claim (lease 1, finish 2): a released run skips the claim's advance.
def test_write_units_of_a_release(engine: AwsEngine, store: DynamoStore, clock: ManualClock) -> None:
    from punctual.dependencies.release import release_dependents
    from punctual.jobs import service
    from punctual.model import JobSpec

    def create(name: str, upstreams: list[str] | None = None) -> Any:
        body: dict[str, Any] = {"name": name, "target": {"type": "http", "url": "https://example.com/hook"}}
        body.update({"depends_on": {"jobs": upstreams}} if upstreams else {"schedule": "0 0 * * *"})
        return service.create_job(store, "owner", JobSpec.model_validate(body), clock.now_ms()).job

    lonely, extract, audit = create("lonely"), create("extract"), create("audit")
    create("transform", [extract.id])  # one upstream: every extract run releases it
    create("load", [extract.id, audit.id])  # two upstreams: released once both ran
    meter = WriteMeter(engine)

    def finish(job_id: str, phase: str) -> list[Run]:
        clock.advance(SECOND)
        run = _run(store.get_job(job_id)).model_copy(
            update={"scheduled_at": clock.now_ms(), "state": RunState.SUCCEEDED, "finished_at": clock.now_ms()}
        )
        store.insert_runs([run])
        with meter.phase(phase):
            return release_dependents(store, engine.queue, store.get_job(job_id), run, clock.now_ms())

    assert finish(lonely.id, "none") == []
    assert len(finish(extract.id, "extract")) == 1  # transform released, load half-filled
    assert len(finish(audit.id, "audit")) == 1  # load released
    meter.close()
    assert meter.requests.get("none", 0) == 0
    assert meter.units == {"extract": 1 + 3 + 1, "audit": 1 + 3}
    assert meter.requests == {"extract": 4, "audit": 3}
