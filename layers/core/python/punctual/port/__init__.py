"""The port: the narrow interface every engine implements and every component is written against.

Two engines implement it: ``embedded`` (one SQLite file) and ``aws`` (DynamoDB + SQS). The
scheduler, worker and reaper only ever talk to a :class:`Store` and a :class:`Queue`; one
contract test suite (``tests/contract``) proves both engines behave alike.

Rules every engine keeps:
- Each conditional operation either applies entirely or not at all. Losing a race is an
  *outcome* (``False``, ``None``, :class:`LeaseOutcome`), never an exception, except where the
  docstring names the exception. Any other storage error propagates unchanged.
- A job is in the due index iff its status is ``active``; the index key is
  (``due_shard``, ``next_run_at``).
- A run is in the open-runs index iff its state is open (scheduled, running, retrying).

The port is split by role: ``records`` (the values that cross it), ``store`` (and its mixins
``run_reads``: reads every engine answers through ``list_runs``; ``outcomes``: a pause for failures
and the notification outbox; ``idempotency``: keyed requests' records), ``edges`` (one decision
about the dependency graph), ``queue`` and ``engine``. Import the names from ``punctual.port``: this
module re-exports them all (but ``stats``, the figures of ``Store.run_stats`` and the arithmetic that
fills them, which is imported as a module).
"""

from __future__ import annotations

from punctual.port.edges import EdgeChange, EdgeReads
from punctual.port.engine import Engine, Keys, SkewSource
from punctual.port.idempotency import IdempotencyRecord
from punctual.port.queue import Delivery, Dispatch, Queue
from punctual.port.records import (
    Advance,
    Alert,
    Beat,
    DueJob,
    Finish,
    Hold,
    JobMark,
    LeaseOutcome,
    LeaseRequest,
    LeaseResult,
    Page,
    RateState,
    ReleaseSlot,
    ReleaseState,
    Reservation,
    RunChange,
    RunQuery,
    ShardLease,
    SlotOutcome,
    Tenant,
)
from punctual.port.store import Store

__all__ = [
    "Advance",
    "Alert",
    "Beat",
    "Delivery",
    "Dispatch",
    "DueJob",
    "EdgeChange",
    "EdgeReads",
    "Engine",
    "Finish",
    "Hold",
    "IdempotencyRecord",
    "JobMark",
    "Keys",
    "LeaseOutcome",
    "LeaseRequest",
    "LeaseResult",
    "Page",
    "Queue",
    "RateState",
    "ReleaseSlot",
    "ReleaseState",
    "Reservation",
    "RunChange",
    "RunQuery",
    "ShardLease",
    "SkewSource",
    "SlotOutcome",
    "Store",
    "Tenant",
]
