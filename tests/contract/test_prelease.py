"""Pre-leasing on both engines: a lease taken ahead of the run's instant (LeaseRequest.starts_at),
and the batched reads a worker uses at the instant (get_jobs, job_marks, held_runs)."""

from __future__ import annotations

import pytest

from punctual import rules
from punctual.model import JobStatus, RunState
from punctual.port import Hold, JobMark, LeaseOutcome, LeaseRequest, RunChange
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-prelease"
LEASE = 30 * SECOND


def test_a_pre_lease_starts_the_attempt_at_the_instant(engine, clock):
    # Given a scheduled run due in two seconds and a retrying run whose backoff ends in two seconds
    job = make_job(OWNER, clock, shards=engine.store.shards)
    engine.store.create_job(job)
    now = clock.now_ms()
    due = make_run(job, now + 2 * SECOND, clock)
    backing_off = make_run(
        job, now - MINUTE, clock, state=RunState.RETRYING, attempt=1, next_attempt_at=now + 2 * SECOND
    )
    assert engine.store.insert_runs([due, backing_off]) == [True, True]
    stored = engine.store.get_run(job.id, due.scheduled_at)
    # When a worker leases both now, each starting at its instant
    requests = [
        LeaseRequest(job.id, due.scheduled_at, LEASE, starts_at=due.scheduled_at),
        LeaseRequest(job.id, backing_off.scheduled_at, LEASE, starts_at=now + 2 * SECOND),
    ]
    results = engine.store.lease_runs(requests, "w1", now)
    # Then the scheduled run is held from its instant on (started_at never before scheduled_at) ...
    assert results[0].outcome is LeaseOutcome.LEASED
    held = engine.store.get_run(job.id, due.scheduled_at)
    assert held.started_at == due.scheduled_at and held.lease_expires_at == due.scheduled_at + LEASE
    assert held.worker_id == "w1" and held.attempt == 1
    # exactly as the rules say (both engines spell rules.leased in their own way)
    assert held == rules.leased(stored, "w1", now, LEASE, due.scheduled_at) == results[0].run
    # ... and whether a run may be leased is still decided at now: the backoff has not ended
    assert results[1].outcome is LeaseOutcome.NOT_READY
    # A start in the past changes nothing: the attempt starts now
    later = make_run(job, now - 5 * SECOND, clock)
    assert engine.store.insert_runs([later]) == [True]
    [result] = engine.store.lease_runs(
        [LeaseRequest(job.id, later.scheduled_at, LEASE, starts_at=now - SECOND)], "w1", now
    )
    assert result.run is not None and result.run.started_at == now and result.run.lease_expires_at == now + LEASE


def test_get_jobs_and_job_marks_read_many_jobs_at_once(engine, clock):
    # Given three jobs, one of them deleted, one with text that JSON escapes, and one id that names no job
    store = engine.store
    jobs = [make_job(OWNER, clock, shards=store.shards) for _ in range(3)]
    jobs[1] = jobs[1].model_copy(update={"payload": {"text": 'naïve "quoted" \\ 日本 }]', "n": [1, None]}})
    for job in jobs:
        store.create_job(job)
    deleted = store.update_job(
        jobs[2].model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), jobs[2].version
    )
    ids = [jobs[0].id, jobs[1].id, jobs[2].id, "job_missing", jobs[0].id]
    # When a worker reads them in one call
    found = store.get_jobs(ids)
    marks = store.job_marks(ids)
    # Then every existing job comes back once, as get_job reads it, and the marks follow the versions
    assert found == {job.id: store.get_job(job.id) for job in jobs}
    assert marks == {job.id: JobMark(found[job.id].status, found[job.id].version) for job in jobs}
    assert marks[jobs[2].id] == JobMark(JobStatus.DELETED, deleted.version)
    assert store.get_jobs([]) == {} and store.job_marks([]) == {}
    # A change moves the mark
    store.update_job(found[jobs[0].id].model_copy(update={"name": "renamed"}), found[jobs[0].id].version)
    assert store.job_marks([jobs[0].id])[jobs[0].id].version == found[jobs[0].id].version + 1


def test_held_runs_tells_which_leases_the_caller_still_holds(engine, clock):
    # Given four runs leased by w1, one of them then cancelled, one taken over by w2 after expiry
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    store.create_job(job)
    now = clock.now_ms()
    runs = [make_run(job, now - i * SECOND, clock) for i in range(4)]
    assert store.insert_runs(runs) == [True] * 4
    leases = store.lease_runs([LeaseRequest(r.job_id, r.scheduled_at, LEASE) for r in runs], "w1", now)
    held = [lease.run for lease in leases]
    assert all(run is not None for run in held)
    cancelled = held[1]
    assert cancelled is not None
    store.transition_run(cancelled, RunChange(RunState.CANCELLED, now, now, finished_at=now, note="cancelled"))
    clock.advance(LEASE + SECOND)
    [takeover] = store.lease_runs([LeaseRequest(runs[2].job_id, runs[2].scheduled_at, LEASE)], "w2", clock.now_ms())
    assert takeover.outcome is LeaseOutcome.LEASED
    holds = [Hold(r.job_id, r.scheduled_at, "w1", 1) for r in runs]
    holds.append(Hold(job.id, now - 9 * SECOND, "w1", 1))  # no such run
    holds.append(Hold(runs[3].job_id, runs[3].scheduled_at, "w1", 2))  # another attempt
    # When w1 asks which it still holds
    flags = store.held_runs(holds)
    # Then only the untouched leases (expired or not) are its own
    assert flags == [True, False, False, True, False, False]
    assert store.held_runs([]) == []


def _port(engine, clock):
    from punctual.execution.batch import Port
    from punctual.execution.options import ExecutionOptions
    from punctual.runs.alerts import LogAlerter

    options = ExecutionOptions(lease_margin_s=1, prelease_s=2)
    return Port(engine.store, engine.queue, engine.finish_and_ack, clock, "w1", options, LogAlerter())


def test_a_pre_leased_run_honours_at_its_instant_what_happened_meanwhile(engine, clock):
    from punctual.execution import batch
    from punctual.execution.options import Outcome
    from punctual.model import HttpTarget, Overlap
    from punctual.port import Dispatch
    from punctual.runs.cancel import cancellation
    from tests.contract.factories import drain

    # Given five jobs with a run due in two seconds, one of them with overlap forbid, all received early
    store = engine.store
    now = clock.now_ms()
    at = now + 2 * SECOND
    jobs = [make_job(OWNER, clock, shards=store.shards) for _ in range(4)]
    jobs.append(make_job(OWNER, clock, shards=store.shards, overlap=Overlap.FORBID))
    for job in jobs:
        store.create_job(job)
    runs = [make_run(job, at, clock) for job in jobs]
    assert store.insert_runs(runs) == [True] * 5
    engine.queue.send([Dispatch(run.run_id, at) for run in runs])
    deliveries = sorted(drain(engine.queue), key=lambda d: [r.run_id for r in runs].index(d.run_id))
    port = _port(engine, clock)
    # When the worker pre-leases them for their instant
    prepared = batch.prepare(port, deliveries, starts_at=at)
    # Then the four that allow overlap are held from their instant on; the forbid one waits for it
    assert [held.run.run_id for held in prepared.leased] == [run.run_id for run in runs[:4]]
    assert all(held.run.started_at == at for held in prepared.leased)
    assert [d.run_id for d in prepared.later] == [runs[4].run_id] and not prepared.settled
    # When, before the instant, job 0 is deleted, job 1 gets a new target and run 2 is cancelled
    deleted = store.get_job(jobs[0].id)
    store.update_job(deleted.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), deleted.version)
    replaced = store.get_job(jobs[1].id)
    new_target = HttpTarget(url="https://example.com/v2")
    store.update_job(replaced.model_copy(update={"target": new_target}), replaced.version)
    held_run = store.get_run(jobs[2].id, at)
    store.transition_run(held_run, cancellation(now + SECOND, "cancelled by its owner"))
    clock.advance(2 * SECOND)
    rechecked = batch.recheck(port, prepared.leased)
    # Then only runs 1 (with the job as it is now) and 3 are executed; run 0 is cancelled, run 2 left alone
    assert [(held.run.run_id, held.job.target) for held in rechecked.leased] == [
        (runs[1].run_id, new_target),
        (runs[3].run_id, jobs[3].target),
    ]
    settled = {delivery.run_id: outcome for delivery, outcome in rechecked.settled}
    assert settled == {runs[0].run_id: Outcome.CANCELLED, runs[2].run_id: Outcome.LEASE_LOST}
    assert store.get_run(jobs[0].id, at).state is RunState.CANCELLED
    assert store.get_run(jobs[2].id, at).state is RunState.CANCELLED
    # and the cancelled run's message is gone: three stay (two executing, one left for redelivery)
    assert engine.queue.depth() == 4
