"""Pre-leasing on both engines: runs held for their instant cost nothing in the store (the
message's visibility is the reservation), and at the instant the lease decides with the job as the
user left it: a paused job, a schedule that lost the instant, a deleted job, a changed timeout."""

from __future__ import annotations

import pytest

from punctual.model import JobStatus, RunState, Trigger, Withdrawal
from punctual.port import JobMark, LeaseOutcome, LeaseRequest
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-prelease"
LEASE = 30 * SECOND


def test_a_withdrawn_run_is_cancelled_at_its_first_lease_and_never_leased(engine, clock):
    # Given a paused job's runs: scheduled on time, a catch-up, a manual one, a dependent one, and
    # one that already began (retrying past its backoff)
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards, status=JobStatus.PAUSED)
    store.create_job(job)
    now = clock.now_ms()
    on_time = make_run(job, now, clock)
    catchup = make_run(job, now - MINUTE, clock, trigger=Trigger.CATCHUP)
    manual = make_run(job, now - 2 * MINUTE, clock, trigger=Trigger.MANUAL)
    released = make_run(job, now - 3 * MINUTE, clock, trigger=Trigger.DEPENDENCY)
    began = make_run(job, now - 4 * MINUTE, clock, state=RunState.RETRYING, attempt=1, next_attempt_at=now)
    runs = [on_time, catchup, manual, released, began]
    assert store.insert_runs(runs) == [True] * 5
    # When a worker leases them at their instant, saying the job is paused
    requests = [LeaseRequest(job.id, r.scheduled_at, LEASE, withdrawn=Withdrawal.PAUSED) for r in runs]
    results = store.lease_runs(requests, "w1", now)
    # Then the automatic runs that never began are cancelled, never leased: no attempt, no worker
    assert [r.outcome for r in results] == [
        LeaseOutcome.SKIPPED, LeaseOutcome.SKIPPED, LeaseOutcome.LEASED, LeaseOutcome.SKIPPED, LeaseOutcome.LEASED,
    ]  # fmt: skip
    for run in (on_time, catchup, released):
        stored = store.get_run(job.id, run.scheduled_at)
        assert stored.state is RunState.CANCELLED and stored.attempt == 0 and stored.worker_id is None
        assert stored.note is not None and "paused" in stored.note
    # ... while the manual run (an explicit request) and the run that began (its retries) go on
    assert store.get_run(job.id, manual.scheduled_at).attempt == 1
    assert store.get_run(job.id, began.scheduled_at).attempt == 2
    # A schedule that lost the instant withdraws only schedule and catch-up runs
    later = [make_run(job, now + i * SECOND, clock, trigger=t) for i, t in enumerate(Trigger, start=1)]
    assert store.insert_runs(later) == [True] * len(later)
    requests = [LeaseRequest(job.id, r.scheduled_at, LEASE, withdrawn=Withdrawal.OFF_SCHEDULE) for r in later]
    outcomes = {r.trigger: res.outcome for r, res in zip(later, store.lease_runs(requests, "w1", now), strict=True)}
    assert outcomes == {
        Trigger.SCHEDULE: LeaseOutcome.SKIPPED,
        Trigger.CATCHUP: LeaseOutcome.SKIPPED,
        Trigger.MANUAL: LeaseOutcome.LEASED,
        Trigger.DEPENDENCY: LeaseOutcome.LEASED,
        Trigger.REPLAY: LeaseOutcome.LEASED,  # asked for by the user, as a manual run (docs/api.md, replay)
    }


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


def _port(engine, clock):
    from punctual.execution.batch import Port
    from punctual.execution.options import ExecutionOptions
    from punctual.runs.alerts import LogAlerter

    options = ExecutionOptions(lease_margin_s=1, prelease_s=2)
    return Port(engine.store, engine.queue, engine.finish_and_ack, clock, "w1", options, LogAlerter())


def test_held_runs_are_untouched_and_leased_at_their_instant_as_the_user_left_them(engine, clock):
    from punctual.execution import batch
    from punctual.execution.options import Outcome
    from punctual.model import HttpTarget, Overlap
    from punctual.port import Dispatch
    from tests.contract.factories import drain

    # Given six jobs with a run due in two seconds, one of them with overlap forbid, all received early
    store = engine.store
    now = clock.now_ms()
    at = now + 2 * SECOND
    jobs = [make_job(OWNER, clock, shards=store.shards) for _ in range(5)]
    jobs.append(make_job(OWNER, clock, shards=store.shards, overlap=Overlap.FORBID))
    for job in jobs:
        store.create_job(job)
    runs = [make_run(job, at, clock) for job in jobs]
    assert store.insert_runs(runs) == [True] * 6
    engine.queue.send([Dispatch(run.run_id, at) for run in runs])
    deliveries = sorted(drain(engine.queue), key=lambda d: [r.run_id for r in runs].index(d.run_id))
    port = _port(engine, clock)
    # When the worker holds them for their instant
    holding = batch.hold(port, deliveries)
    # Then nothing is written: every run is as the scheduler inserted it (no attempt, no worker)
    assert [d.run_id for d in holding.deliveries] == [run.run_id for run in runs] and not holding.settled
    assert [store.get_run(run.job_id, at) for run in runs] == [store.get_run(run.job_id, at) for run in runs]
    assert all(store.get_run(run.job_id, at).attempt == 0 for run in runs)

    # When, before the instant, job 0 is deleted, job 1 gets a new target, job 2 is paused and
    # job 3 a longer timeout
    def edit(job_id, **update):
        job = store.get_job(job_id)
        store.update_job(job.model_copy(update=update), job.version)

    edit(jobs[0].id, status=JobStatus.DELETED, next_run_at=None)
    new_target = HttpTarget(url="https://example.com/v2")
    edit(jobs[1].id, target=new_target)
    edit(jobs[2].id, status=JobStatus.PAUSED, next_run_at=None)
    edit(jobs[3].id, timeout_s=300)
    clock.advance(2 * SECOND)
    prepared = batch.prepare(port, holding.deliveries, known=holding.jobs)
    # Then runs 1, 3, 4 and 5 are leased with their jobs as they are now, run 3 for its new timeout
    leased = {held.run.run_id: held for held in prepared.leased}
    assert sorted(leased) == sorted(run.run_id for run in (runs[1], runs[3], runs[4], runs[5]))
    assert leased[runs[1].run_id].job.target == new_target
    stored = store.get_run(jobs[3].id, at)
    assert leased[runs[3].run_id].lease_ms == (300 + 1) * SECOND
    assert stored.lease_expires_at == clock.now_ms() + (300 + 1) * SECOND and stored.started_at == clock.now_ms()
    # ... and the deleted job's run is cancelled, the paused job's withdrawn: neither ever leased
    settled = {delivery.run_id: outcome for delivery, outcome in prepared.settled}
    assert settled == {runs[0].run_id: Outcome.CANCELLED, runs[2].run_id: Outcome.SKIPPED}
    for run in (runs[0], runs[2]):
        assert store.get_run(run.job_id, at).state is RunState.CANCELLED
        assert store.get_run(run.job_id, at).attempt == 0
    # and their messages are gone: four stay, with their runs executing
    assert engine.queue.depth() == 4


def test_a_lease_of_runs_read_before_is_what_rules_leased_gives_and_never_stale(engine, clock):
    from punctual import rules
    from punctual.port import RunChange

    # Given four scheduled runs read by a worker before their instant (Store.get_runs)
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    store.create_job(job)
    now = clock.now_ms()
    runs = [make_run(job, now - i * SECOND, clock) for i in range(4)]
    assert store.insert_runs(runs) == [True] * 4
    keys = [(r.job_id, r.scheduled_at) for r in runs]
    read = store.get_runs([*keys, (job.id, now - 9 * SECOND)])  # and one that does not exist
    assert read == {key: store.get_run(*key) for key in keys}
    # When, before the lease, one of them waits (its note and deadline change), one is leased by
    # another worker, and one is cancelled
    waiting = read[keys[1]]
    store.transition_run(waiting, RunChange(waiting.state, now, now + MINUTE, note="waiting: max_concurrency 1"))
    [other] = store.lease_runs([LeaseRequest(*keys[2], LEASE)], "w2", now)
    assert other.outcome is LeaseOutcome.LEASED
    gone = read[keys[3]]
    store.transition_run(gone, RunChange(RunState.CANCELLED, now, now, finished_at=now, note="cancelled"))
    # and the worker leases all four, saying how it read them
    results = store.lease_runs([LeaseRequest(*key, LEASE, seen=read[key]) for key in keys], "w1", now)
    # Then each outcome and run is the one a lease without the copy gives, as stored
    assert [r.outcome for r in results] == [
        LeaseOutcome.LEASED, LeaseOutcome.LEASED, LeaseOutcome.HELD, LeaseOutcome.FINISHED,
    ]  # fmt: skip
    assert results[0].run == rules.leased(read[keys[0]], "w1", now, LEASE) == store.get_run(*keys[0])
    assert results[1].run == store.get_run(*keys[1]) and results[1].run.note is None
    assert results[1].run.lease_expires_at == now + LEASE and results[1].run.worker_id == "w1"


def test_a_reservation_holds_a_run_for_its_instant_and_only_its_confirm_counts_an_attempt(engine, clock):
    from punctual import rules
    from punctual.port import Reservation

    # Given three scheduled runs read by worker w1
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    store.create_job(job)
    now = clock.now_ms()
    runs = [make_run(job, now + 2 * SECOND + i, clock) for i in range(3)]
    assert store.insert_runs(runs) == [True] * 3
    keys = [(r.job_id, r.scheduled_at) for r in runs]
    read = store.get_runs(keys)
    until = now + 5 * SECOND
    # When w1 reserves them until shortly after their instant
    reserved = store.reserve_runs([Reservation(read[key], until) for key in keys], "w1", now)
    # Then they stay scheduled with no attempt, reserved by w1, exactly as rules.reserved says
    for key, run in zip(keys, reserved, strict=True):
        assert run == rules.reserved(read[key], "w1", until) == store.get_run(*key)
        assert (run.state, run.attempt, run.worker_id, run.lease_expires_at) == (RunState.SCHEDULED, 0, "w1", until)
    # and another worker can neither reserve nor lease them while the reservation lasts
    assert store.reserve_runs([Reservation(read[keys[0]], until)], "w2", now) == [None]
    [held] = store.lease_runs([LeaseRequest(*keys[0], LEASE)], "w2", now)
    assert held.outcome is LeaseOutcome.HELD and held.run is not None and held.run.lease_expires_at == until
    # When w1 confirms the first at its instant (after writing the call)
    clock.advance(2 * SECOND)
    at = clock.now_ms()
    [confirmed] = store.lease_runs([LeaseRequest(*keys[0], LEASE, seen=read[keys[0]], confirm=True)], "w1", at)
    # Then its attempt begins: running, attempt 1, the lease from the confirm on
    assert confirmed.outcome is LeaseOutcome.LEASED
    assert confirmed.run == rules.leased(read[keys[0]], "w1", at, LEASE) == store.get_run(*keys[0])
    # When the reservation of the second has ended (w1 died) and w2 leases it
    clock.advance(4 * SECOND)
    later = clock.now_ms()
    [taken] = store.lease_runs([LeaseRequest(*keys[1], LEASE)], "w2", later)
    assert taken.outcome is LeaseOutcome.LEASED and taken.run is not None and taken.run.attempt == 1
    assert taken.run.worker_id == "w2" and taken.run.attempts == []  # no attempt was lost: none began
    # Then w1's late confirm is refused (no lease, no second attempt), while a confirm of an expired
    # reservation that nobody took still counts (the third)
    [late] = store.lease_runs([LeaseRequest(*keys[1], LEASE, seen=read[keys[1]], confirm=True)], "w1", later)
    assert late.outcome is LeaseOutcome.HELD and store.get_run(*keys[1]).worker_id == "w2"
    [kept] = store.lease_runs([LeaseRequest(*keys[2], LEASE, seen=read[keys[2]], confirm=True)], "w1", later)
    assert kept.outcome is LeaseOutcome.LEASED and store.get_run(*keys[2]).attempt == 1
