"""The embedded engine's part of run outcomes: the pause a failure streak decides and the notification
outbox (``punctual.port.outcomes``), in SQLite.

A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore`. Each conditional write is one
statement whose WHERE is the condition (a job still active at the version read; a notification still
pending with the tries seen), inside a ``BEGIN IMMEDIATE`` transaction: zero rows changed is the
refusal. A notification row keeps its state, next try and tries in columns (the outbox index
``notifications_due`` is partial on pending) and the whole :class:`Notification` in ``doc``.
"""

from __future__ import annotations

import sqlite3

from punctual.engines.embedded.db import Database
from punctual.model import Job, JobStatus, Notification

# the fields a jobs row keeps in columns only (engines.embedded.store writes the rest as doc)
_JOB_STATE = {"status", "next_run_at", "last_run_at", "updated_at", "version"}
_PAUSE = (
    "UPDATE jobs SET status = 'paused', next_run_at = NULL, updated_at = ?, version = version + 1, doc = ?"
    " WHERE job_id = ? AND version = ? AND status = 'active'"
)
_INSERT = (
    "INSERT INTO notifications (job_id, scheduled_at, state, next_at, tries, expires_at, doc)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_DUE = (
    "SELECT doc FROM notifications INDEXED BY notifications_due"
    " WHERE state = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?"
)
_UPDATE = (
    "UPDATE notifications SET state = ?, next_at = ?, tries = ?, doc = ?"
    " WHERE job_id = ? AND scheduled_at = ? AND state = 'pending' AND tries = ?"
)
_PURGE = (
    "DELETE FROM notifications WHERE (job_id, scheduled_at) IN (SELECT job_id, scheduled_at FROM notifications"
    " INDEXED BY notifications_expired WHERE state <> 'pending' AND expires_at < ? LIMIT ?)"
)


class EmbeddedOutcomes:
    """Failure pauses and notifications on the store's SQLite file (see the module docstring)."""

    _db: Database

    def pause_for_failures(self, job: Job, run_id: str, now: int) -> bool:
        paused = job.model_copy(update={"status": JobStatus.PAUSED, "paused_after": run_id})
        doc = paused.model_dump_json(exclude=_JOB_STATE)
        with self._db.write() as conn:
            return bool(conn.execute(_PAUSE, (now, doc, job.id, job.version)).rowcount)

    def add_notification(self, notification: Notification) -> bool:
        n = notification
        row = (n.job_id, n.scheduled_at, str(n.state), n.next_at, len(n.tries), n.expires_at, n.model_dump_json())
        with self._db.write() as conn:
            return bool(conn.execute(_INSERT, row).rowcount)

    def due_notifications(self, now: int, limit: int) -> list[Notification]:
        rows = self._db.connection().execute(_DUE, (now, max(0, limit))).fetchall()
        return [Notification.model_validate_json(row[0]) for row in rows]

    def update_notification(self, seen: Notification, updated: Notification) -> bool:
        row = (str(updated.state), updated.next_at, len(updated.tries), updated.model_dump_json())
        with self._db.write() as conn:
            return bool(conn.execute(_UPDATE, (*row, seen.job_id, seen.scheduled_at, len(seen.tries))).rowcount)

    def get_notification(self, job_id: str, scheduled_at: int) -> Notification | None:
        row = (
            self._db.connection()
            .execute("SELECT doc FROM notifications WHERE job_id = ? AND scheduled_at = ?", (job_id, scheduled_at))
            .fetchone()
        )
        return None if row is None else Notification.model_validate_json(row[0])


def purge_notifications(conn: sqlite3.Connection, now_s: int, limit: int) -> int:
    """Delete settled notifications past their run's retention (``expires_at``, epoch seconds), at
    most ``limit``, inside the caller's write transaction (``Store.purge_expired``). Returns how many."""
    return conn.execute(_PURGE, (now_s, max(0, limit))).rowcount
