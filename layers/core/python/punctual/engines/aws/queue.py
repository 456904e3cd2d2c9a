"""The ``aws`` engine's :class:`~punctual.port.Queue`: one SQS standard queue.

The message body is ``{"run_id": ..., "not_before": ...}``; per-message ``DelaySeconds`` makes a
precomputed run visible at its second. Visibility timeouts are the worker's lease clock on the
queue side, and the queue's redrive policy moves a message that keeps coming back to the
dead-letter queue.

Fair queue: each message is sent with ``MessageGroupId`` = its run's owner (``Dispatch.group``).
On a standard queue that makes it an SQS fair queue: when one owner holds more than its share of
the in-flight messages, SQS hands the other owners' messages out first (no consumer change).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from punctual.errors import PunctualError
from punctual.port import Delivery, Dispatch, Queue
from punctual.resources import MAX_BATCH, MAX_DELAY_S

logger = logging.getLogger(__name__)

MAX_GROUP_ID = 128  # SQS MessageGroupId length limit

_SEND_TRIES = 4  # a batch's failed entries are resent this many times in all before giving up
_MAX_WAIT_S = 20  # SQS long-poll maximum
_DEPTH_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


class DispatchFailed(PunctualError):
    """Some dispatches could not be sent after retries; the caller must not advance past them."""

    code = "dispatch_failed"


class SqsQueue(Queue):
    """At-least-once dispatch through the SQS queue at ``url``."""

    def __init__(self, client: Any, url: str, *, max_workers: int = 4, long_run_url: str | None = None) -> None:
        self._client = client
        self.url = url
        # Dispatches of runs longer than a Lambda worker may take go to this queue instead (only
        # long-running workers consume it); everything else (receive, extend, delete) is this queue's.
        self.long_run = (
            SqsQueue(client, long_run_url, max_workers=max_workers) if long_run_url and long_run_url != url else None
        )
        self.name = url.rstrip("/").rsplit("/", 1)[-1]
        self._max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        if self.long_run is not None:
            self.long_run.close()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        """SendMessageBatch in batches of 10, batches concurrently; raises :class:`DispatchFailed`.

        With a long-run queue, the dispatches marked ``long_run`` are sent there.
        """
        if self.long_run is not None and any(d.long_run for d in dispatches):
            self.long_run.send([d for d in dispatches if d.long_run])
            dispatches = [d for d in dispatches if not d.long_run]
        batches = [list(dispatches[i : i + MAX_BATCH]) for i in range(0, len(dispatches), MAX_BATCH)]
        if len(batches) <= 1:
            for batch in batches:
                self._send_batch(batch)
            return
        # list() re-raises the first batch's exception after the others were attempted
        list(self._executor().map(self._send_batch, batches))

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        """Up to ``max_messages`` messages, 10 per ReceiveMessage call.

        Only the first call long-polls (up to ``wait_s``, at most 20 s); once something arrived the
        loop only collects what is already visible, and stops at the first answer with fewer than 10
        messages (no request is spent on an empty answer while the queue keeps full batches coming).
        """
        deliveries: list[Delivery] = []
        wait = int(min(max(wait_s, 0.0), _MAX_WAIT_S))
        while len(deliveries) < max_messages:
            response = self._client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=min(MAX_BATCH, max_messages - len(deliveries)),
                VisibilityTimeout=visibility_s,
                WaitTimeSeconds=wait,
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp", "MessageGroupId"],
            )
            messages = response.get("Messages", [])
            deliveries.extend(delivery_from_message(message) for message in messages)
            if len(messages) < MAX_BATCH:  # a short answer: the visible messages are used up for now
                break
            wait = 0
        return deliveries

    def extend(self, receipt: str, visibility_s: int) -> None:
        self._client.change_message_visibility(QueueUrl=self.url, ReceiptHandle=receipt, VisibilityTimeout=visibility_s)

    def delete(self, receipt: str) -> None:
        self._client.delete_message(QueueUrl=self.url, ReceiptHandle=receipt)

    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        """ChangeMessageVisibilityBatch, 10 per request, requests concurrently. Entries SQS refuses
        (a receipt gone stale because the message was redelivered) are skipped, as the port says."""
        entries = [{"ReceiptHandle": r, "VisibilityTimeout": visibility_s} for r in dict.fromkeys(receipts)]
        self._batched(self._client.change_message_visibility_batch, entries)

    def delete_many(self, receipts: Sequence[str]) -> None:
        """DeleteMessageBatch, 10 per request, requests concurrently (failed entries are skipped:
        their messages come back and are found finished, a duplicate the worker drops). A receipt
        given twice (one delivery handled twice) is sent once: a batch with a receipt twice fails whole."""
        self._batched(self._client.delete_message_batch, [{"ReceiptHandle": r} for r in dict.fromkeys(receipts)])

    def _batched(self, call: Any, entries: list[dict[str, Any]]) -> None:
        batches = [
            [{"Id": str(i), **entry} for i, entry in enumerate(entries[start : start + MAX_BATCH])]
            for start in range(0, len(entries), MAX_BATCH)
        ]

        def one(batch: list[dict[str, Any]]) -> None:
            failed = call(QueueUrl=self.url, Entries=batch).get("Failed", [])
            if failed:
                logger.warning("%s: %d of %d entries failed: %s", self.name, len(failed), len(batch), failed[:3])

        if len(batches) <= 1:
            for batch in batches:
                one(batch)
            return
        list(self._executor().map(one, batches))

    def depth(self) -> int:
        response = self._client.get_queue_attributes(QueueUrl=self.url, AttributeNames=list(_DEPTH_ATTRIBUTES))
        attributes = response.get("Attributes", {})
        return sum(int(attributes.get(name, 0)) for name in _DEPTH_ATTRIBUTES)

    def _send_batch(self, batch: list[Dispatch]) -> None:
        pending = {str(i): _entry(str(i), dispatch) for i, dispatch in enumerate(batch)}
        failed: list[dict[str, Any]] = []
        for attempt in range(_SEND_TRIES):
            response = self._client.send_message_batch(QueueUrl=self.url, Entries=list(pending.values()))
            failed = response.get("Failed", [])
            if not failed:
                return
            if any(entry.get("SenderFault") for entry in failed):
                break  # our request is wrong (too big, bad delay): resending cannot help
            pending = {entry["Id"]: pending[entry["Id"]] for entry in failed}
            if attempt + 1 < _SEND_TRIES:
                time.sleep(0.05 * 2**attempt)  # throttling or a server error: back off, resend the failed
        reasons = sorted({f"{entry.get('Code')}: {entry.get('Message', '')}" for entry in failed})
        bodies = [pending[entry["Id"]]["MessageBody"] for entry in failed if entry["Id"] in pending]
        run_ids = [json.loads(body)["run_id"] for body in bodies]
        raise DispatchFailed(
            f"{len(failed)} dispatch(es) to {self.name} failed: {'; '.join(reasons)}", details={"run_ids": run_ids}
        )

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="punctual-sqs")
            return self._pool


def _entry(entry_id: str, dispatch: Dispatch) -> dict[str, Any]:
    body = json.dumps({"run_id": dispatch.run_id, "not_before": dispatch.not_before}, separators=(",", ":"))
    entry: dict[str, Any] = {
        "Id": entry_id,
        "MessageBody": body,
        "DelaySeconds": max(0, min(dispatch.delay_s, MAX_DELAY_S)),
    }
    if dispatch.group:
        entry["MessageGroupId"] = group_id(dispatch.group)
    return entry


def group_id(owner: str) -> str:
    """The owner as an SQS ``MessageGroupId`` (at most 128 characters: a longer owner, such as a
    long IAM ARN, is replaced by a digest of it, so two owners never share a group)."""
    if len(owner) <= MAX_GROUP_ID:
        return owner
    return "sha256:" + hashlib.sha256(owner.encode()).hexdigest()


def delivery_from_message(message: dict[str, Any]) -> Delivery:
    attributes = message.get("Attributes", {})
    extra = {"message_id": message.get("MessageId", "")}
    if "SentTimestamp" in attributes:
        extra["sent_at"] = attributes["SentTimestamp"]  # epoch ms: dispatch lag = receive - this
    if "MessageGroupId" in attributes:
        extra["group"] = attributes["MessageGroupId"]  # the run's owner (fair queue group)
    run_id, not_before = "", 0
    try:
        body = json.loads(message["Body"])
        run_id, not_before = str(body["run_id"]), int(body["not_before"])
    except (ValueError, TypeError, KeyError):
        # Not ours: delivered with an empty run id so the worker can drop it (InvalidId) and log it.
        extra["malformed_body"] = message.get("Body", "")[:256]
    return Delivery(
        run_id=run_id,
        not_before=not_before,
        receipt=message["ReceiptHandle"],
        receive_count=int(attributes.get("ApproximateReceiveCount", 1)),
        extra=extra,
    )
