"""The Lambda workers: the worker function consuming the dispatch queue.

The SQS event source reports per-message failures (``ReportBatchItemFailures``: one failed run
does not redeliver its batch) and hands the async worker batches of ``worker_batch_size`` runs
(above 10 with a short ``worker_batching_window_s``: each record is a coroutine, so a large batch
costs one invocation, not one per run). The worker's reserved concurrency
(``InfraConfig.worker_reservation``: ``worker_reserved_concurrency``, or by default what the event
source can use within the account quota) is its cap in every mode. In standard mode the source is
also capped at ``worker_max_concurrency`` (MaximumConcurrency, at most 1,000, never above the
reservation). In provisioned mode (``worker_min_pollers``) pollers stay warm for the top-of-minute
burst and drive up to ``worker_max_pollers`` x 10 invocations: the reservation is the only cap
there, so the concurrency that runs is ``min(pollers x 10, reserved)`` (what ``punctual capacity``
and ``punctual burst-model`` model). The worker keeps the messages it holds
hidden while their runs execute (ChangeMessageVisibility, granted with the event source), resends
the message of a run that waited on its tenant limits many times (SendMessage on the dispatch queue), and
delivers runs only to the AWS targets the operator listed in ``target_arns``; HTTP targets need
no AWS permission.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.alerts import Alerts
from infra.constructs.functions import PunctualFunction, Shared


class Workers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        shared: Shared,
        dispatch_queue: sqs.IQueue,
        alerts: Alerts,
    ) -> None:
        super().__init__(scope, construct_id)
        config = shared.config
        self.handler = PunctualFunction(
            self,
            "Handler",
            spec=constants.WORKER_FUNCTION,
            shared=shared,
            timeout_s=config.worker_timeout_s,
            # Reserved = capped, in every mode (infra.config: concurrency isolation).
            reserved_concurrency=config.worker_reservation,
        )
        role = self.handler.role
        access.grant_tables(role, access.WORKER, shared.tables)
        # the runs a finish releases for dependent jobs; a run that waited on its owner's limits for many
        # receives is resent fresh (the redrive counts receives: waiting must never dead-letter a run)
        dispatch_queue.grant(role, *access.SEND)
        alerts.grant_publish_owner_alerts(role)
        access.grant_targets(role, config.target_arns, role)
        self.handler.function.add_event_source(
            sources.SqsEventSource(
                dispatch_queue,
                batch_size=config.worker_batch_size,
                max_batching_window=cdk.Duration.seconds(config.worker_batching_window_s),
                report_batch_item_failures=True,
                # the Fargate tier: deployed disabled (enable it to hand the queue back to Lambda workers)
                enabled=config.lambda_workers,
                # provisioned mode has no MaximumConcurrency: the reserved concurrency caps it
                max_concurrency=config.worker_event_source_max_concurrency,
                provisioned_poller_config=(
                    lambda_.ProvisionedPollerConfig(
                        minimum_pollers=config.worker_min_pollers, maximum_pollers=config.worker_max_pollers
                    )
                    if config.provisioned_pollers
                    else None
                ),
            )
        )
