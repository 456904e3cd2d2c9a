"""A claim window (``PlanOptions.window_ms``): one claim of a minute job takes its times up to its
window boundary, its head moves once, and each claimed time is still decided at its instant.

Both engines, on the manual clock; no queue delay is waited for (the leases are taken as the worker
takes them, with what the job says at the instant: ``execution.leasing.withdrawal_of``).
"""

from __future__ import annotations

from punctual.execution.leasing import withdrawal_of
from punctual.model import JobStatus, RunState, Trigger
from punctual.port import LeaseOutcome
from punctual.scheduling.claim import claim_page
from punctual.scheduling.planning import PlanOptions, window_end
from tests.contract.factories import MINUTE, SECOND, make_job

OWNER = "owner-window"
WINDOW = PlanOptions(window_ms=10 * MINUTE)


def test_one_claim_takes_a_window_and_each_time_is_decided_at_its_instant(engine, clock):
    store, queue = engine.store, engine.queue
    first = (clock.now_ms() // MINUTE + 1) * MINUTE
    # Given three minute jobs due at the next minute
    jobs = [make_job(OWNER, clock, shards=store.shards, shard=1, next_run_at=first) for _ in range(3)]
    for job in jobs:
        store.create_job(job)
    times = {job.id: list(range(first, window_end(job.id, first, 10 * MINUTE), MINUTE)) for job in jobs}
    # When one claim with a 10-minute window runs 5 s before it
    stats = claim_page(store, queue, 1, first - 5 * SECOND, lookahead_ms=10 * SECOND, options=WINDOW)
    # Then each job got a run per time up to its boundary, one message each, and moved once
    claimed = sum(len(t) for t in times.values())
    assert (stats.inserted, stats.dispatched, stats.advanced) == (claimed, claimed, 3)
    for job in jobs:
        assert store.get_job(job.id).next_run_at == times[job.id][-1] + MINUTE
        runs = [store.get_run(job.id, t) for t in times[job.id]]
        assert all(r.state is RunState.SCHEDULED and r.trigger is Trigger.SCHEDULE for r in runs)
    # and the shard has nothing due until the first boundary
    assert store.due_jobs(1, min(t[-1] for t in times.values()), 10) == []

    # When, after the claim, job 0 moves to every other minute (an edit) and job 1 is paused
    now = first - 4 * SECOND
    edited = store.get_job(jobs[0].id)
    store.update_job(
        edited.model_copy(update={"schedule": "*/2 * * * *", "rescheduled_at": now, "updated_at": now}),
        edited.version,
    )
    paused = store.get_job(jobs[1].id)
    store.update_job(
        paused.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None, "updated_at": now}), paused.version
    )
    # Then at each instant the lease follows the job as it is then: the edited job's odd minutes and
    # every time of the paused job are withdrawn (cancelled, never leased); the rest are leased
    for job in jobs:
        for at in times[job.id]:
            current = store.get_job(job.id)
            result = store.lease_run(job.id, at, "w1", at, 60 * SECOND, withdrawn=withdrawal_of(current, at))
            withdrawn = job is jobs[1] or (job is jobs[0] and at % (2 * MINUTE) != 0)
            assert result.outcome is (LeaseOutcome.SKIPPED if withdrawn else LeaseOutcome.LEASED), (job.id, at)
            assert store.get_run(job.id, at).state is (RunState.CANCELLED if withdrawn else RunState.RUNNING)
