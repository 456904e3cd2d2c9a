"""The HTTP API: API Gateway REST API -> api Lambda (proxy), IAM (SigV4) authorization everywhere.

- Every method (``ANY /`` and ``ANY /{proxy+}``) requires AWS_IAM: the caller's IAM identity is
  the owner (``punctual.api.auth``). The one exception is ``POST /runs/{run_id}/heartbeat`` and
  ``/complete``, the callback routes of async completion: a REQUEST Lambda authorizer
  (``functions/callback_authorizer``) checks the attempt's ``X-Punctual-Callback-Token`` and allows
  exactly those two methods of that run, its results never cached (a token must not outlive its
  attempt in a cache). ``/runs`` and ``/runs/{run_id}`` (and what is below it) keep ANY with IAM, so
  every other path under them reaches the API as before. With ``api_usage_plan`` every method also requires an API
  key, and a usage plan throttles each key: give each tenant its own key for per-tenant limits.
- No request validator: a proxy method (``ANY /{proxy+}``) declares no models or parameters, so an
  API Gateway validator would validate nothing. Every request is validated by the API itself
  (pydantic models, strict JSON, size and media-type checks), which answers with the documented
  error shape; a gateway 400 would not have it.
- Access logs go to a log group as JSON, with the caller's IAM ARN, the gateway's and the
  integration's error messages and the integration latency (what a 5XX or a slow request needs);
  execution logging at ERROR, X-Ray tracing, detailed metrics, and stage throttling from the context.
- Per-caller limits: API Gateway throttles per API key, never per IAM principal. Per-owner limits
  are the tenant limits (``api_requests_per_second``, issue 12: a 429 with Retry-After from the API
  itself, once tenancy lands); with ``api_usage_plan`` each tenant's key is also capped at the
  gateway, before any Lambda runs.
- WAF: with ``web_acl_arn`` the stage is associated with that existing regional WAFv2 web ACL
  (the organisation's rules: IP sets, rate-based rules, managed rule groups); without one, IAM
  authorization and stage throttling stand in front of the function (docs/deploy.md, "WAF").
- The account's API Gateway logging role is one setting per region, shared by every API: this
  stack sets it only when asked (``api_cloudwatch_role``), and keeps it when deleted.
- The admin routes (``/admin/*``: tenant limits, ``punctual.api.tenants``) answer only the
  ``TenantAdmin`` role (``PUNCTUAL_ADMIN_PRINCIPALS`` of the api function); an ordinary owner
  gets 403. Operators assume the role (any principal of the account its trust allows) to call them.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.functions import PunctualFunction, Shared
from infra.constructs.nag import acknowledge
from punctual.api.authorizer import ROUTES as CALLBACK_ROUTES
from punctual.runs.tokens import TOKEN_HEADER

STAGE_NAME = "v1"


def access_log_fields() -> dict[str, str]:
    """One JSON object per request. userArn is the owner (punctual.api.auth); errorMessage is API
    Gateway's own (throttled, denied, malformed signature), integrationErrorMessage the Lambda's."""
    return {
        "requestId": apigw.AccessLogField.context_request_id(),
        "requestTime": apigw.AccessLogField.context_request_time(),
        "ip": apigw.AccessLogField.context_identity_source_ip(),
        "caller": apigw.AccessLogField.context_identity_caller(),
        "user": apigw.AccessLogField.context_identity_user(),
        "userArn": apigw.AccessLogField.context_identity_user_arn(),
        "httpMethod": apigw.AccessLogField.context_http_method(),
        "resourcePath": apigw.AccessLogField.context_resource_path(),
        "protocol": apigw.AccessLogField.context_protocol(),
        "status": apigw.AccessLogField.context_status(),
        "responseLength": apigw.AccessLogField.context_response_length(),
        "responseLatency": apigw.AccessLogField.context_response_latency(),
        "integrationLatency": apigw.AccessLogField.context_integration_latency(),
        "integrationStatus": apigw.AccessLogField.context_integration_status(),
        "errorMessage": apigw.AccessLogField.context_error_message(),
        "errorType": apigw.AccessLogField.context_error_response_type(),
        "integrationErrorMessage": apigw.AccessLogField.context_integration_error_message(),
    }


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
        self.handler = PunctualFunction(
            self,
            "Handler",
            spec=constants.API_FUNCTION,
            shared=shared,
            # Workers cannot take the API's executions under overload (infra.config, concurrency isolation).
            reserved_concurrency=shared.config.api_reserved_concurrency,
        )
        access.grant_tables(self.handler.role, access.API, shared.tables, open_index=shared.config.open_index)
        dispatch_queue.grant(self.handler.role, *access.SEND)  # POST /jobs/{id}/trigger
        for queue in (dispatch_queue, dead_letter_queue):  # GET /stats: queue depth and dead letters
            queue.grant(self.handler.role, *access.QUEUE_DEPTH)
        self.rest_api = self._build_rest_api()
        self.authorizer = PunctualFunction(
            self,
            "CallbackAuthorizer",
            spec=constants.CALLBACK_AUTHORIZER_FUNCTION,
            shared=shared,
            reserved_concurrency=constants.CALLBACK_AUTHORIZER_RESERVED_CONCURRENCY,
        )
        self._build_methods()
        self.admin_role = self._build_admin_role()
        self._build_web_acl_association()
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
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.RETAIN if self._config.api_cloudwatch_role else None,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # request bodies carry job payloads: keep them out of logs
                throttling_rate_limit=self._config.api_throttle_rate,
                throttling_burst_limit=self._config.api_throttle_burst,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.custom(json.dumps(access_log_fields())),
            ),
        )
        # The stack outputs the URL as ApiUrl; CDK's own "Endpoint" output would repeat it.
        rest_api.node.try_remove_child("Endpoint")
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
        """``ANY /`` and ``ANY /{proxy+}``, both with the same authorization (no validator: see above)."""
        acknowledge(
            self.rest_api,
            "APIG2",
            "Proxy methods declare no models to validate: the API validates every request itself (pydantic, "
            "strict JSON, size and media type) and answers with its documented error shape",
        )
        integration = apigw.LambdaIntegration(self.handler.function)
        root = self.rest_api.root
        run = root.add_resource("runs").add_resource("{run_id}")
        callbacks = [run.add_resource(route) for route in CALLBACK_ROUTES]
        # API Gateway never falls back from a resource that matches to the root's {proxy+}: every
        # resource on the callback routes' way answers ANY through IAM, as the proxy does
        for resource in (
            root,
            root.add_proxy(any_method=False),
            run.parent_resource,
            run,
            run.add_proxy(any_method=False),
            *callbacks,
        ):
            assert resource is not None
            resource.add_method(
                "ANY",
                integration,
                authorization_type=apigw.AuthorizationType.IAM,
                api_key_required=self._config.api_usage_plan,
            )
        tokens = apigw.RequestAuthorizer(
            self,
            "CallbackTokens",
            handler=self.authorizer.function,
            identity_sources=[apigw.IdentitySource.header(TOKEN_HEADER)],
            results_cache_ttl=cdk.Duration.seconds(0),  # never cached: a token ends with its attempt
        )
        for resource in callbacks:  # a callback's target has its token, never a tenant's API key
            resource.add_method(
                "POST",
                integration,
                authorizer=tokens,
                authorization_type=apigw.AuthorizationType.CUSTOM,
                api_key_required=False,
            )

    def _build_admin_role(self) -> iam.Role:
        """The one principal the admin routes answer: the app compares the caller's role with it."""
        role = iam.Role(
            self,
            "TenantAdmin",
            assumed_by=iam.AccountRootPrincipal(),
            description="Punctual operators: the /admin routes (tenant limits); owners get 403 there",
        )
        admin_paths = self.rest_api.arn_for_execute_api("*", "/admin/*", STAGE_NAME)
        role.add_to_policy(iam.PolicyStatement(actions=["execute-api:Invoke"], resources=[admin_paths]))
        acknowledge(
            role,
            "IAM5",
            "execute-api:Invoke on the admin paths of this API only (every method under /admin/*)",
            finding=(
                "Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
                f"<{cdk.Stack.of(self).get_logical_id(self.rest_api.node.default_child)}>/{STAGE_NAME}/*/admin/*"  # type: ignore[arg-type]
            ),
        )
        self.handler.function.add_environment("PUNCTUAL_ADMIN_PRINCIPALS", role.role_arn)
        return role

    def _build_web_acl_association(self) -> None:
        """Associate ``web_acl_arn`` with the stage, or acknowledge that there is none (cdk-nag APIG3)."""
        if self._config.web_acl_arn is None:
            acknowledge(
                self.rest_api,
                "APIG3",
                "IAM (SigV4) authorization on every method and stage throttling; deploy with -c web_acl_arn=<a "
                "regional WAFv2 web ACL> where an organisation requires WAF in front of its APIs",
            )
            return
        wafv2.CfnWebACLAssociation(
            self,
            "WebAcl",
            resource_arn=self.rest_api.deployment_stage.stage_arn,
            web_acl_arn=self._config.web_acl_arn,
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
