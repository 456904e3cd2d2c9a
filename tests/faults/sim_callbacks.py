"""Callback jobs in the simulation (issue 33 §1): their targets answer 202, then report through the
API's callback service (``punctual.execution.callbacks``) from a process of their own, with the
faults a network and a target bring: heartbeats lost, sent twice or late, completions sent twice,
late or never (the target died), and now and then a completion that lands before the worker recorded
the 202 (the target calls back during its own call). The API may die at any write (the store's
faults: ``callback_beat`` and ``callback_complete`` are writes), and a target retries a request that
got no answer.

Invariant (i) of docs/execution.md, checked by :meth:`Completions.check` after every scenario: **a run
completes at most once per attempt, and a completion is never accepted for an attempt that timed out
or was superseded** (a completion written after the reaper timed its attempt out, or after a later
attempt of its run began, is a violation; so is a second completion of one attempt).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from punctual.errors import PunctualError
from punctual.execution import batch
from punctual.execution.callbacks import Callbacks, Ending
from punctual.model import Completion, Run, RunState
from punctual.runs import tokens
from punctual.runs.alerts import LogAlerter
from punctual.runs.callbacks import Report
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import LimitCache, defaults_from
from tests.faults.injection import Crash, SkewedClock

if TYPE_CHECKING:
    from tests.faults.chaos import Simulation
    from tests.faults.promises import Call

SECOND = 1_000
HEARTBEAT_TIMEOUTS_S = (10, 20, 30)
MAX_RESIDUAL_MS = 1_000  # the API's clock, corrected as the workers' are


@dataclass
class Completions:
    """What (i) needs: every completion the store applied, every timeout the reaper wrote."""

    completed: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    timed_out: dict[tuple[str, int], int] = field(default_factory=dict)  # (run, attempt) -> true time
    refused: int = 0  # callbacks answered 401/403/409 (for the report)

    def check(self, calls: list[Call]) -> list[str]:
        """(i) over the scenario: ``calls`` are the ledger's target calls (when each attempt began)."""
        began = {(c.run_id, c.attempt): c.began for c in calls}
        problems = []
        for (run_id, attempt), times in sorted(self.completed.items()):
            where = f"(i) run {run_id} attempt {attempt}"
            if len(times) > 1:
                problems.append(f"{where}: completed {len(times)} times, at {times}")
            at = times[0]
            if (run_id, attempt) in self.timed_out and self.timed_out[(run_id, attempt)] <= at:
                problems.append(
                    f"{where}: completed at t={at} after it timed out at {self.timed_out[(run_id, attempt)]}"
                )
            later = [n for (r, n), t in began.items() if r == run_id and n > attempt and t <= at]
            if later:
                problems.append(f"{where}: completed at t={at} after attempt {min(later)} began")
        return problems


class Targets:
    """The callback jobs' targets, as one process with its own clock (residual skew, as the API's)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.rng = random.Random(sim.seed * 49_979_687 + 13)  # its own draws: a seed's others stay as they were
        self.enabled = self.rng.random() < 1 / 3  # a third of the scenarios have callback jobs
        self.clock = SkewedClock(sim.clock, self.rng.randint(-MAX_RESIDUAL_MS, MAX_RESIDUAL_MS))
        self.ledger = Completions()
        limits = LimitCache(sim.store, defaults_from(sim.settings), self.clock)  # type: ignore[arg-type]
        gate = Gate(sim.store, limits, self.clock, rng=random.Random(self.rng.random()))  # type: ignore[arg-type]
        ending = Ending(sim.store, sim.queue, LogAlerter(), sim.options, gate=gate)  # type: ignore[arg-type]
        self.service = Callbacks(ending, sim.engine.keys, self.clock)

    def fields(self) -> dict[str, object]:
        """A new job's completion fields: half the jobs of a callback scenario are callback jobs."""
        if not self.enabled or self.rng.random() >= 0.5:
            return {}
        return {"completion": Completion.CALLBACK.value, "heartbeat_timeout_s": self.rng.choice(HEARTBEAT_TIMEOUTS_S)}

    # -- a target that answered 202 ------------------------------------------------------------------

    def accepted(self, leased: batch.Leased, worker_id: str) -> None:
        """The target of ``leased`` answers 202 to its call now (its worker records it next): plan
        what it reports, and when."""
        run, job = leased.run, leased.job
        self.sim.faults.injected["callback_accepted"] += 1  # (reported with the faults: how often it ran)
        token = tokens.mint(self.sim.engine.keys.callback_key(), run.run_id, run.attempt, worker_id)
        faults = self.sim.faults.enabled
        if faults and self.rng.random() < 0.1:  # it reports before its answer is recorded
            self._complete(run.run_id, token, self._report(), retries=1)
            return
        hb = job.heartbeat_ms
        at = self.sim.clock.now_ms()
        for _ in range(self.rng.randint(0, 3)):
            at += int(self.rng.uniform(0.3, 0.9) * hb)
            fate = self.rng.choices(
                ("send", "lose", "twice", "late"), weights=(6, 1, 1, 1) if faults else (1, 0, 0, 0)
            )[0]
            if fate == "late":
                at += hb
            if fate != "lose":
                for _ in range(2 if fate == "twice" else 1):
                    self._at(at, lambda r=run.run_id: self._beat(r, token))
        at += int(self.rng.uniform(0.2, 0.9) * hb)
        fate = self.rng.choices(("send", "twice", "late", "never"), weights=(6, 1, 1, 1) if faults else (1, 0, 0, 0))[0]
        if fate == "never":
            return  # the target died: the reaper times the attempt out
        if fate == "late":
            at += hb
        report = self._report()
        for _ in range(2 if fate == "twice" else 1):
            self._at(at, lambda r=run.run_id: self._complete(r, token, report, retries=2))

    def _report(self) -> Report:
        draw = self.rng.random()
        if draw < 0.8:
            return Report(succeeded=True, result="done")
        return Report(succeeded=False, result="broke", retryable=draw < 0.9)

    def _at(self, true_ms: int, step: object) -> None:
        self.sim.schedule(true_ms, step)  # type: ignore[arg-type]

    def _beat(self, run_id: str, token: str) -> None:
        self._call(lambda: self.service.heartbeat(run_id, token, "working"))

    def _complete(self, run_id: str, token: str, report: Report, *, retries: int) -> None:
        if not self._call(lambda: self.service.complete(run_id, token, report)) and retries:
            # no answer (the API died, or storage throttled): the target sends it again a little later
            later = self.sim.clock.now_ms() + self.rng.randint(1, 5) * SECOND
            self._at(later, lambda: self._complete(run_id, token, report, retries=retries - 1))

    def _call(self, request: object) -> bool:
        """One request to the API; False when it got no answer (to be sent again)."""
        self.sim.actor = ("api", self.clock)
        try:
            request()  # type: ignore[operator]
        except Crash:
            return False
        except PunctualError as exc:
            if exc.code in ("throttled", "concurrent_modification"):
                return False
            self.ledger.refused += 1  # 401, 403, 404, 409: an answer; nothing was written
            self.sim.faults.injected[f"callback_{exc.code}"] += 1
        return True

    # -- what the store saw ------------------------------------------------------------------------

    def observe(self, name: str, args: tuple[object, ...], result: object, actor: str) -> None:
        """Writes that (i) judges: completions applied, and the reaper's timeouts of accepted runs."""
        now = self.sim.clock.now_ms()
        if name == "callback_complete" and isinstance(result, Run):
            self.ledger.completed[(result.run_id, result.attempt)].append(now)
            self.sim.faults.injected["callback_completed"] += 1
        if name == "transition_run" and actor == "reaper" and isinstance(args[0], Run):
            current = args[0]
            if current.state is RunState.ACCEPTED:
                self.ledger.timed_out.setdefault((current.run_id, current.attempt), now)
