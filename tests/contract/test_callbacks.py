"""Async completion (issue 33 §1) on both engines, on the manual clock: a callback job's target answers
202, the worker records the run ``accepted`` and lets go of it (no lease, no message), the target
heartbeats and completes through the API's callback routes with its attempt's token, and the reaper
times out an attempt whose heartbeats stop. Through ``punctual.api.app.handle`` (no server).

Kept small on purpose (moto is slow): each test proves a few promises end to end on both engines.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.execution.options import Outcome
from punctual.execution.targets import TargetResult
from punctual.jobs.lifecycle import delete_job
from punctual.model import AttemptOutcome, Completion, Job, RetryPolicy, Run, RunState
from punctual.port import Dispatch, Engine, Tenant
from punctual.reaping.reaper import ReapOptions, reap_once
from punctual.runs import tokens
from punctual.tenancy.admission import gate_for
from tests.contract.factories import SECOND, make_job, make_run
from tests.contract.test_execution import RecordingAlerter
from tests.contract.test_worker import OPTIONS, Scripted, process, received, stored

pytestmark = pytest.mark.contract

OWNER = "owner-callback"
WORKER = "w1"
HEARTBEAT_S = 60
ACCEPTED = TargetResult(ok=True, status_code=202, excerpt='{"queued":true}')


def callback_job(engine: Engine, clock: ManualClock, **fields: Any) -> Job:
    fields.setdefault("max_retries", 1)
    job = make_job(
        OWNER,
        clock,
        shards=engine.store.shards,
        completion=Completion.CALLBACK,
        heartbeat_timeout_s=HEARTBEAT_S,
        retry=RetryPolicy(backoff_s=1, max_backoff_s=1),
        timeout_s=5,
        **fields,
    )
    engine.store.create_job(job)
    return job


def run_to_acceptance(engine: Engine, clock: ManualClock, job: Job, **worker: Any) -> tuple[Run, str]:
    """One run of ``job`` now, executed by a worker whose target answers 202: the run as stored after,
    and the token its attempt carried."""
    run = make_run(job, clock.now_ms(), clock)
    assert engine.store.insert_runs([run]) == [True]
    engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    w = _worker(engine, clock, Scripted(ACCEPTED), **worker)
    assert process(w, received(engine, 1)) == [Outcome.ACCEPTED]
    run = stored(engine, run)
    return run, tokens.mint(engine.keys.callback_key(), run.run_id, run.attempt, WORKER)


def _worker(engine: Engine, clock: ManualClock, targets: Scripted, **kw: Any) -> Any:
    from punctual.execution.worker import Worker

    return Worker(engine, clock, targets=lambda: targets, options=OPTIONS, worker_id=WORKER, **kw)


def callback(
    engine: Engine, clock: ManualClock, run_id: str, route: str, token: str | None, body: Any = None, **context: Any
) -> tuple[int, Any]:
    """(status, JSON body) of ``POST /runs/{run_id}/{route}`` with ``token``, acting for no owner."""
    services = Services.of(engine, Settings(shards=engine.store.shards), clock, alerter=context.pop("alerter", None))
    path = f"/runs/{run_id}/{route}"
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers[tokens.TOKEN_HEADER] = token
    event = {
        "httpMethod": "POST",
        "path": path,
        "resource": path,
        "headers": headers,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "requestContext": {"stage": "test", "requestId": "req", "resourcePath": path, "httpMethod": "POST", **context},
    }
    response = handle(event, None, services)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def test_a_target_that_heartbeats_for_30_minutes_then_completes_succeeds_holding_no_lease_or_message(engine, clock):
    # Given a callback job of an owner with max_concurrency 1, and a worker whose target answers 202
    settings = Settings(shards=engine.store.shards)
    engine.store.put_tenant(Tenant(OWNER, max_concurrency=1))
    job = callback_job(engine, clock)
    run, token = run_to_acceptance(engine, clock, job, gate=gate_for(engine.store, settings, clock))
    # Then the run is accepted until the heartbeat deadline, its message is gone, and no worker holds it
    assert run.state is RunState.ACCEPTED
    assert run.lease_expires_at == run.deadline_at == clock.now_ms() + HEARTBEAT_S * SECOND
    assert [(a.outcome, a.status_code) for a in run.attempts] == [(AttemptOutcome.ACCEPTED, 202)]
    assert engine.queue.depth() == 0
    assert list(engine.store.slot_holders(OWNER)) == [run.run_id]  # a limit is a ceiling: its slot stays held
    assert engine.store.heartbeat_runs([_beat(run, clock)]) == [False]  # the worker's lease is over
    # When the target heartbeats every 50 s for 30 minutes, and the reaper passes meanwhile
    for minute in range(36):
        clock.advance(50 * SECOND)
        status, body = callback(engine, clock, run.run_id, "heartbeat", token, {"progress": f"{minute} of 36"})
        assert status == 200, body
        assert body["state"] == "accepted"
        if minute % 12 == 0:
            reap_once(engine.store, engine.queue, None, RecordingAlerter(), clock)
            assert engine.queue.depth() == 0
    now = clock.now_ms()
    beaten = stored(engine, run)
    assert (beaten.state, beaten.heartbeat_at, beaten.progress) == (RunState.ACCEPTED, now, "35 of 36")
    assert beaten.lease_expires_at == now + HEARTBEAT_S * SECOND
    assert list(engine.store.slot_holders(OWNER)) == [run.run_id]
    # Then completes it: the run succeeded, its log says accepted then succeeded, its slot is free
    status, body = callback(engine, clock, run.run_id, "complete", token, {"state": "succeeded", "result": "done"})
    assert (status, body["state"]) == (200, "succeeded"), body
    done = stored(engine, run)
    assert done.state is RunState.SUCCEEDED and done.finished_at == now
    logged = [(a.number, a.outcome) for a in done.attempts]
    assert logged == [(1, AttemptOutcome.ACCEPTED), (1, AttemptOutcome.SUCCEEDED)]
    assert done.attempts[-1].response_excerpt == "done" and done.attempts[-1].started_at == run.attempts[0].finished_at
    assert engine.store.slot_holders(OWNER) == {}
    assert engine.queue.depth() == 0


def test_a_target_that_stops_heartbeating_times_out_within_its_timeout_plus_5_s_and_is_retried(engine, clock, elapse):
    alerter = RecordingAlerter()
    job = callback_job(engine, clock)
    run, token = run_to_acceptance(engine, clock, job)
    clock.advance(30 * SECOND)
    assert callback(engine, clock, run.run_id, "heartbeat", token)[0] == 200  # no body: a heartbeat alone
    deadline = clock.now_ms() + HEARTBEAT_S * SECOND
    # When the heartbeats stop: nothing happens up to the deadline, then the reaper times it out
    clock.advance(HEARTBEAT_S * SECOND)
    options = ReapOptions(grace_ms=0, min_age_ms=0)
    reap_once(engine.store, engine.queue, None, alerter, clock, options=options)
    assert stored(engine, run).state is RunState.ACCEPTED
    clock.advance(5 * SECOND)
    reap_once(engine.store, engine.queue, None, alerter, clock, options=options)
    retrying = stored(engine, run)
    assert retrying.state is RunState.RETRYING and clock.now_ms() <= deadline + 5 * SECOND
    timeout = retrying.attempts[-1]
    assert (timeout.number, timeout.outcome) == (1, AttemptOutcome.TIMEOUT)
    assert f"heartbeat_timeout_s ({HEARTBEAT_S} s)" in (timeout.error or "")
    # A late completion is refused, 409, and changes nothing
    status, body = callback(engine, clock, run.run_id, "complete", token, {"state": "succeeded"})
    assert (status, body["code"]) == (409, "attempt_timed_out"), body
    assert stored(engine, run) == retrying
    # The retry's message is on the queue: attempt 2 is called, and accepted again with a new token
    elapse(1.5)  # its 1 s backoff (moto's SQS delays in real time)
    targets = Scripted(ACCEPTED)
    assert process(_worker(engine, clock, targets), received(engine, 1)) == [Outcome.ACCEPTED]
    assert [attempt for _, attempt in targets.calls] == [2]
    status, body = callback(engine, clock, run.run_id, "heartbeat", token)
    assert (status, body["code"]) == (409, "attempt_superseded"), body
    second = tokens.mint(engine.keys.callback_key(), run.run_id, 2, WORKER)
    assert callback(engine, clock, run.run_id, "heartbeat", second)[0] == 200


def test_a_completion_lands_once_and_only_with_its_runs_token(engine, clock):
    alerter = RecordingAlerter()
    job = callback_job(engine, clock, max_retries=0)
    run, token = run_to_acceptance(engine, clock, job)
    clock.advance(SECOND)
    other, other_token = run_to_acceptance(engine, clock, job)
    failed = {"state": "failed", "result": "the export broke", "retryable": False}
    # Forged, foreign, malformed or absent tokens are 401, and an owner's credentials alone do not do
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (forged, other_token, "pct1.1.nothex.x", None):
        status, body = callback(engine, clock, run.run_id, "complete", bad, failed)
        assert (status, body["code"]) == (401, "invalid_callback_token"), (bad, body)
    owner = {"authorizer": {"principalId": OWNER}}
    assert callback(engine, clock, run.run_id, "complete", None, failed, **owner)[0] == 401
    assert stored(engine, run).state is RunState.ACCEPTED
    # The completion lands once: failed, not retryable, the owner alerted; a replay is 403
    status, body = callback(engine, clock, run.run_id, "complete", token, failed, alerter=alerter)
    assert (status, body["state"]) == (200, "failed"), body
    for route, again in (("complete", failed), ("complete", {"state": "succeeded"}), ("heartbeat", None)):
        status, body = callback(engine, clock, run.run_id, route, token, again)
        assert (status, body["code"]) == (403, "attempt_completed"), body
    ended = stored(engine, run)
    assert [a.outcome for a in ended.attempts] == [AttemptOutcome.ACCEPTED, AttemptOutcome.FAILED]
    assert ended.attempts[-1].response_excerpt == "the export broke"
    assert [a.run_id for a in alerter.published] == [run.run_id]
    assert stored(engine, other).state is RunState.ACCEPTED  # the other run's token did nothing here


def _beat(run: Run, clock: ManualClock) -> Any:
    from punctual.port import Beat, Hold

    return Beat(Hold(run.job_id, run.scheduled_at, WORKER, run.attempt), clock.now_ms() + 60 * SECOND)


def test_a_callback_of_a_deleted_jobs_accepted_run_cancels_it_and_frees_its_slot_at_once(engine, clock):
    # Given an accepted run holding its owner's only slot (max_concurrency 1)
    settings = Settings(shards=engine.store.shards)
    engine.store.put_tenant(Tenant(OWNER, max_concurrency=1))
    job = callback_job(engine, clock)
    run, token = run_to_acceptance(engine, clock, job, gate=gate_for(engine.store, settings, clock))
    assert list(engine.store.slot_holders(OWNER)) == [run.run_id]
    # When its job is deleted and the target heartbeats
    delete_job(engine.store, OWNER, job.id, clock.now_ms())
    clock.advance(SECOND)
    status, body = callback(engine, clock, run.run_id, "heartbeat", token)
    # Then the answer is true: the run is cancelled now, not at its heartbeat deadline (up to 12 h
    # later, by the reaper), and the slot it held is free for the owner's other runs
    assert (status, body["code"]) == (409, "attempt_superseded"), body
    cancelled = stored(engine, run)
    assert (cancelled.state, cancelled.note) == (RunState.CANCELLED, "job deleted")
    assert engine.store.slot_holders(OWNER) == {}
    assert callback(engine, clock, run.run_id, "complete", token, {"state": "succeeded"})[1]["code"] == (
        "attempt_superseded"
    )
