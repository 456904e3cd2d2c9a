"""Record the AWS calls each component makes, as IAM sees them: (component, action, resource ARN).

Every botocore client created while a component is acting (:meth:`Recorder.acting_as`) is tagged
with that component, and each of its API calls is recorded with the IAM action(s) and resource
ARN(s) AWS authorizes it against. Tagging the client rather than the thread follows the calls into
the engine's thread pools and the worker's event loop; each component builds its own runtime (its
own engine and clients), so a client never serves two components. Clients created outside any
component (test setup and inspection) are not recorded.

IAM's view of a call differs from the API name for batches and transactions:
``TransactWriteItems`` is authorized per item (``PutItem``, ``UpdateItem``, ``DeleteItem``,
``ConditionCheckItem`` on each item's table), ``SendMessageBatch`` as ``SendMessage`` and so on
(:func:`iam_requests`). An operation the mapping does not know is recorded as ``unmapped`` and
fails the proof, so a new call cannot slip past it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

ACCOUNT = "123456789012"  # moto's default account

# DynamoDB operations authorized on the table (and on the index named by IndexName)
_DYNAMODB_ON_TABLE = frozenset(
    {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable", "ConditionCheckItem"}
)
_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_SQS_ACTION = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_SQS_ON_QUEUE = frozenset(
    {"SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility", "GetQueueAttributes", "PurgeQueue"}
)
_KMS_ON_KEY = frozenset({"Encrypt", "Decrypt", "GenerateMac", "VerifyMac", "GenerateDataKey", "DescribeKey"})
_MOTO_KEY_ID_LENGTH = 36  # moto's ciphertext starts with the key id (AWS's embeds the key too)


@dataclass(frozen=True, slots=True)
class Call:
    """One IAM request: ``component`` asked for ``action`` on ``resource`` (through ``operation``)."""

    component: str
    action: str
    resource: str
    operation: str  # the API operation, e.g. dynamodb:TransactWriteItems

    def __str__(self) -> str:
        via = "" if self.operation == self.action else f" (via {self.operation})"
        return f"{self.component}: {self.action} on {self.resource}{via}"


class Recorder:
    """Tags clients with the acting component and records their calls (see the module docstring)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.current: str | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def acting_as(self, component: str) -> Iterator[None]:
        """Clients created inside are ``component``'s (components act one at a time)."""
        previous, self.current = self.current, component
        try:
            yield
        finally:
            self.current = previous

    @contextlib.contextmanager
    def installed(self) -> Iterator[Recorder]:
        """Tag the clients every botocore session creates while installed (setup clients untagged)."""
        from botocore.session import Session

        original = Session.create_client
        recorder = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            if recorder.current is not None:
                recorder._attach(client, recorder.current)
            return client

        Session.create_client = create_client  # type: ignore[method-assign]
        try:
            yield self
        finally:
            Session.create_client = original  # type: ignore[method-assign]

    def by_component(self) -> dict[str, set[Call]]:
        with self._lock:
            calls = list(self.calls)
        grouped: dict[str, set[Call]] = {}
        for call in calls:
            grouped.setdefault(call.component, set()).add(call)
        return grouped

    def _attach(self, client: Any, component: str) -> None:
        service = client.meta.service_model.service_name
        region = client.meta.region_name

        def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
            operation = f"{service}:{model.name}"
            requests = iam_requests(service, model.name, params, region) or [("unmapped", operation)]
            with self._lock:
                self.calls.extend(Call(component, action, resource, operation) for action, resource in requests)

        client.meta.events.register("before-parameter-build", record)


def iam_requests(service: str, operation: str, params: Mapping[str, Any], region: str) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs AWS authorizes one API call against; [] if unknown."""
    if service == "dynamodb":
        return _dynamodb(operation, params, region)
    if service == "sqs":
        action = _SQS_ACTION.get(operation, operation)
        if action in _SQS_ON_QUEUE:
            return [(f"sqs:{action}", queue_arn(params["QueueUrl"], region))]
        if operation == "GetQueueUrl":
            return [("sqs:GetQueueUrl", f"arn:aws:sqs:{region}:{ACCOUNT}:{params['QueueName']}")]
        return []
    if service == "kms" and operation in _KMS_ON_KEY:
        return [(f"kms:{operation}", _key_arn(params, region))]
    if service == "sns" and operation == "Publish":
        return [("sns:Publish", params["TopicArn"])]
    if service == "lambda" and operation == "Invoke":
        name = params["FunctionName"]
        arn = name if name.startswith("arn:") else _arn("lambda", region, f"function:{name}")
        return [("lambda:InvokeFunction", arn)]
    if service == "stepfunctions" and operation == "StartExecution":
        return [("states:StartExecution", params["stateMachineArn"])]
    if service == "events" and operation == "PutEvents":
        return [("events:PutEvents", _bus_arn(entry.get("EventBusName"), region)) for entry in params["Entries"]]
    return []


def queue_arn(url: str, region: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>`` -> ``arn:aws:sqs:<region>:<account>:<name>``."""
    parsed = urlparse(url)
    account, name = parsed.path.strip("/").split("/")[-2:]
    host = parsed.hostname or ""
    host_region = host.split(".")[1] if host.startswith("sqs.") and host.count(".") >= 3 else region
    return f"arn:aws:sqs:{host_region}:{account}:{name}"


def _dynamodb(operation: str, params: Mapping[str, Any], region: str) -> list[tuple[str, str]]:
    if operation in _DYNAMODB_ON_TABLE:
        arn = _table_arn(params["TableName"], region)
        index = params.get("IndexName")
        return [(f"dynamodb:{operation}", f"{arn}/index/{index}" if index else arn)]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", _table_arn(table, region)) for table in params["RequestItems"]]
    if operation == "TransactWriteItems":
        requests = []
        for item in params["TransactItems"]:
            ((kind, request),) = item.items()
            requests.append((f"dynamodb:{_TRANSACT_WRITE[kind]}", _table_arn(request["TableName"], region)))
        return requests
    if operation == "TransactGetItems":
        return [("dynamodb:GetItem", _table_arn(i["Get"]["TableName"], region)) for i in params["TransactItems"]]
    return []


def _table_arn(name: str, region: str) -> str:
    return name if name.startswith("arn:") else _arn("dynamodb", region, f"table/{name}")


def _key_arn(params: Mapping[str, Any], region: str) -> str:
    key_id = params.get("KeyId")
    if key_id is None:  # Decrypt without KeyId: the key is the one the ciphertext names
        key_id = bytes(params["CiphertextBlob"][:_MOTO_KEY_ID_LENGTH]).decode()
    return key_id if key_id.startswith("arn:") else _arn("kms", region, f"key/{key_id}")


def _bus_arn(name: str | None, region: str) -> str:
    name = name or "default"
    return name if name.startswith("arn:") else _arn("events", region, f"event-bus/{name}")


def _arn(service: str, region: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT}:{resource}"
