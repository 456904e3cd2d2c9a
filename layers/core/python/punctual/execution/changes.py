"""What finishing an attempt writes on its run, the same for the per-message protocol
(``punctual.execution.delivery``) and the batched worker (``punctual.execution.batch``): the
verdict's :class:`~punctual.port.RunChange`, the attempt's log entry, who is alerted, and what a
terminal run owes before its message may go (:func:`settle_owed`)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from punctual import rules
from punctual.dependencies.release import release_dependents
from punctual.errors import ConcurrentModification, RunNotFound
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets import TargetResult
from punctual.metrics import RUNS_DISPATCHED, Metrics
from punctual.model import MAX_ERROR_CHARS, MAX_EXCERPT_CHARS, Attempt, AttemptOutcome, Job, Run, RunState, truncate
from punctual.model.bounds import MIN_ERROR_KEPT, RUN_RECORD_BYTES
from punctual.model.callbacks import ACCEPTED_STATUS, Completion
from punctual.port import Alert, Queue, RunChange, Store
from punctual.runs import callbacks, retry
from punctual.runs.alerts import Alerter, alert_once
from punctual.runs.outcomes import owes, settle_outcomes


def attempt_change(
    job: Job, run: Run, verdict: retry.Verdict, record: Attempt, now: int, *, options: ExecutionOptions
) -> RunChange:
    """What finishing an executed attempt writes, by its verdict (see the module docstring), with
    its log entry fitted to the run's record (:func:`fit_record`)."""
    return fit_record(run, _verdict_change(job, run, verdict, record, now, options=options))


def _verdict_change(
    job: Job, run: Run, verdict: retry.Verdict, record: Attempt, now: int, *, options: ExecutionOptions
) -> RunChange:
    attempt, error = run.attempt, record.error or "unknown error"
    if verdict is retry.Verdict.ACCEPTED:  # its message goes with this write: the run's row holds its deadline
        until = callbacks.deadline(job, run, now)
        return RunChange(RunState.ACCEPTED, now, until, append=record, clear_lease=False, lease_until=until)
    if verdict is retry.Verdict.SUCCEEDED:
        return RunChange(state=RunState.SUCCEEDED, now=now, deadline_at=now, append=record, finished_at=now)
    if verdict is retry.Verdict.RETRY:
        at = now + retry.backoff_ms(job.retry, attempt, key=run.run_id, jitter=options.jitter)
        # a backoff longer than a message's delay is parked in the row: the reaper finds it by this
        # deadline, before it is due, and sends it again (punctual.execution.waits)
        deadline = at - options.parked_lead_ms if at - now > options.resend_max_ms else at + options.retry_grace_ms
        return RunChange(state=RunState.RETRYING, now=now, deadline_at=deadline, append=record, next_attempt_at=at)
    if verdict is retry.Verdict.FAILED:
        note = bounded_note(f"failed on attempt {attempt} (not retryable): {error}")
        return RunChange(state=RunState.FAILED, now=now, deadline_at=now, append=record, finished_at=now, note=note)
    note = bounded_note(f"dead after {attempt} attempts (max_retries={job.max_retries}): {error}")
    return RunChange(state=RunState.DEAD, now=now, deadline_at=now, append=record, finished_at=now, note=note)


def fit_record(run: Run, change: RunChange) -> RunChange:
    """``change`` with the log entry it appends cut where ``run`` after it would outgrow
    ``RUN_RECORD_BYTES`` as compact JSON: the response excerpt first (down to nothing), then the
    error (down to ``MIN_ERROR_KEPT`` characters), each marked as cut. A run over the bound for
    other reasons (many attempts, a long note or owner) keeps what it has and costs more to write.

    Why: the aws engine bills each write by the item's size in whole KB, and the run's item is never
    larger than this JSON, so a first attempt's finish stays at one write unit. Both engines store
    the same entry.
    """
    record = change.append
    if record is None or (record.response_excerpt is None and record.error is None):
        return change  # nothing that can be cut: most finishes (a no-op answer) stop here
    for _ in range(3):  # JSON escapes make a cut by UTF-8 bytes inexact: at most a few rounds
        over = _record_bytes(rules.apply_change(run, change)) - RUN_RECORD_BYTES
        if over <= 0:
            return change
        excerpt, error = record.response_excerpt, record.error
        if excerpt is not None:
            excerpt = _cut(excerpt, over, 0)
        elif error is not None:
            error = _cut(error, over, MIN_ERROR_KEPT)
        if (excerpt, error) == (record.response_excerpt, record.error):
            return change  # nothing left to cut
        record = record.model_copy(update={"response_excerpt": excerpt, "error": error})
        change = replace(change, append=record)
    return change


def _record_bytes(run: Run) -> int:
    return len(run.model_dump_json(exclude_none=True).encode())


def _cut(text: str, over: int, keep_chars: int) -> str | None:
    """``text`` shorter by at least ``over`` UTF-8 bytes and marked cut, but not below ``keep_chars``
    characters; None when nothing of it is left."""
    data = text.encode()
    kept = data[: max(0, len(data) - over - len(_CUT))].decode("utf-8", "ignore")
    if len(kept) < keep_chars:
        kept = text[:keep_chars]
        return text if kept == text else kept + _CUT
    return kept + _CUT if kept else None


def bury_change(job: Job, run: Run, now: int) -> RunChange:
    """What a worker writes instead of executing an attempt that ``rules.attempt_allowed`` refuses."""
    note = bounded_note(f"dead: {run.attempt - 1} attempts lost their worker (max_retries={job.max_retries})")
    return RunChange(state=RunState.DEAD, now=now, deadline_at=now, finished_at=now, note=note)


def log_on_cancelled_run(store: Store, run: Run, record: Attempt, now: int) -> None:
    """If ``run`` was cancelled under its attempt (overlap=replace, its job deleted), keep the
    attempt's record in its log: the target *was* called. Only the log changes (compare-and-set
    on the cancelled run, same attempt); a run taken over by a newer attempt is left alone."""
    try:
        current = store.get_run(run.job_id, run.scheduled_at)
    except RunNotFound:
        return
    if current.state is not RunState.CANCELLED or current.attempt != run.attempt:
        return
    change = RunChange(
        state=RunState.CANCELLED, now=now, deadline_at=current.deadline_at, append=record, note=current.note
    )
    with contextlib.suppress(ConcurrentModification):
        store.transition_run(current, change)


def settle_owed(  # noqa: PLR0917 - what a settlement touches, then what it is about
    store: Store,
    queue: Queue,
    alerter: Alerter,
    job: Job,
    run: Run,
    now: int,
    *,
    options: ExecutionOptions,
    metrics: Metrics | None = None,
) -> None:
    """What a terminal ``run`` owes before its message may go: the job's dependents released
    (``punctual.dependencies.release``), its owner alerted if the run died (or failed:
    :func:`alerts_owner`), once per run whoever calls it, and the outcomes its job asked for (a pause
    after failures, a notification: ``punctual.runs.outcomes``). All are idempotent, so a redelivery
    after a crash in between simply does them again. ``metrics`` counts the released runs as
    ``RunsDispatched``, as the scheduler counts the runs it dispatches: every kind of run is counted."""
    released = release_dependents(store, queue, job, run, now, options=options.release)
    if released and metrics is not None:
        metrics.count(RUNS_DISPATCHED, len(released))
    if alerts_owner(run.state, options):
        reason = run.note or f"run ended {run.state}"
        alert_once(store, alerter, Alert(run.owner, run.run_id, run.job_id, now, reason))
    settle_outcomes(store, alerter, job, run, now)


def acks_with_finish(job: Job, state: RunState, options: ExecutionOptions) -> bool:
    """Whether a run of ``job`` that ends in ``state`` (terminal) owes nothing after its finish, so
    its message may be deleted with it: no dependents to release, no alert, no outcome its job asked
    for (:func:`settle_owed` is otherwise done first, and a crash before it leaves the message)."""
    if job.has_dependents or alerts_owner(state, options):
        return False
    return not owes(job, state)


def alerts_owner(state: RunState, options: ExecutionOptions) -> bool:
    """A run that ended in ``state`` alerts its owner (dead, and failed unless turned off)."""
    return _alerts(state, options)


def accepts(job: Job, result: TargetResult) -> bool:
    """Whether ``result`` accepts the work of an attempt of ``job`` rather than ending it: a 202 of a
    ``completion: callback`` job (any other 2xx still ends it succeeded)."""
    return job.completion is Completion.CALLBACK and result.ok and result.status_code == ACCEPTED_STATUS


def attempt_record(  # noqa: PLR0917 - the fields of the record, in its order
    result: TargetResult,
    number: int,
    worker_id: str,
    started_at: int,
    finished_at: int,
    waited: str | None = None,
    *,
    accepted: bool = False,
) -> Attempt:
    """The log entry of one executed attempt (error and excerpt bounded); ``waited``: the tenant limit
    its start waited for (see ``punctual.execution.leasing.waited_before``); ``accepted``: the answer
    accepted the work (:func:`accepts`), whose callback ends the attempt later."""
    if accepted:
        outcome = AttemptOutcome.ACCEPTED
    elif result.ok:
        outcome = AttemptOutcome.SUCCEEDED
    else:
        outcome = AttemptOutcome.TIMEOUT if result.timed_out else AttemptOutcome.FAILED
    return Attempt(
        number=number,
        worker_id=worker_id,
        started_at=started_at,
        finished_at=finished_at,
        outcome=outcome,
        status_code=result.status_code,
        error=truncate(result.error, MAX_ERROR_CHARS),
        response_excerpt=truncate(result.excerpt, MAX_EXCERPT_CHARS),
        waited=truncate(waited, MAX_ERROR_CHARS),
    )


_CUT = "..."  # the mark of a cut text, as model.bounds.truncate makes it


def _alerts(state: RunState, options: ExecutionOptions) -> bool:
    return state is RunState.DEAD or (state is RunState.FAILED and options.alert_on_failed)


def bounded_note(text: str) -> str:
    """``text`` cut to the length of a run's note."""
    return truncate(text, MAX_ERROR_CHARS) or text
