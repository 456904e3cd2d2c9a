"""``next_run_at`` as the API shows it (``punctual.jobs.runs.next_run_times``): the next time of an
active cron job after now, when a claim (its lookahead, its window) moved the stored one past it."""

from __future__ import annotations

from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.jobs.runs import next_run_times
from punctual.model import JobStatus
from punctual.model.timing import JobCalendar
from tests.contract.factories import MINUTE, make_job

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # a whole minute


def shown(now: int, **fields: Any) -> int | None:
    job = make_job("alice", ManualClock(T0), shards=4, **fields)
    return next_run_times([job], now)[job.id]


def test_a_claimed_time_shows_before_the_stored_one() -> None:
    # a claim window took T0 .. T0 + 9 min: the stored time is T0 + 10 min; at T0 + 3.5 min the next is + 4
    assert shown(T0 + 210_000, next_run_at=T0 + 10 * MINUTE) == T0 + 4 * MINUTE
    assert shown(T0 - 5_000, next_run_at=T0 + MINUTE) == T0  # claimed a lookahead ahead: T0 comes first


def test_otherwise_the_stored_time_is_shown() -> None:
    assert shown(T0, next_run_at=T0 + MINUTE) == T0 + MINUTE  # nothing claimed beyond it
    assert shown(T0 + 5 * MINUTE, next_run_at=T0) == T0  # overdue: as stored
    assert shown(T0, status=JobStatus.PAUSED) is None
    calendar = JobCalendar(name="work")
    assert shown(T0 + 210_000, next_run_at=T0 + 10 * MINUTE, calendar=calendar) == T0 + 10 * MINUTE
