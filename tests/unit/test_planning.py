"""Tests for punctual.scheduling.planning.plan: which runs a due job gets and where next_run_at moves.

Every cron here is evaluated in UTC: planning only orders fire times that punctual.scheduling.cron
computes (DST is that module's concern), so these tests stay DST-agnostic.
"""

from __future__ import annotations

from typing import Any

import pytest

from punctual import ids
from punctual.model import Catchup, Overlap, Run, RunState, Trigger
from punctual.port import DueJob
from punctual.resources import MAX_DELAY_S
from punctual.scheduling.planning import (
    MAX_WINDOW_RUNS,
    PlanOptions,
    dispatch_for,
    jitter_offset_ms,
    off_schedule,
    plan,
    window_end,
)

pytestmark = pytest.mark.unit

SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z: a whole hour
OPTIONS = PlanOptions()
JOB_ID = "job_" + "5a" * 16


def due_job(**fields: Any) -> DueJob:
    base: dict[str, Any] = {
        "job_id": JOB_ID,
        "owner": "alice",
        "next_run_at": T0,
        "schedule": "* * * * *",
        "timezone": "UTC",
        "jitter_s": 0,
        "overlap": Overlap.ALLOW,
        "catchup": Catchup.LATEST,
        "max_backfill": 10,
        "last_run_at": None,
        "due_shard": 0,
    }
    return DueJob(**(base | fields))


def test_t0_is_a_whole_hour() -> None:
    assert T0 % HOUR == 0


# -- on time ----------------------------------------------------------------------------------


def test_on_time_run() -> None:
    job = due_job()
    p = plan(job, T0, OPTIONS)
    [run] = p.runs
    assert run.job_id == JOB_ID and run.owner == "alice"
    assert run.scheduled_at == T0
    assert run.state is RunState.SCHEDULED
    assert run.trigger is Trigger.SCHEDULE
    assert run.attempt == 0 and run.attempts == [] and run.worker_id is None
    assert run.created_at == T0
    assert run.deadline_at == T0 + OPTIONS.dispatch_grace_ms
    assert run.expires_at == T0 // 1000 + OPTIONS.retention_s
    [dispatch] = p.dispatches
    assert dispatch.run_id == run.run_id == ids.run_id_for(JOB_ID, T0)
    assert (dispatch.not_before, dispatch.delay_s) == (T0, 0)
    assert p.advance.job_id == JOB_ID
    assert p.advance.expected_next_run_at == T0
    assert p.advance.next_run_at == T0 + MINUTE
    assert p.advance.last_run_at == T0
    assert p.advance.now == T0
    assert p.job is job


def test_planned_runs_are_valid_models() -> None:
    # the planner builds runs with model_construct (hot path): they must still validate
    p = plan(due_job(jitter_s=30), T0 - 2 * SECOND, OPTIONS)
    for run in p.runs:
        assert Run.model_validate(run.model_dump()) == run


def test_next_run_follows_the_schedule() -> None:
    p = plan(due_job(schedule="*/15 * * * *"), T0, OPTIONS)
    assert p.advance.next_run_at == T0 + 15 * MINUTE


@pytest.mark.parametrize("late_ms", [1, 5 * SECOND, 59 * SECOND, OPTIONS.late_after_ms])
def test_a_little_late_is_still_on_time(late_ms: int) -> None:
    # a scheduler behind by less than late_after_ms (a top-of-minute backlog) produces the on-time run
    p = plan(due_job(), T0 + late_ms, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at == T0
    assert run.trigger is Trigger.SCHEDULE
    assert p.dispatches[0].delay_s == 0
    assert p.advance.next_run_at == T0 + MINUTE


# -- precompute -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ahead_ms", "delay_s"),
    [(1, 0), (999, 0), (SECOND, 1), (2_500, 2), (2_999, 2), (3_000, 3), (59 * SECOND + 999, 59)],
)
def test_precomputed_run_is_delayed_by_whole_seconds_rounded_down(ahead_ms: int, delay_s: int) -> None:
    due = T0 + MINUTE
    p = plan(due_job(next_run_at=due), due - ahead_ms, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at == due
    assert run.trigger is Trigger.SCHEDULE
    [dispatch] = p.dispatches
    assert dispatch.not_before == due
    assert dispatch.delay_s == delay_s  # visible at most a second early, never late
    assert due - SECOND < (due - ahead_ms) + dispatch.delay_s * SECOND <= due


def test_delay_is_capped_at_the_sqs_maximum() -> None:
    run = plan(due_job(), T0, OPTIONS).runs[0]
    dispatch = dispatch_for(run, 0, T0 - 2 * MAX_DELAY_S * SECOND)
    assert dispatch.delay_s == MAX_DELAY_S
    assert dispatch.not_before == T0


# -- jitter -----------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_within_range() -> None:
    jitter_s = 30
    offsets = []
    for i in range(500):
        job_id = f"job_{i:032x}"
        p1 = plan(due_job(job_id=job_id, jitter_s=jitter_s), T0, OPTIONS)
        p2 = plan(due_job(job_id=job_id, jitter_s=jitter_s), T0 + 2 * SECOND, OPTIONS)  # a later redispatch
        offset = p1.dispatches[0].not_before - T0
        assert p2.dispatches[0].not_before == p1.dispatches[0].not_before  # same run, same instant
        assert 0 <= offset < jitter_s * SECOND
        assert p1.runs[0].scheduled_at == T0  # jitter moves the start, never the run's identity
        assert p1.runs[0].deadline_at == T0 + offset + OPTIONS.dispatch_grace_ms
        assert p1.dispatches[0].delay_s == offset // SECOND
        offsets.append(offset)
    # spread over the window, not clumped
    assert min(offsets) < 3 * SECOND and max(offsets) > (jitter_s - 3) * SECOND
    assert len(set(offsets)) > 400


def test_jitter_differs_per_run_of_the_same_job() -> None:
    offsets = {jitter_offset_ms(ids.run_id_for(JOB_ID, T0 + i * MINUTE), 60) for i in range(50)}
    assert len(offsets) > 40


@pytest.mark.parametrize("jitter_s", [0, -1])
def test_no_jitter(jitter_s: int) -> None:
    assert jitter_offset_ms(ids.run_id_for(JOB_ID, T0), jitter_s) == 0


# -- missed times: catch-up ---------------------------------------------------------------------


def missed(catchup: Catchup, **fields: Any) -> tuple[DueJob, int]:
    """An hourly job that last ran 5 hours ago: due at T0 - 5h, now = T0 + 10 min."""
    job = due_job(schedule="0 * * * *", next_run_at=T0 - 5 * HOUR, catchup=catchup, last_run_at=T0 - 6 * HOUR, **fields)
    return job, T0 + 10 * MINUTE


def test_just_past_late_after_is_missed() -> None:
    job = due_job(catchup=Catchup.SKIP)
    assert plan(job, T0 + OPTIONS.late_after_ms, OPTIONS).runs  # at the boundary: on time
    p = plan(job, T0 + OPTIONS.late_after_ms + 1, OPTIONS)
    assert p.runs == []


def test_catchup_latest_runs_the_most_recent_missed_time_once() -> None:
    job, now = missed(Catchup.LATEST)
    p = plan(job, now, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at == T0  # the latest fire at or before now
    assert run.trigger is Trigger.CATCHUP
    assert p.dispatches[0].delay_s == 0
    assert p.advance.expected_next_run_at == T0 - 5 * HOUR
    assert p.advance.next_run_at == T0 + HOUR  # continues on schedule
    assert p.advance.last_run_at == T0


def test_catchup_latest_when_now_is_exactly_a_fire_time() -> None:
    job, _ = missed(Catchup.LATEST)
    p = plan(job, T0 + 3 * HOUR, OPTIONS)
    assert [r.scheduled_at for r in p.runs] == [T0 + 3 * HOUR]
    assert p.advance.next_run_at == T0 + 4 * HOUR


def test_catchup_skip_runs_nothing_and_moves_to_the_next_future_time() -> None:
    job, now = missed(Catchup.SKIP)
    p = plan(job, now, OPTIONS)
    assert p.runs == [] and p.dispatches == []
    assert p.advance.expected_next_run_at == job.next_run_at
    assert p.advance.next_run_at == T0 + HOUR
    assert p.advance.next_run_at > now
    assert p.advance.last_run_at == job.last_run_at  # no run was created


@pytest.mark.parametrize(
    ("max_backfill", "expected_hours"),
    [(10, [-5, -4, -3, -2, -1, 0]), (3, [-2, -1, 0]), (1, [0]), (6, [-5, -4, -3, -2, -1, 0])],
)
def test_catchup_backfill_runs_the_newest_missed_times_in_order(max_backfill: int, expected_hours: list[int]) -> None:
    job, now = missed(Catchup.BACKFILL, max_backfill=max_backfill)
    p = plan(job, now, OPTIONS)
    assert [r.scheduled_at for r in p.runs] == [T0 + h * HOUR for h in expected_hours]
    assert all(r.trigger is Trigger.CATCHUP for r in p.runs)
    assert [d.run_id for d in p.dispatches] == [r.run_id for r in p.runs]
    assert len({r.run_id for r in p.runs}) == len(p.runs)
    assert p.advance.next_run_at == T0 + HOUR
    assert p.advance.last_run_at == T0


def test_backfill_never_goes_before_the_due_time() -> None:
    # due at T0 - 2h: the times before it were already run (or skipped) earlier
    job = due_job(schedule="0 * * * *", next_run_at=T0 - 2 * HOUR, catchup=Catchup.BACKFILL, max_backfill=50)
    p = plan(job, T0 + 5 * MINUTE, OPTIONS)
    assert [r.scheduled_at for r in p.runs] == [T0 - 2 * HOUR, T0 - HOUR, T0]


def test_catchup_when_next_run_at_is_off_schedule() -> None:
    # a resumed job whose stored next_run_at is not a fire time of its (edited) schedule still
    # gets at least the run for its stored time or later, never one before it
    job = due_job(schedule="0 0 * * *", next_run_at=T0 - 30 * MINUTE, catchup=Catchup.LATEST)
    p = plan(job, T0 + 5 * MINUTE, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at >= job.next_run_at
    assert p.advance.next_run_at is not None and p.advance.next_run_at > run.scheduled_at


# -- one-time jobs ----------------------------------------------------------------------------


def test_one_time_job_completes() -> None:
    job = due_job(schedule=None, next_run_at=T0 + 1_500)
    p = plan(job, T0, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at == T0 + 1_500
    assert run.trigger is Trigger.SCHEDULE
    assert p.dispatches[0].delay_s == 1
    assert p.advance.next_run_at is None  # completes: leaves the due index
    assert p.advance.last_run_at == T0 + 1_500


@pytest.mark.parametrize("catchup", list(Catchup))
def test_late_one_time_job_still_runs_once(catchup: Catchup) -> None:
    job = due_job(schedule=None, next_run_at=T0 - 24 * HOUR, catchup=catchup)
    p = plan(job, T0, OPTIONS)
    [run] = p.runs
    assert run.scheduled_at == T0 - 24 * HOUR
    assert run.trigger is Trigger.CATCHUP
    assert p.dispatches[0].delay_s == 0
    assert p.advance.next_run_at is None


# -- options ----------------------------------------------------------------------------------


def test_options_are_honoured() -> None:
    options = PlanOptions(late_after_ms=5 * SECOND, dispatch_grace_ms=7 * SECOND, retention_s=3_600)
    job = due_job(catchup=Catchup.SKIP)
    [run] = plan(job, T0 + 5 * SECOND, options).runs
    assert run.deadline_at == T0 + 5 * SECOND + 7 * SECOND  # a late run's grace counts from its sending
    assert run.expires_at == (T0 + 5 * SECOND) // 1000 + 3_600
    [early] = plan(job, T0 - 2 * SECOND, options).runs  # precomputed: from its own time
    assert early.deadline_at == T0 + 7 * SECOND
    assert plan(job, T0 + 5 * SECOND + 1, options).runs == []


def test_plan_is_pure() -> None:
    job, now = missed(Catchup.BACKFILL, jitter_s=20)
    assert plan(job, now, OPTIONS) == plan(job, now, OPTIONS)


def test_off_schedule_steps_over_whole_seconds_and_counts_only_the_ms_between() -> None:
    assert off_schedule(1_000) == 1_001  # a whole second is a schedule's instant: the next ms
    assert off_schedule(1_234) == 1_234
    assert off_schedule(1_998, 1) == 1_999
    assert off_schedule(1_999, 1) == 2_001
    instants = [off_schedule(5_000, rank) for rank in range(10_000)]
    assert all(t % 1000 for t in instants)
    assert instants == sorted(set(instants))  # distinct, in rank order
    assert instants[-1] - 5_000 < 11_000  # within a replay's stride (jobs.replay.STRIDE_MS)


# -- claim window (PlanOptions.window_ms) ------------------------------------------------------

WINDOW = PlanOptions(window_ms=10 * MINUTE)


def test_window_claims_the_times_up_to_the_jobs_boundary_and_advances_past_them() -> None:
    end = window_end(JOB_ID, T0, 10 * MINUTE)
    assert T0 < end <= T0 + 10 * MINUTE
    p = plan(due_job(), T0 - 5 * SECOND, WINDOW)
    expected = list(range(T0, end, MINUTE))
    assert [r.scheduled_at for r in p.runs] == expected
    assert all(r.trigger is Trigger.SCHEDULE and r.state is RunState.SCHEDULED for r in p.runs)
    assert p.advance.next_run_at == expected[-1] + MINUTE and p.advance.last_run_at == expected[-1]
    # each run's message is delayed to its own instant; deadlines count from it
    assert [d.delay_s for d in p.dispatches] == [(t - T0 + 5 * SECOND) // SECOND for t in expected]
    assert all(r.deadline_at == r.scheduled_at + OPTIONS.dispatch_grace_ms for r in p.runs)


def test_the_next_claim_of_a_job_takes_a_whole_window() -> None:
    first = plan(due_job(), T0, WINDOW)
    assert first.advance.next_run_at is not None
    again = plan(due_job(next_run_at=first.advance.next_run_at), first.advance.next_run_at, WINDOW)
    boundary = window_end(JOB_ID, T0, 10 * MINUTE)
    assert len(again.runs) == 10 and again.runs[0].scheduled_at == -(-boundary // MINUTE) * MINUTE  # its first time


def test_jobs_reach_their_boundaries_at_different_times() -> None:
    ends = {window_end(f"job_{i:032x}", T0, 10 * MINUTE) for i in range(200)}
    assert len({e // MINUTE for e in ends}) == 10  # every minute of the window is some jobs' boundary


def test_window_never_needs_a_longer_delay_than_sqs_allows() -> None:
    wide = PlanOptions(window_ms=780 * SECOND)
    for jitter_s in (0, 300, 600):
        p = plan(due_job(jitter_s=jitter_s), T0 - 60 * SECOND, wide)
        assert all(r.scheduled_at + jitter_s * SECOND - (T0 - 60 * SECOND) <= MAX_DELAY_S * SECOND for r in p.runs)
        assert len(p.runs) <= MAX_WINDOW_RUNS


def test_window_leaves_late_sparse_and_one_time_jobs_alone() -> None:
    late = plan(due_job(), T0 + 5 * MINUTE, WINDOW)  # catch-up: one run, as without a window
    assert [r.trigger for r in late.runs] == [Trigger.CATCHUP]
    hourly = plan(due_job(schedule="0 * * * *"), T0, WINDOW)
    assert [r.scheduled_at for r in hourly.runs] == [T0] and hourly.advance.next_run_at == T0 + HOUR
    once = plan(due_job(schedule=None), T0, WINDOW)
    assert len(once.runs) == 1 and once.advance.next_run_at is None
