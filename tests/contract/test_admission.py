"""Tenant limits in the worker's lease path (``punctual.tenancy.admission``), on both engines.

A run over its owner's max_concurrency or max_runs_per_minute waits: its message is hidden (or
resent fresh), the run stays scheduled with no attempt used, and the wait shows in its note.
Slots are released with the finish and repaired by the reaper when a crash leaked them.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.execution.worker import Worker
from punctual.metrics import InMemoryMetrics
from punctual.model import Job, Run, RunState
from punctual.port import Beat, Delivery, Engine, Hold, LeaseOutcome, SlotOutcome, Tenant
from punctual.reaping.reaper import reap_once
from punctual.runs.alerts import LogAlerter
from punctual.runs.cancel import cancel_open_run
from punctual.runs.retry import Jitter
from punctual.tenancy import rates
from punctual.tenancy.admission import Gate, repair_slots
from punctual.tenancy.limits import UNLIMITED, LimitCache
from tests.contract.factories import SECOND
from tests.contract.test_execution import OK, OWNER, FakeTargets, create_job, receive_one, schedule_run, stored

pytestmark = pytest.mark.contract

OPTIONS = ExecutionOptions(lease_margin_s=1, jitter=Jitter.NONE)


def gate(engine: Engine, clock: ManualClock) -> Gate:
    return Gate(engine.store, LimitCache(engine.store, UNLIMITED, clock, ttl_ms=0), clock, rng=random.Random(7))


def limit(engine: Engine, **limits: Any) -> None:
    engine.store.put_tenant(Tenant(owner=OWNER, **limits))


def process(engine: Engine, clock: ManualClock, delivery: Delivery, targets: Any, the_gate: Gate, **kw: Any) -> Outcome:
    options = kw.pop("options", OPTIONS)
    return process_delivery(
        delivery,
        store=engine.store,
        queue=engine.queue,
        targets=targets,
        clock=clock,
        worker_id=kw.pop("worker_id", "w1"),
        options=options,
        alerter=LogAlerter(),
        gate=the_gate,
        metrics=kw.pop("metrics", None),
    )


def test_a_run_over_max_concurrency_waits_without_using_an_attempt(engine, engine_kind, clock):
    # Given an owner with max_concurrency 1 and two due runs
    limit(engine, max_concurrency=1)
    the_gate = gate(engine, clock)
    first_job, second_job = create_job(engine, clock), create_job(engine, clock)
    first = schedule_run(engine, clock, first_job)
    first_delivery = receive_one(engine, engine_kind)
    second = schedule_run(engine, clock, second_job)
    second_delivery = receive_one(engine, engine_kind)
    outcomes: list[Outcome] = []

    def while_first_runs(job: Job, run: Run, attempt: int) -> TargetResult:
        # When the second run's message arrives while the first one runs
        assert engine.store.slot_holders(OWNER) == {first.run_id: clock.now_ms()}
        outcomes.append(process(engine, clock, second_delivery, FakeTargets(OK), the_gate, worker_id="w2"))
        return OK

    sink = InMemoryMetrics()
    first_outcome = process(engine, clock, first_delivery, FakeTargets(while_first_runs), the_gate, metrics=sink)
    assert first_outcome is Outcome.SUCCEEDED
    # Then the second waited: still scheduled, no attempt, the wait written on it, its message hidden
    assert outcomes == [Outcome.THROTTLED]
    waiting = stored(engine, second)
    assert waiting.state is RunState.SCHEDULED and waiting.attempt == 0 and waiting.attempts == []
    assert waiting.note == "waiting: max_concurrency 1 reached"
    assert waiting.deadline_at > clock.now_ms() + OPTIONS.throttle_grace_ms
    assert engine.queue.receive(10, 60) == []
    # And the first run's finish released its slot
    assert engine.store.slot_holders(OWNER) == {}
    # When the message comes back, the run starts
    clock.advance(2 * SECOND)
    again = receive_one(engine, engine_kind)
    assert process(engine, clock, again, FakeTargets(OK), the_gate, metrics=sink) is Outcome.SUCCEEDED
    done = stored(engine, second)
    assert done.state is RunState.SUCCEEDED and done.attempt == 1
    assert engine.store.slot_holders(OWNER) == {}
    # and start lateness has the first run only: the second's 2 s were its owner's limit working (issue 31)
    assert list(sink.samples[m.START_LATENESS_MS]) == [0]


def test_owners_without_limits_take_no_slot(engine, engine_kind, clock):
    limit(engine, max_jobs=5, api_requests_per_second=3)  # limits that do not touch the lease path
    the_gate = gate(engine, clock)
    run = schedule_run(engine, clock, create_job(engine, clock))
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), the_gate) is Outcome.SUCCEEDED
    assert stored(engine, run).state is RunState.SUCCEEDED
    assert engine.store.slot_owners() == []


def test_max_runs_per_minute_gives_waiting_runs_their_turns(engine, engine_kind, clock, elapse):
    # Given 30 starts per minute (one per ~2 s) and three runs due at once
    limit(engine, max_runs_per_minute=30)
    the_gate = gate(engine, clock)
    runs = [schedule_run(engine, clock, create_job(engine, clock)) for _ in range(3)]
    deliveries = [receive_one(engine, engine_kind) for _ in range(3)]
    now = clock.now_ms()
    outcomes = [process(engine, clock, d, FakeTargets(OK), the_gate) for d in deliveries]
    # Then one starts now and the others wait, each for its own turn one interval apart
    assert sorted(outcomes) == sorted([Outcome.SUCCEEDED, Outcome.THROTTLED, Outcome.THROTTLED])
    step = rates.interval_ms(30)
    state = engine.store.get_rate_state(OWNER)
    assert state is not None and state.next_at == now + step
    assert state.queue_end == now + 3 * step - rates.SLACK_MS  # two turns handed out
    waiting = [stored(engine, r) for r in runs if stored(engine, r).state is RunState.SCHEDULED]
    assert [r.note for r in waiting] == ["waiting: max_runs_per_minute 30"] * 2
    assert all(r.attempt == 0 and r.deadline_at > now + step for r in waiting)
    # When the first turn comes (its message was resent for that instant)
    elapse(1)  # the first turn: now + step - SLACK_MS, a few ms away
    again = receive_one(engine, engine_kind)
    assert process(engine, clock, again, FakeTargets(OK), the_gate) is Outcome.SUCCEEDED
    # Then that run started: its note is gone, and its attempt's log entry keeps why it waited
    started = next(stored(engine, r) for r in waiting if stored(engine, r).state is RunState.SUCCEEDED)
    assert started.note is None and started.attempts[0].waited == "max_runs_per_minute 30"
    # and the last one still waits (it comes back at its own turn)
    assert engine.queue.receive(10, 60) == []
    last = [stored(engine, r).note for r in waiting if r.run_id != started.run_id]
    assert last == ["waiting: max_runs_per_minute 30"]


def test_a_run_the_rate_refuses_takes_no_slot_and_a_start_not_leased_is_given_back(engine, engine_kind, clock):
    # Given an owner with both limits, and a run that started
    limit(engine, max_concurrency=5, max_runs_per_minute=2)
    the_gate = gate(engine, clock)
    first, second = (schedule_run(engine, clock, create_job(engine, clock), send=False) for _ in range(2))
    started = the_gate.admit(OWNER, first.run_id, clock.now_ms())
    assert started.admitted and started.slot is SlotOutcome.TAKEN
    # When the next one comes within the minute: it waits for its turn, holding no slot
    refused = the_gate.admit(OWNER, second.run_id, clock.now_ms())
    assert not refused.admitted and refused.reason == "max_runs_per_minute 2"
    assert refused.retry_at == clock.now_ms() + rates.interval_ms(2) - rates.SLACK_MS
    assert list(engine.store.slot_holders(OWNER)) == [first.run_id]
    # And when the first one's lease finds it finished (a duplicate), its slot and its start go back
    the_gate.settle(started, LeaseOutcome.FINISHED)
    assert engine.store.slot_holders(OWNER) == {}
    assert the_gate.admit(OWNER, second.run_id, clock.now_ms()).admitted


def test_a_slot_taken_for_a_run_held_elsewhere_is_given_back(engine, engine_kind, clock):
    limit(engine, max_concurrency=2)
    the_gate = gate(engine, clock)
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    # a worker holds the run with its slot
    held = the_gate.admit(OWNER, run.run_id, clock.now_ms())
    assert held.slot is SlotOutcome.TAKEN
    assert engine.store.lease_run(job.id, run.scheduled_at, "w1", clock.now_ms(), 60_000).outcome is LeaseOutcome.LEASED
    # a duplicate delivery finds the slot already held and the run held: the slot stays the holder's
    duplicate = the_gate.admit(OWNER, run.run_id, clock.now_ms())
    assert duplicate.admitted and duplicate.slot is SlotOutcome.ALREADY_HELD
    the_gate.settle(duplicate, LeaseOutcome.HELD)
    assert list(engine.store.slot_holders(OWNER)) == [run.run_id]
    # a run taken fresh and then found finished gives its slot back
    other = schedule_run(engine, clock, create_job(engine, clock), send=False)
    fresh = the_gate.admit(OWNER, other.run_id, clock.now_ms())
    the_gate.settle(fresh, LeaseOutcome.FINISHED)
    assert list(engine.store.slot_holders(OWNER)) == [run.run_id]


def test_a_takeover_reuses_the_dead_workers_slot_and_frees_it_at_the_finish(engine, engine_kind, clock):
    # Given a worker that leased a run with max_concurrency 1 and died
    limit(engine, max_concurrency=1)
    the_gate = gate(engine, clock)
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job)
    assert the_gate.admit(OWNER, run.run_id, clock.now_ms()).slot is SlotOutcome.TAKEN
    assert (
        engine.store.lease_run(job.id, run.scheduled_at, "dead", clock.now_ms(), 2_000).outcome is LeaseOutcome.LEASED
    )
    # When its lease has ended and the message comes back
    clock.advance(3 * SECOND)
    delivery = receive_one(engine, engine_kind)
    # Then the new attempt runs in the same slot (not refused by the dead worker's), and frees it
    assert process(engine, clock, delivery, FakeTargets(OK), the_gate, worker_id="w2") is Outcome.SUCCEEDED
    assert stored(engine, run).attempt == 2
    assert engine.store.slot_holders(OWNER) == {}


def test_the_reaper_frees_slots_whose_runs_do_not_run(engine, engine_kind, clock):
    # Given slots leaked by crashes: one before the lease (run still scheduled), one of a run that
    # finished, one of a run whose worker died (lease expired); and one live run
    limit(engine, max_concurrency=10)
    jobs = [create_job(engine, clock) for _ in range(4)]
    runs = [schedule_run(engine, clock, job, send=False) for job in jobs]
    store, now = engine.store, clock.now_ms()
    for run in runs:
        assert store.take_slot(OWNER, run.run_id, 10, now) is SlotOutcome.TAKEN
    assert store.lease_run(jobs[1].id, runs[1].scheduled_at, "w", now, 60_000).outcome is LeaseOutcome.LEASED
    assert store.lease_run(jobs[2].id, runs[2].scheduled_at, "w", now, 5_000).outcome is LeaseOutcome.LEASED
    assert store.lease_run(jobs[3].id, runs[3].scheduled_at, "w", now, 60_000).outcome is LeaseOutcome.LEASED
    store.finish_run(jobs[3].id, runs[3].scheduled_at, "w", 1, _succeeded(now))
    # young slots are leases in progress: left alone
    assert repair_slots(store, now + 1_000) == 0
    # When the reaper passes 20 s later
    clock.advance(20 * SECOND)
    stats = reap_once(store, engine.queue, None, LogAlerter(), clock)
    # Then only the live run keeps its slot
    assert stats.slots_freed == 3
    assert list(store.slot_holders(OWNER)) == [runs[1].run_id]


def test_a_run_cancelled_under_its_call_keeps_its_slot_until_its_lease_ends(engine, clock):
    # Given a running run holding a slot, cancelled under its attempt (its job deleted, or replaced)
    limit(engine, max_concurrency=1)
    job = create_job(engine, clock)
    run = schedule_run(engine, clock, job, send=False)
    store, now = engine.store, clock.now_ms()
    assert store.take_slot(OWNER, run.run_id, 1, now) is SlotOutcome.TAKEN
    leased = store.lease_run(job.id, run.scheduled_at, "w", now, 60_000).run
    assert leased is not None
    assert cancel_open_run(store, leased, "job deleted", now, tries=3)
    # Then its call may go on until its worker's next heartbeat finds it cancelled: the reaper keeps
    # the slot while the lease lasts (a fault-tier seed saw a third call under max_concurrency 2)
    cancelled = stored(engine, run)
    assert cancelled.state is RunState.CANCELLED and cancelled.lease_expires_at == now + 60_000
    assert store.heartbeat_runs([Beat(Hold(job.id, run.scheduled_at, "w", 1), now + 120_000)]) == [False]
    assert repair_slots(store, now + 30_000) == 0
    assert repair_slots(store, now + 61_000) == 1


def test_a_message_throttled_many_times_is_resent_fresh_never_dead_lettered(engine, engine_kind, clock, elapse):
    limit(engine, max_concurrency=1)
    the_gate = gate(engine, clock)
    blocker = schedule_run(engine, clock, create_job(engine, clock), send=False)
    assert the_gate.admit(OWNER, blocker.run_id, clock.now_ms()).slot is SlotOutcome.TAKEN
    run = schedule_run(engine, clock, create_job(engine, clock))
    delivery = receive_one(engine, engine_kind)
    options = dataclasses.replace(OPTIONS, requeue_after_receives=2)
    worn = Delivery(delivery.run_id, delivery.not_before, delivery.receipt, 2)
    assert process(engine, clock, worn, FakeTargets(OK), the_gate, options=options) is Outcome.THROTTLED
    # the worn message is gone and a fresh one (receive count 1) replaces it after the backoff (<= 3 s)
    elapse(3.5)
    fresh = receive_one(engine, engine_kind)
    assert fresh.run_id == run.run_id and fresh.receive_count == 1
    assert stored(engine, run).attempt == 0


def _succeeded(now: int) -> Any:
    from punctual.port import RunChange

    return RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, finished_at=now)


# -- the async batched worker (punctual.execution.batch): the same gate in its lease path ------------


def test_the_batched_worker_admits_up_to_the_cap_and_the_rest_wait(engine, engine_kind, clock):
    from tests.contract.test_worker import OWNER as BATCH_OWNER
    from tests.contract.test_worker import Scripted, new_runs, process, received

    # Given an owner with max_concurrency 2 and a batch of 5 due runs
    engine.store.put_tenant(Tenant(owner=BATCH_OWNER, max_concurrency=2))
    the_gate = gate(engine, clock)
    runs = new_runs(engine, clock, 5)
    targets = Scripted()
    w = Worker(engine, clock, targets=lambda: targets, options=OPTIONS, worker_id="w1", gate=the_gate)
    # When the worker handles the whole batch at once
    outcomes = process(w, received(engine, 5))
    # Then 2 ran and 3 waited: still scheduled, no attempt used, their wait noted; no slot left held
    assert sorted(str(o) for o in outcomes) == sorted(["succeeded"] * 2 + ["throttled"] * 3)
    assert len(targets.calls) == 2
    waiting = [stored(engine, r) for r in runs if stored(engine, r).state is RunState.SCHEDULED]
    assert len(waiting) == 3
    assert all(r.attempt == 0 and r.note == "waiting: max_concurrency 2 reached" for r in waiting)
    assert engine.store.slot_holders(BATCH_OWNER) == {}
    # and they run when their messages come back
    clock.advance(30 * SECOND)
    if engine_kind == "aws":
        time.sleep(3.5)  # moto's SQS visibility runs on real time (the backoff is at most 1.5 s)
    again = process(w, received(engine, 3))
    assert sorted(str(o) for o in again) == ["succeeded"] * 2 + ["throttled"]
