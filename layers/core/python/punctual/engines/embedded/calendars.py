"""The embedded engine's calendars: one row per (owner, name), written by compare-and-set on its version.

A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore` (the ``calendars`` part of the
port, and through :class:`~punctual.engines.embedded.idempotency.EmbeddedIdempotency` its
``idempotency`` part). The users of a calendar are read from the jobs table's ``jobs_by_calendar``
index (schema v11).
"""

from __future__ import annotations

from punctual.engines.embedded.db import Database
from punctual.engines.embedded.idempotency import EmbeddedIdempotency
from punctual.errors import ConcurrentModification
from punctual.model.calendars import Calendar
from punctual.model.stored import StoredReader

_CALENDARS = StoredReader(Calendar)
_USERS = (
    "SELECT job_id FROM jobs INDEXED BY jobs_by_calendar WHERE owner = ? AND calendar = ?"
    " AND calendar IS NOT NULL AND status != 'deleted' ORDER BY job_id LIMIT ?"
)


class EmbeddedCalendars(EmbeddedIdempotency):
    """Calendars on the store's SQLite file (see the module docstring)."""

    _db: Database

    def put_calendar(self, calendar: Calendar, expected_version: int | None) -> None:
        doc = calendar.model_dump_json()
        with self._db.write() as conn:
            found = conn.execute(
                "SELECT version FROM calendars WHERE owner = ? AND name = ?", (calendar.owner, calendar.name)
            ).fetchone()
            if (None if found is None else found[0]) != expected_version:
                raise _changed(calendar.name, None if found is None else found[0])
            conn.execute(
                "INSERT INTO calendars (owner, name, version, doc) VALUES (?, ?, ?, ?) ON CONFLICT (owner, name)"
                " DO UPDATE SET version = excluded.version, doc = excluded.doc",
                (calendar.owner, calendar.name, calendar.version, doc),
            )

    def get_calendar(self, owner: str, name: str) -> Calendar | None:
        row = (
            self._db.connection()
            .execute("SELECT doc FROM calendars WHERE owner = ? AND name = ?", (owner, name))
            .fetchone()
        )
        return None if row is None else _CALENDARS.json(row[0])

    def list_calendars(self, owner: str) -> list[Calendar]:
        rows = self._db.connection().execute("SELECT doc FROM calendars WHERE owner = ? ORDER BY name", (owner,))
        return [_CALENDARS.json(row[0]) for row in rows]

    def delete_calendar(self, owner: str, name: str, expected_version: int) -> None:
        with self._db.write() as conn:
            deleted = conn.execute(
                "DELETE FROM calendars WHERE owner = ? AND name = ? AND version = ?", (owner, name, expected_version)
            )
            if deleted.rowcount != 1:
                raise _changed(name, None)

    def calendar_users(self, owner: str, name: str, limit: int) -> list[str]:
        rows = self._db.connection().execute(_USERS, (owner, name, max(0, limit)))
        return [row[0] for row in rows]


def _changed(name: str, version: int | None) -> ConcurrentModification:
    now = "gone" if version is None else f"at version {version}"
    return ConcurrentModification(f"calendar {name} changed meanwhile (now {now}); read it again", field="name")
