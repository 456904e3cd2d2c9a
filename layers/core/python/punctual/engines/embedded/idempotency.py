"""The embedded engine's idempotency records (``punctual.port.idempotency``): one row per (owner, key)
in ``idempotency_keys`` (schema v13, :data:`V13`), and the read of a job's replays in a window of its
runs.

A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore` (through
:class:`~punctual.engines.embedded.calendars.EmbeddedCalendars`: ``store.py`` is at its size limit).
A claim first deletes the owner's expired rows (the owner's part of the primary key: only its rows
are read), so the table holds what the last day's keyed requests left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from punctual.port.idempotency import IdempotencyRecord

if TYPE_CHECKING:  # the schema imports V13 from here, and the database imports the schema
    from punctual.engines.embedded.db import Database

# v13: the records of keyed requests (POST /runs/replay with an Idempotency-Key)
V13 = (
    "CREATE TABLE idempotency_keys (owner TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
    " at INTEGER NOT NULL, beat INTEGER NOT NULL, expires_at INTEGER NOT NULL, result TEXT,"
    " PRIMARY KEY (owner, key)) WITHOUT ROWID",
)
_COLUMNS = "owner, key, fingerprint, at, beat, expires_at, result"
_SELECT = f"SELECT {_COLUMNS} FROM idempotency_keys WHERE owner = ? AND key = ? AND expires_at > ?"
_REPLAYS = (
    "SELECT scheduled_at, json_extract(doc, '$.replay_of') FROM runs WHERE job_id = ?"
    " AND scheduled_at BETWEEN ? AND ? AND json_extract(doc, '$.replay_of') IS NOT NULL"
)


class EmbeddedIdempotency:
    """Idempotency records and the replay window read, on the store's SQLite file."""

    _db: Database

    def get_idempotency_record(self, owner: str, key: str, now: int) -> IdempotencyRecord | None:
        row = self._db.connection().execute(_SELECT, (owner, key, now)).fetchone()
        return None if row is None else IdempotencyRecord(*row)

    def claim_idempotency_record(self, record: IdempotencyRecord, now: int) -> IdempotencyRecord:
        with self._db.write() as conn:
            conn.execute("DELETE FROM idempotency_keys WHERE owner = ? AND expires_at <= ?", (record.owner, now))
            row = conn.execute(_SELECT, (record.owner, record.key, now)).fetchone()
            if row is not None:
                return IdempotencyRecord(*row)
            conn.execute(
                f"INSERT INTO idempotency_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.owner, record.key, record.fingerprint, record.at, record.beat, record.expires_at, None),
            )
        return record

    def update_idempotency_record(self, owner: str, key: str, seen_beat: int, beat: int, result: str | None) -> bool:
        with self._db.write() as conn:
            changed = conn.execute(
                "UPDATE idempotency_keys SET beat = ?, result = coalesce(?, result)"
                " WHERE owner = ? AND key = ? AND result IS NULL AND beat = ?",
                (beat, result, owner, key, seen_beat),
            )
            return changed.rowcount == 1

    def replays_between(self, job_id: str, since: int, until: int) -> dict[int, str]:
        rows = self._db.connection().execute(_REPLAYS, (job_id, since, until))
        return {int(at): str(original) for at, original in rows}
