"""The dispatch :class:`Queue`: what the scheduler sends (:class:`Dispatch`) and a worker receives
(:class:`Delivery`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A message that tells a worker to execute a run.

    ``not_before`` is the instant the run should start (scheduled_at plus jitter); the message
    becomes visible ``delay_s`` seconds after sending (whole seconds, at most 900), i.e. up to
    one second early, and the worker waits out the remainder.
    """

    run_id: str
    not_before: int
    delay_s: int = 0
    group: str | None = None  # the run's owner: fair hand-out across owners (SQS MessageGroupId)
    # The run may take longer than a Lambda worker can: an engine with a long-run queue sends it
    # there (consumed only by long-running workers); others ignore it.
    long_run: bool = False
    # The run's job's priority (0..9; None: the default, 5). A queue that orders a group's messages
    # (the embedded one) hands a group's visible messages out highest priority first; SQS ignores it.
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    run_id: str
    not_before: int
    receipt: str
    receive_count: int  # 1 on first delivery
    extra: dict[str, str] = field(default_factory=dict)


class Queue(ABC):
    """At-least-once delivery with per-message delay, visibility timeouts and a dead-letter queue."""

    name: str

    @abstractmethod
    def send(self, dispatches: Sequence[Dispatch]) -> None:
        """Send every dispatch (any number; engines batch them). Raises if any could not be sent,
        after retrying partial failures, so a caller never advances past an unsent run.
        """

    @abstractmethod
    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        """Up to ``max_messages`` visible messages, each hidden for ``visibility_s`` and with its
        receive count incremented. Waits up to ``wait_s`` for one to become visible. A message that
        has been received ``max_receives`` times is moved to the dead-letter queue instead of
        being delivered (on SQS by its redrive policy).
        """

    @abstractmethod
    def extend(self, receipt: str, visibility_s: int) -> None:
        """Hide the received message for ``visibility_s`` more seconds from now (0: visible now)."""

    @abstractmethod
    def delete(self, receipt: str) -> None:
        """Remove a received message (after its run's conditional finish succeeded)."""

    @abstractmethod
    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        """:meth:`extend` for each receipt (SQS: ChangeMessageVisibilityBatch, 10 per request).
        Best effort per message: a receipt that is stale or unknown is skipped, not an error."""

    @abstractmethod
    def delete_many(self, receipts: Sequence[str]) -> None:
        """:meth:`delete` for each receipt (SQS: DeleteMessageBatch, 10 per request). A stale or
        unknown receipt is skipped; any other failure raises after the rest were attempted."""

    def wake(self, receipts: Sequence[str]) -> None:
        """Make the received messages of ``receipts`` visible now, where the queue orders a group's
        messages ahead of that group's others (a run handed a freed slot: ``punctual.tenancy.line``).
        Best effort per message, as :meth:`extend_many`. Here (SQS) visible now, in no order."""
        self.extend_many(receipts, 0)

    @abstractmethod
    def depth(self) -> int:
        """Approximate number of messages (visible, delayed and in flight)."""


def message_priority(delivery: Delivery) -> int | None:
    """The priority the message of ``delivery`` was sent with, where the queue keeps it (None: the
    default, or a queue that does not): a message re-sent for the same run keeps it."""
    value = delivery.extra.get("priority")
    return None if value is None else int(value)
