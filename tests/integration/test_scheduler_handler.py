"""The scheduler Lambda handler on moto: one invocation claims due jobs each second as instance i,
keeps its shard leases for the next invocation of the same instance, and refuses a bad event."""

from __future__ import annotations

import pytest

from punctual import ids
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.errors import InvalidInput
from punctual.port import Engine, RunQuery
from tests.integration.conftest import Context, load

pytestmark = pytest.mark.integration


class ShortContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 6_500  # minus the 5 s safety margin: the invocation ticks for about 1.5 s


def test_an_invocation_claims_due_jobs_and_keeps_its_leases_for_the_next(engine: Engine) -> None:
    # Given two one-time jobs due now
    now = SystemClock().now_ms()
    jobs = list(bench_jobs(2, now=now, due_at=now - 1_000, shards=engine.store.shards, cron=None))
    for job in jobs:
        engine.store.create_job(job)
    handler = load("scheduler")
    # When instance 0 of 1 is invoked
    result = handler.handler({"instance": 0, "instances": 1}, ShortContext())
    # Then both runs exist and were dispatched, and the jobs completed
    assert result["dispatched"] == 2
    for job in jobs:
        assert [r.scheduled_at for r in engine.store.list_runs(job.id, RunQuery()).items] == [now - 1_000]
    # and its shard leases are kept under the instance's stable name, for the next invocation
    leases = engine.store.shard_leases()
    assert {lease.owner for lease in leases} == {"scheduler-0"}
    assert len(leases) == engine.store.shards
    epochs = {lease.shard: lease.epoch for lease in leases}
    handler.handler({"instance": 0, "instances": 1}, ShortContext())
    assert {lease.shard: lease.epoch for lease in engine.store.shard_leases()} == epochs  # renewed, not re-taken
    assert ids.shard_of(jobs[0].id, engine.store.shards) in epochs


def test_a_bad_event_is_refused_with_a_clear_error(engine: Engine) -> None:
    handler = load("scheduler")
    with pytest.raises(InvalidInput, match="instance must be < instances"):
        handler.handler({"instance": 3, "instances": 2}, ShortContext())
    assert engine.store.shard_leases() == []
