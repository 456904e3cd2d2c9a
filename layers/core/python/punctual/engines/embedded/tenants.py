"""The embedded engine's tenant records: limits, concurrency slots and rate records in SQLite.

A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore` (the ``tenants`` part of the
port). Each conditional method is one ``BEGIN IMMEDIATE`` transaction, so a slot is counted and
taken, or a rate record compared and set, with no other writer in between. The marks of runs
waiting for a slot by priority (``Store.mark_slot_wait``) are a small document per slot scope in
``tenant_starts``, under :data:`WAITS_PREFIX`: one PK read in the transaction that takes a slot.
"""

from __future__ import annotations

import json
from typing import Any

from punctual.engines.embedded.db import Database
from punctual.engines.embedded.run_changes import EmbeddedRunChanges
from punctual.port import RateState, SlotOutcome, Tenant

_TENANT_FIELDS = ("max_jobs", "max_runs_per_minute", "max_concurrency", "api_requests_per_second")
# The slot-wait marks of a slot scope live beside the rate records, under this prefix and the scope:
# "~" never starts an owner that is not a digest ("~sha256:..."), nor a keyed scope ("~limit:...").
WAITS_PREFIX = "~waits:"
_COUNT_LIVE = (
    "SELECT count(*) FROM (SELECT 1 FROM jobs INDEXED BY jobs_by_owner"
    " WHERE owner = ? AND status IN ('active', 'paused') LIMIT ?)"
)


class EmbeddedTenants(EmbeddedRunChanges):
    """Tenant records on the store's SQLite file (see the module docstring), and the batched notes
    of the runs that wait for them (``Store.transition_runs``: store.py is at its size limit)."""

    _db: Database

    def put_tenant(self, tenant: Tenant) -> None:
        doc = json.dumps({name: getattr(tenant, name) for name in _TENANT_FIELDS}, separators=(",", ":"))
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO tenants (owner, weight, updated_at, doc) VALUES (?, ?, ?, ?) ON CONFLICT (owner)"
                " DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at, doc = excluded.doc",
                (tenant.owner, tenant.weight, tenant.updated_at, doc),
            )

    def get_tenant(self, owner: str) -> Tenant | None:
        row = (
            self._db.connection()
            .execute("SELECT owner, weight, updated_at, doc FROM tenants WHERE owner = ?", (owner,))
            .fetchone()
        )
        return None if row is None else _tenant(row)

    def list_tenants(self) -> list[Tenant]:
        rows = self._db.connection().execute("SELECT owner, weight, updated_at, doc FROM tenants ORDER BY owner")
        return [_tenant(row) for row in rows]

    def count_live_jobs(self, owner: str, at_most: int) -> int:
        row = self._db.connection().execute(_COUNT_LIVE, (owner, max(0, at_most))).fetchone()
        return int(row[0])

    def take_slot(self, owner: str, run_id: str, limit: int, now: int, *, priority: int | None = None) -> SlotOutcome:
        with self._db.write() as conn:
            held = conn.execute("SELECT 1 FROM tenant_slots WHERE owner = ? AND run_id = ?", (owner, run_id))
            if held.fetchone() is not None:
                return SlotOutcome.ALREADY_HELD
            used = conn.execute("SELECT count(*) FROM tenant_slots WHERE owner = ?", (owner,)).fetchone()[0]
            if used >= limit:
                return SlotOutcome.FULL
            if priority is not None and any(p > priority and until >= now for p, until in _waits(conn, owner).items()):
                return SlotOutcome.YIELDED
            conn.execute("INSERT INTO tenant_slots (owner, run_id, taken_at) VALUES (?, ?, ?)", (owner, run_id, now))
        return SlotOutcome.TAKEN

    def mark_slot_wait(self, owner: str, priority: int, until: int) -> None:
        with self._db.write() as conn:
            waits = _waits(conn, owner)
            if waits.get(priority, until - 1) >= until:
                return
            waits[priority] = until
            doc = json.dumps({str(p): at for p, at in waits.items()}, separators=(",", ":"))
            conn.execute(
                "INSERT INTO tenant_starts (owner, version, doc) VALUES (?, 0, ?)"
                " ON CONFLICT (owner) DO UPDATE SET doc = excluded.doc",
                (WAITS_PREFIX + owner, doc),
            )

    def clear_slot_wait(self, owner: str, priority: int, until: int) -> bool:
        with self._db.write() as conn:
            waits = _waits(conn, owner)
            if waits.get(priority) != until:
                return False
            del waits[priority]
            doc = json.dumps({str(p): at for p, at in waits.items()}, separators=(",", ":"))
            conn.execute("UPDATE tenant_starts SET doc = ? WHERE owner = ?", (doc, WAITS_PREFIX + owner))
        return True

    def release_slot(self, owner: str, run_id: str) -> bool:
        with self._db.write() as conn:
            deleted = conn.execute("DELETE FROM tenant_slots WHERE owner = ? AND run_id = ?", (owner, run_id))
            return deleted.rowcount == 1

    def slot_holders(self, owner: str) -> dict[str, int]:
        rows = self._db.connection().execute("SELECT run_id, taken_at FROM tenant_slots WHERE owner = ?", (owner,))
        return {run_id: taken_at for run_id, taken_at in rows}

    def slot_owners(self) -> list[str]:
        rows = self._db.connection().execute("SELECT DISTINCT owner FROM tenant_slots ORDER BY owner")
        return [row[0] for row in rows]

    def get_rate_state(self, owner: str) -> RateState | None:
        read = "SELECT version, doc FROM tenant_starts WHERE owner = ?"
        row = self._db.connection().execute(read, (owner,)).fetchone()
        return None if row is None else _rate_state(owner, row[0], row[1])

    def put_rate_state(self, state: RateState) -> bool:
        doc = json.dumps(
            {
                "limit": state.limit,
                "next_at": state.next_at,
                "queue_end": state.queue_end,
                "recent": state.recent,
                "guard_until": state.guard_until,
            },
            separators=(",", ":"),
        )
        with self._db.write() as conn:
            if state.version == 1:
                written = conn.execute(
                    "INSERT INTO tenant_starts (owner, version, doc) VALUES (?, 1, ?) ON CONFLICT (owner) DO NOTHING",
                    (state.owner, doc),
                )
            else:
                written = conn.execute(
                    "UPDATE tenant_starts SET version = ?, doc = ? WHERE owner = ? AND version = ?",
                    (state.version, doc, state.owner, state.version - 1),
                )
            return written.rowcount == 1


def _waits(conn: Any, owner: str) -> dict[int, int]:
    """The owner's slot-wait marks, by priority (``Store.mark_slot_wait``)."""
    row = conn.execute("SELECT doc FROM tenant_starts WHERE owner = ?", (WAITS_PREFIX + owner,)).fetchone()
    return {} if row is None else {int(p): int(at) for p, at in json.loads(row[0]).items()}


def _tenant(row: Any) -> Tenant:
    owner, weight, updated_at, doc = row
    limits = json.loads(doc)
    return Tenant(owner=owner, weight=weight, updated_at=updated_at, **{k: limits.get(k) for k in _TENANT_FIELDS})


def _rate_state(owner: str, version: int, doc: str) -> RateState:
    data = json.loads(doc)
    recent = {int(second): int(count) for second, count in data["recent"].items()}
    return RateState(owner, data["limit"], data["next_at"], data["queue_end"], recent, data["guard_until"], version)
