"""Replay (``punctual.jobs.replay``) on both engines: which runs qualify, what a replay writes and
sends, the bound, and that replayed runs go through the owner's limits like any run (5,000 of them
on the embedded engine, fewer on moto)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from punctual.errors import InvalidInput, JobNotFound, TooManyRuns
from punctual.execution.options import Outcome
from punctual.execution.worker import Worker
from punctual.jobs import replay
from punctual.jobs.replay import ReplayQuery, replay_runs
from punctual.model import JobStatus, Run, RunState, Trigger
from punctual.port import Engine, Tenant
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import UNLIMITED, LimitCache
from tests.contract.factories import MINUTE, SECOND, drain, make_job, make_run
from tests.contract.test_worker import OK, OPTIONS, OWNER, Scripted, process
from tests.faults import rate_windows

pytestmark = pytest.mark.contract

DEAD_ONLY = frozenset({RunState.DEAD, RunState.FAILED})


def ended_runs(engine: Engine, clock: Any, job: Any, count: int, state: RunState, start: int) -> list[Run]:
    runs = [
        make_run(job, start + i * SECOND, clock, state=state, attempt=1, finished_at=start + i * SECOND + 10)
        for i in range(count)
    ]
    assert engine.store.insert_runs(runs) == [True] * count
    return runs


def new_job(engine: Engine, clock: Any, owner: str = OWNER, **fields: Any) -> Any:
    job = make_job(owner, clock, shards=engine.store.shards, **fields)
    engine.store.create_job(job)
    return job


def test_a_replay_starts_one_linked_run_per_original_in_the_range_and_state(engine, clock):
    # Given two jobs with dead runs in the range, and runs outside it or in another state
    start = clock.now_ms() - 60 * MINUTE
    first, second = new_job(engine, clock), new_job(engine, clock)
    dead = ended_runs(engine, clock, first, 3, RunState.DEAD, start) + ended_runs(
        engine, clock, second, 2, RunState.FAILED, start + 500
    )
    ended_runs(engine, clock, first, 1, RunState.SUCCEEDED, start + 10 * SECOND)
    ended_runs(engine, clock, second, 1, RunState.DEAD, start + 30 * MINUTE)  # after 'to'
    new_job(engine, clock, owner="someone-else")  # another owner's jobs are never looked at
    query = ReplayQuery(since=start, until=start + 20 * MINUTE, states=DEAD_ONLY)
    now = clock.now_ms()
    # When a dry run asks: the qualifying runs, oldest first, and nothing written or sent
    dry = replay_runs(engine.store, engine.queue, OWNER, query, now, dry_run=True)
    assert [r.run_id for r in dry.originals] == [r.run_id for r in sorted(dead, key=lambda r: r.scheduled_at)]
    assert dry.runs == [] and engine.queue.receive(10, 60) == []
    # When it replays: one new run each, trigger replay, naming its original, due now, sent
    done = replay_runs(engine.store, engine.queue, OWNER, query, now)
    assert sorted(r.replay_of or "" for r in done.runs) == sorted(r.run_id for r in dead)
    for run in done.runs:
        stored = engine.store.get_run(run.job_id, run.scheduled_at)
        assert (stored.trigger, stored.state, stored.replay_of) == (Trigger.REPLAY, RunState.SCHEDULED, run.replay_of)
        assert now <= stored.scheduled_at < now + 10
    assert sorted(d.run_id for d in drain(engine.queue)) == sorted(r.run_id for r in done.runs)
    # and only the jobs named, when named
    only = ReplayQuery(since=start, until=start + 20 * MINUTE, states=DEAD_ONLY, job_ids=(second.id,))
    assert {r.job_id for r in replay_runs(engine.store, engine.queue, OWNER, only, now, dry_run=True).originals} == {
        second.id
    }


def test_a_replay_beyond_its_bound_or_of_another_owners_job_is_refused_and_writes_nothing(engine, clock, monkeypatch):
    start = clock.now_ms() - 60 * MINUTE
    job = new_job(engine, clock)
    ended_runs(engine, clock, job, 4, RunState.DEAD, start)
    monkeypatch.setattr(replay, "MAX_REPLAY", 3)
    query = ReplayQuery(since=start, until=clock.now_ms(), states=DEAD_ONLY)
    with pytest.raises(TooManyRuns) as refused:
        replay_runs(engine.store, engine.queue, OWNER, query, clock.now_ms())
    assert refused.value.field == "to"
    with pytest.raises(InvalidInput):
        replay_runs(engine.store, engine.queue, OWNER, ReplayQuery(start, start, DEAD_ONLY), clock.now_ms())
    foreign = new_job(engine, clock, owner="someone-else")
    with pytest.raises(JobNotFound):
        replay_runs(engine.store, engine.queue, OWNER, ReplayQuery(start, start + 1, DEAD_ONLY, (foreign.id,)), 0)
    # an owner with more jobs than one call looks in names them
    monkeypatch.setattr(replay, "_PAGE", 1)
    monkeypatch.setattr(replay, "MAX_SCANNED_JOBS", 1)
    new_job(engine, clock)
    with pytest.raises(InvalidInput) as many:
        replay_runs(engine.store, engine.queue, OWNER, ReplayQuery(start, start + 1, DEAD_ONLY), clock.now_ms())
    assert many.value.field == "job_ids"
    assert engine.queue.receive(10, 60) == []
    assert [r.trigger for r in engine.store.list_runs(job.id, _all()).items] == [Trigger.SCHEDULE] * 4


def _all() -> Any:
    from punctual.port import RunQuery

    return RunQuery(limit=100)


@pytest.mark.parametrize("engine", ["embedded", "aws"], indirect=True)
def test_replayed_runs_keep_to_the_owners_rate_limit(engine, engine_kind, clock):
    # Given an owner with 5,000 dead runs (40 on moto) and a limit of 100 starts a minute (10 on moto)
    count, rate = (5_000, 100) if engine_kind == "embedded" else (40, 10)
    jobs = [new_job(engine, clock, timeout_s=5) for _ in range(4)]
    start = clock.now_ms() - 24 * 60 * MINUTE
    for index, job in enumerate(jobs):
        ended_runs(engine, clock, job, count // len(jobs), RunState.DEAD, start + index)
    engine.store.put_tenant(Tenant(owner=OWNER, max_runs_per_minute=rate))
    # When they are all replayed at once
    query = ReplayQuery(since=start, until=clock.now_ms(), states=DEAD_ONLY)
    done = replay_runs(engine.store, engine.queue, OWNER, query, clock.now_ms())
    assert len(done.runs) == count
    # and a worker takes every message of them in (a job's replays are due a millisecond apart)
    clock.advance(2 * SECOND)
    targets = Scripted(OK)
    gate = Gate(engine.store, LimitCache(engine.store, UNLIMITED, clock, ttl_ms=0), clock, rng=random.Random(7))
    w = Worker(engine, clock, targets=lambda: targets, options=OPTIONS, worker_id="w1", gate=gate)
    outcomes = process(w, drain(engine.queue, visibility_s=60, max_rounds=count // 10 + 5))
    # Then no more than the limit started; the rest wait, scheduled, no attempt used, nothing failed
    started = len(targets.calls)
    assert 0 < started <= rate
    assert outcomes.count(Outcome.SUCCEEDED) == started
    assert outcomes.count(Outcome.THROTTLED) == count - started
    waiting = [engine.store.get_run(r.job_id, r.scheduled_at) for r in done.runs[-5:]]
    assert all(r.state is RunState.SCHEDULED and r.attempt == 0 and r.note for r in waiting)
    assert all(job.status is JobStatus.ACTIVE for job in engine.store.get_jobs([j.id for j in jobs]).values())
    if engine_kind == "aws":
        return  # moto's queue runs on real time: the minute that follows is the embedded engine's
    # And over the next minute (the manual clock stepped a second or two at a time) the backlog
    # starts as its turns come: never more than the limit in any 60 s window, and nearly all of it
    due = clock.now_ms()
    while clock.now_ms() < due + 61 * SECOND:
        clock.advance(SECOND)
        deliveries = drain(engine.queue, visibility_s=60, max_rounds=count // 10 + 5)
        clock.set(max([clock.now_ms(), *(d.not_before for d in deliveries)]))  # each message's instant
        if deliveries:
            process(w, deliveries)
    starts = [r.started_at for r in engine.store.get_runs([(r.job_id, r.scheduled_at) for r in done.runs]).values()]
    starts = [at for at in starts if at is not None]
    assert rate_windows.most_in_any_window(starts) <= rate
    assert rate_windows.count_in(starts, due) >= rate_windows.floor_for(rate)
