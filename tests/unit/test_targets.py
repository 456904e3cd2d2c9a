"""Targets: the HTTP target against a local server on 127.0.0.1 through both clients (the blocking
one and the worker's asyncio one), the SSRF policy, the AWS targets on moto."""

from __future__ import annotations

import io
import json
import socket
import time
import zipfile
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import boto3
import pytest
from moto import mock_aws

from punctual.clock import iso
from punctual.errors import InvalidInput
from punctual.execution.targets import Invocation, TargetPolicy, TargetRefused, TargetResult, Targets, check_target
from punctual.execution.targets.aws import AwsTargets, client_error_result
from punctual.execution.targets.policy import address_refusal
from punctual.model import (
    MAX_EXCERPT_CHARS,
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from tests.unit.local_target import (
    INVOCATION,
    JOB_ID,
    LOCAL,
    RUN_ID,
    SCHEDULED_AT,
    STRICT,
    job_with,
    run_of,
    send_async,
    send_blocking,
    server,
    url,
)

pytestmark = pytest.mark.unit
__all__ = ["server"]  # the fixture (tests.unit.local_target)


class Client(NamedTuple):
    send: Callable[..., TargetResult]
    timeout_slack_s: float  # how long a call timed out at 0.5 s may take in all


@pytest.fixture(params=["blocking", "async"])
def client(request: pytest.FixtureRequest) -> Client:
    """The HTTP target through either client: the blocking one (``http.send``: the Lambda workers,
    the threaded worker) and the worker's asyncio one (``AsyncTargets`` over ``wire``), which also
    starts and closes an event loop per call here."""
    return Client(send_blocking, 2.0) if request.param == "blocking" else Client(send_async, 3.0)


# -- a local HTTP target, through both clients ------------------------------------------------------------


def test_http_target_posts_the_payload_with_idempotency_and_run_headers(client, server):
    target = HttpTarget(url=url(server, "/ok"), headers={"Authorization": "Bearer t0ken"})
    result = client.send(target)
    assert result.ok and result.status_code == 200 and result.excerpt == "accepted"
    [(method, path, headers, body)] = server.requests
    assert (method, path) == ("POST", "/ok")
    assert json.loads(body) == {"report": "nightly", "n": 1}
    assert headers["Idempotency-Key"] == RUN_ID
    assert headers["X-Punctual-Run-Id"] == RUN_ID
    assert headers["X-Punctual-Attempt"] == "2"
    assert headers["X-Punctual-Scheduled-At"] == iso(SCHEDULED_AT) == "2027-01-15T08:00:00.000Z"
    assert headers["X-Punctual-Job-Id"] == JOB_ID
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer t0ken"
    assert headers["Host"] == f"127.0.0.1:{server.server_address[1]}"


def test_http_get_sends_no_body_and_query_strings_are_kept(client, server):
    assert not client.send(HttpTarget(url=url(server, "/ok?x=1&y=%20"), method="GET")).ok  # 404: path is /ok?x=...
    [(method, path, headers, body)] = server.requests
    assert method == "GET" and path == "/ok?x=1&y=%20" and body == b"" and "Content-Length" not in headers
    assert headers["Idempotency-Key"] == RUN_ID


@pytest.mark.parametrize(
    ("path", "status", "retryable"),
    [("/fail", 503, True), ("/bad", 400, False), ("/missing", 404, False), ("/redirect", 302, False)],
)
def test_http_non_2xx_fails_retryably_or_not_and_redirects_are_not_followed(client, server, path, status, retryable):
    result = client.send(HttpTarget(url=url(server, path)))
    assert not result.ok and result.status_code == status and result.retryable is retryable
    assert result.error and str(status) in result.error
    assert len(server.requests) == 1
    if status == 302:
        assert "not followed" in (result.error or "")


def test_http_timeout_is_a_retryable_timed_out_failure(client, server):
    started = time.monotonic()
    result = client.send(HttpTarget(url=url(server, "/slow")), timeout_s=0.5)
    assert time.monotonic() - started < client.timeout_slack_s
    assert not result.ok and result.timed_out and result.retryable


def test_http_excerpt_is_bounded(client, server):
    result = client.send(HttpTarget(url=url(server, "/big")))
    assert result.ok and result.excerpt is not None
    assert len(result.excerpt) == MAX_EXCERPT_CHARS and result.excerpt.endswith("...")


def test_http_connection_refused_is_retryable(client):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = client.send(HttpTarget(url=f"http://127.0.0.1:{port}/x"))
    assert not result.ok and result.retryable and not result.timed_out


# -- SSRF -----------------------------------------------------------------------------------------------


def test_loopback_is_refused_unless_the_policy_allows_it(client, server):
    result = client.send(HttpTarget(url=url(server, "/ok")), policy=STRICT)
    assert not result.ok and not result.retryable and "loopback" in (result.error or "")
    assert server.requests == []  # refused before connecting


@pytest.mark.parametrize(
    "target_url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0:8080/",
        "http://metadata.google.internal/computeMetadata/v1/",
    ],
)
def test_metadata_and_link_local_targets_are_refused_whatever_the_policy(client, target_url, monkeypatch):
    everything = TargetPolicy(allow_private=True, allow_loopback=True)
    connects: list[object] = []  # every socket's connect, the blocking client's and the event loop's
    monkeypatch.setattr(socket.socket, "connect", lambda sock, address: connects.append(address))
    monkeypatch.setattr(socket.socket, "connect_ex", lambda sock, address: connects.append(address))
    result = client.send(HttpTarget(url=target_url), policy=everything)
    assert not result.ok and not result.retryable and "refused" in (result.error or "")
    assert connects == []  # never connected (a wall-clock bound was flaky on a loaded machine)
    with pytest.raises(TargetRefused) as refused:
        check_target(HttpTarget(url=target_url), everything)
    assert refused.value.field == "target.url"


def test_a_name_is_judged_by_the_addresses_it_resolves_to(monkeypatch):
    answers = {"evil.example": "169.254.169.254", "intranet.example": "10.1.2.3"}

    def fake_getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    assert "link-local" in (send_blocking(HttpTarget(url="http://evil.example/")).error or "")
    assert "private" in (send_blocking(HttpTarget(url="http://intranet.example/")).error or "")
    # and check_target (no DNS at creation) lets the names through: they are checked per attempt
    check_target(HttpTarget(url="http://evil.example/"), STRICT)


def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(server, monkeypatch):
    # Given a name whose first answer is allowed and whose later answers point at the metadata service
    answers = iter(["127.0.0.1", "169.254.169.254", "169.254.169.254"])
    real = socket.getaddrinfo

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    port = server.server_address[1]
    result = send_blocking(HttpTarget(url=f"http://rebind.test:{port}/ok"))
    # Then the request reached the address that was checked, with the name as Host
    assert result.ok
    [(_, _, headers, _)] = server.requests
    assert headers["Host"] == f"rebind.test:{port}"


@pytest.mark.parametrize(
    ("address", "policy", "refused"),
    [
        ("8.8.8.8", STRICT, False),
        ("2606:4700:4700::1111", STRICT, False),
        ("127.0.0.1", STRICT, True),
        ("127.0.0.1", LOCAL, False),
        ("::1", STRICT, True),
        ("10.0.0.1", STRICT, True),
        ("10.0.0.1", TargetPolicy(allow_private=True), False),
        ("172.16.5.4", STRICT, True),
        ("192.168.1.1", STRICT, True),
        ("100.64.0.1", STRICT, True),
        ("fc00::1", STRICT, True),
        ("240.0.0.1", STRICT, True),
        ("169.254.169.254", TargetPolicy(allow_private=True, allow_loopback=True), True),
        ("fe80::1", TargetPolicy(allow_private=True, allow_loopback=True), True),
        ("224.0.0.1", TargetPolicy(allow_private=True), True),
        ("255.255.255.255", TargetPolicy(allow_private=True), True),
        ("::ffff:127.0.0.1", STRICT, True),
    ],
)
def test_address_policy(address, policy, refused):
    import ipaddress

    assert (address_refusal(ipaddress.ip_address(address), policy) is not None) is refused


def test_check_target_refuses_bad_urls_and_reserved_headers():
    check_target(HttpTarget(url="https://example.com/hook"), STRICT)
    check_target(HttpTarget(url="http://localhost:8080/hook"), LOCAL)
    for bad_url in ("http://localhost:8080/hook", "http://127.0.0.1/hook", "http://10.0.0.8/hook"):
        with pytest.raises(InvalidInput) as refused:
            check_target(HttpTarget(url=bad_url), STRICT)
        assert refused.value.field == "target.url"
    with pytest.raises(InvalidInput, match="port"):
        check_target(HttpTarget(url="http://example.com:99999/"), STRICT)
    for headers in ({"Idempotency-Key": "x"}, {"X-Punctual-Attempt": "9"}, {"Host": "a"}, {"Bad Name": "x"}):
        with pytest.raises(InvalidInput) as refused:
            check_target(HttpTarget(url="https://example.com/", headers=headers), STRICT)
        assert refused.value.field == f"target.headers.{next(iter(headers))}"
    check_target(LambdaTarget(function_arn="arn:aws:lambda:us-east-1:123456789012:function:f"), STRICT)


# -- the dispatcher -----------------------------------------------------------------------------------


def test_targets_dispatches_http_and_turns_exceptions_into_retryable_failures(server):
    job = job_with(HttpTarget(url=url(server, "/ok")))
    assert Targets(LOCAL).execute(job, run_of(job), 1, time.monotonic() + 5).ok

    class Broken:
        def send(self, *args: Any) -> Any:
            raise RuntimeError("bug")

    lambda_job = job_with(LambdaTarget(function_arn="arn:aws:lambda:us-east-1:123456789012:function:f"))
    result = Targets(LOCAL, aws=Broken()).execute(lambda_job, run_of(lambda_job), 1, time.monotonic() + 5)  # type: ignore[arg-type]
    assert not result.ok and result.retryable and "RuntimeError: bug" in (result.error or "")
    assert Targets(LOCAL).execute(job, run_of(job), 1, time.monotonic() - 1).timed_out


# -- AWS targets on moto ------------------------------------------------------------------------------


@pytest.fixture
def aws() -> Iterator[AwsTargets]:
    with mock_aws(config={"lambda": {"use_docker": False}}):
        yield AwsTargets(lambda service: boto3.client(service, region_name="us-east-1"))


def deadline() -> float:
    return time.monotonic() + 10


def event_of(body: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(body)
    return event


def test_sqs_target_sends_the_run_event(aws):
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName="hooks")["QueueUrl"]
    result = aws.send(SqsTarget(queue_url=queue_url), INVOCATION, deadline())
    assert result.ok and "MessageId" in (result.excerpt or "")
    [message] = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert event_of(message["Body"]) == {
        "run_id": RUN_ID,
        "job_id": JOB_ID,
        "scheduled_at": "2027-01-15T08:00:00.000Z",
        "attempt": 2,
        "payload": {"report": "nightly", "n": 1},
    }


def test_sqs_fifo_target_deduplicates_on_the_run_id(aws):
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName="hooks.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert aws.send(SqsTarget(queue_url=queue_url), INVOCATION, deadline()).ok
    retried = Invocation(RUN_ID, JOB_ID, SCHEDULED_AT, 3, INVOCATION.payload)
    assert aws.send(SqsTarget(queue_url=queue_url), retried, deadline()).ok
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 1


def test_stepfunctions_target_names_the_execution_by_run_id_and_a_repeat_counts_as_started(aws):
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn = sfn.create_state_machine(name="sm", definition=definition, roleArn="arn:aws:iam::123456789012:role/sfn")[
        "stateMachineArn"
    ]
    target = StepFunctionsTarget(state_machine_arn=arn)
    first = aws.send(target, INVOCATION, deadline())
    again = aws.send(target, Invocation(RUN_ID, JOB_ID, SCHEDULED_AT, 3, INVOCATION.payload), deadline())
    assert first.ok and again.ok and "already started" in (again.excerpt or "")
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == [RUN_ID]


def test_eventbridge_target_puts_the_run_event(aws):
    result = aws.send(EventBridgeTarget(), INVOCATION, deadline())
    assert result.ok and "EventId" in (result.excerpt or "")
    missing_bus = aws.send(EventBridgeTarget(event_bus="nope"), INVOCATION, deadline())
    assert not missing_bus.ok and not missing_bus.retryable


def test_eventbridge_failed_entries_fail_the_attempt():
    class FailingEvents:
        def put_events(self, **_: Any) -> dict[str, Any]:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException", "ErrorMessage": "slow"}]}

    result = AwsTargets(lambda _: FailingEvents()).send(EventBridgeTarget(), INVOCATION, deadline())
    assert not result.ok and result.retryable and "ThrottlingException" in (result.error or "")


def _zipped_handler() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


@pytest.mark.parametrize(("invocation", "status"), [("event", 202), ("request_response", 200)])
def test_lambda_target_invokes_the_function(aws, invocation, status):
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    function_arn = boto3.client("lambda", region_name="us-east-1").create_function(
        FunctionName="hook",
        Runtime="python3.11",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": _zipped_handler()},
    )["FunctionArn"]
    result = aws.send(LambdaTarget(function_arn=function_arn, invocation=invocation), INVOCATION, deadline())
    assert result.ok and result.status_code == status
    if invocation == "request_response":
        assert RUN_ID in (result.excerpt or "")


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        ("ThrottlingException", 400, True),
        ("TooManyRequestsException", 429, True),
        ("ServiceException", 500, True),
        ("SomethingNew", 503, True),
        ("ResourceNotFoundException", 404, False),
        ("AccessDeniedException", 403, False),
        ("InvalidParameterValueException", 400, False),
    ],
)
def test_aws_client_errors_are_classified(code, status, retryable):
    response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    result = client_error_result(response)
    assert not result.ok and result.retryable is retryable and result.status_code == status
    assert result.error == f"{code}: m"
