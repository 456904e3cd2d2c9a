"""Keyed limits and priority in the worker's lease path (``punctual.tenancy.keyed``, ``.admission``),
on both engines: the tenant machinery applied to a job's ``limits``, and slots handed out by priority.

A keyed limit is kept in its own scope of the tenant records: runs of several jobs whose keys resolve
alike share it, runs whose keys differ do not, the wait shows in the run's note, the finish frees the
slot and the reaper frees one a crash leaked. A run refused a slot marks its priority as waiting, and
a run of lower priority of the same scope then yields a free slot to it.
"""

from __future__ import annotations

import time

import pytest

from punctual.execution.worker import Worker
from punctual.model import JobLimit, RunState
from punctual.port import LeaseOutcome, SlotOutcome, Tenant
from punctual.reaping.reaper import reap_once
from punctual.runs.alerts import LogAlerter
from punctual.tenancy.keyed import key_scope
from tests.contract.factories import SECOND, make_job, make_run
from tests.contract.test_admission import OPTIONS, gate, process
from tests.contract.test_execution import OK, OWNER, FakeTargets, create_job, receive_one, schedule_run, stored

pytestmark = pytest.mark.contract

UPSTREAM = [JobLimit(key="upstream-api", max_concurrency=1)]
PER_CUSTOMER = [JobLimit(key="customer:{payload.customer_id}", max_runs_per_minute=1)]


def test_the_store_yields_a_free_slot_to_a_waiting_higher_priority(engine, clock):
    store, now = engine.store, clock.now_ms()
    store.mark_slot_wait("scope", 9, now + 2_000)
    store.mark_slot_wait("scope", 9, now + 1_000)  # an earlier mark never shortens the stored one
    assert store.take_slot("scope", "run_low", 3, now + 1_500, priority=5) is SlotOutcome.YIELDED
    assert store.take_slot("scope", "run_low", 3, now, priority=None) is SlotOutcome.TAKEN  # no priority: as before
    assert store.take_slot("scope", "run_high", 3, now, priority=9) is SlotOutcome.TAKEN
    assert store.take_slot("scope", "run_more", 3, now + 2_001, priority=5) is SlotOutcome.TAKEN  # the mark passed
    assert store.take_slot("scope", "run_full", 3, now, priority=9) is SlotOutcome.FULL
    assert set(store.slot_holders("scope")) == {"run_low", "run_high", "run_more"}
    assert store.slot_owners() == ["scope"]  # a scope with only marks lists no holders
    # a mark ends only as its writer wrote it: a later one (another worker's runs wait) stays
    store.mark_slot_wait("other", 9, now + 3_000)
    assert not store.clear_slot_wait("other", 9, now + 2_000)
    assert store.take_slot("other", "run_a", 3, now, priority=5) is SlotOutcome.YIELDED
    assert store.clear_slot_wait("other", 9, now + 3_000)
    assert not store.clear_slot_wait("other", 9, now + 3_000)  # ended already
    assert store.take_slot("other", "run_a", 3, now, priority=5) is SlotOutcome.TAKEN


def test_jobs_sharing_a_literal_key_share_its_ceiling(engine, engine_kind, clock):
    # Given two jobs of one owner (no tenant limits) sharing "upstream-api" max_concurrency 1, and a third without
    the_gate = gate(engine, clock)
    first = schedule_run(engine, clock, create_job(engine, clock, limits=UPSTREAM))
    first_delivery = receive_one(engine, engine_kind)
    second = schedule_run(engine, clock, create_job(engine, clock, limits=UPSTREAM))
    second_delivery = receive_one(engine, engine_kind)
    free = schedule_run(engine, clock, create_job(engine, clock))
    free_delivery = receive_one(engine, engine_kind)
    scope = key_scope(OWNER, "upstream-api")
    outcomes = []

    def while_first_runs(job, run, attempt):
        assert list(engine.store.slot_holders(scope)) == [first.run_id]
        outcomes.append(process(engine, clock, second_delivery, FakeTargets(OK), the_gate, worker_id="w2"))
        outcomes.append(process(engine, clock, free_delivery, FakeTargets(OK), the_gate, worker_id="w3"))
        return OK

    # When the others arrive while the first runs
    assert process(engine, clock, first_delivery, FakeTargets(while_first_runs), the_gate).value == "succeeded"
    # Then the job sharing the key waited (no attempt, the key in its note); the third ran
    assert [o.value for o in outcomes] == ["throttled", "succeeded"]
    waiting = stored(engine, second)
    assert waiting.state is RunState.SCHEDULED and waiting.attempt == 0
    assert waiting.note == "waiting: limit upstream-api max_concurrency 1 reached"
    assert stored(engine, free).state is RunState.SUCCEEDED
    # and the owner's own records are untouched; the finish freed the key's slot
    assert engine.store.slot_holders(OWNER) == {} and engine.store.slot_holders(scope) == {}
    # When the waiting message comes back, it runs; its attempt keeps why it waited
    clock.advance(2 * SECOND)
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), the_gate).value == "succeeded"
    assert stored(engine, second).attempts[0].waited == "limit upstream-api max_concurrency 1 reached"


def test_a_payload_key_limits_each_customer_apart(engine, engine_kind, clock):
    the_gate = gate(engine, clock)
    jobs = [create_job(engine, clock, limits=PER_CUSTOMER, payload={"customer_id": c}) for c in (42, 42, 43)]
    runs = [schedule_run(engine, clock, job) for job in jobs]
    outcomes = [process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), the_gate).value for _ in runs]
    # one start per minute per customer: 42 once, 43 once; 42's second run waits for its turn
    assert sorted(outcomes) == ["succeeded", "succeeded", "throttled"]
    waiting = [stored(engine, r) for r in runs if stored(engine, r).state is RunState.SCHEDULED]
    assert [r.note for r in waiting] == ["waiting: limit customer:42 max_runs_per_minute 1"]
    assert waiting[0].job_id in (jobs[0].id, jobs[1].id)
    assert engine.store.get_rate_state(key_scope(OWNER, "customer:43")) is not None
    assert engine.store.get_rate_state(OWNER) is None  # the owner has no rate of its own


def test_the_reaper_frees_a_keyed_slot_a_crash_leaked(engine, clock):
    # Given a worker that took a keyed slot and died before its lease, and one whose run runs
    store, now = engine.store, clock.now_ms()
    the_gate = gate(engine, clock)
    jobs = [create_job(engine, clock, limits=[*UPSTREAM, JobLimit(key="{job_id}", max_concurrency=5)])]
    jobs.append(create_job(engine, clock, limits=[JobLimit(key="upstream-api", max_concurrency=2)]))
    lost, live = (schedule_run(engine, clock, job, send=False) for job in jobs)
    assert the_gate.admit(OWNER, lost.run_id, now, job=jobs[0]).admitted
    assert the_gate.admit(OWNER, live.run_id, now, job=jobs[1]).admitted  # 2 on upstream-api for this job
    assert store.lease_run(jobs[1].id, live.scheduled_at, "w", now, 60_000).outcome is LeaseOutcome.LEASED
    upstream, per_job = key_scope(OWNER, "upstream-api"), key_scope(OWNER, jobs[0].id)
    assert set(store.slot_owners()) == {upstream, per_job}
    # When the reaper passes 20 s later
    clock.advance(20 * SECOND)
    stats = reap_once(store, engine.queue, None, LogAlerter(), clock)
    # Then the dead worker's slots are free in both scopes, the live run keeps its own
    assert stats.slots_freed == 2
    assert list(store.slot_holders(upstream)) == [live.run_id] and store.slot_holders(per_job) == {}


def test_a_waiting_higher_priority_run_takes_the_next_free_slot(engine, engine_kind, clock):
    # Given an owner with max_concurrency 1 whose slot is held, a priority 9 run refused meanwhile
    engine.store.put_tenant(Tenant(owner=OWNER, max_concurrency=1))
    the_gate, now = gate(engine, clock), clock.now_ms()
    blocker, urgent_job, routine_job = (create_job(engine, clock, priority=p) for p in (5, 9, 5))
    held = the_gate.admit(OWNER, schedule_run(engine, clock, blocker, send=False).run_id, now, job=blocker)
    urgent = schedule_run(engine, clock, urgent_job, send=False)
    refused = the_gate.admit(OWNER, urgent.run_id, now, job=urgent_job)
    assert not refused.admitted and refused.reason == "max_concurrency 1 reached"
    # When the slot frees and a routine run comes first
    the_gate.settle(held, LeaseOutcome.FINISHED)
    routine = schedule_run(engine, clock, routine_job, send=False)
    yielded = the_gate.admit(OWNER, routine.run_id, clock.now_ms(), job=routine_job)
    # Then it yields the slot to the waiting urgent run, which takes it when it is back
    assert not yielded.admitted
    assert yielded.reason == "max_concurrency 1 reached"
    assert engine.store.take_slot(OWNER, routine.run_id, 1, clock.now_ms(), priority=5) is SlotOutcome.YIELDED
    assert the_gate.admit(OWNER, urgent.run_id, refused.retry_at or 0, job=urgent_job).slot is SlotOutcome.TAKEN


def test_the_batched_worker_starts_a_batch_by_priority(engine, engine_kind, clock):
    from tests.contract.test_worker import OWNER as BATCH_OWNER
    from tests.contract.test_worker import Scripted, received
    from tests.contract.test_worker import process as run_batch

    # Given an owner with max_concurrency 2 and a batch of 4 routine runs, then 2 urgent ones
    engine.store.put_tenant(Tenant(owner=BATCH_OWNER, max_concurrency=2))
    now = clock.now_ms()
    runs = []
    for priority in (5, 5, 5, 5, 9, 9):
        job = make_job(BATCH_OWNER, clock, shards=engine.store.shards, priority=priority, timeout_s=5)
        engine.store.create_job(job)
        runs.append(make_run(job, now, clock))
    engine.store.insert_runs(runs)
    from punctual.port import Dispatch

    engine.queue.send([Dispatch(run.run_id, not_before=now) for run in runs])
    if engine_kind == "aws":
        time.sleep(0.2)
    targets = Scripted()
    w = Worker(engine, clock, targets=lambda: targets, options=OPTIONS, worker_id="w1", gate=gate(engine, clock))
    # When the worker handles the whole batch at once
    run_batch(w, received(engine, 6))
    # Then the two slots went to the urgent runs
    assert sorted(run_id for run_id, _ in targets.calls) == sorted(r.run_id for r in runs[4:])
