"""CLI papercuts of issue 31, without a server: help that states the defaults in force, ``--when``
without ``--after``, the has-dependents hint naming ``--force``, and ``runs --follow``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from punctual.cli import build_parser, follow, human, main
from punctual.cli.client import ApiError, CliError
from punctual.config import Settings
from punctual.errors import HasDependents

pytestmark = pytest.mark.unit

JOB = "job_" + "a" * 32


def run(job: str, ms: int, state: str, **fields: Any) -> dict[str, Any]:
    """A run as GET /jobs/{id}/runs shows it."""
    return {
        "run_id": f"run_{job[4:]}_{ms}",
        "job_id": job,
        "scheduled_at": f"2027-01-01T00:00:{ms // 1000 % 60:02d}.000Z",
        "state": state,
        "trigger": fields.pop("trigger", "schedule"),
        "attempt": fields.pop("attempt", 0),
        "finished_at": fields.pop("finished_at", None),
        "note": fields.pop("note", None),
        **fields,
    }


class Pages:
    """A client whose GET /jobs/{id}/runs answers each scripted page in turn (the last one again)."""

    def __init__(self, *pages: list[dict[str, Any]]) -> None:
        self.pages = list(pages)
        self.calls: list[tuple[str, str, Any]] = []

    def call(self, method: str, path: str, *, params: Any = None, **_: Any) -> Any:
        self.calls.append((method, path, params))
        page = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        return {"items": list(reversed(page)), "next_cursor": None}  # the API: newest first


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


# -- help and flags -----------------------------------------------------------------------------


def test_scheduler_help_states_the_defaults_in_force(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["scheduler", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"claim this far ahead (default {Settings().lookahead_ms})" in text  # was "default 3000"


def create_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["jobs", "create", "--name", "n", "--url", "https://example.com/h", *argv])


def test_when_without_after_is_refused_not_dropped(tmp_path: Any) -> None:
    with pytest.raises(CliError, match="--when applies only to a dependent job"):
        human.build_spec(create_args("--when", "failed", "--schedule", "* * * * *"))
    # with --after it is the release condition; with a --file that has depends_on it overrides its when
    assert human.build_spec(create_args("--after", JOB, "--when", "failed"))["depends_on"]["when"] == "failed"
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"depends_on": {"jobs": [JOB], "when": "succeeded"}}))
    built = human.build_spec(create_args("--file", str(spec), "--when", "finished"))
    assert built["depends_on"] == {"jobs": [JOB], "when": "finished"}


def test_has_dependents_names_the_clis_flag(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    message = f"1 job(s) depend on {JOB} ({JOB}); delete them first, or delete with {HasDependents.FORCE}"

    def refuse(self: Any, method: str, path: str, **_: Any) -> Any:
        raise ApiError(409, {"code": "has_dependents", "message": message, "details": []})

    monkeypatch.setattr(human.Client, "call", refuse)
    assert main(["jobs", "delete", JOB, "--api-key", "k"]) == 1
    err = capsys.readouterr().err
    assert "or delete with --force" in err and "force=true" not in err


# -- runs --follow ------------------------------------------------------------------------------


def test_follow_prints_new_and_changed_runs_oldest_first_until_its_time_is_up() -> None:
    first, second = run(JOB, 1_000, "succeeded", attempt=1), run(JOB, 61_000, "scheduled")
    client = Pages(
        [first],
        [first, second],  # a new run
        [first, second],  # nothing new: nothing printed
        [first, {**second, "state": "running", "attempt": 1}],  # it started
    )
    lines: list[str] = []
    clock = Clock()
    session = follow.Follow(client, JOB, {"limit": 50}, write=lines.append)
    follow.follow(session, interval_s=1.0, for_s=3.0, clock=clock, sleep=clock.sleep)
    assert len(client.calls) == 4 and clock.sleeps == [1.0, 1.0, 1.0]  # bounded: 3 s, one poll a second
    assert lines[0].split() == ["RUN", "ID", "SCHEDULED", "STATE", "TRIGGER", "ATTEMPT", "FINISHED", "NOTE"]
    assert [line.split()[0] for line in lines[1:]] == [first["run_id"], second["run_id"], second["run_id"]]
    assert [line.split()[2] for line in lines[1:]] == ["succeeded", "scheduled", "running"]
    assert len({line.index(" schedule ") for line in lines[1:]}) == 1  # one column, poll after poll


def test_follow_waits_for_the_first_run_and_stops_on_ctrl_c() -> None:
    lines: list[str] = []
    clock = Clock()

    def interrupted(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 2:
            raise KeyboardInterrupt

    session = follow.Follow(Pages([], [run(JOB, 1_000, "scheduled")]), JOB, {}, write=lines.append)
    follow.follow(session, interval_s=0.01, clock=clock, sleep=interrupted)  # no --for: until Ctrl-C
    assert lines[0].startswith("No runs yet") and lines[2].startswith(run(JOB, 1_000, "x")["run_id"])
    assert clock.sleeps == [follow.MIN_INTERVAL_S] * 2  # polls are spaced at least MIN_INTERVAL_S


def test_follow_as_json_is_one_object_per_line() -> None:
    lines: list[str] = []
    session = follow.Follow(Pages([run(JOB, 1_000, "dead")]), JOB, {}, as_json=True, write=lines.append)
    clock = Clock()
    follow.follow(session, interval_s=1.0, for_s=1.0, clock=clock, sleep=clock.sleep)
    assert [json.loads(line)["state"] for line in lines] == ["dead"]


def test_follow_refuses_a_cursor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", JOB, "--follow", "--cursor", "c", "--api-key", "k", "--api-url", "http://127.0.0.1:9"]) == 1
    assert "--follow follows the newest runs" in capsys.readouterr().err


class Listing:
    """A client whose GET /jobs/{id}/runs pages through ``runs`` (newest first) as the API does."""

    def __init__(self, runs: list[dict[str, Any]]) -> None:
        self.runs = runs
        self.calls = 0

    def call(self, method: str, path: str, *, params: Any = None, **_: Any) -> Any:
        self.calls += 1
        ordered = sorted(self.runs, key=lambda r: r["scheduled_at"], reverse=True)
        start = int(params.get("cursor") or 0)
        end = start + int(params["limit"])
        return {"items": ordered[start:end], "next_cursor": str(end) if end < len(ordered) else None}


def test_follow_follows_a_run_it_showed_open_after_newer_runs_push_it_off_the_page() -> None:
    # punctual runs JOB --follow --limit 2: two runs wait for a keyed limit, two newer ones are
    # triggered, then the oldest starts: its start must be printed, not its "waiting" left for good
    oldest, older = (
        run(JOB, 1_000, "scheduled", note="waiting: limit k max_concurrency 1 reached"),
        run(JOB, 2_000, "scheduled"),
    )
    listing = Listing([oldest, older])
    lines: list[str] = []
    session = follow.Follow(listing, JOB, {"limit": 2}, write=lines.append)
    session.poll()
    listing.runs = [{**oldest, "state": "running", "attempt": 1, "note": None}, older]
    listing.runs += [run(JOB, 3_000, "scheduled"), run(JOB, 4_000, "scheduled")]
    session.poll()
    assert [(line.split()[0], line.split()[2]) for line in lines[-3:]] == [
        (oldest["run_id"], "running"),
        (run(JOB, 3_000, "x")["run_id"], "scheduled"),
        (run(JOB, 4_000, "x")["run_id"], "scheduled"),
    ]
    listing.runs = [{**r, "state": "succeeded"} for r in listing.runs]
    calls = listing.calls
    session.poll()  # every run ended: the next polls read the newest page only
    session.poll()
    assert listing.calls - calls == 2 + 1


def test_follow_outlives_a_passing_error_but_not_a_wrong_job() -> None:
    class Flaky(Pages):
        def call(self, method: str, path: str, *, params: Any = None, **kw: Any) -> Any:
            if len(self.calls) in (1, 2, 3):  # the API restarts (two polls), then the owner's request rate is reached
                self.calls.append((method, path, params))
                raise CliError("cannot reach the Punctual API") if len(self.calls) < 4 else ApiError(429, {})
            return super().call(method, path, params=params, **kw)

    lines: list[str] = []
    warnings: list[str] = []
    started = run(JOB, 1_000, "running", attempt=1)
    client = Flaky([run(JOB, 1_000, "scheduled")], [started])
    session = follow.Follow(client, JOB, {"limit": 50}, write=lines.append, warn=warnings.append)
    clock = Clock()
    follow.follow(session, interval_s=1.0, for_s=4.0, clock=clock, sleep=clock.sleep)
    assert len(warnings) == 2 and "trying again" in warnings[0]
    assert [line.split()[2] for line in lines[1:]] == ["scheduled", "running"]

    class Gone(Pages):
        def call(self, method: str, path: str, *, params: Any = None, **kw: Any) -> Any:
            if self.calls:
                raise ApiError(404, {"code": "not_found"})  # the job's retention ended: no blip
            return super().call(method, path, params=params, **kw)

    with pytest.raises(ApiError):
        follow.follow(follow.Follow(Gone([]), JOB, {}, write=lines.append), for_s=2.0, clock=clock, sleep=clock.sleep)


def test_a_callback_job_from_the_flags_and_an_accepted_run_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from punctual.cli import output

    built = human.build_spec(
        create_args("--schedule", "0 2 * * *", "--completion", "callback", "--heartbeat-timeout-s", "300")
    )
    assert (built["completion"], built["heartbeat_timeout_s"]) == ("callback", 300)
    run = {
        "run_id": "run_x", "job_id": JOB, "scheduled_at": "2027-01-15T02:00:00.000Z", "state": "accepted",
        "trigger": "schedule", "attempt": 1, "note": None, "attempts": [],
        "heartbeat_deadline_at": "2027-01-15T02:35:00.000Z", "heartbeat_at": "2027-01-15T02:30:00.000Z",
        "progress": "42 %",
    }  # fmt: skip
    output.print_page({"items": [run], "next_cursor": None}, output.RUN_COLUMNS, "runs")
    output.print_run(run)
    printed = capsys.readouterr().out
    assert "heartbeat due 2027-01-15T02:35:00.000Z (42 %)" in printed and "accepted" in printed
    assert "last heartbeat  2027-01-15T02:30:00.000Z 42 %" in printed
