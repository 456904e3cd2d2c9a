"""Operating on AWS (issue 15): the alarms that catch runs that stop starting, the dead-letter limit
and retention, concurrency isolation, warm throughput, the API's access log and logging role, and
the IAM grants nobody uses. Template assertions on the session's synthesized apps.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import constants
from infra.config import InfraConfig, InfraConfigError
from punctual import resources
from punctual.config import Settings
from punctual.model import MAX_RETRIES
from punctual.runs.retry import MAX_VISIBILITY_S
from punctual.scheduling import invocation
from punctual.scheduling.scheduler import SchedulerOptions
from tests.infra.synth import OPTIONS_CONTEXT, Synth
from tests.infra.test_stack import _function_id, _logical_id, _role_actions, _table

pytestmark = pytest.mark.infra

DEFAULTS = InfraConfig()
OPTIONS = InfraConfig.from_values(OPTIONS_CONTEXT)


def _alarm_named(synth: Synth, name: str) -> dict[str, Any]:
    (alarm,) = [r["Properties"] for k, r in synth.resources("AWS::CloudWatch::Alarm").items() if name in k]
    return alarm


def _metric_stats(alarm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Metric id -> MetricStat of a metric-math alarm."""
    return {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}


# -- alarms: runs that stop starting ------------------------------------------------------------------


def test_a_stopped_scheduler_fleet_alarms_because_silence_is_breaching(default_synth: Synth) -> None:
    alarm = _alarm_named(default_synth, "SchedulerInvocationsMissing")
    assert alarm["Namespace"] == "AWS/Lambda" and alarm["MetricName"] == "Invocations"
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": _function_id(default_synth, "scheduler")}}]
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 60)
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert alarm["Threshold"] == DEFAULTS.scheduler_instances
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == constants.SCHEDULER_INVOCATION_ALARM_MINUTES
    assert alarm["TreatMissingData"] == "breaching"


def test_the_instance_count_of_the_alarm_follows_the_context(options_synth: Synth) -> None:
    assert _alarm_named(options_synth, "SchedulerInvocationsMissing")["Threshold"] == OPTIONS.scheduler_instances


def test_a_queue_nothing_consumes_alarms_on_age_and_on_sustained_depth(default_synth: Synth) -> None:
    dispatch = {"Fn::GetAtt": [_logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0"), "QueueName"]}
    oldest = _alarm_named(default_synth, "DispatchOldestMessage")
    assert oldest["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert oldest["Dimensions"] == [{"Name": "QueueName", "Value": dispatch}]
    assert oldest["Threshold"] == DEFAULTS.alarm_oldest_message_s
    depth = _alarm_named(default_synth, "DispatchBacklog")
    assert depth["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert depth["Dimensions"] == [{"Name": "QueueName", "Value": dispatch}]
    # Sustained: the minimum of every minute stays above the threshold for DEPTH_ALARM_MINUTES.
    assert depth["Statistic"] == "Minimum"
    assert depth["EvaluationPeriods"] == depth["DatapointsToAlarm"] == constants.DEPTH_ALARM_MINUTES
    assert depth["Threshold"] == DEFAULTS.alarm_visible_depth


def test_start_lateness_p99_alarm_watches_what_workers_emit(default_synth: Synth) -> None:
    alarm = _alarm_named(default_synth, "StartLatenessP99")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("Punctual", constants.START_LATENESS_MS)
    assert alarm["ExtendedStatistic"] == "p99"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": constants.SERVICE_NAME}]
    assert alarm["Threshold"] == DEFAULTS.alarm_start_lateness_p99_ms
    assert alarm["TreatMissingData"] == "notBreaching"  # an idle system starts nothing


def test_api_5xx_alarm_is_a_rate_of_the_stage_requests(default_synth: Synth) -> None:
    alarm = _alarm_named(default_synth, "Api5xxRate")
    (stat,) = _metric_stats(alarm).values()
    assert stat["Metric"]["MetricName"] == "5XXError" and stat["Metric"]["Namespace"] == "AWS/ApiGateway"
    assert stat["Stat"] == "Average"  # 5XXError's average is the fraction of requests
    assert {"Name": "Stage", "Value": {"Ref": _logical_id(default_synth, "AWS::ApiGateway::Stage", "ApiRestApi")}} in (
        stat["Metric"]["Dimensions"]
    )
    (expression,) = [m for m in alarm["Metrics"] if m.get("ReturnData")]
    assert expression["Expression"].startswith("100 *")
    assert alarm["Threshold"] == DEFAULTS.alarm_api_5xx_rate_percent


@pytest.mark.parametrize("component", ["api", "scheduler", "worker", "reaper"])
def test_lambda_error_alarms_are_rates_not_any_error(default_synth: Synth, component: str) -> None:
    alarm = _alarm_named(default_synth, f"{component.capitalize()}ErrorRate")
    stats = _metric_stats(alarm)
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {"Errors", "Invocations"}
    for stat in stats.values():
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "FunctionName", "Value": {"Ref": _function_id(default_synth, component)}}
        ]
    (expression,) = [m for m in alarm["Metrics"] if m.get("ReturnData")]
    assert "100 * errors / invocations" in expression["Expression"]
    assert alarm["Threshold"] == DEFAULTS.alarm_lambda_error_rate_percent
    assert not [a for a in default_synth.properties("AWS::CloudWatch::Alarm") if a.get("MetricName") == "Errors"]


def test_dashboard_graphs_shards_owned_as_the_fleet_total(default_synth: Synth) -> None:
    (dashboard,) = default_synth.properties("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    assert "owned / 6" in body  # per-minute sum over every instance / its 10 s report windows per minute
    shards_owned = body.split('\\"ShardsOwned\\",\\"service\\",\\"punctual\\",')[1].split("}")[0]
    assert '\\"id\\":\\"owned\\"' in shards_owned and '\\"stat\\":\\"Sum\\"' in shards_owned
    assert constants.START_LATENESS_MS in body


# -- long runs ------------------------------------------------------------------------------------------


def _env(synth: Synth, component: str) -> dict[str, Any]:
    variables: dict[str, Any] = synth.template["Resources"][_function_id(synth, component)]["Properties"][
        "Environment"
    ]["Variables"]
    return variables


def test_without_fargate_there_is_no_long_run_queue_and_the_api_refuses_long_timeouts(default_synth: Synth) -> None:
    assert len(default_synth.resources("AWS::SQS::Queue")) == 2  # dispatch and its dead-letter queue
    for component in ("api", "scheduler", "worker", "reaper"):
        env = _env(default_synth, component)
        # 900 s worker timeout - 30 s lease margin: a longer job would be killed on every attempt
        assert env["PUNCTUAL_MAX_TIMEOUT_S"] == "870" == str(DEFAULTS.max_timeout_s)
        assert "PUNCTUAL_LONG_RUN_QUEUE_URL" not in env


def test_with_fargate_long_runs_have_a_queue_only_fargate_consumes(options_synth: Synth) -> None:
    long_id = _logical_id(options_synth, "AWS::SQS::Queue", "DispatchDispatchLong")
    dlq_id = _logical_id(options_synth, "AWS::SQS::Queue", "DispatchDispatchDlq")
    long_queue = options_synth.resources("AWS::SQS::Queue")[long_id]["Properties"]
    assert long_queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": resources.MAX_RECEIVES,
    }
    assert long_queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    for component in ("api", "scheduler", "worker", "reaper"):
        env = _env(options_synth, component)
        assert env["PUNCTUAL_LONG_RUN_QUEUE_URL"] == {"Ref": long_id}
        assert env["PUNCTUAL_LONG_RUN_AFTER_S"] == "870"  # longer than a Lambda worker may take
        assert env["PUNCTUAL_MAX_TIMEOUT_S"] == "43200"
    long_arn = json.dumps({"Fn::GetAtt": [long_id, "Arn"]}, sort_keys=True)
    for sender in ("api", "scheduler", "reaper"):
        assert long_arn in _role_actions(options_synth, sender)["sqs:SendMessage"], sender
    assert long_arn not in _role_actions(options_synth, "worker").get("sqs:ReceiveMessage", set())
    # One Fargate service reads the long-run queue as its dispatch queue, and no other.
    tasks = options_synth.resources("AWS::ECS::TaskDefinition")
    (task,) = [t["Properties"] for k, t in tasks.items() if "LongRun" in k]
    (container,) = task["ContainerDefinitions"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["PUNCTUAL_DISPATCH_QUEUE_URL"] == {"Ref": long_id}
    task_role = task["TaskRoleArn"]["Fn::GetAtt"][0]
    receives = [
        s["Resource"]
        for p in options_synth.properties("AWS::IAM::Policy")
        if {"Ref": task_role} in p["Roles"]
        for s in p["PolicyDocument"]["Statement"]
        if "sqs:ReceiveMessage" in s["Action"]
    ]
    assert receives == [{"Fn::GetAtt": [long_id, "Arn"]}]
    assert _alarm_named(options_synth, "LongRunOldestMessage")["MetricName"] == "ApproximateAgeOfOldestMessage"


# -- the scheduler's minute hand-over -------------------------------------------------------------------


def test_scheduler_invocations_hand_over_after_the_claim_window(default_synth: Synth) -> None:
    # Each invocation starts at second 0 of its minute (cron) and ticks until its successor takes
    # over, or until second 40 of the next minute: its timeout must not cut that short, and an
    # instance's two invocations (the few seconds of the hand-over) fit in its reserved concurrency of 2.
    function = default_synth.template["Resources"][_function_id(default_synth, "scheduler")]["Properties"]
    assert function["Timeout"] == invocation.TIMEOUT_S
    assert function["Timeout"] * 1000 - invocation.SAFETY_MS >= invocation.PERIOD_MS + invocation.HAND_OVER_BY_S * 1000
    assert function["ReservedConcurrentExecutions"] == 2 * DEFAULTS.scheduler_instances
    rules = [r for r in default_synth.properties("AWS::Events::Rule") if "InputTransformer" in r["Targets"][0]]
    assert {r["ScheduleExpression"] for r in rules} == {"cron(* * * * ? *)"}
    # the hand-over (second 0 plus delivery and cold start) is as far from the next claim window
    # (the lookahead before the minute's top) as it can be, and a successor missing until second 40
    # leaves the others time to take its shards (a lease refresh) before that window
    lookahead_s = Settings().lookahead_ms // 1000  # the deployed scheduler's (PUNCTUAL_LOOKAHEAD_MS)
    refresh_s = SchedulerOptions().ownership.renew_every_ms // 1000
    assert invocation.HAND_OVER_BY_S + refresh_s < 60 - lookahead_s


# -- messages in flight -------------------------------------------------------------------------------


def test_messages_in_flight_alarm_well_below_the_queue_limit(default_synth: Synth, options_synth: Synth) -> None:
    # SQS holds 120,000 messages in flight per queue; over it ReceiveMessage fails for every owner
    for synth, queues in ((default_synth, ["Dispatch"]), (options_synth, ["Dispatch", "LongRun"])):
        for name in queues:
            alarm = _alarm_named(synth, f"{name}InFlight")
            assert alarm["MetricName"] == "ApproximateNumberOfMessagesNotVisible"
            assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Maximum", 60, 1)
            assert alarm["Threshold"] == 80_000 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
            prefix = "Dispatch0" if name == "Dispatch" else "DispatchDispatchLong"
            queue = {"Fn::GetAtt": [_logical_id(synth, "AWS::SQS::Queue", prefix), "QueueName"]}
            assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": queue}]
    assert not [k for k in default_synth.resources("AWS::CloudWatch::Alarm") if "LongRunInFlight" in k]


def test_long_run_workers_may_resend_to_their_own_queue(options_synth: Synth) -> None:
    # a wait re-sent with a delay (punctual.execution.waits) goes back to the queue it came from
    long_id = _logical_id(options_synth, "AWS::SQS::Queue", "DispatchDispatchLong")
    (task,) = [
        t["Properties"] for k, t in options_synth.resources("AWS::ECS::TaskDefinition").items() if "LongRun" in k
    ]
    task_role = task["TaskRoleArn"]["Fn::GetAtt"][0]
    sends = [
        s["Resource"]
        for p in options_synth.properties("AWS::IAM::Policy")
        if {"Ref": task_role} in p["Roles"]
        for s in p["PolicyDocument"]["Statement"]
        if "sqs:SendMessage" in s["Action"]
    ]
    assert {"Fn::GetAtt": [long_id, "Arn"]} in sends  # besides the SQS targets of target_arns


# -- the dispatch queue: dead-letter limit and retention ----------------------------------------------


def test_the_dead_letter_limit_is_well_above_the_worst_case_of_a_healthy_run(default_synth: Synth) -> None:
    # The arithmetic of punctual.resources: attempts x (execute + early return + 2 held) receives.
    assert resources.WORST_CASE_RECEIVES == (MAX_RETRIES + 1) * 4
    assert resources.DISPATCH_QUEUE.max_receives == resources.MAX_RECEIVES
    assert resources.MAX_RECEIVES >= resources.WORST_CASE_RECEIVES + resources.TENANT_WAIT_RECEIVES
    dispatch = default_synth.resources("AWS::SQS::Queue")[_logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0")]
    assert dispatch["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 100  # 94 rounded up (test_sizing)


def test_workers_learn_the_deployed_visibility_from_their_environment(any_synth: Synth) -> None:
    dispatch = any_synth.resources("AWS::SQS::Queue")[_logical_id(any_synth, "AWS::SQS::Queue", "Dispatch0")]
    deployed = dispatch["Properties"]["VisibilityTimeout"]
    assert deployed == 6 * 900  # 6 x the worker's timeout, AWS's advice for an SQS event source
    worker = any_synth.template["Resources"][_function_id(any_synth, "worker")]["Properties"]
    assert worker["Environment"]["Variables"]["PUNCTUAL_DISPATCH_VISIBILITY_S"] == str(deployed)


def test_messages_outlive_every_retry_backoff(default_synth: Synth) -> None:
    # 20 retries with up to 12 h between them: 10 days on one message.
    assert resources.DISPATCH_QUEUE.retention_s > MAX_RETRIES * MAX_VISIBILITY_S
    for queue in default_synth.properties("AWS::SQS::Queue"):
        assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600  # the SQS maximum


# -- concurrency isolation ---------------------------------------------------------------------------


def test_api_reaper_and_workers_have_reserved_concurrency_within_the_quota(default_synth: Synth) -> None:
    def reserved(component: str) -> int:
        function = default_synth.template["Resources"][_function_id(default_synth, component)]
        value: int = function["Properties"]["ReservedConcurrentExecutions"]
        return value

    assert reserved("api") == DEFAULTS.api_reserved_concurrency
    assert reserved("reaper") == constants.REAPER_RESERVED_CONCURRENCY
    total = sum(reserved(c) for c in ("api", "scheduler", "worker", "reaper", "callback_authorizer"))
    # Everything fits the quota with Lambda's 100 unreserved; the small default's workers need less than is left.
    assert total <= DEFAULTS.lambda_concurrency_quota - constants.UNRESERVED_CONCURRENCY
    assert reserved("worker") == DEFAULTS.worker_reservation == DEFAULTS.worker_max_concurrency
    # a larger cap gets exactly what the quota leaves
    assert InfraConfig.from_values({"worker_max_concurrency": 1000}).worker_reservation == 1000 - 100 - 100 - 4 - 10 - 2


def test_a_raised_quota_lets_workers_reach_their_maximum(options_synth: Synth) -> None:
    function = options_synth.template["Resources"][_function_id(options_synth, "worker")]
    # provisioned mode (10-100 pollers): reserved for what 100 pollers drive, within the raised quota
    assert function["Properties"]["ReservedConcurrentExecutions"] == OPTIONS.worker_reservation == 100 * 10


def test_the_worker_event_source_never_exceeds_the_worker_reservation(any_synth: Synth) -> None:
    worker = _function_id(any_synth, "worker")
    reserved = any_synth.template["Resources"][worker]["Properties"]["ReservedConcurrentExecutions"]
    (source,) = [
        p for p in any_synth.properties("AWS::Lambda::EventSourceMapping") if p["FunctionName"] == {"Ref": worker}
    ]
    assert source.get("ScalingConfig", {}).get("MaximumConcurrency", reserved) <= reserved


def test_a_quota_too_small_for_the_reservations_is_refused() -> None:
    with pytest.raises(InfraConfigError, match="lambda_concurrency_quota"):
        InfraConfig.from_values({"lambda_concurrency_quota": 200, "api_reserved_concurrency": 100})


# -- warm throughput -----------------------------------------------------------------------------------


def test_warm_throughput_is_off_by_default(default_synth: Synth) -> None:
    for table in default_synth.properties("AWS::DynamoDB::Table"):
        assert "WarmThroughput" not in table
        for index in table.get("GlobalSecondaryIndexes", []):
            assert "WarmThroughput" not in index


def test_warm_throughput_flag_prewarms_the_listed_tables_and_indexes(options_synth: Synth) -> None:
    assert OPTIONS.warm_write_units == {"jobs.due": 12000, "runs": 8000}
    jobs = _table(options_synth, resources.JOBS)["Properties"]
    runs = _table(options_synth, resources.RUNS_WITHOUT_OPEN_INDEX)["Properties"]  # options: -c open_index=false
    due = next(g for g in jobs["GlobalSecondaryIndexes"] if g["IndexName"] == "due")
    assert due["WarmThroughput"] == {"WriteUnitsPerSecond": 12000}
    assert runs["WarmThroughput"] == {"ReadUnitsPerSecond": 15000, "WriteUnitsPerSecond": 8000}
    assert "WarmThroughput" not in jobs  # not listed: left at the on-demand start
    assert "WarmThroughput" not in _table(options_synth, resources.LEASES)["Properties"]


def test_warm_write_units_name_real_tables_and_indexes() -> None:
    assert set(constants.DESIGN_WARM_WRITE_UNITS) <= constants.warmable_resources()
    assert set(constants.DESIGN_WARM_READ_UNITS) <= constants.warmable_resources()
    with pytest.raises(InfraConfigError, match=r"warm_read_units: .*no such table or index: runs\.due"):
        InfraConfig.from_values({"warm_read_units": '{"runs.due": 1000}'})
    with pytest.raises(InfraConfigError, match=r"no such table or index: jobs\.open"):
        InfraConfig.from_values({"warm_throughput": True, "warm_write_units": '{"jobs.open": 40000}'})


# -- API Gateway ------------------------------------------------------------------------------------------


def test_access_log_has_the_caller_arn_errors_and_integration_latency(default_synth: Synth) -> None:
    (stage,) = default_synth.properties("AWS::ApiGateway::Stage")
    fields = json.loads(stage["AccessLogSetting"]["Format"])
    assert fields["userArn"] == "$context.identity.userArn"
    assert fields["errorMessage"] == "$context.error.message"
    assert fields["integrationErrorMessage"] == "$context.integrationErrorMessage"
    assert fields["integrationLatency"] == "$context.integrationLatency"
    assert {"requestId", "status", "httpMethod", "resourcePath", "ip"} <= set(fields)


def test_no_request_validator_that_validates_nothing(any_synth: Synth) -> None:
    assert not any_synth.resources("AWS::ApiGateway::RequestValidator")
    assert not any_synth.resources("AWS::ApiGateway::Model")


def test_the_region_wide_logging_role_is_set_only_when_asked(default_synth: Synth, options_synth: Synth) -> None:
    assert not default_synth.resources("AWS::ApiGateway::Account")
    (account,) = options_synth.resources("AWS::ApiGateway::Account").values()
    assert account["DeletionPolicy"] == "Retain"


# -- IAM -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("component", ["scheduler", "worker", "reaper"])
def test_no_role_is_granted_condition_checks_it_never_makes(default_synth: Synth, component: str) -> None:
    assert "dynamodb:ConditionCheckItem" not in _role_actions(default_synth, component)


def test_the_api_may_check_the_jobs_a_dependency_decision_read(default_synth: Synth) -> None:
    # engines/aws/edges.py: a transaction with a ConditionCheck per job the cycle check walked
    assert "dynamodb:ConditionCheckItem" in _role_actions(default_synth, "api")


def test_the_scheduler_cannot_delete_leases(default_synth: Synth) -> None:
    assert "dynamodb:DeleteItem" not in _role_actions(default_synth, "scheduler")
