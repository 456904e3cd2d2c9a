"""The batched port methods (lease_runs, heartbeat_runs, finish_runs, extend_many, delete_many,
Engine.finish_and_ack) on both engines: each item decided exactly as its single-call form."""

from __future__ import annotations

import pytest

from punctual.model import RunState
from punctual.port import Beat, Dispatch, Finish, Hold, LeaseOutcome, LeaseRequest, RunChange
from tests.contract.factories import MINUTE, SECOND, drain, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-batch"
LEASE = 30 * SECOND


def runs_of(engine, clock, states):
    """One job with one run per state in ``states``, scheduled a second apart."""
    job = make_job(OWNER, clock, shards=engine.store.shards)
    engine.store.create_job(job)
    now = clock.now_ms()
    runs = []
    for i, state in enumerate(states):
        fields = {}
        if state is RunState.RUNNING:
            fields = {"attempt": 1, "worker_id": "other", "lease_expires_at": now + MINUTE}
        if state is RunState.RETRYING:
            fields = {"attempt": 1, "next_attempt_at": now + MINUTE}
        runs.append(make_run(job, now - i * SECOND, clock, state=state, **fields))
    assert engine.store.insert_runs(runs) == [True] * len(runs)
    return job, runs


def test_lease_runs_decides_each_run_by_the_single_lease_rules(engine, clock):
    # Given a scheduled, a held, a backing-off and a finished run, and one that does not exist
    states = [RunState.SCHEDULED, RunState.RUNNING, RunState.RETRYING, RunState.SUCCEEDED]
    job, runs = runs_of(engine, clock, states)
    requests = [LeaseRequest(run.job_id, run.scheduled_at, LEASE) for run in runs]
    requests.append(LeaseRequest(job.id, 1, LEASE))
    # When one worker leases them in one batch
    now = clock.now_ms()
    results = engine.store.lease_runs(requests, "w1", now)
    # Then each got the outcome a single lease gets, in order, and only the scheduled one is held by w1
    assert [r.outcome for r in results] == [
        LeaseOutcome.LEASED,
        LeaseOutcome.HELD,
        LeaseOutcome.NOT_READY,
        LeaseOutcome.FINISHED,
        LeaseOutcome.NOT_FOUND,
    ]
    leased = engine.store.get_run(runs[0].job_id, runs[0].scheduled_at)
    assert leased.state is RunState.RUNNING and leased.worker_id == "w1" and leased.attempt == 1
    assert leased.lease_expires_at == now + LEASE and leased.started_at == now
    assert results[0].run == leased
    assert engine.store.get_run(runs[1].job_id, runs[1].scheduled_at).worker_id == "other"
    assert engine.store.lease_runs([], "w1", now) == []


def test_lease_runs_takes_over_expired_leases_only(engine, clock):
    _job, runs = runs_of(engine, clock, [RunState.RUNNING, RunState.RUNNING])
    late = clock.now_ms() + MINUTE + 1  # both leases ended
    results = engine.store.lease_runs([LeaseRequest(r.job_id, r.scheduled_at, LEASE) for r in runs], "w2", late)
    assert [r.outcome for r in results] == [LeaseOutcome.LEASED] * 2
    for run in runs:
        taken = engine.store.get_run(run.job_id, run.scheduled_at)
        assert taken.attempt == 2 and taken.worker_id == "w2"
        assert [a.outcome.value for a in taken.attempts] == ["lease_expired"]


def test_heartbeat_runs_extends_held_leases_and_reports_lost_ones(engine, clock):
    _job, runs = runs_of(engine, clock, [RunState.SCHEDULED, RunState.SCHEDULED])
    now = clock.now_ms()
    engine.store.lease_runs([LeaseRequest(r.job_id, r.scheduled_at, LEASE) for r in runs], "w1", now)
    holds = [Hold(r.job_id, r.scheduled_at, "w1", 1) for r in runs]
    stranger = Hold(runs[1].job_id, runs[1].scheduled_at, "w9", 1)
    alive = engine.store.heartbeat_runs([Beat(holds[0], now + 2 * MINUTE), Beat(stranger, now + 2 * MINUTE)])
    assert alive == [True, False]
    first = engine.store.get_run(runs[0].job_id, runs[0].scheduled_at)
    assert first.lease_expires_at == now + 2 * MINUTE == first.deadline_at
    assert engine.store.get_run(runs[1].job_id, runs[1].scheduled_at).lease_expires_at == now + LEASE
    assert engine.store.heartbeat_runs([]) == []


def test_finish_runs_applies_held_finishes_and_skips_lost_ones(engine, clock):
    _job, runs = runs_of(engine, clock, [RunState.SCHEDULED, RunState.SCHEDULED])
    now = clock.now_ms()
    engine.store.lease_runs([LeaseRequest(r.job_id, r.scheduled_at, LEASE) for r in runs], "w1", now)
    done = RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, finished_at=now)
    finishes = [
        Finish(Hold(runs[0].job_id, runs[0].scheduled_at, "w1", 1), done),
        Finish(Hold(runs[1].job_id, runs[1].scheduled_at, "w1", 7), done),  # not this attempt
    ]
    results = engine.store.finish_runs(finishes)
    assert results[0] is not None and results[0].state is RunState.SUCCEEDED and results[1] is None
    assert engine.store.get_run(runs[1].job_id, runs[1].scheduled_at).state is RunState.RUNNING
    assert engine.store.finish_runs([]) == []


def test_finish_and_ack_deletes_the_messages_of_applied_finishes_only(engine, clock):
    # Given two leased runs, each with its received message
    _job, runs = runs_of(engine, clock, [RunState.SCHEDULED, RunState.SCHEDULED])
    engine.queue.send([Dispatch(r.run_id, r.scheduled_at) for r in runs])
    messages = {d.run_id: d for d in drain(engine.queue, visibility_s=1)}
    now = clock.now_ms()
    engine.store.lease_runs([LeaseRequest(r.job_id, r.scheduled_at, LEASE) for r in runs], "w1", now)
    done = RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, finished_at=now)
    # When one finish applies and the other lost its lease, both with their receipts
    results = engine.finish_and_ack(
        [
            Finish(Hold(runs[0].job_id, runs[0].scheduled_at, "w1", 1), done, messages[runs[0].run_id].receipt),
            Finish(Hold(runs[1].job_id, runs[1].scheduled_at, "w9", 1), done, messages[runs[1].run_id].receipt),
        ]
    )
    # Then only the finished run's message is gone: the other comes back after its visibility
    assert results[0] is not None and results[1] is None
    engine.queue.extend_many([messages[runs[1].run_id].receipt], 0)
    assert [d.run_id for d in drain(engine.queue)] == [runs[1].run_id]


def test_extend_many_and_delete_many_act_on_every_receipt_and_skip_stale_ones(engine, clock):
    _job, runs = runs_of(engine, clock, [RunState.SCHEDULED] * 3)
    engine.queue.send([Dispatch(r.run_id, r.scheduled_at) for r in runs])
    got = drain(engine.queue, visibility_s=300)
    assert len(got) == 3
    receipts = [d.receipt for d in got]
    # visible again at once, then received anew (the old receipts go stale on the embedded engine)
    engine.queue.extend_many(receipts, 0)
    again = drain(engine.queue, visibility_s=300)
    assert sorted(d.run_id for d in again) == sorted(r.run_id for r in runs)
    engine.queue.delete_many([again[0].receipt, again[1].receipt])
    engine.queue.extend_many([again[2].receipt], 0)
    assert [d.run_id for d in drain(engine.queue)] == [again[2].run_id]
    engine.queue.delete_many([])
    engine.queue.extend_many([], 0)
