"""The capacity model: a target load in, the AWS settings, quota raises, lateness and cost out.

Arithmetic only, from two tables: the sourced constants (``punctual.capacity.constants``) and the
per-run counts the tests measure (``punctual.capacity.counts``). The steps: the scheduler fleet
(``fleet``), the DynamoDB capacity mode (``modes``), the tables' peaks and pre-warming, the worker
tiers (``tiers``: each sized, modelled and priced), then the recommendation and its deploy line.
``docs/capacity.md`` derives each figure; ``punctual capacity`` prints them.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from typing import Any

from punctual.capacity import cost, fleet, modes, tiers
from punctual.capacity.constants import value
from punctual.capacity.counts import PerRun, claim_runs_of, claim_window_for, per_run
from punctual.capacity.extras import Extras, extras
from punctual.capacity.fargate import MAX_TASKS
from punctual.capacity.figures import CapacityPlan, QuotaWarning, Scheduling, Storage, Throughput, Workers
from punctual.capacity.load import SECONDS_PER_MONTH, Load
from punctual.capacity.owners import owner_ceilings, owner_peak, stats_counter_ceiling
from punctual.capacity.synth import Deployment
from punctual.capacity.workers import HEADROOM, IDLE_LAMBDA_WORKER, WARM_STEP, plan_deployment

claim_rate_needed = fleet.claim_rate_needed  # the formula docs/capacity.md derives, where it was first


def plan_capacity(load: Load) -> CapacityPlan:
    """Size a deployment for ``load``. Pure arithmetic plus the burst simulation; no I/O."""
    counters = stats_counters_for(load)
    window_s = claim_window_for(load.burst_interval_s)
    claim_runs = claim_runs_of(window_s, load.burst_interval_s)
    # the writes of each way of working: the Fargate tier pre-leases (a reservation, confirmed by the finish)
    by_prelease = {
        prelease: per_run(
            open_index=load.open_index,
            stats_counters=counters,
            claim_runs=claim_runs,
            prelease=prelease,
            target_duration_ms=load.target_duration_ms,
        )
        for prelease in (False, True)
    }
    counts = by_prelease[False]
    more = extras(counts)
    warnings: list[QuotaWarning] = []
    scheduling = fleet.scheduling(load, warnings)
    storage = _storage(load, warnings)
    # the capacity each tier needs: the Fargate tier pre-leases, reading each run once more
    capacities = {
        prelease: _capacity(load, scheduling, by_prelease[prelease], more, storage, prelease=prelease)
        for prelease in (False, True)
    }

    def capacity(tier: str) -> Capacity:
        return capacities[tier == "fargate"]

    options = tiers.worker_tiers(load, scheduling, more, capacity=capacity)
    chosen, tier_why = tiers.choose(load, [option for option, _ in options])
    warnings += next(w for option, w in options if option is chosen)
    chosen_capacity = capacity(chosen.tier)
    warnings += chosen_capacity.warnings
    mode, mode_why, tables = chosen_capacity.mode, chosen_capacity.why, chosen_capacity.tables
    if not chosen.lateness.met:
        warnings.append(
            QuotaWarning(
                "target_latency",
                f"expected start lateness p99 {chosen.lateness.steady.get('p99', math.inf):,.0f} ms at a steady"
                f" burst exceeds the {load.target_latency_ms:,} ms target",
            )
        )
    workers = chosen.workers
    context = _context(load, scheduling, workers, tables, storage, stats_counters=counters, mode=mode)
    if window_s:
        context["claim_window_s"] = window_s
    ceilings = owner_ceilings(load, stats_counters=counters, warnings=warnings)
    return CapacityPlan(
        load=load.model_dump(mode="json"),
        per_run=_per_run(by_prelease[workers.kind == "fargate"], more, workers),
        runs_per_month=load.runs_per_month,
        scheduling=scheduling,
        tables=tables,
        workers=workers,
        storage=storage,
        lateness=chosen.lateness,
        context=context,
        busiest_owner_runs_per_second=owner_peak(load),
        owner_ceilings=ceilings,
        warnings=warnings,
        worker_tiers=[option for option, _ in options],
        dynamodb_modes=chosen_capacity.options,
        recommendation={"tier": chosen.tier, "tier_why": tier_why, "dynamodb": mode.name, "dynamodb_why": mode_why},
        cost_lines=[*chosen_capacity.common(workers.kind == "fargate"), *chosen.lines],
    )


@dataclass(frozen=True, slots=True)
class Capacity:
    """DynamoDB for one way of working (the workers pre-lease or not): both modes priced, the one
    chosen, the tables' peaks and pre-warming in it, and the lines every tier shares with it."""

    load: Load
    scheduling: Scheduling
    storage: Storage
    extras: Extras
    options: list[modes.ModeOption]
    mode: modes.ModeOption
    why: str
    tables: list[Throughput]
    warnings: list[QuotaWarning]

    @property
    def provisioned(self) -> dict[str, int] | None:
        """The provisioned write units per table and index (None: on-demand)."""
        return {t.name: t.write_units for t in self.mode.tables} if self.mode.name == "provisioned" else None

    def common(self, fargate: bool) -> list[cost.CostLine]:
        return cost.common_lines(
            self.load,
            self.scheduling,
            self.storage,
            self.extras,
            mode_lines=self.mode.lines,
            open_index=self.load.open_index,
            fargate=fargate,
        )


def _capacity(load: Load, s: Scheduling, counts: PerRun, more: Extras, storage: Storage, *, prelease: bool) -> Capacity:
    rows = modes.table_loads(load, s, counts, more, prelease=prelease)
    options = [modes.on_demand(load, rows), modes.provisioned(load, rows)]
    mode, why = modes.choose(load, options)
    warnings: list[QuotaWarning] = []
    tables = _tables(load, s, counts, more, warnings, mode=mode, prelease=prelease)
    return Capacity(load, s, storage, more, options, mode, why, tables, warnings)


def deployment(load: Load, plan: CapacityPlan) -> Deployment:
    """The deployment ``plan``'s deploy line synthesizes, as ``punctual burst-model`` reads it back."""
    mode = next(m for m in plan.dynamodb_modes if m.name == plan.recommendation["dynamodb"])
    provisioned = {t.name: t.write_units for t in mode.tables} if mode.name == "provisioned" else None
    return plan_deployment(load, plan.scheduling, plan.workers, plan.tables, provisioned)


def _per_run(counts: PerRun, more: Extras, w: Workers) -> dict[str, Any]:
    sqs = per_run(worker="lambda" if w.kind == "lambda" else "process")
    return {
        "write_units": counts.writes.by_step,
        "write_units_total": counts.writes.total,
        "stats_counters": bool(counts.writes.finish_stats),
        "dynamodb_reads": counts.dynamodb_reads,
        "sqs_requests": round(sqs.sqs_requests, 3),
        "sqs_detail": sqs.sqs_detail,
        "retries_and_waits": more.to_dict(),
    }


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


def _tables(
    load: Load,
    s: Scheduling,
    counts: PerRun,
    more: Extras,
    warnings: list[QuotaWarning],
    *,
    mode: modes.ModeOption,
    prelease: bool,
) -> list[Throughput]:
    """Each table and index at the peak: writes/s and reads/s, pre-warming and quota raises."""
    r, c = load.peak_runs_per_second, s.claim_rate_needed
    w = counts.writes
    reaped = load.burst_runs / load.burst_interval_s  # the reaper's pace: a minute's runs over the minute
    rows: list[tuple[str, float, float]] = [
        # the worker reads each run's job: its head and its spec, counts.READS_PER_RUN read units
        ("jobs", c * w.claim_jobs_per_run, r * counts.dynamodb_reads),
        # each owned shard is queried once a second (0.5 RRU at least), plus the rows claimed
        ("jobs.due", c * w.claim_due_per_run, s.due_shards * 0.5 + c * 0.5 * modes.DUE_ROW_BYTES / 4096),
        ("jobs.by_owner", 0.0, 0.0),  # written by the API only; claims leave it alone
        ("jobs.by_calendar", 0.0, 0.0),  # job writes that name a calendar (API only)
        (
            "runs",
            # a claim window's marker: put at the claim, closed (and its runs read once) by the reaper
            c * (w.insert_runs + w.marker_per_run)
            + r * (w.lease_per_run + w.finish_runs + more.runs_write_units)
            + reaped * w.marker_per_run,
            # pre-leased runs read before their instant
            r * (modes.PRELEASE_READS if prelease else 0.0) + reaped * counts.reaper_reads,
        ),
    ]
    if load.open_index:
        # a run's own entry is deleted at its finish; a marker's, by the reaper
        finished = reaped if w.marked else r
        rows.append(
            ("runs.open", c * w.insert_open_per_run + finished * w.finish_open_per_run, s.open_shards * 0.5 / 60)
        )
    # shard leases renewed every 3 s, the owners' GET /stats counters (one ADD per finished run), rate records
    rows.append(("leases", s.due_shards / 3 + r * (w.finish_stats + more.leases_write_units), 0.0))
    rows.append(("leases.outbox", 0.0, 0.0))  # pending notifications of jobs that notify (issue 33)
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
    capacity = {t.name: t for t in mode.tables}
    return [_throughput(name, wru, rru, warnings, capacity.get(name)) for name, wru, rru in rows]


def _throughput(
    name: str, wru: float, rru: float, warnings: list[QuotaWarning], provisioned: modes.Provisioned | None
) -> Throughput:
    """Pre-warm what the burst needs beyond what the table takes at once: a new on-demand table's
    4,000 writes and 12,000 reads a second, or a provisioned table's partitions (1,000 WCU and
    3,000 RCU each) for its provisioned capacity."""
    if provisioned is None:
        ready_w, ready_r = value("ddb_warm_writes"), value("ddb_warm_reads")
    else:
        ready_w = value("ddb_partition_wru") * math.ceil(provisioned.write_units / value("ddb_partition_wru"))
        ready_r = value("ddb_partition_rru") * math.ceil(provisioned.read_units / value("ddb_partition_rru"))
    warm_w, warm_r = _above(wru * HEADROOM, ready_w), _above(rru * HEADROOM, ready_r)
    quota_w = _above(wru * HEADROOM, value("ddb_table_quota_wru"))
    quota_r = _above(rru * HEADROOM, value("ddb_table_quota_rru"))
    if warm_w or warm_r:
        warm = [f"{units:,} {kind}/s" for units, kind in ((warm_w, "writes"), (warm_r, "reads")) if units]
        doublings = math.ceil(math.log2(max(wru / value("ddb_warm_writes"), rru / value("ddb_warm_reads"), 1.0)))
        warnings.append(
            QuotaWarning(
                "ddb_warm_throughput",
                f"{name}: peak {wru:,.0f} WRU/s, {rru:,.0f} RRU/s exceeds what the table takes at once;"
                f" pre-warm to {' and '.join(warm)} (a one-time charge), or expect throttling for"
                f" ~{doublings * int(value('ddb_growth_minutes'))} min (on-demand doubling its peak) or until"
                " the partitions split (provisioned)",
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


# -- storage, deploy -------------------------------------------------------------------------------

SWEEP_TARGET_HOURS = 24  # without the open index, sweep the whole runs table once a day ...
MAX_SWEEP_PAGES = 200  # ... unless that needs more Scan pages than one reaper pass reads in a minute


def _storage(load: Load, warnings: list[QuotaWarning]) -> Storage:
    gib = 1024**3
    overhead = value("ddb_item_overhead_bytes")
    # a job is two items (punctual.engines.aws.job_items): its head, with its due and by_owner index
    # entries, and its spec, which holds the payload; each item and index entry has the overhead
    job_bytes = value("job_head_bytes") + value("job_spec_bytes") + load.payload_bytes + 4 * overhead
    jobs_gb = load.jobs * job_bytes / gib
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
                f" at {MAX_SWEEP_PAGES} pages a minute: a lost run may be found that late (and a run still open"
                " past its deadline_s alert that late)",
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
    load: Load,
    s: Scheduling,
    w: Workers,
    tables: list[Throughput],
    storage: Storage,
    *,
    stats_counters: bool,
    mode: modes.ModeOption,
) -> dict[str, Any]:
    """CDK context parameters (``infra.config.InfraConfig`` names) for ``npx cdk deploy -c ...``."""
    context: dict[str, Any] = {
        "shards": s.due_shards,
        "open_shards": max(s.open_shards, 1),
        "scheduler_instances": s.scheduler_instances,
        "scheduler_memory_mb": s.scheduler_memory_mb,
        "lookahead_ms": s.lookahead_ms,
        "retention_days": load.retention_days,
        "worker_batch_size": w.batch_size,
    }
    if w.kind == "fargate":
        fargate_max = max(w.fargate_tasks, w.fargate_prewarm_tasks)
        context |= {
            "fargate_workers": True,
            "lambda_workers": False,  # the Lambda worker's event source is deployed disabled
            "worker_max_concurrency": IDLE_LAMBDA_WORKER,  # ... and reserves the least
            "fargate_worker_count": w.fargate_tasks,
            "fargate_worker_max_count": min(MAX_TASKS, 2 * fargate_max),  # queue depth may add as many again
            "fargate_worker_concurrency": w.fargate_in_flight_per_task,
            "fargate_prelease_s": w.fargate_prelease_s,
            "fargate_long_run_count": w.fargate_long_run_tasks,
        }
        if w.fargate_prewarm_tasks:
            context["fargate_prewarm_count"] = w.fargate_prewarm_tasks
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
    if mode.name == "provisioned":
        context |= {
            "dynamodb_billing": "provisioned",
            "provisioned_write_units": {t.name: t.write_units for t in mode.tables},
            "provisioned_read_units": {t.name: t.read_units for t in mode.tables},
        }
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
