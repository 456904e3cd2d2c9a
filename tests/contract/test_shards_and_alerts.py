"""Contract: scheduler shard leases (acquire, renew, release, fencing epoch) and owner alerts."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.port import Alert, ShardLease, Store

pytestmark = pytest.mark.contract

TTL = 10_000


def test_acquire_a_free_shard(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    lease = store.acquire_shard(1, "s1", now, TTL)
    assert lease == ShardLease(shard=1, owner="s1", epoch=1, expires_at=now + TTL)
    assert store.shard_leases() == [lease]


def test_a_live_lease_keeps_other_owners_out(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    lease = store.acquire_shard(1, "s1", now, TTL)
    assert store.acquire_shard(1, "s2", now + 1, TTL) is None
    assert store.acquire_shard(1, "s2", now + TTL, TTL) is None  # expired means expires_at < now
    assert store.shard_leases() == [lease]
    # other shards are free
    assert store.acquire_shard(2, "s2", now, TTL) == ShardLease(2, "s2", 1, now + TTL)


def test_the_holder_may_acquire_again_and_keeps_its_epoch(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    store.acquire_shard(0, "s1", now, TTL)
    again = store.acquire_shard(0, "s1", now + 5_000, TTL)
    assert again == ShardLease(0, "s1", 1, now + 5_000 + TTL)


def test_an_expired_lease_changes_hands_with_a_new_epoch(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    first = store.acquire_shard(3, "s1", now, TTL)
    assert first is not None
    later = now + TTL + 1
    second = store.acquire_shard(3, "s2", later, TTL)
    assert second == ShardLease(3, "s2", 2, later + TTL)
    assert store.renew_shard(first, later + 1, TTL) is None  # the old owner learns it lost the shard
    assert store.acquire_shard(3, "s1", later + 2, TTL) is None
    assert store.shard_leases() == [second]


def test_renew_by_the_holder_extends(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    lease = store.acquire_shard(0, "s1", now, TTL)
    assert lease is not None
    renewed = store.renew_shard(lease, now + 4_000, TTL)
    assert renewed == ShardLease(0, "s1", 1, now + 4_000 + TTL)
    assert store.acquire_shard(0, "s2", now + TTL + 1, TTL) is None  # the renewal holds it past the first end
    assert store.renew_shard(renewed, now + 8_000, TTL) == ShardLease(0, "s1", 1, now + 8_000 + TTL)


def test_renew_after_own_expiry_without_a_new_owner_is_allowed(store: Store, clock: ManualClock) -> None:
    # "iff the shard still has the same owner and epoch": nobody took it, so the lease is still ours
    now = clock.now_ms()
    lease = store.acquire_shard(0, "s1", now, TTL)
    assert lease is not None
    assert store.renew_shard(lease, now + 2 * TTL, TTL) == ShardLease(0, "s1", 1, now + 3 * TTL)


def test_renew_with_a_stale_epoch_or_owner_is_refused(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    lease = store.acquire_shard(0, "s1", now, TTL)
    assert lease is not None
    assert store.renew_shard(ShardLease(0, "s1", 0, lease.expires_at), now + 1, TTL) is None
    assert store.renew_shard(ShardLease(0, "s1", 2, lease.expires_at), now + 1, TTL) is None
    assert store.renew_shard(ShardLease(0, "s2", 1, lease.expires_at), now + 1, TTL) is None
    assert store.renew_shard(ShardLease(1, "s1", 1, lease.expires_at), now + 1, TTL) is None  # never acquired
    assert store.shard_leases() == [lease]


def test_release_lets_another_owner_in_immediately(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    lease = store.acquire_shard(2, "s1", now, TTL)
    assert lease is not None
    store.release_shard(lease)
    taken = store.acquire_shard(2, "s2", now, TTL)  # at the same instant
    assert taken is not None
    assert taken.owner == "s2"
    assert taken.epoch == 2
    assert store.renew_shard(lease, now + 1, TTL) is None


def test_release_of_a_lost_lease_is_a_no_op(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    old = store.acquire_shard(2, "s1", now, TTL)
    assert old is not None
    new = store.acquire_shard(2, "s2", now + TTL + 1, TTL)
    assert new is not None
    store.release_shard(old)  # s1 shuts down late: it must not free s2's shard
    assert store.acquire_shard(2, "s3", now + TTL + 2, TTL) is None
    assert store.shard_leases() == [new]
    assert store.renew_shard(new, now + TTL + 3, TTL) is not None


def test_shard_leases_lists_every_shard_in_order(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    assert store.shard_leases() == []
    made = {}
    for shard in (3, 0, 2):
        lease = store.acquire_shard(shard, f"s{shard}", now, TTL)
        assert lease is not None
        made[shard] = lease
    store.release_shard(made[2])
    listed = store.shard_leases()
    assert [lease.shard for lease in listed] == [0, 2, 3]  # expired/released ones included
    assert listed[0] == made[0] and listed[2] == made[3]
    assert listed[1].owner == "s2" and listed[1].epoch == 1


def test_epochs_increase_across_many_handovers(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    epochs = []
    for i in range(5):
        lease = store.acquire_shard(1, f"s{i % 2}", now + i * (TTL + 1), TTL)
        assert lease is not None
        epochs.append(lease.epoch)
    assert epochs == [1, 2, 3, 4, 5]


# -- alerts ---------------------------------------------------------------------------------------


def _alert(owner: str, created_at: int, reason: str = "dead after 4 attempts") -> Alert:
    job_id = ids.new_job_id()
    return Alert(
        owner=owner,
        run_id=ids.run_id_for(job_id, created_at - 1_000),
        job_id=job_id,
        created_at=created_at,
        reason=reason,
    )


def test_an_alert_is_recorded_once_per_run(store: Store, clock: ManualClock) -> None:
    alert = _alert("alice", clock.now_ms())
    assert store.record_alert(alert) is True
    again = Alert(alert.owner, alert.run_id, alert.job_id, alert.created_at + 5_000, "dead-lettered")
    assert store.record_alert(again) is False
    assert store.list_alerts("alice") == [alert]  # the first record stands


def test_alerts_are_listed_newest_first_per_owner(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    alice = [_alert("alice", now + i * 1_000, f"reason {i}") for i in (2, 0, 3, 1)]
    bob = [_alert("bob", now + 500)]
    for alert in [*alice, *bob]:
        assert store.record_alert(alert) is True
    assert store.list_alerts("alice") == sorted(alice, key=lambda a: a.created_at, reverse=True)
    assert store.list_alerts("bob") == bob
    assert store.list_alerts("nobody") == []
    assert store.list_alerts("alice", limit=2) == sorted(alice, key=lambda a: a.created_at, reverse=True)[:2]


def test_the_same_run_id_for_different_owners_is_kept_apart(store: Store, clock: ManualClock) -> None:
    # run ids are global; an alert recorded for one owner never shows up for another
    alert = _alert("alice", clock.now_ms())
    store.record_alert(alert)
    assert store.list_alerts("alice2") == []
    assert store.list_alerts("alic") == []


def test_concurrent_acquires_of_a_free_shard_give_it_to_one_owner(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    start = threading.Barrier(6)

    def acquire(i: int) -> ShardLease | None:
        start.wait(timeout=10)
        return store.acquire_shard(0, f"s{i}", now, TTL)

    with ThreadPoolExecutor(max_workers=6) as pool:
        leases = list(pool.map(acquire, range(6)))
    winners = [lease for lease in leases if lease is not None]
    assert len(winners) == 1
    assert winners[0].epoch == 1
    assert store.shard_leases() == winners


def test_concurrent_alerts_for_one_run_record_it_once(store: Store, clock: ManualClock) -> None:
    alert = _alert("alice", clock.now_ms())
    start = threading.Barrier(6)

    def record(_: int) -> bool:
        start.wait(timeout=10)
        return store.record_alert(alert)

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert sorted(pool.map(record, range(6))) == [False] * 5 + [True]
    assert store.list_alerts("alice") == [alert]
