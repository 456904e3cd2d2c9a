"""Contract: tenant records, live-job counts, concurrency slots, rate windows and the fair hand-out."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.model import JobStatus
from punctual.port import Dispatch, Engine, RateState, SlotOutcome, Store, Tenant
from punctual.tenancy import rates
from tests.contract.factories import drain, make_job

pytestmark = pytest.mark.contract


def test_tenant_records_round_trip_and_replace(store: Store, clock: ManualClock) -> None:
    # Given no record, when an operator sets one and then changes it, then the newest one is read back
    assert store.get_tenant("alice") is None
    assert store.list_tenants() == []
    first = Tenant(owner="alice", max_jobs=10, max_concurrency=5, updated_at=clock.now_ms())
    store.put_tenant(first)
    assert store.get_tenant("alice") == first
    second = Tenant(owner="alice", max_runs_per_minute=60, api_requests_per_second=20, weight=3, updated_at=5)
    store.put_tenant(second)
    store.put_tenant(Tenant(owner="bob", max_jobs=1))
    assert store.get_tenant("alice") == second  # replaced whole: max_jobs is back to "default"
    assert [t.owner for t in store.list_tenants()] == ["alice", "bob"]
    assert store.get_tenant("carol") is None


def test_live_jobs_count_active_and_paused_only_up_to_the_bound(store: Store, clock: ManualClock) -> None:
    for status in (JobStatus.ACTIVE, JobStatus.ACTIVE, JobStatus.PAUSED, JobStatus.COMPLETED, JobStatus.DELETED):
        store.create_job(make_job("alice", clock, shards=store.shards, status=status))
    store.create_job(make_job("bob", clock, shards=store.shards))
    assert store.count_live_jobs("alice", 100) == 3
    assert store.count_live_jobs("alice", 2) == 2  # stops counting at the bound
    assert store.count_live_jobs("bob", 100) == 1
    assert store.count_live_jobs("nobody", 100) == 0


def test_slots_are_bounded_per_owner_and_idempotent_per_run(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    assert store.take_slot("alice", "run_a", 2, now) is SlotOutcome.TAKEN
    assert store.take_slot("alice", "run_a", 2, now + 1) is SlotOutcome.ALREADY_HELD  # a redelivery
    assert store.take_slot("alice", "run_b", 2, now) is SlotOutcome.TAKEN
    assert store.take_slot("alice", "run_c", 2, now) is SlotOutcome.FULL
    assert store.take_slot("bob", "run_x", 1, now) is SlotOutcome.TAKEN  # owners do not share slots
    assert store.slot_holders("alice") == {"run_a": now, "run_b": now}
    assert store.slot_owners() == ["alice", "bob"]

    assert store.release_slot("alice", "run_a") is True
    assert store.release_slot("alice", "run_a") is False  # released twice: nothing to do
    assert store.take_slot("alice", "run_c", 2, now + 2) is SlotOutcome.TAKEN
    assert store.slot_holders("alice") == {"run_b": now, "run_c": now + 2}
    assert store.release_slot("bob", "run_x") is True
    assert store.slot_owners() == ["alice"]
    assert store.slot_holders("nobody") == {}


def test_a_lowered_limit_admits_nobody_until_enough_slots_are_released(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    for run in ("r1", "r2", "r3"):
        assert store.take_slot("alice", run, 3, now) is SlotOutcome.TAKEN
    assert store.take_slot("alice", "r4", 2, now) is SlotOutcome.FULL
    store.release_slot("alice", "r1")
    assert store.take_slot("alice", "r4", 2, now) is SlotOutcome.FULL  # still 2 held
    store.release_slot("alice", "r2")
    assert store.take_slot("alice", "r4", 2, now) is SlotOutcome.TAKEN


def test_racing_takers_never_exceed_the_limit(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(lambda i: store.take_slot("alice", f"run_{i}", 3, now), range(12)))
    assert outcomes.count(SlotOutcome.TAKEN) == 3
    assert outcomes.count(SlotOutcome.FULL) == 9
    assert len(store.slot_holders("alice")) == 3


def test_a_rate_record_is_written_by_compare_and_set(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    assert store.get_rate_state("alice") is None
    first = RateState("alice", limit=6, next_at=now + 10_334, queue_end=now, recent={now // 1000: 1}, version=1)
    assert store.put_rate_state(first) is True
    assert store.put_rate_state(first) is False  # a second first write loses
    assert store.get_rate_state("alice") == first
    second = replace(first, next_at=now + 20_668, recent={now // 1000: 2}, version=2)
    assert store.put_rate_state(second) is True
    assert store.put_rate_state(replace(first, queue_end=now + 5, version=2)) is False  # computed from a stale read
    assert store.get_rate_state("alice") == second
    assert store.get_rate_state("bob") is None  # per owner


def test_racing_rate_writers_count_every_start_once(store: Store, clock: ManualClock) -> None:
    # as many starts of one owner at once as a writer retries a lost race (so none gives up), under
    # 60 per minute (2 s of slack: two may start at once)
    now = clock.now_ms()
    racers = rates.CAS_TRIES
    with ThreadPoolExecutor(max_workers=racers) as pool:
        waits = list(pool.map(lambda _: rates.take(store, "alice", 60, now), range(racers)))
    assert waits.count(None) == 2
    state = store.get_rate_state("alice")
    assert state is not None and state.recent == {now // 1000: 2}
    assert state.next_at == now + 2 * rates.interval_ms(60)
    # the others wait, with distinct turns, one interval apart, from when the next start may come
    step = rates.interval_ms(60)
    turns = sorted(w for w in waits if w is not None)
    assert turns == [now + 2 * step - rates.SLACK_MS + k * step for k in range(racers - 2)]


def test_messages_carry_their_group_and_every_message_is_delivered(engine: Engine, clock: ManualClock) -> None:
    now = clock.now_ms()
    sent = [Dispatch(ids.run_id_for(ids.new_job_id(), now), now, group=g) for g in ("a", "a", "b", None)]
    engine.queue.send(sent)
    received = drain(engine.queue)
    assert sorted(d.run_id for d in received) == sorted(d.run_id for d in sent)
