"""The worker Lambda and the deployed queue's visibility (issue 15 item 4), on moto: the handler
takes the visibility the stack deployed from its environment, and a record that fails unexpectedly
(a DynamoDB throttle at the burst) comes back within seconds instead of after 90 minutes.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from punctual.port import Engine
from tests.integration.conftest import Context, load
from tests.integration.test_execution_handlers import new_run, sqs_event

pytestmark = pytest.mark.integration


def test_the_worker_receives_with_the_deployed_visibility(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUNCTUAL_DISPATCH_VISIBILITY_S", "5400")  # what the stack sets (6 x 900 s)
    assert load("worker")._worker().options.visibility_s == 5400


def test_a_record_that_fails_unexpectedly_is_hidden_briefly_and_reported(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PUNCTUAL_DISPATCH_VISIBILITY_S", "5400")
    handler = load("worker")
    worker = handler._worker()
    run = new_run(engine, "throttled")
    throttle = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem")

    def throttled(*args: Any, **kwargs: Any) -> Any:
        raise throttle

    monkeypatch.setattr(worker.engine.store, "lease_runs", throttled)
    hidden: list[tuple[list[str], int]] = []
    extend_many = worker.engine.queue.extend_many

    def recording(receipts: list[str], visibility_s: int) -> None:
        hidden.append((list(receipts), visibility_s))
        extend_many(receipts, visibility_s)

    monkeypatch.setattr(worker.engine.queue, "extend_many", recording)
    event = sqs_event(engine.queue, 1)
    (record,) = event["Records"]

    response = handler.handler(event, Context())

    # Then the record is a batch item failure, hidden for seconds (not the queue's 90 minutes)
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert hidden == [([record["receiptHandle"]], worker.options.error_visibility_s)]
    assert worker.options.error_visibility_s <= 30
    assert engine.store.get_run(run.job_id, run.scheduled_at).attempt == 0  # nothing was written
