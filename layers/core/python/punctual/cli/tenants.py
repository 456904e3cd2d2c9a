"""``punctual tenants set|get|list``: an operator's view of per-owner limits.

These commands talk to the engine directly (like ``punctual worker``), with the operator's own
access to the store: the embedded file, or the DynamoDB tables on AWS. Owners never use them;
they read their own limits at ``GET /limits``. On AWS the same operations are also reachable
through the IAM-protected admin routes (``/admin/tenants``).

A limit given as ``default`` goes back to the deployment's default (``PUNCTUAL_TENANT_*``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from punctual.cli.common import add_engine_flags, engine_from_settings, settings_from_args
from punctual.clock import SystemClock
from punctual.errors import InvalidInput
from punctual.tenancy import service
from punctual.tenancy.limits import LIMIT_NAMES, as_dict, defaults_from

_UNSET: Any = object()  # a flag not given (argparse's None cannot mean that: None is not a value here)
_DEFAULT = "default"
_FLAGS = {
    "max_jobs": "--max-jobs",
    "max_runs_per_minute": "--max-runs-per-minute",
    "max_concurrency": "--max-concurrency",
    "api_requests_per_second": "--api-rps",
    "weight": "--weight",
}


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("tenants", help="per-owner limits (operators)")
    commands = parser.add_subparsers(dest="tenants_command", required=True, metavar="COMMAND")

    set_ = commands.add_parser("set", help="change an owner's limits (others keep their value)")
    set_.add_argument("owner")
    for name, flag in _FLAGS.items():
        what = "round-robin share (1-100)" if name == "weight" else "a whole number, or 'default'"
        set_.add_argument(flag, dest=name, type=_limit, metavar="N", default=_UNSET, help=f"{name}: {what}")
    get = commands.add_parser("get", help="an owner's limits (effective, and as set) and its usage")
    get.add_argument("owner")
    commands.add_parser("list", help="every owner with limits set")
    for sub in (set_, get, commands.choices["list"]):
        add_engine_flags(sub)
        sub.add_argument("--json", action="store_true", help="print JSON")
    set_.set_defaults(func=run_set)
    get.set_defaults(func=run_get)
    commands.choices["list"].set_defaults(func=run_list)


def run_set(args: argparse.Namespace) -> int:
    changes = {name: getattr(args, name) for name in _FLAGS if getattr(args, name) is not _UNSET}
    if not changes:
        raise InvalidInput(f"nothing to set: give at least one of {', '.join(_FLAGS.values())}")
    settings, engine = engine_from_settings(settings_from_args(args))
    try:
        service.set_tenant(engine.store, args.owner, {k: _value(v) for k, v in changes.items()}, _now())
        view = service.view(engine.store, args.owner, defaults_from(settings))
    finally:
        engine.close()
    _print_view(view, args.json)
    return 0


def run_get(args: argparse.Namespace) -> int:
    settings, engine = engine_from_settings(settings_from_args(args))
    try:
        view = service.view(engine.store, args.owner, defaults_from(settings))
        usage = service.usage(engine.store, args.owner, view.limits, _now())
    finally:
        engine.close()
    _print_view(view, args.json, usage)
    return 0


def run_list(args: argparse.Namespace) -> int:
    settings, engine = engine_from_settings(settings_from_args(args))
    try:
        views = service.list_views(engine.store, defaults_from(settings))
    finally:
        engine.close()
    if args.json:
        print(json.dumps({"items": [_view_dict(v) for v in views]}, indent=2))
        return 0
    header = ("OWNER", "MAX_JOBS", "RUNS/MIN", "CONCURRENCY", "API_RPS", "WEIGHT")
    rows = [(v.owner, *(_cell(getattr(v.limits, n)) for n in LIMIT_NAMES), str(v.limits.weight)) for v in views]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if not views:
        print("(no tenant records: every owner has the deployment defaults)")
    return 0


# -- helpers ---------------------------------------------------------------------------------------


def _limit(text: str) -> int | str:
    if text.strip().lower() == _DEFAULT:
        return _DEFAULT
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'default', not {text!r}") from None


def _value(value: int | str) -> int | None:
    return None if value == _DEFAULT else int(value)


def _now() -> int:
    return SystemClock().now_ms()


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def _view_dict(view: service.TenantView, usage: service.Usage | None = None) -> dict[str, Any]:
    record = view.record
    data: dict[str, Any] = {
        "owner": view.owner,
        "limits": as_dict(view.limits),
        "set": None if record is None else {n: getattr(record, n) for n in (*LIMIT_NAMES, "weight")},
    }
    if usage is not None:
        data["usage"] = {
            "live_jobs": usage.live_jobs,
            "running": usage.running,
            "runs_this_minute": usage.runs_this_minute,
        }
    return data


def _print_view(view: service.TenantView, as_json: bool, usage: service.Usage | None = None) -> None:
    data = _view_dict(view, usage)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    print(f"owner: {view.owner}" + ("" if view.record else "  (no record: deployment defaults)"))
    for name in (*LIMIT_NAMES, "weight"):
        value = getattr(view.limits, name)
        chosen = None if view.record is None else getattr(view.record, name)
        origin = "set" if chosen is not None and not (name == "weight" and chosen == 1) else "default"
        print(f"  {name:<24} {'unlimited' if value is None else value!s:<12} ({origin})")
    if usage is not None:
        print(
            f"  usage: {usage.live_jobs} live jobs, running {_cell(usage.running)}, "
            f"started this minute {_cell(usage.runs_this_minute)}"
        )
