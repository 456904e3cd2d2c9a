"""The worker and reaper Lambda handlers on moto: SQS event-source records in, partial batch responses out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from punctual import ids
from punctual.clock import SystemClock
from punctual.execution.targets import TargetResult
from punctual.model import AttemptOutcome, HttpTarget, Job, RetryPolicy, Run, RunState
from punctual.port import Dispatch, Engine
from tests.integration.conftest import Context, load

pytestmark = pytest.mark.integration

OWNER = "owner-lambda"


class ScriptedTargets:
    def __init__(self, results: dict[str, TargetResult]) -> None:
        self.results = results

    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        return self.results[job.name]

    def close(self) -> None:
        pass


def new_run(engine: Engine, name: str, *, send: bool = True, queue: Any = None) -> Run:
    now = SystemClock().now_ms()
    job = Job(
        id=ids.new_job_id(),
        owner=OWNER,
        name=name,
        schedule="0 0 1 1 *",
        target=HttpTarget(url="https://example.com/hook"),
        max_retries=2,
        retry=RetryPolicy(backoff_s=1, max_backoff_s=1),
        timeout_s=5,
        created_at=now,
        updated_at=now,
        next_run_at=now + 86_400_000,
    )
    engine.store.create_job(job)
    run = Run(job_id=job.id, scheduled_at=now - 1, owner=OWNER, deadline_at=now + 120_000, created_at=now)
    engine.store.insert_runs([run])
    if send:
        (queue or engine.queue).send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    return run


def sqs_event(queue: Any, count: int) -> dict[str, Any]:
    """Receive ``count`` messages and shape them as the Lambda SQS event source does."""
    messages = queue._client.receive_message(
        QueueUrl=queue.url, MaxNumberOfMessages=count, MessageSystemAttributeNames=["All"], VisibilityTimeout=60
    )["Messages"]
    assert len(messages) == count
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def test_worker_handler_reports_retrying_runs_as_batch_item_failures(engine):
    handler = load("worker")
    ok_run, failing_run = new_run(engine, "ok"), new_run(engine, "fails")
    scripted = ScriptedTargets(
        {"ok": TargetResult(ok=True, status_code=200), "fails": TargetResult(ok=False, error="HTTP 503")}
    )
    handler._worker().targets = lambda: scripted
    event = sqs_event(engine.queue, 2)
    ids_by_run = {json.loads(r["body"])["run_id"]: r["messageId"] for r in event["Records"]}

    response = handler.handler(event, Context())

    assert response == {"batchItemFailures": [{"itemIdentifier": ids_by_run[failing_run.run_id]}]}
    done = engine.store.get_run(ok_run.job_id, ok_run.scheduled_at)
    assert done.state is RunState.SUCCEEDED and done.attempts[0].worker_id == f"lambda:{Context().log_stream_name}"
    retrying = engine.store.get_run(failing_run.job_id, failing_run.scheduled_at)
    assert retrying.state is RunState.RETRYING and retrying.attempts[0].outcome is AttemptOutcome.FAILED


def test_reaper_handler_marks_dead_lettered_runs_dead_and_alerts_once(engine):
    handler = load("reaper")
    run = new_run(engine, "poison", queue=engine.dead_letters)
    response = handler.handler(sqs_event(engine.dead_letters, 1), Context())
    assert response == {"batchItemFailures": []}
    dead = engine.store.get_run(run.job_id, run.scheduled_at)
    assert dead.state is RunState.DEAD and dead.attempts[-1].outcome is AttemptOutcome.DEAD_LETTERED
    assert [a.run_id for a in engine.store.list_alerts(OWNER)] == [run.run_id]


def test_reaper_handler_runs_a_pass_on_its_schedule(engine):
    handler = load("reaper")
    new_run(engine, "young")  # not past its deadline: left alone
    event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    assert handler.handler(event, Context()) == {"examined": 0, "redispatched": 0, "dead": 0}


def test_sns_alerter_publishes_each_alert_once_with_an_owner_attribute(engine):
    import boto3

    from punctual.port import Alert
    from punctual.runs.alerts import SnsAlerter, alert_once, alerter_for

    sns, sqs = boto3.client("sns", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
    topic = sns.create_topic(Name="punctual-alerts")["TopicArn"]
    inbox = sqs.create_queue(QueueName="alerts-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
    alerter = alerter_for(topic, lambda: boto3.client("sns", region_name="us-east-1"))
    assert isinstance(alerter, SnsAlerter)

    alert = Alert(OWNER, "run_" + "b" * 32 + "_1", "job_" + "b" * 32, 1_800_000_000_000, "dead after 3 attempts")
    assert alert_once(engine.store, alerter, alert) is True
    assert alert_once(engine.store, alerter, alert) is False  # recorded already: not published again

    messages = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert len(messages) == 1
    assert json.loads(messages[0]["Body"]) == {
        "owner": OWNER,
        "run_id": alert.run_id,
        "job_id": alert.job_id,
        "created_at": "2027-01-15T08:00:00.000Z",
        "reason": "dead after 3 attempts",
    }
    assert messages[0]["MessageAttributes"]["owner"]["StringValue"] == OWNER
