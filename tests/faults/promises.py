"""What the user was promised, as a ledger the simulation keeps while it runs, and the checks
that compare it with what happened (docs/execution.md, "The run contract").

The ledger records, in true (simulated) time:
- every target call: which run and attempt, which worker, when it began and ended, the lease its
  worker believed it held (in that worker's clock), the job version it used and that job's keyed
  limits, resolved;
- every lease a worker committed, with the worker's clock reading at that moment;
- every user commit (create, PATCH, pause, resume, delete, trigger, tenant limits, a job's keyed
  limits) with the job as stored right after it.

Checks, each named by the invariant of docs/execution.md it checks:
(a) an attempt is recorded only for a call that began: every attempt number a run counts had its
    call begin, or its lease was committed at (or after) the run's instant by a worker that then
    died before the call could be written (the commit is the attempt's beginning);
(b) two calls of one run never overlap unless the first one's lease (the one its worker held and
    extended; a reserved call's reservation until its confirm) had expired by the clock of whoever
    took the run over, worker or reaper;
(c) a pause or delete committed at least 1 s before an instant means no call for that instant; a
    schedule edit committed by then decides whether the instant exists; a call uses a job at
    least as new as the last edit committed by then;
(d) the dependency graph is acyclic after every step, concurrent edits included;
(e) an owner never has more than ``max_concurrency`` calls in flight nor more than
    ``max_runs_per_minute`` call starts in any 60 s window (:func:`check_limit_rate` checks the
    floor: at least 90 % of the rate while a backlog exists); the same for each resolved key of a
    job's keyed ``limits``, counting the calls whose own job limited that key (:func:`key_ceilings`);
(f) every due run the user did not cancel executes at least once, unless every attempt it was
    allowed was lost at its beginning (its worker died between the lease and the call: as a
    worker dying mid-call, that uses the attempt; ``max_retries`` bounds both). A time the job's
    calendar excludes is recorded cancelled when claimed (never sent, never attempted);
(g) an edit of a calendar never decides a run already claimed: every run that existed when the
    calendar was edited is never afterwards cancelled for the calendar;
(h) a trigger is a run of its own: a trigger on a scheduled instant (the user acts at that very
    millisecond) returns a manual run, never the scheduled one, and the job's scheduled runs stay
    one per fire time (``chaos._schedule_kept`` counts jobs the user only triggered);
(i) a run completes at most once per attempt, and a completion is never accepted for an attempt that
    timed out or was superseded (``tests.faults.sim_callbacks.Completions``: callback jobs' targets);
(j) within one owner's ``max_concurrency``, a run of higher priority is not passed over: no run of
    lower priority due at the same instant starts more than :data:`PASSED_OVER_MS` after it while
    one of higher priority has not started (:func:`check_priority`; the priority scenario).

Times the user commits are true times; a commit within the last second before an instant may or
may not be seen (the contract promises only what was committed at least 1 s before).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

from punctual.model import Job, JobStatus, Run, RunState, Trigger
from punctual.scheduling import cron
from tests.faults.rate_windows import fewest_in_backlog, floor_for

GRACE_MS = 1_000  # what the user committed at least this long before an instant decides it
SKEW_TOLERANCE_MS = 2_500  # workers' residual clock error (corrected clocks) on both sides of a comparison
WINDOW_MS = 60_000
# (j): the slots taken before the urgent runs were seen, a refused urgent run's backoff (1 s), a
# worker's turn (1 s) and slack: a lower priority starting later passed a higher one over
PASSED_OVER_MS = 3_000


def check_priority(calls: list[Call], priorities: dict[str, int], due: int) -> list[str]:
    """(j) for runs due at ``due``, whose jobs have ``priorities`` (job id -> priority): a run's
    first call never begins after ``due`` + :data:`PASSED_OVER_MS` while a run of a higher
    priority has not begun yet (or never does)."""
    first: dict[str, Call] = {}
    for call in sorted(calls, key=lambda c: c.began):
        if call.scheduled_at == due and call.job_id in priorities:
            first.setdefault(call.run_id, call)
    waiting = {p: [c for c in first.values() if priorities[c.job_id] == p] for p in set(priorities.values())}
    problems = []
    for priority, runs in waiting.items():
        higher = [c for p, cs in waiting.items() if p > priority for c in cs]
        never = len([j for j, p in priorities.items() if p > priority]) - len(higher)
        for call in runs:
            if call.began <= due + PASSED_OVER_MS:
                continue
            later = [c for c in higher if c.began > call.began]
            if later or never:
                problems.append(
                    f"(j) a run of priority {priority} ({call.run_id}) started {call.began - due} ms after its"
                    f" instant while {len(later) + never} of higher priority had not"
                )
    return problems[:5]


@dataclass(frozen=True)
class KeyCeiling:
    """One resolved key of a job's ``limits``, with the numbers the job gives it."""

    key: str
    max_concurrency: int | None
    max_runs_per_minute: int | None


_PLACEHOLDER = re.compile(r"\{(job_id|payload\.[A-Za-z0-9_-]+)\}")


def key_ceilings(job: Job) -> tuple[KeyCeiling, ...]:
    """``job``'s ``limits`` resolved as docs/api.md ("Keyed limits") says, written here apart from the
    product: ``{job_id}``, and ``{payload.<field>}`` of a top-level field (a string as itself, a
    missing field as the empty text: the templates the simulated user writes). Entries with the
    same resolved key merge, the lower number of each kind winning."""
    merged: dict[str, tuple[int | None, int | None]] = {}
    for limit in job.limits:

        def value(match: re.Match[str]) -> str:
            if match.group(1) == "job_id":
                return job.id
            found = job.payload.get(match.group(1)[len("payload.") :], "") if isinstance(job.payload, dict) else ""
            return found if isinstance(found, str) else json.dumps(found, separators=(",", ":"), sort_keys=True)

        key = _PLACEHOLDER.sub(value, limit.key)
        concurrency, rate = merged.get(key, (None, None))
        merged[key] = (_lower(concurrency, limit.max_concurrency), _lower(rate, limit.max_runs_per_minute))
    return tuple(KeyCeiling(key, concurrency, rate) for key, (concurrency, rate) in merged.items())


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass
class Call:
    run_id: str
    job_id: str
    owner: str
    scheduled_at: int
    trigger: Trigger
    attempt: int
    worker: str
    began: int  # true time
    lease_end: int  # the lease its worker believes it holds, in that worker's clock
    job_version: int
    ended: int | None = None
    keyed: tuple[KeyCeiling, ...] = ()  # the job's keyed limits, resolved (key_ceilings)


@dataclass(frozen=True)
class Commit:
    at: int  # true time
    kind: str  # create, patch, pause, resume, delete, trigger
    job: Job  # as stored right after the commit
    fields: frozenset[str] = frozenset()  # for a patch: the fields it changed


@dataclass(frozen=True)
class LimitsAt:
    at: int
    max_concurrency: int | None
    max_runs_per_minute: int | None


@dataclass
class Ledger:
    cache_ttl_ms: int = 10_000  # limits reach every worker within this (tenancy.limits.LimitCache)
    calls: list[Call] = field(default_factory=list)
    in_flight: dict[str, list[Call]] = field(default_factory=lambda: defaultdict(list))
    commits: dict[str, list[Commit]] = field(default_factory=lambda: defaultdict(list))
    limits: list[LimitsAt] = field(default_factory=lambda: [LimitsAt(0, None, None)])
    # (run_id, attempt) -> leased at or after the run's instant (the lease is the attempt's beginning)
    leases_at_instant: set[tuple[str, int]] = field(default_factory=set)
    # (g): run id -> (state, note) of every run of a calendar job that existed when its calendar was edited
    claimed_before_edit: dict[str, tuple[RunState, str | None]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    # -- recording ---------------------------------------------------------------------------

    def commit(self, at: int, kind: str, job: Job, fields: frozenset[str] = frozenset()) -> None:
        self.commits[job.id].append(Commit(at, kind, job, fields))

    def calendar_edited(self, at: int, claimed: list[Run]) -> None:
        """The calendar was edited at ``at``; ``claimed`` are its jobs' runs that existed then."""
        for run in claimed:
            self.claimed_before_edit.setdefault(run.run_id, (run.state, run.note))

    def set_limits(self, at: int, max_concurrency: int | None, max_runs_per_minute: int | None) -> None:
        self.limits.append(LimitsAt(at, max_concurrency, max_runs_per_minute))

    def leased(self, run: Run, worker_clock: int, not_before: int) -> None:
        """A worker committed the lease of ``run`` (its attempt) when its clock read ``worker_clock``."""
        if run.attempt > 1 or worker_clock >= not_before:
            self.leases_at_instant.add((run.run_id, run.attempt))

    def begin(self, call: Call, worker_clock: int) -> None:
        """A call began: (b), (c) and (e) are checked against what was in flight and committed."""
        where = f"run {call.run_id} attempt {call.attempt} on {call.worker} at t={call.began}"
        for other in self.in_flight[call.run_id]:
            if worker_clock <= other.lease_end:
                self.violations.append(
                    f"(b) {where}: attempt {other.attempt} of {other.worker} still in flight under a lease "
                    f"ending at {other.lease_end} (its clock); the taker's clock read {worker_clock}"
                )
        self._check_instant(call, where)
        self._check_limits(call, where, worker_clock)
        self._check_keyed(call, where, worker_clock)
        self.calls.append(call)
        self.in_flight[call.run_id].append(call)

    def end(self, call: Call, at: int) -> None:
        if call.ended is None:
            call.ended = at
            self.in_flight[call.run_id].remove(call)

    def taken_from(self, run: Run, actor: str, actor_clock: int) -> None:
        """Someone other than its holder moved ``run`` off its running attempt (the reaper, or a
        takeover): the holder's lease must have expired by that actor's clock."""
        for other in self.in_flight.get(run.run_id, []):
            if other.attempt == run.attempt and actor_clock <= other.lease_end:
                self.violations.append(
                    f"(b) run {run.run_id} attempt {other.attempt} ({other.worker}) in flight under a lease "
                    f"ending at {other.lease_end}; {actor} took it over at its clock {actor_clock}"
                )

    # -- (c) ----------------------------------------------------------------------------------

    def _check_instant(self, call: Call, where: str) -> None:
        commits = self.commits.get(call.job_id, [])
        # by the worker's clock: a call that began before the instant (a clock a little ahead) had less time
        decided_at = min(call.scheduled_at, call.began) - GRACE_MS
        before = [c for c in commits if c.at <= decided_at]
        later = [c for c in commits if decided_at < c.at <= call.began]
        first_call = not any(c.run_id == call.run_id for c in self.calls)
        if not before or not first_call:
            return
        last = before[-1]
        status = last.job.status
        status_changed_later = any(c.kind in ("pause", "resume", "delete") for c in later)
        if status is JobStatus.DELETED and not any(c.kind == "delete" for c in later):
            self.violations.append(f"(c) {where}: job deleted at t={_last(before, 'delete')}, before the instant")
        paused = status is JobStatus.PAUSED and call.trigger is not Trigger.MANUAL
        if paused and not status_changed_later:
            self.violations.append(f"(c) {where}: job paused at t={_last(before, 'pause')}, before the instant")
        if call.trigger in (Trigger.SCHEDULE, Trigger.CATCHUP):
            edits = [c for c in before if c.kind == "patch" and c.fields & {"schedule", "run_at", "timezone"}]
            edited_later = any(c.kind == "patch" and c.fields & {"schedule", "run_at", "timezone"} for c in later)
            # a one-time job paused after its run was claimed, then resumed, gets its run at the resume
            resumed_at = any(c.kind == "resume" and c.at == call.scheduled_at for c in commits)
            if edits and not edited_later and not resumed_at and not _fires_at(last.job, call.scheduled_at):
                self.violations.append(f"(c) {where}: the schedule committed at t={edits[-1].at} has no such instant")
        patches = [c for c in before if c.kind == "patch"]
        if patches and not any(c.kind == "patch" for c in later) and call.job_version < patches[-1].job.version:
            self.violations.append(
                f"(c) {where}: called with job version {call.job_version}, older than the edit "
                f"committed at t={patches[-1].at} (version {patches[-1].job.version})"
            )

    # -- (e) ----------------------------------------------------------------------------------

    def _limits_around(self, at: int) -> tuple[int | None, int | None]:
        """The loosest limits any worker may still apply at ``at`` (a change takes a cache TTL)."""
        times = [entry.at for entry in self.limits]
        start = max(0, bisect.bisect_right(times, at - self.cache_ttl_ms - SKEW_TOLERANCE_MS) - 1)
        stop = bisect.bisect_right(times, at)
        window = self.limits[start:stop]
        return _loosest(e.max_concurrency for e in window), _loosest(e.max_runs_per_minute for e in window)

    def _check_limits(self, call: Call, where: str, worker_clock: int) -> None:
        concurrency, rate = self._limits_around(call.began)
        # calls and starts from before the last change of the limits (plus its propagation) were not
        # counted against them: a call running when a limit is first set holds no slot
        changed = max(e.at for e in self.limits if e.at <= call.began) + self.cache_ttl_ms + SKEW_TOLERANCE_MS
        if concurrency is not None:
            # a call past the lease its worker held is lost to the system (its run may be taken over)
            running = 1 + sum(
                1
                for calls in self.in_flight.values()
                for c in calls
                if c.owner == call.owner and c.lease_end > worker_clock + SKEW_TOLERANCE_MS and c.began > changed
            )
            if running > concurrency:
                self.violations.append(f"(e) {where}: {running} calls in flight, max_concurrency {concurrency}")
        if rate is not None:
            since = max(call.began - (WINDOW_MS - 2 * SKEW_TOLERANCE_MS), changed)
            started = 1 + sum(1 for c in self.calls if c.owner == call.owner and c.began > since)
            if started > rate:
                self.violations.append(f"(e) {where}: {started} starts within 60 s, max_runs_per_minute {rate}")

    def _check_keyed(self, call: Call, where: str, worker_clock: int) -> None:
        """(e) for the call's keyed limits, as for the owner's: no more calls in flight that hold a
        slot of the key (their job capped the key when they began; a call past its lease is lost to
        the system), and no more starts that counted against the key (their job gave it a rate)
        within 60 s, than the numbers allow. A job's limits are read with the job, never cached: no
        propagation allowance. Where jobs give one key different numbers, the loosest number among
        the calls counted holds (a retry keeps the slot its run already held, whatever the others
        took meanwhile: docs/api.md asks for one number per key)."""
        for ceiling in call.keyed:
            label = f"limit {ceiling.key!r}"
            if ceiling.max_concurrency is not None:
                holding = [
                    k.max_concurrency
                    for calls in self.in_flight.values()
                    for c in calls
                    if c.owner == call.owner and c.lease_end > worker_clock + SKEW_TOLERANCE_MS
                    for k in c.keyed
                    if k.key == ceiling.key and k.max_concurrency is not None
                ]
                cap = max([ceiling.max_concurrency, *holding])
                if 1 + len(holding) > cap:
                    self.violations.append(
                        f"(e) {where}: {1 + len(holding)} calls of {label} in flight, max_concurrency {cap}"
                    )
            if ceiling.max_runs_per_minute is not None:
                since = call.began - (WINDOW_MS - 2 * SKEW_TOLERANCE_MS)
                counted = [
                    k.max_runs_per_minute
                    for c in self.calls
                    if c.owner == call.owner and c.began > since
                    for k in c.keyed
                    if k.key == ceiling.key and k.max_runs_per_minute is not None
                ]
                rate = max([ceiling.max_runs_per_minute, *counted])
                if 1 + len(counted) > rate:
                    self.violations.append(
                        f"(e) {where}: {1 + len(counted)} starts of {label} within 60 s, max_runs_per_minute {rate}"
                    )

    # -- after the scenario ---------------------------------------------------------------------

    def check_runs(self, runs: list[Run], max_retries: dict[str, int]) -> None:
        """(a) and (f) over every run, once the system has settled."""
        began = defaultdict(set)
        for call in self.calls:
            began[call.run_id].add(call.attempt)
        for run in runs:
            where = f"run {run.run_id} ({run.state.value}, attempt {run.attempt}, note {run.note!r})"
            budget = max_retries[run.job_id] + 1
            for number in range(1, min(run.attempt, budget) + 1):
                if number not in began[run.run_id] and (run.run_id, number) not in self.leases_at_instant:
                    self.violations.append(f"(a) {where}: attempt {number} is counted but its call never began")
            if run.state in (RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD) and not began[run.run_id]:
                # the one exception: every attempt it had was lost at its beginning (its worker died
                # between the lease at the instant and the call): max_retries bounds those too
                lost_at_start = all((run.run_id, k) in self.leases_at_instant for k in range(1, budget + 1))
                if not (run.state is RunState.DEAD and run.attempt >= budget and lost_at_start):
                    self.violations.append(f"(f) {where}: ended without a single call")
            if run.state is RunState.CANCELLED and not self._cancelled_by_user(run):
                self.violations.append(f"(f) {where}: cancelled, but not by anything the user did")
            by_calendar = run.state is RunState.CANCELLED and (run.note or "").startswith("calendar ")
            if by_calendar and (run.attempt or run.attempts):
                self.violations.append(f"(f) {where}: the calendar cancelled a run that had begun")
            before = self.claimed_before_edit.get(run.run_id)
            if by_calendar and before is not None and before != (run.state, run.note):
                self.violations.append(f"(g) {where}: claimed as {before} before a calendar edit, then re-decided")

    def _cancelled_by_user(self, run: Run) -> bool:
        note = run.note or ""
        kinds = {c.kind for c in self.commits.get(run.job_id, [])}
        if note.startswith("calendar "):
            return True  # the job's calendar, the user's choice (a skipped day, recorded at its claim)
        if "overlap" in note or "skipped" in note or "replaced" in note:
            return True  # the job's overlap policy, the user's choice
        if "deleted" in note:
            return "delete" in kinds
        if "paused" in note:
            return "pause" in kinds
        if "schedule" in note:
            return "patch" in kinds
        return False


def check_acyclic(jobs: list[Job]) -> str | None:
    """(d): a cycle among the ``depends_on`` edges of jobs not deleted, described; None if none."""
    edges = {
        job.id: [] if job.depends_on is None else list(job.depends_on.jobs)
        for job in jobs
        if job.status is not JobStatus.DELETED
    }
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> str | None:
        state[node] = 1
        for upstream in edges.get(node, []):
            if state.get(upstream) == 1:
                return " -> ".join([*path, node, upstream])
            if upstream in edges and state.get(upstream) is None:
                found = visit(upstream, [*path, node])
                if found:
                    return found
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def check_limit_rate(starts: list[int], first_due: int, rate: int) -> list[str]:
    """(e), the floor: while a backlog exists (from ``first_due`` to the last start), every 60 s
    window gets at least floor(0.9 x rate) starts (``tests.faults.rate_windows``)."""
    if not starts:
        return [f"(e) no start at all; rate {rate}"]
    fewest = fewest_in_backlog(sorted(starts), first_due)
    floor = floor_for(rate)
    if fewest is not None and fewest < floor:
        return [f"(e) {fewest} starts in a 60 s window with a backlog; rate {rate}, floor {floor}"]
    return []


def _last(commits: list[Commit], kind: str) -> int | None:
    return next((c.at for c in reversed(commits) if c.kind == kind), None)


def _loosest(values: object) -> int | None:
    seen = list(values)  # type: ignore[call-overload]
    if any(v is None for v in seen):
        return None
    return max(seen) if seen else None


def _fires_at(job: Job, instant: int) -> bool:
    if job.run_at is not None:
        return int(job.run_at.timestamp() * 1000) == instant
    if job.schedule is None:
        return False  # now waits for other jobs (depends_on): no times at all
    return cron.next_fire(job.schedule, job.timezone, instant - 1) == instant
