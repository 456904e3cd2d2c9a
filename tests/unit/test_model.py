"""Tests for punctual.model: JobSpec validation, bounds, targets, and the lifecycles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from punctual import ids
from punctual.errors import InvalidSchedule, InvalidTimezone
from punctual.model import (
    JOB_TRANSITIONS,
    MAX_BACKFILL,
    MAX_HEADERS,
    MAX_JITTER_S,
    MAX_PAYLOAD_BYTES,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    OPEN_STATES,
    RUN_TRANSITIONS,
    TERMINAL_STATES,
    Catchup,
    EventBridgeTarget,
    HttpTarget,
    Job,
    JobSpec,
    JobStatus,
    LambdaTarget,
    Overlap,
    Run,
    RunState,
    SqsTarget,
    StepFunctionsTarget,
    truncate,
)

pytestmark = pytest.mark.unit

HTTP = {"type": "http", "url": "https://example.com/hook"}
LAMBDA_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:my-fn"
STATE_MACHINE_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:my_machine"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/my-queue"


def spec(**fields: Any) -> JobSpec:
    body: dict[str, Any] = {"name": "nightly-report", "schedule": "0 * * * *", "target": HTTP}
    body.update(fields)
    return JobSpec.model_validate({k: v for k, v in body.items() if v is not _DROP})


_DROP = object()


def refused(**fields: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        spec(**fields)
    return info.value


def error_locations(error: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in error.errors()}


# -- the seed's request body --------------------------------------------------------------------


def test_seed_body_is_accepted_with_defaults() -> None:
    job = JobSpec.model_validate(
        {
            "name": "nightly-report",
            "schedule": "0 * * * *",
            "timezone": "Europe/Berlin",
            "payload": {"any": "json"},
            "timeout_s": 300,
            "max_retries": 3,
            "jitter_s": 0,
            "target": {"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {}},
        }
    )
    assert job.is_recurring
    assert isinstance(job.target, HttpTarget)
    assert job.overlap is Overlap.ALLOW
    assert job.catchup is Catchup.LATEST
    assert job.retry.backoff_s <= job.retry.max_backoff_s


def test_defaults() -> None:
    job = spec()
    assert (job.timezone, job.timeout_s, job.max_retries, job.jitter_s) == ("UTC", 60, 3, 0)
    assert job.payload is None
    assert job.max_backfill >= 1


def test_whitespace_is_stripped() -> None:
    assert spec(name="  report  ").name == "report"


# -- schedule XOR run_at ----------------------------------------------------------------------


def test_one_time_job() -> None:
    job = spec(schedule=None, run_at="2027-01-15T09:00:00+01:00")
    assert not job.is_recurring
    assert job.run_at == datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


def test_both_schedule_and_run_at_are_refused() -> None:
    refused(run_at="2027-01-15T09:00:00Z")


def test_neither_schedule_nor_run_at_is_refused() -> None:
    refused(schedule=None)
    refused(schedule=_DROP)


@pytest.mark.parametrize("run_at", ["2027-01-15T09:00:00", datetime(2027, 1, 15, 9, 0)])
def test_naive_run_at_is_refused(run_at: object) -> None:
    error = refused(schedule=None, run_at=run_at)
    assert "run_at" in error_locations(error)
    assert "offset" in str(error)


@pytest.mark.parametrize(
    "run_at",
    [
        "2027-01-15T09:00:00Z",
        "2027-01-15T09:00:00+05:30",
        datetime(2027, 1, 15, 9, tzinfo=timezone(timedelta(hours=-7))),
    ],
)
def test_aware_run_at_is_accepted(run_at: object) -> None:
    job = spec(schedule=None, run_at=run_at)
    assert job.run_at is not None and job.run_at.utcoffset() is not None


@pytest.mark.parametrize("cron", ["", "not a cron", "* * * *", "0 0 30 2 *", "61 * * * *", "0 0 * * * *", "@reboot"])
def test_bad_cron_is_refused(cron: str) -> None:
    # the cron validator raises the domain error; either way nothing is built
    with pytest.raises((ValidationError, InvalidSchedule)):
        spec(schedule=cron)


def test_cron_is_normalized() -> None:
    assert spec(schedule="  0   9 *  * MON-FRI ").schedule == "0 9 * * MON-FRI"


@pytest.mark.parametrize("tz", ["Mars/Olympus", "../etc/passwd", "/usr/share/zoneinfo/UTC"])
def test_bad_timezone_is_refused(tz: str) -> None:
    with pytest.raises((ValidationError, InvalidTimezone)):
        spec(timezone=tz)


def test_empty_timezone_is_refused() -> None:
    refused(timezone="")


# -- payload ----------------------------------------------------------------------------------


def test_payload_at_the_limit_is_accepted() -> None:
    payload = "a" * (MAX_PAYLOAD_BYTES - 2)  # JSON adds the two quotes
    assert spec(payload=payload).payload == payload


def test_payload_over_the_limit_is_refused() -> None:
    error = refused(payload="a" * (MAX_PAYLOAD_BYTES - 1))
    assert "payload" in error_locations(error)
    assert str(MAX_PAYLOAD_BYTES) in str(error)


def test_payload_is_measured_in_bytes_not_characters() -> None:
    refused(payload="é" * (MAX_PAYLOAD_BYTES // 2))  # 2 bytes each in UTF-8... or 6 as \u escapes


def test_any_json_payload_is_kept() -> None:
    payload = {"a": [1, 2.5, "x", None, True], "b": {"c": {"d": []}}}
    assert spec(payload=payload).payload == payload


# -- unknown fields ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"unknown": 1},
        {"target": {**HTTP, "extra": 1}},
        {"retry": {"backoff_s": 1, "max_backoff_s": 2, "factor": 3}},
        {"id": "job_" + "0" * 32},  # identity is not the user's to set
        {"status": "paused"},
        {"owner": "mallory"},
        {"next_run_at": 0},
    ],
)
def test_unknown_fields_are_refused(fields: dict[str, Any]) -> None:
    refused(**fields)


# -- targets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        (HTTP, HttpTarget),
        ({"type": "http", "url": "http://localhost:8080/x", "method": "PUT", "headers": {"X-A": "b"}}, HttpTarget),
        ({"type": "lambda", "function_arn": LAMBDA_ARN}, LambdaTarget),
        ({"type": "lambda", "function_arn": LAMBDA_ARN + ":live", "invocation": "request_response"}, LambdaTarget),
        ({"type": "lambda", "function_arn": "arn:aws-cn:lambda:cn-north-1:123456789012:function:f"}, LambdaTarget),
        ({"type": "sqs", "queue_url": QUEUE_URL}, SqsTarget),
        ({"type": "sqs", "queue_url": QUEUE_URL + ".fifo"}, SqsTarget),
        ({"type": "stepfunctions", "state_machine_arn": STATE_MACHINE_ARN}, StepFunctionsTarget),
        ({"type": "eventbridge"}, EventBridgeTarget),
        ({"type": "eventbridge", "event_bus": "orders", "source": "me", "detail_type": "tick"}, EventBridgeTarget),
    ],
)
def test_each_target_type_is_accepted(target: dict[str, Any], kind: type) -> None:
    assert isinstance(spec(target=target).target, kind)


def test_eventbridge_defaults() -> None:
    target = spec(target={"type": "eventbridge"}).target
    assert isinstance(target, EventBridgeTarget)
    assert (target.event_bus, target.source, target.detail_type) == ("default", "punctual", "punctual.run")


@pytest.mark.parametrize(
    "target",
    [
        {"type": "ftp", "url": "ftp://example.com"},
        {"function_arn": LAMBDA_ARN},  # without a type a target is http: the other kinds name theirs
        {"type": None, "url": "https://example.com/hook"},
        {
            "type": "lambda",
            "function_arn": "arn:aws:lambda:us-east-1:\uff11\uff12\uff13456789012:function:f",
        },  # full-width
        {"type": "sqs", "queue_url": "https://sqs.€.amazonaws.com/123456789012/q"},
        {"type": "http", "url": "https://example.com", "headers": {"X-A": "1", "x-a": "2"}},  # named twice
        {"type": "eventbridge", "event_bus": "bus \u20ac"},
        {"type": "http"},
        {"type": "http", "url": "ftp://example.com/hook"},
        {"type": "http", "url": "https://exa mple.com"},
        {"type": "http", "url": "https://" + "a" * 2048},
        {"type": "http", "url": "https://example.com", "method": "TRACE"},
        {"type": "http", "url": "https://example.com", "headers": {f"h{i}": "v" for i in range(MAX_HEADERS + 1)}},
        {"type": "http", "url": "https://example.com", "headers": {"": "v"}},
        {"type": "http", "url": "https://example.com", "headers": {"h": "v" * 4097}},
        {"type": "lambda", "function_arn": "my-fn"},
        {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:1234:function:f"},
        {"type": "lambda", "function_arn": LAMBDA_ARN, "invocation": "dry_run"},
        {"type": "lambda", "function_arn": STATE_MACHINE_ARN},
        {"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/my-queue"},
        {"type": "sqs", "queue_url": "http://sqs.us-east-1.amazonaws.com/123456789012/q"},
        {"type": "stepfunctions", "state_machine_arn": LAMBDA_ARN},
        {"type": "eventbridge", "event_bus": ""},
        {"type": "http", "function_arn": LAMBDA_ARN},  # fields of another target type
        "https://example.com/hook",
    ],
)
def test_bad_targets_are_refused(target: object) -> None:
    refused(target=target)


def test_a_target_without_type_is_http() -> None:
    # issue 26 case 8: the document says type defaults to http; the API agrees
    target = spec(target={"url": "https://example.com/hook"}).target
    assert isinstance(target, HttpTarget) and target.type == "http"


def test_headers_at_the_limit_are_accepted() -> None:
    headers = {f"h{i}": "v" for i in range(MAX_HEADERS)}
    target = spec(target={**HTTP, "headers": headers}).target
    assert isinstance(target, HttpTarget) and target.headers == headers


# -- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "low", "high"),
    [
        ("timeout_s", 1, MAX_TIMEOUT_S),
        ("max_retries", 0, MAX_RETRIES),
        ("jitter_s", 0, MAX_JITTER_S),
        ("max_backfill", 1, MAX_BACKFILL),
    ],
)
def test_numeric_bounds(field: str, low: int, high: int) -> None:
    assert getattr(spec(**{field: low}), field) == low
    assert getattr(spec(**{field: high}), field) == high
    assert field in error_locations(refused(**{field: low - 1}))
    assert field in error_locations(refused(**{field: high + 1}))


@pytest.mark.parametrize("field", ["timeout_s", "max_retries", "jitter_s"])
@pytest.mark.parametrize("value", ["ten", 1.5, None])
def test_numeric_fields_must_be_integers(field: str, value: object) -> None:
    refused(**{field: value})


@pytest.mark.parametrize("name", ["", " ", "-leading-dash", "a" * 129, "tab\there", "new\nline", "emoji-😀"])
def test_bad_names_are_refused(name: str) -> None:
    refused(name=name)


@pytest.mark.parametrize("name", ["a", "A" * 128, "reports/nightly:v2 1.0_x-y"])
def test_good_names_are_accepted(name: str) -> None:
    assert spec(name=name).name == name


# -- retry ------------------------------------------------------------------------------------


def test_retry_cap_must_not_be_below_base() -> None:
    assert spec(retry={"backoff_s": 10, "max_backoff_s": 10}).retry.max_backoff_s == 10
    error = refused(retry={"backoff_s": 20, "max_backoff_s": 10})
    assert "max_backoff_s" in str(error)


@pytest.mark.parametrize(
    "retry",
    [
        {"backoff_s": 0},
        {"backoff_s": 3_601, "max_backoff_s": 43_200},
        {"max_backoff_s": 0},
        {"backoff_s": 1, "max_backoff_s": 43_201},
    ],
)
def test_retry_bounds(retry: dict[str, int]) -> None:
    refused(retry=retry)


@pytest.mark.parametrize("value", ["nope", "ALLOW", ""])
def test_overlap_and_catchup_are_closed_enums(value: str) -> None:
    refused(overlap=value)
    refused(catchup=value)


# -- Job and Run ------------------------------------------------------------------------------


def _job(**fields: Any) -> Job:
    base: dict[str, Any] = {
        "name": "n",
        "schedule": "* * * * *",
        "target": HTTP,
        "id": ids.new_job_id(),
        "owner": "alice",
        "created_at": 1,
        "updated_at": 1,
        "next_run_at": 60_000,
    }
    return Job.model_validate(base | fields)


def test_job_spec_round_trips_through_the_job() -> None:
    job = _job(payload={"k": [1, 2]}, jitter_s=5, status=JobStatus.PAUSED)
    assert job.spec == JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
    assert job.spec.payload == {"k": [1, 2]}
    assert Job.model_validate(job.model_dump()) == job
    assert Job.model_validate_json(job.model_dump_json()) == job


def test_job_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        _job(surprise=True)


def test_run_id_and_openness() -> None:
    job_id = ids.new_job_id()
    run = Run(job_id=job_id, scheduled_at=123, owner="alice", deadline_at=1, created_at=1)
    assert run.run_id == ids.run_id_for(job_id, 123)
    assert ids.parse_run_id(run.run_id) == (job_id, 123)
    assert run.state is RunState.SCHEDULED and run.attempt == 0 and run.attempts == []
    for state in RunState:
        assert run.model_copy(update={"state": state}).is_open == (state in OPEN_STATES)


# -- lifecycles -------------------------------------------------------------------------------


def test_run_states_are_open_or_terminal() -> None:
    assert set(RunState) == OPEN_STATES | TERMINAL_STATES
    assert not OPEN_STATES & TERMINAL_STATES
    for state in RunState:
        assert state.is_terminal == (state in TERMINAL_STATES)


def test_run_transitions_cover_every_state() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    for targets in RUN_TRANSITIONS.values():
        assert targets <= set(RunState)


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_terminal_run_states_have_no_exits(state: RunState) -> None:
    assert RUN_TRANSITIONS[state] == frozenset()


@pytest.mark.parametrize("state", sorted(OPEN_STATES))
def test_open_run_states_can_end(state: RunState) -> None:
    # every open run can reach a terminal state (nothing stays open forever): dead and cancelled
    # are always available to the reaper and to overlap/deletion
    assert {RunState.DEAD, RunState.CANCELLED} <= RUN_TRANSITIONS[state]


def test_run_transitions_follow_the_protocol() -> None:
    assert RunState.RUNNING in RUN_TRANSITIONS[RunState.SCHEDULED]  # lease
    assert RunState.SUCCEEDED not in RUN_TRANSITIONS[RunState.SCHEDULED]  # only a leased run finishes
    assert RunState.RUNNING in RUN_TRANSITIONS[RunState.RUNNING]  # takeover
    assert RunState.RETRYING in RUN_TRANSITIONS[RunState.RUNNING]
    assert RunState.RUNNING in RUN_TRANSITIONS[RunState.RETRYING]
    assert RunState.SCHEDULED not in set().union(*RUN_TRANSITIONS.values())  # nothing goes back


def test_job_transitions() -> None:
    assert set(JOB_TRANSITIONS) == set(JobStatus)
    assert JOB_TRANSITIONS[JobStatus.DELETED] == frozenset()
    for status, targets in JOB_TRANSITIONS.items():
        assert status not in targets
        if status is not JobStatus.DELETED:
            assert JobStatus.DELETED in targets  # every live job can be deleted
    assert JobStatus.PAUSED in JOB_TRANSITIONS[JobStatus.ACTIVE]
    assert JobStatus.ACTIVE in JOB_TRANSITIONS[JobStatus.PAUSED]
    assert JobStatus.COMPLETED not in JOB_TRANSITIONS[JobStatus.PAUSED]


def test_truncate() -> None:
    assert truncate(None, 5) is None
    assert truncate("abc", 5) == "abc"
    assert truncate("abcde", 5) == "abcde"
    cut = truncate("abcdefgh", 5)
    assert cut == "ab..." and len(cut) == 5
