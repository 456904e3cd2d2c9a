"""The capacity model: a target load in, the AWS settings, quota raises and lateness out.

Arithmetic only, from two tables: the sourced constants (``punctual.capacity.constants``) and the
per-run counts the tests measure (``punctual.capacity.counts``). ``docs/capacity.md`` derives each
figure; ``punctual capacity`` prints them.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from punctual.capacity.constants import value
from punctual.capacity.counts import PerRun, per_run
from punctual.capacity.figures import (
    CapacityPlan,
    Lateness,
    QuotaWarning,
    Scheduling,
    Storage,
    Throughput,
    Workers,
)
from punctual.capacity.load import SECONDS_PER_MONTH, Load, WorkerKind
from punctual.capacity.owners import owner_ceilings, owner_peak, stats_counter_ceiling
from punctual.capacity.simulate import fleet_claim_rate, simulate
from punctual.capacity.workers import HEADROOM, WARM_STEP, burst_settings, p99, size_workers

DEFAULT_LOOKAHEAD_MS = 5_000
MAX_LOOKAHEAD_MS = 60_000  # the scheduler's own bound (Settings.lookahead_ms)
MAX_SCHEDULER_INSTANCES = 100  # the CDK app's bound
MAX_SHARDS = 4096
MIN_SHARDS = 16


def plan_capacity(load: Load) -> CapacityPlan:
    """Size a deployment for ``load``. Pure arithmetic plus the burst simulation; no I/O."""
    counters = stats_counters_for(load)
    worker = "lambda" if load.worker is WorkerKind.LAMBDA else "process"
    counts = per_run(open_index=load.open_index, stats_counters=counters, worker=worker)
    warnings: list[QuotaWarning] = []
    scheduling = _scheduling(load, warnings)
    tables = _tables(load, scheduling, counts, warnings)
    workers = size_workers(load, scheduling, tables, warnings)
    lateness = _lateness(load, scheduling, workers, tables, warnings)
    storage = _storage(load, warnings)
    context = _context(load, scheduling, workers, tables, storage, stats_counters=counters)
    ceilings = owner_ceilings(load, stats_counters=counters, warnings=warnings)
    return CapacityPlan(
        load=load.model_dump(mode="json"),
        per_run={
            "write_units": counts.writes.by_step,
            "write_units_total": counts.writes.total,
            "stats_counters": counters,
            "dynamodb_reads": counts.dynamodb_reads,
            "sqs_requests": round(counts.sqs_requests, 3),
            "sqs_detail": counts.sqs_detail,
        },
        runs_per_month=load.runs_per_month,
        scheduling=scheduling,
        tables=tables,
        workers=workers,
        storage=storage,
        lateness=lateness,
        context=context,
        busiest_owner_runs_per_second=owner_peak(load),
        owner_ceilings=ceilings,
        warnings=warnings,
    )


# -- scheduling ------------------------------------------------------------------------------------


def claim_rate_needed(load: Load, lookahead_ms: int) -> float:
    """Runs/s that claim every run of the burst by its time.

    Runs due at second k (0 <= k < S) become claimable at k - lookahead; all runs due by second t
    must be claimed by t: C * (t + lookahead) >= R * (t + 1) for every t, the tightest at the last
    second: C = R * S / (S - 1 + lookahead).
    """
    lookahead_s = max(lookahead_ms / 1000, 1.0)
    return load.peak_runs_per_second * load.burst_seconds / (load.burst_seconds - 1 + lookahead_s)


def _scheduling(load: Load, warnings: list[QuotaWarning]) -> Scheduling:
    lookahead = DEFAULT_LOOKAHEAD_MS
    # a longer lookahead spreads the claim: lengthen it before adding instances past the app's bound
    while _fleet(claim_rate_needed(load, lookahead), warnings=[])[0] > MAX_SCHEDULER_INSTANCES:
        if lookahead >= MAX_LOOKAHEAD_MS:
            warnings.append(
                QuotaWarning(
                    "scheduler_instances",
                    f"claiming {load.burst_runs:,} runs needs more than {MAX_SCHEDULER_INSTANCES} scheduler instances"
                    f" even with a {MAX_LOOKAHEAD_MS // 1000} s lookahead: runs will be claimed late",
                )
            )
            break
        lookahead += 5_000
    claim = claim_rate_needed(load, lookahead)
    instances, due_shards = _fleet(claim, warnings=warnings)
    instances = min(instances, MAX_SCHEDULER_INSTANCES)
    shard_budget = value("ddb_partition_wru") * value("ddb_partition_utilization")
    open_writes = (claim + load.peak_runs_per_second) if load.open_index else 0.0
    open_shards = _shards(open_writes / shard_budget, at_least=1, warnings=warnings, name="open") if open_writes else 0
    due_per_shard = 2 * claim / due_shards
    open_per_shard = open_writes / open_shards if open_shards else 0.0
    return Scheduling(
        burst_runs=load.burst_runs,
        lookahead_ms=lookahead,
        claim_rate_needed=round(claim, 1),
        scheduler_instances=instances,
        shards_per_instance=math.ceil(due_shards / instances),
        claim_capacity=round(fleet_claim_rate(instances, due_shards, value("scheduler_claims_per_s")), 1),
        due_shards=due_shards,
        due_shard_wru_per_s=round(due_per_shard, 1),
        due_shard_utilization=round(due_per_shard / value("ddb_partition_wru"), 3),
        open_shards=open_shards,
        open_shard_wru_per_s=round(open_per_shard, 1),
        open_shard_utilization=round(open_per_shard / value("ddb_partition_wru"), 3),
    )


def _fleet(claim: float, *, warnings: list[QuotaWarning]) -> tuple[int, int]:
    """(scheduler instances, due shards) that claim ``claim`` runs/s.

    Instance i of K owns the shards with shard % K == i, so the busiest owns ceil(shards / K) of
    them and claims that share of the burst: 14 instances over 32 shards give 3 shards to four of
    them (375 claims/s against the 300/s an instance makes). Each instance may own at most
    floor(300 / claims per shard) shards, and K = ceil(shards / that).
    """
    per_instance = value("scheduler_claims_per_s")
    at_least = max(1, math.ceil(claim / per_instance))
    shard_budget = value("ddb_partition_wru") * value("ddb_partition_utilization")
    shards = _shards(2 * claim / shard_budget, at_least=at_least, warnings=warnings, name="due")
    shards_per_instance = max(1, math.floor(per_instance * shards / claim + 1e-9)) if claim else shards
    return math.ceil(shards / shards_per_instance), shards


def _shards(needed: float, *, at_least: int, warnings: list[QuotaWarning], name: str) -> int:
    """The next power of two >= ``needed`` (and >= 16, >= ``at_least``), capped at 4,096."""
    want = max(MIN_SHARDS, at_least, math.ceil(needed))
    shards = 1 << (want - 1).bit_length()
    if shards > MAX_SHARDS:
        warnings.append(
            QuotaWarning(
                f"{name}_shards", f"{name} index needs {want:,} shards, more than the {MAX_SHARDS:,} supported"
            )
        )
        return MAX_SHARDS
    return shards


# -- tables ----------------------------------------------------------------------------------------

STATS_ITEM_LIMIT = stats_counter_ceiling()  # GET /stats: 8 counter items per owner and minute, 1,000 writes/s each


def stats_counters_for(load: Load) -> bool:
    """Whether the plan keeps GET /stats' run counters (1 write unit per run): as the load says, else
    while the busiest owner finishing at its peak rate fits its counter items. Above that they
    throttle and miss runs anyway, and cost as many WRU/s on ``leases`` as runs finish: the plan
    drops them.
    """
    if load.stats_counters is not None:
        return load.stats_counters
    return owner_peak(load) <= STATS_ITEM_LIMIT


DUE_ROW_BYTES = 250  # a due-index row: keys plus the projection a claim reads


def _tables(load: Load, s: Scheduling, counts: PerRun, warnings: list[QuotaWarning]) -> list[Throughput]:
    r, c = load.peak_runs_per_second, s.claim_rate_needed
    w = counts.writes
    strong_read = 1.0  # RRU of a strongly consistent read under 4 KB
    rows: list[tuple[str, float, float]] = [
        ("jobs", c * w.claim_jobs, r * counts.dynamodb_reads * strong_read),
        # each owned shard is queried once a second (0.5 RRU at least), plus the rows claimed
        ("jobs.due", c * w.claim_due, s.due_shards * 0.5 + c * 0.5 * DUE_ROW_BYTES / 4096),
        ("jobs.by_owner", 0.0, 0.0),  # written by the API only; claims leave it alone
        ("runs", c * w.insert_runs + r * (w.lease_runs + w.finish_runs), 0.0),
    ]
    if load.open_index:
        rows.append(("runs.open", c * w.insert_open + r * w.finish_open, s.open_shards * 0.5 / 60))
    # shard leases renewed every 3 s, and the owners' GET /stats counters, one ADD per finished run
    rows.append(("leases", s.due_shards / 3 + r * w.finish_stats, 0.0))
    owner = owner_peak(load)
    if w.finish_stats and owner > STATS_ITEM_LIMIT:
        warnings.append(
            QuotaWarning(
                "stats_counters",
                f"an owner finishing more than {STATS_ITEM_LIMIT:,} runs/s (8 counter items x 1,000 writes/s)"
                " throttles its GET /stats counters: those runs go uncounted (the runs themselves are unaffected)",
            )
        )
    elif not w.finish_stats and load.stats_counters is None:
        warnings.append(
            QuotaWarning(
                "stats_counters",
                f"GET /stats run counters dropped (-c stats_counters=false): one owner finishing {owner:,} runs/s"
                f" would throttle its 8 counter items ({STATS_ITEM_LIMIT:,} writes/s), and they would cost"
                f" {r:,} WRU/s on leases; GET /stats then answers queue figures only (the dashboard keeps"
                " lateness and outcomes); --stats-counters on keeps them",
            )
        )
    return [_throughput(name, wru, rru, warnings) for name, wru, rru in rows]


def _throughput(name: str, wru: float, rru: float, warnings: list[QuotaWarning]) -> Throughput:
    warm_w = _above(wru * HEADROOM, value("ddb_warm_writes"))
    warm_r = _above(rru * HEADROOM, value("ddb_warm_reads"))
    quota_w = _above(wru * HEADROOM, value("ddb_table_quota_wru"))
    quota_r = _above(rru * HEADROOM, value("ddb_table_quota_rru"))
    if warm_w or warm_r:
        warm = [f"{units:,} {kind}/s" for units, kind in ((warm_w, "writes"), (warm_r, "reads")) if units]
        doublings = math.ceil(math.log2(max(wru / value("ddb_warm_writes"), rru / value("ddb_warm_reads"), 1.0)))
        warnings.append(
            QuotaWarning(
                "ddb_warm_throughput",
                f"{name}: peak {wru:,.0f} WRU/s, {rru:,.0f} RRU/s exceeds a new table's warm throughput;"
                f" pre-warm to {' and '.join(warm)} (billed), or expect throttling for"
                f" ~{doublings * int(value('ddb_growth_minutes'))} min while on-demand doubles its peak",
            )
        )
    if quota_w or quota_r:
        warnings.append(
            QuotaWarning(
                "ddb_table_quota",
                f"{name}: needs {max(quota_w, quota_r):,} request units/s, above the default table-level quota"
                f" of {int(value('ddb_table_quota_wru')):,}: request a raise (Service Quotas, DynamoDB)",
            )
        )
    return Throughput(name, round(wru, 1), round(rru, 1), warm_w, warm_r, quota_w, quota_r)


def _above(needed: float, default: float) -> int:
    """``needed`` rounded up to a request step when it exceeds ``default``, else 0 (nothing to do)."""
    return int(math.ceil(needed / WARM_STEP) * WARM_STEP) if needed > default else 0


# -- lateness, storage, deploy ---------------------------------------------------------------------


def _lateness(
    load: Load, s: Scheduling, w: Workers, tables: list[Throughput], warnings: list[QuotaWarning]
) -> Lateness:
    first = simulate(burst_settings(load, s, w, tables, steady=False))
    steady = simulate(burst_settings(load, s, w, tables, steady=True))
    met = p99(steady) <= load.target_latency_ms
    if not met:
        warnings.append(
            QuotaWarning(
                "target_latency",
                f"expected start lateness p99 {p99(steady):,.0f} ms at a steady burst exceeds the"
                f" {load.target_latency_ms:,} ms target",
            )
        )
    return Lateness(first.lateness_ms, steady.lateness_ms, load.target_latency_ms, met)


SWEEP_TARGET_HOURS = 24  # without the open index, sweep the whole runs table once a day ...
MAX_SWEEP_PAGES = 200  # ... unless that needs more Scan pages than one reaper pass reads in a minute


def _storage(load: Load, warnings: list[QuotaWarning]) -> Storage:
    gib = 1024**3
    overhead = value("ddb_item_overhead_bytes")
    jobs_gb = load.jobs * (value("job_item_bytes") + overhead) / gib
    runs_retained = int(load.runs_per_month / (SECONDS_PER_MONTH / 86_400) * load.retention_days)
    runs_gb = runs_retained * (value("run_item_bytes") + overhead * (1 if load.open_index else 0.5)) / gib
    storage = Storage(round(jobs_gb, 2), runs_retained, round(runs_gb, 2), round(jobs_gb + runs_gb, 2))
    if load.open_index:
        return storage
    table_mb = max(runs_gb * 1024, 1.0)
    pages = min(MAX_SWEEP_PAGES, max(1, math.ceil(table_mb / (SWEEP_TARGET_HOURS * 60))))
    period_h = table_mb / pages / 60
    if period_h > SWEEP_TARGET_HOURS:
        warnings.append(
            QuotaWarning(
                "sweep_period",
                f"without the open index a full sweep of the {runs_gb:,.0f} GB runs table takes {period_h:,.0f} h"
                f" at {MAX_SWEEP_PAGES} pages a minute: a lost run may be found that late",
            )
        )
    sweeps_per_month = SECONDS_PER_MONTH / 3600 / period_h
    rru_per_sweep = table_mb * 1024 / 4 * 0.5  # eventually consistent Scan: 0.5 RRU per 4 KB read
    return Storage(
        storage.jobs_gb,
        runs_retained,
        storage.runs_gb,
        storage.total_gb,
        sweep_pages=pages,
        sweep_period_hours=round(period_h, 1),
        sweep_rru_per_month=round(rru_per_sweep * sweeps_per_month),
    )


def _context(
    load: Load, s: Scheduling, w: Workers, tables: list[Throughput], storage: Storage, *, stats_counters: bool
) -> dict[str, Any]:
    """CDK context parameters (``infra.config.InfraConfig`` names) for ``npx cdk deploy -c ...``."""
    context: dict[str, Any] = {
        "shards": s.due_shards,
        "open_shards": max(s.open_shards, 1),
        "scheduler_instances": s.scheduler_instances,
        "lookahead_ms": s.lookahead_ms,
        "retention_days": load.retention_days,
        "worker_batch_size": w.batch_size,
    }
    if w.kind == "fargate":
        context |= {
            "fargate_workers": True,
            "fargate_worker_count": min(w.fargate_tasks, 100),
            "fargate_worker_concurrency": min(w.fargate_in_flight_per_task, 1000),
        }
    elif w.min_pollers:  # provisioned mode: pollers kept warm; the stack sets no MaximumConcurrency then
        context |= {
            "worker_min_pollers": w.min_pollers,
            "worker_max_pollers": max(w.max_pollers, w.min_pollers),
            # the only cap in provisioned mode: min(pollers x 10, reserved) invocations run
            "worker_reserved_concurrency": w.reserved_concurrency,
        }
    else:
        context |= {
            "worker_max_concurrency": min(w.max_concurrency, int(value("lambda_sqs_max_concurrency"))),
            "worker_reserved_concurrency": w.reserved_concurrency,
        }
    if not load.open_index:
        context |= {"open_index": False, "sweep_pages": storage.sweep_pages}
    if not stats_counters:
        context["stats_counters"] = False
    warm = {t.name: t.warm_writes for t in tables if t.warm_writes}
    warm_reads = {t.name: t.warm_reads for t in tables if t.warm_reads}
    if warm or warm_reads:
        # both maps given, even empty: the app's defaults are the design target's, not this load's
        context |= {"warm_throughput": True, "warm_write_units": warm, "warm_read_units": warm_reads}
    if w.account_concurrency_needed > value("lambda_account_concurrency"):
        context["lambda_concurrency_quota"] = w.account_concurrency_needed
    return context


def deploy_command(context: dict[str, Any]) -> str:
    """The exact ``npx cdk deploy`` line for ``context``."""

    def show(v: Any) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        return json.dumps(v, separators=(",", ":")) if isinstance(v, dict) else str(v)

    return "npx cdk deploy --no-notices " + " ".join(f"-c {shlex.quote(f'{k}={show(v)}')}" for k, v in context.items())
