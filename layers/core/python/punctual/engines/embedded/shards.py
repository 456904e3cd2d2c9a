"""The embedded engine's shard leases: one row per shard in ``shard_leases``, decided by
``punctual.rules`` inside one write transaction.

A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore` (the shard part of the port).
"""

from __future__ import annotations

from punctual import rules
from punctual.clock import Clock
from punctual.engines.embedded.db import Database
from punctual.port import ShardLease


class EmbeddedShards:
    """The shard lease methods of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

    _db: Database
    _clock: Clock

    def acquire_shard(self, shard: int, owner: str, now: int, ttl_ms: int) -> ShardLease | None:
        with self._db.write() as conn:
            found = conn.execute("SELECT shard, owner, epoch, expires_at FROM shard_leases WHERE shard = ?", (shard,))
            row = found.fetchone()
            current = None if row is None else ShardLease(*row)
            if not rules.may_acquire_shard(current, owner, now):
                return None
            lease = rules.acquired(current, shard, owner, now, ttl_ms)
            conn.execute(
                "INSERT INTO shard_leases (shard, owner, epoch, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (shard)"
                " DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
                (lease.shard, lease.owner, lease.epoch, lease.expires_at),
            )
        return lease

    def renew_shard(self, lease: ShardLease, now: int, ttl_ms: int) -> ShardLease | None:
        with self._db.write() as conn:
            renewed = conn.execute(
                "UPDATE shard_leases SET expires_at = ? WHERE shard = ? AND owner = ? AND epoch = ?",
                (now + ttl_ms, lease.shard, lease.owner, lease.epoch),
            ).rowcount
        return ShardLease(lease.shard, lease.owner, lease.epoch, now + ttl_ms) if renewed else None

    def release_shard(self, lease: ShardLease) -> None:
        # "now - 1": expired for anyone who acquires from now on (acquire needs expires_at < now).
        with self._db.write() as conn:
            conn.execute(
                "UPDATE shard_leases SET expires_at = min(expires_at, ?) WHERE shard = ? AND owner = ? AND epoch = ?",
                (self._clock.now_ms() - 1, lease.shard, lease.owner, lease.epoch),
            )

    def shard_leases(self) -> list[ShardLease]:
        rows = self._db.connection().execute("SELECT shard, owner, epoch, expires_at FROM shard_leases ORDER BY shard")
        return [ShardLease(*row) for row in rows]
