"""Job and run commands for humans: ``punctual jobs ...``, ``punctual runs JOB_ID``, ``punctual run RUN_ID``.

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
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from punctual.api.auth import KEY_FILE
from punctual.cli import dependency_tree

DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT_S = 15.0


class ApiError(Exception):
    """The API answered with an error body."""

    def __init__(self, status: int, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        self.status = status
        self.code = str(body.get("code", "http_error"))
        self.message = str(body.get("message", f"HTTP {status}"))
        self.details = [d for d in body.get("details") or [] if isinstance(d, dict)]
        super().__init__(self.message)


class CliError(Exception):
    """A problem on our side of the wire (unreachable API, unreadable --file)."""


class Client:
    """A small JSON client for the Punctual API."""

    def __init__(self, url: str, api_key: str | None, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, *, body: Any = None, params: Any = None, headers: Any = None) -> Any:
        """The decoded JSON answer (None for 204). Raises :class:`ApiError` or :class:`CliError`."""
        try:
            response = self._http.request(method, path, json=body, params=params, headers=headers)
        except httpx.ConnectError:
            raise CliError(
                f"cannot reach the Punctual API at {self.url}: is `punctual dev` running? "
                "(or set --api-url / PUNCTUAL_URL)"
            ) from None
        except httpx.TimeoutException:
            raise CliError(f"the Punctual API at {self.url} did not answer within {TIMEOUT_S:.0f} s") from None
        except httpx.HTTPError as exc:
            raise CliError(f"talking to {self.url} failed: {exc}") from None
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_error:
            raise ApiError(response.status_code, data)
        return data

    def close(self) -> None:
        self._http.close()


# -- registration ---------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--api-url", default=None, help=f"API base URL (env PUNCTUAL_URL; default {DEFAULT_URL})")
    common.add_argument("--api-key", default=None, help="API key (env PUNCTUAL_API_KEY; default: the punctual dev key)")
    common.add_argument("--json", action="store_true", help="print the API's JSON")

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

    runs: argparse.ArgumentParser = subparsers.add_parser("runs", parents=[common], help="list a job's runs")
    runs.add_argument("job_id", metavar="JOB_ID")
    runs.add_argument("--state", action="append", help="only runs in this state (repeatable)")
    runs.add_argument("--limit", type=int, default=50, help="page size (1-100)")
    runs.add_argument("--cursor", help="next page (printed under the table)")
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
    create.add_argument("--url", help="http target: the URL that receives the payload")
    create.add_argument("--method", choices=["POST", "PUT", "PATCH", "GET", "DELETE"], help="http target method")
    create.add_argument("--payload", help="JSON payload sent to the target")
    create.add_argument("--timeout", type=int, help="seconds a run may take (timeout_s)")
    create.add_argument("--max-retries", type=int, help="retries after a failed attempt")
    create.add_argument("--idempotency-key", help="retry-safe create: the same key never creates two jobs")
    create.set_defaults(func=_command(cmd_jobs_create))


def _command(func: Callable[[Client, argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: build the client, print API and connection errors readably, exit 1 on them."""

    def run(args: argparse.Namespace) -> int:
        client = Client(_api_url(args), _api_key(args))
        try:
            func(client, args)
        except ApiError as exc:
            if getattr(args, "json", False):  # scripts get the API's error object, as JSON
                error = {"status": exc.status, "code": exc.code, "message": exc.message, "details": exc.details}
                print(json.dumps({"error": error}))
            else:
                _print_api_error(exc)
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


# -- commands -------------------------------------------------------------------------------------


def cmd_jobs_create(client: Client, args: argparse.Namespace) -> None:
    spec = build_spec(args)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    job = client.call("POST", "/jobs", body=spec, headers=headers)
    _emit(args, job, lambda: _print_job(job))


def cmd_jobs_list(client: Client, args: argparse.Namespace) -> None:
    params = {"limit": args.limit, "status": args.status, "cursor": args.cursor}
    page = client.call("GET", "/jobs", params={k: v for k, v in params.items() if v is not None})
    _emit(args, page, lambda: _print_page(page, _JOB_COLUMNS, "jobs"))


def cmd_jobs_get(client: Client, args: argparse.Namespace) -> None:
    job = client.call("GET", f"/jobs/{args.job_id}")
    _emit(args, job, lambda: _print_job(job))


def cmd_jobs_pause(client: Client, args: argparse.Namespace) -> None:
    job = client.call("POST", f"/jobs/{args.job_id}/pause")
    _emit(args, job, lambda: print(f"Paused {job['id']} ({job['name']})."))


def cmd_jobs_resume(client: Client, args: argparse.Namespace) -> None:
    job = client.call("POST", f"/jobs/{args.job_id}/resume")
    _emit(args, job, lambda: print(f"Resumed {job['id']} ({job['name']}); next run {job['next_run_at']}."))


def cmd_jobs_trigger(client: Client, args: argparse.Namespace) -> None:
    run = client.call("POST", f"/jobs/{args.job_id}/trigger")
    _emit(args, run, lambda: print(f"Triggered {run['run_id']} ({run['state']}); see: punctual run {run['run_id']}"))


def cmd_jobs_delete(client: Client, args: argparse.Namespace) -> None:
    client.call("DELETE", f"/jobs/{args.job_id}", params={"force": "true"} if args.force else None)
    _emit(args, {"id": args.job_id, "deleted": True}, lambda: print(f"Deleted {args.job_id}."))


def cmd_jobs_graph(client: Client, args: argparse.Namespace) -> None:
    graph = client.call("GET", f"/jobs/{args.job_id}/graph")
    _emit(args, graph, lambda: print(dependency_tree.render(graph)))


def cmd_runs(client: Client, args: argparse.Namespace) -> None:
    params: dict[str, Any] = {"limit": args.limit}
    if args.state:
        params["state"] = args.state
    if args.cursor:
        params["cursor"] = args.cursor
    page = client.call("GET", f"/jobs/{args.job_id}/runs", params=params)
    _emit(args, page, lambda: _print_page(page, _RUN_COLUMNS, "runs"))


def cmd_run(client: Client, args: argparse.Namespace) -> None:
    run = client.call("GET", f"/runs/{args.run_id}")
    _emit(args, run, lambda: _print_run(run))


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
        "timeout_s": args.timeout,
        "max_retries": args.max_retries,
    }
    spec.update({k: v for k, v in flags.items() if v is not None})
    if args.after:
        spec["depends_on"] = {"jobs": args.after, "when": args.when or "succeeded"}
    for given, others in ((args.schedule, ("run_at", "depends_on")), (run_at, ("schedule", "depends_on"))):
        if given is not None:
            for name in others:
                spec.pop(name, None)
    if args.after:
        spec.pop("schedule", None)
        spec.pop("run_at", None)
    if args.url is not None:
        spec["target"] = {"type": "http", "url": args.url, "method": args.method or "POST"}
    if args.payload is not None:
        try:
            spec["payload"] = json.loads(args.payload)
        except ValueError as exc:
            raise CliError(f"--payload is not valid JSON: {exc}") from None
    return spec


def _api_url(args: argparse.Namespace) -> str:
    return str(args.api_url or os.environ.get("PUNCTUAL_URL") or DEFAULT_URL)


def _api_key(args: argparse.Namespace) -> str | None:
    if args.api_key or os.environ.get("PUNCTUAL_API_KEY"):
        return str(args.api_key or os.environ["PUNCTUAL_API_KEY"])
    path = Path(os.environ.get("PUNCTUAL_DATA_DIR") or ".punctual") / KEY_FILE
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


# -- output ---------------------------------------------------------------------------------------

_JOB_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("ID", lambda j: j["id"]),
    ("NAME", lambda j: j["name"]),
    ("STATUS", lambda j: j["status"]),
    ("SCHEDULE", lambda j: _when(j)),  # noqa: PLW0108 - _when is defined further down
    ("NEXT RUN", lambda j: j.get("next_run_at") or "-"),
]
_RUN_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("RUN ID", lambda r: r["run_id"]),
    ("SCHEDULED", lambda r: r["scheduled_at"]),
    ("STATE", lambda r: r["state"]),
    ("TRIGGER", lambda r: r["trigger"]),
    ("ATTEMPT", lambda r: r["attempt"]),
    ("FINISHED", lambda r: r.get("finished_at") or "-"),
]
_ATTEMPT_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("#", lambda a: a["number"]),
    ("OUTCOME", lambda a: a["outcome"]),
    ("STARTED", lambda a: a.get("started_at") or "-"),
    ("FINISHED", lambda a: a.get("finished_at") or "-"),
    ("HTTP", lambda a: a.get("status_code") or "-"),
    ("WORKER", lambda a: a.get("worker_id") or "-"),
    ("ERROR", lambda a: (a.get("error") or "-")[:60]),
]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, Callable[[dict[str, Any]], Any]]]) -> str:
    """Rows as aligned text columns under a header."""
    cells = [[str(get(row)) for _, get in columns] for row in rows]
    widths = [max([len(title)] + [len(r[i]) for r in cells]) for i, (title, _) in enumerate(columns)]
    lines = ["  ".join(t.ljust(w) for (t, _), w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _emit(args: argparse.Namespace, data: Any, readable: Callable[[], None]) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        readable()


def _print_page(page: dict[str, Any], columns: Any, noun: str) -> None:
    items = page.get("items") or []
    print(table(items, columns) if items else f"No {noun}.")
    if page.get("next_cursor"):
        print(f"\nMore: --cursor {page['next_cursor']}")


def _print_job(job: dict[str, Any]) -> None:
    target = job.get("target") or {}
    fields = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("status", job["status"]),
        ("schedule", _when(job)),
        ("next run", job.get("next_run_at") or "-"),
        ("last run", job.get("last_run_at") or "-"),
        ("target", target.get("url") or target.get("type")),
        ("timeout", f"{job['timeout_s']} s"),
        ("retries", job["max_retries"]),
        ("payload", json.dumps(job.get("payload"))),
        ("created", job["created_at"]),
        ("updated", job["updated_at"]),
    ]
    _print_fields(fields)


def _print_run(run: dict[str, Any]) -> None:
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
    _print_fields(fields)
    attempts = run.get("attempts") or []
    print("\nAttempts:\n" + table(attempts, _ATTEMPT_COLUMNS) if attempts else "\nNo attempts yet.")


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


def _print_api_error(exc: ApiError) -> None:
    print(f"punctual: {exc.message} ({exc.code}, HTTP {exc.status})", file=sys.stderr)
    for detail in exc.details:
        if detail.get("message") != exc.message:
            print(f"  {detail.get('field') or '-'}: {detail.get('message')}", file=sys.stderr)
    if exc.status == 401:
        print("  hint: pass --api-key or set PUNCTUAL_API_KEY (punctual dev prints its key)", file=sys.stderr)
