"""Create the ``aws`` engine's tables and queues from ``punctual.resources`` (local use and tests).

The CDK app builds the same resources from the same definitions for real deployments; this is what
``punctual dev --engine aws`` and the tests run against moto, LocalStack or a sandbox account.
Idempotent: existing tables are left as they are (TTL is enabled if it is not), existing queues get
their attributes converged to the definitions.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.exceptions import ClientError

from punctual.config import Settings
from punctual.engines.aws.clients import AwsClients
from punctual.resources import (
    DEAD_LETTER_QUEUE,
    DISPATCH_QUEUE,
    QueueDef,
    TableDef,
    create_table_request,
    physical_name,
    tables,
)

MISSING_QUEUE = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_TTL_ON = frozenset({"ENABLED", "ENABLING"})


def ensure_resources(
    settings: Settings, session: boto3.session.Session | None = None, *, clients: AwsClients | None = None
) -> Settings:
    """Create whatever is missing and return ``settings`` with physical table names and queue URLs."""
    clients = clients or AwsClients(session, region=settings.region)
    dynamodb, sqs = clients.dynamodb, clients.sqs
    definitions = tables(open_index=settings.open_index)
    names = {table.logical_name: settings.table_name(table.logical_name) for table in definitions}
    for table in definitions:
        ensure_table(dynamodb, table, names[table.logical_name])
    dlq_name = _queue_name(settings.dead_letter_queue_url, settings, DEAD_LETTER_QUEUE)
    dlq_url = ensure_queue(sqs, dlq_name, DEAD_LETTER_QUEUE)
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    dispatch_url = ensure_queue(
        sqs, _queue_name(settings.dispatch_queue_url, settings, DISPATCH_QUEUE), DISPATCH_QUEUE, dead_letter_arn=dlq_arn
    )
    kms = clients.client("kms")
    return settings.model_copy(
        update={
            "jobs_table": names["jobs"],
            "runs_table": names["runs"],
            "leases_table": names["leases"],
            "dispatch_queue_url": dispatch_url,
            "dead_letter_queue_url": dlq_url,
            "secrets_key_id": settings.secrets_key_id
            or ensure_key(kms, physical_name(settings.name_prefix, "secrets"), "SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT"),
            "signing_key_id": settings.signing_key_id
            or ensure_key(kms, physical_name(settings.name_prefix, "signing"), "HMAC_256", "GENERATE_VERIFY_MAC"),
        }
    )


def ensure_key(client: Any, name: str, spec: str, usage: str) -> str:
    """The ARN of the KMS key aliased ``alias/<name>``, created (with the alias) when missing."""
    alias = f"alias/{name}"
    try:
        found: str = client.describe_key(KeyId=alias)["KeyMetadata"]["Arn"]
        return found
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NotFoundException":
            raise
    key = client.create_key(KeySpec=spec, KeyUsage=usage, Description=f"punctual {name}")["KeyMetadata"]
    client.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
    arn: str = key["Arn"]
    return arn


def ensure_table(client: Any, table: TableDef, name: str) -> None:
    """Create ``name`` from ``table`` unless it exists, wait until it is active, and enable TTL."""
    try:
        client.create_table(**create_table_request(table, name))
    except ClientError as exc:
        # ResourceInUse: it exists already (or another process is creating it right now)
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    if table.ttl_attribute is not None:
        ttl = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        if ttl.get("TimeToLiveStatus") not in _TTL_ON:
            client.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute}
            )


def ensure_queue(client: Any, name: str, queue: QueueDef, *, dead_letter_arn: str | None = None) -> str:
    """The URL of queue ``name``, created or updated to match ``queue``."""
    attributes = queue_attributes(queue, dead_letter_arn)
    try:
        url: str = client.get_queue_url(QueueName=name)["QueueUrl"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in MISSING_QUEUE:
            raise
        created: str = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        return created
    client.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    return url


def queue_attributes(queue: QueueDef, dead_letter_arn: str | None = None) -> dict[str, str]:
    """SQS attributes of ``queue`` (all strings, as SQS wants them)."""
    attributes = {
        "VisibilityTimeout": str(queue.visibility_timeout_s),
        "MessageRetentionPeriod": str(queue.retention_s),
        **{key: str(value) for key, value in queue.extra.items()},
    }
    if dead_letter_arn is not None and queue.max_receives is not None:
        policy = {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": queue.max_receives}
        attributes["RedrivePolicy"] = json.dumps(policy, separators=(",", ":"))
    return attributes


def _queue_name(url: str | None, settings: Settings, queue: QueueDef) -> str:
    """The configured queue's name (last segment of its URL), else ``<prefix>-<logical name>``."""
    if url:
        return url.rstrip("/").rsplit("/", 1)[-1]
    return physical_name(settings.name_prefix, queue.logical_name)
