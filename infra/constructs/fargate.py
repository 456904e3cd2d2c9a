"""Optional Fargate workers (context ``fargate_workers``): ``punctual worker --max-in-flight N`` (the
async worker) as an ECS service polling the same dispatch queue, for runs longer than a Lambda
worker may take, or a warm fleet for the top-of-hour burst. With a long-run queue, a second
service reads only that queue (its environment names it as the dispatch queue): runs longer than
a Lambda worker may take are dispatched there (``PUNCTUAL_LONG_RUN_AFTER_S``), so no Lambda ever
receives one.

- Image: built from ``infra/fargate/Dockerfile`` by ``cdk deploy`` (Docker is needed to deploy with
  this option, never to synth: synth only stages the build context).
- Network: a VPC with public subnets only and no NAT gateway (a NAT costs more than the workers);
  tasks get a public IP for egress to HTTP targets and AWS APIs and accept no inbound traffic.
  VPC flow logs go to CloudWatch Logs.
- Permissions: the worker's row of ``infra.constructs.access``, the queue consumption, owner
  alerts and the target allowlist, exactly as the Lambda worker.
- Scaling: between ``fargate_worker_count`` and ``fargate_worker_max_count`` tasks on the dispatch
  queue's visible messages (each task holds up to ``fargate_worker_concurrency`` runs in flight);
  with ``fargate_prewarm_count``, raised to that many tasks at minute 59 of every hour.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.alerts import Alerts
from infra.constructs.functions import Shared
from infra.constructs.nag import acknowledge

# Docker-style ignore rules: stage only what the Dockerfile copies (not .venv, node_modules, cdk.out).
_BUILD_CONTEXT = ["*", "!pyproject.toml", "!README.md", "!layers", "!infra/fargate", "**/__pycache__"]


class FargateWorkers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        shared: Shared,
        dispatch_queue: sqs.IQueue,
        alerts: Alerts,
        long_run_queue: sqs.IQueue | None = None,
        long_run_visibility_s: int = 60,
    ) -> None:
        super().__init__(scope, construct_id)
        config = self._config = shared.config
        self.vpc = self._build_vpc()
        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED)
        self.task_definition = self._build_task_definition(shared.environment)
        task_role = self.task_definition.task_role
        access.grant_tables(task_role, access.WORKER, shared.tables, prelease=shared.config.prelease_s > 0)
        # consumed by the worker itself (no event source); the runs a finish releases for dependent
        # jobs, and runs waiting on tenant limits resent fresh
        dispatch_queue.grant(task_role, *access.CONSUME, *access.SEND)
        if long_run_queue is not None:  # a finish that releases a dependent longer than a Lambda may run
            long_run_queue.grant(task_role, *access.SEND)
        alerts.grant_publish_owner_alerts(task_role)
        access.grant_targets(task_role, config.target_arns, task_role)
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            desired_count=config.fargate_worker_count,
            assign_public_ip=True,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        self._build_scaling(dispatch_queue)
        self.long_run_task_definition: ecs.FargateTaskDefinition | None = None
        if long_run_queue is not None:
            self.long_run_task_definition = self._build_long_run_service(
                shared, long_run_queue, long_run_visibility_s, alerts
            )

    def _build_long_run_service(
        self, shared: Shared, queue: sqs.IQueue, visibility_s: int, alerts: Alerts
    ) -> ecs.FargateTaskDefinition:
        """``fargate_long_run_count`` tasks (default ``fargate_worker_count``) that consume only the long-run queue."""
        environment = {
            **shared.environment,
            "PUNCTUAL_DISPATCH_QUEUE_URL": queue.queue_url,
            "PUNCTUAL_DISPATCH_VISIBILITY_S": str(visibility_s),
        }
        task_definition = self._build_task_definition(environment, prefix="LongRun")
        task_role = task_definition.task_role
        access.grant_tables(task_role, access.WORKER, shared.tables, prelease=shared.config.prelease_s > 0)
        # its own dispatches go to its own queue: waits re-sent with a delay (punctual.execution.waits),
        # runs waiting on tenant limits resent fresh, runs released for dependent jobs
        queue.grant(task_role, *access.CONSUME, *access.SEND)
        alerts.grant_publish_owner_alerts(task_role)
        access.grant_targets(task_role, self._config.target_arns, task_role)
        ecs.FargateService(
            self,
            "LongRunService",
            cluster=self.cluster,
            task_definition=task_definition,
            desired_count=self._config.long_run_tasks,
            assign_public_ip=True,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        return task_definition

    def _build_scaling(self, dispatch_queue: sqs.IQueue) -> None:
        """Scale on the visible messages of the dispatch queue (runs waiting for a worker), one step per
        ``fargate_worker_concurrency`` waiting; optionally warm up before the top of every hour."""
        config = self._config
        scaling = self.service.auto_scale_task_count(
            min_capacity=config.fargate_worker_count, max_capacity=config.fargate_max_tasks
        )
        per_task = config.fargate_worker_concurrency
        scaling.scale_on_metric(
            "QueueDepth",
            metric=dispatch_queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
            scaling_steps=[
                appscaling.ScalingInterval(upper=0, change=-1),
                appscaling.ScalingInterval(lower=per_task // 10, change=+1),
                appscaling.ScalingInterval(lower=per_task, change=+3),
            ],
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cdk.Duration.minutes(1),
        )
        if config.fargate_prewarm_count is not None:
            warm = max(config.fargate_prewarm_count, config.fargate_worker_count)
            scaling.scale_on_schedule(
                "WarmBeforeTheHour",
                schedule=appscaling.Schedule.cron(minute="59"),
                min_capacity=min(warm, config.fargate_max_tasks),
            )
            scaling.scale_on_schedule(
                "CoolAfterTheHour",
                schedule=appscaling.Schedule.cron(minute="5"),
                min_capacity=config.fargate_worker_count,
            )

    def _build_vpc(self) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)],
        )
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                logs.LogGroup(
                    self,
                    "FlowLogs",
                    retention=constants.LOG_RETENTION[self._config.log_retention_days],
                    removal_policy=cdk.RemovalPolicy.DESTROY,
                )
            ),
        )
        return vpc

    def _build_task_definition(self, environment: Mapping[str, str], prefix: str = "") -> ecs.FargateTaskDefinition:
        task_definition = ecs.FargateTaskDefinition(
            self,
            f"{prefix}Task",
            cpu=1024,
            memory_limit_mib=2048,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        log_group = logs.LogGroup(
            self,
            f"{prefix}Logs",
            retention=constants.LOG_RETENTION[self._config.log_retention_days],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        task_definition.add_container(
            "Worker",
            image=ecs.ContainerImage.from_asset(
                str(constants.PROJECT_ROOT),
                file=constants.FARGATE_DOCKERFILE,
                platform=ecr_assets.Platform.LINUX_ARM64,
                exclude=_BUILD_CONTEXT,
                ignore_mode=cdk.IgnoreMode.DOCKER,
            ),
            command=["worker", "--max-in-flight", str(self._config.fargate_worker_concurrency)],
            environment=dict(environment),
            logging=ecs.LogDrivers.aws_logs(stream_prefix="worker", log_group=log_group),
            readonly_root_filesystem=True,
        )
        if task_definition.execution_role:  # created by add_container for the image pull and logs
            acknowledge(
                task_definition.execution_role,
                "IAM5",
                "ecr:GetAuthorizationToken supports no resource-level permissions (the execution role pulls the "
                "worker image)",
                finding="Resource::*",
            )
        acknowledge(
            task_definition,
            "ECS2",
            "The environment holds only resource names, URLs and sizes (the same PUNCTUAL_* values as the "
            "Lambda functions), no secrets",
        )
        return task_definition
