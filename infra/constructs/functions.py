"""``PunctualFunction``: how every Punctual Lambda is built, in one place.

Each function gets its own role (only what its capability grants it afterwards, see
``infra.constructs.access``), its own log group (retention from the context, removed with the
stack), the two layers, the ARM64 runtime, X-Ray active tracing, and the same ``PUNCTUAL_*``
environment (``punctual.config.Settings`` reads it at cold start) plus the Powertools settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import constants
from infra.config import InfraConfig
from infra.constructs.nag import acknowledge


@dataclass(frozen=True)
class Shared:
    """What every construct that runs Punctual code needs: the configuration, the ``PUNCTUAL_*``
    environment, the layers and the tables (logical name -> table)."""

    config: InfraConfig
    environment: Mapping[str, str]
    layers: Sequence[lambda_.ILayerVersion]
    tables: Mapping[str, dynamodb.ITable]


def punctual_environment(
    config: InfraConfig,
    *,
    tables: Mapping[str, str],
    dispatch_queue_url: str,
    dead_letter_queue_url: str,
    dispatch_visibility_s: int,
    alert_topic_arn: str,
    secrets_key_id: str,
    signing_key_id: str,
    long_run_queue_url: str | None = None,
) -> dict[str, str]:
    """The environment of every function: ``PUNCTUAL_<FIELD>`` of ``punctual.config.Settings``."""
    settings = {
        "engine": "aws",
        "name_prefix": config.stack_name,
        "region": cdk.Aws.REGION,
        "shards": str(config.shards),
        "open_shards": str(config.open_shards),
        "open_index": str(config.open_index).lower(),
        "stats_counters": str(config.stats_counters).lower(),
        "sweep_pages": str(config.sweep_pages),
        "lookahead_ms": str(config.lookahead_ms),
        "claim_window_s": str(config.claim_window_s),
        "scheduler_max_failed_ticks": str(config.scheduler_max_failed_ticks),
        # Lambda workers never pre-lease (their wait is billed either way): messages turn visible at most
        # a second early; the Fargate tier (lambda_workers=false) leases up to fargate_prelease_s ahead
        "prelease_s": str(config.prelease_s),
        "retention_days": str(config.retention_days),
        "dispatch_queue_url": dispatch_queue_url,
        "dead_letter_queue_url": dead_letter_queue_url,
        "dispatch_visibility_s": str(dispatch_visibility_s),
        # the longest job timeout_s the API accepts; with Fargate workers, longer runs than a Lambda
        # worker may take go to the long-run queue
        "max_timeout_s": str(config.max_timeout_s),
        **(
            {"long_run_queue_url": long_run_queue_url, "long_run_after_s": str(config.lambda_max_run_s)}
            if long_run_queue_url
            else {}
        ),
        "alert_topic_arn": alert_topic_arn,
        "secrets_key_id": secrets_key_id,
        "signing_key_id": signing_key_id,
        **{f"{logical}_table": name for logical, name in tables.items()},
    }
    return {
        **{f"PUNCTUAL_{key.upper()}": value for key, value in settings.items()},
        "POWERTOOLS_SERVICE_NAME": constants.SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": constants.METRICS_NAMESPACE,
        "LOG_LEVEL": constants.LOG_LEVEL,
    }


class PunctualFunction(Construct):
    """One entry point ``functions/<spec.name>/handler.py`` as a Lambda function (``function``, ``role``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: constants.FunctionSpec,
        shared: Shared,
        timeout_s: int | None = None,
        memory_mb: int | None = None,
        reserved_concurrency: int | None = None,
        max_event_age_s: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=spec.description
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=constants.LOG_RETENTION[shared.config.log_retention_days],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.function = self._build_function(
            spec=spec,
            environment=shared.environment,
            layers=shared.layers,
            timeout_s=timeout_s or spec.timeout_s,
            memory_mb=memory_mb or spec.memory_mb,
            reserved_concurrency=reserved_concurrency,
            max_event_age_s=max_event_age_s,
        )
        self.log_group.grant_write(self.role)
        self.function.node.add_dependency(self._build_tracing())

    def _build_function(
        self,
        *,
        spec: constants.FunctionSpec,
        environment: Mapping[str, str],
        layers: Sequence[lambda_.ILayerVersion],
        timeout_s: int,
        memory_mb: int,
        reserved_concurrency: int | None,
        max_event_age_s: int | None,
    ) -> lambda_.Function:
        return lambda_.Function(
            self,
            "Function",
            description=spec.description,
            code=lambda_.Code.from_asset(
                str(constants.FUNCTIONS_DIR / spec.name), exclude=list(constants.ASSET_EXCLUDES)
            ),
            handler=constants.HANDLER,
            runtime=constants.RUNTIME,
            architecture=constants.ARCHITECTURE,
            memory_size=memory_mb,
            timeout=cdk.Duration.seconds(timeout_s),
            role=self.role,
            log_group=self.log_group,
            layers=list(layers),
            environment=dict(environment),
            reserved_concurrent_executions=reserved_concurrency,
            # Invoked by a schedule: a late or retried tick is worse than the next one.
            retry_attempts=0 if max_event_age_s else None,
            max_event_age=cdk.Duration.seconds(max_event_age_s) if max_event_age_s else None,
        )

    def _build_tracing(self) -> iam.Policy:
        """X-Ray active tracing, with its write permission in a policy of its own.

        Set on the CloudFormation resource rather than through the L2 ``tracing`` property, which
        would put ``Resource: *`` into the role's default policy next to the function's real
        grants; here the one acknowledged wildcard sits alone in the ``XRay`` policy.
        """
        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, lambda_.CfnFunction)
        cfn_function.tracing_config = lambda_.CfnFunction.TracingConfigProperty(mode="Active")
        policy = iam.Policy(
            self,
            "XRay",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"])
            ],
        )
        acknowledge(
            policy,
            "IAM5",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions",
            finding="Resource::*",
        )
        return policy  # Lambda checks the X-Ray permission when it creates a traced function
