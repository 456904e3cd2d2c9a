"""The embedded engine's dependency rows: reverse edges and release records (see ``port.Store``).

``dependents`` is keyed (upstream_id, dependent_id), so "who depends on me" is one range read of
the primary key. ``releases`` holds one row per dependent job; each conditional change is one
``BEGIN IMMEDIATE`` transaction that reads the row, decides and writes (as every rule here).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from punctual.engines.embedded.db import Database
from punctual.port import ReleaseSlot, ReleaseState

_SELECT_RELEASE = "SELECT generation, released_at, slots FROM releases WHERE dependent_id = ?"
_UPSERT_RELEASE = (
    "INSERT INTO releases (dependent_id, generation, released_at, slots) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT (dependent_id) DO UPDATE SET generation = ?2, released_at = ?3, slots = ?4"
)


class DependencyRows:
    """The dependency methods of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

    _db: Database

    def link_dependent(self, dependent_id: str, upstream_ids: Sequence[str]) -> None:
        rows = [(upstream, dependent_id) for upstream in upstream_ids]
        with self._db.write() as conn:
            conn.executemany("INSERT INTO dependents VALUES (?, ?) ON CONFLICT DO NOTHING", rows)

    def unlink_dependent(self, dependent_id: str, upstream_ids: Sequence[str], now: int) -> None:
        rows = [(upstream, dependent_id) for upstream in upstream_ids]
        with self._db.write() as conn:
            conn.executemany("DELETE FROM dependents WHERE upstream_id = ? AND dependent_id = ?", rows)

    def dependents_of(self, upstream_id: str) -> list[str]:
        sql = "SELECT dependent_id FROM dependents WHERE upstream_id = ? ORDER BY dependent_id"
        return [row[0] for row in self._db.connection().execute(sql, (upstream_id,))]

    def get_release(self, dependent_id: str) -> ReleaseState:
        return _load(self._db.connection(), dependent_id)

    def fill_release(self, dependent_id: str, slot: ReleaseSlot) -> tuple[bool, ReleaseState]:
        with self._db.write() as conn:
            state = _load(conn, dependent_id)
            taken = state.slot(slot.upstream_id) is not None
            stale = state.released_at is not None and slot.finished_at <= state.released_at
            if taken or stale:
                return False, state
            filled = ReleaseState(dependent_id, state.generation, state.released_at, (*state.slots, slot))
            _save(conn, filled)
            return True, filled

    def complete_release(self, state: ReleaseState, released_at: int) -> bool:
        with self._db.write() as conn:
            stored = _load(conn, state.dependent_id)
            if stored.generation != state.generation:
                return False
            cleared = {s.upstream_id for s in state.slots}
            kept = tuple(s for s in stored.slots if s.upstream_id not in cleared)
            _save(conn, ReleaseState(state.dependent_id, state.generation + 1, released_at, kept))
            return True


def _load(conn: sqlite3.Connection, dependent_id: str) -> ReleaseState:
    row = conn.execute(_SELECT_RELEASE, (dependent_id,)).fetchone()
    if row is None:
        return ReleaseState(dependent_id)
    generation, released_at, slots = row
    decoded = tuple(ReleaseSlot(u, r, f) for u, r, f in json.loads(slots))
    return ReleaseState(dependent_id, generation, released_at, decoded)


def _save(conn: sqlite3.Connection, state: ReleaseState) -> None:
    slots = json.dumps([[s.upstream_id, s.run_id, s.finished_at] for s in state.slots], separators=(",", ":"))
    conn.execute(_UPSERT_RELEASE, (state.dependent_id, state.generation, state.released_at, slots))
