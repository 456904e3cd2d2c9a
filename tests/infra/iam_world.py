"""The synthesized template's data plane, deployed into moto: what the components of the IAM proof run against.

Every table, queue, KMS key and SNS topic of the template is created from its own properties
(key schemas, indexes, redrive policies, key specs), named by its logical id, so a component's
environment, once its tokens are resolved (:class:`~tests.infra.iam_grants.Resolver`), points at
exactly the resources its grants name. Call :func:`deploy` inside ``mock_aws`` and outside any
``Recorder.acting_as``: its clients are setup clients and are not recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3

from tests.infra.iam_calls import ACCOUNT
from tests.infra.iam_grants import REGION, Component, Resolver

_TABLE_FIELDS = ("KeySchema", "AttributeDefinitions", "BillingMode", "ProvisionedThroughput")
_INDEX_FIELDS = ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput")  # throughput: provisioned mode
_QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds")
# what each resource is for, from the names the stack gives it (for UNEXERCISED's kinds)
_ENV_KINDS = {
    "PUNCTUAL_JOBS_TABLE": ("table:jobs", "Arn"),
    "PUNCTUAL_RUNS_TABLE": ("table:runs", "Arn"),
    "PUNCTUAL_LEASES_TABLE": ("table:leases", "Arn"),
    "PUNCTUAL_LONG_RUN_QUEUE_URL": ("queue:long-run", "Arn"),
    "PUNCTUAL_SECRETS_KEY_ID": ("key:secrets", "Arn"),
    "PUNCTUAL_SIGNING_KEY_ID": ("key:signing", "Arn"),
}
_OUTPUT_KINDS = {
    "DispatchQueueUrl": ("queue:dispatch", "Arn"),
    "DeadLetterQueueUrl": ("queue:dead-letter", "Arn"),
    "OwnerAlertTopicArn": ("topic:owner-alerts", "Ref"),
}


@dataclass
class World:
    template: Mapping[str, Any]
    resolve: Resolver

    def environment(self, component: Component) -> dict[str, str]:
        """``component``'s environment as the deployed stack sets it (tokens resolved)."""
        return {name: str(self.resolve(value)) for name, value in component.environment.items()}


def deploy(template: Mapping[str, Any]) -> World:
    """Create the template's tables, queues, keys and topics in moto; return them with their resolver."""
    resources = template["Resources"]
    refs: dict[str, dict[str, str]] = {}
    resolve = Resolver(refs)
    for logical_id, resource in resources.items():
        kind, properties = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::DynamoDB::Table":
            refs[logical_id] = _table(logical_id, properties)
        elif kind == "AWS::KMS::Key":
            refs[logical_id] = _key(properties)
        elif kind == "AWS::IAM::Role":
            refs[logical_id] = {"Ref": logical_id, "Arn": f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"}
        elif kind == "AWS::Logs::LogGroup":
            refs[logical_id] = {"Ref": logical_id, "Arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{logical_id}:*"}
    queues = {k: r.get("Properties", {}) for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    for logical_id in sorted(queues, key=lambda k: "RedrivePolicy" in queues[k]):  # dead-letter queues first
        refs[logical_id] = _queue(logical_id, queues[logical_id], resolve)
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::SNS::Topic":
            refs[logical_id] = _topic(logical_id, resource.get("Properties", {}), resolve)
    resolve.kinds.update(_kinds(template, refs, resolve))
    return World(template, resolve)


def _kinds(template: Mapping[str, Any], refs: Mapping[str, Mapping[str, str]], resolve: Resolver) -> dict[str, str]:
    kinds: dict[str, str] = {}
    resources = template["Resources"]
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::Logs::LogGroup":
            kinds[refs[logical_id]["Arn"]] = "log-group"
        if resource["Type"] == "AWS::SNS::Topic" and "KmsMasterKeyId" in resource["Properties"]:
            kinds[resolve(resource["Properties"]["KmsMasterKeyId"])] = "key:alerts"
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        for name, (kind, attribute) in _ENV_KINDS.items():
            if isinstance(variables.get(name), dict):
                kinds[_attribute_of(variables[name], attribute, refs)] = kind
    for name, (kind, attribute) in _OUTPUT_KINDS.items():
        kinds[_attribute_of(template["Outputs"][name]["Value"], attribute, refs)] = kind
    return kinds


def _attribute_of(token: Mapping[str, Any], attribute: str, refs: Mapping[str, Mapping[str, str]]) -> str:
    """The ``attribute`` of the resource a ``Ref``/``Fn::GetAtt`` token names."""
    logical_id = token["Ref"] if "Ref" in token else token["Fn::GetAtt"][0]
    return refs[logical_id][attribute]


def _table(name: str, properties: Mapping[str, Any]) -> dict[str, str]:
    request: dict[str, Any] = {"TableName": name, **{k: properties[k] for k in _TABLE_FIELDS if k in properties}}
    indexes = [
        {k: index[k] for k in _INDEX_FIELDS if k in index} for index in properties.get("GlobalSecondaryIndexes", [])
    ]
    if indexes:
        request["GlobalSecondaryIndexes"] = indexes
    arn = boto3.client("dynamodb", region_name=REGION).create_table(**request)["TableDescription"]["TableArn"]
    return {"Ref": name, "Arn": arn}


def _queue(name: str, properties: Mapping[str, Any], resolve: Resolver) -> dict[str, str]:
    attributes = {k: str(properties[k]) for k in _QUEUE_ATTRIBUTES if k in properties}
    if "RedrivePolicy" in properties:
        policy = properties["RedrivePolicy"]
        target = resolve(policy["deadLetterTargetArn"])
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": target, "maxReceiveCount": policy["maxReceiveCount"]}
        )
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return {"Ref": url, "Arn": arn, "QueueName": name, "QueueUrl": url}


def _key(properties: Mapping[str, Any]) -> dict[str, str]:
    request = {k: properties[k] for k in ("KeySpec", "KeyUsage", "Description") if k in properties}
    metadata = boto3.client("kms", region_name=REGION).create_key(**request)["KeyMetadata"]
    return {"Ref": metadata["KeyId"], "Arn": metadata["Arn"], "KeyId": metadata["KeyId"]}


def _topic(name: str, properties: Mapping[str, Any], resolve: Resolver) -> dict[str, str]:
    attributes = {"KmsMasterKeyId": resolve(properties["KmsMasterKeyId"])} if "KmsMasterKeyId" in properties else {}
    arn = boto3.client("sns", region_name=REGION).create_topic(Name=name, Attributes=attributes)["TopicArn"]
    return {"Ref": arn, "TopicArn": arn, "TopicName": name}
