"""CloudWatch dashboard and alarms.

Punctual's own metrics come from Powertools (EMF) in namespace ``Punctual`` with the dimension
``service=punctual`` (``infra.constants``). Alarms notify the ops topic, on both ALARM and OK.
Missing data is not breaching (an idle system emits no lateness samples and no errors), except
where silence is the failure: the scheduler fleet's invocations, and the alarms on failures that
make no noise (``infra.constructs.liveness``: failing scheduler ticks, claim lag, shards owned, the
reaper's invocations, stalled workers). docs/deploy.md's runbook says what each alarm means and
what to do.

Alarms:
- scheduler invocations per minute below ``scheduler_instances`` for SCHEDULER_INVOCATION_ALARM_MINUTES,
  missing data breaching (a stopped fleet emits nothing at all);
- the dispatch queue's oldest message older than ``alarm_oldest_message_s`` (nothing consumes it),
  and ready messages above ``alarm_visible_depth`` for DEPTH_ALARM_MINUTES (workers do not keep up);
- the dead-letter queue has held messages for DLQ_ALARM_MINUTES (the reaper is not draining it);
- dispatch lateness p99 (scheduler side) and start lateness p99 (worker side, lease - scheduled_at)
  for LATENESS_ALARM_MINUTES;
- Lambda error *rates* per function and API 5XX rate over ERROR_ALARM_MINUTES (a count of "any
  error" flaps at scale), Lambda throttles per function;
- DynamoDB read/write throttle events per table, its indexes included;
- one tenant stayed noisy on the dispatch queue for NOISY_TENANT_ALARM_MINUTES (SQS fair queues: its
  ``MessageGroupId`` held more than its share of the in-flight messages; see ``punctual.tenancy``);
- messages in flight (received, not deleted) above IN_FLIGHT_ALARM on the dispatch (and long-run)
  queue: two thirds of SQS's 120,000, over which ReceiveMessage fails for every owner
  (``punctual.execution.waits`` keeps waits out of flight; this says when something else does).

The dashboard's fair-queue row shows the noisy groups and the backlog of the quiet ones (what the
other tenants wait on while one floods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.config import InfraConfig
from infra.constructs import liveness
from infra.constructs.alarm_spec import ONE_MINUTE, AlarmSpec
from infra.constructs.alarm_spec import punctual_metric as _punctual_metric
from punctual import resources

# SQS fair queue metrics (standard queue, MessageGroupId = owner: punctual.engines.aws.queue)
NOISY_GROUPS = "ApproximateNumberOfNoisyGroups"
QUIET_GROUP_METRICS = (
    ("ApproximateNumberOfMessagesVisibleInQuietGroups", "Visible"),
    ("ApproximateNumberOfMessagesNotVisibleInQuietGroups", "In flight"),
    ("ApproximateNumberOfMessagesDelayedInQuietGroups", "Delayed"),
)
QUIET_AGE = "ApproximateAgeOfOldestMessageInQuietGroups"
WIDGET_WIDTH = 8  # three widgets per dashboard row (24 units)
IN_FLIGHT_ALARM = 80_000  # messages not visible (in flight) on one queue: 2/3 of SQS's hard limit of 120,000


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        functions: Mapping[str, lambda_.IFunction],
        api_stage: apigw.Stage,
        tables: Mapping[str, dynamodb.ITable],
        dispatch_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        long_run_queue: sqs.IQueue | None,
        ops_topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._functions = functions
        self._api_stage = api_stage
        self._tables = tables
        self._queue = dispatch_queue
        self._dlq = dead_letter_queue
        self._long_run = long_run_queue
        action = cw_actions.SnsAction(ops_topic)
        self.alarms = [self._build_alarm(spec, action) for spec in self._alarm_specs()]
        self.dashboard = self._build_dashboard()

    # -- alarms ---------------------------------------------------------------------------------

    def _alarm_specs(self) -> list[AlarmSpec]:
        config = self._config
        errors = cdk.Duration.minutes(constants.ERROR_ALARM_MINUTES)
        specs = [
            AlarmSpec(
                "SchedulerInvocationsMissing",
                f"Fewer than {config.scheduler_instances} scheduler invocations a minute for "
                f"{constants.SCHEDULER_INVOCATION_ALARM_MINUTES} minutes: scheduler instances are not starting "
                "(EventBridge rule disabled, function throttled or failing to start); their shards wait for takeover",
                self._functions["scheduler"].metric_invocations(statistic="Sum", period=ONE_MINUTE),
                config.scheduler_instances,
                constants.SCHEDULER_INVOCATION_ALARM_MINUTES,
                comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                missing=cw.TreatMissingData.BREACHING,  # no invocation at all emits no data at all
            ),
            AlarmSpec(
                "DispatchOldestMessage",
                f"A dispatch message is older than {config.alarm_oldest_message_s} s: nothing consumes the queue "
                "(event source disabled or failing, workers crashing)",
                self._queue.metric_approximate_age_of_oldest_message(statistic="Maximum", period=ONE_MINUTE),
                config.alarm_oldest_message_s,
                constants.DEPTH_ALARM_MINUTES,
            ),
            AlarmSpec(
                "DispatchBacklog",
                f"More than {config.alarm_visible_depth} ready dispatch messages for {constants.DEPTH_ALARM_MINUTES} "
                "minutes: workers do not keep up (concurrency cap, throttling, slow targets)",
                self._queue.metric_approximate_number_of_messages_visible(statistic="Minimum", period=ONE_MINUTE),
                config.alarm_visible_depth,
                constants.DEPTH_ALARM_MINUTES,
            ),
            AlarmSpec(
                "DeadLetterQueueNotEmpty",
                f"Dispatch dead-letter queue held messages for {constants.DLQ_ALARM_MINUTES} minutes: "
                "the reaper is not draining it",
                self._dlq.metric_approximate_number_of_messages_visible(statistic="Maximum", period=ONE_MINUTE),
                config.alarm_dlq_depth,
                constants.DLQ_ALARM_MINUTES,
            ),
            AlarmSpec(
                "DispatchLatenessP99",
                f"Runs are dispatched late: dispatch lateness p99 above {config.alarm_lateness_p99_ms} ms",
                _punctual_metric(constants.DISPATCH_LATENESS_MS, "p99", labelled=False),
                config.alarm_lateness_p99_ms,
                constants.LATENESS_ALARM_MINUTES,
            ),
            AlarmSpec(
                "StartLatenessP99",
                f"Runs start late: start lateness p99 (lease - scheduled time) above "
                f"{config.alarm_start_lateness_p99_ms} ms",
                _punctual_metric(constants.START_LATENESS_MS, "p99", labelled=False),
                config.alarm_start_lateness_p99_ms,
                constants.LATENESS_ALARM_MINUTES,
            ),
            AlarmSpec(
                "Api5xxRate",
                f"API 5XX responses above {config.alarm_api_5xx_rate_percent}% of requests",
                cw.MathExpression(
                    expression="100 * errors",  # 5XXError's Average is the fraction of requests
                    using_metrics={"errors": self._api_stage.metric_server_error(statistic="Average", period=errors)},
                    label="API 5XX (%)",
                    period=errors,
                ),
                config.alarm_api_5xx_rate_percent,
            ),
            AlarmSpec(
                "NoisyTenant",
                f"One tenant stayed noisy on the dispatch queue for {constants.NOISY_TENANT_ALARM_MINUTES} minutes "
                "(SQS fair queue: its runs hold more than their share of in-flight messages); review its limits "
                "with punctual tenants get",
                self._queue.metric(NOISY_GROUPS, statistic="Maximum", period=ONE_MINUTE),
                0,
                constants.NOISY_TENANT_ALARM_MINUTES,
            ),
        ]
        if self._long_run is not None:
            specs.append(
                AlarmSpec(
                    "LongRunOldestMessage",
                    f"A long-run message is older than {config.alarm_oldest_message_s} s: the Fargate workers do "
                    "not consume the long-run queue (service stopped, tasks crashing)",
                    self._long_run.metric_approximate_age_of_oldest_message(statistic="Maximum", period=ONE_MINUTE),
                    config.alarm_oldest_message_s,
                    constants.DEPTH_ALARM_MINUTES,
                )
            )
        specs += self._in_flight_specs()
        for name, function in self._functions.items():
            specs.append(
                AlarmSpec(
                    f"{name.capitalize()}ErrorRate",
                    f"{name} Lambda errors above {config.alarm_lambda_error_rate_percent}% of invocations",
                    _error_rate(function, errors, label=f"{name} errors (%)"),
                    config.alarm_lambda_error_rate_percent,
                )
            )
            specs.append(
                AlarmSpec(
                    f"{name.capitalize()}Throttles",
                    f"{name} Lambda throttles",
                    function.metric_throttles(statistic="Sum", period=errors),
                    config.alarm_lambda_throttles,
                )
            )
        for name in self._tables:
            specs.append(
                AlarmSpec(
                    f"{name.capitalize()}TableThrottles",
                    f"DynamoDB {name} table (and its indexes) throttled requests",
                    self._table_throttles(name, errors),
                    config.alarm_dynamodb_throttles,
                )
            )
        specs += liveness.alarm_specs(config, reaper=self._functions["reaper"], dispatch_queue=self._queue)
        return specs

    def _in_flight_specs(self) -> list[AlarmSpec]:
        """Messages in flight near SQS's per-queue limit, on each queue workers receive from."""
        queues = {"Dispatch": self._queue, "LongRun": self._long_run}
        return [
            AlarmSpec(
                f"{name}InFlight",
                f"More than {IN_FLIGHT_ALARM:,} {name} messages in flight (received, not deleted): at SQS's "
                "120,000 ReceiveMessage fails with OverLimit for every owner. Look for runs held by workers "
                "(slow targets, a tenant's backlog waiting for max_concurrency) and scale or limit them",
                queue.metric_approximate_number_of_messages_not_visible(statistic="Maximum", period=ONE_MINUTE),
                IN_FLIGHT_ALARM,
            )
            for name, queue in queues.items()
            if queue is not None
        ]

    def _build_alarm(self, spec: AlarmSpec, action: cw_actions.SnsAction) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            spec.construct_id,
            alarm_description=spec.description,
            metric=spec.metric,
            threshold=spec.threshold,
            evaluation_periods=spec.evaluation_periods,
            datapoints_to_alarm=spec.evaluation_periods,
            comparison_operator=spec.comparison,
            treat_missing_data=spec.missing,
        )
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

    def _table_throttles(self, name: str, period: cdk.Duration) -> cw.MathExpression:
        """Read + write throttle events of the table and of each of its indexes, summed."""
        table = self._tables[name]
        definition = next(t for t in resources.tables(open_index=self._config.open_index) if t.logical_name == name)
        scopes: list[dict[str, str]] = [{"TableName": table.table_name}]
        scopes += [{"TableName": table.table_name, "GlobalSecondaryIndexName": i.name} for i in definition.indexes]
        using: dict[str, cw.IMetric] = {}
        for n, dimensions in enumerate(scopes):
            for kind in ("Read", "Write"):
                using[f"{name}{kind.lower()}{n}"] = cw.Metric(
                    namespace="AWS/DynamoDB",
                    metric_name=f"{kind}ThrottleEvents",
                    dimensions_map=dimensions,
                    statistic="Sum",
                    period=period,
                )
        return cw.MathExpression(
            expression=" + ".join(f"FILL({m}, 0)" for m in using),
            using_metrics=using,
            label=f"{name} throttles",
            period=period,
        )

    # -- dashboard ------------------------------------------------------------------------------

    def _build_dashboard(self) -> cw.Dashboard:
        dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{cdk.Stack.of(self).stack_name}-overview",
            period_override=cw.PeriodOverride.AUTO,
        )
        for row in self._dashboard_rows():
            dashboard.add_widgets(*row)
        return dashboard

    def _dashboard_rows(self) -> list[Sequence[cw.IWidget]]:
        runs = [
            _punctual_metric(name, "Sum")
            for name in (
                constants.RUNS_DISPATCHED,
                constants.RUNS_SUCCEEDED,
                constants.RUNS_FAILED,
                constants.RUNS_DEAD,
            )
        ]
        lateness = [
            _punctual_metric(name, stat)
            for name in (constants.DISPATCH_LATENESS_MS, constants.START_LATENESS_MS)
            for stat in ("p50", "p99")
        ]
        skew = [_punctual_metric(constants.SCHEDULER_SKEW_MS, stat) for stat in ("Average", "Maximum", "Minimum")]
        claims: list[cw.IMetric] = [
            _punctual_metric(constants.CLAIM_CONFLICTS, "Sum"),
            liveness.shards_owned(self._config.shards),
        ]
        queue = [
            self._queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=ONE_MINUTE),
            self._queue.metric_approximate_number_of_messages_not_visible(statistic="Maximum", period=ONE_MINUTE),
            self._queue.metric(
                "ApproximateNumberOfMessagesDelayed", statistic="Maximum", period=ONE_MINUTE, label="Delayed"
            ),
        ]
        oldest = [self._queue.metric_approximate_age_of_oldest_message(statistic="Maximum", period=ONE_MINUTE)]
        dlq = [self._dlq.metric_approximate_number_of_messages_visible(statistic="Maximum", period=ONE_MINUTE)]
        errors = [f.metric_errors(statistic="Sum", period=ONE_MINUTE, label=n) for n, f in self._functions.items()]
        throttles = [
            f.metric_throttles(statistic="Sum", period=ONE_MINUTE, label=n) for n, f in self._functions.items()
        ]
        concurrency = [
            f.metric("ConcurrentExecutions", statistic="Maximum", period=ONE_MINUTE, label=n)
            for n, f in self._functions.items()
        ]
        noisy = [self._queue.metric(NOISY_GROUPS, statistic="Maximum", period=ONE_MINUTE, label="Noisy tenants")]
        quiet = [
            self._queue.metric(name, statistic="Maximum", period=ONE_MINUTE, label=label)
            for name, label in QUIET_GROUP_METRICS
        ]
        quiet_age = [self._queue.metric(QUIET_AGE, statistic="Maximum", period=ONE_MINUTE, label="Quiet tenants")]
        table_throttles = [self._table_throttles(name, ONE_MINUTE) for name in self._tables]
        table_writes = [
            t.metric_consumed_write_capacity_units(statistic="Sum", period=ONE_MINUTE, label=n)
            for n, t in self._tables.items()
        ]
        return [
            [
                _graph("Runs per minute", runs),
                _graph("Dispatch and start lateness (ms)", lateness),
                _graph("Scheduler clock skew (ms)", skew),
            ],
            [
                _graph("Dispatch queue depth", queue),
                _graph("Dispatch queue: age of oldest message (s)", oldest),
                _graph("Dead-letter queue depth", dlq),
            ],
            [
                _graph("Lambda errors", errors),
                _graph("Lambda throttles", throttles),
                _graph("Lambda concurrency", concurrency),
            ],
            [
                _graph("DynamoDB throttled requests", table_throttles),
                _graph("DynamoDB consumed write units", table_writes),
                _graph("Claims: conflicts and shards owned", claims),
            ],
            [
                _graph("Fair queue: noisy tenants (message groups)", noisy),
                _graph("Fair queue: quiet tenants' messages", quiet),
                _graph("Fair queue: quiet tenants' oldest message (s)", quiet_age),
            ],
            [_graph(title, metrics) for title, metrics in liveness.health_graphs(self._queue)],
            [cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=3 * WIDGET_WIDTH)],
        ]


def _error_rate(function: lambda_.IFunction, period: cdk.Duration, *, label: str) -> cw.MathExpression:
    """Errors as a percentage of invocations (0 while idle)."""
    return cw.MathExpression(
        expression="IF(invocations > 0, 100 * errors / invocations, 0)",
        using_metrics={
            "errors": function.metric_errors(statistic="Sum", period=period),
            "invocations": function.metric_invocations(statistic="Sum", period=period),
        },
        label=label,
        period=period,
    )


def _graph(title: str, metrics: Sequence[cw.IMetric]) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(metrics), width=WIDGET_WIDTH, height=6)
