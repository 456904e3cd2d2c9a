"""A claim window's marker stands for its runs in the ``open`` index (``engines.aws.windows``): what
the reaper, the deadline watch and GET /stats read of open runs still sees every window run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, ensure_resources
from punctual.engines.aws.windows import is_marker
from punctual.model import RunState
from punctual.port import LeaseOutcome, RunChange
from punctual.scheduling.planning import PlanOptions, plan, window_end
from tests.contract.factories import MINUTE, attempt, due_view, make_job

pytestmark = pytest.mark.integration

T0 = 1_800_000_000_000  # a whole minute
WINDOW = PlanOptions(window_ms=10 * MINUTE)


@pytest.fixture
def engine() -> Iterator[AwsEngine]:
    with mock_aws():
        settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="win", stats_counters=False)
        engine = AwsEngine(ensure_resources(settings), clock=ManualClock(T0), serialize=True)
        yield engine
        engine.close()


def _open_rows(engine: AwsEngine) -> list[str]:
    items = engine.clients.dynamodb.scan(TableName=engine.store.runs_table, IndexName="open")["Items"]
    return sorted(item["job_id"]["S"] for item in items)


def test_window_runs_are_watched_through_their_marker_until_they_end(engine: AwsEngine) -> None:
    store, clock = engine.store, ManualClock(T0)
    job = make_job("owner-w", clock, shards=store.shards, shard=1, next_run_at=T0)
    while window_end(job.id, T0, 10 * MINUTE) < T0 + 3 * MINUTE:  # a window of 3 times or more
        job = make_job("owner-w", clock, shards=store.shards, shard=1, next_run_at=T0)
    store.create_job(job)
    times = list(range(T0, window_end(job.id, T0, 10 * MINUTE), MINUTE))
    # the claim's inserts, repeated (a claim that died before its advance is repeated): one marker
    claimed = plan(due_view(job, store), T0 - 3_000, WINDOW)
    assert [run.scheduled_at for run in claimed.runs] == times
    assert store.insert_runs(claimed.runs, window=True) == [True] * len(times)
    assert store.insert_runs(claimed.runs, window=True) == [False] * len(times)
    [marker] = _open_rows(engine)
    assert is_marker(marker) and job.id in marker  # the runs have no entries of their own
    # every run but the first is leased and finished; the first one's message was lost
    for at in times[1:]:
        assert store.lease_run(job.id, at, "w1", at, 60_000).outcome is LeaseOutcome.LEASED
        change = RunChange(RunState.SUCCEEDED, at, at, append=attempt(1, "w1", at, at), finished_at=at)
        store.finish_run(job.id, at, "w1", 1, change)
    # while the window's last time is young, the reaper waits for it; then it finds the lost run
    young = times[-1] + 30_000
    assert store.past_deadline_runs(young, young - 60_000, 500) == []
    now = times[-1] + 3 * MINUTE
    [lost] = store.past_deadline_runs(now, now - 60_000, 500)
    assert (lost.scheduled_at, lost.state) == (times[0], RunState.SCHEDULED)
    assert _open_rows(engine) == [marker]  # kept: a run it names is open
    # the deadline watch and GET /stats see the window's runs (those due) as they see runs
    assert (job.id, times[0]) in store.stale_open_runs(now - 60_000, 500)
    counts = store.open_runs("owner-w", now, 100)
    assert counts is not None and (counts.waiting, counts.executing) == (1, 0)
    # once it ends, the next pass closes the marker, and nothing of the window is read again
    assert store.lease_run(job.id, times[0], "w1", now, 60_000).outcome is LeaseOutcome.LEASED
    change = RunChange(RunState.SUCCEEDED, now, now, append=attempt(1, "w1", now, now), finished_at=now)
    store.finish_run(job.id, times[0], "w1", 1, change)
    assert store.past_deadline_runs(now, now - 60_000, 500) == []
    assert _open_rows(engine) == []
    assert store.stale_open_runs(now - 60_000, 500) == []
