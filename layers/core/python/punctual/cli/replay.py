"""``punctual runs replay --from WHEN [--to WHEN] [--state S ...] [--job JOB_ID ...] [--dry-run]
[--idempotency-key KEY]``: new runs for earlier ones, through ``POST /runs/replay`` (the console uses
the same route). With a key, the same request again within 24 hours starts nothing twice (give
absolute times: ``6h`` names another ``from`` each time, which the key refuses).

``WHEN`` is an ISO 8601 time with an offset, or a time ago: ``90m``, ``6h``, ``2d``. ``--to``
defaults to now, ``--state`` to failed and dead. The ``runs`` command takes these flags only with
``replay`` in place of its JOB_ID (no job id is ``replay``).
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.cli import output
from punctual.cli.client import Client, CliError

REPLAY = "replay"  # the JOB_ID of ``punctual runs`` that means this command
_AGO = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_COLUMNS: list[tuple[str, Any]] = [
    ("RUN ID", lambda r: r["run_id"]),
    ("JOB ID", lambda r: r["job_id"]),
    ("SCHEDULED", lambda r: r["scheduled_at"]),
    ("STATE", lambda r: r["state"]),
]


def add_arguments(runs: argparse.ArgumentParser) -> None:
    """The flags of ``punctual runs replay`` on the ``runs`` parser (``--state`` is shared)."""
    runs.add_argument("--from", dest="since", metavar="WHEN", help="replay: runs scheduled at or after (ISO or 6h)")
    runs.add_argument("--to", dest="until", metavar="WHEN", help="replay: runs scheduled before (default now)")
    runs.add_argument("--job", action="append", metavar="JOB_ID", help="replay: only this job's runs (repeatable)")
    runs.add_argument("--dry-run", action="store_true", help="replay: only list the runs that would be replayed")
    runs.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="replay: the same request again with this key starts nothing twice (24 h; use ISO times)",
    )


def cmd_replay(client: Client, args: argparse.Namespace) -> None:
    if args.since is None:
        raise CliError("runs replay needs --from (an ISO 8601 time with offset, or a time ago such as 6h)")
    now = datetime.now(UTC)
    body: dict[str, Any] = {
        "from": when(args.since, now),
        "to": when(args.until, now) if args.until else now.isoformat(timespec="milliseconds"),
        "dry_run": bool(args.dry_run),
    }
    if args.state:
        body["states"] = args.state
    if args.job:
        body["job_ids"] = args.job
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    answer = client.call("POST", "/runs/replay", body=body, headers=headers)
    output.emit(args, answer, lambda: _print(answer))


def refuse_replay_flags(args: argparse.Namespace) -> None:
    """``punctual runs JOB_ID`` with a flag only replay takes: a clear error, not a silent ignore."""
    if args.since or args.until or args.job or args.dry_run or args.idempotency_key:
        raise CliError("--from, --to, --job, --dry-run and --idempotency-key belong to: punctual runs replay")


def when(text: str, now: datetime) -> str:
    """An ISO 8601 instant for ``text``: itself (the API checks it), or ``now`` minus a time ago."""
    ago = _AGO.match(text.strip())
    if ago is None:
        return text
    delta = timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    return (now - delta).isoformat(timespec="milliseconds")


def _print(answer: dict[str, Any]) -> None:
    if answer["dry_run"]:
        runs = answer.get("runs") or []
        print(output.table(runs, _COLUMNS) if runs else "No runs match.")
        print(f"\n{answer['count']} run(s) would be replayed (run again without --dry-run).")
    else:
        print(f"Replayed {answer['count']} run(s): new runs with trigger replay, each naming its original.")
