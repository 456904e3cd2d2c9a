"""overlap=forbid|replace decided at the new run's instant, on both engines (issue 10, item 1).

The claim used to decide, up to the lookahead before the run's time, so runs were lost: with
runs of 58 s every other minutely run was "skipped" (3 s lookahead), with a 60 s lookahead and
1 s runs every other run was skipped as "still scheduled", and replace cancelled every run and
refused the finish of a target that had succeeded. Now the first lease decides (``rules.overlap_*``).

The sweep drives the real claim (``claim_page``) and the engines' lease and finish on a manual
clock, for run durations across the interval and lookaheads from 0 to 60 s, and compares every
run's end with a model of the policy: forbid skips a run iff an executed earlier run is still
open at its instant; replace cancels an executed run iff the next run starts before it ends.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import pytest

from punctual import rules
from punctual.clock import ManualClock
from punctual.errors import LeaseLost
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.model import Job, Overlap, Run, RunState
from punctual.port import Engine, LeaseOutcome, RunChange, RunQuery
from punctual.scheduling.claim import claim_page
from tests.contract.factories import MINUTE, SECOND, make_job, make_run

pytestmark = pytest.mark.contract

RUNS = 3  # minutely runs per job
DURATIONS_MS = [1 * SECOND, 30 * SECOND, 58 * SECOND, 59_500, 61 * SECOND, 90 * SECOND, 150 * SECOND]
AWS_DURATIONS_MS = [1 * SECOND, 58 * SECOND, 61 * SECOND, 90 * SECOND, 150 * SECOND]  # moto is slow
LOOKAHEADS_MS = [0, 3 * SECOND, 30 * SECOND, 59 * SECOND, 60 * SECOND]
LEASE_MS = 10 * MINUTE


def _job(engine: Engine, clock: ManualClock, overlap: Overlap, next_run_at: int) -> Job:
    job = make_job("owner-overlap", clock, shards=engine.store.shards, next_run_at=next_run_at, overlap=overlap)
    engine.store.create_job(job)
    return job


def _succeed(engine: Engine, job_id: str, at: int, worker: str, now: int) -> bool:
    change = RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, finished_at=now)
    try:
        engine.store.finish_run(job_id, at, worker, 1, change)
    except LeaseLost:
        return False
    return True


@dataclass
class Timeline:
    """Claims at each run's time minus the lookahead, leases at its time, finishes after its duration."""

    engine: Engine
    clock: ManualClock
    lookahead_ms: int
    start: int
    events: list[tuple[int, int, str, str, int]] = field(default_factory=list)  # (t, order, kind, job, k)
    refused: set[tuple[str, int]] = field(default_factory=set)  # finishes refused (job id, scheduled_at)

    def run(self, jobs: dict[str, int]) -> None:
        """``jobs``: job id -> run duration (ms)."""
        for k in range(RUNS):
            at = self.start + k * MINUTE
            heapq.heappush(self.events, (at - self.lookahead_ms, 0, "claim", "", k))
            for job_id in jobs:
                heapq.heappush(self.events, (at, 2, "lease", job_id, k))
        while self.events:
            t, _, kind, job_id, k = heapq.heappop(self.events)
            self.clock.set(t)
            at = self.start + k * MINUTE
            if kind == "claim":
                for shard in range(self.engine.store.shards):
                    claim_page(self.engine.store, self.engine.queue, shard, t, lookahead_ms=self.lookahead_ms)
            elif kind == "lease":
                job = self.engine.store.get_job(job_id)
                lease = self.engine.store.lease_run(job_id, at, f"w{k}", t, LEASE_MS, overlap=job.overlap)
                if lease.outcome is LeaseOutcome.LEASED:
                    heapq.heappush(self.events, (t + jobs[job_id], 1, "finish", job_id, k))
                else:
                    assert lease.outcome is LeaseOutcome.SKIPPED, (lease.outcome, lease.run)
            elif not _succeed(self.engine, job_id, at, f"w{k}", t):  # finish
                self.refused.add((job_id, at))


def expected(overlap: Overlap, duration_ms: int) -> list[RunState]:
    """The model: each run's end state, in order."""
    states: list[RunState] = []
    busy_until = -1  # when the last executed run ends
    for k in range(RUNS):
        at = k * MINUTE
        if overlap is Overlap.FORBID and busy_until > at:
            states.append(RunState.CANCELLED)
            continue
        if overlap is Overlap.REPLACE and busy_until > at:
            states[-1] = RunState.CANCELLED  # the open predecessor is executed and cancelled
        states.append(RunState.SUCCEEDED)
        busy_until = at + duration_ms
    return states


@pytest.mark.parametrize("lookahead_ms", LOOKAHEADS_MS)
def test_overlap_sweep_durations_by_lookahead(
    engine: Engine, engine_kind: str, clock: ManualClock, lookahead_ms: int
) -> None:
    start = (clock.now_ms() // MINUTE + 2) * MINUTE
    durations = AWS_DURATIONS_MS if engine_kind == "aws" else DURATIONS_MS
    jobs = {
        _job(engine, clock, overlap, start).id: (overlap, duration)
        for overlap in (Overlap.FORBID, Overlap.REPLACE, Overlap.ALLOW)
        for duration in durations
        if overlap is not Overlap.ALLOW or duration == 90 * SECOND
    }
    timeline = Timeline(engine, clock, lookahead_ms, start)
    timeline.run({job_id: duration for job_id, (_, duration) in jobs.items()})

    failures = []
    for job_id, (overlap, duration) in jobs.items():
        runs = sorted(engine.store.list_runs(job_id, RunQuery(limit=50)).items, key=lambda r: r.scheduled_at)
        got = [r.state for r in runs]
        want = expected(overlap, duration)
        if got != want:
            failures.append((overlap.value, duration, [s.value for s in got], [s.value for s in want]))
        for run in runs:
            refused = (job_id, run.scheduled_at) in timeline.refused
            # a finish is refused only for a run replaced while it was still running
            assert refused == (run.state is RunState.CANCELLED and run.started_at is not None), (overlap, run)
            if run.state is RunState.CANCELLED:
                assert f"overlap={overlap.value}" in (run.note or "")
    assert not failures, failures


# -- the reproductions ------------------------------------------------------------------


def _states(engine: Engine, job: Job) -> list[RunState]:
    return [
        r.state for r in sorted(engine.store.list_runs(job.id, RunQuery(limit=50)).items, key=lambda r: r.scheduled_at)
    ]


def test_forbid_with_58_s_runs_and_3_s_lookahead_loses_no_run(engine: Engine, clock: ManualClock) -> None:
    start = (clock.now_ms() // MINUTE + 2) * MINUTE
    job = _job(engine, clock, Overlap.FORBID, start)
    Timeline(engine, clock, 3 * SECOND, start).run({job.id: 58 * SECOND})
    assert _states(engine, job) == [RunState.SUCCEEDED] * RUNS  # was: every other run cancelled


def test_forbid_with_1_s_runs_and_60_s_lookahead_loses_no_run(engine: Engine, clock: ManualClock) -> None:
    start = (clock.now_ms() // MINUTE + 2) * MINUTE
    job = _job(engine, clock, Overlap.FORBID, start)
    Timeline(engine, clock, 60 * SECOND, start).run({job.id: SECOND})
    assert _states(engine, job) == [RunState.SUCCEEDED] * RUNS  # was: every other run "still scheduled"


def test_replace_keeps_runs_that_finished_before_the_next_instant(engine: Engine, clock: ManualClock) -> None:
    start = (clock.now_ms() // MINUTE + 2) * MINUTE
    job = _job(engine, clock, Overlap.REPLACE, start)
    timeline = Timeline(engine, clock, 3 * SECOND, start)
    timeline.run({job.id: 58 * SECOND})
    assert _states(engine, job) == [RunState.SUCCEEDED] * RUNS  # was: every run cancelled
    assert timeline.refused == set()  # was: the succeeded target's finish refused


# -- the rule at the lease ----------------------------------------------------------------------


def test_forbid_looks_past_skipped_runs_to_the_one_still_running(engine: Engine, clock: ManualClock) -> None:
    # Given a run that started at t0 and is still running, and two runs after it already skipped
    t0 = (clock.now_ms() // MINUTE + 1) * MINUTE
    job = _job(engine, clock, Overlap.FORBID, t0 + 4 * MINUTE)
    first = make_run(job, t0, clock)
    later = [make_run(job, t0 + k * MINUTE, clock) for k in (1, 2, 3)]
    engine.store.insert_runs([first, *later])
    engine.store.lease_run(job.id, t0, "w0", t0, LEASE_MS, overlap=Overlap.FORBID)
    for k, run in enumerate(later[:2], start=1):
        skipped = engine.store.lease_run(
            job.id, run.scheduled_at, "w", t0 + k * MINUTE, LEASE_MS, overlap=Overlap.FORBID
        )
        assert skipped.outcome is LeaseOutcome.SKIPPED
        assert skipped.run is not None and skipped.run.state is RunState.CANCELLED
        assert first.run_id in (skipped.run.note or "")
    # When the first finishes, then the fourth run's instant comes: it runs
    assert _succeed(engine, job.id, t0, "w0", t0 + 2 * MINUTE + 30 * SECOND)
    third = engine.store.lease_run(job.id, t0 + 3 * MINUTE, "w3", t0 + 3 * MINUTE, LEASE_MS, overlap=Overlap.FORBID)
    assert third.outcome is LeaseOutcome.LEASED


def test_a_redelivered_skipped_run_is_a_duplicate_and_later_leases_do_not_re_decide(
    engine: Engine, clock: ManualClock
) -> None:
    t0 = (clock.now_ms() // MINUTE + 1) * MINUTE
    job = _job(engine, clock, Overlap.FORBID, t0 + 2 * MINUTE)
    runs = [make_run(job, t0 + k * MINUTE, clock) for k in (0, 1)]
    engine.store.insert_runs(runs)
    engine.store.lease_run(job.id, t0, "w0", t0, LEASE_MS, overlap=Overlap.FORBID)
    t1 = t0 + MINUTE
    assert (
        engine.store.lease_run(job.id, t1, "w1", t1, LEASE_MS, overlap=Overlap.FORBID).outcome is LeaseOutcome.SKIPPED
    )
    again = engine.store.lease_run(job.id, t1, "w1", t1 + SECOND, LEASE_MS, overlap=Overlap.FORBID)
    assert again.outcome is LeaseOutcome.FINISHED
    # A takeover of the still-running first run is not its first lease: no overlap decision
    taken = engine.store.lease_run(job.id, t0, "w9", t0 + LEASE_MS + 1, LEASE_MS, overlap=Overlap.FORBID)
    assert taken.outcome is LeaseOutcome.LEASED


def test_replace_cancels_every_open_earlier_run_at_the_new_instant(engine: Engine, clock: ManualClock) -> None:
    t0 = (clock.now_ms() // MINUTE + 1) * MINUTE
    job = _job(engine, clock, Overlap.REPLACE, t0 + 3 * MINUTE)
    runs = [make_run(job, t0 + k * MINUTE, clock) for k in (0, 1, 2)]
    engine.store.insert_runs(runs)
    engine.store.lease_run(job.id, t0, "w0", t0, LEASE_MS)  # allow at the time: both run
    engine.store.lease_run(job.id, t0 + MINUTE, "w1", t0 + MINUTE, LEASE_MS)
    t2 = t0 + 2 * MINUTE
    lease = engine.store.lease_run(job.id, t2, "w2", t2, LEASE_MS, overlap=Overlap.REPLACE)
    assert lease.outcome is LeaseOutcome.LEASED
    replaced = [engine.store.get_run(job.id, r.scheduled_at) for r in runs[:2]]
    assert [r.state for r in replaced] == [RunState.CANCELLED, RunState.CANCELLED]
    assert all(runs[2].run_id in (r.note or "") for r in replaced)
    assert not _succeed(engine, job.id, t0, "w0", t2 + 1)  # the replaced attempt's finish is refused


def test_the_scan_stops_at_a_run_that_started_and_ended() -> None:
    def run(state: RunState, started: bool) -> Run:
        return Run(
            job_id="job_x",
            scheduled_at=0,
            owner="o",
            state=state,
            deadline_at=0,
            created_at=0,
            started_at=1 if started else None,
        )

    scanned: list[Run] = []

    def earlier():  # type: ignore[no-untyped-def]
        for r in (run(RunState.CANCELLED, False), run(RunState.SUCCEEDED, True), run(RunState.RUNNING, True)):
            scanned.append(r)
            yield r

    assert rules.overlap_blockers(Overlap.FORBID, earlier()) == []
    assert len(scanned) == 2  # nothing before a settled run is read


# -- through the worker -------------------------------------------------------------------------


class SlowTargets:
    """A target that takes ``duration_ms`` of manual-clock time and succeeds."""

    def __init__(self, clock: ManualClock, duration_ms: int) -> None:
        self.clock, self.duration_ms = clock, duration_ms

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        self.clock.advance(self.duration_ms)
        return TargetResult(ok=True, status_code=200)


def test_the_worker_passes_the_policy_to_the_lease_and_drops_a_skipped_run(
    embedded_engine: Engine, clock: ManualClock
) -> None:
    engine = embedded_engine
    t0 = (clock.now_ms() // MINUTE + 1) * MINUTE
    job = _job(engine, clock, Overlap.FORBID, t0 + 2 * MINUTE)
    engine.store.insert_runs([make_run(job, t0 + k * MINUTE, clock) for k in (0, 1)])
    engine.store.lease_run(job.id, t0, "w0", t0, LEASE_MS)  # still running at t0 + 1 min
    from punctual.port import Dispatch

    clock.set(t0 + MINUTE)
    engine.queue.send([Dispatch(make_run(job, t0 + MINUTE, clock).run_id, not_before=t0 + MINUTE)])
    (delivery,) = engine.queue.receive(1, visibility_s=60)
    outcome = process_delivery(
        delivery,
        store=engine.store,
        queue=engine.queue,
        targets=SlowTargets(clock, SECOND),  # type: ignore[arg-type]
        clock=clock,
        worker_id="w1",
        options=ExecutionOptions(lease_margin_s=1),
    )
    assert outcome is Outcome.SKIPPED
    assert engine.store.get_run(job.id, t0 + MINUTE).state is RunState.CANCELLED
    assert engine.queue.receive(1, visibility_s=60) == []  # the message was deleted


def test_the_batched_lease_applies_the_same_rule(engine: Engine, clock: ManualClock) -> None:
    from punctual.port import LeaseRequest

    t0 = (clock.now_ms() // MINUTE + 1) * MINUTE
    forbid = _job(engine, clock, Overlap.FORBID, t0 + 2 * MINUTE)
    replace = _job(engine, clock, Overlap.REPLACE, t0 + 2 * MINUTE)
    for job in (forbid, replace):
        engine.store.insert_runs([make_run(job, t0 + k * MINUTE, clock) for k in (0, 1)])
        engine.store.lease_run(job.id, t0, "w0", t0, LEASE_MS)  # still running at t0 + 1 min
    t1 = t0 + MINUTE
    requests = [LeaseRequest(job.id, t1, LEASE_MS, job.overlap) for job in (forbid, replace)]
    skipped, leased = engine.store.lease_runs(requests, "w1", t1)
    assert (skipped.outcome, leased.outcome) == (LeaseOutcome.SKIPPED, LeaseOutcome.LEASED)
    assert engine.store.get_run(forbid.id, t0).state is RunState.RUNNING
    assert engine.store.get_run(replace.id, t0).state is RunState.CANCELLED


@pytest.mark.parametrize(
    ("overlap", "outcome", "earlier", "manual_ends"),
    [
        (Overlap.FORBID, Outcome.SKIPPED, RunState.RUNNING, RunState.CANCELLED),
        (Overlap.REPLACE, Outcome.SUCCEEDED, RunState.CANCELLED, RunState.SUCCEEDED),
    ],
)
def test_a_manual_run_honours_its_jobs_overlap_at_its_lease(
    engine: Engine,
    engine_kind: str,
    clock: ManualClock,
    overlap: Overlap,
    outcome: Outcome,
    earlier: RunState,
    manual_ends: RunState,
) -> None:
    from punctual.jobs.runs import trigger_job
    from tests.contract.test_execution import OK, OWNER, FakeTargets, RecordingAlerter, process, receive_one

    # Given a job whose scheduled run is still running when its owner triggers it
    job = make_job(OWNER, clock, shards=engine.store.shards, overlap=overlap)
    engine.store.create_job(job)
    running = make_run(job, clock.now_ms(), clock)
    assert engine.store.insert_runs([running]) == [True]
    engine.store.lease_run(job.id, running.scheduled_at, "another-worker", clock.now_ms(), LEASE_MS)
    clock.advance(SECOND)
    manual = trigger_job(engine.store, engine.queue, OWNER, job.id, clock.now_ms())
    # When a worker takes the manual run
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), RecordingAlerter()) is outcome
    # Then its job's overlap decided it, as for a scheduled run: forbid skips it, replace cancels the other
    assert engine.store.get_run(job.id, running.scheduled_at).state is earlier
    ended = engine.store.get_run(job.id, manual.scheduled_at)
    assert ended.state is manual_ends
    if overlap is Overlap.FORBID:  # never called, and it says why
        assert ended.attempts == [] and "overlap=forbid" in (ended.note or "")
    else:
        assert "overlap=replace" in (engine.store.get_run(job.id, running.scheduled_at).note or "")
