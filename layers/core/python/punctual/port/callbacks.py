"""The store's part of async completion (``punctual.runs.callbacks``): the conditional writes of a
callback's heartbeat and completion, and the accepted attempts whose deadline passed. A mixin of
:class:`~punctual.port.Store`.

Each write is decided on the run as the caller read it (``seen``), by one condition,
``rules.callback_open``: the stored run is still at the attempt of ``seen`` with its worker, running
or accepted, and its deadline (``lease_expires_at``) has not passed at the write's ``now``. On
DynamoDB that condition is one expression (``engines.aws.conditions.CALLBACK_OPEN``); on SQLite the
rule checked inside the write transaction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from punctual.model import Run
from punctual.port.records import RunChange


class CallbackStore(ABC):
    """Heartbeats and completions of accepted attempts, and finding those that timed out."""

    @abstractmethod
    def callback_beat(self, seen: Run, now: int, until: int | None, progress: str | None) -> Run:
        """Record a heartbeat of ``seen``'s attempt at ``now``: ``heartbeat_at = now`` and ``progress``
        (None clears it); with ``until`` (an accepted attempt) also ``lease_expires_at = deadline_at =
        until``. A running attempt (its worker's call not answered yet) keeps its worker's lease.

        Qualifies iff ``rules.callback_open(stored, seen, now)`` and the stored state is still
        ``seen.state``. Returns the run as written. Raises :class:`ConcurrentModification` otherwise
        (the caller reads again and says why: timed out, superseded, completed).
        """

    @abstractmethod
    def callback_complete(self, seen: Run, change: RunChange) -> Run:
        """Apply ``change`` (the attempt's end: terminal, or retrying) iff
        ``rules.callback_open(stored, seen, change.now)``. Returns the run as written. Raises
        :class:`ConcurrentModification` otherwise: of two completions of one attempt, one applies.
        """

    @abstractmethod
    def expired_acceptances(self, now: int, limit: int) -> list[Run] | None:
        """Accepted runs whose deadline (``lease_expires_at``, the same as ``deadline_at``) is before
        ``now``, most overdue first, at most ``limit``: read by an index of accepted runs alone.

        None where the engine keeps no such index (aws): the reaper then finds them among the open
        runs past their deadline (``Store.past_deadline_runs``), as it finds expired leases.
        """
