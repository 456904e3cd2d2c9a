"""The scheduler Lambda handler on moto: one invocation claims due jobs each second as instance i of
its generation (the event's minute), releases its shard leases when it stops, and refuses a bad event."""

from __future__ import annotations

from datetime import UTC, datetime

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


def _event_time(minute: int) -> str:
    """EventBridge's ``time`` of a scheduled event for ``minute`` (minutes since the epoch)."""
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_invocation_claims_due_jobs_and_hands_its_shards_over_when_it_stops(engine: Engine) -> None:
    # Given two one-time jobs due now
    now = SystemClock().now_ms()
    jobs = list(bench_jobs(2, now=now, due_at=now - 1_000, shards=engine.store.shards, cron=None))
    for job in jobs:
        engine.store.create_job(job)
    handler = load("scheduler")
    minute = now // 60_000
    # When instance 0 of 1 is invoked for this minute (the rule's input: the event's time)
    result = handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute)}, ShortContext())
    # Then both runs exist and were dispatched, and the jobs completed
    assert result["dispatched"] == 2
    for job in jobs:
        assert [r.scheduled_at for r in engine.store.list_runs(job.id, RunQuery()).items] == [now - 1_000]
    # and its shard leases, taken under the instance's name of this generation, were released when
    # it stopped with no successor: any instance may take them at once
    leases = engine.store.shard_leases()
    assert {lease.owner for lease in leases} == {f"scheduler-0@{minute}"}
    assert len(leases) == engine.store.shards
    assert all(lease.expires_at < SystemClock().now_ms() for lease in leases)
    assert ids.shard_of(jobs[0].id, engine.store.shards) in {lease.shard for lease in leases}
    # When the next minute's invocation comes, it holds them, each under a new epoch
    epochs = {lease.shard: lease.epoch for lease in leases}
    handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute + 1)}, ShortContext())
    after = engine.store.shard_leases()
    assert {lease.owner for lease in after} == {f"scheduler-0@{minute + 1}"}
    assert {lease.shard: lease.epoch for lease in after} == {shard: epoch + 1 for shard, epoch in epochs.items()}


def test_a_bad_event_is_refused_with_a_clear_error(engine: Engine) -> None:
    handler = load("scheduler")
    with pytest.raises(InvalidInput, match="instance must be < instances"):
        handler.handler({"instance": 3, "instances": 2}, ShortContext())
    assert engine.store.shard_leases() == []
    with pytest.raises(InvalidInput, match="has no offset"):
        handler.handler({"instance": 0, "instances": 1, "time": "2026-12-01T12:34:00"}, ShortContext())
