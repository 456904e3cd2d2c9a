"""A seeded, randomized simulation of the whole system with the user in it: the real scheduler,
workers and reaper, in one process, on simulated time, over any engine, with faults and user
actions at random steps, checked against the run contract (``tests.faults.promises``).

Components (each with its own clock):
- two schedulers, each owning half the shards, their clocks corrected (residual error ±1 s) but
  now and then jumping up to ±30 s (their correctness never depends on time);
- three workers as the deployed worker runs (``tests.faults.sim_worker``): pre-leasing on, events
  at their instants, heartbeats while a call runs; one of them without pre-leasing (the Lambda
  worker's way); their clocks are corrected (residual error ±1 s);
- a reaper every 20-60 s (corrected clock);
- the user (``tests.faults.sim_user``): create, PATCH, pause, resume, delete, trigger, limits (the
  owner's, and in a third of the scenarios jobs' keyed ``limits``), and two concurrent edits of the
  dependency graph;
- in a third of the scenarios, callback jobs' targets (``tests.faults.sim_callbacks``): they answer
  202, then heartbeat and complete through the API's callback service, lost, twice or late.

Faults, through proxies around the store and queue (``tests.faults.injection``): a process killed
just before or after any write (a killed worker loses what it held and comes back with a new id),
throttled reads and writes, lost and duplicated messages, calls that outlive their lease (a
stalled worker) or take most of their timeout, clock jumps.

Then faults stop, jobs are paused, and the components run until every run is terminal and no
message is left; :func:`check_invariants` then checks the ledger and the store.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

from punctual import ids
from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.errors import PunctualError, Throttled
from punctual.execution import batch
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets.types import TargetResult
from punctual.jobs.lifecycle import pause_job
from punctual.model import Completion, JobStatus, Run, RunState
from punctual.port import Engine, Finish, LeaseOutcome, RunQuery
from punctual.reaping.reaper import ReapOptions, reap_once
from punctual.runs.alerts import LogAlerter
from punctual.runs.retry import Jitter
from punctual.scheduling import cron
from punctual.scheduling.planning import PlanOptions
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions
from punctual.scheduling.shards import OwnershipOptions
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import LimitCache, defaults_from
from tests.faults.injection import WRITE_FAULTS, Crash, Faults, FaultyEngine, FaultyQueue, FaultyStore, SkewedClock
from tests.faults.promises import Ledger, check_acyclic, check_limit_rate, check_priority
from tests.faults.sim_callbacks import Targets
from tests.faults.sim_user import User
from tests.faults.sim_worker import SimWorker, scripted

SECOND, MINUTE = 1_000, 60_000
MAX_SKEW_MS = 30_000  # schedulers: raw clocks
MAX_RESIDUAL_MS = 1_000  # workers and the reaper: clocks corrected by the measured skew
OWNER = "owner-chaos"
PRELEASE_S = 2
# Half the scenarios wait the long ways at the scale of their short backoffs (1-10 s), so that
# re-sent waits, relays and retries parked for the reaper meet the faults (punctual.execution.waits)
SHORT_WAITS = {"hold_max_ms": 2 * SECOND, "parked_lead_ms": 4 * SECOND, "resend_max_ms": 6 * SECOND}


@dataclass
class Outcome:
    seed: int
    fault_points: int
    injected: dict[str, int]
    runs: int
    calls: int
    simulated_s: int


class Simulation:
    """One seeded scenario over one engine."""

    def __init__(
        self,
        engine: Engine,
        clock: ManualClock,
        seed: int,
        *,
        rate: float,
        jobs: int,
        fault_s: int,
        max_step_s: int = 4,
        user_rate: float = 0.3,
        slow_calls: bool = True,
    ) -> None:
        self.engine, self.clock, self.seed = engine, clock, seed
        self.slow_calls = slow_calls  # some calls take most of their timeout (off: every target answers at once)
        self.max_step_s, self.user_rate = max_step_s, user_rate
        self.rng = random.Random(seed)
        self.faults = Faults(random.Random(seed * 7919 + 1), rate)
        self.fault_s = fault_s
        self.store = FaultyStore(engine.store, self.faults)
        self.store.observe = self._observe
        self.queue = FaultyQueue(engine.queue, self.faults)
        self.faulty = FaultyEngine(self.store, self.queue, engine.dead_letters, engine.store.shards)
        self.ledger = Ledger()
        # half the scenarios claim cron jobs a window ahead (Settings.claim_window_s): its own draw
        self.window_ms = 5 * 60_000 if random.Random(seed * 2_750_159 + 11).random() < 0.5 else 0
        waits = SHORT_WAITS if random.Random(seed * 104_729 + 3).random() < 0.5 else {}  # keeps self.rng's draws
        self.options = ExecutionOptions(
            lease_margin_s=30,
            jitter=Jitter.NONE,
            retry_grace_ms=60_000,
            prelease_s=PRELEASE_S,
            max_early_ms=1_500 + PRELEASE_S * SECOND,
            **waits,
        )
        self.settings = Settings(tenant_max_runs_per_minute=None)
        self._gates: dict[int, Gate] = {}
        self.plans: dict[str, int] = {}  # job id -> attempts that fail before one succeeds
        self.kinds: dict[str, str] = {}
        self.job_ids: list[str] = []
        self.events: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.actor: tuple[str, Any] = ("user", clock)
        self.scheduler_clocks = [SkewedClock(clock, self._skew(MAX_RESIDUAL_MS)) for _ in range(2)]
        self.reaper_clock = SkewedClock(clock, self._skew(MAX_RESIDUAL_MS))
        self.schedulers = [self._scheduler(i) for i in range(2)]
        self.workers = [
            SimWorker(self, i, SkewedClock(clock, self._skew(MAX_RESIDUAL_MS)), prelease=i < 2) for i in range(3)
        ]
        self.next_reap = clock.now_ms()
        self.limited = self.rng.random() < 1 / 3
        keyed = random.Random(seed * 15_485_863 + 5)  # its own draws: self.rng's stay as they were
        self.keyed = keyed.random() < 1 / 3  # a third of the scenarios: jobs with keyed limits
        self.key_cap, self.key_rate = keyed.choice((1, 2)), keyed.choice((3, 6))
        self.callbacks = Targets(self)  # callback jobs' targets, in a third of the scenarios (own draws)
        self.user = User(self, OWNER)
        # job ids from the seed, so that a seed replays the same scenario (shards follow the ids)
        id_rng = random.Random(seed * 31 + 7)
        self._ids = mock.patch.object(ids, "new_job_id", lambda: f"job_{id_rng.getrandbits(128):032x}")
        self._ids.start()
        self._create_jobs(jobs)

    # -- setup ------------------------------------------------------------------------------------

    def _skew(self, bound: int) -> int:
        return self.rng.randint(-bound, bound)

    def _scheduler(self, i: int) -> Scheduler:
        """Scheduler i (a restart keeps its owner id, as a restarted process on its host would)."""
        options = SchedulerOptions(
            lookahead_ms=5_000,  # the default (Settings.lookahead_ms)
            # messages visible early enough to pre-lease; half the scenarios with a claim window
            plan=PlanOptions(early_s=PRELEASE_S, window_ms=self.window_ms),
            ownership=OwnershipOptions(ttl_ms=30_000, renew_every_ms=10_000),
        )
        return Scheduler(
            self.faulty,  # type: ignore[arg-type]
            self.scheduler_clocks[i],
            metrics=m.InMemoryMetrics(),
            options=options,
            instance=i,
            instances=2,
            owner=f"scheduler-{i}",
        )

    def _create_jobs(self, count: int) -> None:
        for i in range(count):
            kind = ("cron", "once", "retrying", "dependent")[i % 4]
            max_fail = self.rng.randint(1, 3) if kind == "retrying" else 0
            created = self.user.create("once" if kind == "retrying" else kind, fail_first=max_fail)
            if created is not None and kind == "retrying":
                self.kinds[created] = "retrying"

    def adopt(self, job_id: str, kind: str, fail_first: int) -> None:
        self.job_ids.append(job_id)
        self.kinds[job_id] = kind
        self.plans[job_id] = fail_first

    def held_jobs(self) -> list[str]:
        """Jobs with a run some worker holds for its instant (where a user's edit is most telling)."""
        return [job_id for worker in self.workers for job_id in worker.holding()]

    def gate(self, clock: SkewedClock) -> Gate:
        key = id(clock)
        if key not in self._gates:  # as gate_for builds it, with a seeded spread of retries
            limits = LimitCache(self.store, defaults_from(self.settings), clock)  # type: ignore[arg-type]
            self._gates[key] = Gate(self.store, limits, clock, rng=random.Random(self.rng.random()))  # type: ignore[arg-type]
        return self._gates[key]

    def target_result(self, leased: batch.Leased, timed_out: bool) -> TargetResult:
        fail = leased.run.attempt <= self.plans.get(leased.job.id, 0)
        if fail or timed_out or leased.job.completion is not Completion.CALLBACK:
            return scripted(fail)
        self.callbacks.accepted(leased, leased.run.worker_id or "")  # it takes the work, and reports later
        return TargetResult(ok=True, status_code=202)

    # -- events -------------------------------------------------------------------------------------

    def schedule(self, at: int, event: Callable[[], None]) -> None:
        heapq.heappush(self.events, (at, next(self._seq), event))

    def _run_events_until(self, until: int) -> None:
        while self.events and self.events[0][0] <= until:
            at, _, event = heapq.heappop(self.events)
            if at > self.clock.now_ms():
                self.clock.advance(at - self.clock.now_ms())
            event()
        if until > self.clock.now_ms():
            self.clock.advance(until - self.clock.now_ms())

    # -- turns --------------------------------------------------------------------------------------

    def scheduler_turn(self, i: int) -> None:
        self.actor = (f"scheduler-{i}", self.scheduler_clocks[i])
        try:
            self.schedulers[i].tick()
        except Crash:
            self.schedulers[i] = self._scheduler(i)  # restarted
        except PunctualError:
            pass  # a failed tick: the loop logs it and ticks again

    def finish_and_ack(self, finishes: Sequence[Finish]) -> list[Run | None]:
        """The engine's finish-and-delete (one transaction on embedded), with a crash around it."""
        kind = self.faults.roll("finish_and_ack", WRITE_FAULTS)
        if kind is not None:
            self.faults.count(kind, "finish_and_ack")
        if kind == "crash_before":
            raise Crash("before finish_and_ack")
        if kind == "throttle":
            raise Throttled("finish_and_ack throttled (injected)")
        results = self.engine.finish_and_ack(finishes)
        if kind == "crash_after":
            raise Crash("after finish_and_ack")
        return results

    def reaper_turn(self) -> None:
        self.actor = ("reaper", self.reaper_clock)
        with contextlib.suppress(Crash, PunctualError):  # died, or a failed pass: the next one repeats it
            reap_once(
                self.store,  # type: ignore[arg-type]
                self.queue,  # type: ignore[arg-type]
                self.engine.dead_letters,
                LogAlerter(),
                self.reaper_clock,
                options=ReapOptions(grace_ms=30_000, min_age_ms=60_000),
            )

    def user_turn(self) -> None:
        self.actor = ("user", self.clock)
        self.user.act()
        self._check_graph()  # only the user changes edges

    def _observe(self, name: str, args: tuple[Any, ...], result: Any) -> None:
        """Writes the ledger must see: the reaper moving a running run on (a takeover of its lease)."""
        actor, clock = self.actor
        if name in ("lease_runs", "lease_run"):  # an attempt counted from here on
            for lease in result if isinstance(result, list) else [result]:
                if lease.outcome is LeaseOutcome.LEASED and lease.run is not None:
                    self.ledger.leased(lease.run, clock.now_ms(), lease.run.scheduled_at)
        if name == "transition_run" and actor == "reaper":
            current = args[0]
            if current.state is RunState.RUNNING:
                self.ledger.taken_from(current, actor, clock.now_ms())
        self.callbacks.observe(name, args, result, actor)

    def step(self) -> None:
        """One slice of simulated time: the events due in it, then each component's turn, in a random order."""
        longest = self.max_step_s if self.faults.enabled else 2 * self.max_step_s  # settling: bigger steps
        self._run_events_until(self.clock.now_ms() + self.rng.randint(1, longest) * SECOND)
        if self.faults.enabled and self.faults.rate and self.rng.random() < 0.05:  # a scheduler's clock jumps
            bound = MAX_SKEW_MS if self.rng.random() < 0.3 else MAX_RESIDUAL_MS
            self.rng.choice(self.scheduler_clocks).offset_ms = self._skew(bound)
            self.faults.count("skew", "clock")
        turns: list[Callable[[], None]] = [
            *(lambda i=i: self.scheduler_turn(i) for i in range(2)),
            *(worker.turn for worker in self.workers),
        ]
        if self.faults.enabled and self.rng.random() < self.user_rate:
            turns.append(self.user_turn)
        self.rng.shuffle(turns)
        if self.clock.now_ms() >= self.next_reap:
            turns.insert(self.rng.randrange(len(turns) + 1), self.reaper_turn)
            self.next_reap = self.clock.now_ms() + self.rng.randint(20, 60) * SECOND
        for turn in turns:
            turn()

    def _check_graph(self) -> None:
        jobs = [self.engine.store.get_job(j) for j in self.job_ids]
        cycle = check_acyclic(jobs)
        if cycle is not None and not any(v.startswith("(d)") for v in self.ledger.violations):
            self.ledger.violations.append(f"(d) at t={self.clock.now_ms()}: a dependency cycle {cycle}")

    # -- the scenario --------------------------------------------------------------------------------

    def close(self) -> None:
        self._ids.stop()

    def run(self, max_settle_s: int = 3_600) -> Outcome:
        try:
            return self._run(max_settle_s)
        finally:
            self.close()

    def _run(self, max_settle_s: int) -> Outcome:
        start = self.clock.now_ms()
        while self.clock.now_ms() - start < self.fault_s * SECOND:
            self.step()
        self.faults.enabled = False
        for job_id in self.job_ids:
            job = self.engine.store.get_job(job_id)
            if job.run_at is None and job.status is JobStatus.ACTIVE:  # cron and dependent jobs
                paused = pause_job(self.engine.store, OWNER, job_id, self.clock.now_ms())
                self.ledger.commit(self.clock.now_ms(), "pause", paused)
        settle_until = self.clock.now_ms() + max_settle_s * SECOND
        steps = 0
        while steps % 8 or not self.settled():  # settling takes minutes of simulated time: check now and then
            if self.clock.now_ms() >= settle_until:
                self.ledger.violations.append(f"not settled: {self.open_summary()}")
                break
            self.step()
            steps += 1
        return Outcome(
            self.seed,
            self.faults.points,
            dict(self.faults.injected),
            len(self.all_runs()),
            len(self.ledger.calls),
            (self.clock.now_ms() - start) // SECOND,
        )

    def all_runs(self) -> list[Run]:
        return [r for job_id in self.job_ids for r in self.engine.store.list_runs(job_id, RunQuery(limit=500)).items]

    def settled(self) -> bool:
        if self.events or self.engine.queue.depth() or self.engine.dead_letters.depth():
            return False
        if any(r.is_open for r in self.all_runs()):
            return False
        # a one-time job not yet claimed
        jobs = [self.engine.store.get_job(j) for j in self.job_ids]
        return not any(job.status is JobStatus.ACTIVE and job.run_at is not None for job in jobs)

    def open_summary(self) -> str:
        return str([(r.run_id, r.state.value, r.attempt, r.note) for r in self.all_runs() if r.is_open][:10])


def limit_scenario(engine: Engine, clock: ManualClock, seed: int) -> list[str]:
    """(e), the floor: an owner at ``max_runs_per_minute`` (with ``max_concurrency`` 1 or none)
    and a backlog of one-time runs due at once, no faults. Every 60 s window while the backlog
    lasts must get at least 90 % of the rate; the ceilings are checked as in every scenario."""
    sim = Simulation(engine, clock, seed, rate=0.0, jobs=0, fault_s=0, max_step_s=1, user_rate=0.0, slow_calls=False)
    rate = sim.rng.choice((4, 6, 10, 12))
    concurrency = sim.rng.choice((None, 1))
    sim.user.limits(concurrency, rate)
    first_due = (clock.now_ms() + 20 * SECOND) // SECOND * SECOND
    backlog = sim.rng.randint(2 * rate, 3 * rate)
    sim.user.create_backlog(backlog, first_due)
    horizon = first_due + (backlog // rate + 2) * MINUTE
    try:
        while clock.now_ms() < horizon and len({c.run_id for c in sim.ledger.calls}) < backlog:
            sim.step()
    finally:
        sim.close()
    starts = sorted(c.began for c in sim.ledger.calls)
    problems = list(sim.ledger.violations)
    started = len({c.run_id for c in sim.ledger.calls})
    if started < backlog:
        problems.append(f"(e) {started} of {backlog} runs started by {horizon}; rate {rate}")
    problems += check_limit_rate(starts, first_due, rate)
    label = f"rate {rate}, max_concurrency {concurrency}, backlog {backlog}"
    return [f"seed {seed} (limits: {label}): {p}" for p in problems]


def priority_scenario(engine: Engine, clock: ManualClock, seed: int) -> list[str]:
    """(j): an owner at ``max_concurrency`` 1 or 2 with a backlog of priority-5 runs and a few
    urgent ones (priority 9, created last) due at once, calls that take a while (the slots are
    handed over: ``punctual.tenancy.line``), no faults. No run of the backlog may start more than
    a few seconds after the instant while an urgent one has not; the ceilings are checked as in
    every scenario, and every run must start."""
    sim = Simulation(engine, clock, seed, rate=0.0, jobs=0, fault_s=0, max_step_s=1, user_rate=0.0, slow_calls=True)
    concurrency = sim.rng.choice((1, 2))
    sim.user.limits(concurrency, None)
    due = (clock.now_ms() + 20 * SECOND) // SECOND * SECOND
    backlog, urgent = sim.rng.randint(4, 10), sim.rng.randint(1, 3)
    sim.user.create_backlog(backlog, due)
    sim.user.create_backlog(urgent, due, priority=9)
    priorities = {job_id: 9 if i >= backlog else 5 for i, job_id in enumerate(sim.job_ids)}
    horizon = due + 30 * MINUTE
    try:
        while clock.now_ms() < horizon and len({c.run_id for c in sim.ledger.calls}) < backlog + urgent:
            sim.step()
    finally:
        sim.close()
    problems = list(sim.ledger.violations)
    started = len({c.run_id for c in sim.ledger.calls})
    if started < backlog + urgent:
        problems.append(f"(f) {started} of {backlog + urgent} runs started by {horizon}")
    problems += check_priority(sim.ledger.calls, priorities, due)
    label = f"max_concurrency {concurrency}, {backlog} + {urgent} urgent"
    return [f"seed {seed} (priority: {label}): {p}" for p in problems]


def check_invariants(sim: Simulation) -> list[str]:
    """Every violation of the contract the scenario showed (an empty list: none)."""
    store = sim.engine.store
    runs = sim.all_runs()
    sim.ledger.check_runs(runs, {job_id: store.get_job(job_id).max_retries for job_id in sim.job_ids})
    problems = list(sim.ledger.violations) + sim.callbacks.ledger.check(sim.ledger.calls)  # (i)
    for job_id in sim.job_ids:
        problems.extend(_schedule_kept(sim, job_id))
    if sim.engine.queue.depth():
        problems.append("messages left in flight")
    if sim.engine.dead_letters.depth():
        problems.append("messages left in the dead-letter queue")
    return [f"seed {sim.seed}: {p}" for p in problems]


def _schedule_kept(sim: Simulation, job_id: str) -> list[str]:
    """For jobs the user never touched after creating them: one run per fire time, none missing
    (a job that names a calendar follows the calendar's edits: its own times are not all runs)."""
    commits = sim.ledger.commits.get(job_id, [])
    # a trigger is a run of its own: it leaves the schedule's runs as they were ((h): never takes one's instant)
    if any(c.kind not in ("create", "trigger") for c in commits) or not commits or commits[0].job.calendar is not None:
        return []
    created = commits[0].job
    runs = sorted(sim.engine.store.list_runs(job_id, RunQuery(limit=500)).items, key=lambda r: r.scheduled_at)
    times = [r.scheduled_at for r in runs if r.trigger.value in ("schedule", "catchup")]
    problems = []
    if len(times) != len(set(times)):
        problems.append(f"two run rows for one time of {job_id}")
    if created.run_at is not None:
        if times != [created.next_run_at]:
            problems.append(f"one-time job {job_id} has runs at {times}, not {created.next_run_at}")
    elif created.schedule is not None and created.next_run_at is not None:
        last = max(times, default=created.next_run_at - 1)
        expected = [
            t
            for t in [created.next_run_at, *cron.fire_times(created.schedule, "UTC", created.next_run_at, last, 10_000)]
            if t <= last
        ]
        if times != expected:
            problems.append(f"cron job {job_id}: missing {sorted(set(expected) - set(times))}")
    return problems


def quiet_logs() -> None:
    for name in ("punctual", "werkzeug", "botocore"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
