"""The CLI for humans against the local API over HTTP: every command, tables and --json, errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from punctual.cli import main
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e


class Cli:
    def __init__(self, stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
        self.key = f"key-{uuid.uuid4().hex}"
        stack.keys.add(self.key, f"owner-{uuid.uuid4().hex[:12]}")
        self.url = stack.url
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = main([*argv[:2], "--api-url", self.url, "--api-key", self.key, *argv[2:]])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(stack: Stack, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(stack, capsys)


def test_every_job_command_round_trips_through_the_api(cli: Cli) -> None:
    # create (cron, with a payload and an http target), in readable form
    code, out, _ = cli(
        "jobs", "create", "--name", "nightly", "--schedule", "0 3 * * *", "--timezone", "Europe/Berlin",
        "--url", "https://example.com/hook", "--payload", '{"report": "sales"}', "--max-retries", "2",
    )  # fmt: skip
    assert code == 0 and "nightly" in out and "0 3 * * * (Europe/Berlin)" in out
    job = cli.json("jobs", "list")["items"][0]
    assert (job["name"], job["max_retries"], job["payload"]) == ("nightly", 2, {"report": "sales"})
    # list as a table, get, pause, resume
    code, out, _ = cli("jobs", "list")
    assert code == 0 and job["id"] in out and "NEXT RUN" in out
    assert cli.json("jobs", "get", job["id"])["id"] == job["id"]
    assert cli.json("jobs", "pause", job["id"])["status"] == "paused"
    assert cli.json("jobs", "resume", job["id"])["status"] == "active"
    # trigger a run now, then see it in the job's runs and by its id
    run = cli.json("jobs", "trigger", job["id"])
    assert run["job_id"] == job["id"] and run["trigger"] == "manual"
    runs = cli.json("runs", job["id"])["items"]
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    code, out, _ = cli("jobs", "get", job["id"])  # issue 31: "last run -" after manual runs
    assert code == 0 and f"last run  {run['scheduled_at']}" in out
    code, out, _ = cli("runs", job["id"], "--follow", "--for", "0.2", "--interval", "0.2")  # bounded: 2 polls
    assert code == 0 and out.splitlines()[0].startswith("RUN ID") and run["run_id"] in out.splitlines()[1]
    code, out, _ = cli("run", run["run_id"])
    assert code == 0 and run["run_id"] in out and "No attempts yet." in out  # no worker in this stack
    # delete
    code, _, _ = cli("jobs", "delete", job["id"])
    assert code == 0
    assert cli.json("jobs", "get", job["id"])["status"] == "deleted"


def test_a_one_time_job_from_run_in(cli: Cli) -> None:
    job = cli.json("jobs", "create", "--name", "soon", "--run-in", "3600", "--url", "https://example.com/once")
    assert job["schedule"] is None and job["run_at"] == job["next_run_at"]


def test_a_spec_file_whose_target_has_no_type_creates_an_http_job(cli: Cli, tmp_path: Any) -> None:
    # issue 26 case 8: the document says type defaults to http; through the CLI as through the API
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps({"name": "typeless", "schedule": "0 3 * * *", "target": {"url": "https://example.com/h"}})
    )
    job = cli.json("jobs", "create", "--file", str(spec))
    assert (job["target"]["type"], job["target"]["url"]) == ("http", "https://example.com/h")
    # and a header no request can carry is refused before anything is written, naming it
    spec.write_text(
        json.dumps(
            {
                "name": "priced",
                "schedule": "0 3 * * *",
                "target": {"url": "https://example.com/h", "headers": {"X-Price": "5 \u20ac"}},
            }
        )
    )
    code, _, err = cli("jobs", "create", "--file", str(spec))
    assert code == 1 and "target.headers.X-Price" in err and "target_refused" in err


def test_errors_are_clear_and_exit_1(cli: Cli) -> None:
    code, _, err = cli("jobs", "create", "--name", "bad", "--schedule", "61 * * * *", "--url", "https://x.example/h")
    assert code == 1 and "minute" in err and "invalid_schedule" in err
    code, out, _ = cli("jobs", "get", "job_" + "0" * 32, "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "job_not_found"
    code, _, err = cli("jobs", "create", "--name", "bad", "--schedule", "* * * * *", "--payload", "{not json")
    assert code == 1 and "--payload" in err


def test_a_wrong_key_or_no_server_is_explained(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "list", "--api-url", stack.url, "--api-key", "wrong"])
    assert code == 1 and "PUNCTUAL_API_KEY" in capsys.readouterr().err
    code = main(["jobs", "list", "--api-url", "http://127.0.0.1:9", "--api-key", "k"])
    assert code == 1 and "127.0.0.1:9" in capsys.readouterr().err


def test_dependent_jobs_from_the_cli_and_their_graph_as_a_tree(cli: Cli) -> None:
    extract = cli.json(
        "jobs", "create", "--name", "extract", "--schedule", "0 * * * *", "--url", "https://example.com/e"
    )
    args = ("--url", "https://example.com/t")
    transform = cli.json("jobs", "create", "--name", "transform", "--after", extract["id"], *args)
    cleanup = cli.json("jobs", "create", "--name", "cleanup", "--after", extract["id"], "--when", "failed", *args)
    load = cli.json("jobs", "create", "--name", "load", "--after", transform["id"], "--after", cleanup["id"], *args)
    assert load["depends_on"] == {"jobs": [transform["id"], cleanup["id"]], "when": "succeeded"}
    assert cleanup["depends_on"]["when"] == "failed" and load["schedule"] is None
    code, out, _ = cli("jobs", "get", load["id"])
    assert code == 0 and f"after {transform['id']}, {cleanup['id']} (succeeded)" in out

    code, out, _ = cli("jobs", "graph", transform["id"])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("transform  " + transform["id"])
    assert "├─ depends on" in lines[1] and "extract" in lines[2] and "[succeeded]" in lines[2]
    assert "└─ depended on by" in lines[3] and "load" in lines[4]
    code, out, _ = cli("jobs", "graph", extract["id"])  # a diamond: load is reached twice
    assert code == 0 and out.count("load  ") == 2 and "(see above)" in out

    code, _, err = cli("jobs", "delete", extract["id"])
    assert code == 1 and "has_dependents" in err
    assert "or delete with --force" in err and "force=true" not in err  # the flag the CLI caller has
    code, _, _ = cli("jobs", "delete", extract["id"], "--force")
    assert code == 0 and cli.json("jobs", "get", transform["id"])["status"] == "active"
