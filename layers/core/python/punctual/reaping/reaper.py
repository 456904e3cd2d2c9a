"""The reaper: nothing stays open forever, and every dead run alerts its owner.

The queue already redelivers a message whose worker vanished (its visibility ends with the
lease), so the reaper only handles what the queue cannot:

1. Open runs past their deadline (``Store.past_deadline_runs``), older than ``min_age_ms``:

   ============  =======================================  ==============================================
   state         means                                    action
   ============  =======================================  ==============================================
   scheduled     inserted, never leased (its message was  push its deadline (compare-and-set), resend
                 lost, or never sent)                     its dispatch
   running       the lease ended long ago and nobody      ``attempt <= max_retries``: ``retrying`` now
                 took it over (its message is gone)       (a ``lease_expired`` attempt is logged) and
                                                          resend; else ``dead`` + alert
   retrying      its backoff ended long ago and nobody    push its deadline, resend
                 leased it (its message is gone), or it   (a parked run: for its next attempt, with a
                 is parked: its backoff is too long for   delay, and its deadline past that attempt)
                 a message's delay, and its deadline
                 comes before its next attempt
                 (``punctual.execution.waits``)
   accepted      a callback job's attempt got no          timed out: retried or buried by its retry
                 heartbeat in time, or its deadline_s     policy (``punctual.reaping.acceptances``;
                 passed                                   the embedded engine's reaper finds them
                                                          every ``acceptance_interval_s``)
   ============  =======================================  ==============================================

   Runs whose job is gone are cancelled. Every write is a compare-and-set on the run as read, so a
   run that moved on meanwhile (a worker leased it) is left alone. Two reapers that both resend
   produce one extra message, which the worker's conditional lease drops as a duplicate.

2. The dead-letter queue (``punctual.reaping.dead_letters``): a message that was received
   ``max_receives`` times marks its run ``dead`` and alerts the owner, unless a worker still holds it.

Every run the reaper turns dead releases the jobs that depend on its job
(``punctual.dependencies.release``), crash-safely: before burying a run of a job that has
dependents, the reaper sends a message for it, whose delivery finds the run terminal and releases
(the worker's duplicate path); a dead-letter message is deleted only after the release.

Dead runs alert their owner exactly once (``punctual.runs.alerts.alert_once``), whoever marks them.

3. Tenant concurrency slots held by runs that no longer run (a worker that died between taking a
   slot and leasing, or between finishing and releasing, or a run cancelled under its worker) are
   freed (``punctual.tenancy.admission.repair_slots``).

After its passes, the long-running reaper (and the reaper Lambda each minute) tries the notifications
runs owe their jobs' ``notify`` webhooks that are due (``punctual.execution.notify``), then alerts the
owners of runs and cron instants past their job's ``deadline_s`` (``punctual.reaping.deadlines``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, fields

from punctual import rules
from punctual.clock import Clock
from punctual.config import DEFAULT_RETENTION_S
from punctual.dependencies.release import ReleaseOptions, release_dependents
from punctual.errors import ConcurrentModification
from punctual.execution.callbacks import Ending
from punctual.execution.notify import Notifier
from punctual.execution.options import ExecutionOptions
from punctual.model import Job, Run, RunState
from punctual.port import Dispatch, Engine, Queue, RunChange, Store
from punctual.reaping.acceptances import time_out, time_out_expired
from punctual.reaping.dead_letters import dead_change, drain, owner_alert
from punctual.reaping.deadlines import DeadlineMemo, watch_deadlines
from punctual.resources import MAX_DELAY_S
from punctual.runs.alerts import Alerter, LogAlerter, alert_once
from punctual.runs.cancel import cancellation, live_job
from punctual.runs.outcomes import owes, settle_outcomes
from punctual.scheduling.planning import is_long_run
from punctual.tenancy.admission import repair_slots

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReapOptions:
    min_age_ms: int = 60_000  # only runs scheduled at least this long ago (younger ones: the queue's redelivery)
    grace_ms: int = 30_000  # only runs whose deadline passed at least this long ago
    limit: int = 500  # runs examined per pass
    redispatch_grace_ms: int = 120_000  # a resent run's new deadline: now + this
    dead_letter_batches: int = 10  # at most this many receives of 10 from the dead-letter queue per pass
    dead_letter_visibility_s: int = 60
    drain_dead_letters: bool = True  # False where the DLQ is an event source of the reaper Lambda
    retention_s: int = DEFAULT_RETENTION_S  # deleted jobs are purged this long after deletion (runs: their expires_at)
    purge_limit: int = 1_000  # history rows purged per pass (engines without TTL; see Store.purge_expired)
    long_run_after_s: int | None = None  # runs of jobs with a longer timeout_s are resent as long runs


@dataclass(slots=True)
class ReapStats:
    examined: int = 0  # past-deadline runs read
    redispatched: int = 0  # scheduled/retrying runs whose dispatch was resent
    requeued: int = 0  # running runs with a dead lease, moved to retrying and resent
    dead: int = 0  # runs marked dead (retries exhausted or dead-lettered)
    cancelled: int = 0  # runs whose job is gone
    conflicts: int = 0  # runs that moved on between read and write (left alone)
    dead_letters: int = 0  # dead-letter messages handled (and deleted)
    alerts: int = 0  # owner alerts sent (new ones only)
    purged: int = 0  # expired runs and deleted jobs removed (embedded engine; DynamoDB uses TTL)
    slots_freed: int = 0  # tenant concurrency slots held by runs that no longer run
    timed_out: int = 0  # accepted attempts (completion callback) timed out, or cancelled with their job
    notifications: int = 0  # notification tries made (punctual.execution.notify)
    deadline_alerts: int = 0  # deadline_missed and run_missed alerts recorded (punctual.reaping.deadlines)
    errors: int = 0  # runs that could not be handled this pass (logged; retried next pass)

    def add(self, other: ReapStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def reap_once(
    store: Store,
    queue: Queue,
    dead_letters: Queue | None,
    alerter: Alerter,
    clock: Clock,
    *,
    options: ReapOptions | None = None,
) -> ReapStats:
    """One pass: requeue or bury open runs past their deadline, then drain the dead-letter queue.

    Returns what was done; ``stats.examined == options.limit`` means more runs may be waiting.
    A run that cannot be handled (say its stored job no longer validates) is logged and counted in
    ``stats.errors``; the others, the dead-letter queue and the purge still get their turn. Storage
    errors of the listing itself propagate (the next pass repeats the work; every step is idempotent).
    """
    options = options or ReapOptions()
    reap = _Pass(store, queue, alerter, clock.now_ms(), options)
    now = reap.now
    reap.stats.timed_out = time_out_expired(reap.ending, now) or 0  # where the engine indexes them
    runs = store.past_deadline_runs(now - options.grace_ms, now - options.min_age_ms, options.limit)
    reap.stats.examined = len(runs)
    jobs: dict[str, Job | None] = {}
    for run in runs:
        try:
            if run.job_id not in jobs:
                jobs[run.job_id] = live_job(store, run.job_id)
            reap.run(run, jobs[run.job_id])
        except Exception:  # one bad run must not starve every run behind it, pass after pass
            logger.exception("reaping run %s failed; it is retried on the next pass", run.run_id)
            reap.stats.errors += 1
    if dead_letters is not None and options.drain_dead_letters:
        visibility_s = options.dead_letter_visibility_s
        drained = drain(store, queue, alerter, dead_letters, clock, options.dead_letter_batches, visibility_s)
        reap.stats.conflicts += drained.conflicts
        reap.stats.dead_letters += drained.handled
        reap.stats.dead += drained.dead
        reap.stats.alerts += drained.dead  # this pass turned each dead, so its alert was the first
    reap.stats.purged = store.purge_expired(now, now - options.retention_s * 1000, options.purge_limit)
    reap.stats.slots_freed = repair_slots(store, now)
    return reap.stats


class Reaper:
    """The reaper as a long-running component (``punctual reaper``, ``punctual dev``).

    Runs :func:`reap_once` every ``interval_s`` seconds; a full pass is followed at once by
    another (up to ``max_passes``) so a backlog drains quickly.
    """

    name = "reaper"

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        alerter: Alerter | None = None,
        options: ReapOptions | None = None,
        interval_s: float = 60.0,
        max_passes: int = 10,
        notifier: Notifier | None = None,
        acceptance_interval_s: float | None = 2.0,
    ) -> None:
        self.engine, self.clock = engine, clock
        # between passes, timed-out accepted attempts are looked for this often (None: only in passes)
        self.acceptance_interval_s = acceptance_interval_s
        self.notifier = notifier  # delivers notifications (punctual.execution.notify); None: nobody here
        self.alerter = alerter or LogAlerter()
        self.options = options or ReapOptions()
        self.interval_s, self.max_passes = interval_s, max_passes
        self.stats = ReapStats()
        self.deadlines = DeadlineMemo()

    def run(self, stop: threading.Event) -> None:
        """Reap until ``stop`` is set. Errors are logged; the next pass tries again."""
        while not stop.is_set():
            self.tick()
            self._between_passes(stop)

    def _between_passes(self, stop: threading.Event) -> None:
        """Wait ``interval_s`` for the next pass, timing out accepted attempts every
        ``acceptance_interval_s`` meanwhile, where the engine indexes them (one indexed read)."""
        every = self.acceptance_interval_s
        if every is None or every >= self.interval_s:
            stop.wait(self.interval_s)
            return
        for _ in range(max(1, int(self.interval_s / every))):
            if stop.wait(every):
                return
            try:
                found = time_out_expired(
                    ending_of(self.engine.store, self.engine.queue, self.alerter, self.options), self.clock.now_ms()
                )
            except Exception:  # storage outage: the next round looks again
                logger.exception("acceptance round failed")
                continue
            if found is None:  # not indexed on this engine: the passes find them
                stop.wait(max(0.0, self.interval_s - every))
                return
            self.stats.timed_out += found

    def tick(self, until_ms: int | None = None) -> ReapStats:
        """Passes until one finds less than a full page (caught up), or changes nothing (the rest
        conflicts or fails: the next tick retries it). Bounded by ``max_passes``, or with
        ``until_ms`` by time instead: the reaper Lambda pages until shortly before its timeout, so a
        backlog (a burst of runs whose messages were lost) drains in one sweep, not 500 per minute."""
        total = ReapStats()
        passes = 0
        while self._more(passes, until_ms):
            passes += 1
            try:
                stats = reap_once(
                    self.engine.store,
                    self.engine.queue,
                    self.engine.dead_letters,
                    self.alerter,
                    self.clock,
                    options=self.options,
                )
            except Exception:  # storage or queue outage: log and try again next interval
                logger.exception("reaper pass failed")
                break
            total.add(stats)
            if stats.examined < self.options.limit or not _progress(stats):
                break
        if self.notifier is not None:  # after the runs: a notification can wait a pass, a run should not
            total.notifications = self._notify(until_ms)
        total.deadline_alerts = self._watch()  # last: bounded reads, and an alert a minute late is no loss
        self.stats.add(total)
        if total.redispatched or total.requeued or total.dead or total.cancelled or total.dead_letters:
            logger.info("reaper: %s", total)
        return total

    def _watch(self) -> int:
        """Alert runs and instants past their job's deadline; how many alerts were new."""
        try:
            return watch_deadlines(self.engine.store, self.alerter, self.clock.now_ms(), memo=self.deadlines)
        except Exception:  # storage outage: the next tick looks again
            logger.exception("deadline round failed")
            return 0

    def _notify(self, until_ms: int | None) -> int:
        """Try the notifications that are due (within ``until_ms``); how many were tried."""
        assert self.notifier is not None
        try:
            return self.notifier.drain(self.engine.store, self.clock.now_ms(), until_ms=until_ms).tried
        except Exception:  # storage outage: the next tick tries again
            logger.exception("notification round failed")
            return 0

    def _more(self, passes: int, until_ms: int | None) -> bool:
        if until_ms is None:
            return passes < self.max_passes
        return passes == 0 or self.clock.now_ms() < until_ms


def ending_of(store: Store, queue: Queue, alerter: Alerter, options: ReapOptions) -> Ending:
    """How the reaper ends an accepted attempt (``punctual.reaping.acceptances``)."""
    release = ReleaseOptions(retention_s=options.retention_s, long_run_after_s=options.long_run_after_s)
    execution = ExecutionOptions(release=release)
    return Ending(store, queue, alerter, execution, long_run_after_s=options.long_run_after_s)


def _progress(stats: ReapStats) -> bool:
    """Whether a pass moved any run on (a full page of conflicts or errors would be read again)."""
    return bool(stats.redispatched or stats.requeued or stats.dead or stats.cancelled)


# -- step 1: past-deadline runs ------------------------------------------------------------------


@dataclass(slots=True)
class _Pass:
    """One reaper pass: its collaborators, its instant and its counters."""

    store: Store
    queue: Queue
    alerter: Alerter
    now: int
    options: ReapOptions
    stats: ReapStats = field(default_factory=ReapStats)

    @property
    def ending(self) -> Ending:
        """How an accepted attempt ends here (``punctual.reaping.acceptances``)."""
        return ending_of(self.store, self.queue, self.alerter, self.options)

    def run(self, run: Run, job: Job | None) -> None:
        """Act on one past-deadline run (a run that moved on meanwhile counts as a conflict)."""
        now = self.now
        try:
            if job is None:
                self.store.transition_run(run, cancellation(now, "job deleted"))
                self.stats.cancelled += 1
            elif run.state is RunState.RUNNING:
                self._lost_lease(run, job)
            elif run.state is RunState.ACCEPTED:  # found here where the engine keeps no index of them
                time_out(self.ending, job, run, now)
                self.stats.timed_out += 1
            else:  # scheduled or retrying, and its message is gone (or parked): push the deadline, then resend
                due = max(now, run.next_attempt_at or now) if run.state is RunState.RETRYING else now
                change = RunChange(run.state, now, due + self.options.redispatch_grace_ms, clear_lease=False)
                self.store.transition_run(run, change)
                self._resend(run, job, due)
                self.stats.redispatched += 1
        except ConcurrentModification:
            self.stats.conflicts += 1

    def _lost_lease(self, run: Run, job: Job) -> None:
        """A running run whose worker vanished and whose message is gone: retry it, or bury it."""
        lost = rules.takeover_record(run)
        if rules.attempt_allowed(run.attempt + 1, job.max_retries):
            change = RunChange(RunState.RETRYING, self.now, self._new_deadline(), append=lost, next_attempt_at=self.now)
            self.store.transition_run(run, change)
            self._resend(run, job)
            self.stats.requeued += 1
            return
        note = f"dead after {run.attempt} attempts (max_retries={job.max_retries}): the last worker vanished"
        if job.has_dependents or owes(job, RunState.DEAD):
            # The outbox of this burial: should we crash after it, this message's delivery finds the
            # run dead and settles what it owes (releases, a pause, a notification), or, before it,
            # buries the run itself.
            self._resend(run, job)
        dead = self.store.transition_run(run, dead_change(lost, note, self.now))
        release = ReleaseOptions(retention_s=self.options.retention_s, long_run_after_s=self.options.long_run_after_s)
        release_dependents(self.store, self.queue, job, dead, self.now, options=release)
        self.stats.dead += 1
        self.stats.alerts += alert_once(self.store, self.alerter, owner_alert(dead, note, self.now))
        settle_outcomes(self.store, self.alerter, job, dead, self.now)

    def _resend(self, run: Run, job: Job, due: int | None = None) -> None:
        # due (a parked run's next attempt) or now: a run that is late already is not delayed further
        due = self.now if due is None else due
        delay_s = min(max(0, (due - self.now) // 1000), MAX_DELAY_S)
        long = is_long_run(job.timeout_s, self.options.long_run_after_s)
        self.queue.send([Dispatch(run.run_id, not_before=due, delay_s=delay_s, group=run.owner, long_run=long)])

    def _new_deadline(self) -> int:
        return self.now + self.options.redispatch_grace_ms
