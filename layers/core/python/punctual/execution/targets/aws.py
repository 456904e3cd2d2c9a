"""The AWS targets: Lambda, SQS, Step Functions and EventBridge.

Every kind receives the same JSON event::

    {"run_id": "...", "job_id": "...", "scheduled_at": "2027-01-15T08:00:00.000Z", "attempt": 1, "payload": ...}

and deduplicates as well as the service allows:

- ``lambda``: ``Invoke`` (``Event``: asynchronous, 202 is success; ``RequestResponse``: the
  function's answer is the excerpt, and a function error fails the attempt, retryably).
- ``sqs``: ``SendMessage``; FIFO queues get ``MessageDeduplicationId = run_id`` (and the job id as
  the group), so a retried attempt within SQS's 5-minute window is not delivered twice.
- ``stepfunctions``: ``StartExecution`` named by the run id. A name can start one execution only,
  so a second attempt answers ``ExecutionAlreadyExists``, which counts as success (the run started).
- ``eventbridge``: ``PutEvents`` with the event as ``Detail``; a failed entry fails the attempt.

Errors: throttling, service-side (5xx) and connection errors are retryable; every other client
error (missing resource, access denied, invalid parameter) is a configuration problem that
retrying cannot fix, so the run fails at once (``failed``, owner alerted). So does a request the
SDK refuses to build (``ParamValidationError``).

boto3 is imported here and nowhere else in the targets; clients are created on first use, once
per service, from an injectable factory.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from punctual.clock import iso
from punctual.execution.targets.types import Invocation, TargetResult, failed, succeeded, timed_out
from punctual.model import (
    MAX_EXCERPT_CHARS,
    EventBridgeTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
    truncate,
)

ClientFactory = Callable[[str], Any]

RETRYABLE_ERROR_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "ProvisionedThroughputExceededException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "ServiceException",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "InternalException",
        "ResourceConflictException",  # Lambda: the function is being updated
        "EC2ThrottledException",
        "ENILimitReachedException",
        "SubnetIPAddressLimitReachedException",
        "KMSThrottlingException",
    }
)


class AwsTargets:
    """Sends runs to AWS targets. ``client_factory(service)`` returns a boto3 client (default: boto3)."""

    def __init__(self, client_factory: ClientFactory | None = None) -> None:
        self._factory = client_factory or default_client_factory
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()  # client creation is not thread-safe; using a client is

    def send(self, target: object, invocation: Invocation, deadline: float) -> TargetResult:
        """Deliver one attempt; never raises for AWS errors (they become a :class:`TargetResult`)."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            ParamValidationError,
            ReadTimeoutError,
        )

        if deadline <= time.monotonic():
            return timed_out(0)
        try:
            return self._send(target, invocation)
        except ClientError as exc:
            return client_error_result(exc.response)
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            return TargetResult(ok=False, error=f"{type(exc).__name__}: {exc}", timed_out=True)
        except ParamValidationError as exc:  # the SDK will not build this request: the same on every attempt
            return failed(f"the request cannot be built: {exc}", retryable=False)
        except BotoCoreError as exc:  # connection errors and the like
            return failed(f"{type(exc).__name__}: {exc}", retryable=True)

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._factory(service)
            return self._clients[service]

    def _send(self, target: object, invocation: Invocation) -> TargetResult:
        if isinstance(target, LambdaTarget):
            return self._invoke_lambda(target, invocation)
        if isinstance(target, SqsTarget):
            return self._send_sqs(target, invocation)
        if isinstance(target, StepFunctionsTarget):
            return self._start_execution(target, invocation)
        if isinstance(target, EventBridgeTarget):
            return self._put_event(target, invocation)
        return failed(f"unknown target type {type(target).__name__}", retryable=False)

    def _invoke_lambda(self, target: LambdaTarget, invocation: Invocation) -> TargetResult:
        sync = target.invocation == "request_response"
        response = self.client("lambda").invoke(
            FunctionName=target.function_arn,
            InvocationType="RequestResponse" if sync else "Event",
            Payload=event_json(invocation).encode(),
        )
        status = int(response.get("StatusCode", 0))
        body = response.get("Payload")
        excerpt = _excerpt(body.read(MAX_EXCERPT_CHARS * 4)) if sync and body is not None else None
        if response.get("FunctionError"):
            return failed(
                f"function error: {response['FunctionError']}", retryable=True, status_code=status, excerpt=excerpt
            )
        return succeeded(status, excerpt)

    def _send_sqs(self, target: SqsTarget, invocation: Invocation) -> TargetResult:
        request: dict[str, Any] = {"QueueUrl": target.queue_url, "MessageBody": event_json(invocation)}
        if target.queue_url.endswith(".fifo"):
            request["MessageGroupId"] = invocation.job_id
            request["MessageDeduplicationId"] = invocation.run_id
        response = self.client("sqs").send_message(**request)
        return succeeded(_status(response), f"MessageId: {response.get('MessageId')}")

    def _start_execution(self, target: StepFunctionsTarget, invocation: Invocation) -> TargetResult:
        from botocore.exceptions import ClientError

        client = self.client("stepfunctions")
        try:
            response = client.start_execution(
                stateMachineArn=target.state_machine_arn, name=invocation.run_id, input=event_json(invocation)
            )
        except ClientError as exc:
            if _error_code(exc.response) == "ExecutionAlreadyExists":  # an earlier attempt started it
                return succeeded(None, truncate(f"already started: {_error_message(exc.response)}", MAX_EXCERPT_CHARS))
            raise
        return succeeded(_status(response), f"executionArn: {response.get('executionArn')}")

    def _put_event(self, target: EventBridgeTarget, invocation: Invocation) -> TargetResult:
        entry = {
            "Source": target.source,
            "DetailType": target.detail_type,
            "Detail": event_json(invocation),
            "EventBusName": target.event_bus,
        }
        response = self.client("events").put_events(Entries=[entry])
        if int(response.get("FailedEntryCount", 0)) == 0:
            event_id = (response.get("Entries") or [{}])[0].get("EventId")
            return succeeded(_status(response), f"EventId: {event_id}")
        failure = (response.get("Entries") or [{}])[0]
        code = str(failure.get("ErrorCode", "unknown"))
        error = f"PutEvents entry failed: {code}: {failure.get('ErrorMessage', '')}"
        return failed(error, retryable=_code_retryable(code), status_code=_status(response))


def event_json(invocation: Invocation) -> str:
    """The event every AWS target receives (see the module docstring)."""
    return json.dumps(
        {
            "run_id": invocation.run_id,
            "job_id": invocation.job_id,
            "scheduled_at": iso(invocation.scheduled_at),
            "attempt": invocation.attempt,
            "payload": invocation.payload,
        },
        separators=(",", ":"),
        allow_nan=False,  # Infinity/NaN are not JSON: fail the attempt rather than send them
    )


def client_error_result(response: Mapping[str, Any]) -> TargetResult:
    """A failed attempt from a botocore ``ClientError`` response, classified as retryable or not."""
    code = _error_code(response)
    status = _status(response)
    retryable = _code_retryable(code) or (status is not None and status >= 500)
    return failed(f"{code}: {_error_message(response)}", retryable=retryable, status_code=status)


def default_client_factory(service: str) -> Any:
    """A boto3 client with short connect timeouts and few SDK retries (the run has its own retries)."""
    import boto3
    from botocore.config import Config

    read_timeout = 900 if service == "lambda" else 30  # RequestResponse invokes last up to 15 min
    config = Config(connect_timeout=5, read_timeout=read_timeout, retries={"mode": "standard", "max_attempts": 2})
    return boto3.session.Session().client(service, config=config)  # type: ignore[call-overload,unused-ignore]


def _code_retryable(code: str) -> bool:
    return code in RETRYABLE_ERROR_CODES


def _error_code(response: Mapping[str, Any]) -> str:
    return str(response.get("Error", {}).get("Code", "Unknown"))


def _error_message(response: Mapping[str, Any]) -> str:
    return str(response.get("Error", {}).get("Message", ""))


def _status(response: Mapping[str, Any]) -> int | None:
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _excerpt(raw: bytes) -> str | None:
    return truncate(raw.decode("utf-8", errors="replace"), MAX_EXCERPT_CHARS) if raw else None
