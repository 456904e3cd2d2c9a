"""CloudWatch dashboard and alarms.

Punctual's own metrics come from Powertools (EMF) in namespace ``Punctual`` with the dimension
``service=punctual`` (``infra.constants``). Alarms notify the ops topic, on both ALARM and OK.
Missing data is not breaching: an idle system emits no lateness samples and no errors.

Alarms:
- the dead-letter queue has held messages for DLQ_ALARM_MINUTES (the reaper is not draining it);
- dispatch lateness p99 above ``alarm_lateness_p99_ms`` for LATENESS_ALARM_MINUTES;
- Lambda errors and throttles per function, over ERROR_ALARM_MINUTES;
- DynamoDB read/write throttle events per table, its indexes included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.config import InfraConfig
from punctual import resources

ONE_MINUTE = cdk.Duration.minutes(1)
WIDGET_WIDTH = 8  # three widgets per dashboard row (24 units)


@dataclass(frozen=True)
class AlarmSpec:
    construct_id: str
    description: str
    metric: cw.IMetric
    threshold: float
    evaluation_periods: int = 1


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        functions: Mapping[str, lambda_.IFunction],
        tables: Mapping[str, dynamodb.ITable],
        dispatch_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        ops_topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._functions = functions
        self._tables = tables
        self._queue = dispatch_queue
        self._dlq = dead_letter_queue
        action = cw_actions.SnsAction(ops_topic)
        self.alarms = [self._build_alarm(spec, action) for spec in self._alarm_specs()]
        self.dashboard = self._build_dashboard()

    # -- alarms ---------------------------------------------------------------------------------

    def _alarm_specs(self) -> list[AlarmSpec]:
        config = self._config
        errors = cdk.Duration.minutes(constants.ERROR_ALARM_MINUTES)
        specs = [
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
                f"Runs start late: dispatch lateness p99 above {config.alarm_lateness_p99_ms} ms",
                _punctual_metric(constants.DISPATCH_LATENESS_MS, "p99", labelled=False),
                config.alarm_lateness_p99_ms,
                constants.LATENESS_ALARM_MINUTES,
            ),
        ]
        for name, function in self._functions.items():
            specs.append(
                AlarmSpec(
                    f"{name.capitalize()}Errors",
                    f"{name} Lambda errors",
                    function.metric_errors(statistic="Sum", period=errors),
                    config.alarm_lambda_errors,
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
        return specs

    def _build_alarm(self, spec: AlarmSpec, action: cw_actions.SnsAction) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            spec.construct_id,
            alarm_description=spec.description,
            metric=spec.metric,
            threshold=spec.threshold,
            evaluation_periods=spec.evaluation_periods,
            datapoints_to_alarm=spec.evaluation_periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

    def _table_throttles(self, name: str, period: cdk.Duration) -> cw.MathExpression:
        """Read + write throttle events of the table and of each of its indexes, summed."""
        table = self._tables[name]
        definition = next(t for t in resources.TABLES if t.logical_name == name)
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
        lateness = [_punctual_metric(constants.DISPATCH_LATENESS_MS, stat) for stat in ("p50", "p99")]
        skew = [_punctual_metric(constants.SCHEDULER_SKEW_MS, stat) for stat in ("Average", "Maximum", "Minimum")]
        claims = [
            _punctual_metric(constants.CLAIM_CONFLICTS, "Sum"),
            _punctual_metric(constants.SHARDS_OWNED, "Maximum"),
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
        table_throttles = [self._table_throttles(name, ONE_MINUTE) for name in self._tables]
        table_writes = [
            t.metric_consumed_write_capacity_units(statistic="Sum", period=ONE_MINUTE, label=n)
            for n, t in self._tables.items()
        ]
        return [
            [
                _graph("Runs per minute", runs),
                _graph("Dispatch lateness (ms)", lateness),
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
            [cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=3 * WIDGET_WIDTH)],
        ]


def _punctual_metric(name: str, statistic: str, *, labelled: bool = True) -> cw.Metric:
    """A Powertools metric of Punctual; a label (graphs only) would turn an alarm into metric math."""
    return cw.Metric(
        namespace=constants.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map=constants.METRIC_DIMENSIONS,
        statistic=statistic,
        period=ONE_MINUTE,
        label=f"{name} {statistic}" if labelled else None,
    )


def _graph(title: str, metrics: Sequence[cw.IMetric]) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(metrics), width=WIDGET_WIDTH, height=6)
