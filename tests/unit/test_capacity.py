"""punctual capacity: the model's arithmetic on three loads, its warnings, its cost and its CLI.

Each expected figure is derived by hand in the comment next to it from docs/capacity.md's
formulas and constants, so a change of a constant or a formula shows up here as a diff to explain.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from pathlib import Path

import pytest

from punctual.capacity import CapacityPlan, Load, monthly_cost, plan_capacity, report
from punctual.capacity.constants import CONSTANTS
from punctual.capacity.counts import CONFIRM_WAIT_MS, late_confirm_share, per_run
from punctual.capacity.fleet import instance_claim_rate
from punctual.capacity.owners import slot_ceiling
from punctual.capacity.simulate import BurstSettings, fleet_claim_rate, simulate
from punctual.cli import main
from punctual.execution import reserving

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
    # claim rate = R * S / (S - 1 + lookahead_s) = 50 / 5 = 10 runs/s: one instance at the 512 MB floor
    # (10 x 4.9 ms + 16 shards x 2.4 ms x 4/3 = 0.10 vCPU, / 0.7 = 0.15 of the 0.29 512 MB gives)
    assert (s.claim_rate_needed, s.scheduler_instances, s.lookahead_ms, s.scheduler_memory_mb) == (10.0, 1, 5_000, 512)
    # 2 due-index units per claim = 20 WRU/s: the 16-shard minimum; 1.25 WRU/s per shard
    assert (s.due_shards, s.due_shard_wru_per_s) == (16, 1.2)
    # open index: a claim window's marker (10 runs) put at the claim rate and closed at the run rate = 6 WRU/s
    assert (s.open_shards, s.open_shard_wru_per_s) == (16, 0.4)
    # runs table: insert 10 (+ 1 for the markers) + lease 50 + finish 50 + 1 % of runs retried (a lease and a
    # finish more: 1) + the markers closed 0.1; reads: the reaper reads each window once (1.1 units a run)
    assert tables(SMALL)["runs"] == (112.1, 0.9, 0, 0)
    assert small.workers.tier == "lambda-standard"  # the cheapest tier that meets the target at this load
    assert small.workers.account_concurrency_needed == 1_000  # within the default quota
    assert small.lateness.met
    assert codes(SMALL) == set()  # no quota raise, no warning


def test_mission_load_sizes_the_design_target() -> None:
    mission = plan(MISSION)
    s, w = mission.scheduling, mission.workers
    # the cheapest fleet claims the burst over the longest lookahead, 55 s (the minute less the 5 s of the
    # hand-over): 20,000 / 55 = 364 claims/s; due index 727 WRU/s: the 16-shard minimum, 4.5 % each
    assert (s.lookahead_ms, s.claim_rate_needed, s.due_shards, s.due_shard_utilization) == (55_000, 363.6, 16, 0.045)
    # 4 instances own 4 shards each: 91 claims/s x 4.9 ms + 4 x 2.4 ms x 4/3 = 0.46 vCPU, / 0.7 = 0.66 vCPU
    # -> 1,216 MB (64 MB steps); 3 instances would own 6 shards: 136 claims/s, 0.69 vCPU, / 0.7 > 1 vCPU
    assert (s.scheduler_instances, s.shards_per_instance, s.scheduler_memory_mb) == (4, 4, 1_216)
    # open index (364 + 20,000) / 10 (one marker per claim window of 10 runs) = 2,036 WRU/s -> 16 shards, 13 %
    assert (s.open_shards, s.open_shard_utilization) == (16, 0.127)
    t = tables(MISSION)
    # jobs: 364 claims/s, each job's head advanced once per 10 of its runs (the 600 s claim window of minute
    # jobs: counts.CLAIM_WINDOW_S) = 36.4 writes/s; 40,000 reads: the worker reads the job of every run, its
    # head (1 unit) and
    # its spec (1.0 for the reference job: counts.READS_PER_RUN = 2): x1.2 = 48,000 over a new table's 12,000
    # the Fargate tier pre-leases: each run is read once more before its instant (20,000 RRU/s on runs)
    assert t["jobs"] == (36.4, 40_000.0, 0, 0)
    assert mission.context["claim_window_s"] == 600
    assert mission.context["warm_read_units"] == {"jobs": 48_000, "runs": 25_000}
    assert {t.name: t.quota_rru_needed for t in mission.tables}["jobs"] == 48_000  # above the 40,000 table quota
    # runs: insert 364 (+ 36 markers) + reserve 20,000 (the Fargate tier pre-leases: decision 0150) +
    # finish 20,000 (which confirms the reservation: Finish.confirm) + the confirms of the calls still in
    # flight after 0.75 s (22.31 %: 4,462) + 1 % retried (400) + markers closed over the minute (33) = 45,295;
    # x1.2 -> 55,000, a quota raise; reads: pre-leases 20,000 + the reaper's 367/s
    assert t["runs"] == (45_295.3, 20_366.7, 55_000, 55_000)
    # the open index: a marker per window of 10 runs, put at the claim (36/s) and closed by the reaper (33/s)
    assert t["runs.open"][:3] == (69.7, 0.1, 0)
    assert w.in_flight_runs == 29_182  # 20,000 x (10/11 s hold + 0.5 s target + 0.05 s), under 120,000
    # the Fargate tier: 9 tasks of 1 vCPU (punctual.capacity.fargate; test_fargate_workers_are_sized_by_cpu)
    assert (w.tier, w.fargate_tasks, w.fargate_prelease_s) == ("fargate", 9, 10)
    assert w.account_concurrency_needed == 1_000  # 2 (the idle Lambda worker) + 8 + 214: the default quota
    assert mission.lateness.met and mission.lateness.steady["p99"] <= 1_000
    assert codes(MISSION) == {
        "ddb_warm_throughput",
        "ddb_table_quota",
        "stats_counters",  # dropped: 20,000 finishes/s of one owner would exceed its 8 counter items
        "owner_one_time_jobs",  # one owner with the whole peak: above 1,000 one-time claims/s on its by_owner entry
        "owner_max_runs_per_minute",  # and above 1,000 starts/s on its rate record, were it limited
    }
    assert mission.per_run["stats_counters"] is False
    # the claim window's 0.3 + insert 1.2 + reserve 1 (pre-leasing; its confirm is in the finish's write)
    # + the confirms of the calls still in flight after 0.75 s (0.2231 for 500 ms targets) + finish 1.2:
    # 3.92 units a run; issue 30 asks for 4 and $2.50 per million: 2.44
    fargate = per_run(stats_counters=False, claim_runs=10, prelease=True, target_duration_ms=500)
    assert mission.per_run["write_units_total"] == fargate.writes.total == 3.9231
    assert per_run(stats_counters=False, claim_runs=10).writes.total == 3.7
    assert monthly_cost(MISSION, mission).per_million_runs_usd == pytest.approx(2.44, abs=0.01)


def test_late_confirms_are_the_calls_answered_after_the_confirm_wait() -> None:
    # the model's wait is the worker's (capacity does not import the worker)
    assert CONFIRM_WAIT_MS == reserving.CONFIRM_WAIT_S * 1000
    assert late_confirm_share(500) == pytest.approx(math.exp(-1.5), abs=1e-4)  # 0.2231
    assert late_confirm_share(50) < 0.0001 and late_confirm_share(30_000) > 0.97  # fast targets; slow ones
    # a tier that leases at the instant has no confirms; a pre-leasing one pays 1 + the late share
    assert per_run(prelease=False, target_duration_ms=500).writes.by_step["lease"] == 1
    assert per_run(prelease=True, target_duration_ms=500).writes.by_step["lease"] == 1.2231
    assert per_run(prelease=True, target_duration_ms=60_000).writes.by_step["lease"] == pytest.approx(1.9876)


def test_ten_times_the_mission_hits_hard_limits() -> None:
    ten_x = plan(TEN_X)
    s, w = ten_x.scheduling, ten_x.workers
    # 200,000 / 55 s = 3,636 claims/s: 7,273 due-index WRU/s -> >= 22 shards -> 32; one shard per instance,
    # 114 claims/s x 4.9 ms + 2.4 ms x 4/3 = 0.56 vCPU, / 0.7 = 0.81 -> 1,472 MB x 32 instances
    assert (s.lookahead_ms, s.claim_rate_needed, s.scheduler_instances) == (55_000, 3_636.4, 32)
    assert (s.due_shards, s.shards_per_instance, s.scheduler_memory_mb) == (32, 1, 1_472)
    assert w.in_flight_runs == 291_819  # above the 120,000 in-flight limit of one queue
    # no tier meets the target: 100 Fargate tasks (the stack's bound) cannot lease 200,000 runs in time, and
    # Lambda stops at the event source's 20,000 concurrency; the plan takes the closest
    assert not any(t.meets_target for t in ten_x.worker_tiers)
    assert w.tier == min(ten_x.worker_tiers, key=lambda t: t.lateness.steady["p99"]).tier
    assert not ten_x.lateness.met
    assert codes(TEN_X) == {
        "ddb_warm_throughput",
        "ddb_table_quota",
        "sqs_in_flight",
        "fargate_tasks",  # the closest tier, by a hair: 100 tasks (the stack's bound) lease too slowly
        "target_latency",
        "stats_counters",
        "owner_one_time_jobs",
        "owner_max_runs_per_minute",
    }
    quota = {t.name: t.quota_wru_needed for t in ten_x.tables}
    # (3,636 x 1.1 + 2.2231 x 200,000 (the late confirms' 22.31 %) + 1 % retried x 2 x 200,000 + 333) x 1.2, up
    assert quota["runs"] == 544_000


def test_fargate_workers_are_sized_by_cpu() -> None:
    fargate = plan(variant(MISSION, worker="fargate"))
    w = fargate.workers
    # a minute's work: 20,000 runs x 6.8 ms x 1.01 attempts = 137 vCPU-s, / (60 s x 0.7) -> at least 4 tasks;
    # leasing before the instant takes 3.4 ms a run: on 70 % of a vCPU a task leases 206 runs/s, and the
    # 20,000 runs turn visible over the 11 s before their instant (pre-leasing 10 s): 9 tasks (1,853/s)
    # lease them in time, 8 (1,647/s) leave 10 % late by up to 1.2 s
    assert (w.fargate_tasks, w.fargate_in_flight_per_task, w.fargate_prelease_s) == (9, 2_667, 10)
    assert fargate.lateness.steady["p99"] == 0.0  # on the whole vCPU (what the deployed stack has)
    assert fargate.context["fargate_workers"] is True and fargate.context["lambda_workers"] is False
    assert fargate.context["fargate_worker_count"] == 9 and fargate.context["fargate_prelease_s"] == 10


def test_dropping_the_open_index_saves_two_units_per_run() -> None:
    lean = plan(variant(MISSION, open_index=False))
    # no open index, no stats counters: claim 0.3 (a claim window of 10 runs) + insert 1, reserve 1 (the
    # Fargate tier pre-leases) + 0.2231 (the calls still in flight at the confirms), finish 1 (which
    # confirms the reservation)
    assert lean.per_run["write_units_total"] == 3.5231
    assert lean.scheduling.open_shards == 0
    assert "runs.open" not in {t.name for t in lean.tables}
    assert per_run(open_index=True).writes.total - per_run(open_index=False).writes.total == 2


def test_mission_cost_lines_follow_the_counts_and_prices() -> None:
    mission = plan(MISSION)
    cost = monthly_cost(MISSION, mission)
    runs = MISSION.runs_per_month
    assert runs == 20_000 * 43_800  # one burst a minute, 730 hours
    by_item = {line.item.split(":")[0]: line.monthly_usd for line in cost.lines}
    # provisioned mode: each table and index at its average over 70 %, all month (punctual.capacity.modes)
    wcu = sum(t.write_units for t in next(m for m in mission.dynamodb_modes if m.name == "provisioned").tables)
    assert next(v for k, v in by_item.items() if k.startswith("provisioned") and "WCU" in k) == round(
        wcu * 730 * 0.00065, 2
    )
    assert by_item["scheduler fleet"] == round(4 * 1_216 / 1024 * 730 * 3600 * 0.0000133334, 2)
    assert by_item["9 worker tasks (1 vCPU, 2 GB, Arm)"] == round(9 * 730 * (0.03238 + 2 * 0.00356), 2)
    # every line is in the total: no price left unverified
    assert cost.monthly_usd == round(sum(line.monthly_usd for line in cost.lines), 2)
    assert cost.per_million_runs_usd == round(cost.monthly_usd / (runs / 1e6), 3)
    assert set(cost.by_service()) == {
        "DynamoDB",
        "SQS",
        "Lambda",
        "Fargate",
        "VPC",
        "API Gateway",
        "CloudWatch",
        "KMS",
        "X-Ray",
        "Data transfer",
    }
    ebs = cost.eventbridge_scheduler
    assert ebs["invocations_usd"] == round(runs / 1e6 * 1.00, 2)
    # the same requests leave AWS either way: 557 + 1,024 bytes a run at 0.09 USD/GB
    assert ebs["egress_usd"] == round(runs * (557 + 1_024) / 1024**3 * 0.09, 2)
    assert ebs["burst_drain_s_at_default_quota"] == 20.0  # 20,000 runs at 1,000 invocations/s
    assert ebs["precision_s"] == 60 and ebs["run_history"] is False
    assert "differ" in monthly_cost(variant(MISSION, region="eu-west-1"), mission).region_note


def test_deploy_line_carries_the_plan() -> None:
    result = report(MISSION)
    line = result["deploy_command"]
    assert line.startswith(
        "npx cdk deploy --no-notices -c shards=16 -c open_shards=16 -c scheduler_instances=4"
        " -c scheduler_memory_mb=1216 -c lookahead_ms=55000"
    )
    # the Fargate tier: its service consumes the dispatch queue; the Lambda worker's event source is disabled
    assert (
        "-c fargate_workers=true -c lambda_workers=false -c worker_max_concurrency=2 -c fargate_worker_count=9"
        " -c fargate_worker_max_count=18 -c fargate_worker_concurrency=2667 -c fargate_prelease_s=10"
        " -c fargate_long_run_count=1"
    ) in line
    assert "lambda_concurrency_quota" not in line and "worker_min_pollers" not in line
    assert "-c stats_counters=false" in line  # above 8,000 runs/s per owner the plan drops the counters
    # provisioned DynamoDB, each table and index at its planned capacity (auto scaling's minimum)
    assert '-c dynamodb_billing=provisioned -c \'provisioned_write_units={"jobs":48,' in line
    # the partitions the burst needs: pre-warmed (a provisioned table has 1,000 WCU/s per partition)
    assert """'warm_write_units={"runs":55000}'""" in line and "-c claim_window_s=600" in line
    # reads too: the worker reads 20,000 jobs/s at 2 units (head and spec), 40,000 RRU/s, and, pre-leasing,
    # 20,000 runs/s: x1.2 = 48,000 and 24,000, above the 3,000 of the one partition their 953 and 477 RCU make
    assert '\'provisioned_read_units={"jobs":953,' in line  # 40,000 units a minute: 667/s at 70 %
    assert """'warm_read_units={"jobs":48000,"runs":25000}'""" in line


def test_stats_counters_are_kept_while_one_owner_fits_them() -> None:
    # small load: 50 finishes/s fit 8 counter items (8,000 writes/s); 1 unit per run, no context entry
    small = plan(SMALL)
    assert (small.per_run["stats_counters"], small.per_run["write_units_total"]) == (True, 4.7)
    assert "stats_counters" not in small.context
    # shard renewals + counters + 1 % of runs waiting on their owner's rate record
    assert tables(SMALL)["leases"][0] == pytest.approx(16 / 3 + 50 + 0.5, abs=0.1)
    # asked for at the mission's load: kept, at 20,000 WRU/s on leases, with the throttling warning
    kept = plan(variant(MISSION, stats_counters=True))
    assert (kept.per_run["write_units_total"], kept.context.get("stats_counters", True)) == (4.9231, True)
    assert kept.context["warm_write_units"]["leases"] == 25_000  # (20,000 + 5 + 1 % waits) x 1.2, rounded up
    assert any(w.code == "stats_counters" and "throttles" in w.message for w in kept.warnings)
    # dropped on request at a small load: 3.7 units, the deploy line says so, and nothing to warn about
    lean = plan(variant(SMALL, stats_counters=False))
    assert (lean.per_run["write_units_total"], lean.context["stats_counters"]) == (3.7, False)
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
    assert json.loads(capsys.readouterr().out)["per_run"]["write_units_total"] == 4.7


def test_burst_model_responds_to_its_inputs() -> None:
    base = BurstSettings(burst_runs_per_second=2_000, ready_concurrency=300, max_concurrency=300, warm_environments=300)
    fast = simulate(base)
    assert fast.started == fast.runs == 2_000 and fast.claimed_late == 0
    slow_workers = simulate(BurstSettings(burst_runs_per_second=2_000, ready_concurrency=20, max_concurrency=20))
    assert slow_workers.lateness_ms["p99"] > fast.lateness_ms["p99"] + 1_000
    # one scheduler instance of one vCPU claims 1 / 4.9 ms = 204/s: 2,000 runs need 9.8 s, more than the 5 s lookahead
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
    for key in (
        "scheduling",
        "tables",
        "workers",
        "lateness",
        "storage",
        "cost",
        "warnings",
        "deploy_command",
        "worker_tiers",
        "dynamodb_modes",
        "recommendation",
    ):
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
    # with the claim window's markers the open index costs little: its capacity (96 WCU) and the markers'
    # writes on runs (95 WCU), the reaper's reads of each window once (525 RCU) and 4 alarm metrics, against
    # the sweep's reads (140.16 USD); storage 40 GB more
    index = (96 + 95) * 730 * 0.00065 + 525 * 730 * 0.00013 + 4 * 0.1
    storage = (583.14 - 542.91) * 0.45
    assert full_cost.monthly_usd - lean_cost.monthly_usd == pytest.approx(index - 140.16 + storage, abs=1)


# -- the scheduler fleet: the busiest instance decides -------------------------------------------------


def test_the_fleet_claims_at_its_busiest_instances_pace() -> None:
    # instance i owns shard % K == i: 14 over 32 gives 3 shards to four instances, 300 x 32 / 3 = 3,200/s
    assert fleet_claim_rate(14, 32, 300) == pytest.approx(3_200)
    assert fleet_claim_rate(16, 32, 300) == 4_800  # 2 each
    assert fleet_claim_rate(40, 32, 300) == 9_600  # idle instances add nothing
    # and the burst model claims at that pace, not at 14 x 300 = 4,200/s
    warm = {f"{name}_write_throughput": 40_000.0 for name in ("jobs", "due", "runs")}
    settings = BurstSettings(
        burst_runs_per_second=4_000, scheduler_instances=14, due_shards=32, claims_per_instance=300, **warm
    )
    assert settings.claim_rate() == pytest.approx(3_200)


def test_the_plan_sizes_instances_so_no_instance_claims_more_than_it_can() -> None:
    for load in (SMALL, MISSION, TEN_X, variant(MISSION, peak_runs_per_second=7_000)):
        s = plan(load).scheduling
        per_shard = s.claim_rate_needed / s.due_shards
        # the busiest instance's claims fit 70 % of its vCPU share (the measured CPU of a claim and a poll)
        capacity = instance_claim_rate(s.shards_per_instance, s.scheduler_memory_mb, utilization=0.7)
        assert s.shards_per_instance * per_shard <= capacity + 1e-6, load
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
    assert spread.per_run["stats_counters"] is True and spread.per_run["write_units_total"] == 4.9231


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


@pytest.mark.parametrize(
    "load",
    [Load(jobs=1_000, peak_runs_per_second=10), variant(MISSION, worker="fargate")],
    ids=["one-lambda-instance", "mission-on-fargate"],
)
def test_the_readable_report_keeps_its_columns_and_counts_in_english(load: Load) -> None:
    # issue 31: "1 scheduler instances", and a table whose titles sat two columns left of their numbers
    from punctual.capacity.render import render

    lines = render(report(load)).splitlines()
    header = lines.index(next(line for line in lines if line.startswith("DynamoDB at the peak")))
    rows = lines[header + 1 : lines.index("", header)]
    ends = [m.end() for m in re.finditer(r"\S+(?: \S+)*", lines[header])][1:]  # each title's last column
    assert len(ends) == 4 and rows
    for row in rows:
        assert [m.end() for m in re.finditer(r"\S+", row)][1:] == ends, (lines[header], row)
    cost = lines.index(next(line for line in lines if line.startswith("Monthly cost")))
    dollars = {line.rindex("$") for line in lines[cost + 1 :] if line.startswith("  ") and "$" in line}
    dollars -= {lines[i].rindex("$") for i in range(len(lines)) if lines[i].startswith("  per million runs")}
    assert len(dollars) == 1  # every cost line and the total: one column
    text = "\n".join(lines)
    assert not re.search(r"\b1 (scheduler instances|tasks|worker tasks)\b|\(s\)", text)
    assert not any(line != line.rstrip() for line in lines)


def test_burst_model_describes_its_stack_in_english() -> None:
    from punctual.capacity.render import describe_deployment
    from punctual.capacity.synth import Deployment

    one = Deployment(
        shards=16, lookahead_ms=35_000, scheduler_instances=1, batch_size=10, max_concurrency=15, min_pollers=0,
        max_pollers=0, reserved_concurrency=15, open_index=True, warm_writes={}, fargate_tasks=0,
    )  # fmt: skip
    assert describe_deployment(one).startswith("  1 scheduler instance, 16 due shards (at most 16 per instance)")
    two = describe_deployment(dataclasses.replace(one, scheduler_instances=2))
    assert two.startswith("  2 scheduler instances, 16 due shards (at most 8 per instance)")
