"""The Punctual stack: composes one construct per capability, nothing else."""

from __future__ import annotations

from dataclasses import replace

import aws_cdk as cdk
from constructs import Construct

from infra import constants
from infra.config import InfraConfig
from infra.constructs import access
from infra.constructs.alerts import Alerts
from infra.constructs.api import Api
from infra.constructs.dispatch import Dispatch
from infra.constructs.fargate import FargateWorkers
from infra.constructs.functions import Shared, punctual_environment
from infra.constructs.layer import Layers
from infra.constructs.observability import Observability
from infra.constructs.reaper import Reaper
from infra.constructs.scheduler import SchedulerFleet
from infra.constructs.secrets import Secrets
from infra.constructs.storage import Storage
from infra.constructs.tracing import Tracing
from infra.constructs.workers import Workers
from punctual import resources


class PunctualStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig) -> None:
        super().__init__(
            scope, construct_id, description="Punctual: a distributed job scheduler (DynamoDB, SQS, Lambda)"
        )
        storage = Storage(self, "Storage", config=config)
        dispatch = Dispatch(
            self,
            "Dispatch",
            consumer_timeouts_s={
                resources.DISPATCH_QUEUE.logical_name: config.worker_timeout_s,
                resources.DEAD_LETTER_QUEUE.logical_name: constants.REAPER_FUNCTION.timeout_s,
            },
            long_run=config.fargate_workers,
        )
        long_run_queue = dispatch.long_run_queue
        alerts = Alerts(self, "Alerts", config=config)
        secrets = Secrets(self, "Secrets")
        environment = punctual_environment(
            config,
            tables={name: table.table_name for name, table in storage.tables.items()},
            dispatch_queue_url=dispatch.queue.queue_url,
            dead_letter_queue_url=dispatch.dead_letter_queue.queue_url,
            dispatch_visibility_s=dispatch.visibility_timeout_s(resources.DISPATCH_QUEUE),
            alert_topic_arn=alerts.owner_topic.topic_arn,
            secrets_key_id=secrets.secrets_key.key_arn,
            signing_key_id=secrets.signing_key.key_arn,
            long_run_queue_url=long_run_queue.queue_url if long_run_queue else None,
        )
        shared = Shared(config, environment, Layers(self, "Layers").all, storage.tables)

        api = Api(
            self, "Api", shared=shared, dispatch_queue=dispatch.queue, dead_letter_queue=dispatch.dead_letter_queue
        )
        secrets.grant_seal(api.handler.role)
        secrets.grant_sign(api.authorizer.role)  # the callback-token key (punctual.runs.tokens)
        alerts.grant_publish_owner_alerts(api.handler.role)  # a callback's completion may end a run dead
        Tracing(self, "Tracing", config=config, stage=api.rest_api.deployment_stage)
        scheduler = SchedulerFleet(self, "Scheduler", shared=shared, dispatch_queue=dispatch.queue)
        # workers call targets: a callback job's attempts carry the API's URL (not the API's own
        # environment: its function would then depend on its own stage)
        calling = replace(shared, environment={**shared.environment, "PUNCTUAL_CALLBACK_BASE_URL": api.url})
        workers = Workers(self, "Workers", shared=calling, dispatch_queue=dispatch.queue, alerts=alerts)
        secrets.grant_open(workers.handler.role)
        reaper = Reaper(
            self,
            "Reaper",
            shared=shared,
            dispatch_queue=dispatch.queue,
            dead_letter_queue=dispatch.dead_letter_queue,
            alerts=alerts,
        )
        secrets.grant_sign(reaper.handler.role)  # notify webhooks are signed as target calls are
        if config.fargate_workers:
            assert long_run_queue is not None
            # Whoever dispatches may send a long run (a worker: a long dependent it releases); only the
            # long-run Fargate service consumes them.
            for sender in (api, scheduler, workers, reaper):
                long_run_queue.grant(sender.handler.role, *access.SEND)
            fargate = FargateWorkers(
                self,
                "FargateWorkers",
                shared=calling,
                dispatch_queue=dispatch.queue,
                alerts=alerts,
                long_run_queue=long_run_queue,
                long_run_visibility_s=dispatch.visibility_timeout_s(resources.LONG_RUN_QUEUE),
            )
            secrets.grant_open(fargate.task_definition.task_role)
            if fargate.long_run_task_definition is not None:
                secrets.grant_open(fargate.long_run_task_definition.task_role)

        observability = Observability(
            self,
            "Observability",
            config=config,
            # not the callback authorizer: a refused token is an invocation error by API Gateway's contract
            functions={c.handler.spec.name: c.handler.function for c in (api, scheduler, workers, reaper)},
            api_stage=api.rest_api.deployment_stage,
            tables=storage.tables,
            dispatch_queue=dispatch.queue,
            dead_letter_queue=dispatch.dead_letter_queue,
            long_run_queue=long_run_queue,
            ops_topic=alerts.ops_topic,
        )
        self._outputs(
            ApiUrl=api.url,
            DashboardName=observability.dashboard.dashboard_name,
            DispatchQueueUrl=dispatch.queue.queue_url,
            DeadLetterQueueUrl=dispatch.dead_letter_queue.queue_url,
            OwnerAlertTopicArn=alerts.owner_topic.topic_arn,
            OpsAlarmTopicArn=alerts.ops_topic.topic_arn,
            **{f"{name.capitalize()}TableName": table.table_name for name, table in storage.tables.items()},
        )

    def _outputs(self, **values: str) -> None:
        for name, value in values.items():
            cdk.CfnOutput(self, name, value=value)
