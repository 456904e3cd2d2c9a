"""``max_runs_per_minute`` under a backlog, deterministically: issue 26, case 7.

The issue's two scenarios, on a manual clock through the worker's real code paths (the batched
worker's ``batch.prepare``/``batch_finish.settle``, or ``process_delivery`` of the threaded and Lambda
workers, with the real gate, store and queue of the embedded engine):

- 12 one-time runs due at once, a limit of 6 per minute, no concurrency limit;
- 12 runs, 4 per minute and ``max_concurrency`` 1.

The worker looks at the queue every 100 ms (a long poll's lateness) and holds a message that is
due within ``max_early_ms`` until its instant, as the async worker does. Starts are measured per
sliding 60 s window (``tests.faults.rate_windows``): never above the limit, and while runs wait,
never fewer than floor(0.9 R) in a window (R - 1 for R <= 10) nor below 90 % of R a minute over
the whole backlog.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution.batch import Leased, Port, prepare
from punctual.execution.batch_finish import Done, drop_or_hide, settle
from punctual.execution.delivery import process_delivery
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets import TargetResult
from punctual.model import Job, Run, RunState
from punctual.port import Delivery, Dispatch, Engine, Tenant
from punctual.runs.alerts import LogAlerter
from punctual.tenancy import rates
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import CACHE_TTL_MS, UNLIMITED, LimitCache
from tests.contract.factories import make_job, make_run
from tests.faults import rate_windows as rw

pytestmark = pytest.mark.faults

OWNER = "tenant-rated"
TICK_MS = 100
OPTIONS = ExecutionOptions(lease_margin_s=30, max_early_ms=3_500, prelease_s=2)
OK = TargetResult(ok=True, status_code=204)


@dataclass
class Bench:
    """One owner's burst, and a worker that polls the queue every tick of a manual clock."""

    engine: Engine
    clock: ManualClock
    call_ms: int = 0  # how long the target takes to answer
    batched: bool = True  # the async worker's batches, or process_delivery per message
    starts: list[int] = field(default_factory=list)  # lease instants of admitted attempts
    most_in_flight: int = 0
    _pending: list[Delivery] = field(default_factory=list)  # received, held until their instant
    _in_flight: list[tuple[int, Leased]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate = Gate(
            self.engine.store, LimitCache(self.engine.store, UNLIMITED, self.clock), self.clock, rng=random.Random(26)
        )
        self.port = Port(
            store=self.engine.store,
            queue=self.engine.queue,
            complete=self.engine.finish_and_ack,
            clock=self.clock,
            worker_id="w1",
            options=OPTIONS,
            alerter=LogAlerter(),
            gate=self.gate,
        )

    def burst(self, count: int) -> tuple[int, list[Run]]:
        due = self.clock.now_ms()
        runs = []
        for _ in range(count):
            job = make_job(OWNER, self.clock, shards=self.engine.store.shards, schedule="0 0 1 1 *", timeout_s=30)
            self.engine.store.create_job(job)
            runs.append(make_run(job, due, self.clock))
        self.engine.store.insert_runs(runs)
        self.engine.queue.send([Dispatch(run.run_id, not_before=due, group=OWNER) for run in runs])
        return due, runs

    def run_for(self, seconds: int) -> None:
        for _ in range(seconds * 1000 // TICK_MS):
            self.clock.advance(TICK_MS)
            self.tick()

    def tick(self) -> None:
        now = self.clock.now_ms()
        self._settle_answered(now)
        received = self.engine.queue.receive(250, OPTIONS.visibility_s)
        early = [d for d in received if d.not_before - now > OPTIONS.max_early_ms]
        if early:
            drop_or_hide(self.port, [], early)
        self._pending += [d for d in received if d.not_before - now <= OPTIONS.max_early_ms]
        due = [d for d in self._pending if d.not_before <= now]
        self._pending = [d for d in self._pending if d.not_before > now]
        if not due:
            return
        if self.batched:
            for leased in prepare(self.port, due).leased:
                self._start(now, leased)
        else:
            for delivery in due:
                process_delivery(
                    delivery,
                    store=self.engine.store,
                    queue=self.engine.queue,
                    targets=self,  # type: ignore[arg-type]
                    clock=self.clock,
                    worker_id="w1",
                    options=OPTIONS,
                    gate=self.gate,
                )
        self._settle_answered(now)

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        """process_delivery's target: answers at once (call_ms is for the batched worker)."""
        self.starts.append(self.clock.now_ms())
        self.most_in_flight = max(self.most_in_flight, 1)
        return OK

    def _start(self, now: int, leased: Leased) -> None:
        self.starts.append(now)
        self._in_flight.append((now + self.call_ms, leased))
        self.most_in_flight = max(self.most_in_flight, len(self._in_flight))

    def _settle_answered(self, now: int) -> None:
        answered = [leased for at, leased in self._in_flight if at <= now]
        if answered:
            self._in_flight = [(at, leased) for at, leased in self._in_flight if at > now]
            settle(self.port, [Done(leased, OK, now, now) for leased in answered])


def measure(starts: list[int], due: int, limit: int) -> dict[str, Any]:
    return {
        "started": len(starts),
        "most_in_any_60s": rw.most_in_any_window(starts),
        "fewest_in_backlog_60s": rw.fewest_in_backlog(starts, due),
        "per_minute": rw.per_minute(starts, due, 4),
        "longest_gap_s": rw.longest_gap(starts, due) / 1000,
        "limit": limit,
    }


SCENARIOS = {
    # the issue: "A limit of 6/min had 12 one-time runs due at once, with no concurrency limit"
    "6_per_minute": ({"max_runs_per_minute": 6}, 12, 0),
    # "With a 4/min limit plus max_concurrency 1, nothing started for 3 minutes" (a 0.5 s target)
    "4_per_minute_one_at_a_time": ({"max_runs_per_minute": 4, "max_concurrency": 1}, 12, 500),
    # a faster limit (the ceiling to the millisecond, 90 % of it per window) and the slowest one
    "60_per_minute": ({"max_runs_per_minute": 60}, 150, 0),
    "60_per_minute_five_at_a_time": ({"max_runs_per_minute": 60, "max_concurrency": 5}, 150, 3_000),
    "1_per_minute": ({"max_runs_per_minute": 1}, 4, 0),
}


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per_message"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_backlog_gets_its_rate_and_never_more(embedded_engine: Engine, clock: ManualClock, scenario, batched):
    limits, count, call_ms = SCENARIOS[scenario]
    rate = limits["max_runs_per_minute"]
    if not batched and call_ms:
        pytest.skip("process_delivery's target answers at once in this bench")
    # Given an owner with the scenario's limits and a burst of runs due at once (off the minute's edge)
    embedded_engine.store.put_tenant(Tenant(owner=OWNER, **limits))
    clock.advance(3_300)
    bench = Bench(embedded_engine, clock, call_ms=call_ms, batched=batched)
    due, runs = bench.burst(count)
    # When the worker drains them for 4 minutes
    bench.run_for(240)
    figures = measure(bench.starts, due, rate)
    print(scenario, "batched" if batched else "per message", figures)
    # Then never more than R starts in any 60 s window, nor more calls at once than allowed
    assert figures["most_in_any_60s"] <= rate, figures
    assert bench.most_in_flight <= limits.get("max_concurrency", count)
    # and while runs waited, every 60 s window held at least floor(0.9 R) starts (R - 1 for R <= 10),
    # the backlog as a whole at least 90 % of R a minute, and every run started
    span_min = (max(bench.starts) - due) / 60_000
    assert figures["started"] == count, figures
    assert len(bench.starts) - 1 >= 0.9 * rate * span_min, (span_min, figures)
    if span_min >= 1:
        assert figures["fewest_in_backlog_60s"] >= rw.floor_for(rate), figures
    # and waiting cost no attempt; every run that started succeeded once
    finished = [embedded_engine.store.get_run(r.job_id, r.scheduled_at) for r in runs]
    assert all(r.attempt == 1 for r in finished if r.state is RunState.SUCCEEDED)
    assert sum(r.state is RunState.SUCCEEDED for r in finished) == figures["started"]


def test_a_lowered_limit_holds_from_when_the_workers_see_it(embedded_engine: Engine, clock: ManualClock):
    # Given 12 starts a minute and a backlog of 40 runs, half a minute in
    store = embedded_engine.store
    store.put_tenant(Tenant(owner=OWNER, max_runs_per_minute=12))
    bench = Bench(embedded_engine, clock)
    bench.burst(40)
    bench.run_for(30)
    before = len(bench.starts)
    # When an operator lowers the limit to 4
    store.put_tenant(Tenant(owner=OWNER, max_runs_per_minute=4))
    seen = clock.now_ms() + CACHE_TTL_MS  # the workers' cached limits are this old at most
    bench.run_for(180)
    # Then every 60 s window that ends in a start made under the new limit holds at most 4,
    # counting the starts made just before the change
    later = [s for s in bench.starts if s >= seen]
    assert later and before >= 5
    assert max(rw.count_in(bench.starts, s - rw.WINDOW_MS + 1) for s in later) <= 4
    # and the backlog still gets the new rate: floor(0.9 * 4) in every window after the first
    assert rw.fewest_in_backlog([s for s in bench.starts if s >= seen + rw.WINDOW_MS], seen + rw.WINDOW_MS) == 3


def test_a_raised_limit_reaches_the_waiting_runs_within_a_minute(embedded_engine: Engine, clock: ManualClock):
    # Given 4 starts a minute and a backlog of 100 runs, half a minute in
    store = embedded_engine.store
    store.put_tenant(Tenant(owner=OWNER, max_runs_per_minute=4))
    bench = Bench(embedded_engine, clock)
    bench.burst(100)
    bench.run_for(30)
    # When an operator raises it to 30
    store.put_tenant(Tenant(owner=OWNER, max_runs_per_minute=30))
    seen = clock.now_ms() + CACHE_TTL_MS
    bench.run_for(180)
    # Then within a minute (the farthest a waiting run looks again) the backlog gets the new rate,
    # and never more
    full = seen + rates.HORIZON_MS
    after = [s for s in bench.starts if s >= full]
    assert rw.most_in_any_window(bench.starts) <= 30
    assert rw.fewest_in_backlog(after, full) >= rw.floor_for(30), rw.per_minute(after, full, 3)
