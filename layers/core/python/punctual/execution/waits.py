"""Where a message waits for its run's next instant: hidden, re-sent with a delay, or in the run's row.

A message that must come back later (a retry's backoff, a run another worker holds, a run not yet
due, a tenant limit, a message that arrived far too early) waits one of three ways, by how long
(``ExecutionOptions.hold_max_ms`` and ``resend_max_ms``)::

    wait <= hold_max_ms (60 s)      hidden (ChangeMessageVisibility), as before: the message stays
                                    in flight (received, not deleted)
    the run is parked               deleted: the run's row carries the wait (:func:`parked`), and the
                                    reaper sends a message again about parked_lead_ms (10 min) before
                                    the run is due, with a delay (``punctual.reaping.reaper``)
    wait <= resend_max_ms (900 s)   re-sent with ``not_before`` = the instant and DelaySeconds, then
                                    deleted: a delayed message is not in flight
    longer                          re-sent with the longest delay (a relay): it comes back early, is
                                    found far too early, and waits again the same way

Why: an SQS queue holds at most 120,000 messages in flight, and over it ReceiveMessage fails with
OverLimit for every owner. Backoffs of up to 12 h held in flight let one widely used target that
fails at 20k runs a minute stop every tenant. A hidden wait costs one request; a re-sent one two
(send and delete, batched); a parked one a delete, then the reaper's write and send when it is due.
A retry whose backoff exceeds ``resend_max_ms`` is parked by its finish
(``punctual.execution.changes.attempt_change`` writes its deadline before its next attempt).

Crash safety: a re-send goes out before its message is deleted, so a crash between them leaves two
messages for one run, never none. The run's row decides what each of them does (the second finds
the run leased, finished or not yet due, as any duplicate does). A parked run's message is deleted
only after the finish that parked it was written; a crash before that delete brings the message
back, which finds the run parked and is deleted then.

Re-sent messages go back to the queue they came from (``Dispatch.long_run`` false: an engine sends
such a dispatch to the queue its workers consume), in their owner's group (fair hand-out).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

from punctual.execution.options import ExecutionOptions
from punctual.model import Run, RunState
from punctual.port import Delivery, Dispatch, Queue, message_priority
from punctual.runs import retry


class Way(StrEnum):
    """How one message waits (see the module docstring)."""

    HIDE = "hide"  # kept in flight, hidden until its instant
    RESEND = "resend"  # re-sent with a delay, then deleted
    PARK = "park"  # deleted: its run's row carries the wait, the reaper re-sends it


def parked(run: Run | None) -> bool:
    """The run's row carries its wait: a retrying run whose deadline comes before its next attempt,
    so that the reaper finds it in time and sends it again (``attempt_change`` writes it so)."""
    return (
        run is not None
        and run.state is RunState.RETRYING
        and run.next_attempt_at is not None
        and run.deadline_at < run.next_attempt_at
    )


def way_to_wait(wait_ms: int, options: ExecutionOptions, *, parked_run: bool = False) -> Way:
    """How a message that must wait ``wait_ms`` waits; ``parked_run``: its run is :func:`parked`."""
    if wait_ms <= options.hold_max_ms:
        return Way.HIDE
    return Way.PARK if parked_run else Way.RESEND


def resend_of(delivery: Delivery, until: int, now: int, options: ExecutionOptions, group: str | None) -> Dispatch:
    """The message that replaces ``delivery``: due at ``until``, visible at most a second before it
    (whole-second delays, rounded down) or after the longest delay, whichever comes first. It keeps
    the priority ``delivery`` was sent with."""
    delay_s = min(max(0, (until - now) // 1000), options.resend_max_ms // 1000)
    return Dispatch(delivery.run_id, until, delay_s, group=group, priority=message_priority(delivery))


@dataclass(slots=True)
class Waits:
    """The messages of one batch step that wait, gathered by way, applied with :meth:`apply`."""

    now: int
    options: ExecutionOptions
    hides: defaultdict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    resends: list[Dispatch] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # receipts deleted after the re-sends went out

    def add(self, delivery: Delivery, until: int, group: str | None, *, parked_run: bool = False) -> Way:
        """Let ``delivery`` wait until ``until`` (epoch ms); ``group``: its run's owner."""
        way = way_to_wait(until - self.now, self.options, parked_run=parked_run)
        if way is Way.HIDE:
            self.hides[retry.visibility_s(until - self.now)].append(delivery.receipt)
            return way
        if way is Way.RESEND:
            self.resends.append(resend_of(delivery, until, self.now, self.options, group))
        self.gone.append(delivery.receipt)
        return way

    def drop(self, receipts: list[str]) -> None:
        """Delete ``receipts`` too, with the messages that were re-sent (one batched delete)."""
        self.gone.extend(receipts)

    def apply(self, queue: Queue) -> None:
        """Hide, then re-send, then delete: a re-send that fails leaves its message in place."""
        for visibility, receipts in self.hides.items():
            queue.extend_many(receipts, visibility)
        if self.resends:
            queue.send(self.resends)
        if self.gone:
            queue.delete_many(self.gone)


def wait_one(
    queue: Queue,
    delivery: Delivery,
    until: int,
    now: int,
    options: ExecutionOptions,
    *,
    group: str | None,
    parked_run: bool = False,
) -> Way:
    """:meth:`Waits.add` and :meth:`Waits.apply` for one message, with the single-message requests."""
    way = way_to_wait(until - now, options, parked_run=parked_run)
    if way is Way.HIDE:
        queue.extend(delivery.receipt, retry.visibility_s(until - now))
        return way
    if way is Way.RESEND:
        queue.send([resend_of(delivery, until, now, options, group)])
    queue.delete(delivery.receipt)
    return way
