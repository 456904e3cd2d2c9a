"""What the synthesized template grants each component, and the check of recorded calls against it.

A *component* is a role that runs Punctual code: a Lambda function or an ECS task definition whose
environment names the aws engine (``PUNCTUAL_ENGINE``). Every other role of the template must be
listed in ``OTHER_ROLES`` with the reason it runs no Punctual code, so a new role cannot escape
the proof. A component's grants are every (action, resource) pair of every statement of every
policy attached to its role, with the CloudFormation tokens resolved to the resources the test
deployed (``Resolver``).

The check (:func:`check`) fails on
1. a recorded call that no grant allows (a missing grant: AccessDenied in production), and
2. a grant that no recorded call used (an unused grant), unless ``UNEXERCISED`` lists it with the
   reason only a production path exercises it (the Lambda service, SNS, X-Ray act with the role).
Statements with conditions, denials or NotAction/NotResource are refused: the check does not
evaluate them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.infra.iam_calls import ACCOUNT, Call

REGION = "us-east-1"
PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}

# logical-id prefix -> component (longest prefix first)
COMPONENTS = {
    "ApiHandler": "api",
    "ApiCallbackAuthorizer": "callback_authorizer",
    "SchedulerHandler": "scheduler",
    "WorkersHandler": "worker",
    "ReaperHandler": "reaper",
    "FargateWorkersLongRunTask": "fargate-long-run-worker",
    "FargateWorkersTask": "fargate-worker",
}
LAMBDAS = frozenset({"api", "scheduler", "worker", "reaper", "callback_authorizer"})
# the api alerts when a callback's completion ends a run failed or dead
PUBLISHERS = frozenset({"api", "worker", "reaper", "fargate-worker", "fargate-long-run-worker"})

# Roles that run no Punctual code: logical-id prefix -> why they are outside the proof.
OTHER_ROLES = {
    "ApiTenantAdmin": "assumed by operators to call the /admin routes (execute-api:Invoke on them only)",
    "ApiRestApiCloudWatchRole": "API Gateway's account logging role (the AWS-managed push-to-logs policy)",
    "FargateWorkersVpcFlowLogIAMRole": "VPC flow logs delivery to CloudWatch Logs",
    "FargateWorkersTaskExecutionRole": "ECS pulls the worker image and ships the container's logs",
    "FargateWorkersLongRunTaskExecutionRole": "ECS pulls the worker image and ships the container's logs",
    "CustomVpcRestrictDefaultSGCustomResourceProvider": "CDK's custom resource that empties the VPC's default "
    "security group",
}


@dataclass(frozen=True)
class Allowance:
    """Grants that only production exercises: ``actions`` on resources of ``kind`` for ``components``."""

    components: frozenset[str]
    actions: frozenset[str]
    kind: str  # a resource kind of Resolver.kinds, or "*"
    reason: str


_EVENT_SOURCE = frozenset(
    {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:ChangeMessageVisibility",
    }
)
UNEXERCISED = (
    Allowance(
        LAMBDAS,
        frozenset({"logs:CreateLogStream", "logs:PutLogEvents"}),
        "log-group",
        "the Lambda service writes the function's logs to its log group with the function's role",
    ),
    Allowance(
        LAMBDAS,
        frozenset({"xray:PutTraceSegments", "xray:PutTelemetryRecords"}),
        "*",
        "active tracing: the Lambda service's X-Ray daemon sends the segments with the function's role",
    ),
    Allowance(
        frozenset({"worker"}),
        _EVENT_SOURCE,
        "queue:dispatch",
        "the SQS event source polls and deletes with the function's role (CDK's SqsEventSource grants "
        "grantConsumeMessages); the tests hand the handler the records it would receive",
    ),
    Allowance(
        frozenset({"reaper"}),
        _EVENT_SOURCE,
        "queue:dead-letter",
        "the dead-letter queue's SQS event source polls and deletes with the function's role (CDK's "
        "SqsEventSource grants grantConsumeMessages)",
    ),
    Allowance(
        PUBLISHERS,
        frozenset({"kms:GenerateDataKey", "kms:Decrypt"}),
        "key:alerts",
        "SNS asks KMS for the data key of an encrypted topic with the publisher's permissions (moto's SNS "
        "does not call KMS)",
    ),
)


@dataclass(frozen=True, slots=True)
class Grant:
    """One (action, resource) pair of a statement; ``source`` names the policy and statement."""

    action: str
    resource: str
    source: str

    def allows(self, call: Call) -> bool:
        return _matches(self.action, call.action, ignore_case=True) and _matches(self.resource, call.resource)

    def __str__(self) -> str:
        return f"{self.action} on {self.resource} ({self.source})"


@dataclass(frozen=True)
class Component:
    """A role that runs Punctual code: its name, its role's logical id and its (unresolved) environment."""

    name: str
    role_id: str
    environment: dict[str, Any]


class Resolver:
    """CloudFormation intrinsics -> values; ``refs``: logical id -> {"Ref": ..., "Arn": ..., ...}.

    A reference to a resource the test did not deploy resolves to a placeholder that no call
    matches (``<unresolved:Id.Attr>``). ``kinds`` names what a resource is for (``Allowance.kind``).
    """

    def __init__(self, refs: Mapping[str, Mapping[str, str]], kinds: Mapping[str, str] | None = None) -> None:
        self.refs = refs
        self.kinds = dict(kinds or {})  # resolved ARN -> kind

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"not a CloudFormation value: {value!r}")
        ((function, argument),) = value.items()
        if function == "Ref":
            return PSEUDO.get(argument) or self._attribute(argument, "Ref")
        if function == "Fn::GetAtt":
            return self._attribute(argument[0], argument[1])
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(self(part) for part in parts)
        if function == "Fn::Sub" and isinstance(argument, str):
            return re.sub(r"\$\{([^}]+)\}", lambda m: PSEUDO.get(m.group(1)) or self._sub(m.group(1)), argument)
        raise ValueError(f"intrinsic function not supported by the IAM proof: {function}")

    def kind(self, arn: str) -> str:
        return "*" if arn == "*" else self.kinds.get(arn, "other")

    def _sub(self, name: str) -> str:
        logical_id, _, attribute = name.partition(".")
        return self._attribute(logical_id, attribute or "Ref")

    def _attribute(self, logical_id: str, attribute: str) -> str:
        return self.refs.get(logical_id, {}).get(attribute) or f"<unresolved:{logical_id}.{attribute}>"


def components(template: Mapping[str, Any]) -> list[Component]:
    """Every role of ``template`` that runs Punctual code (functions and ECS tasks of the aws engine)."""
    found = []
    for logical_id, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function":
            environment = properties.get("Environment", {}).get("Variables", {})
            role = properties["Role"]
        elif resource["Type"] == "AWS::ECS::TaskDefinition":
            (container,) = properties["ContainerDefinitions"]
            environment = {e["Name"]: e["Value"] for e in container.get("Environment", [])}
            role = properties.get("TaskRoleArn")
        else:
            continue
        if "PUNCTUAL_ENGINE" not in environment:
            continue
        name = next((n for prefix, n in COMPONENTS.items() if logical_id.startswith(prefix)), None)
        if name is None:
            raise AssertionError(f"{logical_id} runs Punctual code but is no known component: give it a driver")
        found.append(Component(name, role["Fn::GetAtt"][0], environment))
    return found


def unclassified_roles(template: Mapping[str, Any], component_roles: Iterable[str]) -> list[str]:
    """Roles that are neither a component's (``component_roles``: logical ids) nor listed in ``OTHER_ROLES``."""
    component_roles = set(component_roles)
    return [
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Role"
        and logical_id not in component_roles
        and not any(logical_id.startswith(prefix) for prefix in OTHER_ROLES)
    ]


def grants_of(template: Mapping[str, Any], role_id: str, resolve: Resolver) -> list[Grant]:
    """Every (action, resource) pair the role's policies allow, resolved; refuses what it cannot check."""
    resources = template["Resources"]
    role = resources[role_id]["Properties"]
    if role.get("ManagedPolicyArns") or role.get("Policies"):
        raise AssertionError(f"{role_id}: managed or inline role policies are not checked by the IAM proof")
    grants = []
    for policy_id, policy in resources.items():
        if policy["Type"] != "AWS::IAM::Policy" or {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for index, statement in enumerate(policy["Properties"]["PolicyDocument"]["Statement"]):
            unsupported = {"Condition", "NotAction", "NotResource", "NotPrincipal"} & set(statement)
            if statement["Effect"] != "Allow" or unsupported:
                raise AssertionError(f"{policy_id}[{index}]: the IAM proof does not evaluate {unsupported or 'Deny'}")
            for action in _listed(statement["Action"]):
                for resource in _listed(statement["Resource"]):
                    grants.append(Grant(action, resolve(resource), f"{policy_id}[{index}]"))
    return grants


@dataclass
class Verdict:
    missing: list[Call]
    unused: list[Grant]
    allowed: list[tuple[Grant, str]]  # unused grants excused by UNEXERCISED, with the reason

    def report(self, component: str) -> str:
        lines = []
        if self.missing:
            lines.append(f"{component}: calls no statement allows (AccessDenied in production):")
            lines += [f"  - {call}" for call in sorted(self.missing, key=str)]
        if self.unused:
            lines.append(f"{component}: grants no call used (remove them, or list them in UNEXERCISED with a reason):")
            lines += [f"  - {grant}" for grant in sorted(self.unused, key=str)]
        return "\n".join(lines)


def check(
    component: str,
    grants: Iterable[Grant],
    calls: Iterable[Call],
    kind: Callable[[str], str],
    allowances: Iterable[Allowance] = UNEXERCISED,
) -> Verdict:
    """Missing and unused grants of ``component`` (see the module docstring)."""
    grants, calls = list(grants), list(calls)
    missing = [call for call in calls if not any(grant.allows(call) for grant in grants)]
    unused: list[Grant] = []
    allowed: list[tuple[Grant, str]] = []
    for grant in grants:
        if any(grant.allows(call) for call in calls):
            continue
        reason = next(
            (
                a.reason
                for a in allowances
                if component in a.components and grant.action in a.actions and a.kind in ("*", kind(grant.resource))
            ),
            None,
        )
        if reason is None:
            unused.append(grant)
        else:
            allowed.append((grant, reason))
    return Verdict(missing, unused, allowed)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, text: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters, ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.IGNORECASE if ignore_case else 0) is not None
