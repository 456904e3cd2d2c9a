"""Async completion, the writes: a callback's heartbeat and completion (the API's
``POST /runs/{id}/heartbeat`` and ``/complete``), and the end of an accepted attempt wherever it
happens outside a worker (a completion, the reaper's timeout), through the same steps a worker's
finish takes.

The rules are ``punctual.runs.callbacks`` and the token ``punctual.runs.tokens``. Every callback:

1. verifies its token against the run of the path (401: forged, malformed, another run's);
2. reads the run and judges the token's attempt on it (409 timed out or superseded, 403 completed);
3. writes with one conditional write of the store (``Store.callback_beat``, ``callback_complete``),
   which checks the same on the stored run: a run that moved on in between is read and judged again.

An end (:meth:`Ending.end`) then does what a worker's finish does, in its order: a run that will owe
something once terminal (dependents to release, an alert, a pause, a notification) first gets a
message, the outbox of this end (its delivery finds the run terminal and settles what it owes, should
we crash after the write); the conditional write; the run's concurrency slots freed; a retry's
message sent for its next attempt (a parked retry is the reaper's); what the run owes settled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from punctual import ids
from punctual.clock import Clock
from punctual.errors import AttemptSuperseded, ConcurrentModification, InvalidCallbackToken, JobNotFound
from punctual.execution.changes import acks_with_finish, attempt_change, settle_owed
from punctual.execution.options import RUN_METRICS, ExecutionOptions, Outcome
from punctual.execution.waits import parked
from punctual.metrics import Metrics
from punctual.model import MAX_PROGRESS_CHARS, Attempt, Job, Run, RunState, truncate
from punctual.port import Dispatch, Keys, Queue, RunChange, Store
from punctual.resources import MAX_DELAY_S
from punctual.runs import callbacks, retry, tokens
from punctual.runs.alerts import Alerter
from punctual.runs.cancel import cancellation, live_job
from punctual.scheduling.planning import is_long_run
from punctual.tenancy.admission import Gate

logger = logging.getLogger(__name__)

ROUNDS = 3  # reads of a run that keeps moving under a callback (its worker's heartbeats, the reaper)

Write = Callable[[Run, RunChange], Run]  # a conditional write of an end: raises ConcurrentModification


@dataclass(frozen=True, slots=True)
class Ending:
    """What ending an attempt outside a worker touches: a callback's completion, a reaper's timeout."""

    store: Store
    queue: Queue
    alerter: Alerter
    options: ExecutionOptions = field(default_factory=ExecutionOptions)
    gate: Gate | None = None  # frees the run's concurrency slots (None: the reaper's repair does)
    metrics: Metrics | None = None
    long_run_after_s: int | None = None

    def end(  # noqa: PLR0917 - the attempt, how it ended, when, and how that is written
        self, job: Job, run: Run, verdict: retry.Verdict, record: Attempt, now: int, write: Write
    ) -> Run:
        """End ``run``'s attempt (as read) by ``verdict`` with its log entry ``record``: ``write``
        applies the change (see the module docstring). Returns the run as written; raises
        :class:`ConcurrentModification` when ``write`` refused (nothing else was done but the outbox)."""
        change = attempt_change(job, run, verdict, record, now, options=self.options)
        if change.state.is_terminal and not acks_with_finish(job, change.state, self.options):
            self.send(run, job, now, now)  # the outbox: its delivery settles what the run owes
        done = write(run, change)
        if self.gate is not None:
            self.gate.release(done.owner, done.run_id, job)
        if done.state is RunState.RETRYING:
            if not parked(done) and done.next_attempt_at is not None:
                self.send(done, job, done.next_attempt_at, now)
        else:
            settle_owed(
                self.store, self.queue, self.alerter, job, done, now, options=self.options, metrics=self.metrics
            )
        outcome = Outcome(done.state.value)
        if self.metrics is not None and outcome in RUN_METRICS:
            self.metrics.count(RUN_METRICS[outcome])
        return done

    def send(self, run: Run, job: Job, due: int, now: int) -> None:
        """A dispatch message for ``run``, due at ``due`` (delayed by up to a message's delay from ``now``)."""
        delay_s = min(MAX_DELAY_S, max(0, (due - now) // 1000))
        long = is_long_run(job.timeout_s, self.long_run_after_s)
        self.queue.send([Dispatch(run.run_id, not_before=due, delay_s=delay_s, group=run.owner, long_run=long)])


@dataclass(frozen=True, slots=True)
class Callbacks:
    """The API's side of the callback routes: heartbeats and completions of accepted attempts."""

    ending: Ending
    keys: Keys
    clock: Clock

    def heartbeat(self, run_id: str, token: str | None, progress: str | None) -> Run:
        """Record a heartbeat of the token's attempt (its deadline moves on, its progress note is
        kept). Returns the run as written. Raises :class:`InvalidCallbackToken` (401),
        :class:`AttemptTimedOut` or :class:`AttemptSuperseded` (409), :class:`AttemptCompleted`
        (403), :class:`RunNotFound` (404), or :class:`ConcurrentModification` (409) when the run kept
        moving under it."""
        note = truncate(progress, MAX_PROGRESS_CHARS)
        for now, run, job in self._rounds(run_id, token):
            until = callbacks.deadline(job, run, now) if run.state is RunState.ACCEPTED else None
            try:
                return self.ending.store.callback_beat(run, now, until, note)
            except ConcurrentModification:
                continue
        raise ConcurrentModification(f"run {run_id} kept changing; send the heartbeat again", field="run_id")

    def complete(self, run_id: str, token: str | None, report: callbacks.Report) -> Run:
        """End the token's attempt as ``report`` says, once: succeeded; or failed, then retried or
        buried by the job's retry policy. Returns the run as written. Raises as :meth:`heartbeat`;
        a second completion of one attempt is :class:`AttemptCompleted` (403)."""
        for now, run, job in self._rounds(run_id, token):
            verdict = retry.verdict(
                ok=report.succeeded, retryable=report.retryable, attempt=run.attempt, max_retries=job.max_retries
            )
            record = callbacks.report_record(run, report, now)
            try:
                return self.ending.end(job, run, verdict, record, now, self.ending.store.callback_complete)
            except ConcurrentModification:
                continue
        raise ConcurrentModification(f"run {run_id} kept changing; send the completion again", field="run_id")

    def _rounds(self, run_id: str, token: str | None) -> Iterator[tuple[int, Run, Job]]:
        """At most :data:`ROUNDS` tries of one callback: each reads the run afresh, judges the token's
        attempt on it (raising why not) and finds its job; the caller writes, and takes the next
        round when its write was refused (the run moved under it). Raises as :meth:`heartbeat`."""
        claim, job_id, scheduled_at = self._claim(run_id, token)
        for _ in range(ROUNDS):
            now = self.clock.now_ms()
            run = self.ending.store.get_run(job_id, scheduled_at)
            callbacks.judge(run, claim, now)
            yield now, run, self._job_of(run, now)

    def _job_of(self, run: Run, now: int) -> Job:
        """The run's job; if it was deleted, :class:`AttemptSuperseded`, after cancelling the run if it
        is accepted (by compare-and-set on the run as read) and freeing its slots. Otherwise the
        reaper would cancel it only at its heartbeat deadline (up to 12 h), holding its slots until
        then, while this answer tells the target the run is cancelled."""
        store = self.ending.store
        job = live_job(store, run.job_id)
        if job is not None:
            return job
        if run.state is RunState.ACCEPTED:
            try:
                store.transition_run(run, cancellation(now, "job deleted"))
            except ConcurrentModification:
                pass  # it moved on (a completion, the reaper): whoever moved it decides
            else:
                if self.ending.gate is not None:
                    self.ending.gate.release(run.owner, run.run_id, _deleted_job(store, run.job_id))
        raise AttemptSuperseded(f"the job of run {run.run_id} was deleted: the run is cancelled", field="run_id")

    def _claim(self, run_id: str, token: str | None) -> tuple[tokens.Claim, str, int]:
        claim = tokens.verify(self.keys.callback_key(), run_id, token)
        try:
            job_id, scheduled_at = ids.parse_run_id(run_id)
        except Exception as exc:  # a path the token was minted for is a run id: never here
            raise InvalidCallbackToken("the path names no run", field="run_id") from exc
        return claim, job_id, scheduled_at


def _deleted_job(store: Store, job_id: str) -> Job | None:
    """A deleted job as stored (its keyed limits name the slots its runs hold), or None once purged."""
    try:
        return store.get_job(job_id)
    except JobNotFound:
        return None
