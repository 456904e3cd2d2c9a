"""The ``aws`` engine's shard leases: one item per shard in the ``leases`` table, with a fencing
epoch that grows on every change of owner.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (the shard part of the port).
"""

from __future__ import annotations

from typing import Any

from punctual import rules
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.items import n, s
from punctual.engines.aws.tables import Tables, Written
from punctual.port import ShardLease


class DynamoShards:
    """The shard lease methods of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    leases_table: str

    def acquire_shard(self, shard: int, owner: str, now: int, ttl_ms: int) -> ShardLease | None:
        key = it.shard_key(shard)
        until = now + ttl_ms
        extend = c.Expression().set("expires_at = :until", until=n(until))
        written = self._tables.update(
            self.leases_table, key, extend.request(c.SHARD_OURS_LIVE, me=s(owner), now=n(now))
        )
        if written.applied:
            return _lease_of(written)
        current = None if written.item is None else it.item_to_lease(written.item)
        if not rules.may_acquire_shard(current, owner, now):
            return None  # another owner's live lease: no second write
        take = c.Expression().set("#owner = :me", me=s(owner)).set("expires_at = :until", until=n(until))
        take.set("epoch = if_not_exists(epoch, :zero) + :one", zero=n(0), one=n(1))  # a new fencing token
        if current is not None and current.expires_at >= now:  # a hand-over: the lease as read, live
            request = take.request(c.SHARD_HANDED_OVER, before=s(current.owner), epoch=n(current.epoch))
        else:
            request = take.request(c.SHARD_FREE, now=n(now))
        written = self._tables.update(self.leases_table, key, request, old_on_failure=False)
        return _lease_of(written) if written.applied else None

    def renew_shard(self, lease: ShardLease, now: int, ttl_ms: int) -> ShardLease | None:
        expr = c.Expression().set("expires_at = :until", until=n(now + ttl_ms))
        request = expr.request(c.SHARD_HELD, me=s(lease.owner), epoch=n(lease.epoch))
        written = self._tables.update(self.leases_table, it.shard_key(lease.shard), request, old_on_failure=False)
        return _lease_of(written) if written.applied else None

    def release_shard(self, lease: ShardLease) -> None:
        expr = c.Expression().set("expires_at = :zero", zero=n(0))
        request = expr.request(c.SHARD_HELD, me=s(lease.owner), epoch=n(lease.epoch))
        self._tables.update(self.leases_table, it.shard_key(lease.shard), request, returns="NONE", old_on_failure=False)

    def shard_leases(self) -> list[ShardLease]:
        request: dict[str, Any] = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(it.SHARD_PK)},
            "ConsistentRead": True,
        }
        leases = [it.item_to_lease(item) for item in self._tables.query_all(request)]
        return sorted(leases, key=lambda lease: lease.shard)


def _lease_of(written: Written) -> ShardLease:
    assert written.item is not None  # ALL_NEW of an applied update
    return it.item_to_lease(written.item)
