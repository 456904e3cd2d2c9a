"""Claim lag on both engines: how long the oldest due job that no claim has taken has been waiting.
The scheduler reads it from the first job of each shard's first page, which the due index already
lists oldest first, so measuring it costs no extra read."""

from __future__ import annotations

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock, to_datetime
from punctual.port import Engine
from punctual.scheduling.claim import claim_page
from punctual.scheduling.scheduler import Scheduler
from tests.contract.factories import SECOND, make_job

pytestmark = pytest.mark.contract


def _due(engine: Engine, clock: ManualClock, *, shard: int, ago_ms: int) -> None:
    at = clock.now_ms() - ago_ms  # a one-time job, due at ``at``
    job = make_job("owner-a", clock, shards=engine.store.shards, shard=shard, run_at=to_datetime(at), next_run_at=at)
    engine.store.create_job(job)


def _lag(scheduler: Scheduler) -> float:
    assert isinstance(scheduler.metrics, m.InMemoryMetrics)
    return scheduler.metrics.gauges[m.CLAIM_LAG_MS]


def test_claim_lag_is_the_oldest_waiting_job_over_the_owned_shards(engine: Engine, clock: ManualClock) -> None:
    # Given jobs left unclaimed for 10 s in shard 0 and for 40 s in shard 1, and one due soon in shard 2
    _due(engine, clock, shard=0, ago_ms=10 * SECOND)
    _due(engine, clock, shard=1, ago_ms=40 * SECOND)
    _due(engine, clock, shard=1, ago_ms=20 * SECOND)
    _due(engine, clock, shard=2, ago_ms=-2 * SECOND)  # within the lookahead: not late
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics())
    # When a scheduler owning every shard ticks
    stats = scheduler.tick()
    # Then the lag it reports is the oldest one's wait, and it claimed them all
    assert (stats.lag_ms, _lag(scheduler)) == (40 * SECOND, 40 * SECOND)
    assert stats.dispatched == 4
    # and once they are claimed, nothing waits: the next tick reports 0
    clock.advance(SECOND)
    scheduler.tick()
    assert _lag(scheduler) == 0


def test_a_page_of_jobs_not_yet_due_has_no_lag(engine: Engine, clock: ManualClock) -> None:
    _due(engine, clock, shard=0, ago_ms=-3 * SECOND)
    stats = claim_page(engine.store, engine.queue, 0, clock.now_ms(), lookahead_ms=5 * SECOND)
    assert (stats.pages, stats.due, stats.lag_ms) == (1, 1, 0)


def test_an_idle_scheduler_reports_zero_lag_not_silence(engine: Engine, clock: ManualClock) -> None:
    # Silence is what the claim lag alarm breaches on: an idle, healthy scheduler must still report.
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics())
    scheduler.tick()
    assert _lag(scheduler) == 0
