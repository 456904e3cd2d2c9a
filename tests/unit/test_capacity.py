"""punctual capacity: the model's arithmetic on three loads, its warnings, its cost and its CLI.

Each expected figure is derived by hand in the comment next to it from docs/capacity.md's
formulas and constants, so a change of a constant or a formula shows up here as a diff to explain.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from punctual.capacity import CapacityPlan, Load, monthly_cost, plan_capacity, report
from punctual.capacity.constants import CONSTANTS
from punctual.capacity.counts import per_run
from punctual.capacity.simulate import BurstSettings, simulate
from punctual.cli import main

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"

SMALL = Load(jobs=10_000, peak_runs_per_second=50)
MISSION = Load(jobs=10_000_000, peak_runs_per_second=20_000)
TEN_X = Load(jobs=100_000_000, peak_runs_per_second=200_000)


@functools.cache
def plan(load: Load) -> CapacityPlan:
    return plan_capacity(load)  # a plan runs the burst model a few times: compute each once


def variant(load: Load, **changes: object) -> Load:
    return Load.model_validate(load.model_dump() | changes)


def codes(load: Load) -> set[str]:
    return {w.code for w in plan(load).warnings}


def tables(load: Load) -> dict[str, tuple[float, float, int, int]]:
    return {t.name: (t.peak_wru_per_s, t.peak_rru_per_s, t.warm_writes, t.quota_wru_needed) for t in plan(load).tables}


def test_small_load_needs_nothing_raised() -> None:
    small = plan(SMALL)
    s = small.scheduling
    # claim rate = R * S / (S - 1 + lookahead_s) = 50 / 5 = 10 runs/s: one instance (300/s each)
    assert (s.claim_rate_needed, s.scheduler_instances, s.lookahead_ms) == (10.0, 1, 5_000)
    # 2 due-index units per claim = 20 WRU/s: the 16-shard minimum; 1.25 WRU/s per shard
    assert (s.due_shards, s.due_shard_wru_per_s) == (16, 1.2)
    # open index: inserts at the claim rate + deletes at the run rate = 60 WRU/s over 16 shards
    assert (s.open_shards, s.open_shard_wru_per_s) == (16, 3.8)
    # runs table: insert 10 + lease 50 + finish 50
    assert tables(SMALL)["runs"] == (110.0, 0.0, 0, 0)
    assert small.workers.mode == "standard"
    assert small.workers.account_concurrency_needed == 1_000  # within the default quota
    assert small.lateness.met
    assert codes(SMALL) == set()  # no quota raise, no warning


def test_mission_load_sizes_the_design_target() -> None:
    mission = plan(MISSION)
    s, w = mission.scheduling, mission.workers
    # 20,000 runs in one second, 5 s lookahead: 4,000 claims/s, ceil(4,000 / 300) = 14 instances
    assert (s.claim_rate_needed, s.scheduler_instances) == (4_000.0, 14)
    # due index 8,000 WRU/s; a shard may use a third of 1,000: >= 24 shards -> 32, each 25 % of a partition
    assert (s.due_shards, s.due_shard_utilization) == (32, 0.25)
    # open index 4,000 + 20,000 = 24,000 WRU/s -> >= 72 shards -> 128, each 19 %
    assert (s.open_shards, s.open_shard_utilization) == (128, 0.188)
    t = tables(MISSION)
    # jobs: 4,000 advances; 20,000 reads (the worker reads the job of every run)
    assert t["jobs"] == (4_000.0, 20_000.0, 5_000, 0)
    assert t["jobs.due"][0] == 8_000.0 and t["jobs.due"][2] == 10_000
    # runs: insert 4,000 + lease 20,000 + finish 20,000 = 44,000; x1.2 = 52,800 -> pre-warm and quota 53,000
    assert t["runs"] == (44_000.0, 0.0, 53_000, 53_000)
    assert t["runs.open"] == (24_000.0, 1.1, 29_000, 0)  # reaper: 128 queries a minute
    # in flight: 20,000 x (10/11 s hold + 0.5 s target + 0.05 s) = 29,182, under the 120,000 limit
    assert w.in_flight_runs == 29_182
    # 2,000 batches/s x 1.459 s = 2,919 concurrent; x1.2 = 3,503 > 1,000: provisioned pollers
    assert (w.concurrency, w.reserved_concurrency, w.mode) == (2_919, 3_503, "provisioned")
    assert (w.min_pollers, w.max_pollers) == (200, 351)  # 200 is the largest minimum
    # 3,503 + 2 x 14 scheduler + 204 (100 unreserved, API 100, reaper 4) = 3,735 -> request 4,000
    assert w.account_concurrency_needed == 4_000
    assert mission.lateness.met and mission.lateness.steady["p99"] <= 1_000
    assert mission.lateness.first_burst["p99"] > mission.lateness.steady["p99"]  # cold pollers and environments
    assert codes(MISSION) == {
        "ddb_warm_throughput",
        "ddb_table_quota",
        "lambda_min_pollers",
        "lambda_account_concurrency",
        "stats_counters",  # dropped: 20,000 finishes/s of one owner would exceed its 8 counter items
    }
    assert mission.per_run["stats_counters"] is False and mission.per_run["write_units_total"] == 8


def test_ten_times_the_mission_hits_hard_limits() -> None:
    ten_x = plan(TEN_X)
    s, w = ten_x.scheduling, ten_x.workers
    # 200,000 / 5 s = 40,000 claims/s would need 134 instances (> 100): the lookahead grows to 10 s
    assert (s.lookahead_ms, s.claim_rate_needed, s.scheduler_instances) == (10_000, 20_000.0, 67)
    assert w.in_flight_runs == 291_819  # above the 120,000 in-flight limit of one queue
    assert w.concurrency == 20_000  # the provisioned-mode ceiling
    assert not ten_x.lateness.met
    assert codes(TEN_X) == {
        "ddb_warm_throughput",
        "ddb_table_quota",
        "sqs_in_flight",
        "lambda_min_pollers",
        "lambda_poller_ceiling",
        "lambda_account_concurrency",
        "target_latency",
        "stats_counters",
    }
    quota = {t.name: t.quota_wru_needed for t in ten_x.tables}
    assert quota["runs"] == 504_000  # (20,000 + 2 x 200,000) x 1.2


def test_fargate_workers_are_sized_by_cpu() -> None:
    fargate = plan(variant(MISSION, worker="fargate"))
    # 20,000 runs/s at 350 runs/s per vCPU: 58 one-vCPU tasks, 29,182 / 58 in flight each
    assert (fargate.workers.fargate_tasks, fargate.workers.fargate_in_flight_per_task) == (58, 504)
    assert fargate.context["fargate_workers"] is True and fargate.context["fargate_worker_count"] == 58


def test_dropping_the_open_index_saves_two_units_per_run() -> None:
    lean = plan(variant(MISSION, open_index=False))
    assert lean.per_run["write_units_total"] == 6  # the design budget: no open index, no stats counters
    assert lean.scheduling.open_shards == 0
    assert "runs.open" not in {t.name for t in lean.tables}
    assert per_run(open_index=True).writes.total - per_run(open_index=False).writes.total == 2


def test_mission_cost_lines_follow_the_counts_and_prices() -> None:
    mission = plan(MISSION)
    cost = monthly_cost(MISSION, mission)
    runs = MISSION.runs_per_month
    assert runs == 20_000 * 43_800  # one burst a minute, 730 hours
    by_item = {line.item.split(":")[0]: line.monthly_usd for line in cost.lines}
    assert by_item["writes"] == round(8 * runs * 0.625 / 1e6, 2)  # 4,380.00 (no stats counters at this load)
    assert by_item["scheduler fleet"] == round(14 * 1.769 * 730 * 3600 * 0.0000133334, 2)
    assert cost.monthly_usd == round(sum(line.monthly_usd for line in cost.lines if line.verified), 2)
    assert cost.per_million_runs_usd == round(cost.monthly_usd / (runs / 1e6), 3)
    assert set(cost.by_service()) == {"DynamoDB", "SQS", "Lambda", "API Gateway", "CloudWatch", "KMS"}
    ebs = cost.eventbridge_scheduler
    assert ebs["invocations_usd"] == round(runs / 1e6 * 1.00, 2)
    assert ebs["burst_drain_s_at_default_quota"] == 20.0  # 20,000 runs at 1,000 invocations/s
    assert ebs["precision_s"] == 60 and ebs["run_history"] is False
    assert "differ" in monthly_cost(variant(MISSION, region="eu-west-1"), mission).region_note


def test_deploy_line_carries_the_plan() -> None:
    result = report(MISSION)
    line = result["deploy_command"]
    assert line.startswith("npx cdk deploy --no-notices -c shards=32 -c open_shards=128 -c scheduler_instances=14")
    assert "-c lambda_concurrency_quota=4000" in line
    # above 1,000 concurrent workers the plan asks the stack for provisioned pollers, not a cap
    assert "-c worker_min_pollers=200 -c worker_max_pollers=351" in line
    assert "worker_max_concurrency" not in line
    assert "-c stats_counters=false" in line  # above 8,000 runs/s per owner the plan drops the counters
    # leases: 11 shard renewals/s need no pre-warming once the counters are dropped
    assert """'warm_write_units={"jobs":5000,"jobs.due":10000,"runs":53000,"runs.open":29000}'""" in line


def test_stats_counters_are_kept_while_one_owner_fits_them() -> None:
    # small load: 50 finishes/s fit 8 counter items (8,000 writes/s); 1 unit per run, no context entry
    small = plan(SMALL)
    assert (small.per_run["stats_counters"], small.per_run["write_units_total"]) == (True, 9)
    assert "stats_counters" not in small.context
    assert tables(SMALL)["leases"][0] == pytest.approx(16 / 3 + 50, abs=0.1)  # shard renewals + counters
    # asked for at the mission's load: kept, at 20,000 WRU/s on leases, with the throttling warning
    kept = plan(variant(MISSION, stats_counters=True))
    assert (kept.per_run["write_units_total"], kept.context.get("stats_counters", True)) == (9, True)
    assert kept.context["warm_write_units"]["leases"] == 25_000  # (20,000 + 11) x 1.2, rounded up
    assert any(w.code == "stats_counters" and "throttles" in w.message for w in kept.warnings)
    # dropped on request at a small load: 8 units, the deploy line says so, and nothing to warn about
    lean = plan(variant(SMALL, stats_counters=False))
    assert (lean.per_run["write_units_total"], lean.context["stats_counters"]) == (8, False)
    assert "stats_counters" not in codes(variant(SMALL, stats_counters=False))
    # and the dropped step costs nothing in the model, whatever the index
    assert per_run(open_index=False, stats_counters=False).writes.total == 6
    assert per_run(stats_counters=False).writes.by_step["stats"] == 0


def test_cli_takes_the_stats_counters_choice(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--jobs", "10000", "--peak-runs-per-second", "50", "--json"]
    assert main([*args, "--stats-counters", "off"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["per_run"]["stats_counters"] is False and "-c stats_counters=false" in out["deploy_command"]
    assert main([*args, "--stats-counters", "on"]) == 0
    assert json.loads(capsys.readouterr().out)["per_run"]["write_units_total"] == 9


def test_burst_model_responds_to_its_inputs() -> None:
    base = BurstSettings(burst_runs_per_second=2_000, ready_concurrency=300, max_concurrency=300, warm_environments=300)
    fast = simulate(base)
    assert fast.started == fast.runs == 2_000 and fast.claimed_late == 0
    slow_workers = simulate(BurstSettings(burst_runs_per_second=2_000, ready_concurrency=20, max_concurrency=20))
    assert slow_workers.lateness_ms["p99"] > fast.lateness_ms["p99"] + 1_000
    # one scheduler instance claims 300/s: 2,000 runs need 6.7 s, more than the 5 s lookahead
    slow_claims = simulate(
        BurstSettings(
            burst_runs_per_second=2_000,
            scheduler_instances=1,
            ready_concurrency=300,
            max_concurrency=300,
            warm_environments=300,
        )
    )
    assert slow_claims.claimed_late > 0 and slow_claims.lateness_ms["max"] > 1_000
    # the curve is monotonic and ends at the maximum
    curve = [point["lateness_ms"] for point in fast.curve]
    assert curve == sorted(curve) and curve[-1] == fast.lateness_ms["max"]


def test_every_constant_is_documented_with_its_source() -> None:
    text = DOCS.read_text()
    for key, constant in CONSTANTS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row is not None, f"{key} missing from docs/capacity.md"
        assert constant.source.split("#")[0] in row or constant.source in row, f"{key}: source not in its row"
        assert constant.as_of in row


def test_cli_prints_everything_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--jobs", "10000000", "--peak-runs-per-second", "20000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("scheduling", "tables", "workers", "lateness", "storage", "cost", "warnings", "deploy_command"):
        assert key in out
    assert out["cost"]["eventbridge_scheduler"]["monthly_usd"] > 0


def test_cli_prints_readable_sections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--jobs", "10000", "--peak-runs-per-second", "50"]) == 0
    text = capsys.readouterr().out
    for heading in (
        "Scheduling",
        "DynamoDB at the peak",
        "Workers",
        "Expected start lateness",
        "Monthly cost",
        "Deploy",
    ):
        assert heading in text
    assert re.search(r"npx cdk deploy --no-notices -c shards=16", text)


@pytest.mark.parametrize(
    "args",
    [
        ["--jobs", "0", "--peak-runs-per-second", "5"],
        ["--jobs", "10", "--peak-runs-per-second", "5", "--region", "mars"],
        ["--jobs", "10", "--peak-runs-per-second", "5", "--retention-days", "0"],
    ],
)
def test_cli_refuses_bad_loads(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", *args]) == 2
    assert "invalid load" in capsys.readouterr().err


def test_without_the_open_index_the_plan_sizes_the_reaper_sweep() -> None:
    lean = plan(variant(MISSION, open_index=False))
    st = lean.storage
    # 523 GB of history: a daily sweep needs 372 pages a minute, more than the 200 one pass reads
    assert (st.sweep_pages, st.sweep_period_hours) == (200, 44.6)
    assert "sweep_period" in {w.code for w in lean.warnings}
    assert (lean.context["open_index"], lean.context["sweep_pages"]) == (False, 200)
    # a full sweep reads the table once in 4 KB units at 0.5 RRU; 730 / 44.6 sweeps a month
    assert st.sweep_rru_per_month == pytest.approx(523.03 * 1024 * 1024 / 4 * 0.5 * 730 / 44.6, rel=0.01)
    lean_cost, full_cost = monthly_cost(variant(MISSION, open_index=False), lean), monthly_cost(MISSION, plan(MISSION))
    writes_saved = 2 * MISSION.runs_per_month * 0.625 / 1e6  # 1,095 USD of open-index writes
    assert full_cost.monthly_usd - lean_cost.monthly_usd == pytest.approx(writes_saved - 140.16 - 0.0, abs=40)
