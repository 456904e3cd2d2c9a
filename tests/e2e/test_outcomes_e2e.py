"""Run outcomes end to end over HTTP on the embedded engine (issue 33, sections 3 and 4): a job whose
runs fail is paused after ``pause_after_failures`` and its owner alerted; its ``notify`` webhook on
127.0.0.1 receives signed notifications from the reaper (failure, then recovery); ``POST
/runs/replay`` lists (dry run) and replays the dead runs, and ``punctual runs replay`` does the
same. The worker and the reaper are assembled as every process assembles them
(``punctual.runtime.assembly``); every response is checked against the served OpenAPI document.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from punctual.cli import main
from punctual.clock import SystemClock, iso
from punctual.execution.targets import signing
from punctual.runs import tokens
from tests.e2e.conftest import ApiClient
from tests.e2e.contract_http import wait_for
from tests.e2e.local_stack import local_stack
from tests.faults.real_workers import Target, serving

pytestmark = pytest.mark.e2e

KEY, OWNER = "outcomes-key-0123456789", "outcomes-owner"
WAIT_S = 20.0


class Hook(Target):
    """/poison: 500; /ok: 200; /notify: 200, each notification kept; /accept: 202, then the work is
    reported through the attempt's callback URL (a heartbeat, then the completion: :func:`report`)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/notify":
            with self.server.lock:
                self.server.notifications.append((dict(self.headers), body))
        status = {"/poison": 500, "/accept": 202}.get(self.path, 200)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        if self.path == "/accept":
            headers = (self.headers[tokens.URL_HEADER], self.headers[tokens.TOKEN_HEADER])
            threading.Thread(target=report, args=(self.server, *headers), daemon=True).start()


def report(server: Any, url: str, token: str) -> None:
    """What a target that accepted the work does later: a heartbeat, then the completion."""
    headers = {tokens.TOKEN_HEADER: token}
    with httpx.Client(timeout=10) as http:
        beat = http.post(f"{url}/heartbeat", json={"progress": "half way"}, headers=headers)
        done = http.post(f"{url}/complete", json={"state": "succeeded", "result": "812 rows"}, headers=headers)
    with server.lock:
        server.callbacks.append((url, token, beat.status_code, done.status_code))


@pytest.fixture(scope="module")
def hook() -> Iterator[Any]:
    yield from serving(Hook, notifications=[], callbacks=[], lock=threading.Lock())


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiClient]:
    with local_stack(tmp_path_factory.mktemp("outcomes"), KEY, OWNER, reaper=True) as stack:
        yield stack.api


def hook_url(hook: Any, path: str) -> str:
    return f"http://127.0.0.1:{hook.server_address[1]}{path}"


def runs_of(api: ApiClient, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(f"/jobs/{job_id}/runs").json()["items"]
    return items


def notified(hook: Any, event: str) -> list[tuple[dict[str, str], bytes]]:
    with hook.lock:
        return [(h, b) for h, b in hook.notifications if json.loads(b)["event"] == event]


def test_failures_pause_the_job_notify_its_webhook_and_replay_recovers(api, hook, capsys):
    # Given a job whose target always fails, paused after 2 runs in a row end failed or dead
    spec = {
        "name": "flaky-export",
        "schedule": "0 3 * * *",
        "target": {"url": hook_url(hook, "/poison")},
        "max_retries": 0,
        "timeout_s": 5,
        "pause_after_failures": 2,
        "notify": {"on": ["failure", "recovery"], "url": hook_url(hook, "/notify")},
    }
    created = api.post("/jobs", json=spec)
    assert created.status_code == 201, created.text
    job = created.json()
    assert (job["pause_after_failures"], job["notify"]["on"]) == (2, ["failure", "recovery"])
    since = iso(SystemClock().now_ms() - 60_000)
    # When two runs of it fail
    first = api.post(f"/jobs/{job['id']}/trigger").json()
    second = api.post(f"/jobs/{job['id']}/trigger").json()
    # Then the job is paused, naming the run that completed the streak, and its owner alerted
    paused = wait_for(lambda: (j := api.get(f"/jobs/{job['id']}").json())["status"] == "paused" and j, WAIT_S)
    assert paused["paused_after"] in (first["run_id"], second["run_id"])
    alerts = api.get("/alerts").json()["items"]
    assert [a["kind"] for a in alerts if a["job_id"] == job["id"]].count("job_paused") == 1
    # and the webhook heard of both failures from the reaper, signed as target calls are
    wait_for(lambda: len(notified(hook, "failure")) == 2, WAIT_S)
    secret = api.get("/signing-secret").json()["secret"]
    for headers, body in notified(hook, "failure"):
        run_id = headers["X-Punctual-Run-Id"]
        signing.verify(
            secret, headers[signing.SIGNATURE_HEADER], run_id, body, method="POST", url=hook_url(hook, "/notify"),
            job_id=job["id"],
        )  # fmt: skip
        assert json.loads(body)["run_id"] == run_id and headers["Idempotency-Key"] == run_id
    # and each run's log shows its notification, delivered at the first try
    shown = api.get(f"/runs/{first['run_id']}").json()["notification"]
    assert (shown["events"], shown["state"], len(shown["tries"])) == (["failure"], "delivered", 1)

    # When the target is fixed and the dead runs are replayed (a dry run first)
    assert api.patch(f"/jobs/{job['id']}", json={"target": {"url": hook_url(hook, "/ok")}}).status_code == 200
    window = {"from": since, "to": iso(SystemClock().now_ms() + 1_000), "states": ["dead", "failed"]}
    dry = api.post("/runs/replay", json={**window, "dry_run": True})
    assert dry.status_code == 200
    assert sorted(r["run_id"] for r in dry.json()["runs"]) == sorted([first["run_id"], second["run_id"]])
    done = api.post("/runs/replay", json={**window, "job_ids": [job["id"]]})
    assert (done.status_code, done.json()["count"]) == (202, 2)
    # Then the replays run although the job is paused, linked to their originals, and the first
    # success after the failures is a recovery
    replays = wait_for(
        lambda: [r for r in runs_of(api, job["id"]) if r["trigger"] == "replay" and r["state"] == "succeeded"], WAIT_S
    )
    assert {r["replay_of"] for r in replays} <= {first["run_id"], second["run_id"]}
    wait_for(lambda: notified(hook, "recovery"), WAIT_S)
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "paused"
    # And a resume counts anew: the job is active and no longer names the run that paused it
    resumed = api.post(f"/jobs/{job['id']}/resume").json()
    assert (resumed["status"], resumed["paused_after"]) == ("active", None)

    # And the CLI asks the same route (a dry run of the same window, as JSON)
    code = main(
        ["runs", "replay", "--api-url", str(api.http.base_url), "--api-key", KEY, "--from", "1h", "--state", "dead",
         "--dry-run", "--json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["count"] == 2, out


def test_a_replay_names_its_bad_fields_and_changes_nothing(api):
    day = {"from": "2027-01-01T00:00:00Z", "to": "2027-01-02T00:00:00Z"}
    for body, expected in (
        ({"from": day["to"], "to": day["from"]}, (422, "invalid_input", ["to"])),
        ({**day, "states": ["running"]}, (422, "invalid_input", ["states.0"])),
        ({**day, "from": 1798761600}, (422, "invalid_input", ["from"])),
        ({**day, "job_ids": ["job_" + "0" * 32]}, (404, "job_not_found", ["job_id"])),
    ):
        response = api.post("/runs/replay", json=body)
        answer = response.json()
        assert (response.status_code, answer["code"], [d["field"] for d in answer["details"]]) == expected, answer
    # a static path is its route's alone: GET /runs/replay is no run id, it is a method the route lacks
    wrong = api.http.get("/runs/replay")
    assert (wrong.status_code, wrong.headers["Allow"], wrong.json()["code"]) == (405, "POST", "method_not_allowed")


def test_a_target_that_answers_202_completes_its_run_through_the_callback_routes(api, hook):
    # Given a callback job whose target answers 202, then heartbeats and completes over HTTP
    spec = {
        "name": "async-export",
        "schedule": "0 3 * * *",
        "target": {"url": hook_url(hook, "/accept")},
        "completion": "callback",
        "heartbeat_timeout_s": 30,
    }
    created = api.post("/jobs", json=spec)
    assert created.status_code == 201, created.text
    assert (created.json()["completion"], created.json()["heartbeat_timeout_s"]) == ("callback", 30)
    # When it runs
    run = api.post(f"/jobs/{created.json()['id']}/trigger").json()
    # Then the target's callbacks end it succeeded: accepted, then completed with its result
    done = wait_for(lambda: (r := api.get(f"/runs/{run['run_id']}").json())["state"] == "succeeded" and r, WAIT_S)
    assert [(a["outcome"], a["status_code"]) for a in done["attempts"]] == [("accepted", 202), ("succeeded", None)]
    assert (done["attempts"][-1]["response_excerpt"], done["progress"]) == ("812 rows", "half way")
    url, token, beat, completed = wait_for(lambda: hook.callbacks, WAIT_S)[0]
    assert url.endswith(f"/runs/{run['run_id']}") and (beat, completed) == (200, 200)
    # And the token completes once, and nothing else: a replay is 403, the owner's API key is not a token
    callbacks = ApiClient(str(api.http.base_url), None, api.contract)
    again = callbacks.post(
        f"/runs/{run['run_id']}/complete", json={"state": "failed"}, headers={tokens.TOKEN_HEADER: token}
    )
    assert (again.status_code, again.json()["code"]) == (403, "attempt_completed")
    as_owner = api.post(f"/runs/{run['run_id']}/heartbeat", json={})
    assert (as_owner.status_code, as_owner.json()["code"]) == (401, "invalid_callback_token")
    assert callbacks.get("/jobs", headers={tokens.TOKEN_HEADER: token}).status_code == 401
    callbacks.close()
