"""Issue 27, items 1 and 7: the failures that make no noise page someone, in every stack that must hold
(the default stack, the 10M/20k plan's, and each with open_index=false).

Each alarm must watch what the code emits: the metric names come from ``punctual.metrics``, and the
namespace and dimension are compared with the Powertools environment the scheduler function runs with
(tests/integration/test_scheduler_handler.py shows its EMF carries exactly that dimension set).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import InfraConfig
from infra.constructs import liveness
from punctual import metrics as m
from punctual.scheduling.scheduler import SHARDS_OWNED_EVERY_MS
from tests.infra.synth import Synth
from tests.infra.test_operations import _alarm_named, _metric_stats
from tests.infra.test_stack import _function_id, _logical_id

pytestmark = pytest.mark.infra

LIVENESS_ALARMS = ("SchedulerTicksFailing", "ClaimLagHigh", "ShardsUnowned", "ReaperInvocationsMissing")


def _env(synth: Synth, component: str) -> dict[str, Any]:
    function = synth.template["Resources"][_function_id(synth, component)]["Properties"]
    variables: dict[str, Any] = function["Environment"]["Variables"]
    return variables


def _emitted_as(synth: Synth) -> tuple[str, list[dict[str, Any]]]:
    """The namespace and dimensions under which the scheduler's Powertools metrics land."""
    env = _env(synth, "scheduler")
    return env["POWERTOOLS_METRICS_NAMESPACE"], [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]


def _shards(synth: Synth) -> int:
    return int(_env(synth, "scheduler")["PUNCTUAL_SHARDS"])


def _notifies_ops(synth: Synth, alarm: dict[str, Any]) -> None:
    ops_topic = {"Ref": _logical_id(synth, "AWS::SNS::Topic", "AlertsOpsAlarms")}
    assert alarm["AlarmActions"] == [ops_topic] and alarm["OKActions"] == [ops_topic]


def test_a_scheduler_whose_ticks_keep_failing_alarms_and_silence_breaches(shipped_synth: Synth) -> None:
    alarm = _alarm_named(shipped_synth, "SchedulerTicksFailing")
    namespace, dimensions = _emitted_as(shipped_synth)
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Dimensions"]) == (
        namespace,
        m.SCHEDULER_FAILED_TICKS_IN_A_ROW,
        dimensions,
    )
    assert alarm["Statistic"] == "Maximum"  # the worst instance of the fleet
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "breaching"
    # it fires before the invocation gives up, so a failing fleet alarms while it still runs
    give_up = int(_env(shipped_synth, "scheduler")["PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS"])
    assert alarm["Threshold"] == liveness.SCHEDULER_FAILED_TICKS_ALARM <= give_up
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == liveness.SCHEDULER_FAILURE_ALARM_MINUTES
    _notifies_ops(shipped_synth, alarm)


def test_claim_lag_alarms_on_a_job_left_unclaimed_and_on_silence(shipped_synth: Synth) -> None:
    alarm = _alarm_named(shipped_synth, "ClaimLagHigh")
    namespace, dimensions = _emitted_as(shipped_synth)
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Dimensions"]) == (namespace, m.CLAIM_LAG_MS, dimensions)
    assert (alarm["Statistic"], alarm["ComparisonOperator"]) == ("Maximum", "GreaterThanThreshold")
    assert alarm["Threshold"] == InfraConfig().alarm_claim_lag_ms
    assert alarm["TreatMissingData"] == "breaching"
    _notifies_ops(shipped_synth, alarm)


def test_shards_owned_by_the_fleet_below_the_shard_count_alarms(shipped_synth: Synth) -> None:
    alarm = _alarm_named(shipped_synth, "ShardsUnowned")
    namespace, dimensions = _emitted_as(shipped_synth)
    # The fleet's per-minute sum over its windows: each scheduler reports once per window
    (expression,) = [q for q in alarm["Metrics"] if q.get("ReturnData", True) and "Expression" in q]
    assert expression["Expression"] == f"owned / {60_000 // SHARDS_OWNED_EVERY_MS}"
    owned = _metric_stats(alarm)["owned"]
    assert owned["Metric"] == {"Namespace": namespace, "MetricName": m.SHARDS_OWNED, "Dimensions": dimensions}
    assert owned["Stat"] == "Sum"
    # compared with the shard count the schedulers were deployed with
    assert alarm["Threshold"] == _shards(shipped_synth)
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert alarm["TreatMissingData"] == "breaching"
    _notifies_ops(shipped_synth, alarm)


def test_a_reaper_nobody_invokes_alarms(shipped_synth: Synth) -> None:
    alarm = _alarm_named(shipped_synth, "ReaperInvocationsMissing")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", "Invocations", "Sum")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": _function_id(shipped_synth, "reaper")}}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "LessThanThreshold")
    assert alarm["EvaluationPeriods"] == liveness.REAPER_INVOCATION_ALARM_MINUTES == alarm["DatapointsToAlarm"]
    assert alarm["TreatMissingData"] == "breaching"  # a function never invoked emits nothing at all
    _notifies_ops(shipped_synth, alarm)


def test_ready_messages_that_no_worker_deletes_alarm(shipped_synth: Synth) -> None:
    alarm = _alarm_named(shipped_synth, "WorkersStalled")
    (expression,) = [q for q in alarm["Metrics"] if "Expression" in q]
    assert expression["Expression"] == "IF(visible > 0 AND FILL(deleted, 0) == 0, 1, 0)"
    stats = _metric_stats(alarm)
    dispatch = [
        {
            "Name": "QueueName",
            "Value": {"Fn::GetAtt": [_logical_id(shipped_synth, "AWS::SQS::Queue", "Dispatch0"), "QueueName"]},
        }
    ]
    assert stats["visible"] == {
        "Metric": {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible", "Dimensions": dispatch},
        "Period": 60,
        "Stat": "Minimum",  # ready the whole minute through
    }
    assert stats["deleted"]["Metric"]["MetricName"] == "NumberOfMessagesDeleted"
    assert stats["deleted"]["Stat"] == "Sum"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm["EvaluationPeriods"] == liveness.WORKERS_STALLED_ALARM_MINUTES == alarm["DatapointsToAlarm"]
    assert alarm["TreatMissingData"] == "notBreaching"  # a quiet queue reports nothing, and that is fine
    _notifies_ops(shipped_synth, alarm)


def test_the_scheduler_gives_up_after_the_configured_ticks(shipped_synth: Synth) -> None:
    assert _env(shipped_synth, "scheduler")["PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS"] == str(
        InfraConfig().scheduler_max_failed_ticks
    )


def test_a_lower_limit_lowers_the_alarm_threshold_with_it() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs

    stack = cdk.Stack(cdk.App(), "Limits")
    reaper = lambda_.Function.from_function_name(stack, "Reaper", "reaper")
    queue = sqs.Queue.from_queue_arn(stack, "Queue", "arn:aws:sqs:us-east-1:123456789012:dispatch")
    specs = liveness.alarm_specs(InfraConfig(scheduler_max_failed_ticks=5), reaper=reaper, dispatch_queue=queue)
    (ticks,) = [s for s in specs if s.construct_id == "SchedulerTicksFailing"]
    assert ticks.threshold == 5  # below the give-up point, or the invocation resets the count first


def test_the_dashboard_shows_what_the_new_alarms_watch(shipped_synth: Synth) -> None:
    (dashboard,) = shipped_synth.properties("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for name in (
        m.SCHEDULER_TICK_FAILURES,
        m.SCHEDULER_FAILED_TICKS_IN_A_ROW,
        m.CLAIM_LAG_MS,
        "NumberOfMessagesDeleted",
    ):
        assert name in body, name
    for name in LIVENESS_ALARMS:
        assert name in body, name  # in the alarm status widget


def test_every_shipped_stack_synthesizes_with_its_checks(shipped_synth: Synth) -> None:
    assert shipped_synth.error is None, shipped_synth.error  # cdk-nag findings would stop the synth
