"""What the job and run commands print for humans: aligned tables, field lists, API errors."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from punctual.cli.client import ApiError

JOB_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("ID", lambda j: j["id"]),
    ("NAME", lambda j: j["name"]),
    ("STATUS", lambda j: j["status"]),
    ("SCHEDULE", lambda j: _when(j)),  # noqa: PLW0108 - _when is defined further down
    ("NEXT RUN", lambda j: j.get("next_run_at") or "-"),
]
RUN_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("RUN ID", lambda r: r["run_id"]),
    ("SCHEDULED", lambda r: r["scheduled_at"]),
    ("STATE", lambda r: r["state"]),
    ("TRIGGER", lambda r: r["trigger"]),
    ("ATTEMPT", lambda r: r["attempt"]),
    ("FINISHED", lambda r: r.get("finished_at") or "-"),
    ("NOTE", lambda r: _run_note(r)[:60]),  # why it waits, or until when an accepted run lives
]
PREVIEW_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("SCHEDULE TIME", lambda i: i["local"]),  # the wall time the schedule names, in the job's zone
    ("RUNS AT", lambda i: i.get("at") or "-"),
    ("FATE", lambda i: i["fate"]),
    ("WHY", lambda i: i.get("detail") or "-"),
]
_ATTEMPT_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("#", lambda a: a["number"]),
    ("OUTCOME", lambda a: a["outcome"]),
    ("STARTED", lambda a: a.get("started_at") or "-"),
    ("FINISHED", lambda a: a.get("finished_at") or "-"),
    ("HTTP", lambda a: a.get("status_code") or "-"),
    ("WORKER", lambda a: a.get("worker_id") or "-"),
    ("WAITED FOR", lambda a: a.get("waited") or "-"),
    ("ERROR", lambda a: (a.get("error") or "-")[:60]),
]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, Callable[[dict[str, Any]], Any]]]) -> str:
    """Rows as aligned text columns under a header."""
    cells = [[str(get(row)) for _, get in columns] for row in rows]
    widths = [max([len(title)] + [len(r[i]) for r in cells]) for i, (title, _) in enumerate(columns)]
    lines = ["  ".join(t.ljust(w) for (t, _), w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(args: argparse.Namespace, data: Any, readable: Callable[[], None]) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        readable()


def print_page(page: dict[str, Any], columns: Any, noun: str) -> None:
    items = page.get("items") or []
    print(table(items, columns) if items else f"No {noun}.")
    if page.get("next_cursor"):
        print(f"\nMore: --cursor {page['next_cursor']}")


def print_job(job: dict[str, Any]) -> None:
    target = job.get("target") or {}
    fields = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("status", job["status"]),
        ("schedule", _when(job)),
        *[(f"dst {name}", job[f"dst_{name}"]) for name in ("repeated", "skipped") if job.get(f"dst_{name}")],
        *([("calendar", "{name} ({mode})".format(**job["calendar"]))] if job.get("calendar") else []),
        ("next run", job.get("next_run_at") or "-"),
        ("last run", job.get("last_run_at") or "-"),
        ("target", target.get("url") or target.get("type")),
        ("timeout", f"{job['timeout_s']} s"),
        ("retries", job["max_retries"]),
        *([("paused after", job["paused_after"])] if job.get("paused_after") else []),
        ("priority", job.get("priority", 5)),
        ("limits", ", ".join(limit_text(limit) for limit in job.get("limits") or []) or "-"),
        ("payload", json.dumps(job.get("payload"))),
        ("created", job["created_at"]),
        ("updated", job["updated_at"]),
    ]
    _print_fields(fields)


def print_preview(listed: dict[str, Any]) -> None:
    items = listed.get("items") or []
    print(f"Next times of {listed['job_id']} ({listed['timezone']}):")
    print(table(items, PREVIEW_COLUMNS) if items else "None: it has no times of its own (or none are left).")


def limit_text(limit: dict[str, Any]) -> str:
    """A keyed limit as ``--limit`` takes it: ``key=customer:{payload.id},max_concurrency=2``."""
    numbers = [f"{name}={limit[name]}" for name in ("max_concurrency", "max_runs_per_minute") if limit.get(name)]
    return ",".join([f"key={limit['key']}", *numbers])


def print_run(run: dict[str, Any]) -> None:
    fields = [
        ("run", run["run_id"]),
        ("job", run["job_id"]),
        ("scheduled", run["scheduled_at"]),
        ("state", run["state"]),
        ("trigger", run["trigger"]),
        ("attempt", run["attempt"]),
        ("started", run.get("started_at") or "-"),
        ("finished", run.get("finished_at") or "-"),
        ("note", run.get("note") or "-"),
    ]
    if run.get("replay_of"):
        fields.append(("replay of", run["replay_of"]))
    if run.get("heartbeat_deadline_at"):  # accepted: a callback job's target works on it
        fields.append(("heartbeat due", run["heartbeat_deadline_at"]))
    if run.get("heartbeat_at"):
        fields.append(("last heartbeat", f"{run['heartbeat_at']} {run.get('progress') or ''}".rstrip()))
    _print_fields(fields)
    attempts = run.get("attempts") or []
    print("\nAttempts:\n" + table(attempts, _ATTEMPT_COLUMNS) if attempts else "\nNo attempts yet.")
    notified = run.get("notification")
    if notified:
        tries = ", ".join(f"{t['at']} {t.get('status_code') or t.get('error') or '-'}" for t in notified["tries"])
        events = ", ".join(notified["events"])
        print(f"\nNotified ({events}) {notified['url']}: {notified['state']}; tries: {tries or '-'}")


def _run_note(run: dict[str, Any]) -> str:
    """Why a run waits ("waiting: max_runs_per_minute 6"), or, accepted, until when and its progress."""
    if run.get("heartbeat_deadline_at"):
        progress = f" ({run['progress']})" if run.get("progress") else ""
        return f"heartbeat due {run['heartbeat_deadline_at']}{progress}"
    return str(run.get("note") or "-")


def _print_fields(fields: Sequence[tuple[str, Any]]) -> None:
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        print(f"{name.ljust(width)}  {value}")


def _when(job: dict[str, Any]) -> str:
    if job.get("schedule"):
        zone = job.get("timezone") or "UTC"
        return job["schedule"] if zone == "UTC" else f"{job['schedule']} ({zone})"
    if job.get("depends_on"):
        after = job["depends_on"]
        return f"after {', '.join(after['jobs'])} ({after['when']})"
    return f"once at {job.get('run_at')}"


def print_api_error(exc: ApiError) -> None:
    print(f"punctual: {exc.message} ({exc.code}, HTTP {exc.status})", file=sys.stderr)
    for detail in exc.details:
        if detail.get("message") != exc.message:
            print(f"  {detail.get('field') or '-'}: {detail.get('message')}", file=sys.stderr)
    if exc.status == 401:
        print("  hint: pass --api-key or set PUNCTUAL_API_KEY (punctual dev prints its key)", file=sys.stderr)
