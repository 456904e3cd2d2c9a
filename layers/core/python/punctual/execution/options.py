"""What a delivery did (:class:`Outcome`, and the run metrics of the outcomes that end a run) and
the options every worker handles its deliveries with (:class:`ExecutionOptions`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from punctual import metrics as m
from punctual.dependencies.release import ReleaseOptions
from punctual.resources import MAX_DELAY_S
from punctual.runs import retry


class Outcome(StrEnum):
    """What one delivery did (for logs, metrics and the Lambda adapter)."""

    SUCCEEDED = "succeeded"  # attempt succeeded; message deleted
    ACCEPTED = "accepted"  # a callback job's target took the work (202): run accepted; message deleted
    RETRYING = "retrying"  # attempt failed, retry scheduled; message hidden for the backoff
    FAILED = "failed"  # attempt failed and retrying cannot help; owner alerted; message deleted
    DEAD = "dead"  # attempt failed and retries are exhausted; owner alerted; message deleted
    CANCELLED = "cancelled"  # the job is gone (deleted): run cancelled; message deleted
    DUPLICATE = "duplicate"  # run already terminal or unknown: a duplicate delivery; message deleted
    SKIPPED = "skipped"  # overlap=forbid and an earlier run was still open at its instant: cancelled; deleted
    HELD = "held"  # another worker holds a live lease: message hidden until the lease ends
    NOT_READY = "not_ready"  # backoff not elapsed or message far too early: hidden until then
    LEASE_LOST = "lease_lost"  # lost a race (taken over or cancelled meanwhile): nothing written; message untouched
    THROTTLED = "throttled"  # over its owner's max_concurrency or max_runs_per_minute: hidden, waits its turn
    INVALID = "invalid"  # the message names no run: deleted


# Run-level metrics (dashboard: runs succeeded/failed/dead per minute) for the outcomes that end a run.
RUN_METRICS = {
    Outcome.SUCCEEDED: m.RUNS_SUCCEEDED,
    Outcome.FAILED: m.RUNS_FAILED,
    Outcome.DEAD: m.RUNS_DEAD,
}


@dataclass(frozen=True, slots=True)
class ExecutionOptions:
    lease_margin_s: int = 30  # lease = job.timeout_s + this (Settings.lease_margin_s)
    visibility_s: int = 60  # visibility the message was received with (the worker's receive, or the queue's)
    max_early_ms: int = 1_500  # wait at most this long for not_before; earlier messages are hidden again
    # Pre-leasing (the long-running worker): messages arrive up to prelease_s + 1 s early (the
    # scheduler's PlanOptions.early_s) and are leased on arrival, held until their instant
    # (punctual.execution.batch.prepare/recheck). 0: leased at the instant.
    prelease_s: int = 0
    retry_grace_ms: int = 60_000  # a retrying run is reaped if not leased by next_attempt_at + this
    jitter: retry.Jitter = retry.Jitter.DETERMINISTIC
    min_heartbeat_s: float = 0.2  # the heartbeat interval is lease/3, but never below this
    alert_on_failed: bool = True  # failed (non-retryable) runs alert their owner like dead runs
    # A message whose handling failed unexpectedly (a storage throttle, an outage) comes back after
    # this, not after the queue's visibility (90 minutes on AWS): the run is retried while still due.
    error_visibility_s: int = 10
    release: ReleaseOptions = field(
        default_factory=ReleaseOptions
    )  # runs released for dependent jobs (retention, dispatch grace)
    # a message that waited on its owner's limits this many receives is resent fresh (the DLQ counts receives)
    requeue_after_receives: int = 10
    throttle_grace_ms: int = 120_000  # a waiting run's deadline: its next try + this (the reaper leaves it alone)
    # Where a message waits (punctual.execution.waits): hidden (in flight) up to hold_max_ms, re-sent
    # with a delay up to resend_max_ms (SQS's longest delay); a retry's longer backoff is parked in its
    # run's row, whose deadline is parked_lead_ms before the next attempt: the reaper re-sends it then.
    # the API's base URL, which callback jobs' attempts carry (Settings.callback_base_url); None: such
    # an attempt fails, not retryably (punctual.runs.tokens)
    callback_base_url: str | None = None
    hold_max_ms: int = 60_000
    resend_max_ms: int = MAX_DELAY_S * 1000
    parked_lead_ms: int = 600_000

    def __post_init__(self) -> None:
        # a parked run is re-sent by the reaper with a delay of at most resend_max_ms: its lead must fit
        if not 0 < self.hold_max_ms <= self.parked_lead_ms < self.resend_max_ms <= MAX_DELAY_S * 1000:
            raise ValueError("need 0 < hold_max_ms <= parked_lead_ms < resend_max_ms <= 900 s")
