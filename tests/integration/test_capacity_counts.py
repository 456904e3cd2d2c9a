"""The capacity model's per-run counts are the measured ones (punctual.capacity.counts).

Twenty runs of twenty reference jobs (a 1 KB payload, 4 KB of headers, a target answering with a
512-character excerpt: ``counts.REFERENCE_*``), due at the same second in one shard, go through
the real claim (``claim_page``) and the worker Lambda's per-record path (``LambdaWorker``) on the
aws engine against moto, with and without the ``open`` index and the GET /stats counters. Requests
are counted on the wire (botocore events), write units computed from the items before and after
each write (``wire.WriteMeter``) and read units from the items each read returned
(``wire.ReadMeter``). The test asserts the model's figures equal what was counted: change the
engine or the item layout, and it says which figure in the model to change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from punctual import resources, rules
from punctual.capacity.counts import (
    CLAIM_WINDOW_S,
    READ_REQUESTS_LAMBDA_WORKER,
    READS_PER_RUN,
    REFERENCE_EXCERPT_CHARS,
    REFERENCE_HEADER_BYTES,
    REFERENCE_PAYLOAD_BYTES,
    SQS_EVENT_SOURCE,
    SQS_LAMBDA_WORKER,
    SQS_SCHEDULER,
    claim_runs_of,
    per_run,
)
from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, ensure_resources, job_items
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.sqs_events import LambdaWorker
from punctual.execution.targets import TargetResult
from punctual.model import HttpTarget, Job, Run, RunState
from punctual.port import Finish, Hold, LeaseOutcome, LeaseRequest, Reservation, RunChange
from punctual.scheduling.claim import claim_page
from punctual.scheduling.planning import PlanOptions, window_end
from tests.contract.factories import attempt, make_job
from tests.integration.wire import ReadMeter, RequestCounter, WriteMeter, item_size

pytestmark = pytest.mark.integration

RUNS = 20  # two full SQS batches
SHARD = 1
T0 = 1_800_000_000_000  # on a minute boundary


class ReferenceTargets:
    """Every call succeeds with a full-length response excerpt."""

    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        return TargetResult(ok=True, status_code=200, excerpt="r" * REFERENCE_EXCERPT_CHARS)

    def close(self) -> None:
        pass


# (open_index, stats_counters) -> write units per run: 9 by default, 6 with both options off
OPTIONS = {(True, True): 9, (True, False): 8, (False, True): 7, (False, False): 6}


@pytest.fixture(params=list(OPTIONS), ids=lambda o: f"open_index={o[0]}-stats_counters={o[1]}")
def engine(request: pytest.FixtureRequest, clock: ManualClock) -> Iterator[AwsEngine]:
    open_index, stats_counters = request.param
    yield from _measured_engine(clock, open_index=open_index, stats_counters=stats_counters)


def _measured_engine(clock: ManualClock, *, open_index: bool, stats_counters: bool) -> Iterator[AwsEngine]:
    """An aws engine on moto with the deploy options measured (one for each fixture's test)."""
    with mock_aws():
        settings = Settings(
            engine=EngineKind.AWS,
            shards=4,
            open_shards=2,
            name_prefix="cap",
            open_index=open_index,
            stats_counters=stats_counters,
        )
        # serialized: moto is not thread-safe, and the batched worker writes concurrently (FACTS.md)
        engine = AwsEngine(ensure_resources(settings), clock=clock, serialize=True)
        yield engine
        engine.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def test_model_counts_equal_the_measured_ones(engine: AwsEngine, clock: ManualClock) -> None:
    open_index, counters = engine.settings.open_index, engine.settings.stats_counters
    model = per_run(open_index=open_index, stats_counters=counters, worker="lambda")
    store, queue = engine.store, engine.queue
    for _ in range(RUNS):
        store.create_job(reference_job(clock, store.shards))
    meter = WriteMeter(engine, resources.tables(open_index=open_index))
    reads = ReadMeter(engine)
    wire = RequestCounter(engine.clients.dynamodb, engine.clients.sqs)

    # the scheduler: one page of the shard
    with meter.phase("claim"):
        stats = claim_page(store, queue, SHARD, clock.now_ms(), lookahead_ms=3_000, limit=500)
    assert (stats.inserted, stats.dispatched, stats.advanced) == (RUNS, RUNS, RUNS)
    scheduler = dict(wire.counts)
    wire.counts.clear()

    # the Lambda event source receives batches of 10 (its requests, not ours: counted apart)
    events = [_event(engine) for _ in range(RUNS // 10)]
    event_source = dict(wire.counts)
    wire.counts.clear()

    # the worker Lambda, one invocation per batch
    worker = LambdaWorker(engine, clock, options=ExecutionOptions(), targets=ReferenceTargets)
    outcomes: list[object] = []
    with meter.phase("execute"), reads.phase("execute"):
        for event in events:
            failures, settled = worker.handle(event["Records"], "lambda:test")
            assert failures == []
            outcomes += settled
    assert outcomes == [Outcome.SUCCEEDED] * RUNS
    executing = dict(wire.counts)
    meter.close()
    reads.close()
    wire.close()
    assert all(r.state is RunState.SUCCEEDED for r in _runs(engine))

    # DynamoDB write units: the model's per-step units, per run; every item written is under 1 KB
    assert max(meter.largest.values()) <= 1024, meter.largest
    steps = model.writes.by_step
    assert meter.units["claim"] == RUNS * (steps["claim"] + steps["insert"])
    assert meter.units["execute"] == RUNS * (steps["lease"] + steps["finish"] + steps["stats"])
    assert model.writes.total == OPTIONS[open_index, counters]
    # requests: one PutItem and one advance per run at claim; a job read, a lease and a finish to execute
    # requests: the claim queries the shard once, inserts, sends in batches, advances
    assert scheduler == {
        "dynamodb:Query": 1,
        "dynamodb:PutItem": RUNS,
        "dynamodb:UpdateItem": RUNS,
        "sqs:SendMessageBatch": RUNS // 10,
    }
    # the worker reads its batch's jobs (one request), leases and finishes each run (and adds to the owner's stats
    # counter, when the deployment keeps them), and sets its message's visibility
    # each run's job, read once in its batch: the heads strongly, the specs eventually consistent
    assert model.dynamodb_reads == READS_PER_RUN == reads.units["execute"] / RUNS
    assert {k: v / RUNS for k, v in executing.items()} == {
        **{f"dynamodb:{k}": v for k, v in READ_REQUESTS_LAMBDA_WORKER.items()},
        "dynamodb:UpdateItem": 3.0 if counters else 2.0,
        **{f"sqs:{k}": v for k, v in SQS_LAMBDA_WORKER.items()},
    }
    assert {k: v / RUNS for k, v in scheduler.items() if k.startswith("sqs:")} == {
        f"sqs:{k}": v for k, v in SQS_SCHEDULER.items()
    }
    assert event_source == {"sqs:ReceiveMessage": RUNS // 10}
    assert event_source["sqs:ReceiveMessage"] / RUNS == SQS_EVENT_SOURCE["ReceiveMessage"]
    assert model.sqs_detail == SQS_SCHEDULER | SQS_LAMBDA_WORKER | SQS_EVENT_SOURCE
    assert model.sqs_requests == pytest.approx(sum(model.sqs_detail.values()))


def reference_job(clock: ManualClock, shards: int) -> Job:
    """A job of the size the model's counts are stated for (``counts.REFERENCE_*``)."""
    payload = {"data": "p" * (REFERENCE_PAYLOAD_BYTES - len('{"data":""}'))}
    headers = {f"x-hdr-{i}": "h" * (REFERENCE_HEADER_BYTES // 8 - len("x-hdr-0")) for i in range(8)}
    target = HttpTarget(url="https://example.com/hook", headers=headers)
    job = make_job("owner-cap", clock, shards=shards, shard=SHARD, payload=payload, target=target)
    assert len(job.model_dump_json(include={"payload"}).encode()) - len('{"payload":}') == REFERENCE_PAYLOAD_BYTES
    assert sum(len(name) + len(value) for name, value in headers.items()) == REFERENCE_HEADER_BYTES
    assert item_size(job_items.job_to_items(job, retention_days=30)[1]) > 5 * 1024  # the spec: 2 units to read
    return job


def _event(engine: AwsEngine) -> dict[str, Any]:
    """Receive a batch of 10 as the Lambda SQS event source does (it deletes the processed ones)."""
    messages = engine.clients.sqs.receive_message(
        QueueUrl=engine.queue.url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], VisibilityTimeout=60
    )["Messages"]
    assert len(messages) == 10
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "eventSource": "aws:sqs",
            }
            for m in messages
        ]
    }


def _runs(engine: AwsEngine) -> list[Run]:
    items = engine.clients.dynamodb.scan(TableName=engine.store.runs_table)["Items"]
    return [engine.store.get_run(i["job_id"]["S"], int(i["scheduled_at"]["N"])) for i in items]


WINDOW_S = CLAIM_WINDOW_S
WINDOW_JOBS = 2


@pytest.fixture(params=[True, False], ids=lambda o: f"open_index={o}")
def windowed(request: pytest.FixtureRequest, clock: ManualClock) -> Iterator[AwsEngine]:
    # no stats counters: the mission's plan drops them (measured above with and without)
    yield from _measured_engine(clock, open_index=request.param, stats_counters=False)


def test_a_claim_window_pays_the_claim_once_per_window(windowed: AwsEngine, clock: ManualClock) -> None:
    """The plan's claim window (``counts.CLAIM_WINDOW_S``) on minute jobs at their window boundary:
    one claim takes 10 times of each, moves its head once and inserts 10 runs, under one marker in the
    ``open`` index (``engines.aws.windows``); each run is leased and finished without an entry of its
    own, and the reaper reads each window once and closes its marker. Measured against the model."""
    engine, store = windowed, windowed.store
    open_index, interval_s = engine.settings.open_index, 60
    claim_runs = claim_runs_of(WINDOW_S, interval_s)
    model = per_run(open_index=open_index, stats_counters=False, claim_runs=claim_runs)
    jobs = []
    while len(jobs) < WINDOW_JOBS:  # jobs due at T0 (a whole minute) whose last boundary was in the minute before
        job = reference_job(clock, store.shards)
        if window_end(job.id, T0, WINDOW_S * 1000) > T0 + (WINDOW_S - interval_s) * 1000:
            jobs.append(job)
    for job in jobs:
        store.create_job(job)
    meter = WriteMeter(engine, resources.tables(open_index=open_index))
    reads = ReadMeter(engine)
    options = PlanOptions(window_ms=WINDOW_S * 1000)
    with meter.phase("claim"):
        stats = claim_page(store, engine.queue, SHARD, T0 - 3_000, lookahead_ms=3_000, options=options)
    runs = WINDOW_JOBS * claim_runs
    assert (stats.inserted, stats.dispatched, stats.advanced) == (runs, runs, WINDOW_JOBS)
    # each run leased and finished at its instant (as the worker does: the lease's and the finish's writes);
    # the second job's runs pre-leased (the Fargate tier): reserved before the instant, then its call's
    # answer, in before the confirms go out, confirmed and finished in one write (Finish.confirm); one
    # run of the first job is pre-leased and still in flight at the confirms: reserved, confirmed, finished
    times = [T0 + i * interval_s * 1000 for i in range(claim_runs)]
    with meter.phase("execute"):
        for job in jobs:
            for at in times:
                done = attempt(1, "w1", at, at + 500)
                change = RunChange(RunState.SUCCEEDED, at + 500, at + 500, append=done, finished_at=at + 500)
                in_flight = job is jobs[0] and at == times[-1]
                if job is jobs[1] or in_flight:
                    meter.phase("reserve")
                    [seen] = store.reserve_runs([Reservation(store.get_run(job.id, at), at + 3_000)], "w1", at)
                    assert seen is not None
                    meter.phase("execute")
                if in_flight:
                    meter.phase("confirm")
                    confirm = LeaseRequest(job.id, at, 60_000, seen=seen, confirm=True)
                    assert store.lease_runs([confirm], "w1", at)[0].outcome is LeaseOutcome.LEASED
                    meter.phase("execute")
                elif job is jobs[1]:
                    leased = rules.leased(seen, "w1", at, 60_000)
                    finish = Finish(Hold(job.id, at, "w1", 1), change, leased=leased, confirm=True)
                    [finished] = store.finish_runs([finish])
                    assert finished is not None and finished == rules.apply_change(leased, change)
                    continue
                else:
                    assert store.lease_run(job.id, at, "w1", at, 60_000).outcome is LeaseOutcome.LEASED
                assert store.finish_run(job.id, at, "w1", 1, change).state is RunState.SUCCEEDED
    # the reaper's pass once the windows' last times are a minute old: nothing to do, the markers closed
    now = times[-1] + 120_000
    with meter.phase("reap"), reads.phase("reap"):
        assert store.past_deadline_runs(now, now - 60_000, 500) == []
        assert store.past_deadline_runs(now, now - 60_000, 500) == []  # closed: not read again
    meter.close()
    reads.close()
    assert max(meter.largest.values()) <= 1024, meter.largest
    steps = model.writes.by_step
    # the claim: 3 units per job (its head and its due-index move); the insert: 1 a run, + the marker's
    # put and its index entry, 2 a window (open index only)
    markers = WINDOW_JOBS if open_index else 0
    assert meter.units["claim"] == WINDOW_JOBS * 3 + runs + 2 * markers
    assert meter.units["claim"] / runs == pytest.approx(steps["claim"] + steps["insert"])
    # lease and finish: 1 each, no index entry; the marker's close: 1 and its entry deleted, 1
    # (a pre-leased run: reserve 1, then the confirm and the finish in one write, 1; in flight at the
    # confirms, the confirm 1 more)
    prelease = per_run(open_index=open_index, stats_counters=False, claim_runs=claim_runs, prelease=True)
    assert meter.units["reserve"] == claim_runs + 1
    assert meter.units["confirm"] == 1
    assert meter.units["execute"] == 2 * (claim_runs - 1) + 1 + claim_runs
    assert meter.units.get("reap", 0) == 2 * markers
    reap = meter.units.get("reap", 0)
    # the pre-leased job, as the Fargate tier runs it: what the plan states for it
    pre_leased = claim_runs + claim_runs + reap / 2  # reserve, confirmed finish, its marker's close
    assert pre_leased / claim_runs == pytest.approx(
        prelease.writes.by_step["lease"] + prelease.writes.by_step["finish"]
    )
    leased = meter.units["execute"] + meter.units["reserve"] + meter.units["confirm"] - 1  # the in-flight one: 3
    assert (leased + reap) / runs == pytest.approx(steps["lease"] + steps["finish"])  # as if leased at the instant
    assert prelease.writes.total == model.writes.total  # the reservation costs what the lease at the instant does
    assert steps["claim"] == 0.3 and claim_runs == 10
    assert model.writes.total == (3.7 if open_index else 3.3)
    # reads: each marker and its runs once (consistent), and an empty open-index page per shard and pass
    if open_index:
        shard_pages = 2 * engine.settings.open_shards * 0.5
        assert reads.units["reap"] == pytest.approx(runs * model.reaper_reads + shard_pages)
