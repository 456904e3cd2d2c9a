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
from punctual.capacity.owners import slot_ceiling
from punctual.capacity.simulate import BurstSettings, fleet_claim_rate, simulate
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
    # 20,000 runs in one second, 5 s lookahead: 4,000 claims/s, at least ceil(4,000 / 300) = 14 instances
    # due index 8,000 WRU/s; a shard may use a third of 1,000: >= 24 shards -> 32, each 25 % of a partition
    assert (s.claim_rate_needed, s.due_shards, s.due_shard_utilization) == (4_000.0, 32, 0.25)
    # 125 claims/s per shard: an instance (300/s) may own 2 shards, so 16 instances, not 14 (14 over 32 shards
    # would give 3 shards, 375 claims/s, to four of them); the fleet claims 300 x 32 / 2 = 4,800/s
    assert (s.scheduler_instances, s.shards_per_instance, s.claim_capacity) == (16, 2, 4_800.0)
    # open index 4,000 + 20,000 = 24,000 WRU/s -> >= 72 shards -> 128, each 19 %
    assert (s.open_shards, s.open_shard_utilization) == (128, 0.188)
    t = tables(MISSION)
    # jobs: 4,000 advances; 40,000 read units (the worker reads the head and spec of every run's job)
    assert t["jobs"] == (4_000.0, 40_000.0, 5_000, 0)
    assert t["jobs.due"][0] == 8_000.0 and t["jobs.due"][2] == 10_000
    # runs: insert 4,000 + lease 20,000 + finish 20,000 = 44,000; x1.2 = 52,800 -> pre-warm and quota 53,000
    assert t["runs"] == (44_000.0, 0.0, 53_000, 53_000)
    assert t["runs.open"] == (24_000.0, 1.1, 29_000, 0)  # reaper: 128 queries a minute
    # in flight: 20,000 x (10/11 s hold + 0.5 s target + 0.05 s) = 29,182, under the 120,000 limit
    assert w.in_flight_runs == 29_182
    # 2,000 batches/s x 1.459 s = 2,919 concurrent; x1.2 = 3,503 > 1,000: provisioned pollers
    assert (w.concurrency, w.reserved_concurrency, w.mode) == (2_919, 3_503, "provisioned")
    assert (w.min_pollers, w.max_pollers) == (200, 351)  # 200 is the largest minimum
    # 351 pollers drive up to 3,510 invocations; the reservation caps them: min(3,510, 3,503)
    assert w.max_concurrency == 3_503
    # 3,503 + 2 x 16 scheduler + 204 (100 unreserved, API 100, reaper 4) = 3,739 -> request 4,000
    assert w.account_concurrency_needed == 4_000
    assert mission.lateness.met and mission.lateness.steady["p99"] <= 1_000
    assert mission.lateness.first_burst["p99"] > mission.lateness.steady["p99"]  # cold pollers and environments
    assert codes(MISSION) == {
        "ddb_warm_throughput",
        "ddb_table_quota",
        "lambda_min_pollers",
        "lambda_account_concurrency",
        "stats_counters",  # dropped: 20,000 finishes/s of one owner would exceed its 8 counter items
        "owner_one_time_jobs",  # one owner with the whole peak: above 1,000 one-time claims/s on its by_owner entry
        "owner_max_runs_per_minute",  # and above 1,000 starts/s on its rate record, were it limited
    }
    assert mission.per_run["stats_counters"] is False and mission.per_run["write_units_total"] == 8


def test_ten_times_the_mission_hits_hard_limits() -> None:
    ten_x = plan(TEN_X)
    s, w = ten_x.scheduling, ten_x.workers
    # 200,000 / 5 s = 40,000 claims/s would need 134 instances (> 100): the lookahead grows to 10 s;
    # 20,000 claims/s: >= 120 shards -> 128, 156 claims/s each, 1 per instance: 128 instances (> 100) -> 15 s;
    # 13,333 claims/s: >= 80 shards -> 128, 104/s each, 2 per instance: 64 instances, 300 x 128 / 2 = 19,200/s
    assert (s.lookahead_ms, s.claim_rate_needed, s.scheduler_instances) == (15_000, 13_333.3, 64)
    assert (s.due_shards, s.shards_per_instance, s.claim_capacity) == (128, 2, 19_200.0)
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
        "owner_one_time_jobs",
        "owner_max_runs_per_minute",
    }
    quota = {t.name: t.quota_wru_needed for t in ten_x.tables}
    assert quota["runs"] == 496_000  # (13,333 + 2 x 200,000) x 1.2, rounded up to 1,000


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
    assert by_item["scheduler fleet"] == round(16 * 1.769 * 730 * 3600 * 0.0000133334, 2)
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
    assert line.startswith("npx cdk deploy --no-notices -c shards=32 -c open_shards=128 -c scheduler_instances=16")
    assert "-c lambda_concurrency_quota=4000" in line
    # above 1,000 concurrent workers the plan asks the stack for provisioned pollers, and reserves for them:
    # without the reservation in the line the stack reserved its standard-mode cap, 1,000
    assert "-c worker_min_pollers=200 -c worker_max_pollers=351 -c worker_reserved_concurrency=3503" in line
    assert "worker_max_concurrency" not in line
    assert "-c stats_counters=false" in line  # above 8,000 runs/s per owner the plan drops the counters
    # leases: 11 shard renewals/s need no pre-warming once the counters are dropped
    assert """'warm_write_units={"jobs":5000,"jobs.due":10000,"runs":53000,"runs.open":29000}'""" in line
    # reads too: the worker reads 20,000 jobs/s, x1.2 = 24,000, above a new table's 12,000
    assert """'warm_read_units={"jobs":48000}'""" in line


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


# -- the scheduler fleet: the busiest instance decides -------------------------------------------------


def test_the_fleet_claims_at_its_busiest_instances_pace() -> None:
    # instance i owns shard % K == i: 14 over 32 gives 3 shards to four instances, 300 x 32 / 3 = 3,200/s
    assert fleet_claim_rate(14, 32, 300) == pytest.approx(3_200)
    assert fleet_claim_rate(16, 32, 300) == 4_800  # 2 each
    assert fleet_claim_rate(40, 32, 300) == 9_600  # idle instances add nothing
    # and the burst model claims at that pace, not at 14 x 300 = 4,200/s
    warm = {f"{name}_write_throughput": 40_000.0 for name in ("jobs", "due", "runs")}
    settings = BurstSettings(burst_runs_per_second=4_000, scheduler_instances=14, due_shards=32, **warm)
    assert settings.claim_rate() == pytest.approx(3_200)


def test_the_plan_sizes_instances_so_no_instance_claims_more_than_it_can() -> None:
    for load in (SMALL, MISSION, TEN_X, variant(MISSION, peak_runs_per_second=7_000)):
        s = plan(load).scheduling
        per_shard = s.claim_rate_needed / s.due_shards
        assert s.shards_per_instance * per_shard <= 300 + 1e-6, load
        assert s.claim_capacity >= s.claim_rate_needed or s.scheduler_instances == 100


# -- per-owner ceilings --------------------------------------------------------------------------------


def test_per_owner_ceilings_are_checked_against_the_busiest_owner() -> None:
    ceilings = {c.name: c.runs_per_second for c in plan(SMALL).owner_ceilings}
    # counters 8 x 1,000 writes/s; by_owner entry and rate record: one item or partition, 1,000 writes/s
    assert ceilings == {"stats_counters": 8_000, "one_time_jobs": 1_000, "max_runs_per_minute": 1_000}
    assert plan(SMALL).busiest_owner_runs_per_second == 50  # the whole peak, unless told
    # the mission spread over owners: none above 1,000/s, so no ceiling is hit, and the counters fit again
    spread = plan(variant(MISSION, max_owner_runs_per_second=1_000))
    assert not {c for c in codes(variant(MISSION, max_owner_runs_per_second=1_000)) if c.startswith("owner_")}
    assert spread.per_run["stats_counters"] is True and spread.per_run["write_units_total"] == 9


def test_a_large_max_concurrency_has_a_low_ceiling() -> None:
    # 500 holders / 18 per KB = 28 units per take and per release: 1,000 / 56 = 17.9 runs/s for that owner
    assert slot_ceiling(500) == pytest.approx(1_000 / 56)
    assert slot_ceiling(18) == 500  # one unit each way while the item is under 1 KB
    limited = variant(SMALL, owner_max_concurrency=500)
    assert {c.name: c.runs_per_second for c in plan(limited).owner_ceilings}["max_concurrency"] == 17.9
    assert "owner_max_concurrency" in codes(limited)  # 50 runs/s > 17.9
    assert "owner_max_concurrency" not in codes(variant(SMALL, owner_max_concurrency=100))  # 83 runs/s


def test_cli_takes_the_owner_figures(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--jobs", "10000000", "--peak-runs-per-second", "20000", "--json"]
    assert main([*args, "--max-owner-runs-per-second", "500", "--owner-max-concurrency", "18"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["busiest_owner_runs_per_second"] == 500
    assert {c["name"]: c["runs_per_second"] for c in out["owner_ceilings"]}["max_concurrency"] == 500.0
    assert not [w for w in out["warnings"] if w["code"].startswith("owner_")]
    assert main(["capacity", "--jobs", "10000", "--peak-runs-per-second", "50"]) == 0
    assert "Per-owner ceilings (the busiest owner: 50 runs/s at the peak)" in capsys.readouterr().out
