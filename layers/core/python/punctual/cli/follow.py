"""``punctual runs JOB_ID --follow``: a job's runs as they happen, by polling the API.

It prints the newest page of runs oldest first (as ``tail -f`` does), then, every ``--interval``
seconds, each run that is new or changed since (state, attempt, finish or note), until Ctrl-C or
``--for`` seconds. A poll is one ``GET /jobs/{id}/runs``: the API has no push, and a person
watching a job needs no more than a poll every second or two. A run it showed open (scheduled,
running, retrying) is followed to its end even once newer runs push it off the newest page: the
poll then reads further pages down to it (at most ``MAX_PAGES``). With ``--json``, one JSON object
per line for each run shown (a stream a script can read as it comes).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from punctual.cli import output
from punctual.cli.client import ApiError, Client, CliError

DEFAULT_INTERVAL_S = 2.0
MIN_INTERVAL_S = 0.2
MAX_PAGES = 10  # pages one poll reads to reach the oldest open run it showed (a bound, not a goal)
_OPEN = frozenset({"scheduled", "running", "retrying", "accepted"})
# Every cell but the last has a fixed width, so rows printed poll after poll line up under one
# header: a run id is run_ + 32 hex + _ + epoch ms, a time is ISO 8601 UTC with milliseconds.
_WIDTHS = {"RUN ID": 50, "SCHEDULED": 24, "STATE": 9, "TRIGGER": 10, "ATTEMPT": 7, "FINISHED": 24}


@dataclass
class Follow:
    """One ``--follow`` session: what it asks for and what it has shown."""

    client: Client
    job_id: str
    params: dict[str, Any]
    as_json: bool = False
    write: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    warn: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    shown: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # run id -> what it looked like
    headed: bool = False  # the table's header is printed (before the first row)
    open_runs: dict[str, str] = field(default_factory=dict)  # run id -> scheduled_at, of runs last read open

    def poll(self) -> int:
        """Ask for the newest runs once; print the new and changed ones, oldest first. Returns how many."""
        fresh = []
        for run in reversed(self._read()):
            looks = (run["state"], run["attempt"], run.get("finished_at"), run.get("note"))
            if self.shown.get(run["run_id"]) != looks:
                self.shown[run["run_id"]] = looks
                fresh.append(run)
        for run in fresh:
            if self.as_json:
                self.write(json.dumps(run))
                continue
            if not self.headed:
                self.write(_row([title for title, _ in output.RUN_COLUMNS]))
                self.headed = True
            self.write(_row([str(get(run)) for _, get in output.RUN_COLUMNS]))
        return len(fresh)

    def _read(self) -> list[dict[str, Any]]:
        """The newest page of runs, and the pages after it down to the oldest open run shown
        (newest first, as the API answers)."""
        oldest_open = min(self.open_runs.values(), default=None)
        runs: list[dict[str, Any]] = []
        params, covered = self.params, False
        for _ in range(MAX_PAGES):
            page = self.client.call("GET", f"/jobs/{self.job_id}/runs", params=params)
            items = page.get("items") or []
            runs += items
            cursor = page.get("next_cursor")
            # ISO 8601 UTC with milliseconds: the text orders as the time does
            if not items or cursor is None or oldest_open is None or items[-1]["scheduled_at"] <= oldest_open:
                covered = True
                break
            params = {**self.params, "cursor": cursor}
        if covered:  # an open run not read again left the answer (a --state filter, retention): not followed
            self.open_runs.clear()
        for run in runs:
            if run["state"] in _OPEN:
                self.open_runs[run["run_id"]] = run["scheduled_at"]
            else:
                self.open_runs.pop(run["run_id"], None)
        return runs


def follow(
    session: Follow,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    for_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll every ``interval_s`` (at least ``MIN_INTERVAL_S``) until Ctrl-C, or for ``for_s`` seconds
    (None: until Ctrl-C). Ctrl-C ends it quietly (it is how a person stops following). An error of
    the first poll propagates (the command prints it and exits 1: a wrong job id, a refused key);
    later, an error that passes (429, 5xx, the API unreachable while it restarts) is reported on
    stderr (once while it lasts) and the next poll tries again, so a long follow outlives a blip.
    """
    interval_s = max(interval_s, MIN_INTERVAL_S)
    deadline = None if for_s is None else clock() + for_s
    warned: str | None = None  # the passing error last reported
    try:
        session.poll()
        if not session.shown and not session.as_json:
            session.write("No runs yet; waiting for the first (Ctrl-C stops).")
        while deadline is None or clock() < deadline:
            sleep(interval_s if deadline is None else max(0.0, min(interval_s, deadline - clock())))
            try:
                session.poll()
                warned = None
            except (ApiError, CliError) as exc:
                if isinstance(exc, ApiError) and exc.status != 429 and exc.status < 500:
                    raise
                if str(exc) != warned:  # once per outage, not at every poll
                    session.warn(f"punctual: {exc} (trying again)")
                    warned = str(exc)
    except KeyboardInterrupt:
        return


def _row(cells: list[str]) -> str:
    widths = [_WIDTHS.get(title, 0) for title, _ in output.RUN_COLUMNS]
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
