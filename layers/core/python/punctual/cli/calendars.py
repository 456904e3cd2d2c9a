"""``punctual calendars set|get|list|delete``: an owner's calendars, through the HTTP API.

``set`` builds the calendar from a JSON file (the body of ``PUT /calendars/{name}``) and flags, flags
winning: ``--exclude-date 2026-12-25`` and ``--exclude-weekday SAT`` (repeatable), ``--exclude-range
2026-12-24:2027-01-01``, ``--include-only-file days.txt`` (one date a line), ``--based-on weekends``.
``set`` replaces the calendar whole, as the API does. Jobs name a calendar with
``punctual jobs create --calendar NAME [--calendar-mode next_business_day]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from punctual.cli import output
from punctual.cli.client import Client, CliError
from punctual.cli.human import command, common_flags

COLUMNS: list[tuple[str, Any]] = [
    ("NAME", lambda c: c["name"]),
    ("TIMEZONE", lambda c: c["timezone"]),
    ("BASED ON", lambda c: c.get("based_on") or "-"),
    ("EXCLUDES", lambda c: _excludes(c)),  # noqa: PLW0108 - _excludes is defined further down
    ("VERSION", lambda c: c["version"]),
    ("UPDATED", lambda c: c["updated_at"]),
]


def register(subparsers: Any) -> None:
    common = common_flags()
    parser: argparse.ArgumentParser = subparsers.add_parser("calendars", help="your calendars (business days)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    set_ = actions.add_parser("set", parents=[common], help="create or replace a calendar")
    set_.add_argument("name", metavar="NAME")
    set_.add_argument("--file", type=Path, help="a JSON calendar (the body of PUT /calendars/NAME)")
    set_.add_argument("--timezone", help="IANA zone its dates are in (default UTC)")
    set_.add_argument("--description")
    set_.add_argument("--exclude-date", action="append", metavar="YYYY-MM-DD", help="repeatable")
    set_.add_argument("--exclude-range", action="append", metavar="START:END", help="both ends included; repeatable")
    set_.add_argument("--exclude-weekday", action="append", choices=["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"])
    set_.add_argument("--include-only-file", type=Path, help="the only business days: one YYYY-MM-DD a line")
    set_.add_argument("--based-on", metavar="CALENDAR", help="add these exclusions to another calendar's")
    set_.set_defaults(func=command(cmd_set))
    for name, func, text in (("get", cmd_get, "show a calendar"), ("delete", cmd_delete, "delete an unused calendar")):
        action = actions.add_parser(name, parents=[common], help=text)
        action.add_argument("name", metavar="NAME")
        action.set_defaults(func=command(func))
    listing = actions.add_parser("list", parents=[common], help="list your calendars")
    listing.set_defaults(func=command(cmd_list))


def cmd_set(client: Client, args: argparse.Namespace) -> None:
    calendar = client.call("PUT", f"/calendars/{args.name}", body=build_calendar(args))
    output.emit(args, calendar, lambda: print(output.table([calendar], COLUMNS)))


def cmd_get(client: Client, args: argparse.Namespace) -> None:
    calendar = client.call("GET", f"/calendars/{args.name}")
    output.emit(args, calendar, lambda: print(json.dumps(calendar, indent=2)))


def cmd_list(client: Client, args: argparse.Namespace) -> None:
    listed = client.call("GET", "/calendars")
    output.emit(args, listed, lambda: output.print_page(listed, COLUMNS, "calendars"))


def cmd_delete(client: Client, args: argparse.Namespace) -> None:
    client.call("DELETE", f"/calendars/{args.name}")
    output.emit(args, {"name": args.name, "deleted": True}, lambda: print(f"Deleted calendar {args.name}."))


def build_calendar(args: argparse.Namespace) -> dict[str, Any]:
    """The PUT body from --file and the flags (flags win). Raises :class:`CliError`."""
    body: dict[str, Any] = {}
    if args.file is not None:
        try:
            body.update(json.loads(args.file.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise CliError(f"cannot read {args.file} as a JSON calendar: {exc}") from None
    flags = {"timezone": args.timezone, "description": args.description, "based_on": args.based_on}
    body.update({k: v for k, v in flags.items() if v is not None})
    if args.exclude_date:
        body["exclude_dates"] = args.exclude_date
    if args.exclude_weekday:
        body["exclude_weekdays"] = args.exclude_weekday
    if args.exclude_range:
        ranges = [r.split(":", 1) for r in args.exclude_range]
        if any(len(r) != 2 for r in ranges):
            raise CliError("--exclude-range is START:END, e.g. 2026-12-24:2027-01-01")
        body["exclude_ranges"] = [{"start": a, "end": b} for a, b in ranges]
    if args.include_only_file is not None:
        try:
            lines = args.include_only_file.read_text().split()
        except OSError as exc:
            raise CliError(f"cannot read {args.include_only_file}: {exc}") from None
        body["include_only"] = lines
    return body


def _excludes(calendar: dict[str, Any]) -> str:
    parts = [
        f"{len(calendar.get('exclude_dates') or [])} dates",
        f"{len(calendar.get('exclude_ranges') or [])} ranges",
        ",".join(calendar.get("exclude_weekdays") or []) or "no weekdays",
    ]
    if calendar.get("include_only") is not None:
        parts.append(f"only {len(calendar['include_only'])} days")
    return "; ".join(parts)
