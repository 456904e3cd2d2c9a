"""X-Ray sampling, set: the API stage's requests are traced by a rule of this stack.

API Gateway samples by the account's X-Ray sampling rules; without one of its own the stage falls
to the account's default (the first request each second and 5 % of the rest). This stack's rule
matches only its own stage (by resource ARN, so other stacks' services keep their rules) and traces
the first request each second and ``xray_sampling_rate`` of the rest: ``punctual capacity`` prices
the traces at that rate. The Lambda functions' active tracing samples at Lambda's fixed rate (one
a second and 5 % of the rest, not configurable): the scheduler and the reaper run once a minute,
and the worker Lambda's traces are priced in its tier (the Fargate tier disables its event source).
"""

from __future__ import annotations

from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_xray as xray
from constructs import Construct

from infra.config import InfraConfig

RULE_PRIORITY = 1000  # before the account's Default rule (10000), after rules an operator puts first


class Tracing(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig, stage: apigateway.Stage) -> None:
        super().__init__(scope, construct_id)
        self.rule = xray.CfnSamplingRule(
            self,
            "ApiSampling",
            sampling_rule=xray.CfnSamplingRule.SamplingRuleProperty(
                rule_name=f"{config.stack_name[:27]}-api",  # unique per account and region, at most 32 characters
                resource_arn=stage.stage_arn,
                priority=RULE_PRIORITY,
                reservoir_size=1,
                fixed_rate=config.xray_sampling_rate,
                service_name="*",
                service_type="*",
                host="*",
                http_method="*",
                url_path="*",
                version=1,
            ),
        )
