"""Which claimed instants a job changed before them still has (``scheduling.instants``), and what the
worker's lease does with the answer (``execution.leasing.withdrawal_of`` + ``rules.withdrawn``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from punctual import ids, rules
from punctual.execution.leasing import withdrawal_of
from punctual.model import DependsOn, HttpTarget, Job, Run, RunState, Trigger, Withdrawal
from punctual.scheduling.instants import CLAIM_HORIZON_MS, still_planned

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000  # a whole minute
AT = NOW + 60_000  # the claimed instant


def job(**fields: object) -> Job:
    base: dict[str, object] = {
        "id": ids.new_job_id(),
        "owner": "alice",
        "name": "report",
        "schedule": "* * * * *",
        "target": HttpTarget(url="https://example.com/hook"),
        "created_at": NOW - 3_600_000,
        "updated_at": NOW,
    }
    return Job.model_validate({**base, **fields})


def run_of(j: Job, trigger: Trigger) -> Run:
    return Run(job_id=j.id, scheduled_at=AT, owner=j.owner, trigger=trigger, deadline_at=AT, created_at=NOW)


UPSTREAM = DependsOn(jobs=[ids.new_job_id()])


def test_an_instant_the_changed_schedule_still_has_is_planned_and_one_it_lacks_is_not() -> None:
    assert still_planned(job(schedule="* * * * *", rescheduled_at=NOW), AT)
    assert not still_planned(job(schedule="0 0 1 1 *", rescheduled_at=NOW), AT)
    at = datetime.fromtimestamp(AT / 1000, tz=UTC)
    assert still_planned(job(schedule=None, run_at=at, rescheduled_at=NOW), AT)
    assert not still_planned(job(schedule=None, run_at=at, rescheduled_at=NOW), AT + 1_000)
    # a change older than any claim of the instant was followed by the claim: not checked again
    assert still_planned(job(schedule="0 0 1 1 *", rescheduled_at=AT - CLAIM_HORIZON_MS - 1), AT)


def test_a_job_turned_into_a_dependent_before_a_claimed_instant_has_no_instant_left() -> None:
    # Given a cron (or one-time) job whose instant AT was claimed, then changed to wait for another job
    changed = job(schedule=None, depends_on=UPSTREAM, rescheduled_at=NOW)
    # Then AT is no longer one of its times: its schedule run there is cancelled, never called
    assert not still_planned(changed, AT)
    assert withdrawal_of(changed, AT) is Withdrawal.OFF_SCHEDULE
    cancelled = rules.withdrawn(run_of(changed, Trigger.SCHEDULE), Withdrawal.OFF_SCHEDULE, AT)
    assert cancelled is not None and cancelled.state is RunState.CANCELLED
    # while the runs it is released for, and manual runs, are never withdrawn by it
    for trigger in (Trigger.DEPENDENCY, Trigger.MANUAL):
        assert rules.withdrawn(run_of(changed, trigger), Withdrawal.OFF_SCHEDULE, AT) is None


def test_a_dependent_job_not_changed_recently_is_not_checked() -> None:
    assert still_planned(job(schedule=None, depends_on=UPSTREAM), AT)
    assert withdrawal_of(job(schedule=None, depends_on=UPSTREAM), AT) is None
