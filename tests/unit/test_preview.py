"""The preview (``GET /jobs/{id}/preview``): its runs are exactly the scheduler's fires, and every time
that does not run as the schedule says is listed with its cause (issue 32)."""

from __future__ import annotations

import itertools

import pytest

from punctual.model import JobSpec
from punctual.scheduling.cron import fire_times
from punctual.scheduling.preview import Cause, Fate, preview
from tests.unit.test_dst_policy import HOUR_MS, POLICIES, ZONES, expressions, transitions

pytestmark = pytest.mark.unit

TARGET = {"url": "https://example.com/hook"}


def _job(**fields: object) -> JobSpec:
    return JobSpec.model_validate({"name": "p", "target": TARGET, **fields})


@pytest.mark.parametrize("zone", ZONES)
def test_the_preview_runs_are_the_fires_and_the_rest_say_why(zone: str) -> None:
    for t in transitions(zone)[:4]:
        for expr, policy in itertools.product(expressions(zone, t)[::3], POLICIES):
            job = _job(
                schedule=expr.text,
                timezone=zone,
                dst_repeated=policy.repeated and policy.repeated.value,
                dst_skipped=policy.skipped and policy.skipped.value,
            )
            now = t - 3 * HOUR_MS
            items = preview(job, now, 12)
            runs = [i.at for i in items if i.fate is not Fate.SKIPPED]
            assert runs == fire_times(expr.text, zone, now, 2**62, len(runs), dst=policy), (expr.text, policy)
            assert [i.order for i in items] == sorted(i.order for i in items) and len(items) == 12
            for item in items:
                assert item.at is None or item.at > now
                if item.fate is not Fate.RUN:
                    assert item.cause in (Cause.DST_REPEATED, Cause.DST_SKIPPED) and item.detail
                assert item.cause is None or item.detail


def test_one_time_and_dependent_jobs() -> None:
    once = _job(run_at="2030-01-01T09:00:00+01:00")
    assert [(i.at, i.fate) for i in preview(once, 0, 5)] == [(1893484800000, Fate.RUN)]
    assert preview(once, 1893484800000, 5) == []  # its time has passed
    dependent = _job(depends_on={"jobs": ["job_" + "0" * 32]})
    assert preview(dependent, 0, 5) == []


def test_count_bounds_the_items_and_the_wall_time_is_the_schedules() -> None:
    items = preview(_job(schedule="30 2 * * *", timezone="America/New_York", dst_skipped="skip"), 1772600000000, 6)
    assert len(items) == 6 and all(i.local.endswith("T02:30") for i in items)
    skipped = [i for i in items if i.fate is Fate.SKIPPED]
    assert [(i.local, i.at, i.cause) for i in skipped] == [("2026-03-08T02:30", None, Cause.DST_SKIPPED)]
