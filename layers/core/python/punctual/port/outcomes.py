"""The store's part of run outcomes (``punctual.runs.outcomes``): the pause that a failure streak
decides, and the notifications a job's ``notify`` webhook is owed, kept as an outbox that the reaper
drains (``punctual.runs.notify``). A mixin of :class:`~punctual.port.Store`."""

from __future__ import annotations

from abc import ABC, abstractmethod

from punctual.model import Job, Notification
from punctual.port.watch import DeadlineWatch


class OutcomeStore(DeadlineWatch, ABC):
    """Pausing a job for its failures, the notification outbox, and the reads deadline alerts make."""

    @abstractmethod
    def pause_for_failures(self, job: Job, run_id: str, now: int) -> bool:
        """Pause ``job`` (as read) for the failure streak that its run ``run_id`` completed: status
        paused, out of the due index, ``paused_after = run_id``, ``updated_at = now``, version + 1.

        Qualifies iff the stored job is still active at ``job.version``. True if it was paused here;
        False, nothing written, if it changed meanwhile (another run paused it, a user edited it).
        Only the job's scheduling state is written (the aws engine: its head item), as a claim does.
        """

    @abstractmethod
    def add_notification(self, notification: Notification) -> bool:
        """Record ``notification`` unless its run has one already. True if recorded here, False (the
        stored one untouched) if it existed. A pending notification enters the outbox, due at
        ``next_at``."""

    @abstractmethod
    def due_notifications(self, now: int, limit: int) -> list[Notification]:
        """Pending notifications with ``next_at <= now``, at most ``limit``, soonest first as far as
        the engine orders them (aws: per outbox shard, read through an eventually consistent index,
        then each item strongly consistent; one that was settled meanwhile is left out)."""

    @abstractmethod
    def update_notification(self, seen: Notification, updated: Notification) -> bool:
        """Write ``updated`` (a try added, the state and ``next_at`` moved) iff the stored notification
        is still pending with as many tries as ``seen`` (compare-and-set: of two reapers delivering
        it, one writes). A notification that is no longer pending leaves the outbox. False, nothing
        written, otherwise."""

    @abstractmethod
    def get_notification(self, job_id: str, scheduled_at: int) -> Notification | None:
        """The notification of the run (job_id, scheduled_at), or None if it owes none."""
