"""Lambda SQS event-source records as port deliveries: what the worker and reaper Lambdas share.

With an SQS event source, Lambda receives the messages and deletes those the function reports as
processed; the function reports the others as batch item failures (``ReportBatchItemFailures``)
and SQS keeps them, hidden for whatever visibility timeout they have. :class:`RecordQueue` maps
the port's queue operations onto that contract for one record:

- ``extend`` is a real ``ChangeMessageVisibility`` on the record's receipt handle (heartbeats,
  retry backoff, a run held by another worker);
- ``delete`` only marks the record done: reporting it as processed makes Lambda delete it.

:meth:`LambdaWorker.process` raises :class:`KeepMessage` for a record whose message must stay
(retrying, held, not ready, lease lost), *after* its visibility was set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from punctual.clock import Clock
from punctual.engines.aws.queue import delivery_from_message
from punctual.errors import PunctualError
from punctual.execution.delivery import ExecutionOptions, Outcome, process_delivery
from punctual.execution.targets import TargetExecutor
from punctual.metrics import Metrics
from punctual.port import Delivery, Dispatch, Engine, Queue
from punctual.runs.alerts import Alerter, LogAlerter


class KeepMessage(PunctualError):
    """Report this record as a batch item failure: its message stays on the queue (as hidden as set)."""

    code = "keep_message"


def delivery_of(record: Mapping[str, Any]) -> Delivery:
    """The port's :class:`Delivery` for one SQS event-source record (same body format as ``SqsQueue``)."""
    attributes = record.get("attributes") or {}
    message = {
        "MessageId": record.get("messageId", ""),
        "ReceiptHandle": record.get("receiptHandle", ""),
        "Body": record.get("body", ""),
        "Attributes": {
            name: attributes[name] for name in ("ApproximateReceiveCount", "SentTimestamp") if name in attributes
        },
    }
    return delivery_from_message(message)


class RecordQueue(Queue):
    """One record's view of the dispatch queue (see the module docstring)."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self.name = queue.name
        self.deleted = False

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        self._queue.send(dispatches)

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        raise NotImplementedError("the Lambda event source receives the messages")

    def extend(self, receipt: str, visibility_s: int) -> None:
        self._queue.extend(receipt, visibility_s)

    def delete(self, receipt: str) -> None:
        self.deleted = True  # reported as processed, so the event source deletes it

    def depth(self) -> int:
        return self._queue.depth()


@dataclass
class LambdaWorker:
    """Executes the runs of SQS event-source records; built once per execution environment."""

    engine: Engine
    targets: TargetExecutor
    clock: Clock
    options: ExecutionOptions = field(default_factory=ExecutionOptions)
    alerter: Alerter = field(default_factory=LogAlerter)
    metrics: Metrics | None = None  # start lateness of first attempts

    def process(self, record: Mapping[str, Any], worker_id: str) -> Outcome:
        """Execute one record's run. Returns the outcome if the message is done (Lambda deletes it);
        raises :class:`KeepMessage` if it must stay. Storage errors propagate (the record fails and
        its message returns after its visibility timeout).
        """
        queue = RecordQueue(self.engine.queue)
        outcome = process_delivery(
            delivery_of(record),
            store=self.engine.store,
            queue=queue,
            targets=self.targets,
            clock=self.clock,
            worker_id=worker_id,
            options=self.options,
            alerter=self.alerter,
            metrics=self.metrics,
        )
        if not queue.deleted:
            raise KeepMessage(f"{outcome}: message kept for a later delivery", details={"outcome": outcome.value})
        return outcome
