"""The lifecycles: job statuses and run states with their allowed transitions, and the enums of
a job's policies (overlap, catch-up, dependencies), a run's trigger and an attempt's outcome."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    ACTIVE = "active"  # in the due index; the scheduler claims it when it is due
    PAUSED = "paused"  # out of the due index; resume recomputes the next time (catch-up policy)
    COMPLETED = "completed"  # a one-time job that has been dispatched; out of the due index
    DELETED = "deleted"  # soft-deleted; kept for history until retention, never scheduled again


JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.ACTIVE: frozenset({JobStatus.PAUSED, JobStatus.COMPLETED, JobStatus.DELETED}),
    JobStatus.PAUSED: frozenset({JobStatus.ACTIVE, JobStatus.DELETED}),
    # a completed one-time job becomes active again only when given a new run_at (PATCH)
    JobStatus.COMPLETED: frozenset({JobStatus.ACTIVE, JobStatus.DELETED}),
    JobStatus.DELETED: frozenset(),
}


class RunState(StrEnum):
    SCHEDULED = "scheduled"  # inserted by the scheduler, message on the queue, not yet leased
    RUNNING = "running"  # leased by a worker until lease_expires_at
    RETRYING = "retrying"  # an attempt failed; the message reappears after the backoff
    # completion callback: the target answered 202 and reports the end itself (POST /runs/{id}/complete);
    # lease_expires_at is the heartbeat deadline, no worker holds it and its message is gone
    ACCEPTED = "accepted"
    SUCCEEDED = "succeeded"  # terminal: the target accepted the run
    FAILED = "failed"  # terminal: failed with an error that retrying cannot fix
    DEAD = "dead"  # terminal: retries exhausted or poisoned (dead-letter queue); owner alerted
    CANCELLED = "cancelled"  # terminal: skipped or replaced (overlap policy), or its job was deleted

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED})
OPEN_STATES = frozenset({RunState.SCHEDULED, RunState.RUNNING, RunState.RETRYING, RunState.ACCEPTED})

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.SCHEDULED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.DEAD}),
    # running -> running is a takeover of an expired lease (attempt + 1)
    RunState.RUNNING: frozenset(
        {
            RunState.RUNNING,
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.RETRYING,
            RunState.DEAD,
            RunState.CANCELLED,
            RunState.ACCEPTED,  # a callback job's target answered 202
        }
    ),
    # ended by the callback's completion, or timed out (its heartbeat stopped, its deadline_s passed)
    RunState.ACCEPTED: frozenset(
        {RunState.SUCCEEDED, RunState.FAILED, RunState.RETRYING, RunState.DEAD, RunState.CANCELLED}
    ),
    RunState.RETRYING: frozenset({RunState.RUNNING, RunState.DEAD, RunState.CANCELLED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.DEAD: frozenset(),
    RunState.CANCELLED: frozenset(),
}


class Overlap(StrEnum):
    # Decided at the new run's instant (its first lease), never earlier.
    ALLOW = "allow"  # start the new run even if the previous one is still open
    FORBID = "forbid"  # skip this time (recorded as a cancelled run) if an earlier run is still open then
    REPLACE = "replace"  # at the new run's instant, cancel the earlier runs still open, then start it


class Catchup(StrEnum):
    LATEST = "latest"  # one run for the most recent missed time, then continue on schedule
    SKIP = "skip"  # no run for missed times; continue with the next future time
    BACKFILL = "backfill"  # one run per missed time, at most max_backfill, then continue


class Trigger(StrEnum):
    SCHEDULE = "schedule"  # an on-time fire of the job's schedule or run_at
    CATCHUP = "catchup"  # a fire for a time that was missed (scheduler down, job resumed)
    MANUAL = "manual"  # POST /jobs/{id}/trigger
    DEPENDENCY = "dependency"  # released by runs of the jobs it depends on (see punctual.dependencies)
    REPLAY = "replay"  # POST /runs/replay: a new run for an earlier one (replay_of); runs while paused, as manual


class Withdrawal(StrEnum):
    """Why what the user committed before a run's instant withdraws it, judged at its first lease
    (the run is then cancelled, never called; docs/execution.md, the run contract)."""

    PAUSED = "paused"  # the job is paused: its automatic runs (every trigger but manual) are cancelled
    OFF_SCHEDULE = "off_schedule"  # the schedule changed and lacks this instant: schedule and catch-up runs


class DependencyWhen(StrEnum):
    """Which upstream runs release a dependent job (cancelled runs never ran: they never count)."""

    SUCCEEDED = "succeeded"  # the upstream run succeeded (the default)
    FINISHED = "finished"  # it ended after running: succeeded, failed or dead
    FAILED = "failed"  # it ended failed or dead: clean-up and alerting jobs


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the target answered with an error
    TIMEOUT = "timeout"  # the target did not answer within timeout_s
    LEASE_EXPIRED = "lease_expired"  # the worker vanished; another worker took the run over
    DEAD_LETTERED = "dead_lettered"  # the message exhausted its receives (poison)
    CANCELLED = "cancelled"
    ACCEPTED = "accepted"  # a callback job's target answered 202: the attempt goes on until its callback
