"""The aws engine routes long runs to the long-run queue (issue 15 item 1), on moto: only the
dispatches marked ``long_run`` go there, everything else (and every receive) is the dispatch queue's;
the scheduler's claim marks a job whose timeout a Lambda worker cannot serve."""

from __future__ import annotations

import boto3
import pytest

from punctual import ids
from punctual.clock import SystemClock
from punctual.engines.aws import AwsEngine
from punctual.metrics import InMemoryMetrics
from punctual.port import Dispatch, Engine
from punctual.scheduling.scheduler import Scheduler, options_from_settings
from tests.contract.factories import make_job

pytestmark = pytest.mark.integration


@pytest.fixture
def routed(engine: Engine) -> AwsEngine:
    assert isinstance(engine, AwsEngine)
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="lambdas-dispatch-long")["QueueUrl"]
    settings = engine.settings.model_copy(update={"long_run_queue_url": url, "long_run_after_s": 870})
    routed = AwsEngine(settings, clock=SystemClock())
    yield routed
    routed.close()


def test_long_runs_are_sent_to_the_long_run_queue_and_nothing_else_is(routed: AwsEngine) -> None:
    assert routed.queue.long_run is not None
    routed.queue.send([Dispatch("run_long", 1, long_run=True), Dispatch("run_short", 1)])
    assert [d.run_id for d in routed.queue.receive(10, 30, 1.0)] == ["run_short"]
    assert [d.run_id for d in routed.queue.long_run.receive(10, 30, 1.0)] == ["run_long"]


def test_the_claim_routes_a_job_longer_than_a_lambda_worker(routed: AwsEngine) -> None:
    clock = SystemClock()
    now = clock.now_ms()
    shards = routed.store.shards
    for name, timeout_s in (("long", 3_600), ("short", 60)):
        job = make_job("owner-long", clock, shards=shards, name=name, timeout_s=timeout_s, next_run_at=now - 1_000)
        routed.store.create_job(job)
    scheduler = Scheduler(routed, clock, metrics=InMemoryMetrics(), options=options_from_settings(routed.settings))
    assert scheduler.tick().dispatched == 2
    assert routed.queue.long_run is not None
    [long] = routed.queue.long_run.receive(10, 30, 1.0)
    [short] = routed.queue.receive(10, 30, 1.0)
    assert [routed.store.get_job(ids.parse_run_id(d.run_id)[0]).timeout_s for d in (long, short)] == [3_600, 60]
