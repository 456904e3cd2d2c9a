"""``punctual capacity`` for humans: the report as readable sections; ``punctual burst-model``'s
description of a synthesized stack."""

from __future__ import annotations

from typing import Any

from punctual.capacity.synth import Deployment

# The "DynamoDB at the peak" table: each column's title and width; the header and the rows are
# both built from it, so a title always sits right-aligned over its numbers.
_NAME_WIDTH = 22
_TABLE_COLUMNS = (  # (title, width, the gap before it)
    ("WRU/s", 10, " "),
    ("RRU/s", 10, " "),
    ("pre-warm writes/reads", 21, "   "),
    ("quota to request", 16, "   "),
)


def render(report: dict[str, Any]) -> str:
    """The text form of :func:`punctual.capacity.report`'s result."""
    load, s, w, st, late = (report[k] for k in ("load", "scheduling", "workers", "storage", "lateness"))
    cost, per_run = report["cost"], report["per_run"]
    out = [
        f"Capacity for {load['jobs']:,} jobs, {load['peak_runs_per_second']:,} runs/s for {load['burst_seconds']} s"
        f" every {load['burst_interval_s']} s ({report['runs_per_month']:,} runs a month), {load['region']}",
        "",
        "Scheduling",
        f"  lookahead {s['lookahead_ms']:,} ms: claim {s['claim_rate_needed']:,.0f} runs/s"
        f" with {plural(s['scheduler_instances'], 'scheduler instance')}"
        f" of {s['scheduler_memory_mb']:,} MB,"
        f" at most {s['shards_per_instance']} due shards each"
        f" ({s['claim_capacity']:,.0f} runs/s)",
        f"  due shards {s['due_shards']}: {s['due_shard_wru_per_s']:,} WRU/s each at the peak"
        f" ({s['due_shard_utilization']:.0%} of a partition's 1,000)",
        (
            f"  open shards {s['open_shards']}: {s['open_shard_wru_per_s']:,} WRU/s each"
            f" ({s['open_shard_utilization']:.0%} of a partition)"
            if s["open_shards"]
            else "  open index dropped (-c open_index=false)"
        ),
        "",
        f"Per run: {per_run['write_units_total']} write units {per_run['write_units']},"
        f" {per_run['dynamodb_reads']:g} read, {per_run['sqs_requests']} SQS requests"
        + ("" if per_run["stats_counters"] else " (GET /stats run counters off: -c stats_counters=false)"),
        "",
        _table_row("DynamoDB at the peak".ljust(_NAME_WIDTH + 2), [title for title, _, _ in _TABLE_COLUMNS]),
    ]
    for t in report["tables"]:
        warm = f"{t['warm_writes']:,}/{t['warm_reads']:,}" if t["warm_writes"] or t["warm_reads"] else "-"
        quota = (
            f"{max(t['quota_wru_needed'], t['quota_rru_needed']):,}"
            if t["quota_wru_needed"] or t["quota_rru_needed"]
            else "-"
        )
        cells = [f"{t['peak_wru_per_s']:,.0f}", f"{t['peak_rru_per_s']:,.0f}", warm, quota]
        out.append(_table_row(f"  {t['name']:<{_NAME_WIDTH}}", cells))
    out += [
        "",
        f"SQS: {w['in_flight_runs']:,} messages in flight at the peak (limit {w['sqs_in_flight_limit']:,})",
        "",
        "Workers",
    ]
    if w["kind"] == "fargate":
        warm = f", {w['fargate_prewarm_tasks']} before each hour" if w["fargate_prewarm_tasks"] else ""
        out.append(
            f"  Fargate: {plural(w['fargate_tasks'], 'task')}{warm} x {w['fargate_in_flight_per_task']:,} runs in"
            f" flight each, leasing up to {w['fargate_prelease_s']} s ahead; the Lambda worker's event source"
            f" disabled; long-run queue {plural(w['fargate_long_run_tasks'], 'task')}"
        )
    else:
        out.append(
            f"  Lambda, batch {w['batch_size']}, {w['invocation_s']} s per invocation:"
            f" {w['concurrency']:,} concurrent at the peak, {w['mode']} mode"
        )
        if w["mode"] == "provisioned":
            out.append(
                f"  provisioned pollers: minimum {w['min_pollers']}, maximum {w['max_pollers']}"
                f" (up to {w['max_pollers'] * 10:,} invocations; the reservation caps them at {w['max_concurrency']:,})"
            )
        out.append(
            f"  reserved concurrency {w['reserved_concurrency']:,};"
            f" account concurrency quota {w['account_concurrency_needed']:,}"
        )
    rec = report["recommendation"]
    out += ["", "Worker tiers (the whole month with each; steady p99 start lateness)"]
    for t in report["worker_tiers"]:
        mark = "*" if t["tier"] == rec["tier"] else " "
        p99_ms = t["lateness"]["steady"].get("p99")
        shown = f"{p99_ms:,.0f} ms" if p99_ms is not None else "never"
        out.append(
            f" {mark}{t['tier']:<19} ${t['monthly_usd']:>11,.2f}  ${t['per_million_runs_usd']:>7,.3f}/M  p99 {shown:>9}"
            f"  {'meets' if t['meets_target'] else 'MISSES'} the target; {t['note']}"
        )
    out.append(f"  recommended: {rec['tier_why']}")
    out += ["", "DynamoDB capacity modes (requests or capacity a month; storage apart)"]
    for m in report["dynamodb_modes"]:
        mark = "*" if m["name"] == rec["dynamodb"] else " "
        out.append(f" {mark}{m['name']:<19} ${m['monthly_usd']:>11,.2f}  {m['note']}".rstrip())
    out.append(f"  recommended: {rec['dynamodb_why']}")
    out += [
        "",
        f"Per-owner ceilings (the busiest owner: {report['busiest_owner_runs_per_second']:,} runs/s at the peak)",
    ]
    out += [
        f"  {c['name']:<22} {c['runs_per_second']:>10,g} runs/s  {c['applies_to']}" for c in report["owner_ceilings"]
    ]
    out += [
        "",
        f"Expected start lateness (burst model; target p99 {late['target_ms']:,} ms"
        f" {'met' if late['met'] else 'NOT met'})",
        f"  first burst (cold): {_pct(late['first_burst'])}",
        f"  steady (every minute): {_pct(late['steady'])}",
        "",
        f"Storage: jobs {st['jobs_gb']:,} GB, {st['runs_retained']:,} runs kept {load['retention_days']} days"
        f" = {st['runs_gb']:,} GB"
        + (
            f"; reaper sweep {st['sweep_pages']} pages a minute, a full sweep every {st['sweep_period_hours']:g} h"
            if st["sweep_pages"]
            else ""
        ),
        "",
        f"Monthly cost ({cost['region_note']})",
    ]
    width = max([84, *(len(line["item"]) for line in cost["lines"])])  # a long item widens the column
    for line in cost["lines"]:
        out.append(f"  {line['service']:<13} {line['item']:<{width}} ${line['monthly_usd']:>12,.2f}")
    ebs = cost["eventbridge_scheduler"]
    out += [
        f"  {'total':<{width + 14}} ${cost['monthly_usd']:>12,.2f}",
        f"  per million runs: ${cost['per_million_runs_usd']:,.3f}",
        "",
        f"EventBridge Scheduler, same load: ${ebs['monthly_usd']:,.2f}/month (${ebs['per_million_runs_usd']:,.3f} per"
        f" million runs, incl. a Lambda per run to call HTTP targets and the same egress); {ebs['precision_s']} s"
        " precision;"
        f" a burst drains in {ebs['burst_drain_s_at_default_quota']:,} s at its default 1,000 invocations/s;"
        f" schedules within the 10 M default quota: {'yes' if ebs['schedules_quota_ok'] else 'NO'}; no run history",
        "",
    ]
    if report["warnings"]:
        out.append("Warnings (quota raises and limits)")
        out += [f"  [{x['code']}] {x['message']}" for x in report["warnings"]]
        out.append("")
    out += ["Deploy", f"  {report['deploy_command']}"]
    return "\n".join(out)


def plural(count: int, noun: str) -> str:
    """``1 task``, ``2 tasks``, ``1,000 scheduler instances``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def describe_deployment(d: Deployment) -> str:
    """``punctual burst-model``'s line about the synthesized stack it models."""
    if d.min_pollers:
        mode = (
            f"provisioned pollers {d.min_pollers}-{d.max_pollers}, reserved {d.reserved_concurrency:,}:"
            f" at most {plural(d.worker_concurrency, 'invocation')}"
        )
    else:
        mode = f"max {d.max_concurrency:,}"
    return (
        f"  {plural(d.scheduler_instances, 'scheduler instance')}, {plural(d.shards, 'due shard')} (at most"
        f" {d.shards_per_instance} per instance), lookahead {d.lookahead_ms:,} ms;"
        f" workers: batch {d.batch_size}, {mode}; warm throughput {d.warm_writes or 'default (4,000 writes/s)'}"
    )


def _table_row(first: str, cells: list[str]) -> str:
    return first + "".join(gap + cell.rjust(width) for cell, (_, width, gap) in zip(cells, _TABLE_COLUMNS, strict=True))


def _pct(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:,.0f} ms" for k, v in values.items()) or "no run started"
