"""The HTTP API: API Gateway REST API -> api Lambda (proxy), IAM (SigV4) authorization everywhere.

- Every method (``ANY /`` and ``ANY /{proxy+}``) requires AWS_IAM: the caller's IAM identity is
  the owner (``punctual.api.auth``). With ``api_usage_plan`` every method also requires an API
  key, and a usage plan throttles each key: give each tenant its own key for per-tenant limits.
- A request validator checks parameters and bodies against what the methods declare; the proxy
  declares little, so the real validation is the API's own (pydantic, structured 4xx).
- Access logs go to a log group as JSON; execution logging at ERROR, X-Ray tracing, detailed
  metrics, and stage throttling from the context.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.functions import PunctualFunction, Shared
from infra.constructs.nag import acknowledge

STAGE_NAME = "v1"


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        shared: Shared,
        dispatch_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = shared.config
        self.handler = PunctualFunction(self, "Handler", spec=constants.API_FUNCTION, shared=shared)
        access.grant_tables(self.handler.role, access.API, shared.tables)
        dispatch_queue.grant_send_messages(self.handler.role)  # POST /jobs/{id}/trigger
        for queue in (dispatch_queue, dead_letter_queue):  # GET /stats: queue depth and dead letters
            queue.grant(self.handler.role, "sqs:GetQueueAttributes")
        self.rest_api = self._build_rest_api()
        self._build_methods()
        if shared.config.api_usage_plan:
            self._build_usage_plan()

    @property
    def url(self) -> str:
        return self.rest_api.url

    def _build_rest_api(self) -> apigw.RestApi:
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=constants.LOG_RETENTION[self._config.log_retention_days],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=cdk.Stack.of(self).stack_name,
            description="Punctual job scheduler API",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=self._config.api_cloudwatch_role,
            # The logging role is account-wide: deleting this stack must not break other APIs' logs.
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # request bodies carry job payloads: keep them out of logs
                throttling_rate_limit=self._config.api_throttle_rate,
                throttling_burst_limit=self._config.api_throttle_burst,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        # The stack outputs the URL as ApiUrl; CDK's own "Endpoint" output would repeat it.
        rest_api.node.try_remove_child("Endpoint")
        acknowledge(
            rest_api,
            "APIG3",
            "IAM (SigV4) authorization on every method and stage throttling; attach the account's WAF WebACL "
            "to the stage where an organisation requires one",
        )
        acknowledge(
            rest_api,
            "COG4",
            "Callers are IAM principals (SigV4): the owner is the caller's IAM identity, not a Cognito user",
        )
        if self._config.api_cloudwatch_role:
            role = rest_api.node.find_child("CloudWatchRole")
            acknowledge(
                role,
                "IAM4",
                "AmazonAPIGatewayPushToCloudWatchLogs is the AWS-maintained policy API Gateway's account "
                "logging role is documented to use",
                finding="Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs",
            )
        return rest_api

    def _build_methods(self) -> None:
        """``ANY /`` and ``ANY /{proxy+}``, both with the same authorization and validator."""
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        integration = apigw.LambdaIntegration(self.handler.function)
        for resource in (self.rest_api.root, self.rest_api.root.add_proxy(any_method=False)):
            resource.add_method(
                "ANY",
                integration,
                authorization_type=apigw.AuthorizationType.IAM,
                api_key_required=self._config.api_usage_plan,
                request_validator=validator,
            )

    def _build_usage_plan(self) -> None:
        plan = self.rest_api.add_usage_plan(
            "UsagePlan",
            description="Per-tenant throttling: one API key per tenant (aws apigateway create-api-key)",
            throttle=apigw.ThrottleSettings(
                rate_limit=self._config.api_tenant_throttle_rate, burst_limit=self._config.api_tenant_throttle_burst
            ),
        )
        plan.add_api_stage(stage=self.rest_api.deployment_stage)
