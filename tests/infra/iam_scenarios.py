"""What each component does in the IAM proof: every path that needs a permission, driven through
the component's entry point (see ``iam_harness``), with its outcome asserted so that a path that
silently did not run cannot pass for one that needed no permission.

- api: every route, the admin routes as the TenantAdmin role, dependencies (a transaction with a
  condition check), secret headers (kms:Encrypt), the signing secret (kms:GenerateMac), stats, and a
  callback's heartbeat and completion (an owner alert), behind the callback authorizer's check.
- scheduler: one invocation of instance 0 claims due one-time jobs (a long one to the long-run
  queue) and resends a run its plan passed over.
- worker (Lambda) and the Fargate workers: runs that succeed and release dependents (short and
  long), fail (pausing their job and owing a notification) and alert the owner, retry, wait for
  their owner's rate limit (resent), open a secret header and sign, and call each AWS target the
  stack allows.
- reaper: a pass that resends a lost run, buries a run whose worker vanished and releases its
  dependent (issue 27, item 4), pauses that run's job and delivers its notification (signed),
  cancels a run of a deleted job and frees a leaked tenant slot; the dead-letter queue's records
  bury a run and release its dependent.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from punctual import ids
from punctual.clock import SystemClock
from punctual.model import Attempt, AttemptOutcome, JobStatus, NotificationState, Run, RunState
from punctual.port import Dispatch, RunChange, RunQuery
from punctual.runs import tokens
from tests.infra.iam_calls import ACCOUNT
from tests.infra.iam_grants import Grant
from tests.infra.iam_harness import OWNER, LambdaContext, Stack, TargetServer, api_event, sqs_records
from tests.waiting import wait_until

MINUTE = 60_000
HOUR = 60 * MINUTE
TARGET_KINDS = {  # the AWS target a worker may call, by the action its grant names
    "lambda:InvokeFunction": lambda arn: {"type": "lambda", "function_arn": arn},
    "states:StartExecution": lambda arn: {"type": "stepfunctions", "state_machine_arn": arn},
    "events:PutEvents": lambda arn: {"type": "eventbridge", "event_bus": arn},
    "sqs:SendMessage": lambda arn: {"type": "sqs", "queue_url": _queue_url(arn)},
}


def now_ms() -> int:
    return SystemClock().now_ms()


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


# -- api ----------------------------------------------------------------------------------------------


def api(stack: Stack, target: TargetServer) -> None:
    admin = _admin(stack)
    assert stack.call_api("PUT", "/admin/tenants", {"owner": OWNER, "max_jobs": 100}, caller=admin)[0] == 200
    assert stack.call_api("GET", "/admin/tenants", caller=admin)[0] == 200
    assert stack.call_api("GET", "/admin/tenants", caller=admin, owner=OWNER)[0] == 200
    secret = {"Authorization": "Bearer token"}
    up = _created(stack.call_api("POST", "/jobs", _spec("a-up", target.url("/ok"), secret_headers=secret)))
    middle = _created(stack.call_api("POST", "/jobs", _dependent("a-middle", target.url("/ok"), up)))
    # a chain: the cycle check reads the middle job's edges, and the decision checks it kept them
    last = _created(stack.call_api("POST", "/jobs", _dependent("a-last", target.url("/ok"), middle)))
    for method, path, body in (
        ("GET", "/jobs", None),
        ("GET", f"/jobs/{up}", None),
        ("GET", f"/jobs/{last}/graph", None),
        ("PATCH", f"/jobs/{up}", {"name": "a-up-renamed"}),
        ("POST", f"/jobs/{up}/pause", None),
        ("POST", f"/jobs/{up}/resume", None),
        ("GET", "/alerts", None),
        ("GET", "/limits", None),
        ("GET", "/signing-secret", None),
        ("POST", "/runs/replay", {"from": iso(now_ms() - HOUR), "to": iso(now_ms()), "dry_run": True}),
        ("DELETE", f"/jobs/{last}", None),
        ("PUT", "/calendars/a-weekends", {"exclude_weekdays": ["SAT", "SUN"]}),
        ("GET", "/calendars/a-weekends", None),
        ("GET", "/calendars", None),
    ):
        status, answer = stack.call_api(method, path, body)
        assert status < 300, (method, path, status, answer)
    # a calendar in use is not deleted: its users are read from the jobs' by_calendar index
    user = _created(stack.call_api("POST", "/jobs", _spec("a-cal", target.url("/ok"), calendar={"name": "a-weekends"})))
    assert stack.call_api("DELETE", "/calendars/a-weekends")[0] == 409
    assert stack.call_api("PATCH", f"/jobs/{user}", {"calendar": None})[0] == 200
    assert stack.call_api("DELETE", "/calendars/a-weekends")[0] == 204
    status, run = stack.call_api("POST", f"/jobs/{up}/trigger")
    assert status == 202, run
    # GET /stats: the owner's counters and its due open runs (the run just triggered), the queues for an operator
    assert stack.call_api("GET", "/stats")[0] == 200
    assert stack.call_api("GET", "/stats", caller=admin)[0] == 200
    assert stack.call_api("GET", f"/runs/{run['run_id']}")[0] == 200
    assert stack.call_api("GET", f"/jobs/{up}/runs")[0] == 200
    if stack.settings.long_run_queue_url:  # a job longer than a Lambda worker may run: the long-run queue
        long = _created(stack.call_api("POST", "/jobs", _spec("a-long", target.url("/ok"), timeout_s=_long(stack))))
        assert stack.call_api("POST", f"/jobs/{long}/trigger")[0] == 202
    callbacks(stack, target)


def callbacks(stack: Stack, target: TargetServer) -> None:
    """A callback job's run accepted (as a worker records a 202), then the callback authorizer lets its
    token through and the api takes its heartbeat and its completion (failed: the owner is alerted)."""
    job = stack.setup_api("POST", "/jobs", _spec("a-callback", target.url("/ok"), completion="callback"))
    run = stack.setup_api("POST", f"/jobs/{job['id']}/trigger")
    job_id, scheduled_at = ids.parse_run_id(run["run_id"])
    store, now = stack.setup.store, now_ms()
    assert store.lease_run(job_id, scheduled_at, "w", now, MINUTE).run is not None
    until = now + MINUTE
    record = Attempt(number=1, worker_id="w", outcome=AttemptOutcome.ACCEPTED, status_code=202, finished_at=now)
    store.finish_run(
        job_id,
        scheduled_at,
        "w",
        1,
        RunChange(RunState.ACCEPTED, now, until, append=record, clear_lease=False, lease_until=until),
    )
    token = tokens.mint(stack.setup.keys.callback_key(), run["run_id"], 1, "w")
    stage = f"arn:aws:execute-api:us-east-1:{ACCOUNT}:api0123456/v1"
    event = {
        "type": "REQUEST",
        "methodArn": f"{stage}/POST/runs/{run['run_id']}/heartbeat",
        "headers": {tokens.TOKEN_HEADER: token},
        "pathParameters": {"run_id": run["run_id"]},
    }
    policy = stack.invoke("callback_authorizer", event)["policyDocument"]["Statement"][0]
    assert policy["Effect"] == "Allow" and f"{stage}/POST/runs/{run['run_id']}/complete" in policy["Resource"]
    for route, body, state in (
        ("heartbeat", {"progress": "half"}, "accepted"),
        ("complete", {"state": "failed", "retryable": False}, "failed"),
    ):
        request = api_event("POST", f"/runs/{run['run_id']}/{route}", body, caller=OWNER)
        request["headers"][tokens.TOKEN_HEADER] = token
        response = stack.invoke("api", request)
        assert response["statusCode"] == 200 and json.loads(response["body"])["state"] == state, response


# -- scheduler ----------------------------------------------------------------------------------------


def scheduler(stack: Stack, target: TargetServer) -> None:
    soon = iso(now_ms() + 1_500)  # within the lookahead: claimed by the first tick
    stack.setup_api("PUT", "/calendars/s-all-days", {"exclude_dates": ["2000-01-01"]})  # the claim reads it
    calendar = {"name": "s-all-days"}
    jobs = [stack.setup_api("POST", "/jobs", _spec("s-once", target.url("/ok"), run_at=soon, calendar=calendar))["id"]]
    if stack.settings.long_run_queue_url:
        jobs.append(
            stack.setup_api("POST", "/jobs", _spec("s-long", target.url("/ok"), run_at=soon, timeout_s=_long(stack)))[
                "id"
            ]
        )
    passed_over = _passed_over_job(stack, target)

    def claimed() -> bool:  # an invocation ticks ~2 s; the first tick of a cold one takes the shard leases
        stack.invoke("scheduler", stack.scheduler_event(), LambdaContext(remaining_ms=7_000))
        return all(stack.setup.store.list_runs(job_id, RunQuery()).items for job_id in jobs)

    wait_until(claimed, 30, "the scheduler to claim the due jobs")
    assert stack.settings.dispatch_queue_url is not None
    assert passed_over in stack.queued_run_ids(stack.settings.dispatch_queue_url), "the passed-over run was not resent"


def _passed_over_job(stack: Stack, target: TargetServer) -> str:
    """A cron job whose stored time is long past, with its run at that time inserted but never sent
    (a claim that died after step 1): the plan moves past it, and the claim resends that run."""
    job = stack.setup_api("POST", "/jobs", _spec("s-cron", target.url("/ok"), schedule="* * * * *"))
    missed = (now_ms() // MINUTE - 3) * MINUTE
    stack.setup.clients.dynamodb.update_item(
        TableName=stack.settings.table_name("jobs"),
        Key={"job_id": {"S": job["id"]}},
        UpdateExpression="SET next_run_at = :at",
        ExpressionAttributeValues={":at": {"N": str(missed)}},
    )
    run = Run(job_id=job["id"], scheduled_at=missed, owner=OWNER, deadline_at=now_ms() + HOUR, created_at=missed)
    stack.setup.store.insert_runs([run])
    return run.run_id


# -- workers ------------------------------------------------------------------------------------------


def lambda_worker(stack: Stack, target: TargetServer) -> None:
    """The worker function, handed the dispatch queue's messages as its event source would."""
    runs, released = _worker_runs(stack, target, prefix="w")
    queue_url = stack.settings.dispatch_queue_url
    assert queue_url is not None

    def settled() -> bool:
        messages = _receive(stack, queue_url)
        if messages:
            stack.invoke("worker", sqs_records(messages, _queue_arn(queue_url)))
        return _settled(stack, runs)

    wait_until(settled, 40, "the worker's runs to finish", lambda: _unsettled(stack, runs))
    _check_worker_runs(stack, runs, released)


def fargate_worker(stack: Stack, target: TargetServer, name: str) -> None:
    """A Fargate worker service: ``punctual worker`` polls its own queue. On the Fargate tier
    (``PUNCTUAL_PRELEASE_S`` > 0) one run is due a few seconds ahead: the worker pre-leases it
    (reads it before its instant, ``punctual.execution.batch.hold``) and leases it at its instant."""
    long_run = name == "fargate-long-run-worker"
    runs, released = _worker_runs(stack, target, prefix=name, long_run=long_run)
    if int(stack.environment(name).get("PUNCTUAL_PRELEASE_S", "0")) > 0:
        runs["held"] = _run_due_ahead(stack, target, prefix=name, long_run=long_run)
    with stack.long_running_worker(name):
        # bounded generously: a held message received again meanwhile (moto then refuses the first
        # receipt) leaves its run to the next visibility, seen once in CI under load
        wait_until(lambda: _settled(stack, runs), 90, f"{name}'s runs to finish", lambda: _unsettled(stack, runs))
    _check_worker_runs(stack, runs, released)


def _worker_runs(
    stack: Stack, target: TargetServer, *, prefix: str, long_run: bool = False
) -> tuple[dict[str, str], dict[str, str]]:
    """Trigger (as setup) the runs a worker must settle: (name -> run id, name -> dependent job id).

    ``waiting`` is bob's second run: it waits for its turn under his ``max_runs_per_minute``."""
    timeout = {"timeout_s": _long(stack)} if long_run else {}
    secret = {"Authorization": "Bearer token"}
    up = stack.setup_api("POST", "/jobs", _spec(f"{prefix}-up", target.url("/ok"), secret_headers=secret, **timeout))
    down = stack.setup_api("POST", "/jobs", _dependent(f"{prefix}-down", target.url("/ok"), up["id"], **timeout))
    dependents = {"down": down["id"]}
    if stack.settings.long_run_queue_url and not long_run:  # a short run releasing a long one
        dependents["down-long"] = stack.setup_api(
            "POST", "/jobs", _dependent(f"{prefix}-down-long", target.url("/ok"), up["id"], timeout_s=_long(stack))
        )["id"]
    specs = {
        # its failure pauses its job (pause_after_failures) and owes its notify webhook a notification
        "fails": _spec(f"{prefix}-fails", target.url("/fail"), max_retries=0, **_outcomes(target), **timeout),
        "retries": _spec(f"{prefix}-retries", target.url("/fail"), max_retries=1, **timeout),
        # its first lease reads the job's earlier runs (a consistent Query) to apply the policy
        "forbid": _spec(f"{prefix}-forbid", target.url("/ok"), overlap="forbid", **timeout),
    }
    for grant in _target_grants(stack):
        specs[grant.action] = _spec(f"{prefix}-{grant.action.replace(':', '-')}", "", max_retries=0, **timeout)
        specs[grant.action]["target"] = TARGET_KINDS[grant.action](grant.resource.replace("*", "a"))
    runs = {"up": _trigger(stack, up["id"])}
    for name, spec in specs.items():
        runs[name] = _trigger(stack, stack.setup_api("POST", "/jobs", spec)["id"])
    # bob (one per scenario) may start one run a minute: his second run waits for its turn and is resent
    bob = f"arn:aws:iam::{ACCOUNT}:user/bob-{prefix}"
    stack.setup_api("PUT", "/admin/tenants", {"owner": bob, "max_runs_per_minute": 1}, caller=_admin(stack))
    for turn in ("first", "waiting"):
        job = stack.setup_api("POST", "/jobs", _spec(f"{prefix}-bob-{turn}", target.url("/ok"), **timeout), caller=bob)
        runs[turn] = str(stack.setup_api("POST", f"/jobs/{job['id']}/trigger", caller=bob)["run_id"])
    return runs, dependents


def _run_due_ahead(stack: Stack, target: TargetServer, *, prefix: str, long_run: bool) -> str:
    """A run due 3 s from now, inserted and dispatched as a claim would (its message visible at once)."""
    timeout = {"timeout_s": _long(stack)} if long_run else {}
    job = stack.setup_api("POST", "/jobs", _spec(f"{prefix}-ahead", target.url("/ok"), **timeout))
    now = now_ms()
    run = Run(job_id=job["id"], scheduled_at=now + 3_000, owner=OWNER, deadline_at=now + HOUR, created_at=now)
    stack.setup.store.insert_runs([run])
    stack.setup.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at, long_run=long_run)])
    return run.run_id


def _settled(stack: Stack, runs: dict[str, str]) -> bool:
    """Every run finished, except one of bob's two (he may start one a minute), which must have been
    told to wait: its note while it waits, or, once his next minute let it start (a slow run of the
    scenario), its attempt's ``waited``. Which of the two waits is the worker's choice (it admits a
    batch by priority, then in any order)."""
    others = [r for name, r in runs.items() if name not in BOB]
    return _bob_settled(stack, runs) and _all_terminal(stack, others)


BOB = ("first", "waiting")


def _bob_settled(stack: Stack, runs: dict[str, str]) -> bool:
    first, second = (_run(stack, runs[name]) for name in BOB)
    return any(not one.is_open and _waited(other) for one, other in ((first, second), (second, first)))


def _waited(run: Run) -> bool:
    return run.note is not None or any(attempt.waited for attempt in run.attempts)


def _unsettled(stack: Stack, runs: dict[str, str]) -> str:
    """The runs a timed-out wait left open, with their state, attempt and note (what CI prints)."""
    left = []
    for name, run_id in runs.items():
        run = _run(stack, run_id)
        if (name in BOB and not _bob_settled(stack, runs)) or (name not in BOB and _open(stack, run_id)):
            waited = [attempt.waited for attempt in run.attempts]
            left.append(f"{name} {run_id} {run.state.value} attempt={run.attempt} note={run.note!r} waited={waited}")
    return "; ".join(left) or "none"


def _check_worker_runs(stack: Stack, runs: dict[str, str], released: dict[str, str]) -> None:
    assert _state(stack, runs["up"]) is RunState.SUCCEEDED
    assert _state(stack, runs["fails"]) in (RunState.FAILED, RunState.DEAD)
    for job_id in released.values():
        assert stack.setup.store.list_runs(job_id, RunQuery()).items, f"no run released for {job_id}"
    assert runs["fails"] in {a.run_id for a in stack.setup.store.list_alerts(OWNER)}, "the owner was not alerted"
    job_id, scheduled_at = ids.parse_run_id(runs["fails"])
    assert stack.setup.store.get_job(job_id).status is JobStatus.PAUSED, "the failure did not pause its job"
    assert stack.setup.store.get_notification(job_id, scheduled_at) is not None, "no notification recorded"


# -- reaper -------------------------------------------------------------------------------------------


def reaper(stack: Stack, target: TargetServer) -> None:
    now = now_ms()
    later = {"run_at": iso(now + HOUR)}
    jobs = {
        name: stack.setup_api("POST", "/jobs", _spec(f"r-{name}", target.url("/ok"), max_retries=0, **later))["id"]
        for name in ("dead-lettered", "lost", "gone")
    }
    # its burial pauses its job and owes a notification, which the reaper delivers (signed) in its tick
    vanished_spec = _spec("r-vanished", target.url("/ok"), max_retries=0, **_outcomes(target), **later)
    jobs["vanished"] = stack.setup_api("POST", "/jobs", vanished_spec)["id"]
    dependents = {
        name: stack.setup_api("POST", "/jobs", _dependent(f"r-{name}-down", target.url("/ok"), jobs[name]))["id"]
        for name in ("vanished", "dead-lettered")
    }
    past = now - 10 * MINUTE
    vanished = Run(
        job_id=jobs["vanished"],
        scheduled_at=past,
        owner=OWNER,
        state=RunState.RUNNING,
        attempt=1,
        worker_id="gone:1",
        started_at=past,
        lease_expires_at=past + MINUTE,
        deadline_at=past + 2 * MINUTE,
        created_at=past,
    )
    lost = Run(job_id=jobs["lost"], scheduled_at=past, owner=OWNER, deadline_at=past + 2 * MINUTE, created_at=past)
    gone = lost.model_copy(update={"job_id": jobs["gone"]})
    dead_lettered = lost.model_copy(update={"job_id": jobs["dead-lettered"], "deadline_at": now + HOUR})
    runs = [vanished, lost, gone, dead_lettered]
    if stack.settings.long_run_queue_url:  # a lost long run is resent to the long-run queue
        job = stack.setup_api("POST", "/jobs", _spec("r-lost-long", target.url("/ok"), timeout_s=_long(stack)))
        runs.append(lost.model_copy(update={"job_id": job["id"]}))
    stack.setup.store.insert_runs(runs)
    stack.setup_api("DELETE", f"/jobs/{jobs['gone']}")
    stack.setup.store.take_slot(OWNER, lost.run_id, 5, past)  # a slot its run never released
    stack.setup.dead_letters.send([Dispatch(dead_lettered.run_id, not_before=past, group=OWNER)])

    stack.invoke("reaper", {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}})
    dlq_url = stack.settings.dead_letter_queue_url
    assert dlq_url is not None
    messages = wait_until(lambda: _receive(stack, dlq_url), 10, "the dead-letter message")
    answer = stack.invoke("reaper", sqs_records(messages, _queue_arn(dlq_url)))
    assert answer == {"batchItemFailures": []}, answer

    assert _state(stack, vanished.run_id) is RunState.DEAD
    assert _state(stack, dead_lettered.run_id) is RunState.DEAD
    assert _state(stack, gone.run_id) is RunState.CANCELLED
    assert lost.run_id in stack.queued_run_ids(stack.settings.dispatch_queue_url or ""), "the lost run was not resent"
    if stack.settings.long_run_queue_url:
        assert runs[-1].run_id in stack.queued_run_ids(stack.settings.long_run_queue_url), "the lost long run"
    assert not stack.setup.store.slot_holders(OWNER), "the leaked slot was not freed"
    assert stack.setup.store.get_job(vanished.job_id).status is JobStatus.PAUSED, "the burial did not pause"
    notification = stack.setup.store.get_notification(vanished.job_id, vanished.scheduled_at)
    assert notification is not None and notification.state is NotificationState.DELIVERED, notification
    for name, job_id in dependents.items():
        assert stack.setup.store.list_runs(job_id, RunQuery()).items, f"the {name} run released no dependent"


# -- helpers ------------------------------------------------------------------------------------------


def _spec(name: str, url: str, **fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "target": {"url": url}, "retry": {"backoff_s": 1, "max_backoff_s": 1}}
    secret = fields.pop("secret_headers", None)
    if secret:
        spec["target"]["secret_headers"] = secret
    if not {"schedule", "run_at", "depends_on"} & set(fields):
        spec["run_at"] = iso(now_ms() + HOUR)
    return {**spec, **fields}


def _outcomes(target: TargetServer) -> dict[str, Any]:
    """A job's run outcomes: paused after one failure, failures notified to a webhook that answers 200."""
    return {"pause_after_failures": 1, "notify": {"on": ["failure"], "url": target.url("/ok-notify")}}


def _dependent(name: str, url: str, upstream: str, **fields: Any) -> dict[str, Any]:
    return _spec(name, url, depends_on={"jobs": [upstream], "when": "finished"}, **fields)


def _created(answer: tuple[int, Any]) -> str:
    status, body = answer
    assert status == 201, body
    return str(body["id"])


def _trigger(stack: Stack, job_id: str) -> str:
    return str(stack.setup_api("POST", f"/jobs/{job_id}/trigger")["run_id"])


def _admin(stack: Stack) -> str:
    role = stack.settings.admins and next(iter(stack.settings.admins))
    assert role, "the api has no admin principal"
    return role.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/") + "/operator"


def _long(stack: Stack) -> int:
    assert stack.settings.long_run_after_s is not None
    return stack.settings.long_run_after_s + 60


def _target_grants(stack: Stack) -> list[Grant]:
    """The worker's grants on AWS targets (the operator's ``target_arns``)."""
    ours = {stack.settings.dispatch_queue_url, stack.settings.long_run_queue_url}
    return [
        g
        for g in stack.grants("worker")
        if g.action in TARGET_KINDS and not (g.action == "sqs:SendMessage" and _queue_url(g.resource) in ours)
    ]


def _queue_url(arn: str) -> str:
    _, _, _, region, account, name = arn.split(":", 5)
    return f"https://sqs.{region}.amazonaws.com/{account}/{name}"


def _queue_arn(url: str) -> str:
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:us-east-1:{account}:{name}"


def _receive(stack: Stack, queue_url: str) -> list[dict[str, Any]]:
    return list(
        stack.setup.clients.sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], VisibilityTimeout=30
        ).get("Messages", [])
    )


def _run(stack: Stack, run_id: str) -> Run:
    return stack.setup.store.get_run(*ids.parse_run_id(run_id))


def _state(stack: Stack, run_id: str) -> RunState:
    return _run(stack, run_id).state


def _all_terminal(stack: Stack, run_ids: Any) -> bool:
    return all(not _open(stack, run_id) for run_id in run_ids)


def _open(stack: Stack, run_id: str) -> bool:
    return _state(stack, run_id) in (RunState.SCHEDULED, RunState.RUNNING, RunState.RETRYING)
