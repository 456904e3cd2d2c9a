"""The aws engine deployed without the runs ``open`` index (Settings.open_index=False).

The reaper then finds runs past their deadline by sweeping the runs table, a bounded number of
Scan pages per pass, continuing where the last pass stopped (docs/decisions/0069); the same sweep
hands the deadline alerts (``deadline_s``) the old open runs it saw.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, ensure_resources
from punctual.model import AlertKind, RunState
from punctual.port import RunChange
from punctual.reaping.deadlines import watch_deadlines
from punctual.reaping.reaper import reap_once
from punctual.runs.alerts import LogAlerter
from tests.contract.factories import MINUTE, SECOND, drain, make_job, make_run
from tests.contract.test_execution import RecordingAlerter

pytestmark = pytest.mark.integration

T0 = 1_800_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def engine(clock: ManualClock) -> Iterator[AwsEngine]:
    with mock_aws():
        settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="lean", open_index=False)
        engine = AwsEngine(ensure_resources(settings), clock=clock)
        yield engine
        engine.close()


def test_the_runs_table_has_no_index(engine: AwsEngine) -> None:
    table = engine.clients.dynamodb.describe_table(TableName=engine.store.runs_table)["Table"]
    assert not table.get("GlobalSecondaryIndexes")
    jobs = engine.clients.dynamodb.describe_table(TableName=engine.store.jobs_table)["Table"]
    assert {i["IndexName"] for i in jobs["GlobalSecondaryIndexes"]} == {"due", "by_owner", "by_calendar"}


def test_the_sweep_finds_open_runs_past_their_deadline(engine: AwsEngine, clock: ManualClock) -> None:
    store = engine.store
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    runs = [make_run(job, T0 - 10 * MINUTE + i * SECOND, clock, deadline_at=T0 - MINUTE + i) for i in range(5)]
    store.insert_runs(runs)
    fresh = make_run(job, T0, clock, deadline_at=T0 + MINUTE)  # not overdue
    store.insert_runs([fresh])
    store.transition_run(runs[0], RunChange(state=RunState.CANCELLED, now=T0, deadline_at=T0))  # terminal

    found = store.past_deadline_runs(T0, T0, 100)
    assert [r.scheduled_at for r in found] == [r.scheduled_at for r in runs[1:]]  # most overdue first
    assert len(store.past_deadline_runs(T0, T0, 2)) == 2
    assert store.past_deadline_runs(T0, T0 - 20 * MINUTE, 100) == []  # scheduled_before bounds it


def test_a_lost_run_is_resent_by_the_reaper_without_the_index(engine: AwsEngine, clock: ManualClock) -> None:
    # Given a run whose message was lost (inserted, never sent)
    job = make_job("alice", clock, shards=engine.store.shards)
    engine.store.create_job(job)
    lost = make_run(job, T0, clock, deadline_at=T0 + 2 * MINUTE)
    engine.store.insert_runs([lost])

    # When the reaper passes after its deadline
    clock.advance(5 * MINUTE)
    stats = reap_once(engine.store, engine.queue, engine.dead_letters, LogAlerter(), clock)

    # Then it was found by the sweep and resent
    assert stats.redispatched == 1
    assert [m.run_id for m in drain(engine.queue)] == [lost.run_id]


def test_the_sweep_pages_through_the_table_across_passes(engine: AwsEngine, clock: ManualClock) -> None:
    store = engine.store
    store.sweep_pages = 1
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    store.insert_runs([make_run(job, T0 - MINUTE, clock, deadline_at=T0 - MINUTE)])
    # one page per pass; moto returns the whole (small) table in one page, so a pass ends at the
    # table's end and the next one starts over: the run is found on every pass
    for _ in range(3):
        assert len(store.past_deadline_runs(T0, T0, 10)) == 1


def test_an_open_run_past_its_jobs_deadline_alerts_through_the_sweep(engine: AwsEngine, clock: ManualClock) -> None:
    # Given a job with deadline_s 60 and two runs still running under live leases (so not lost):
    # one 5 minutes after its time, one 30 s after (not past its deadline)
    store, alerter = engine.store, RecordingAlerter()
    job = make_job("alice", clock, shards=store.shards, deadline_s=60)
    store.create_job(job)
    slow = make_run(job, T0 - 5 * MINUTE, clock, state=RunState.RUNNING, deadline_at=T0 + 60 * MINUTE)
    young = make_run(job, T0 - 30 * SECOND, clock, state=RunState.RUNNING, deadline_at=T0 + 60 * MINUTE)
    store.insert_runs([slow, young])
    assert watch_deadlines(store, alerter, T0) == 0  # no index to read them from, and no sweep yet
    # When the reaper's pass sweeps the runs table, then its tick watches deadlines
    assert reap_once(store, engine.queue, engine.dead_letters, alerter, clock).examined == 0
    # Then the slow run alerts (the young one is not a minute old: the sweep leaves it)
    assert watch_deadlines(store, alerter, T0) == 1
    assert [(a.kind, a.run_id) for a in alerter.published] == [(AlertKind.DEADLINE_MISSED, slow.run_id)]
    # each key is handed out once: the next watch reads nothing until the sweep passes it again
    assert store.stale_open_runs(T0, 100) == []
