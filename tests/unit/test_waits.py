"""Where a waiting message waits (punctual.execution.waits), at the deployed thresholds: held in flight
up to 60 s, re-sent with a delay up to 900 s, parked in the run's row beyond (the reaper re-sends it
10 minutes before it is due)."""

from __future__ import annotations

import pytest

from punctual.execution.changes import attempt_change
from punctual.execution.options import ExecutionOptions
from punctual.execution.waits import Waits, Way, parked, resend_of, way_to_wait
from punctual.model import Attempt, AttemptOutcome, HttpTarget, Job, RetryPolicy, Run, RunState
from punctual.port import Delivery, RunChange
from punctual.runs.retry import Jitter, Verdict

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
OPTIONS = ExecutionOptions(jitter=Jitter.NONE)
DELIVERY = Delivery("run_" + "0" * 32 + "_1800000000000", NOW, "receipt-1", 3)


@pytest.mark.parametrize(
    ("wait_ms", "parked_run", "way"),
    [
        (1_000, False, Way.HIDE),
        (60_000, False, Way.HIDE),  # a minute at most in flight
        (60_001, False, Way.RESEND),
        (900_000, False, Way.RESEND),
        (900_001, False, Way.RESEND),  # a relay: re-sent with the longest delay, it waits again on arrival
        (12 * 3_600_000, False, Way.RESEND),
        (60_000, True, Way.HIDE),  # the reaper is late already: keep what there is
        (60_001, True, Way.PARK),
        (12 * 3_600_000, True, Way.PARK),
    ],
)
def test_how_a_message_waits_by_how_long(wait_ms: int, parked_run: bool, way: Way) -> None:
    assert way_to_wait(wait_ms, OPTIONS, parked_run=parked_run) is way


def test_a_resent_message_is_due_at_the_instant_and_visible_at_most_a_second_early_or_after_900_s() -> None:
    soon = resend_of(DELIVERY, NOW + 120_500, NOW, OPTIONS, "owner-1")
    assert (soon.run_id, soon.not_before, soon.delay_s, soon.group) == (DELIVERY.run_id, NOW + 120_500, 120, "owner-1")
    far = resend_of(DELIVERY, NOW + 3_600_000, NOW, OPTIONS, None)
    assert (far.not_before, far.delay_s) == (NOW + 3_600_000, 900)


def test_waits_of_one_batch_are_gathered_by_way() -> None:
    waits = Waits(NOW, OPTIONS)
    receipts = [f"r{i}" for i in range(4)]
    plan = [(30_000, False), (30_000, False), (300_000, False), (7_200_000, True)]
    ways = [
        waits.add(Delivery(DELIVERY.run_id, NOW, receipt, 1), NOW + wait, "o", parked_run=park)
        for receipt, (wait, park) in zip(receipts, plan, strict=True)
    ]
    waits.drop(["r9"])
    assert ways == [Way.HIDE, Way.HIDE, Way.RESEND, Way.PARK]
    assert dict(waits.hides) == {30: ["r0", "r1"]}
    assert [(d.not_before, d.delay_s) for d in waits.resends] == [(NOW + 300_000, 300)]
    assert waits.gone == ["r2", "r3", "r9"]  # deleted after the re-sends went out


def _retry_of(backoff_s: int) -> RunChange:
    job = Job(
        id="job_" + "0" * 32,
        owner="o",
        name="n",
        schedule="* * * * *",
        target=HttpTarget(url="https://example.com/hook"),
        retry=RetryPolicy(backoff_s=backoff_s, max_backoff_s=backoff_s),
        max_retries=3,
        created_at=NOW,
        updated_at=NOW,
    )
    run = Run(
        job_id=job.id, scheduled_at=NOW, owner="o", state=RunState.RUNNING, attempt=1, deadline_at=NOW, created_at=NOW
    )
    record = Attempt(number=1, outcome=AttemptOutcome.FAILED, finished_at=NOW)
    return attempt_change(job, run, Verdict.RETRY, record, NOW, options=OPTIONS)


@pytest.mark.parametrize(
    ("backoff_s", "deadline_after_next_ms", "is_parked"),
    [(60, 60_000, False), (600, 60_000, False), (900, 60_000, False), (901, -600_000, True), (3_600, -600_000, True)],
)
def test_a_retry_longer_than_a_delay_is_parked_in_its_row(backoff_s: int, deadline_after_next_ms: int, is_parked: bool):
    change = _retry_of(backoff_s)
    assert change.state is RunState.RETRYING and change.next_attempt_at == NOW + backoff_s * 1000
    assert change.deadline_at == change.next_attempt_at + deadline_after_next_ms
    stored = Run(
        job_id="job_" + "0" * 32,
        scheduled_at=NOW,
        owner="o",
        state=change.state,
        attempt=1,
        deadline_at=change.deadline_at,
        next_attempt_at=change.next_attempt_at,
        created_at=NOW,
    )
    assert parked(stored) is is_parked


@pytest.mark.parametrize(
    "fields",
    [
        {"hold_max_ms": 0},
        {"hold_max_ms": 700_000},  # above the lead: a parked run would be held past its resend
        {"parked_lead_ms": 900_000},  # the reaper's resend could not be delayed to the instant
        {"resend_max_ms": 901_000},  # SQS delays stop at 900 s
    ],
)
def test_wait_thresholds_that_cannot_work_are_refused(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="hold_max_ms"):
        ExecutionOptions(**fields)
