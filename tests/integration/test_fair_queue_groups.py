"""The noisy neighbour on the aws engine (moto), at a small scale: tenant A floods, tenant B has a
few runs due at the same second; the real scheduler dispatches them all, and every message on the
SQS dispatch queue carries its run's owner as ``MessageGroupId`` (an SQS fair queue). moto does not
reorder by group (SQS does, at scale), so what this shows is the contract with SQS: the group ids.
"""

from __future__ import annotations

from collections import Counter

import pytest

from punctual.bench.jobs import bench_jobs
from punctual.clock import ManualClock
from punctual.engines.aws import AwsEngine
from punctual.metrics import InMemoryMetrics
from punctual.scheduling.scheduler import Scheduler
from tests.integration import test_aws_engine as aws

pytestmark = pytest.mark.integration

clock, engine, moto = aws.clock, aws.engine, aws.moto  # the aws engine on moto (fixtures)


def test_every_dispatch_carries_its_owner_as_message_group(engine: AwsEngine, clock: ManualClock) -> None:
    # Given tenant A with 60 one-time jobs and tenant B with 5, all due now
    now = clock.now_ms()
    jobs = [
        *bench_jobs(60, now=now, due_at=now, shards=engine.store.shards, cron=None, owner="tenant-a"),
        *bench_jobs(5, now=now, due_at=now, shards=engine.store.shards, cron=None, owner="tenant-b"),
    ]
    for job in jobs:
        engine.store.create_job(job)
    # When the scheduler dispatches them
    scheduler = Scheduler(engine, clock, metrics=InMemoryMetrics())
    assert scheduler.tick().dispatched == 65
    # Then every message names its owner as its group, read back from SQS itself
    groups: Counter[str] = Counter()
    for _ in range(20):
        response = engine.clients.sqs.receive_message(
            QueueUrl=engine.queue.url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            MessageSystemAttributeNames=["MessageGroupId"],
        )
        messages = response.get("Messages", [])
        if not messages:
            break
        groups.update(m["Attributes"]["MessageGroupId"] for m in messages)
    assert groups == {"tenant-a": 60, "tenant-b": 5}


def test_deliveries_report_their_group_and_long_owners_get_a_digest(engine: AwsEngine, clock: ManualClock) -> None:
    from punctual import ids
    from punctual.engines.aws.queue import group_id
    from punctual.port import Dispatch

    long_owner = "arn:aws:iam::123456789012:role/" + "r" * 120
    now = clock.now_ms()
    engine.queue.send([Dispatch(ids.run_id_for(ids.new_job_id(), now), now, group=long_owner)])
    [delivery] = engine.queue.receive(10, 60)
    assert delivery.extra["group"] == group_id(long_owner)
    assert delivery.extra["group"].startswith("sha256:") and len(delivery.extra["group"]) <= 128
    assert group_id("tenant-a") == "tenant-a"
