"""Lambda SQS event-source records as port deliveries: what the worker and reaper Lambdas share.

With an SQS event source, Lambda receives the messages and deletes those the function reports as
processed; the function reports the others as batch item failures (``ReportBatchItemFailures``)
and SQS keeps them, hidden for whatever visibility timeout they have. :class:`EventSourceQueue`
maps the port's queue operations onto that contract for one batch:

- ``extend``/``extend_many`` are real ``ChangeMessageVisibility(Batch)`` calls on the records'
  receipt handles (heartbeats, retry backoff, a run held by another worker);
- ``delete``/``delete_many`` only mark records done: reporting them as processed makes Lambda
  delete them.

:class:`LambdaWorker` runs a whole batch through the async worker (``punctual.execution.worker``):
every record is a coroutine, the store is written in batches, and the records whose messages must
stay (retrying, held, not ready, lease lost, or whose batch step failed) are the batch item failures.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from punctual.clock import Clock
from punctual.engines.aws.queue import delivery_from_message
from punctual.errors import PunctualError
from punctual.execution.loop import Settled, Tuning, runner
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets.abilities import AsyncTargetExecutor
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.worker import Worker
from punctual.metrics import Metrics
from punctual.model import Run
from punctual.port import Delivery, Dispatch, Engine, Finish, Queue, Store
from punctual.runs.alerts import Alerter, LogAlerter
from punctual.tenancy.admission import Gate

logger = logging.getLogger(__name__)


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
            name: attributes[name]
            for name in ("ApproximateReceiveCount", "SentTimestamp", "MessageGroupId")  # the group: for a re-send
            if name in attributes
        },
    }
    return delivery_from_message(message)


class EventSourceQueue(Queue):
    """One event-source batch's view of the dispatch queue (see the module docstring)."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self.name = queue.name
        self.deleted: set[str] = set()  # receipts reported as processed

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        self._queue.send(dispatches)

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        raise NotImplementedError("the Lambda event source receives the messages")

    def extend(self, receipt: str, visibility_s: int) -> None:
        self._queue.extend(receipt, visibility_s)

    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        self._queue.extend_many(receipts, visibility_s)

    def delete(self, receipt: str) -> None:
        self.deleted.add(receipt)

    def delete_many(self, receipts: Sequence[str]) -> None:
        self.deleted.update(receipts)

    def depth(self) -> int:
        return self._queue.depth()

    def completing(self, store: Store) -> Callable[[Sequence[Finish]], list[Run | None]]:
        """Finish a batch in the store, then mark the acknowledged records done."""

        def complete(finishes: Sequence[Finish]) -> list[Run | None]:
            runs = store.finish_runs(finishes)
            self.delete_many([f.ack for f, run in zip(finishes, runs, strict=True) if run is not None and f.ack])
            return runs

        return complete


@dataclass
class LambdaWorker:
    """Executes the runs of an event-source batch; built once per execution environment.

    ``targets`` makes the targets on each invocation's event loop (default: :class:`AsyncTargets`
    under ``policy``).
    """

    engine: Engine
    clock: Clock
    policy: TargetPolicy = field(default_factory=TargetPolicy)
    options: ExecutionOptions = field(default_factory=ExecutionOptions)
    alerter: Alerter = field(default_factory=LogAlerter)
    targets: Callable[[], AsyncTargetExecutor] | None = None
    metrics: Metrics | None = None  # start lateness of first attempts
    gate: Gate | None = None  # tenant limits (punctual.tenancy.admission)

    def handle(self, records: Sequence[Mapping[str, Any]], worker_id: str) -> tuple[list[str], list[Settled]]:
        """Execute every record's run. Returns the message ids to report as batch item failures
        (their messages stay), and what each record came to, in order."""
        deliveries = [delivery_of(record) for record in records]
        queue = EventSourceQueue(self.engine.queue)
        worker = Worker(
            self.engine,
            self.clock,
            targets=self.targets
            or (
                lambda: AsyncTargets(
                    self.policy, keys=self.engine.keys, callback_base_url=self.options.callback_base_url
                )
            ),
            options=self.options,
            tuning=Tuning(max_in_flight=max(1, len(deliveries))),
            alerter=self.alerter,
            worker_id=worker_id,
            queue=queue,
            complete=queue.completing(self.engine.store),
            metrics=self.metrics,
            gate=self.gate,
        )

        async def run_batch() -> list[Settled]:
            async with worker.session():
                return await worker.process(deliveries)

        with runner() as loop_runner:
            settled = loop_runner.run(run_batch())
        self._hide_briefly([d for d, s in zip(deliveries, settled, strict=True) if isinstance(s, BaseException)])
        failures = [
            str(record.get("messageId", ""))
            for record, delivery in zip(records, deliveries, strict=True)
            if delivery.receipt not in queue.deleted
        ]
        return failures, settled

    def _hide_briefly(self, failed: Sequence[Delivery]) -> None:
        """Bring back the messages of records that failed unexpectedly after ``error_visibility_s``.

        Without this they would stay hidden for the queue's whole visibility (6x the function
        timeout: 90 minutes with the defaults), and a DynamoDB throttle at the top of a minute would
        hide its runs until the reaper finds them. Best effort: if this fails too, the visibility
        timeout still brings them back.
        """
        if not failed:
            return
        try:
            self.engine.queue.extend_many([d.receipt for d in failed], self.options.error_visibility_s)
        except Exception:
            logger.exception("could not shorten the visibility of %d failed records", len(failed))
