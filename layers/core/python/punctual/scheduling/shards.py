"""Shard ownership for a scheduler instance, through leases in the store.

Leases keep schedulers from doing the same work; correctness never depends on them (the claim's
conditional writes do). Balance: instance ``i`` of ``n`` prefers the shards with
``shard % n == i`` and acquires those first; it also takes over any shard whose lease expired
(an instance stopped renewing), and gives such foreign shards back every ``rebalance_ms`` so that
a returning preferred owner can pick them up again (if nobody does, it re-acquires them on its
next pass: the lookahead covers the gap).

Hand-over: an owner named ``<instance>@<generation>`` (the scheduler Lambda's invocations,
``punctual.scheduling.invocation``) takes its predecessor's live leases at once
(``rules.succeeds``: a new epoch, so the predecessor's next renewal fails). The predecessor learns
it was relieved at its next refresh (a successor holds one of the shards): it gives up every lease
it still holds and claims nothing more (:attr:`ShardOwnership.handed_over`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from punctual import rules
from punctual.port import ShardLease, Store

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OwnershipOptions:
    ttl_ms: int = 10_000  # a stopped instance's shards are taken over after at most this long
    renew_every_ms: int = 3_000
    rebalance_ms: int = 30_000


class ShardOwnership:
    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        instance: int = 0,
        instances: int = 1,
        options: OwnershipOptions | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.instance = instance % max(1, instances)
        self.instances = max(1, instances)
        self.options = options or OwnershipOptions()
        self.leases: dict[int, ShardLease] = {}
        self._last_refresh = -(2**62)
        self._last_rebalance = 0
        self.handed_over = False  # a later generation of this owner holds a shard: this one has stopped

    @property
    def shards(self) -> list[int]:
        return sorted(self.leases)

    def preferred(self, shard: int) -> bool:
        return shard % self.instances == self.instance

    def refresh(self, now: int, *, force: bool = False) -> list[int]:
        """Renew held leases and acquire free ones, at most every ``renew_every_ms``. Returns owned
        shards: none once a successor took over (:attr:`handed_over`), whose leases are given up.

        A refresh that raised is retried on the next call: the store's error reaches every tick until
        a refresh succeeds, instead of ticks that own nothing and look healthy in between. Finding a
        successor is a refresh that succeeded: the hand-over is a normal stop.
        """
        if self.handed_over:
            return []
        if not force and now - self._last_refresh < self.options.renew_every_ms:
            return self.shards
        if self._last_rebalance == 0:
            self._last_rebalance = now
        self._renew(now)
        current = {lease.shard: lease for lease in self.store.shard_leases()}
        if any(rules.succeeds(lease.owner, self.owner) for lease in current.values()):
            self._hand_over(now)
            return []
        given_back: set[int] = set()
        if now - self._last_rebalance >= self.options.rebalance_ms:
            self._last_rebalance = now
            given_back = self._give_back_foreign()
        self._acquire_free(now, current, skip=given_back)
        self._last_refresh = now
        return self.shards

    def release_all(self) -> None:
        """Expire every held lease now (graceful stop): another instance takes over at once."""
        for lease in list(self.leases.values()):
            self.store.release_shard(lease)
        self.leases.clear()

    def _hand_over(self, now: int) -> None:
        """A successor holds a shard: stop for good, and give up the leases it has not taken yet.

        Giving them up is best effort: the successor takes them over on its own pass anyway
        (``rules.succeeds``), so a failed release does not make this refresh (nor the tick) a failure.
        """
        self.handed_over = True
        self._last_refresh = now
        try:
            self.release_all()
        except Exception:  # the leases left are the successor's to take, or expire
            logger.warning("giving up the leases at the hand-over failed; the successor takes them over", exc_info=True)

    def _renew(self, now: int) -> None:
        for shard, lease in list(self.leases.items()):
            renewed = self.store.renew_shard(lease, now, self.options.ttl_ms)
            if renewed is None:
                del self.leases[shard]  # taken over after we failed to renew in time
            else:
                self.leases[shard] = renewed

    def _give_back_foreign(self) -> set[int]:
        given_back = set()
        for shard, lease in list(self.leases.items()):
            if not self.preferred(shard):
                self.store.release_shard(lease)
                del self.leases[shard]
                given_back.add(shard)
        return given_back

    def _acquire_free(self, now: int, current: dict[int, ShardLease], skip: set[int]) -> None:
        candidates = sorted(range(self.store.shards), key=lambda s: (not self.preferred(s), s))
        for shard in candidates:
            if shard in self.leases or shard in skip:
                continue
            lease = current.get(shard)
            if lease is not None and not rules.may_acquire_shard(lease, self.owner, now):
                continue  # held by a live instance (not our predecessor): no write, no conflict
            acquired = self.store.acquire_shard(shard, self.owner, now, self.options.ttl_ms)
            if acquired is not None:
                self.leases[shard] = acquired
