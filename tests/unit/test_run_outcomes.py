"""The rules of run outcomes (``punctual.runs.outcomes``, ``punctual.execution.notify``) without an
engine: who owes what, the streak, the events of a run, a notification's tries, and the models."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from punctual.execution.changes import acks_with_finish
from punctual.execution.notify import NotifyOptions, after_try
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets.types import TargetResult, failed, succeeded
from punctual.model import (
    AlertKind,
    Job,
    JobSpec,
    Notification,
    NotificationState,
    Notify,
    NotifyEvent,
    Run,
    RunState,
)
from punctual.port import Alert, Page, RunQuery
from punctual.runs.outcomes import events_of, failure_streak, owes
from punctual.runs.retry import Jitter

T0 = 1_800_000_000_000
JOB = "job_" + "e" * 32
ON_ALL = [NotifyEvent.FAILURE, NotifyEvent.RECOVERY, NotifyEvent.SUCCESS]


def job(**fields: Any) -> Job:
    return Job(
        id=JOB, owner="o", name="n", schedule="* * * * *", target={"url": "https://e.com/x"},
        created_at=T0, updated_at=T0, next_run_at=T0, **fields,
    )  # fmt: skip


def run(at: int, state: RunState, finished_at: int | None = None) -> Run:
    return Run(
        job_id=JOB, scheduled_at=at, owner="o", state=state, deadline_at=at, created_at=at, finished_at=finished_at
    )


@pytest.mark.parametrize("state", list(RunState))
def test_a_job_without_the_options_owes_nothing_and_its_success_is_acknowledged_with_the_finish(
    state: RunState,
) -> None:
    plain = job()
    assert owes(plain, state) is False
    if state is RunState.SUCCEEDED:  # the hot path: one finish, message deleted with it
        assert acks_with_finish(plain, state, ExecutionOptions()) is True


def test_what_a_run_owes_by_the_options_and_its_state() -> None:
    paused = job(pause_after_failures=3)
    assert [owes(paused, s) for s in (RunState.FAILED, RunState.DEAD, RunState.SUCCEEDED)] == [True, True, False]
    on_failure = job(notify=Notify(on=[NotifyEvent.FAILURE], url="https://e.com/n"))
    assert (owes(on_failure, RunState.DEAD), owes(on_failure, RunState.SUCCEEDED)) == (True, False)
    on_recovery = job(notify=Notify(on=[NotifyEvent.RECOVERY], url="https://e.com/n"))
    assert (owes(on_recovery, RunState.SUCCEEDED), owes(on_recovery, RunState.CANCELLED)) == (True, False)
    assert acks_with_finish(on_recovery, RunState.SUCCEEDED, ExecutionOptions()) is False  # kept until settled


def test_a_run_is_failure_success_or_recovery_and_the_previous_run_is_read_only_for_recovery() -> None:
    reads: list[int] = []

    def previous(state: RunState) -> Any:
        def read() -> Run:
            reads.append(1)
            return run(T0 - 1, state)

        return read

    assert events_of(ON_ALL, run(T0, RunState.DEAD), previous(RunState.DEAD)) == [NotifyEvent.FAILURE]
    assert events_of([NotifyEvent.SUCCESS], run(T0, RunState.SUCCEEDED), previous(RunState.DEAD)) == [
        NotifyEvent.SUCCESS
    ]
    assert reads == []
    assert events_of(ON_ALL, run(T0, RunState.SUCCEEDED), previous(RunState.FAILED)) == [
        NotifyEvent.SUCCESS,
        NotifyEvent.RECOVERY,
    ]
    assert events_of(ON_ALL, run(T0, RunState.SUCCEEDED), previous(RunState.SUCCEEDED)) == [NotifyEvent.SUCCESS]
    assert events_of(ON_ALL, run(T0, RunState.CANCELLED), previous(RunState.FAILED)) == []


class Listed:
    """A store that only lists runs (newest scheduled first, ended ones)."""

    def __init__(self, *runs: Run) -> None:
        self.runs = sorted(runs, key=lambda r: r.scheduled_at, reverse=True)

    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]:
        return Page([r for r in self.runs if r.state in query.states][: query.limit])


def test_the_streak_counts_ended_runs_newest_first_since_the_last_resume() -> None:
    dead, ok = RunState.DEAD, RunState.SUCCEEDED
    store: Any = Listed(run(T0, ok, T0 + 1), run(T0 + 10, dead, T0 + 11), run(T0 + 20, RunState.FAILED, T0 + 21))
    settling = run(T0 + 30, dead, T0 + 31)  # not listed yet (an eventually consistent read): counted anyway
    assert failure_streak(store, settling, limit=5, since=None) == 3
    assert failure_streak(store, settling, limit=2, since=None) == 2
    assert failure_streak(store, settling, limit=5, since=T0 + 15) == 2  # resumed at T0 + 15
    newer_success: Any = Listed(run(T0 + 40, ok, T0 + 41), run(T0 + 10, dead, T0 + 11))
    assert failure_streak(newer_success, settling, limit=5, since=None) == 0


def notification() -> Notification:
    return Notification(
        owner="o", job_id=JOB, scheduled_at=T0, events=[NotifyEvent.FAILURE], url="https://e.com/n",
        body="{}", created_at=T0, next_at=T0,
    )  # fmt: skip


def test_a_try_delivers_fails_for_good_or_backs_off_until_the_last_try() -> None:
    options = NotifyOptions(max_tries=3, jitter=Jitter.NONE)
    delivered = after_try(notification(), succeeded(204), T0, options)
    assert (delivered.state, [t.status_code for t in delivered.tries]) == (NotificationState.DELIVERED, [204])
    refused = after_try(notification(), failed("HTTP 410", retryable=False, status_code=410), T0, options)
    assert refused.state is NotificationState.FAILED
    later = after_try(notification(), failed("HTTP 503", retryable=True, status_code=503), T0, options)
    assert (later.state, later.next_at, later.tries[0].error) == (NotificationState.PENDING, T0 + 30_000, "HTTP 503")
    again = after_try(later, TargetResult(ok=False, error="timeout", timed_out=True), T0 + 30_000, options)
    assert again.next_at == T0 + 30_000 + 60_000
    last = after_try(again, failed("HTTP 503", retryable=True), T0 + 90_000, options)
    assert (last.state, len(last.tries)) == (NotificationState.FAILED, 3)


def test_notify_and_pause_after_failures_are_bounded_and_left_out_while_unset() -> None:
    base = {"name": "n", "schedule": "* * * * *", "target": {"url": "https://e.com/x"}}
    spec = JobSpec.model_validate({**base, "notify": {"on": ["failure", "failure"], "url": "https://e.com/n"}})
    assert spec.notify is not None and spec.notify.on == [NotifyEvent.FAILURE]
    for bad in ({"pause_after_failures": 0}, {"pause_after_failures": 101}, {"notify": {"on": [], "url": "x"}}):
        with pytest.raises(ValidationError):
            JobSpec.model_validate({**base, **bad})
    assert "notify" not in job().model_dump_json() and "pause_after_failures" not in job().model_dump_json()
    assert "replay_of" not in run(T0, RunState.DEAD).model_dump_json()


def test_an_alert_of_another_kind_is_stored_under_its_own_key() -> None:
    plain = Alert("o", "run_x_1", JOB, T0, "dead")
    paused = Alert("o", "run_x_1", JOB, T0, "paused", AlertKind.JOB_PAUSED)
    assert (plain.key, paused.key) == ("run_x_1", "run_x_1#job_paused")
    assert Alert.stored("o", paused.key, JOB, T0, "paused") == paused
    assert Alert.stored("o", plain.key, JOB, T0, "dead") == plain
