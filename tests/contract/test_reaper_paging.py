"""The reaper pages until it has caught up (issue 15 item 4), on both engines: a backlog of runs
whose messages were lost is resent in one sweep, bounded by time rather than by 500 runs a minute.
"""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.port import Engine
from punctual.reaping.reaper import Reaper, ReapOptions
from tests.contract.test_execution import MINUTE, create_job, schedule_run

pytestmark = pytest.mark.contract

LIMIT = 4  # runs per pass (500 on AWS), small so that a dozen runs is a backlog


def _lost_runs(engine: Engine, clock: ManualClock, count: int) -> None:
    job = create_job(engine, clock, schedule="* * * * *")
    for _ in range(count):
        schedule_run(engine, clock, job, send=False)  # inserted, message lost
        clock.advance(1)
    clock.advance(3 * MINUTE)  # past their deadline and grace


def test_a_time_bounded_sweep_pages_until_the_backlog_is_resent(engine: Engine, clock: ManualClock) -> None:
    _lost_runs(engine, clock, 3 * LIMIT + 1)
    reaper = Reaper(engine, clock, options=ReapOptions(limit=LIMIT), max_passes=2)
    # A sweep bounded by passes leaves the rest for the next minute...
    assert reaper.tick().redispatched == 2 * LIMIT
    # ...one bounded by time (the Lambda's) goes on until a pass finds less than a full page.
    assert reaper.tick(until_ms=clock.now_ms() + MINUTE).redispatched == LIMIT + 1
    assert reaper.tick(until_ms=clock.now_ms() + MINUTE).examined == 0


def test_a_sweep_past_its_time_still_makes_one_pass(engine: Engine, clock: ManualClock) -> None:
    _lost_runs(engine, clock, 2 * LIMIT)
    reaper = Reaper(engine, clock, options=ReapOptions(limit=LIMIT))
    assert reaper.tick(until_ms=clock.now_ms() - 1).redispatched == LIMIT
