"""Run outcomes (``punctual.runs.outcomes``) on both engines: the store's part (a pause for failures,
the notification outbox, alert kinds), then the batched worker pausing a job after a failure streak
(crash between the finish and the pause included) and recording notifications, and the reaper's
notifier delivering them to a local webhook, signed.

Kept small on purpose (moto is slow): each test proves one promise end to end on both engines.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from punctual.execution.notify import Notifier, NotifyOptions
from punctual.execution.targets import TargetPolicy, signing
from punctual.execution.worker import Worker
from punctual.model import (
    AlertKind,
    JobStatus,
    Notification,
    NotificationState,
    NotificationTry,
    Notify,
    NotifyEvent,
    RetryPolicy,
    RunState,
)
from punctual.port import Alert, Engine
from punctual.runs.retry import Jitter
from tests.contract.factories import SECOND, make_job, make_run
from tests.contract.test_execution import RecordingAlerter
from tests.contract.test_worker import BOOM, OK, OPTIONS, OWNER, Scripted, process, stored

pytestmark = pytest.mark.contract


def notification(job_id: str, scheduled_at: int, next_at: int, **fields: Any) -> Notification:
    return Notification(
        owner=OWNER,
        job_id=job_id,
        scheduled_at=scheduled_at,
        events=[NotifyEvent.FAILURE],
        url="https://example.com/hook",
        body='{"event":"failure"}',
        created_at=scheduled_at,
        next_at=next_at,
        **fields,
    )


# -- the store --------------------------------------------------------------------------------------


def test_a_pause_for_failures_applies_only_to_the_job_as_read_and_leaves_the_due_index(engine, clock):
    store = engine.store
    job = make_job(OWNER, clock, shards=store.shards, pause_after_failures=2)
    store.create_job(job)
    # an edit moved it on: the pause decided on the old version is refused, nothing written
    edited = store.update_job(job.model_copy(update={"name": "renamed"}), expected_version=job.version)
    assert store.pause_for_failures(job, "run_x_1", clock.now_ms()) is False
    assert store.get_job(job.id).status is JobStatus.ACTIVE
    # as read, it pauses: out of the due index, naming the run, one version on, its spec intact
    assert store.pause_for_failures(edited, "run_x_1", clock.now_ms() + 5) is True
    paused = store.get_job(job.id)
    assert (paused.status, paused.next_run_at, paused.paused_after) == (JobStatus.PAUSED, None, "run_x_1")
    assert (paused.version, paused.updated_at, paused.name) == (edited.version + 1, clock.now_ms() + 5, "renamed")
    assert paused.pause_after_failures == 2
    assert store.due_jobs(job.due_shard, clock.now_ms() + 3_600_000, 10) == []
    assert store.pause_for_failures(paused, "run_x_2", clock.now_ms()) is False  # paused already


def test_notifications_are_recorded_once_listed_when_due_and_settled_by_compare_and_set(engine, clock):
    store, now = engine.store, clock.now_ms()
    first = notification("job_" + "1" * 32, now - 5, now - 5)
    later = notification("job_" + "2" * 32, now, now + 60 * SECOND)
    assert store.add_notification(first) is True
    assert store.add_notification(first.model_copy(update={"body": "{}"})) is False  # once per run
    assert store.add_notification(later) is True
    assert [n.run_id for n in store.due_notifications(now, 10)] == [first.run_id]
    # a try recorded on the notification as read; a second writer with the same read is refused
    tried = first.model_copy(
        update={"tries": [NotificationTry(number=1, at=now, status_code=503, error="HTTP 503")], "next_at": now + 30}
    )
    assert store.update_notification(first, tried) is True
    assert store.update_notification(first, tried) is False
    assert store.due_notifications(now, 10) == []
    done = tried.model_copy(update={"state": NotificationState.DELIVERED, "tries": [*tried.tries, tried.tries[0]]})
    assert store.update_notification(tried, done) is True
    assert store.due_notifications(now + 120 * SECOND, 10) == [later]  # the delivered one left the outbox
    assert store.get_notification(first.job_id, first.scheduled_at) == done
    assert store.get_notification(first.job_id, first.scheduled_at + 1) is None


def test_a_run_and_the_pause_of_its_job_are_two_alerts(engine, clock):
    store, now = engine.store, clock.now_ms()
    run_alert = Alert(OWNER, "run_" + "3" * 32 + "_1", "job_" + "3" * 32, now, "dead")
    paused = Alert(OWNER, run_alert.run_id, run_alert.job_id, now + 1, "paused", AlertKind.JOB_PAUSED)
    assert store.record_alert(run_alert) and store.record_alert(paused)
    assert not store.record_alert(paused)
    assert store.list_alerts(OWNER) == [paused, run_alert]


# -- the worker: pause after failures ---------------------------------------------------------------


def failing_job(engine: Engine, clock: Any, **fields: Any) -> Any:
    fields.setdefault("max_retries", 0)
    job = make_job(
        OWNER, clock, shards=engine.store.shards, retry=RetryPolicy(backoff_s=1, max_backoff_s=1), timeout_s=5, **fields
    )
    engine.store.create_job(job)
    return job


def run_once(engine: Engine, clock: Any, job: Any, targets: Scripted, alerter: Any, **kw: Any) -> Any:
    """One run of ``job`` now, executed by a fresh batched worker; the run as stored after."""
    clock.advance(SECOND)
    run = make_run(job, clock.now_ms(), clock)
    assert engine.store.insert_runs([run]) == [True]
    engine.queue.send([_dispatch(run)])
    visibility_s = kw.pop("visibility_s", 60)
    w = Worker(engine, clock, targets=lambda: targets, options=OPTIONS, alerter=alerter, worker_id="w1", **kw)
    process(w, engine.queue.receive(10, visibility_s))
    return stored(engine, run)


def _dispatch(run: Any) -> Any:
    from punctual.port import Dispatch

    return Dispatch(run.run_id, not_before=run.scheduled_at)


def test_a_failure_streak_pauses_the_job_once_and_a_resume_counts_anew(engine, clock):
    from punctual.jobs.lifecycle import resume_job

    alerter = RecordingAlerter()
    job = failing_job(engine, clock, pause_after_failures=2)
    first = run_once(engine, clock, job, Scripted(BOOM), alerter)
    assert first.state is RunState.DEAD and engine.store.get_job(job.id).status is JobStatus.ACTIVE
    second = run_once(engine, clock, job, Scripted(BOOM), alerter)
    paused = engine.store.get_job(job.id)
    assert (paused.status, paused.paused_after) == (JobStatus.PAUSED, second.run_id)
    kinds = [(a.run_id, a.kind) for a in engine.store.list_alerts(OWNER)]
    assert kinds.count((second.run_id, AlertKind.JOB_PAUSED)) == 1
    # resumed: the two failures before it no longer count; a success breaks a streak
    clock.advance(SECOND)
    resume_job(engine.store, OWNER, job.id, clock.now_ms())
    run_once(engine, clock, job, Scripted(BOOM), alerter)
    assert engine.store.get_job(job.id).status is JobStatus.ACTIVE
    run_once(engine, clock, job, Scripted(OK), alerter)
    run_once(engine, clock, job, Scripted(BOOM), alerter)
    assert engine.store.get_job(job.id).status is JobStatus.ACTIVE


def test_a_failed_attempt_that_is_retried_is_no_outcome(engine, engine_kind, clock, elapse):
    # Given a job paused after one failure, whose runs have one retry
    job = failing_job(engine, clock, pause_after_failures=1, max_retries=1)
    run = run_once(engine, clock, job, Scripted(BOOM), RecordingAlerter())
    # When the first attempt fails: the run retries, the job stays active
    assert run.state is RunState.RETRYING
    assert engine.store.get_job(job.id).status is JobStatus.ACTIVE
    # Then the retry that fails too ends the run, and that pauses the job
    elapse(1.5)
    w = Worker(engine, clock, targets=lambda: Scripted(BOOM), options=OPTIONS, worker_id="w1")
    process(w, engine.queue.receive(10, 60, 0.0 if engine_kind == "embedded" else 2.0))
    assert stored(engine, run).state is RunState.DEAD
    assert engine.store.get_job(job.id).paused_after == run.run_id


def test_a_crash_between_the_finish_and_the_pause_is_settled_by_the_redelivery(engine, engine_kind, clock, elapse):
    # Given a worker that dies in the middle of settling the run's outcome (its pause write fails)
    job = failing_job(engine, clock, pause_after_failures=1)
    calls = []
    pause = engine.store.pause_for_failures

    def crash_once(*args: Any) -> bool:
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("the worker died here")
        return pause(*args)

    engine.store.pause_for_failures = crash_once  # type: ignore[method-assign]
    run = run_once(engine, clock, job, Scripted(BOOM), RecordingAlerter(), visibility_s=1)
    # Then the run is dead but the job not paused yet: the message was kept
    assert run.state is RunState.DEAD and engine.store.get_job(job.id).status is JobStatus.ACTIVE
    # When the message comes back, the duplicate delivery settles what the run owes
    elapse(1.5)
    w = Worker(engine, clock, targets=lambda: Scripted(OK), options=OPTIONS, worker_id="w2")
    process(w, engine.queue.receive(10, 60, 0.0 if engine_kind == "embedded" else 2.0))
    assert engine.store.get_job(job.id).paused_after == run.run_id
    assert [a.kind for a in engine.store.list_alerts(OWNER) if a.run_id == run.run_id].count(AlertKind.JOB_PAUSED) == 1
    assert engine.queue.receive(10, 60) == []  # settled: the message is gone


# -- notify ----------------------------------------------------------------------------------------


def test_runs_owe_a_notification_for_failure_and_recovery_only(engine, clock):
    notify = Notify(on=[NotifyEvent.FAILURE, NotifyEvent.RECOVERY], url="https://example.com/hook")
    job = failing_job(engine, clock, notify=notify)
    failed = run_once(engine, clock, job, Scripted(BOOM), RecordingAlerter())
    recovered = run_once(engine, clock, job, Scripted(OK), RecordingAlerter())
    quiet = run_once(engine, clock, job, Scripted(OK), RecordingAlerter())
    owed = {run.run_id: engine.store.get_notification(run.job_id, run.scheduled_at) for run in (failed, recovered)}
    assert [n.events if n else None for n in owed.values()] == [[NotifyEvent.FAILURE], [NotifyEvent.RECOVERY]]
    body = json.loads(owed[recovered.run_id].body)  # type: ignore[union-attr]
    assert (body["event"], body["run_id"], body["state"]) == ("recovery", recovered.run_id, "succeeded")
    assert engine.store.get_notification(quiet.job_id, quiet.scheduled_at) is None


class _Hook(BaseHTTPRequestHandler):
    """Answers with the server's next status (then 200), keeping every request."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append((self.path, dict(self.headers), body))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hook() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    srv.requests, srv.statuses, srv.daemon_threads = [], [503], True
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_the_notifier_delivers_signed_and_retries_a_failed_try(engine, clock, hook):
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    job = failing_job(engine, clock, notify=Notify(on=[NotifyEvent.FAILURE], url=url))
    run = run_once(engine, clock, job, Scripted(BOOM), RecordingAlerter())
    notifier = Notifier(engine.keys, TargetPolicy(allow_loopback=True), NotifyOptions(jitter=Jitter.NONE))
    # the first try meets a 503: it stays pending, its try logged, due again after the backoff
    assert notifier.drain(engine.store, clock.now_ms()).tried == 1
    pending = engine.store.get_notification(run.job_id, run.scheduled_at)
    assert pending is not None and pending.state is NotificationState.PENDING
    assert [(t.number, t.status_code) for t in pending.tries] == [(1, 503)]
    assert notifier.drain(engine.store, clock.now_ms()).tried == 0  # not due yet
    clock.advance(31 * SECOND)
    assert notifier.drain(engine.store, clock.now_ms()).delivered == 1
    delivered = engine.store.get_notification(run.job_id, run.scheduled_at)
    assert delivered is not None and delivered.state is NotificationState.DELIVERED
    # each try was the same body, signed as target calls are, for this run
    (_, headers, body), (_, again, body_again) = hook.requests
    assert body == body_again and json.loads(body)["run_id"] == run.run_id
    assert (headers["Idempotency-Key"], again["X-Punctual-Attempt"]) == (run.run_id, "2")
    secret = engine.keys.signing_secret(OWNER)
    signing.verify(secret, again[signing.SIGNATURE_HEADER], run.run_id, body, method="POST", url=url, job_id=job.id)
