"""The scheduler fleet: K instances of the scheduler Lambda, each started at the start of every minute.

EventBridge rules fire at most once a minute, so each invocation loops every second. The rules are
``cron()`` rules, which fire at second 0 of the minute (a ``rate()`` rule fires at whatever second
it was created): each invocation ticks through the next minute's claim window (:55-:00) and hands
its shards over to the next minute's invocation right after it, or stops at second 40 of the next
minute if none came (``punctual.scheduling.invocation``; two invocations on one shard still cannot
dispatch a run twice). Each instance receives ``{"instance": i, "instances": K, "time": <the
event's scheduled time>}``: the time names the invocation's generation. A rule holds at most 5
targets, so the K targets are spread over ceil(K / 5) rules. Reserved concurrency 2K covers the
seconds in which an instance's old and new invocations overlap, and keeps the fleet running when
workers use the account's concurrency. A missed or failed tick is not retried: the next minute's tick replaces it.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.constructs import access
from infra.constructs.functions import PunctualFunction, Shared

TICK_S = 60


class SchedulerFleet(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        shared: Shared,
        dispatch_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = PunctualFunction(
            self,
            "Handler",
            spec=constants.SCHEDULER_FUNCTION,
            shared=shared,
            memory_mb=shared.config.scheduler_memory_mb,
            reserved_concurrency=shared.config.scheduler_reserved_concurrency,
            max_event_age_s=TICK_S,
        )
        access.grant_tables(self.handler.role, access.SCHEDULER, shared.tables)
        dispatch_queue.grant(self.handler.role, *access.SEND)
        self.rules = self._build_rules(shared.config.scheduler_instances)

    def _build_rules(self, instances: int) -> list[events.Rule]:
        per_rule = constants.EVENTBRIDGE_MAX_TARGETS_PER_RULE
        return [
            events.Rule(
                self,
                f"Tick{first // per_rule}",
                description=f"Start scheduler instances {first}..{min(first + per_rule, instances) - 1} every minute",
                schedule=events.Schedule.cron(minute="*"),  # cron(* * * * ? *): second 0 of every minute
                targets=[self._target(i, instances) for i in range(first, min(first + per_rule, instances))],
            )
            for first in range(0, instances, per_rule)
        ]

    def _target(self, instance: int, instances: int) -> targets.LambdaFunction:
        return targets.LambdaFunction(
            self.handler.function,
            event=events.RuleTargetInput.from_object(
                {"instance": instance, "instances": instances, "time": events.EventField.time}
            ),
            retry_attempts=0,
            max_event_age=cdk.Duration.seconds(TICK_S),
        )
