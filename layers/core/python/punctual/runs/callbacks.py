"""Async completion, the rules (no I/O): what a callback of an attempt may do to its run as read, the
deadline of an accepted attempt, and the log entries a completion or a timeout appends.

A ``completion: callback`` job's target answers 202: the worker records the run ``accepted``
(``lease_expires_at`` is then the heartbeat deadline: :func:`deadline`) and deletes its message. The
target reports with the token of that attempt (``punctual.runs.tokens``)::

    heartbeat ──> the deadline moves to now + heartbeat_timeout_s (never past scheduled_at + deadline_s)
    complete ───> succeeded, or failed: retried or buried by the job's retry policy, as a worker's finish
    silence ────> the reaper times the attempt out at its deadline: retried or buried the same way
                  (a deadline_s that passed is final: the run ends failed, never retried)

:func:`judge` says why a genuine token may not act (HTTP 409 or 403): the writes then check the same
on the stored run (``rules.callback_open``), so a completion never lands on an attempt that timed out
or was superseded, and lands at most once.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual.errors import AttemptCompleted, AttemptSuperseded, AttemptTimedOut, InvalidCallbackToken
from punctual.model import (
    MAX_ERROR_CHARS,
    MAX_EXCERPT_CHARS,
    Attempt,
    AttemptOutcome,
    Job,
    Run,
    RunState,
    truncate,
)
from punctual.runs.tokens import Claim

_LIVE = (RunState.RUNNING, RunState.ACCEPTED)
_ENDED_BY_REPORT = (AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED)


@dataclass(frozen=True, slots=True)
class Report:
    """What a target's completion says: succeeded or not, its result excerpt, and whether a failure
    may be retried (the job's retry policy then decides, as for a worker's retryable failure)."""

    succeeded: bool
    result: str | None = None
    retryable: bool = True


def judge(run: Run, claim: Claim, now: int) -> None:
    """Return if a callback of ``claim``'s attempt may act on ``run`` (as read) at ``now``; else raise
    why not: :class:`AttemptTimedOut` (its deadline passed), :class:`AttemptSuperseded` (a newer
    attempt, or the run cancelled), :class:`AttemptCompleted` (it has its outcome: a replay), or
    :class:`InvalidCallbackToken` (the token names an attempt this run never had)."""
    same = run.attempt == claim.attempt
    if run.attempt < claim.attempt or (same and run.state in _LIVE and not claim.leased_by(run)):
        raise InvalidCallbackToken("the token names an attempt this run never had", field="X-Punctual-Callback-Token")
    where = f"attempt {claim.attempt} of run {run.run_id}"
    if not same:
        raise AttemptSuperseded(f"{where} is over: the run is at attempt {run.attempt} ({run.state.value})")
    if run.state in _LIVE:
        if run.lease_expires_at is None or run.lease_expires_at < now:
            raise AttemptTimedOut(
                f"{where} timed out: its deadline passed (a heartbeat deadline: the run is retried or buried "
                "by its policy; the job's deadline_s: the run fails, not retried)"
            )
        return
    if run.state is RunState.CANCELLED:
        raise AttemptSuperseded(f"{where} is over: the run was cancelled ({run.note or 'cancelled'})")
    ended = next((a for a in reversed(run.attempts) if a.number == claim.attempt), None)
    if ended is not None and ended.outcome in _ENDED_BY_REPORT:
        raise AttemptCompleted(f"{where} has its outcome already ({ended.outcome.value}): a token completes once")
    outcome = "ended" if ended is None else f"ended {ended.outcome.value}"
    raise AttemptTimedOut(f"{where} {outcome}; the run is {run.state.value}")


def deadline(job: Job, run: Run, now: int) -> int:
    """Until when an attempt accepted (or heartbeated) at ``now`` lives without another heartbeat:
    ``now + heartbeat_timeout_s``, never past ``scheduled_at + deadline_s`` where the job has one."""
    until = now + job.heartbeat_ms
    if job.deadline_s is not None:
        until = min(until, run.scheduled_at + job.deadline_s * 1000)
    return until


def out_of_time(job: Job, run: Run, now: int) -> bool:
    """Whether the job's ``deadline_s`` has passed for ``run`` at ``now``: a timeout then is final."""
    return job.deadline_s is not None and now >= run.scheduled_at + job.deadline_s * 1000


def report_record(run: Run, report: Report, now: int) -> Attempt:
    """The log entry of an attempt a completion ends (its start: when the attempt was accepted)."""
    error = None
    if not report.succeeded:
        error = "the target reported failure" + ("" if report.retryable else " (not retryable)")
    return Attempt(
        number=run.attempt,
        worker_id=run.worker_id,
        started_at=accepted_at(run),
        finished_at=now,
        outcome=AttemptOutcome.SUCCEEDED if report.succeeded else AttemptOutcome.FAILED,
        error=error,
        response_excerpt=truncate(report.result, MAX_EXCERPT_CHARS),
    )


def timeout_record(job: Job, run: Run, now: int) -> Attempt:
    """The log entry of an accepted attempt the reaper times out at ``now``."""
    if out_of_time(job, run, now):
        why = f"the run's deadline_s ({job.deadline_s} s) passed before its callback completed it"
    else:
        why = f"no heartbeat or completion within heartbeat_timeout_s ({job.heartbeat_ms // 1000} s)"
    return Attempt(
        number=run.attempt,
        worker_id=run.worker_id,
        started_at=accepted_at(run),
        finished_at=now,
        outcome=AttemptOutcome.TIMEOUT,
        error=truncate(why, MAX_ERROR_CHARS),
    )


def accepted_at(run: Run) -> int | None:
    """When the run's current attempt was accepted (its ``accepted`` log entry), if it was."""
    record = run.attempts[-1] if run.attempts else None
    if record is None or record.number != run.attempt or record.outcome is not AttemptOutcome.ACCEPTED:
        return None
    return record.finished_at
