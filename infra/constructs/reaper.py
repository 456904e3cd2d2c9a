"""The reaper: once a minute it sweeps the open-runs index for runs past their deadline (requeue
or dead-letter them), and it consumes the dispatch dead-letter queue (mark those runs dead and
alert their owners). Both paths are compare-and-set on the run, so a sweep that overlaps the
previous one, or a message delivered twice, changes nothing twice.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.alerts import Alerts
from infra.constructs.functions import PunctualFunction, Shared

SWEEP_S = 60


class Reaper(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        shared: Shared,
        dispatch_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        alerts: Alerts,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = PunctualFunction(
            self,
            "Handler",
            spec=constants.REAPER_FUNCTION,
            shared=shared,
            max_event_age_s=SWEEP_S,
            # The reaper recovers runs exactly when workers overload the account: it keeps its own slots.
            reserved_concurrency=constants.REAPER_RESERVED_CONCURRENCY,
        )
        role = self.handler.role
        access.grant_tables(role, access.REAPER, shared.tables, open_index=shared.config.open_index)
        dispatch_queue.grant(role, *access.SEND)  # requeue
        alerts.grant_publish_owner_alerts(role)
        self.rule = events.Rule(
            self,
            "Sweep",
            description="Sweep the open-runs index for runs past their deadline every minute",
            schedule=events.Schedule.rate(cdk.Duration.seconds(SWEEP_S)),
            targets=[targets.LambdaFunction(self.handler.function, retry_attempts=0)],
        )
        self.handler.function.add_event_source(
            sources.SqsEventSource(
                dead_letter_queue,
                batch_size=10,
                report_batch_item_failures=True,
                # Poison messages arrive one at a time; two pollers are the smallest setting.
                max_concurrency=constants.DEAD_LETTER_MAX_CONCURRENCY,
            )
        )
