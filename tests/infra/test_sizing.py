"""The plan's stack is the stack that runs (issue 27): the deploy line ``punctual capacity`` prints,
synthesized, has the plan's reserved concurrency, pollers, scheduler fleet and warm throughput,
and ``punctual burst-model`` on it gives the plan's start lateness. Also: what a plain deploy
carries (``infra.sizing``), the dead-letter limit derived from the retry policy, and WAF.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from infra import app as infra_app
from infra import sizing
from infra.config import InfraConfig, InfraConfigError
from infra.constructs.dispatch import check_dead_letter_retention
from punctual import resources
from punctual.capacity import CapacityPlan, Load, plan_capacity
from punctual.capacity.fleet import instance_claim_rate
from punctual.capacity.plan import deployment
from punctual.capacity.simulate import simulate
from punctual.capacity.synth import read_template
from punctual.cli import main
from punctual.execution.options import ExecutionOptions
from tests.infra.synth import OPTIONS_CONTEXT, PLAN_ARGS, Synth, deploy_line_context, printed_deploy_line
from tests.infra.test_stack import _function_id, _logical_id

pytestmark = pytest.mark.infra

MISSION = Load(jobs=10_000_000, peak_runs_per_second=20_000)
DEFAULT_LOAD = Load(
    jobs=sizing.DEFAULT_JOBS, peak_runs_per_second=sizing.DEFAULT_PEAK_RUNS_PER_SECOND, **sizing.DEFAULT_CHOICES
)
# the Lambda tier at the mission's load (provisioned pollers): what the plan stack was before the Fargate tier
MISSION_ON_LAMBDA = Load(jobs=10_000_000, peak_runs_per_second=20_000, worker="lambda", dynamodb="on-demand")


@pytest.fixture(scope="module")
def mission() -> CapacityPlan:
    return plan_capacity(MISSION)


@pytest.fixture(scope="module")
def on_lambda() -> CapacityPlan:
    return plan_capacity(MISSION_ON_LAMBDA)


def _worker_event_source(synth: Synth) -> dict[str, Any]:
    worker = _function_id(synth, "worker")
    (source,) = [p for p in synth.properties("AWS::Lambda::EventSourceMapping") if p["FunctionName"] == {"Ref": worker}]
    return source


def _resources(synth: Synth, kind: str) -> dict[str, dict[str, Any]]:
    return {k: r.get("Properties", {}) for k, r in synth.resources(kind).items()}


def _function(synth: Synth, component: str) -> dict[str, Any]:
    properties: dict[str, Any] = synth.template["Resources"][_function_id(synth, component)]["Properties"]
    return properties


# -- the plan stack: what punctual capacity prints is what synthesizes --------------------------------


def test_the_printed_deploy_line_is_the_plans_context(mission: CapacityPlan) -> None:
    context = deploy_line_context(printed_deploy_line(*PLAN_ARGS))
    assert set(context) == set(mission.context)
    # the recommended tier and capacity mode are in the line (issue 30)
    assert (context["fargate_workers"], context["lambda_workers"]) == ("true", "false")
    assert context["dynamodb_billing"] == "provisioned"
    assert context["fargate_worker_count"] == str(mission.workers.fargate_tasks)


def test_the_plan_stack_deploys_the_recommended_worker_tier(plan_synth: Synth, mission: CapacityPlan) -> None:
    # Given the stack of the plan's deploy line: the Fargate service alone consumes the dispatch queue
    w = mission.workers
    assert (mission.recommendation["tier"], w.tier) == ("fargate", "fargate")
    assert _worker_event_source(plan_synth)["Enabled"] is False  # deployed disabled: a switch back, not a consumer
    assert _function(plan_synth, "worker")["ReservedConcurrentExecutions"] == 2
    services = {k: p for k, p in _resources(plan_synth, "AWS::ECS::Service").items()}
    (service_id,) = [k for k in services if "LongRun" not in k]
    (long_run,) = [p for k, p in services.items() if "LongRun" in k]
    assert (services[service_id]["DesiredCount"], long_run["DesiredCount"]) == (w.fargate_tasks, 1)
    (target,) = [
        p
        for p in plan_synth.properties("AWS::ApplicationAutoScaling::ScalableTarget")
        if service_id in json.dumps(p["ResourceId"])
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (w.fargate_tasks, 2 * w.fargate_tasks)
    # it scales on the queue's visible messages (a step policy on ApproximateNumberOfMessagesVisible)
    assert "ApproximateNumberOfMessagesVisible" in json.dumps(plan_synth.properties("AWS::CloudWatch::Alarm"))
    # its tasks and the scheduler lease and dispatch runs 10 s ahead; each task holds the plan's runs in flight
    (task,) = [p for k, p in _resources(plan_synth, "AWS::ECS::TaskDefinition").items() if "LongRun" not in k]
    (container,) = task["ContainerDefinitions"]
    assert container["Command"] == ["worker", "--max-in-flight", str(w.fargate_in_flight_per_task)]
    env = {e["Name"]: e["Value"] for e in container["Environment"] if isinstance(e.get("Value"), str)}
    assert env["PUNCTUAL_PRELEASE_S"] == "10"
    assert _function(plan_synth, "scheduler")["Environment"]["Variables"]["PUNCTUAL_PRELEASE_S"] == "10"


def test_the_plan_stack_deploys_the_recommended_capacity_mode(plan_synth: Synth, mission: CapacityPlan) -> None:
    mode = next(m for m in mission.dynamodb_modes if m.name == "provisioned")
    assert mission.recommendation["dynamodb"] == "provisioned"
    planned = {t.name: (t.read_units, t.write_units) for t in mode.tables}
    d = read_template(plan_synth.template_path)
    assert d.provisioned_writes == {name: units[1] for name, units in planned.items()}
    # each table and index in provisioned mode, with auto scaling from the planned units up to 4x at 70 %
    targets = plan_synth.properties("AWS::ApplicationAutoScaling::ScalableTarget")
    dynamo = [t for t in targets if t["ServiceNamespace"] == "dynamodb"]
    assert len(dynamo) == 2 * len(planned)  # reads and writes of 3 tables and 3 indexes
    write_minimums = sorted(t["MinCapacity"] for t in dynamo if "WriteCapacityUnits" in t["ScalableDimension"])
    assert write_minimums == sorted(units[1] for units in planned.values())
    assert all(t["MaxCapacity"] == 4 * t["MinCapacity"] for t in dynamo)
    policies = [
        p
        for p in plan_synth.properties("AWS::ApplicationAutoScaling::ScalingPolicy")
        if "TargetTrackingScalingPolicyConfiguration" in p
    ]
    assert {p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies} == {70}
    # X-Ray sampling set: the API stage's rule at the rate the plan prices
    (rule,) = plan_synth.properties("AWS::XRay::SamplingRule")
    assert (rule["SamplingRule"]["ReservoirSize"], rule["SamplingRule"]["FixedRate"]) == (1, 0.01)


def test_the_lambda_plan_stack_reserves_what_the_plan_claims(plan_lambda_synth: Synth, on_lambda: CapacityPlan) -> None:
    # Given the stack of the plan's deploy line on Lambda workers, its worker has the plan's figures:
    w = on_lambda.workers
    assert _function(plan_lambda_synth, "worker")["ReservedConcurrentExecutions"] == w.reserved_concurrency == 3_503
    source = _worker_event_source(plan_lambda_synth)
    assert source["ProvisionedPollerConfig"] == {"MinimumPollers": w.min_pollers, "MaximumPollers": w.max_pollers}
    assert "ScalingConfig" not in source and source.get("Enabled", True) is True
    # 351 pollers drive up to 3,510 invocations; the reservation caps them at 3,503, as the plan models
    assert w.max_concurrency == min(w.max_pollers * 10, w.reserved_concurrency) == 3_503
    assert not plan_lambda_synth.resources("AWS::ECS::Service")
    assert all("ProvisionedThroughput" not in p for p in plan_lambda_synth.properties("AWS::DynamoDB::Table"))


def test_the_plan_stack_has_the_plans_scheduler_fleet(plan_synth: Synth, mission: CapacityPlan) -> None:
    s = mission.scheduling
    d = read_template(plan_synth.template_path)
    assert (d.shards, d.scheduler_instances, d.lookahead_ms) == (s.due_shards, s.scheduler_instances, s.lookahead_ms)
    assert d.scheduler_memory_mb == s.scheduler_memory_mb == _function(plan_synth, "scheduler")["MemorySize"]
    # instance i owns shard % K == i: the busiest owns ceil(shards / K), and the fleet still claims in time
    assert d.shards_per_instance == s.shards_per_instance == math.ceil(s.due_shards / s.scheduler_instances)
    busiest = s.shards_per_instance * s.claim_rate_needed / s.due_shards
    assert busiest <= instance_claim_rate(s.shards_per_instance, s.scheduler_memory_mb, utilization=0.7)
    assert s.claim_capacity >= s.claim_rate_needed
    scheduler = _function(plan_synth, "scheduler")
    assert scheduler["ReservedConcurrentExecutions"] == 2 * s.scheduler_instances


def test_the_plan_stack_prewarms_reads_and_writes(plan_synth: Synth, mission: CapacityPlan) -> None:
    tables = {
        tuple(k["AttributeName"] for k in p["KeySchema"]): p for p in plan_synth.properties("AWS::DynamoDB::Table")
    }
    by_name = {t.name: t for t in mission.tables}
    # the worker reads 20,000 jobs/s, 2 read units each (head and spec): 40,000 RRU/s, above one partition's
    # 3,000 (the 953 RCU provisioned)
    assert tables["job_id",]["WarmThroughput"] == {"ReadUnitsPerSecond": by_name["jobs"].warm_reads}
    assert by_name["jobs"].warm_reads == 48_000
    assert tables["job_id",]["ProvisionedThroughput"]["ReadCapacityUnits"] == 953
    # the runs table takes 40,764 writes/s at the burst, on credits: partitions for it
    assert tables["job_id", "scheduled_at"]["WarmThroughput"]["WriteUnitsPerSecond"] == by_name["runs"].warm_writes


def test_burst_model_on_the_plan_stack_gives_the_plans_start_lateness(
    plan_synth: Synth, mission: CapacityPlan, capsys: pytest.CaptureFixture[str]
) -> None:
    # The template read back is the deployment the plan modelled, field for field ...
    d = read_template(plan_synth.template_path)
    assert d == deployment(MISSION, mission)
    assert (d.lambda_workers, d.fargate_tasks, d.prelease_s) == (False, mission.workers.fargate_tasks, 10)
    # ... so the burst model on it gives the plan's lateness, through the CLI as well
    first, steady = (simulate(d.burst(20_000, steady=s)).lateness_ms for s in (False, True))
    assert (first, steady) == (mission.lateness.first_burst, mission.lateness.steady)
    assert main(["burst-model", "--cdk-out", str(plan_synth.template_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_burst"]["lateness_ms"] == mission.lateness.first_burst
    assert out["steady"]["lateness_ms"] == mission.lateness.steady
    assert out["steady"]["lateness_ms"]["p99"] <= 1_000
    assert (out["deployment"]["fargate_tasks"], out["deployment"]["shards_per_instance"]) == (
        mission.workers.fargate_tasks,
        mission.scheduling.shards_per_instance,
    )


def test_burst_model_on_the_lambda_plan_stack_gives_its_plans_lateness(
    plan_lambda_synth: Synth, on_lambda: CapacityPlan
) -> None:
    d = read_template(plan_lambda_synth.template_path)
    assert d == deployment(MISSION_ON_LAMBDA, on_lambda)
    assert d.worker_concurrency == 3_503
    first, steady = (simulate(d.burst(20_000, steady=s)).lateness_ms for s in (False, True))
    assert (first, steady) == (on_lambda.lateness.first_burst, on_lambda.lateness.steady)


def test_the_old_cap_would_have_been_visible_to_the_burst_model(plan_lambda_synth: Synth) -> None:
    # What the stack did before: 1,000 reserved beside 351 pollers. The model now sees that cap.
    d = read_template(plan_lambda_synth.template_path)
    capped = replace(d, reserved_concurrency=1_000, max_concurrency=1_000)
    assert capped.worker_concurrency == 1_000
    slow = simulate(capped.burst(20_000, steady=True))
    assert slow.lateness_ms["p99"] > simulate(d.burst(20_000, steady=True)).lateness_ms["p99"] + 1_000


# -- reserved concurrency as a setting of its own ---------------------------------------------------------


def test_provisioned_mode_reserves_what_the_pollers_drive_by_default() -> None:
    config = InfraConfig.from_values(
        {"worker_min_pollers": 10, "worker_max_pollers": 300, "lambda_concurrency_quota": 5000}
    )
    assert (config.worker_reservation, config.worker_event_source_max_concurrency) == (3_000, None)
    # never more than the quota leaves (5,000 - 100 unreserved - 100 API - 4 reaper - 10 callback authorizer
    # - 2 scheduler)
    small = InfraConfig.from_values(
        {"worker_min_pollers": 10, "worker_max_pollers": 600, "lambda_concurrency_quota": 5000}
    )
    assert small.worker_reservation == 5_000 - 100 - 100 - 4 - 10 - 2


def test_an_explicit_reservation_is_kept_or_refused_by_name() -> None:
    given = InfraConfig.from_values(
        {
            "worker_min_pollers": 200,
            "worker_max_pollers": 351,
            "worker_reserved_concurrency": 3503,
            "lambda_concurrency_quota": 4000,
            "scheduler_instances": 16,
            "shards": 32,
        }
    )
    assert given.worker_reservation == 3_503
    with pytest.raises(InfraConfigError, match=r"reserved_concurrency \(3503\) is more than lambda_concurrency_quota"):
        InfraConfig.from_values({"worker_reserved_concurrency": 3503})
    # standard mode: the event source never asks for more than the reservation
    standard = InfraConfig.from_values({"worker_max_concurrency": 500, "worker_reserved_concurrency": 300})
    assert (standard.worker_reservation, standard.worker_event_source_max_concurrency) == (300, 300)


# -- a plain deploy: the small default, said plainly -----------------------------------------------------

SIZED = (
    "shards",
    "scheduler_memory_mb",
    "open_shards",
    "scheduler_instances",
    "lookahead_ms",
    "retention_days",
    "worker_batch_size",
    "worker_max_concurrency",
    "worker_reservation",
    "worker_min_pollers",
    "warm_throughput",
    "lambda_concurrency_quota",
    "stats_counters",
    "open_index",
)


def test_the_defaults_are_the_plan_of_the_default_load() -> None:
    plan = plan_capacity(DEFAULT_LOAD)
    planned, default = InfraConfig.from_values(plan.context), InfraConfig()
    assert {k: getattr(default, k) for k in SIZED} == {k: getattr(planned, k) for k in SIZED}
    # and that load needs nothing raised or pre-warmed: a plain deploy works in a fresh account
    assert plan.warnings == [] and plan.lateness.met
    assert plan.workers.mode == "standard" and plan.workers.account_concurrency_needed == 1_000
    assert (planned.dynamodb_billing, planned.lambda_workers) == ("on-demand", True)  # no Docker, no idle cost


def test_a_plain_synth_says_what_it_deploys_and_who_hears_the_alarms() -> None:
    plain = sizing.notices(InfraConfig(), given={"cli-telemetry"})
    assert len(plain) == 2
    assert "small default" in plain[0]
    assert (
        "punctual capacity --jobs 1000000 --peak-runs-per-second 1000 --worker lambda --dynamodb on-demand" in plain[0]
    )
    assert "punctual capacity --jobs N --peak-runs-per-second R" in plain[0]
    assert "alarm_email" in plain[1] and "nobody is subscribed" in plain[1]
    sized = InfraConfig.from_values({"shards": 32, "alarm_email": "ops@example.com"})
    assert sizing.notices(sized, given={"shards", "alarm_email"}) == []


def test_the_app_prints_the_notices_and_still_synthesizes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    synthesized: list[bool] = []

    class Node:
        def get_all_context(self, defaults: object = None) -> dict[str, object]:
            return {"cli-telemetry": False}

    class App:
        node = Node()

        def synth(self) -> None:
            synthesized.append(True)

    monkeypatch.setattr(infra_app, "build_app", App)
    assert infra_app.main() == 0 and synthesized == [True]
    err = capsys.readouterr().err
    assert err.count("punctual infra: notice:") == 2 and "punctual capacity" in err


# -- dead letters: the limit follows the retry policy ---------------------------------------------------


def test_the_dead_letter_limit_is_derived_from_the_retry_policy(default_synth: Synth) -> None:
    # 21 attempts x 4 receives = 84, + up to 10 receives waiting on tenant limits = 94 -> 100
    assert resources.WORST_CASE_RECEIVES == 84
    assert resources.MAX_RECEIVES == 100
    assert resources.WORST_CASE_RECEIVES + resources.TENANT_WAIT_RECEIVES <= resources.MAX_RECEIVES
    # the worker resends a waiting message fresh no later than the bound assumes
    assert ExecutionOptions().requeue_after_receives <= resources.TENANT_WAIT_RECEIVES
    queues = default_synth.resources("AWS::SQS::Queue")
    dispatch = queues[_logical_id(default_synth, "AWS::SQS::Queue", "Dispatch0")]["Properties"]
    dead = queues[_logical_id(default_synth, "AWS::SQS::Queue", "DispatchDispatchDlq")]["Properties"]
    assert dispatch["RedrivePolicy"]["maxReceiveCount"] == 100
    assert dead["MessageRetentionPeriod"] >= dispatch["MessageRetentionPeriod"]


def test_a_dead_letter_queue_that_forgets_sooner_than_its_source_is_refused() -> None:
    short = resources.QueueDef(logical_name="short-dlq", visibility_timeout_s=60, retention_s=4 * 24 * 3600)
    with pytest.raises(ValueError, match="short-dlq keeps messages"):
        check_dead_letter_retention(resources.DISPATCH_QUEUE, short)
    check_dead_letter_retention(resources.DISPATCH_QUEUE, resources.DEAD_LETTER_QUEUE)


# -- WAF -----------------------------------------------------------------------------------------------


def test_a_web_acl_is_associated_with_the_api_stage_when_given(options_synth: Synth, default_synth: Synth) -> None:
    assert not default_synth.resources("AWS::WAFv2::WebACLAssociation")
    (association,) = options_synth.properties("AWS::WAFv2::WebACLAssociation")
    assert association["WebACLArn"] == OPTIONS_CONTEXT["web_acl_arn"]
    stage = _logical_id(options_synth, "AWS::ApiGateway::Stage", "ApiRestApiDeploymentStage")
    assert stage in json.dumps(association["ResourceArn"])


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:wafv2:us-east-1:123456789012:global/webacl/edge/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",  # CloudFront's
        "arn:aws:waf::123456789012:webacl/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",  # WAF classic
    ],
)
def test_only_a_regional_wafv2_web_acl_is_accepted(arn: str) -> None:
    with pytest.raises(InfraConfigError, match="web_acl_arn"):
        InfraConfig.from_values({"web_acl_arn": arn})
