"""Deadline alerts (issue 33, section 2: ``punctual.reaping.deadlines``) on both engines, on the
manual clock: a run not finished by its job's ``deadline_s`` and a cron instant nobody claimed
within it alert their owner once each, through the store's reads of old open runs and old due jobs;
a run that ends late alerts where it ends. Jobs without ``deadline_s`` alert nothing.
"""

from __future__ import annotations

import pytest

from punctual.model import AlertKind, JobStatus, RunState
from punctual.reaping.deadlines import DeadlineMemo, watch_deadlines
from punctual.runs.outcomes import settle_outcomes
from tests.contract.factories import MINUTE, SECOND, make_job, make_run
from tests.contract.test_execution import RecordingAlerter

pytestmark = pytest.mark.contract

OWNER = "owner-deadlines"


def test_late_runs_and_unclaimed_instants_alert_once_and_jobs_without_a_deadline_never(engine, clock):
    store, alerter, t0 = engine.store, RecordingAlerter(), clock.now_ms()
    # paused: their runs' deadlines still count, and they have no instant due
    watched = make_job(OWNER, clock, shards=store.shards, status=JobStatus.PAUSED, deadline_s=120)
    plain = make_job(OWNER, clock, shards=store.shards, status=JobStatus.PAUSED)
    # a cron job whose instant t0 no scheduler claims, and one without a deadline in the same state
    missed = make_job(OWNER, clock, shards=store.shards, next_run_at=t0, deadline_s=60)
    unwatched = make_job(OWNER, clock, shards=store.shards, next_run_at=t0)
    for job in (watched, plain, missed, unwatched):
        store.create_job(job)
    slow = make_run(watched, t0, clock, state=RunState.RUNNING, deadline_at=t0 + 60 * MINUTE)
    queued = make_run(watched, t0 + SECOND, clock)  # never leased: late counts as much as slow
    done = make_run(watched, t0 + 2 * SECOND, clock, state=RunState.SUCCEEDED, finished_at=t0 + 5 * SECOND)
    other = make_run(plain, t0, clock, state=RunState.RUNNING, deadline_at=t0 + 60 * MINUTE)
    assert store.insert_runs([slow, queued, done, other]) == [True] * 4

    clock.advance(90 * SECOND)  # past the instant's deadline (60 s), not the runs' (120 s)
    assert watch_deadlines(store, alerter, clock.now_ms()) == 1
    assert [(a.kind, a.run_id) for a in alerter.published] == [(AlertKind.RUN_MISSED, f"run_{missed.id[4:]}_{t0}")]

    clock.advance(60 * SECOND)
    memo = DeadlineMemo()
    assert watch_deadlines(store, alerter, clock.now_ms(), memo=memo) == 2
    late = {(a.kind, a.run_id) for a in alerter.published[1:]}
    assert late == {(AlertKind.DEADLINE_MISSED, slow.run_id), (AlertKind.DEADLINE_MISSED, queued.run_id)}
    # another reaper (no memo), or this one again: nothing new, nothing published
    assert watch_deadlines(store, alerter, clock.now_ms()) == 0
    assert watch_deadlines(store, alerter, clock.now_ms(), memo=memo) == 0
    assert len(alerter.published) == 3
    kinds = sorted(a.kind.value for a in store.list_alerts(OWNER))
    assert kinds == ["deadline_missed", "deadline_missed", "run_missed"]

    # a run that ends after its deadline between two ticks alerts where it ends; one on time does not
    ended = make_run(watched, t0 + 3 * SECOND, clock, state=RunState.FAILED, finished_at=clock.now_ms())
    settle_outcomes(store, alerter, watched, ended, clock.now_ms())
    settle_outcomes(store, alerter, watched, done, clock.now_ms())
    assert [(a.kind, a.run_id) for a in alerter.published[3:]] == [(AlertKind.DEADLINE_MISSED, ended.run_id)]
    # a paused job's instant is no missed run
    store.update_job(missed.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None}), missed.version)
    assert watch_deadlines(store, alerter, clock.now_ms() + 10 * MINUTE) == 0
