"""Job and run commands for humans: ``punctual jobs ...``, ``punctual runs JOB_ID``, ``punctual run RUN_ID``,
``punctual runs replay ...`` (``punctual.cli.replay``).

They talk to the HTTP API (``punctual dev`` locally, API Gateway on AWS) like any other client:
readable tables by default, the API's JSON with ``--json``. An API error prints its message
and the fields at fault and exits 1; an unreachable API says so and exits 1.

The API's address comes from ``--api-url`` (env ``PUNCTUAL_URL``, default http://127.0.0.1:8080)
and the key from ``--api-key`` (env ``PUNCTUAL_API_KEY``, else the key ``punctual dev`` keeps in
``<data dir>/api-key``). ``--url`` is the http *target* of ``jobs create``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from punctual.cli import dependency_tree, follow, output, replay
from punctual.cli.client import DEFAULT_URL, ApiError, Client, CliError, api_key, api_url
from punctual.errors import HasDependents

# -- registration ---------------------------------------------------------------------------------


def common_flags() -> argparse.ArgumentParser:
    """The flags every command that talks to the API takes (``--api-url``, ``--api-key``, ``--json``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--api-url", default=None, help=f"API base URL (env PUNCTUAL_URL; default {DEFAULT_URL})")
    common.add_argument("--api-key", default=None, help="API key (env PUNCTUAL_API_KEY; default: the punctual dev key)")
    common.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


def register(subparsers: Any) -> None:
    common = common_flags()

    jobs: argparse.ArgumentParser = subparsers.add_parser("jobs", help="create, list, inspect and control jobs")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_create(actions, common)
    listing = actions.add_parser("list", parents=[common], help="list your jobs, newest first")
    listing.add_argument("--status", choices=["active", "paused", "completed", "deleted"], help="only this status")
    listing.add_argument("--limit", type=int, default=50, help="page size (1-100)")
    listing.add_argument("--cursor", help="next page (printed under the table)")
    listing.set_defaults(func=_command(cmd_jobs_list))
    for name, func, text in (
        ("get", cmd_jobs_get, "show a job"),
        ("pause", cmd_jobs_pause, "pause a job"),
        ("resume", cmd_jobs_resume, "resume a paused job (missed times follow its catch-up policy)"),
        ("trigger", cmd_jobs_trigger, "run a job now"),
        ("delete", cmd_jobs_delete, "delete a job"),
        ("graph", cmd_jobs_graph, "show the jobs a job depends on and the jobs that depend on it, as a tree"),
    ):
        action = actions.add_parser(name, parents=[common], help=text)
        action.add_argument("job_id", metavar="JOB_ID")
        if name == "delete":
            action.add_argument("--force", action="store_true", help="even if other jobs depend on it")
        action.set_defaults(func=_command(func))

    preview = actions.add_parser("preview", parents=[common], help="a job's next times: which run, shift or skip, why")
    preview.add_argument("job_id", metavar="JOB_ID")
    preview.add_argument("--count", type=int, default=20, help="items to list (1-100)")
    preview.set_defaults(func=_command(cmd_jobs_preview))

    runs: argparse.ArgumentParser = subparsers.add_parser(
        "runs",
        parents=[common],
        help="list a job's runs, newest first (--follow: as they happen); or: punctual runs replay --from 6h",
    )
    runs.add_argument("job_id", metavar="JOB_ID", help="the job; or replay, to start runs again (--from, --to, ...)")
    runs.add_argument("--state", action="append", help="only runs in this state (repeatable)")
    runs.add_argument("--limit", type=int, default=50, help="page size (1-100)")
    runs.add_argument("--cursor", help="next page (printed under the table)")
    runs.add_argument(
        "--follow", action="store_true", help="keep printing new and changed runs, oldest first, until Ctrl-C"
    )
    runs.add_argument(
        "--interval", type=float, default=follow.DEFAULT_INTERVAL_S, help="with --follow: seconds between polls"
    )
    runs.add_argument("--for", dest="for_s", type=float, metavar="SECONDS", help="with --follow: stop after this long")
    replay.add_arguments(runs)
    runs.set_defaults(func=_command(cmd_runs))

    run: argparse.ArgumentParser = subparsers.add_parser("run", parents=[common], help="show a run and its attempts")
    run.add_argument("run_id", metavar="RUN_ID")
    run.set_defaults(func=_command(cmd_run))


def _add_create(actions: Any, common: argparse.ArgumentParser) -> None:
    create: argparse.ArgumentParser = actions.add_parser(
        "create", parents=[common], help="create a job (flags override fields of --file)"
    )
    create.add_argument("--file", type=Path, help="a JSON job spec (the body of POST /jobs)")
    create.add_argument("--name", help="job name")
    when = create.add_mutually_exclusive_group()
    when.add_argument("--schedule", help="cron expression, e.g. '*/5 * * * *'")
    when.add_argument("--run-at", help="one-time: ISO 8601 time with offset, e.g. 2027-01-01T09:00:00+01:00")
    when.add_argument("--run-in", type=int, metavar="SECONDS", help="one-time: this many seconds from now")
    when.add_argument("--after", action="append", metavar="JOB_ID", help="run after this job's runs (repeatable)")
    create.add_argument("--when", choices=["succeeded", "finished", "failed"], help="with --after: which runs count")
    create.add_argument("--timezone", help="IANA zone the cron schedule is read in (default UTC)")
    create.add_argument("--dst-repeated", choices=["once_first", "once_last", "twice"], help="a repeated wall time")
    create.add_argument("--dst-skipped", choices=["shift", "skip"], help="a wall time the clocks skip")
    create.add_argument("--calendar", metavar="NAME", help="one of your calendars: its excluded days skip or move runs")
    create.add_argument(
        "--calendar-mode", choices=["skip", "next_business_day", "previous_business_day"], help="with --calendar"
    )
    create.add_argument("--url", help="http target: the URL that receives the payload")
    create.add_argument("--method", choices=["POST", "PUT", "PATCH", "GET", "DELETE"], help="http target method")
    create.add_argument("--payload", help="JSON payload sent to the target")
    create.add_argument("--timeout", type=int, help="seconds a run may take (timeout_s)")
    create.add_argument(
        "--completion", choices=["response", "callback"], help="callback: a 202 accepts the work, the target reports"
    )
    create.add_argument("--heartbeat-timeout-s", type=int, help="with --completion callback: silence that times out")
    create.add_argument("--max-retries", type=int, help="retries after a failed attempt")
    create.add_argument("--priority", type=int, help="0-9 (default 5): higher first among your runs at a limit")
    create.add_argument(
        "--limit",
        action="append",
        dest="limits",
        metavar="key=KEY,max_concurrency=N|max_runs_per_minute=M",
        help="a keyed limit (repeatable); KEY may hold {job_id} and {payload.<field>}, e.g."
        " --limit 'key=customer:{payload.customer_id},max_concurrency=2'",
    )
    create.add_argument("--idempotency-key", help="retry-safe create: the same key never creates two jobs")
    create.set_defaults(func=_command(cmd_jobs_create))


def _command(func: Callable[[Client, argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: build the client, print API and connection errors readably, exit 1 on them."""

    def run(args: argparse.Namespace) -> int:
        client = Client(api_url(args), api_key(args))
        try:
            func(client, args)
        except ApiError as exc:
            if getattr(args, "json", False):  # scripts get the API's error object, as JSON
                error = {"status": exc.status, "code": exc.code, "message": exc.message, "details": exc.details}
                print(json.dumps({"error": error}))
            else:
                output.print_api_error(exc)
            return 1
        except CliError as exc:
            if getattr(args, "json", False):
                print(json.dumps({"error": {"code": "cli_error", "message": str(exc)}}))
            else:
                print(f"punctual: {exc}", file=sys.stderr)
            return 1
        finally:
            client.close()
        return 0

    return run


command = _command  # the wrapper every API command shares (punctual.cli.calendars too)


# -- commands -------------------------------------------------------------------------------------


def cmd_jobs_create(client: Client, args: argparse.Namespace) -> None:
    spec = build_spec(args)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    job = client.call("POST", "/jobs", body=spec, headers=headers)
    output.emit(args, job, lambda: output.print_job(job))


def cmd_jobs_list(client: Client, args: argparse.Namespace) -> None:
    params = {"limit": args.limit, "status": args.status, "cursor": args.cursor}
    page = client.call("GET", "/jobs", params={k: v for k, v in params.items() if v is not None})
    output.emit(args, page, lambda: output.print_page(page, output.JOB_COLUMNS, "jobs"))


def cmd_jobs_get(client: Client, args: argparse.Namespace) -> None:
    job = client.call("GET", f"/jobs/{args.job_id}")
    output.emit(args, job, lambda: output.print_job(job))


def cmd_jobs_pause(client: Client, args: argparse.Namespace) -> None:
    job = client.call("POST", f"/jobs/{args.job_id}/pause")
    output.emit(args, job, lambda: print(f"Paused {job['id']} ({job['name']})."))


def cmd_jobs_resume(client: Client, args: argparse.Namespace) -> None:
    job = client.call("POST", f"/jobs/{args.job_id}/resume")
    output.emit(args, job, lambda: print(f"Resumed {job['id']} ({job['name']}); next run {job['next_run_at']}."))


def cmd_jobs_trigger(client: Client, args: argparse.Namespace) -> None:
    run = client.call("POST", f"/jobs/{args.job_id}/trigger")
    output.emit(
        args, run, lambda: print(f"Triggered {run['run_id']} ({run['state']}); see: punctual run {run['run_id']}")
    )


def cmd_jobs_delete(client: Client, args: argparse.Namespace) -> None:
    try:
        client.call("DELETE", f"/jobs/{args.job_id}", params={"force": "true"} if args.force else None)
    except ApiError as exc:
        if exc.code == HasDependents.code:  # the API names its query parameter; here the flag is --force
            exc.message = exc.message.replace(HasDependents.FORCE, "--force")
        raise
    output.emit(args, {"id": args.job_id, "deleted": True}, lambda: print(f"Deleted {args.job_id}."))


def cmd_jobs_graph(client: Client, args: argparse.Namespace) -> None:
    graph = client.call("GET", f"/jobs/{args.job_id}/graph")
    output.emit(args, graph, lambda: print(dependency_tree.render(graph)))


def cmd_jobs_preview(client: Client, args: argparse.Namespace) -> None:
    listed = client.call("GET", f"/jobs/{args.job_id}/preview", params={"count": args.count})
    output.emit(args, listed, lambda: output.print_preview(listed))


def cmd_runs(client: Client, args: argparse.Namespace) -> None:
    if args.job_id == replay.REPLAY:
        replay.cmd_replay(client, args)
        return
    replay.refuse_replay_flags(args)
    params: dict[str, Any] = {"limit": args.limit}
    if args.state:
        params["state"] = args.state
    if args.follow and (args.cursor or args.interval <= 0 or (args.for_s is not None and args.for_s <= 0)):
        raise CliError("--follow follows the newest runs: no --cursor, and --interval and --for above 0")
    if args.follow:
        session = follow.Follow(client, args.job_id, params, as_json=args.json)
        follow.follow(session, interval_s=args.interval, for_s=args.for_s)
        return
    if args.cursor:
        params["cursor"] = args.cursor
    page = client.call("GET", f"/jobs/{args.job_id}/runs", params=params)
    output.emit(args, page, lambda: output.print_page(page, output.RUN_COLUMNS, "runs"))


def cmd_run(client: Client, args: argparse.Namespace) -> None:
    run = client.call("GET", f"/runs/{args.run_id}")
    output.emit(args, run, lambda: output.print_run(run))


# -- input ----------------------------------------------------------------------------------------


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs body from --file and the flags (flags win). Raises :class:`CliError`."""
    spec: dict[str, Any] = {}
    if args.file is not None:
        try:
            loaded = json.loads(args.file.read_text())
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read {args.file}: {exc}") from None
        if not isinstance(loaded, dict):
            raise CliError(f"{args.file} must hold a JSON object (a job spec)")
        spec.update(loaded)
    run_at = args.run_at
    if args.run_in is not None:  # the API wants an instant with an offset: computed here, in UTC
        run_at = (datetime.now(UTC) + timedelta(seconds=args.run_in)).isoformat(timespec="seconds")
    flags = {
        "name": args.name,
        "schedule": args.schedule,
        "run_at": run_at,
        "timezone": args.timezone,
        "dst_repeated": args.dst_repeated,
        "dst_skipped": args.dst_skipped,
        "timeout_s": args.timeout,
        "max_retries": args.max_retries,
        "priority": args.priority,
        "completion": args.completion,
        "heartbeat_timeout_s": args.heartbeat_timeout_s,
    }
    spec.update({k: v for k, v in flags.items() if v is not None})
    if args.when is not None and not args.after:  # --when says which upstream runs release the job
        if args.schedule is not None or run_at is not None or not isinstance(spec.get("depends_on"), dict):
            raise CliError("--when applies only to a dependent job: give --after JOB_ID (or a --file with depends_on)")
        spec["depends_on"] = {**spec["depends_on"], "when": args.when}
    if args.after:
        spec["depends_on"] = {"jobs": args.after, "when": args.when or "succeeded"}
    for given, others in ((args.schedule, ("run_at", "depends_on")), (run_at, ("schedule", "depends_on"))):
        if given is not None:
            for name in others:
                spec.pop(name, None)
    if args.after:
        spec.pop("schedule", None)
        spec.pop("run_at", None)
    if args.calendar is not None:
        spec["calendar"] = {"name": args.calendar, "mode": args.calendar_mode or "skip"}
    if args.limits:
        spec["limits"] = [parse_limit(text) for text in args.limits]
    if args.url is not None:
        spec["target"] = {"type": "http", "url": args.url, "method": args.method or "POST"}
    if args.payload is not None:
        try:
            spec["payload"] = json.loads(args.payload)
        except ValueError as exc:
            raise CliError(f"--payload is not valid JSON: {exc}") from None
    return spec


LIMIT_NUMBERS = ("max_concurrency", "max_runs_per_minute")


def parse_limit(text: str) -> dict[str, Any]:
    """One ``--limit``: ``key=KEY`` and ``max_concurrency=N`` and/or ``max_runs_per_minute=M``, joined
    by commas (a key never holds a comma). The API checks the key and the numbers' ranges. Raises
    :class:`CliError` for a part that is not ``name=value`` of those names, or a number that is not one."""
    limit: dict[str, Any] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in ("key", *LIMIT_NUMBERS) or name in limit:
            raise CliError(f"--limit {text!r}: expected key=KEY,max_concurrency=N and/or max_runs_per_minute=M")
        if name == "key":
            limit[name] = value
            continue
        try:
            limit[name] = int(value)
        except ValueError:
            raise CliError(f"--limit {text!r}: {name} must be a whole number, not {value!r}") from None
    if "key" not in limit:
        raise CliError(f"--limit {text!r}: give key=KEY")
    return limit
