"""A batch of leases and finishes writes exactly what the rules say, run by run, on both engines.

The embedded engine decides the common case of a batch in one statement (engines/embedded/set_writes.py)
and the rest run by run; these tests mix both kinds in one batch and compare every result with
``rules.leased`` and ``rules.apply_change`` on the run as it was read."""

from __future__ import annotations

import pytest

from punctual import rules
from punctual.model import MAX_ATTEMPTS_KEPT, Attempt, AttemptOutcome, Overlap, RunState
from punctual.port import Beat, Finish, Hold, LeaseOutcome, LeaseRequest, RunChange
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-batch-writes"
LEASE = 30 * SECOND


def record(number: int, at: int, outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED) -> Attempt:
    return Attempt(number=number, worker_id="w1", started_at=at, finished_at=at + 5, outcome=outcome, status_code=200)


def test_a_leased_batch_matches_the_rules_run_by_run(engine, clock):
    # Given scheduled runs of an allow job, one already running, one finished, and a forbid job's run
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    forbid = make_job(OWNER, clock, shards=store.shards, overlap=Overlap.FORBID)
    store.create_job(job)
    store.create_job(forbid)
    now = clock.now_ms()
    runs = [make_run(job, now - i * SECOND, clock) for i in range(1, 5)]
    running = make_run(
        job, now - MINUTE, clock, state=RunState.RUNNING, attempt=1, worker_id="w0", lease_expires_at=now + MINUTE
    )
    done = make_run(job, now - 2 * MINUTE, clock, state=RunState.SUCCEEDED, attempt=1)
    other = make_run(forbid, now - SECOND, clock)
    assert all(store.insert_runs([*runs, running, done, other]))
    before = {
        (r.job_id, r.scheduled_at): store.get_run(r.job_id, r.scheduled_at) for r in [*runs, running, done, other]
    }
    # When one batch leases them all, the first run asked for twice
    keys = [runs[0], *runs, running, done]
    requests = [LeaseRequest(job.id, r.scheduled_at, LEASE) for r in keys]
    requests.append(LeaseRequest(forbid.id, other.scheduled_at, LEASE, Overlap.FORBID))
    results = store.lease_runs(requests, "w1", now)
    # Then each scheduled run is leased exactly as rules.leased says; the repeat and the others are refused
    outcomes = [result.outcome for result in results]
    assert outcomes == [
        LeaseOutcome.LEASED,
        LeaseOutcome.HELD,
        *[LeaseOutcome.LEASED] * 3,
        LeaseOutcome.HELD,
        LeaseOutcome.FINISHED,
        LeaseOutcome.LEASED,
    ]
    for request, result in zip(requests, results, strict=True):
        if result.outcome is LeaseOutcome.LEASED:
            expected = rules.leased(before[request.job_id, request.scheduled_at], "w1", now, LEASE)
            assert result.run == expected == store.get_run(request.job_id, request.scheduled_at)


def test_a_finished_batch_matches_the_rules_run_by_run(engine, clock):
    # Given runs leased by w1: fresh ones, one whose attempt log is full, and one lost to w2
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    store.create_job(job)
    now = clock.now_ms()
    fresh = [make_run(job, now - i * SECOND, clock) for i in range(1, 6)]
    full = make_run(job, now - MINUTE, clock, attempts=[record(n, now) for n in range(1, MAX_ATTEMPTS_KEPT + 1)])
    lost = make_run(job, now - 2 * MINUTE, clock)
    assert all(store.insert_runs([*fresh, full, lost]))
    leases = store.lease_runs([LeaseRequest(job.id, r.scheduled_at, LEASE) for r in [*fresh, full, lost]], "w1", now)
    assert all(result.outcome is LeaseOutcome.LEASED for result in leases)
    clock.advance(LEASE + SECOND)
    [takeover] = store.lease_runs([LeaseRequest(job.id, lost.scheduled_at, LEASE)], "w2", clock.now_ms())
    assert takeover.outcome is LeaseOutcome.LEASED
    held = {r.scheduled_at: store.get_run(job.id, r.scheduled_at) for r in [*fresh, full]}
    later = clock.now_ms()
    # When one batch finishes every kind of change, the first one twice
    changes = [
        RunChange(RunState.SUCCEEDED, later, later, append=record(1, later), finished_at=later),
        RunChange(
            RunState.RETRYING,
            later,
            later + MINUTE,
            append=record(1, later, AttemptOutcome.FAILED),
            next_attempt_at=later + 10 * SECOND,
        ),
        RunChange(
            RunState.FAILED,
            later,
            later,
            append=record(1, later, AttemptOutcome.FAILED),
            finished_at=later,
            note="failed on attempt 1",
        ),
        RunChange(
            RunState.DEAD,
            later,
            later,
            append=record(1, later, AttemptOutcome.TIMEOUT),
            finished_at=later,
            note="dead after 1 attempts",
        ),
        RunChange(RunState.DEAD, later, later, finished_at=later, note="buried"),  # no attempt record
        RunChange(RunState.SUCCEEDED, later, later, append=record(1, later), finished_at=later),  # the full log
    ]
    targets = [*fresh, full]
    finishes = [
        Finish(Hold(job.id, r.scheduled_at, "w1", 1), change) for r, change in zip(targets, changes, strict=True)
    ]
    repeat = Finish(Hold(job.id, fresh[0].scheduled_at, "w1", 1), changes[0])
    lost_finish = Finish(Hold(job.id, lost.scheduled_at, "w1", 1), changes[0])
    results = store.finish_runs([finishes[0], repeat, *finishes[1:], lost_finish])
    # Then each held run is finished as rules.apply_change says, the full log trimmed to its newest records
    expected = [rules.apply_change(held[f.hold.scheduled_at], f.change) for f in finishes]
    assert results[0] == expected[0] and results[2:-1] == expected[1:]
    assert [store.get_run(job.id, r.scheduled_at) for r in targets] == expected
    assert len(expected[-1].attempts) == MAX_ATTEMPTS_KEPT and expected[-1].attempts[-1].started_at == later
    # and the repeat and the lost lease are refused, leaving the run as it was
    assert results[1] is None and results[-1] is None
    assert store.get_run(job.id, lost.scheduled_at).worker_id == "w2"


def leased_batch(engine, clock, count, *, full=0):
    """``count`` runs of one job leased by w1 in one batch, the last ``full`` of them with a full
    attempt log: the job, and the runs as the lease returned them."""
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards)
    store.create_job(job)
    now = clock.now_ms()
    log = [record(n, now) for n in range(1, MAX_ATTEMPTS_KEPT + 1)]
    runs = [
        make_run(
            job, now - i * SECOND, clock, attempts=log if i > count - full else [], note="waiting: max_concurrency"
        )
        for i in range(1, count + 1)
    ]
    assert all(store.insert_runs(runs))
    results = store.lease_runs([LeaseRequest(job.id, r.scheduled_at, LEASE) for r in runs], "w1", now)
    assert all(result.outcome is LeaseOutcome.LEASED and result.run is not None for result in results)
    return job, [result.run for result in results]


def verdicts(at):
    """One change of each kind a worker writes after its target answered, at ``at``."""
    failed = AttemptOutcome.FAILED
    return [
        RunChange(RunState.SUCCEEDED, at, at, append=record(1, at), finished_at=at),
        RunChange(RunState.RETRYING, at, at + MINUTE, append=record(1, at, failed), next_attempt_at=at + 10 * SECOND),
        RunChange(RunState.FAILED, at, at, append=record(1, at, failed), finished_at=at, note="failed on attempt 1"),
        RunChange(RunState.DEAD, at, at, append=record(1, at, AttemptOutcome.TIMEOUT), finished_at=at, note="dead"),
    ]


def test_finishes_with_the_leased_runs_match_the_rules_after_heartbeats(engine, clock):
    # Given runs leased by w1, three of whose leases were extended since (the worker's copies are older)
    store = engine.store
    _job, leased = leased_batch(engine, clock, 5)
    clock.advance(10 * SECOND)
    beaten = [leased[0], leased[1], leased[4]]
    assert store.heartbeat_runs([Beat(Hold(r.job_id, r.scheduled_at, "w1", 1), clock.now_ms() + LEASE) for r in beaten])
    assert all(store.get_run(r.job_id, r.scheduled_at).lease_expires_at != r.lease_expires_at for r in beaten)
    rows = [store.get_run(r.job_id, r.scheduled_at) for r in leased]
    # When one batch finishes each with its leased copy, the last with a change that keeps the lease
    later = clock.now_ms()
    keeps_lease = RunChange(
        RunState.RETRYING, later, later + MINUTE, append=record(1, later), next_attempt_at=later, clear_lease=False
    )
    finishes = [
        Finish(Hold(r.job_id, r.scheduled_at, "w1", 1), change, None, r)
        for r, change in zip(leased, [*verdicts(later), keeps_lease], strict=True)
    ]
    results = store.finish_runs(finishes)
    # Then each result is rules.apply_change of the row as it was, and the row as it is now
    expected = [rules.apply_change(row, f.change) for row, f in zip(rows, finishes, strict=True)]
    assert results == expected == [store.get_run(r.job_id, r.scheduled_at) for r in leased]
    assert expected[-1].lease_expires_at == rows[-1].lease_expires_at != leased[-1].lease_expires_at


def test_finishes_with_the_leased_runs_skip_lost_leases_and_odd_copies(engine, clock):
    # Given runs leased by w1: one lost to w2 since, one whose log is full, one given another run's copy
    store = engine.store
    job, leased = leased_batch(engine, clock, 5, full=1)
    lost, odd, full = leased[2], leased[3], leased[4]
    assert len(full.attempts) == MAX_ATTEMPTS_KEPT
    clock.advance(LEASE + SECOND)
    [takeover] = store.lease_runs([LeaseRequest(job.id, lost.scheduled_at, LEASE)], "w2", clock.now_ms())
    assert takeover.outcome is LeaseOutcome.LEASED
    rows = {r.scheduled_at: store.get_run(job.id, r.scheduled_at) for r in leased}
    later = clock.now_ms()
    done, retry = verdicts(later)[:2]
    # When a batch finishes the lost one among held ones, all with their copies, then a batch
    # finishes the others
    first = [
        Finish(Hold(job.id, leased[0].scheduled_at, "w1", 1), done, None, leased[0]),
        Finish(Hold(job.id, lost.scheduled_at, "w1", 1), done, None, lost),
        Finish(Hold(job.id, leased[1].scheduled_at, "w1", 1), retry, None, leased[1]),
    ]
    second = [
        Finish(Hold(job.id, odd.scheduled_at, "w1", 1), done, None, leased[0]),  # not its run: read back instead
        Finish(Hold(job.id, full.scheduled_at, "w1", 1), done, None, full),
    ]
    results = [*store.finish_runs(first), *store.finish_runs(second)]
    # Then the held ones are finished as the rules say on the row as it was (the full log trimmed),
    # and the lost one is refused, left as w2 leased it
    for finish, result in zip([*first, *second], results, strict=True):
        if finish.hold.scheduled_at == lost.scheduled_at:
            assert result is None
            continue
        expected = rules.apply_change(rows[finish.hold.scheduled_at], finish.change)
        assert result == expected == store.get_run(job.id, finish.hold.scheduled_at)
    assert results[-1] is not None and len(results[-1].attempts) == MAX_ATTEMPTS_KEPT
    assert store.get_run(job.id, lost.scheduled_at) == takeover.run
