"""The user in the simulation: what a client does through the API's services (``punctual.jobs``,
``punctual.tenancy``, ``punctual.calendars``), at random steps, interleaved with the faults.

Actions: create (cron, one-time or dependent; a third of the cron jobs name the owner's calendar),
PATCH (timeout, schedule, target, depends_on), pause, resume, delete, trigger, a change of the
owner's limits, a change of a job's keyed ``limits`` (in a third of the scenarios:
``Simulation.keyed``), an edit of the calendar (the days it excludes change under claimed runs,
which it must never decide again: invariant (g) of ``tests.faults.promises``), and two PATCHes of
the dependency graph at once (the second request runs entirely while the first is about to write,
as two API processes can interleave). Every action that succeeds is recorded in the ledger as a
commit, with the job as stored right after it; refusals (a cycle, a transition the lifecycle
refuses, a lost race) are answers a client gets, not faults.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import TYPE_CHECKING, Any

from punctual.calendars.service import put_calendar
from punctual.clock import to_datetime
from punctual.errors import PunctualError
from punctual.execution.targets.policy import TargetPolicy
from punctual.jobs import lifecycle, service
from punctual.jobs import runs as job_runs
from punctual.model import Catchup, JobSpec, JobStatus, Overlap, Trigger
from punctual.model.calendars import CalendarSpec
from punctual.model.timing import CalendarMode
from punctual.port import RunQuery
from punctual.tenancy.service import set_tenant

if TYPE_CHECKING:
    from tests.faults.chaos import Simulation

SECOND = 1_000
OPEN_POLICY = TargetPolicy(allow_private=True, allow_loopback=True)  # the targets are simulated
SCHEDULES = ("* * * * *", "*/2 * * * *", "*/3 * * * *")
# keyed limits: two literal keys shared by several jobs (an "upstream API" budget), one per payload
# value, one per job; LIMIT_CAP and LIMIT_RATE are the numbers the scenario's jobs usually give them
SHARED_CAP_KEY, SHARED_RATE_KEY = "upstream-a", "upstream-b"
PAYLOAD_KEY, JOB_KEY = "customer:{payload.x}", "job:{job_id}"
# the store calls where a request writes (the second request of a concurrent pair runs before the first's)
GRAPH_WRITES = frozenset({"update_job", "create_job", "link_dependent", "unlink_dependent", "decide_edges"})
CALENDAR = "sim-days"


class User:
    def __init__(self, sim: Simulation, owner: str) -> None:
        self.sim, self.owner = sim, owner
        self.urls = 0
        # calendar draws from their own generator: the other actions of a seed stay as they were
        self.days_rng = random.Random(sim.seed * 15_485_863 + 11)
        self.calendar_jobs: list[str] = []
        self.instant_rng = random.Random(sim.seed * 7_919 + 3)  # (h)'s triggers on an instant, likewise

    # -- jobs -----------------------------------------------------------------------------------

    def spec(self, kind: str, *, upstream: str | None = None) -> dict[str, Any]:
        sim = self.sim
        self.urls += 1
        fields: dict[str, Any] = {
            "name": f"{kind}-{self.urls}",
            "target": {"type": "http", "url": f"http://192.0.2.{self.urls % 250 + 1}/hook"},
            "timeout_s": sim.rng.choice((1, 5, 10, 30)),
            "max_retries": sim.rng.randint(0, 3),
            "retry": {"backoff_s": sim.rng.randint(1, 5), "max_backoff_s": 10},
            "catchup": Catchup.BACKFILL.value,
            "max_backfill": 50,
            "overlap": sim.rng.choice((Overlap.ALLOW, Overlap.ALLOW, Overlap.FORBID, Overlap.REPLACE)).value,
        }
        if kind == "dependent" and upstream is not None:
            fields["depends_on"] = {"jobs": [upstream], "when": "finished"}
        elif kind == "once":
            at = (sim.clock.now_ms() + sim.rng.randint(5, 90) * SECOND) // SECOND * SECOND
            fields["run_at"] = to_datetime(at).astimezone(UTC).isoformat()
        else:
            fields["schedule"] = sim.rng.choice(SCHEDULES)
            if self.days_rng.random() < 1 / 3:
                self._ensure_calendar()
                fields["calendar"] = {"name": CALENDAR, "mode": self.days_rng.choice(list(CalendarMode)).value}
        return fields | sim.callbacks.fields()  # a callback job (its own draws: tests.faults.sim_callbacks)

    def create_backlog(self, count: int, at: int, *, priority: int | None = None) -> None:
        """``count`` one-time jobs due at ``at`` (true time), overlap allow, that succeed at once
        (of ``priority``, if given)."""
        for _ in range(count):
            fields = {**self.spec("once"), "run_at": to_datetime(at).astimezone(UTC).isoformat(), "overlap": "allow"}
            fields.pop("completion", None)  # answered at once: the rate floor is measured on plain calls
            fields.pop("heartbeat_timeout_s", None)
            if priority is not None:
                fields["priority"] = priority
            spec = JobSpec.model_validate(fields)
            job = service.create_job(self.sim.store, self.owner, spec, self.sim.clock.now_ms(), policy=OPEN_POLICY).job  # type: ignore[arg-type]
            self.sim.ledger.commit(self.sim.clock.now_ms(), "create", job)
            self.sim.adopt(job.id, "once", 0)

    def create(self, kind: str, *, fail_first: int = 0) -> str | None:
        upstream = None
        if kind == "dependent":
            live = self._live_jobs()
            if not live:
                return None
            upstream = self.sim.rng.choice(live)
        fields = self.spec(kind, upstream=upstream)
        if self.sim.keyed and self.sim.rng.random() < 0.5:  # created with keyed limits
            fields |= self.keyed_fields()
        spec = JobSpec.model_validate(fields)
        created = self._do("create", lambda now: service.create_job(
            self.sim.store, self.owner, spec, now, policy=OPEN_POLICY  # type: ignore[arg-type]
        ).job)  # fmt: skip
        if created is None:
            return None
        self.sim.adopt(created.id, kind, fail_first)
        if created.calendar is not None:
            self.calendar_jobs.append(created.id)
        return created.id

    def act(self) -> None:
        """One action at random, on one of the owner's jobs."""
        rng = self.sim.rng
        if self.calendar_jobs and self.days_rng.random() < 0.1:
            self.edit_calendar()
            return
        action = rng.choices(
            ("create", "patch", "pause", "resume", "delete", "trigger", "limits", "graph_race"),
            weights=(2, 6, 3, 3, 1, 2, 3 if self.sim.keyed else 1, 1),
        )[0]
        if action == "create":
            self.create(rng.choice(("cron", "once", "dependent")))
            return
        if action == "limits":
            if self.sim.keyed and (not self.sim.limited or rng.random() < 0.5):
                self.keyed_limits()
            elif self.sim.limited:  # a third of the scenarios have an owner with limits
                self.limits()
            return
        if action == "graph_race":
            self.graph_race()
            return
        live = self._live_jobs()
        if not live:
            return
        held = [j for j in self.sim.held_jobs() if j in live]
        job_id = rng.choice(held if held and rng.random() < 0.5 else live)  # edits land on runs about to start
        if action == "patch":
            self.patch(job_id)
        elif action == "pause":
            self._do("pause", lambda now: lifecycle.pause_job(self.sim.store, self.owner, job_id, now))  # type: ignore[arg-type]
        elif action == "resume":
            self._do("resume", lambda now: lifecycle.resume_job(self.sim.store, self.owner, job_id, now))  # type: ignore[arg-type]
        elif action == "delete":
            self._do(
                "delete",
                lambda now: lifecycle.delete_job(self.sim.store, self.owner, job_id, now, force=rng.random() < 0.5),  # type: ignore[arg-type]
            )
        elif action == "trigger":
            self._trigger(job_id)

    def around(self, job_ids: list[str], instant: int) -> None:
        """Now and then, plan an action on one of ``job_ids`` for a random moment between now and
        just after ``instant`` (true time): edits land where a run is held for its instant."""
        sim = self.sim
        if not sim.faults.enabled or not sim.user_rate or sim.rng.random() >= 0.3:
            return
        job_id = sim.rng.choice(job_ids)
        at = sim.rng.randint(sim.clock.now_ms(), instant + SECOND)
        action = sim.rng.choice(("patch", "patch", "pause", "delete", "resume", *(("limits",) if sim.keyed else ())))
        if self.instant_rng.random() < 0.15:  # (h): a trigger on the very instant (own draws: seeds keep their steps)
            at, action = max(sim.clock.now_ms(), instant), "trigger"

        def act() -> None:
            sim.actor = ("user", sim.clock)
            if action == "patch":
                self.patch(job_id, timeout_first=True)
            elif action == "pause":
                self._do("pause", lambda now: lifecycle.pause_job(sim.store, self.owner, job_id, now))  # type: ignore[arg-type]
            elif action == "resume":
                self._do("resume", lambda now: lifecycle.resume_job(sim.store, self.owner, job_id, now))  # type: ignore[arg-type]
            elif action == "limits":
                self.keyed_limits(job_id)
            elif action == "trigger":
                self._trigger(job_id)
            else:
                self._do("delete", lambda now: lifecycle.delete_job(sim.store, self.owner, job_id, now, force=True))  # type: ignore[arg-type]

        sim.schedule(at, act)

    def patch(self, job_id: str, *, timeout_first: bool = False) -> None:
        """A PATCH of one field; ``timeout_first``: half the time a much longer timeout (the
        lease the job's next attempt needs changes under a held run)."""
        rng = self.sim.rng
        job = self.sim.engine.store.get_job(job_id)
        if timeout_first and rng.random() < 0.5:
            changes = {"timeout_s": rng.choice((60, 120, 300))}
            self._do(
                "patch",
                lambda now: service.update_job(self.sim.store, self.owner, job_id, changes, now, policy=OPEN_POLICY),  # type: ignore[arg-type]
                fields=frozenset(changes),
            )
            return
        choices: list[dict[str, Any]] = [
            {"timeout_s": rng.choice((1, 5, 10, 30, 60, 120, 300))},
            {"target": {"type": "http", "url": f"http://198.51.100.{rng.randint(1, 250)}/hook"}},
        ]
        if job.schedule is not None:
            choices.append({"schedule": rng.choice(SCHEDULES)})
        if job.run_at is not None:
            at = (self.sim.clock.now_ms() + rng.randint(2, 60) * SECOND) // SECOND * SECOND
            choices.append({"run_at": to_datetime(at).astimezone(UTC).isoformat()})
        if job.depends_on is not None:
            others = [j for j in self._live_jobs() if j != job_id]
            if others:
                choices.append({"depends_on": {"jobs": [rng.choice(others)], "when": "finished"}})
        changes = rng.choice(choices)
        self._do(
            "patch",
            lambda now: service.update_job(self.sim.store, self.owner, job_id, changes, now, policy=OPEN_POLICY),  # type: ignore[arg-type]
            fields=frozenset(changes),
        )

    def graph_race(self) -> None:
        """Two dependent jobs made to depend on each other by two requests at once: at most one
        may win (the graph stays acyclic)."""
        dependents = [j for j in self._live_jobs() if self.sim.engine.store.get_job(j).depends_on is not None]
        if len(dependents) < 2:
            self.create("dependent")
            return
        a, b = self.sim.rng.sample(dependents, 2)

        self.sim.store.before_write_once(GRAPH_WRITES, lambda: self._depend(b, on=a))
        self._depend(a, on=b)
        self.sim.store.before_write_once(frozenset(), None)
        self.sim.faults.count("graph_race", "user")

    def _depend(self, job_id: str, *, on: str) -> None:
        """PATCH ``job_id`` to depend on ``on`` (a request of the graph race)."""
        changes = {"depends_on": {"jobs": [on]}}
        self._do(
            "patch",
            lambda now: service.update_job(self.sim.store, self.owner, job_id, changes, now, policy=OPEN_POLICY),  # type: ignore[arg-type]
            fields=frozenset(changes),
        )

    def limits(self, concurrency: int | None = None, rate: int | None = None) -> None:
        """Set the owner's limits (at random unless given)."""
        rng = self.sim.rng
        if concurrency is None and rate is None:
            concurrency = rng.choice((None, None, 1, 2, 4))
            rate = rng.choice((None, None, 4, 6, 12))
        now = self.sim.clock.now_ms()
        set_tenant(
            self.sim.engine.store, self.owner, {"max_concurrency": concurrency, "max_runs_per_minute": rate}, now
        )
        self.sim.ledger.set_limits(now, concurrency, rate)

    def edit_calendar(self) -> None:
        """Replace the calendar's rules: today or tomorrow (UTC, simulated) excluded, today's weekday,
        only tomorrow, or nothing. The runs of its jobs that exist now are the ledger's to watch."""
        sim, rng = self.sim, self.days_rng
        now = sim.clock.now_ms()
        today = to_datetime(now).astimezone(UTC).date()
        tomorrow = (today + timedelta(days=1)).isoformat()
        rules = rng.choice(
            (
                {},
                {"exclude_dates": [today.isoformat()]},
                {"exclude_dates": [today.isoformat(), tomorrow]},
                {"exclude_weekdays": [today.strftime("%a").upper()]},
                {"include_only": [tomorrow]},
            )
        )
        claimed = [
            r for job_id in self.calendar_jobs for r in sim.engine.store.list_runs(job_id, RunQuery(limit=500)).items
        ]
        put_calendar(sim.engine.store, self.owner, CALENDAR, CalendarSpec.model_validate(rules), now)
        sim.ledger.calendar_edited(now, claimed)
        sim.faults.count("user_calendar", "user")

    def _ensure_calendar(self) -> None:
        if self.sim.engine.store.get_calendar(self.owner, CALENDAR) is None:
            put_calendar(self.sim.engine.store, self.owner, CALENDAR, CalendarSpec(), self.sim.clock.now_ms())

    def keyed_fields(self) -> dict[str, Any]:
        """A job's keyed ``limits`` at random (none at all now and then), with a payload whose ``x``
        the payload key resolves (missing now and then: the empty key). Mostly the scenario's
        numbers for the shared keys; now and then another, as a user who gives one key two numbers."""
        rng, sim = self.sim.rng, self.sim
        cap = sim.key_cap if rng.random() < 0.8 else rng.choice((1, 2, 3))
        rate = sim.key_rate if rng.random() < 0.8 else rng.choice((2, 4, 8))
        limits = rng.choice(
            (
                [],
                [{"key": SHARED_CAP_KEY, "max_concurrency": cap}],
                [{"key": SHARED_RATE_KEY, "max_runs_per_minute": rate}],
                [
                    {"key": SHARED_CAP_KEY, "max_concurrency": cap},
                    {"key": SHARED_RATE_KEY, "max_runs_per_minute": rate},
                ],
                [{"key": SHARED_CAP_KEY, "max_concurrency": cap, "max_runs_per_minute": rate}],
                [{"key": PAYLOAD_KEY, "max_concurrency": 1}, {"key": SHARED_RATE_KEY, "max_runs_per_minute": rate}],
                [{"key": PAYLOAD_KEY, "max_concurrency": cap, "max_runs_per_minute": rate}],
                [{"key": JOB_KEY, "max_concurrency": 1}, {"key": SHARED_CAP_KEY, "max_concurrency": cap}],
            )
        )
        x = rng.choice(("a", "b", "a", None))
        return {"limits": limits, "payload": None if x is None else {"x": x}}

    def keyed_limits(self, job_id: str | None = None) -> None:
        """PATCH a job's keyed ``limits`` (and its payload: the payload key may move)."""
        live = self._live_jobs()
        if job_id is None:
            if not live:
                return
            job_id = self.sim.rng.choice(live)
        changes = self.keyed_fields()
        if self.sim.rng.random() < 0.3:
            del changes["payload"]  # the limits alone
        self._do(
            "patch",
            lambda now: service.update_job(self.sim.store, self.owner, job_id, changes, now, policy=OPEN_POLICY),  # type: ignore[arg-type]
            fields=frozenset(changes),
        )

    def _trigger(self, job_id: str) -> None:
        sim = self.sim
        try:
            run = job_runs.trigger_job(sim.engine.store, sim.engine.queue, self.owner, job_id, sim.clock.now_ms())
        except PunctualError:
            return
        if run.trigger is not Trigger.MANUAL:  # (h): merged into a run the schedule made (or will make)
            sim.ledger.violations.append(
                f"(h) a trigger of {job_id} at {sim.clock.now_ms()} got the {run.trigger} run {run.run_id}"
            )
        sim.ledger.commit(sim.clock.now_ms(), "trigger", sim.engine.store.get_job(job_id))

    # -- helpers --------------------------------------------------------------------------------

    def _live_jobs(self) -> list[str]:
        store = self.sim.engine.store
        return [j for j in self.sim.job_ids if store.get_job(j).status is not JobStatus.DELETED]

    def _do(self, kind: str, action: Callable[[int], Any], *, fields: frozenset[str] = frozenset()) -> Any:
        """Run ``action`` (a request) at the current instant; record its commit if it succeeded."""
        sim = self.sim
        now = sim.clock.now_ms()
        paused = sim.faults.paused
        sim.faults.paused = 1  # a request is not a fault point: the API's crashes are the client's retry
        try:
            job = action(now)
        except PunctualError:
            return None
        finally:
            sim.faults.paused = paused
        sim.ledger.commit(now, kind, sim.engine.store.get_job(job.id), fields)
        sim.faults.count(f"user_{kind}", "user")
        return job
