"""Async completion, the pure parts: callback tokens (``punctual.runs.tokens``), the judgement of a
callback on its run (``punctual.runs.callbacks``), a job's completion fields, the headers an attempt
carries, and the reaper's rounds between passes (``Reaper._between_passes``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import ValidationError

from punctual.errors import AttemptCompleted, AttemptSuperseded, AttemptTimedOut, InvalidCallbackToken
from punctual.execution.targets import signing
from punctual.execution.targets.request_rules import TargetRefused
from punctual.execution.targets.types import Invocation
from punctual.model import (
    Attempt,
    AttemptOutcome,
    Completion,
    HttpTarget,
    Job,
    JobSpec,
    Run,
    RunState,
)
from punctual.runs import callbacks, tokens

KEY = b"k" * 32
LAMBDA = {"type": "lambda", "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}
RUN_ID = "run_" + "a" * 32 + "_1800000000000"
NOW = 1_800_000_100_000


def test_a_token_names_one_attempt_of_one_run_and_carries_no_worker_id() -> None:
    token = tokens.mint(KEY, RUN_ID, 3, "ip-10-0-0-1:4242")
    assert token.startswith("pct1.3.") and "ip-10" not in token and len(token) <= tokens.MAX_TOKEN_CHARS
    claim = tokens.verify(KEY, RUN_ID, token)
    assert (claim.run_id, claim.attempt, claim.lease) == (RUN_ID, 3, tokens.lease_of("ip-10-0-0-1:4242"))
    assert tokens.mint(KEY, RUN_ID, 3, "ip-10-0-0-1:4242") == token  # nothing random: nothing to store


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t.replace("pct1.3.", "pct1.4.", 1),  # another attempt
        lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # another MAC
        lambda t: t.replace(tokens.lease_of("w"), tokens.lease_of("x")),  # another lease
        lambda t: "",
        lambda t: t + "=",
        lambda t: "Bearer " + t,
    ],
)
def test_a_tampered_or_malformed_token_is_refused(tamper: Any) -> None:
    with pytest.raises(InvalidCallbackToken):
        tokens.verify(KEY, RUN_ID, tamper(tokens.mint(KEY, RUN_ID, 3, "w")))


def test_a_token_opens_neither_another_run_nor_under_another_key() -> None:
    token = tokens.mint(KEY, RUN_ID, 1, "w")
    with pytest.raises(InvalidCallbackToken):
        tokens.verify(KEY, RUN_ID.replace("a", "b"), token)
    with pytest.raises(InvalidCallbackToken):
        tokens.verify(b"x" * 32, RUN_ID, token)
    with pytest.raises(InvalidCallbackToken):
        tokens.verify(KEY, RUN_ID, None)


def _run(state: RunState, attempt: int = 2, **fields: Any) -> Run:
    fields.setdefault("worker_id", "w" if state in (RunState.RUNNING, RunState.ACCEPTED) else None)
    fields.setdefault("lease_expires_at", NOW + 1 if fields["worker_id"] else None)
    return Run(
        job_id="job_" + "a" * 32,
        scheduled_at=1_800_000_000_000,
        owner="o",
        state=state,
        attempt=attempt,
        deadline_at=NOW,
        created_at=NOW,
        **fields,
    )


def _ended(outcome: AttemptOutcome) -> list[Attempt]:
    return [Attempt(number=2, outcome=AttemptOutcome.ACCEPTED, finished_at=NOW - 9), Attempt(number=2, outcome=outcome)]


CLAIM = tokens.Claim(RUN_ID, 2, tokens.lease_of("w"))


@pytest.mark.parametrize(
    ("run", "error"),
    [
        (_run(RunState.ACCEPTED), None),
        (_run(RunState.RUNNING), None),  # before the worker recorded the 202: the lease is the worker's
        (_run(RunState.ACCEPTED, lease_expires_at=NOW - 1), AttemptTimedOut),
        (_run(RunState.RETRYING, attempts=_ended(AttemptOutcome.TIMEOUT)), AttemptTimedOut),
        (_run(RunState.DEAD, attempts=_ended(AttemptOutcome.TIMEOUT)), AttemptTimedOut),
        (_run(RunState.SUCCEEDED, attempts=_ended(AttemptOutcome.SUCCEEDED)), AttemptCompleted),
        (_run(RunState.RETRYING, attempts=_ended(AttemptOutcome.FAILED)), AttemptCompleted),
        (_run(RunState.CANCELLED), AttemptSuperseded),
        (_run(RunState.RUNNING, attempt=3), AttemptSuperseded),
        (_run(RunState.ACCEPTED, attempt=1), InvalidCallbackToken),  # an attempt the run never had
        (_run(RunState.ACCEPTED, worker_id="other"), InvalidCallbackToken),  # another lease of it
    ],
)
def test_a_callback_is_judged_on_its_run_as_read(run: Run, error: type[Exception] | None) -> None:
    if error is None:
        callbacks.judge(run, CLAIM, NOW)
    else:
        with pytest.raises(error):
            callbacks.judge(run, CLAIM, NOW)


def _spec(**fields: Any) -> JobSpec:
    fields.setdefault("target", {"type": "http", "url": "https://example.com/hook"})
    return JobSpec.model_validate({"name": "report", "schedule": "0 * * * *", **fields})


def test_completion_defaults_to_response_and_costs_no_stored_byte() -> None:
    spec = _spec()
    assert spec.completion is Completion.RESPONSE and spec.heartbeat_timeout_s is None
    assert "completion" not in spec.model_dump_json() and "heartbeat" not in spec.model_dump_json()
    callback = _spec(completion="callback")
    assert callback.heartbeat_ms == 300_000 and '"completion":"callback"' in callback.model_dump_json()
    assert _spec(completion="callback", heartbeat_timeout_s=30).heartbeat_ms == 30_000


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"completion": "callback", "heartbeat_timeout_s": 9}, "heartbeat_timeout_s"),
        ({"completion": "callback", "heartbeat_timeout_s": 43_201}, "heartbeat_timeout_s"),
        ({"heartbeat_timeout_s": 60}, "heartbeat_timeout_s"),  # a response job has no heartbeats
        ({"completion": "later"}, "completion"),
        ({"completion": "callback", "target": LAMBDA}, "completion"),  # its URL and token travel in headers
    ],
)
def test_bad_completion_fields_are_refused_naming_the_field(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _spec(**fields)
    assert {str(error["loc"][0]) for error in refused.value.errors()} == {where}


def test_a_heartbeat_deadline_never_passes_the_jobs_deadline_s() -> None:
    job = Job(**_spec(completion="callback", deadline_s=120).model_dump(), id="job_" + "a" * 32, owner="o",
              created_at=0, updated_at=0)  # fmt: skip
    run = _run(RunState.ACCEPTED)
    assert callbacks.deadline(job, run, NOW) == run.scheduled_at + 120_000  # now + 300 s would be later
    assert callbacks.out_of_time(job, run, run.scheduled_at + 120_000)
    assert not callbacks.out_of_time(job, run, run.scheduled_at + 119_999)


def test_a_callback_attempt_carries_its_url_and_token_and_no_log_line_shows_the_token() -> None:
    job = Job(**_spec(completion="callback").model_dump(), id="job_" + "a" * 32, owner="o", created_at=0,
              updated_at=0)  # fmt: skip
    run = _run(RunState.RUNNING, attempt=1)

    class _Keys:
        def callback_key(self) -> bytes:
            return KEY

        def signing_secret(self, owner: str) -> str:
            return "psk_secret"

    invocation = Invocation.of(job, run, 1, _Keys(), "https://api.example.com/v1/")  # type: ignore[arg-type]
    headers = signing.request_headers(
        {}, invocation, "example.com", b"{}", method="POST", path="/hook", v1=False, now_s=1
    )
    assert headers[tokens.URL_HEADER] == f"https://api.example.com/v1/runs/{run.run_id}"
    token = headers[tokens.TOKEN_HEADER]
    assert tokens.verify(KEY, run.run_id, token).attempt == 1
    assert token not in repr(invocation)
    block = signing.header_block({}, invocation, "example.com", b"{}", method="POST", path="/hook", v1=False, now_s=1)
    assert f"{tokens.TOKEN_HEADER}: {token}\r\n" in block
    with pytest.raises(TargetRefused):  # a worker without the API's URL cannot run a callback job
        Invocation.of(job, run, 1, _Keys(), None)  # type: ignore[arg-type]
    plain = Job(**_spec().model_dump(), id="job_" + "b" * 32, owner="o", created_at=0, updated_at=0)
    assert Invocation.of(plain, run, 1, _Keys(), None).callback is None  # type: ignore[arg-type]
    assert isinstance(plain.target, HttpTarget)


def test_the_reaper_looks_for_timed_out_acceptances_between_its_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    from punctual.reaping import reaper

    rounds: list[int] = []
    monkeypatch.setattr(reaper, "time_out_expired", lambda ending, now: rounds.append(now) or 0)

    class _Engine:
        store = queue = dead_letters = keys = None

    class _Clock:
        def now_ms(self) -> int:
            return NOW

    stop = threading.Event()
    timer = threading.Timer(0.35, stop.set)
    the_reaper = reaper.Reaper(_Engine(), _Clock(), interval_s=10.0, acceptance_interval_s=0.1)  # type: ignore[arg-type]
    timer.start()
    the_reaper._between_passes(stop)
    assert 2 <= len(rounds) <= 4  # every 0.1 s until stopped, not once per 10 s pass
    monkeypatch.setattr(reaper, "time_out_expired", lambda ending, now: rounds.append(now) or None)
    rounds.clear()
    waited = threading.Event()
    the_reaper.interval_s = 0.3
    the_reaper._between_passes(waited)  # an engine that keeps no index: one look, then the pass
    assert rounds == [NOW]


def test_the_authorizer_opens_exactly_the_two_callback_routes_of_the_tokens_run() -> None:
    from punctual.api.authorizer import authorize

    stage = "arn:aws:execute-api:us-east-1:123456789012:abc123/v1"
    event = {
        "type": "REQUEST",
        "methodArn": f"{stage}/POST/runs/{RUN_ID}/heartbeat",
        "headers": {"x-punctual-callback-token": tokens.mint(KEY, RUN_ID, 2, "w")},  # headers in any case
        "pathParameters": {"run_id": RUN_ID},
    }
    answer = authorize(event, KEY)
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == [f"{stage}/POST/runs/{RUN_ID}/heartbeat", f"{stage}/POST/runs/{RUN_ID}/complete"]
    assert answer["context"] == {"run_id": RUN_ID, "attempt": 2}
    for bad in (
        {**event, "pathParameters": {"run_id": RUN_ID.replace("a", "b")}},  # another run's path
        {**event, "headers": {}},
        {**event, "pathParameters": {"run_id": "replay"}},
    ):
        with pytest.raises(InvalidCallbackToken):
            authorize(bad, KEY)


def test_a_callback_run_is_priced_apart_and_the_models_per_run_counts_stay_as_they_were() -> None:
    from punctual.capacity.callbacks import callback_run
    from punctual.capacity.counts import per_run

    thirty = callback_run(heartbeats=6, accepted_minutes=30)  # 30 minutes, a heartbeat every 5
    assert (thirty.write_units, thirty.api_requests) == (7.0, 7)  # the acceptance and 6 heartbeats; 7 callbacks
    assert thirty.read_units == 7 * 2.5 + 29  # each callback's reads, and the reaper's pass each minute after the first
    assert 0 < thirty.usd < 0.0001  # about $43 per million such runs (API Gateway: 7 requests, $24.50)
    assert per_run().writes.total == 9  # a run whose answer ends it: unchanged (callback jobs are opt-in)


def test_the_accepted_runs_step_names_the_open_runs_index_as_the_schema_does() -> None:
    from punctual.engines.embedded import schema, schema_callbacks

    assert schema_callbacks.OPEN_RUN_SQL == schema.OPEN_RUN_SQL  # or the reaper's query cannot use it
    assert schema.MIGRATIONS[-1] == schema_callbacks.V14


@pytest.mark.parametrize("value", ["no", "false", 0, 1, "yes"])
def test_a_completions_retryable_and_a_replays_dry_run_are_json_booleans(value: Any) -> None:
    from punctual.api.callbacks import CompleteRequest
    from punctual.api.replay import ReplayRequest

    with pytest.raises(ValidationError, match="retryable"):
        CompleteRequest.model_validate({"state": "failed", "retryable": value})
    window = {"from": "2027-01-15T00:00:00Z", "to": "2027-01-16T00:00:00Z"}
    with pytest.raises(ValidationError, match="dry_run"):
        ReplayRequest.model_validate({**window, "dry_run": value})
    assert CompleteRequest.model_validate({"state": "failed", "retryable": False}).retryable is False
    assert ReplayRequest.model_validate({**window, "dry_run": True}).dry_run is True
