"""``punctual runs JOB_ID --follow``: a job's runs as they happen, by polling the API.

It prints the newest page of runs oldest first (as ``tail -f`` does), then, every ``--interval``
seconds, each run that is new or changed since (state, attempt, finish or note), until Ctrl-C or
``--for`` seconds. A poll is one ``GET /jobs/{id}/runs``: the API has no push, and a person
watching a job needs no more than a poll every second or two. With ``--json``, one JSON object per
line for each run shown (a stream a script can read as it comes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from punctual.cli import output
from punctual.cli.client import Client

DEFAULT_INTERVAL_S = 2.0
MIN_INTERVAL_S = 0.2
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
    shown: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # run id -> what it looked like
    headed: bool = False  # the table's header is printed (before the first row)

    def poll(self) -> int:
        """Ask for the newest runs once; print the new and changed ones, oldest first. Returns how many."""
        page = self.client.call("GET", f"/jobs/{self.job_id}/runs", params=self.params)
        fresh = []
        for run in reversed(page.get("items") or []):
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


def follow(
    session: Follow,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    for_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll every ``interval_s`` (at least ``MIN_INTERVAL_S``) until Ctrl-C, or for ``for_s`` seconds
    (None: until Ctrl-C). Ctrl-C ends it quietly (it is how a person stops following); API errors
    propagate (the command prints them and exits 1).
    """
    interval_s = max(interval_s, MIN_INTERVAL_S)
    deadline = None if for_s is None else clock() + for_s
    try:
        session.poll()
        if not session.shown and not session.as_json:
            session.write("No runs yet; waiting for the first (Ctrl-C stops).")
        while deadline is None or clock() < deadline:
            sleep(interval_s if deadline is None else max(0.0, min(interval_s, deadline - clock())))
            session.poll()
    except KeyboardInterrupt:
        return


def _row(cells: list[str]) -> str:
    widths = [_WIDTHS.get(title, 0) for title, _ in output.RUN_COLUMNS]
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
