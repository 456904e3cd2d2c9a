"""What the synthesized stack must contain: resources built from ``punctual.resources``, the
scheduler fleet, event sources, API authorization, alarms, dashboard and least-privilege IAM.

The app is synthesized once per session (``conftest.py``); each test reads the template.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import constants
from infra.config import InfraConfig
from punctual import resources
from punctual.config import EngineKind, Settings
from punctual.scheduling import invocation
from tests.infra.synth import Synth

pytestmark = pytest.mark.infra

DEFAULTS = InfraConfig()


# -- helpers ------------------------------------------------------------------------------------------


def _table(synth: Synth, definition: resources.TableDef) -> dict[str, Any]:
    """The AWS::DynamoDB::Table resource whose key schema is ``definition``'s."""
    wanted = [{"AttributeName": definition.partition.name, "KeyType": "HASH"}]
    if definition.sort:
        wanted.append({"AttributeName": definition.sort.name, "KeyType": "RANGE"})
    matches = [r for r in synth.resources("AWS::DynamoDB::Table").values() if r["Properties"]["KeySchema"] == wanted]
    indexes = {i.name for i in definition.indexes}
    matches = [
        r for r in matches if {g["IndexName"] for g in r["Properties"].get("GlobalSecondaryIndexes", [])} == indexes
    ]
    assert len(matches) == 1, f"one table for {definition.logical_name}"
    return matches[0]


def _logical_id(synth: Synth, resource_type: str, prefix: str) -> str:
    ids = [k for k in synth.resources(resource_type) if k.startswith(prefix)]
    assert len(ids) == 1, f"one {resource_type} under {prefix}: {ids}"
    return ids[0]


def _function_id(synth: Synth, component: str) -> str:
    if component == "callback_authorizer":
        return _logical_id(synth, "AWS::Lambda::Function", "ApiCallbackAuthorizer")
    prefix = {"api": "Api", "scheduler": "Scheduler", "worker": "Workers", "reaper": "Reaper"}[component]
    return _logical_id(synth, "AWS::Lambda::Function", f"{prefix}Handler")


def _role_actions(synth: Synth, component: str) -> dict[str, set[str]]:
    """Action -> resources (as JSON text) granted to ``component``'s role by every attached policy."""
    function = synth.template["Resources"][_function_id(synth, component)]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    granted: dict[str, set[str]] = {}
    for policy in synth.properties("AWS::IAM::Policy"):
        if {"Ref": role_id} not in policy["Roles"]:
            continue
        for statement in policy["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            for action in actions:
                granted.setdefault(action, set()).update(json.dumps(t, sort_keys=True) for t in targets)
    return granted


def _ref_text(logical_id: str, attribute: str = "Arn") -> str:
    return json.dumps({"Fn::GetAtt": [logical_id, attribute]}, sort_keys=True)


def _event_source(synth: Synth, queue_prefix: str) -> dict[str, Any]:
    queue_id = _logical_id(synth, "AWS::SQS::Queue", queue_prefix)
    sources = [
        p
        for p in synth.properties("AWS::Lambda::EventSourceMapping")
        if p["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    assert len(sources) == 1
    return sources[0]


# -- storage --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("definition", resources.TABLES, ids=lambda d: d.logical_name)
def test_tables_are_built_from_the_resource_definitions(default_synth: Synth, definition: resources.TableDef) -> None:
    table = _table(default_synth, definition)
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["TimeToLiveSpecification"] == {"AttributeName": definition.ttl_attribute, "Enabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    indexes = {g["IndexName"]: g for g in props.get("GlobalSecondaryIndexes", [])}
    for index in definition.indexes:
        keys = [{"AttributeName": index.partition.name, "KeyType": "HASH"}]
        if index.sort:
            keys.append({"AttributeName": index.sort.name, "KeyType": "RANGE"})
        assert indexes[index.name]["KeySchema"] == keys
        projection = indexes[index.name]["Projection"]
        assert projection["ProjectionType"] == index.projection
        assert projection.get("NonKeyAttributes", []) == list(index.non_key_attributes)


def test_jobs_due_index_is_sharded_and_carries_the_claim_projection(default_synth: Synth) -> None:
    props = _table(default_synth, resources.JOBS)["Properties"]
    due = next(g for g in props["GlobalSecondaryIndexes"] if g["IndexName"] == "due")
    assert due["KeySchema"] == [
        {"AttributeName": "due_shard", "KeyType": "HASH"},
        {"AttributeName": "next_run_at", "KeyType": "RANGE"},
    ]
    assert due["Projection"]["ProjectionType"] == "INCLUDE"
    assert {"owner", "schedule", "timezone", "jitter_s", "overlap"} <= set(due["Projection"]["NonKeyAttributes"])
    assert {"AttributeName": "due_shard", "AttributeType": "N"} in props["AttributeDefinitions"]
    by_owner = next(g for g in props["GlobalSecondaryIndexes"] if g["IndexName"] == "by_owner")
    assert by_owner["KeySchema"][0] == {"AttributeName": "owner", "KeyType": "HASH"}
    runs = _table(default_synth, resources.RUNS)["Properties"]
    assert runs["GlobalSecondaryIndexes"][0]["IndexName"] == "open"
    assert runs["GlobalSecondaryIndexes"][0]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_without_the_open_index_the_reaper_sweeps_the_runs_table(options_synth: Synth) -> None:
    _table(options_synth, resources.RUNS_WITHOUT_OPEN_INDEX)  # the runs keys, and no index
    granted = _role_actions(options_synth, "reaper")
    runs_id = _logical_id(options_synth, "AWS::DynamoDB::Table", "StorageRuns")
    assert json.dumps({"Fn::GetAtt": [runs_id, "Arn"]}) in granted["dynamodb:Scan"]
    assert not any("/index/open" in arn for arns in granted.values() for arn in arns)
    for function in options_synth.properties("AWS::Lambda::Function"):
        variables = function.get("Environment", {}).get("Variables", {})
        if "PUNCTUAL_ENGINE" in variables:
            assert (variables["PUNCTUAL_OPEN_INDEX"], variables["PUNCTUAL_SWEEP_PAGES"]) == ("false", "4")


def test_the_stats_counters_option_reaches_every_function(default_synth: Synth, options_synth: Synth) -> None:
    # -c stats_counters=false: Settings.stats_counters off in every function (6 write units per run)
    for synth, expected in ((default_synth, "true"), (options_synth, "false")):
        values = {
            f.get("Environment", {}).get("Variables", {}).get("PUNCTUAL_STATS_COUNTERS")
            for f in synth.properties("AWS::Lambda::Function")
            if "PUNCTUAL_ENGINE" in f.get("Environment", {}).get("Variables", {})
        }
        assert values == {expected}


def test_disposable_tables_are_destroyed_with_the_stack(options_synth: Synth) -> None:
    for table in options_synth.resources("AWS::DynamoDB::Table").values():
        assert table["DeletionPolicy"] == "Delete"
        assert table["Properties"]["DeletionProtectionEnabled"] is False


# -- dispatch -------------------------------------------------------------------------------------------


def test_dispatch_queue_redrives_to_the_dead_letter_queue(default_synth: Synth) -> None:
    dispatch_id = _logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0")
    dlq_id = _logical_id(default_synth, "AWS::SQS::Queue", "DispatchDispatchDlq")
    dispatch = default_synth.template["Resources"][dispatch_id]["Properties"]
    dlq = default_synth.template["Resources"][dlq_id]["Properties"]
    assert dispatch["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": resources.DISPATCH_QUEUE.max_receives,
    }
    assert dispatch["MessageRetentionPeriod"] == resources.DISPATCH_QUEUE.retention_s
    assert dlq["MessageRetentionPeriod"] == resources.DEAD_LETTER_QUEUE.retention_s
    # Lambda needs visibility >= function timeout; AWS recommends 6x for SQS event sources.
    assert dispatch["VisibilityTimeout"] == 6 * DEFAULTS.worker_timeout_s
    assert dlq["VisibilityTimeout"] == 6 * constants.REAPER_FUNCTION.timeout_s
    for queue in (dispatch, dlq):
        assert queue["SqsManagedSseEnabled"] is True


def test_queues_refuse_requests_without_tls(default_synth: Synth) -> None:
    policies = default_synth.properties("AWS::SQS::QueuePolicy")
    assert len(policies) == 2
    for policy in policies:
        (statement,) = policy["PolicyDocument"]["Statement"]
        assert statement["Effect"] == "Deny"
        assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# -- compute ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("component", ["api", "scheduler", "worker", "reaper"])
def test_functions_run_python_on_arm_with_tracing_and_both_layers(default_synth: Synth, component: str) -> None:
    props = default_synth.template["Resources"][_function_id(default_synth, component)]["Properties"]
    assert props["Runtime"] == constants.RUNTIME.name
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "handler.handler"
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert len(props["Layers"]) == 2
    env = props["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == constants.SERVICE_NAME
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Punctual"
    assert "LOG_LEVEL" in env


@pytest.mark.parametrize("component", ["api", "scheduler", "worker", "reaper"])
def test_function_environment_is_a_valid_punctual_configuration(default_synth: Synth, component: str) -> None:
    env = default_synth.template["Resources"][_function_id(default_synth, component)]["Properties"]["Environment"]
    # Deploy-time values (table names, queue URLs, ARNs) are CloudFormation references here.
    resolved = {k: v if isinstance(v, str) else _deploy_time(k) for k, v in env["Variables"].items()}
    punctual_vars = {k for k in resolved if k.startswith("PUNCTUAL_")}
    assert punctual_vars <= {f"PUNCTUAL_{name.upper()}" for name in Settings.model_fields}
    settings = Settings.from_env(resolved)
    assert settings.engine is EngineKind.AWS
    assert (settings.shards, settings.open_shards) == (DEFAULTS.shards, DEFAULTS.open_shards)
    assert settings.lookahead_ms == DEFAULTS.lookahead_ms
    assert settings.retention_days == DEFAULTS.retention_days
    for name in ("jobs_table", "runs_table", "leases_table", "dispatch_queue_url", "dead_letter_queue_url"):
        assert getattr(settings, name), name
    assert settings.alert_topic_arn


def _deploy_time(name: str) -> str:
    """A stand-in for a value CloudFormation resolves at deploy time (a URL where the setting is one)."""
    return f"https://deploy-time.example/{name.lower()}" if name.endswith("_URL") else f"deploy-time-{name.lower()}"


EVENT_TIME = "2026-12-01T12:34:00Z"  # what EventBridge puts in $.time of a scheduled event


def _scheduler_inputs(synth: Synth) -> list[dict[str, Any]]:
    """The event each scheduler target receives (its input template, given an event time), by instance."""
    scheduler = {"Fn::GetAtt": [_function_id(synth, "scheduler"), "Arn"]}
    inputs = []
    for rule in synth.properties("AWS::Events::Rule"):
        for target in rule["Targets"]:
            if target["Arn"] == scheduler:
                transformer = target["InputTransformer"]
                assert transformer["InputPathsMap"] == {"time": "$.time"}
                # EventBridge substitutes a string value with its quotes (a JSON string)
                inputs.append(json.loads(transformer["InputTemplate"].replace("<time>", json.dumps(EVENT_TIME))))
    return sorted(inputs, key=lambda i: i["instance"])


def test_scheduler_fleet_starts_k_instances_at_the_start_of_every_minute(default_synth: Synth) -> None:
    k = DEFAULTS.scheduler_instances
    scheduler = _function_id(default_synth, "scheduler")
    function = default_synth.template["Resources"][scheduler]["Properties"]
    assert function["Timeout"] == invocation.TIMEOUT_S == 110
    assert function["ReservedConcurrentExecutions"] == 2 * k
    rules = [
        r
        for r in default_synth.properties("AWS::Events::Rule")
        if any(t["Arn"] == {"Fn::GetAtt": [scheduler, "Arn"]} for t in r["Targets"])
    ]
    # cron(): second 0 of every minute, away from the claim window before the next minute's top
    # (a rate() rule fires at whatever second it was created)
    assert all(r["ScheduleExpression"] == "cron(* * * * ? *)" for r in rules)
    assert all(len(r["Targets"]) <= 5 for r in rules)  # EventBridge's per-rule quota
    # each instance gets its index and the event's scheduled time, which names its generation
    assert _scheduler_inputs(default_synth) == [{"instance": i, "instances": k, "time": EVENT_TIME} for i in range(k)]


def test_scheduler_fleet_size_follows_the_context(options_synth: Synth) -> None:
    assert [i["instance"] for i in _scheduler_inputs(options_synth)] == list(range(7))


def test_reaper_sweeps_every_minute_and_drains_the_dead_letter_queue(default_synth: Synth) -> None:
    reaper = _function_id(default_synth, "reaper")
    rules = [
        r
        for r in default_synth.properties("AWS::Events::Rule")
        if r["Targets"][0]["Arn"] == {"Fn::GetAtt": [reaper, "Arn"]}
    ]
    assert len(rules) == 1
    assert rules[0]["ScheduleExpression"] == "rate(1 minute)"
    source = _event_source(default_synth, "DispatchDispatchDlq")
    assert source["FunctionName"] == {"Ref": reaper}
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["ScalingConfig"] == {"MaximumConcurrency": 2}


def test_workers_consume_the_dispatch_queue_with_partial_batch_failures(default_synth: Synth) -> None:
    source = _event_source(default_synth, "Dispatch0")
    assert source["FunctionName"] == {"Ref": _function_id(default_synth, "worker")}
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["ScalingConfig"] == {"MaximumConcurrency": DEFAULTS.worker_event_source_max_concurrency}
    assert source["BatchSize"] == DEFAULTS.worker_batch_size
    assert source.get("MaximumBatchingWindowInSeconds", 0) == 0


def test_fargate_workers_run_the_worker_command_when_enabled(default_synth: Synth, options_synth: Synth) -> None:
    assert not default_synth.resources("AWS::ECS::Service")
    services = options_synth.properties("AWS::ECS::Service")
    assert len(services) == 2  # the dispatch queue's fleet, and the long-run queue's (test_operations)
    for service in services:
        assert service["LaunchType"] == "FARGATE"
        assert service["DesiredCount"] == DEFAULTS.fargate_worker_count
    for task in options_synth.properties("AWS::ECS::TaskDefinition"):
        (container,) = task["ContainerDefinitions"]
        assert container["Command"] == ["worker", "--max-in-flight", str(DEFAULTS.fargate_worker_concurrency)]
        assert container["LogConfiguration"]["LogDriver"] == "awslogs"
        assert task["RuntimePlatform"]["CpuArchitecture"] == "ARM64"
    assert not options_synth.resources("AWS::EC2::NatGateway")


def test_fargate_workers_scale_on_queue_depth_and_warm_up_before_the_hour(options_synth: Synth) -> None:
    (target,) = options_synth.properties("AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (DEFAULTS.fargate_worker_count, 8)
    actions = {a["ScheduledActionName"]: a for a in target["ScheduledActions"]}
    assert {a["Schedule"] for a in actions.values()} == {"cron(59 * * * ? *)", "cron(5 * * * ? *)"}
    assert sorted(a["ScalableTargetAction"]["MinCapacity"] for a in actions.values()) == [2, 6]
    policies = options_synth.properties("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert any(p.get("PolicyType") == "StepScaling" for p in policies)
    alarms = options_synth.properties("AWS::CloudWatch::Alarm")
    assert any(a.get("MetricName") == "ApproximateNumberOfMessagesVisible" for a in alarms)


def test_provisioned_pollers_and_large_batches_for_the_top_of_minute_burst(options_synth: Synth) -> None:
    worker = _function_id(options_synth, "worker")
    (source,) = [
        p for p in options_synth.properties("AWS::Lambda::EventSourceMapping") if p["FunctionName"] == {"Ref": worker}
    ]
    assert source["ProvisionedPollerConfig"] == {"MinimumPollers": 10, "MaximumPollers": 100}
    assert "ScalingConfig" not in source  # MaximumConcurrency does not apply in provisioned mode
    assert (source["BatchSize"], source["MaximumBatchingWindowInSeconds"]) == (100, 1)


# -- API ---------------------------------------------------------------------------------------------------


def test_every_api_method_requires_iam_authorization_but_the_two_callback_routes(default_synth: Synth) -> None:
    methods = default_synth.properties("AWS::ApiGateway::Method")
    # ANY on /, /{proxy+} and every resource on the callback routes' way; POST of the two callback routes
    callbacks = [m for m in methods if m["AuthorizationType"] != "AWS_IAM"]
    assert len(methods) == 9 and len(callbacks) == 2
    for method in methods:
        assert method["ApiKeyRequired"] is False
        assert "RequestValidatorId" not in method  # proxy methods have no models: the API validates
        assert method["Integration"]["Type"] == "AWS_PROXY"
    (authorizer,) = default_synth.properties("AWS::ApiGateway::Authorizer")
    assert authorizer["Type"] == "REQUEST"
    assert authorizer["IdentitySource"] == "method.request.header.X-Punctual-Callback-Token"
    assert authorizer["AuthorizerResultTtlInSeconds"] == 0  # a token must never outlive its attempt in a cache
    assert _function_id(default_synth, "callback_authorizer") in json.dumps(authorizer["AuthorizerUri"])
    for method in callbacks:
        assert (method["HttpMethod"], method["AuthorizationType"]) == ("POST", "CUSTOM")
        assert method["AuthorizerId"] == {"Ref": _logical_id(default_synth, "AWS::ApiGateway::Authorizer", "Api")}
    # the authorizer's role: its key (kms:GenerateMac on the signing key) and its logs, nothing else
    granted = _role_actions(default_synth, "callback_authorizer")
    xray = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    assert set(granted) == {"kms:GenerateMac", "logs:CreateLogStream", "logs:PutLogEvents", *xray}
    # the workers' calls carry the API's URL; the API's own environment does not (it would be a cycle)
    worker = default_synth.template["Resources"][_function_id(default_synth, "worker")]
    assert "PUNCTUAL_CALLBACK_BASE_URL" in worker["Properties"]["Environment"]["Variables"]
    (stage,) = default_synth.properties("AWS::ApiGateway::Stage")
    assert stage["TracingEnabled"] is True
    assert "DestinationArn" in stage["AccessLogSetting"]
    (settings,) = stage["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == DEFAULTS.api_throttle_rate
    assert settings["ThrottlingBurstLimit"] == DEFAULTS.api_throttle_burst
    assert settings["DataTraceEnabled"] is False


def test_usage_plan_option_requires_api_keys(options_synth: Synth) -> None:
    for method in options_synth.properties("AWS::ApiGateway::Method"):
        iam = method["AuthorizationType"] == "AWS_IAM"
        assert method["ApiKeyRequired"] is iam  # a callback's target has its token, not a tenant's key
    (plan,) = options_synth.properties("AWS::ApiGateway::UsagePlan")
    assert plan["Throttle"] == {
        "RateLimit": DEFAULTS.api_tenant_throttle_rate,
        "BurstLimit": DEFAULTS.api_tenant_throttle_burst,
    }


# -- observability -----------------------------------------------------------------------------------------


def _alarm(synth: Synth, metric_name: str, **dimensions: Any) -> list[dict[str, Any]]:
    found = []
    for alarm in synth.properties("AWS::CloudWatch::Alarm"):
        if alarm.get("MetricName") == metric_name and all(
            {"Name": k, "Value": v} in alarm.get("Dimensions", []) for k, v in dimensions.items()
        ):
            found.append(alarm)
    return found


def test_alarms_cover_dead_letters_lateness_errors_and_throttles(default_synth: Synth) -> None:
    ops_topic = _logical_id(default_synth, "AWS::SNS::Topic", "AlertsOpsAlarms")
    dlq = _logical_id(default_synth, "AWS::SQS::Queue", "DispatchDispatchDlq")
    (dlq_alarm,) = _alarm(
        default_synth, "ApproximateNumberOfMessagesVisible", QueueName={"Fn::GetAtt": [dlq, "QueueName"]}
    )
    assert dlq_alarm["Threshold"] == 0
    assert dlq_alarm["ComparisonOperator"] == "GreaterThanThreshold"
    (lateness,) = _alarm(default_synth, "DispatchLatenessMs", service="punctual")
    assert lateness["Namespace"] == "Punctual"
    assert lateness["ExtendedStatistic"] == "p99"
    assert lateness["Threshold"] == DEFAULTS.alarm_lateness_p99_ms
    for component in ("api", "scheduler", "worker", "reaper"):
        function = {"Ref": _function_id(default_synth, component)}
        assert len(_alarm(default_synth, "Throttles", FunctionName=function)) == 1, component
    table_alarms = [a for a in default_synth.properties("AWS::CloudWatch::Alarm") if "ThrottleEvents" in json.dumps(a)]
    assert len(table_alarms) == len(resources.TABLES)
    for name, resource in default_synth.resources("AWS::CloudWatch::Alarm").items():
        alarm = resource["Properties"]
        assert alarm["AlarmActions"] == [{"Ref": ops_topic}]
        # Silence is an all-clear, except where silence is the failure (tests/infra/test_operations.py,
        # tests/infra/test_liveness_alarms.py).
        silent_failure = any(s in name for s in ("SchedulerTicksFailing", "ClaimLagHigh", "ShardsUnowned"))
        if not silent_failure and ("Invocations" not in json.dumps(alarm) or "Errors" in json.dumps(alarm)):
            assert alarm["TreatMissingData"] == "notBreaching"


def test_dashboard_shows_runs_lateness_skew_queues_lambdas_and_tables(default_synth: Synth) -> None:
    (dashboard,) = default_synth.properties("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for metric in (
        constants.RUNS_DISPATCHED,
        constants.RUNS_SUCCEEDED,
        constants.RUNS_FAILED,
        constants.RUNS_DEAD,
        constants.DISPATCH_LATENESS_MS,
        constants.SCHEDULER_SKEW_MS,
        constants.CLAIM_CONFLICTS,
        constants.SHARDS_OWNED,
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "Errors",
        "Throttles",
        "WriteThrottleEvents",
        "ReadThrottleEvents",
    ):
        assert metric in body, metric
    assert '\\"stat\\":\\"p99\\"' in body
    assert '\\"stat\\":\\"p50\\"' in body
    assert "service" in body


def test_alarm_email_option_subscribes_the_ops_topic(options_synth: Synth) -> None:
    (subscription,) = options_synth.properties("AWS::SNS::Subscription")
    assert subscription == {**subscription, "Protocol": "email", "Endpoint": "ops@example.com"}


def test_topics_are_encrypted_and_refuse_requests_without_tls(default_synth: Synth) -> None:
    for topic in default_synth.properties("AWS::SNS::Topic"):
        assert "KmsMasterKeyId" in topic
    for policy in default_synth.properties("AWS::SNS::TopicPolicy"):
        (statement,) = policy["PolicyDocument"]["Statement"]
        assert statement["Effect"] == "Deny"
        assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# -- least privilege -------------------------------------------------------------------------------------


def test_no_policy_grants_wildcard_actions_or_resources_beyond_xray(any_synth: Synth) -> None:
    for policy in any_synth.properties("AWS::IAM::Policy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert all(not a.endswith("*") for a in actions), actions
            if statement["Resource"] == "*":
                assert set(actions) <= {
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "ecr:GetAuthorizationToken",
                }, actions


def test_no_function_can_scan_delete_items_or_manage_tables(default_synth: Synth) -> None:
    forbidden = {"dynamodb:Scan", "dynamodb:DeleteTable", "dynamodb:UpdateTable", "dynamodb:CreateTable"}
    for component in ("api", "scheduler", "worker", "reaper"):
        granted = _role_actions(default_synth, component)
        assert not forbidden & set(granted), component
        jobs = _ref_text(_logical_id(default_synth, "AWS::DynamoDB::Table", "StorageJobs"))
        runs = _ref_text(_logical_id(default_synth, "AWS::DynamoDB::Table", "StorageRuns"))
        assert not {jobs, runs} & granted.get("dynamodb:DeleteItem", set()), component


def test_scheduler_only_queries_the_due_index_and_only_sends_messages(default_synth: Synth) -> None:
    granted = _role_actions(default_synth, "scheduler")
    jobs_id = _logical_id(default_synth, "AWS::DynamoDB::Table", "StorageJobs")
    jobs = _ref_text(jobs_id)
    assert jobs not in granted.get("dynamodb:PutItem", set())
    assert jobs not in granted.get("dynamodb:GetItem", set())
    assert jobs in granted["dynamodb:UpdateItem"]
    index_grants = [r for r in granted["dynamodb:Query"] if "/index/" in r]
    assert index_grants == [json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [jobs_id, "Arn"]}, "/index/due"]]})]
    assert "sqs:SendMessage" in granted
    for action in ("sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sns:Publish"):
        assert action not in granted, action


def test_api_reads_and_writes_jobs_and_runs_and_never_deletes_leases(default_synth: Synth) -> None:
    granted = _role_actions(default_synth, "api")
    leases = _ref_text(_logical_id(default_synth, "AWS::DynamoDB::Table", "StorageLeases"))
    assert leases in granted["dynamodb:GetItem"]
    for write in ("dynamodb:PutItem", "dynamodb:UpdateItem"):  # dependency edges: put, retired by update + TTL
        assert leases in granted[write], write
    assert leases not in granted.get("dynamodb:DeleteItem", set())
    assert "sqs:SendMessage" in granted
    assert "sqs:GetQueueAttributes" in granted  # GET /stats: queue depth and dead letters
    assert "sqs:DeleteMessage" not in granted
    assert "sns:Publish" in granted  # a callback's completion may end a run dead or failed: its owner is alerted


def test_worker_consumes_the_dispatch_queue_and_calls_no_targets_by_default(default_synth: Synth) -> None:
    granted = _role_actions(default_synth, "worker")
    dispatch = _ref_text(_logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0"))
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert granted[action] == {dispatch}, action
    assert granted["sqs:SendMessage"] == {dispatch}  # runs released for dependent jobs, runs resent after waiting
    assert "sns:Publish" in granted
    for action in constants.TARGET_ACTIONS.values():
        if action != "sqs:SendMessage":
            assert action not in granted, action


def test_worker_target_permissions_are_exactly_the_listed_arns(options_synth: Synth) -> None:
    granted = _role_actions(options_synth, "worker")
    assert granted["lambda:InvokeFunction"] == {json.dumps("arn:aws:lambda:eu-west-1:123456789012:function:hook")}
    dispatch = _ref_text(_logical_id(options_synth, "AWS::SQS::Queue", "Dispatch0"))  # released runs
    long_run = _ref_text(_logical_id(options_synth, "AWS::SQS::Queue", "DispatchDispatchLong"))  # released long runs
    assert granted["sqs:SendMessage"] == {
        json.dumps("arn:aws:sqs:eu-west-1:123456789012:results-*"),
        dispatch,
        long_run,
    }
    assert granted["states:StartExecution"] == {json.dumps("arn:aws:states:eu-west-1:123456789012:stateMachine:flow")}
    assert granted["events:PutEvents"] == {json.dumps("arn:aws:events:eu-west-1:123456789012:event-bus/default")}


def test_reaper_queries_the_open_index_consumes_dead_letters_and_alerts(default_synth: Synth) -> None:
    granted = _role_actions(default_synth, "reaper")
    runs_id = _logical_id(default_synth, "AWS::DynamoDB::Table", "StorageRuns")
    assert (
        json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [runs_id, "Arn"]}, "/index/open"]]}) in granted["dynamodb:Query"]
    )
    dlq = _ref_text(_logical_id(default_synth, "AWS::SQS::Queue", "DispatchDispatchDlq"))
    assert granted["sqs:ReceiveMessage"] == {dlq}
    assert "sqs:SendMessage" in granted
    assert "sns:Publish" in granted
    assert "kms:GenerateDataKey" in granted


def test_fair_queue_noisy_tenants_on_the_dashboard_and_alarmed(default_synth: Synth) -> None:
    # Given SQS fair queues (MessageGroupId = owner): the noisy groups and the quiet groups' backlog
    (dashboard,) = default_synth.properties("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for metric in (
        "ApproximateNumberOfNoisyGroups",
        "ApproximateNumberOfMessagesVisibleInQuietGroups",
        "ApproximateAgeOfOldestMessageInQuietGroups",
    ):
        assert metric in body, metric
    dispatch = _logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0")
    (noisy,) = _alarm(
        default_synth, "ApproximateNumberOfNoisyGroups", QueueName={"Fn::GetAtt": [dispatch, "QueueName"]}
    )
    assert noisy["Threshold"] == 0 and noisy["ComparisonOperator"] == "GreaterThanThreshold"
    assert noisy["EvaluationPeriods"] == constants.NOISY_TENANT_ALARM_MINUTES == noisy["DatapointsToAlarm"]


def test_admin_routes_answer_only_the_tenant_admin_role(default_synth: Synth) -> None:
    role_id = _logical_id(default_synth, "AWS::IAM::Role", "ApiTenantAdmin")
    api_fn = next(
        f
        for f in default_synth.properties("AWS::Lambda::Function")
        if "PUNCTUAL_ADMIN_PRINCIPALS" in f.get("Environment", {}).get("Variables", {})
    )
    assert api_fn["Environment"]["Variables"]["PUNCTUAL_ADMIN_PRINCIPALS"] == {"Fn::GetAtt": [role_id, "Arn"]}
    policies = [p for p in default_synth.properties("AWS::IAM::Policy") if {"Ref": role_id} in p.get("Roles", [])]
    statements = [s for p in policies for s in p["PolicyDocument"]["Statement"]]
    assert [s["Action"] for s in statements] == ["execute-api:Invoke"]
    assert "/admin/*" in json.dumps(statements[0]["Resource"])
