"""When a job last ran (the API's ``last_run_at``, issue 31 item 3), on both engines.

``last_run_at`` is the scheduled time of the job's newest run due by now that was not cancelled,
whatever created it: the scheduler's claim, a trigger, a dependency release
(``punctual.jobs.runs.last_run_times``). The
newest run is read among the runs (``Store.newest_run_times``), so no run writes anything more to
find it: a trigger and a release leave the job's record (and its version) untouched. A run the
scheduler claimed ahead of its instant counts from its instant.
"""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.dependencies.release import release_dependents
from punctual.jobs import service
from punctual.jobs.runs import last_run_times, trigger_job
from punctual.model import DependsOn, HttpTarget, JobSpec, RunState, Trigger
from punctual.port import Engine
from punctual.scheduling.claim import claim_page
from tests.contract.factories import SECOND, make_job, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-last-run"
HTTP = HttpTarget(url="https://example.com/hook")


def test_a_claimed_a_triggered_and_a_released_run_each_move_last_run_at(engine: Engine, clock: ManualClock) -> None:
    store, queue = engine.store, engine.queue
    spec = JobSpec(name="extract", schedule="* * * * *", target=HTTP)
    extract = service.create_job(store, OWNER, spec, clock.now_ms()).job
    depends = DependsOn.model_validate({"jobs": [extract.id], "when": "succeeded"})
    load = service.create_job(store, OWNER, JobSpec(name="load", depends_on=depends, target=HTTP), clock.now_ms()).job
    assert last_run_times(store, [extract, load], clock.now_ms()) == {extract.id: None, load.id: None}
    assert store.newest_run_times([extract.id, load.id], clock.now_ms()) == {}

    # the schedule: the scheduler's claim, a second ahead of the instant, counts from the instant
    assert extract.next_run_at is not None
    clock.set(extract.next_run_at - SECOND)
    claim_page(store, queue, extract.due_shard, clock.now_ms(), lookahead_ms=2 * SECOND)
    claimed = store.get_job(extract.id)
    assert claimed.last_run_at == extract.next_run_at  # the scheduler's mark is ahead: not yet a run that was due
    assert last_run_times(store, [claimed], clock.now_ms()) == {extract.id: None}
    clock.advance(SECOND)
    assert last_run_times(store, [claimed], clock.now_ms()) == {extract.id: extract.next_run_at}

    # a trigger: the job's record is not written (its version and the scheduler's mark stay)
    clock.advance(10 * SECOND)
    manual = trigger_job(store, queue, OWNER, extract.id, clock.now_ms())
    assert store.get_job(extract.id) == claimed
    assert manual.scheduled_at - clock.now_ms() in (0, 1)  # off a whole second (a schedule's instant)
    assert last_run_times(store, [claimed], manual.scheduled_at) == {extract.id: manual.scheduled_at}

    # a dependency release, offered as the worker does when the upstream run ends
    clock.advance(SECOND)
    done = make_run(extract, manual.scheduled_at + 1, clock, state=RunState.SUCCEEDED, finished_at=clock.now_ms())
    assert store.insert_runs([done.model_copy(update={"trigger": Trigger.MANUAL})]) == [True]
    [released] = release_dependents(store, queue, store.get_job(extract.id), done, clock.now_ms())
    assert released.job_id == load.id and released.trigger is Trigger.DEPENDENCY
    assert store.get_job(load.id) == load
    now = clock.now_ms()
    expected = {extract.id: done.scheduled_at, load.id: released.scheduled_at}
    assert last_run_times(store, [claimed, load], now) == expected
    assert store.newest_run_times([load.id, extract.id, load.id], now) == {
        extract.id: done.scheduled_at,
        load.id: released.scheduled_at,
    }


def test_the_schedulers_mark_answers_once_the_runs_are_gone(engine: Engine, clock: ManualClock) -> None:
    # retention removed the runs (or they were never kept): the scheduler's own mark still says when
    job = make_job(OWNER, clock, shards=engine.store.shards, last_run_at=clock.now_ms() - 60 * SECOND)
    engine.store.create_job(job)
    assert last_run_times(engine.store, [job], clock.now_ms()) == {job.id: job.last_run_at}


def test_a_cancelled_run_is_not_the_last_run(engine: Engine, clock: ManualClock) -> None:
    # Given a job whose newest runs were cancelled (skipped instants) after one that succeeded, and a
    # job whose every run was cancelled although the scheduler's mark names its newest instant
    store, now = engine.store, clock.now_ms()
    ran = make_job(OWNER, clock, shards=store.shards, last_run_at=now - 5 * SECOND)
    skipped = make_job(OWNER, clock, shards=store.shards, last_run_at=now - 5 * SECOND)
    for job in (ran, skipped):
        store.create_job(job)
    runs = [make_run(ran, now - 9 * SECOND, clock, state=RunState.SUCCEEDED, finished_at=now - 8 * SECOND)]
    runs += [
        make_run(job, now - k * SECOND, clock, state=RunState.CANCELLED) for k in (7, 6, 5) for job in (ran, skipped)
    ]
    assert store.insert_runs(runs) == [True] * len(runs)
    # Then the last run is the newest one that was not cancelled, and none while each was
    assert store.newest_run_times([ran.id, skipped.id], now) == {ran.id: now - 9 * SECOND, skipped.id: None}
    assert last_run_times(store, [ran, skipped], now) == {ran.id: now - 9 * SECOND, skipped.id: None}
    # and a run created after them counts again, whatever its state
    clock.advance(SECOND)
    manual = trigger_job(store, engine.queue, OWNER, skipped.id, clock.now_ms())
    assert last_run_times(store, [skipped], manual.scheduled_at) == {skipped.id: manual.scheduled_at}
