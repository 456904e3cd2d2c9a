"""The console's flows in headless Chromium against ``punctual dev`` (embedded engine, real workers).

Jobs are created through the API (a failing one, a one-time one, ...), runs are made by the real
workers calling a local target, and weeks of history are written into the same SQLite file; then
the page is driven as a user would: find the jobs, open one (timeline: one row per run; histogram
and heatmap drawn), trigger a run from the page, open a run and read its attempt log, open the
operations view (what issue 31 added is in test_console_glance.py). The XSS test renders markup
from a target's response and a job name and expects text. Every view must load without a script
error or a CSP violation, and the API key must never appear in a request URL.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser import history
from tests.browser.conftest import XSS_BODY, Browser, Dev, chart_option, http_job

pytestmark = pytest.mark.browser

FAILED_COLOR = "#d64541"


def _terminal(count: int) -> Any:
    return lambda runs: len(runs) >= count and all(r["state"] in {"succeeded", "failed", "dead"} for r in runs)


@pytest.fixture(scope="module")
def jobs(dev: Dev, target: str) -> dict[str, dict[str, Any]]:
    retry = {"backoff_s": 1, "max_backoff_s": 1}
    run_at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0).isoformat()
    created = {
        "failing": dev.create(**http_job("nightly-export", f"{target}/fail", max_retries=1, retry=retry)),
        "once": dev.create(
            **http_job("one-time-cleanup", f"{target}/ok", schedule=None, timezone="UTC", run_at=run_at)
        ),
        "report": dev.create(**http_job("nightly-report", f"{target}/ok")),
        "heartbeat": dev.create(**http_job("heartbeat", f"{target}/ok", schedule="0 * * * *", timezone="UTC")),
        "markup": dev.create(**http_job("markup-echo", f"{target}/xss")),
        "paused": dev.create(**http_job("paused-sync", f"{target}/ok", schedule="15 */2 * * *")),
    }
    assert dev.http.post(f"/jobs/{created['paused']['id']}/pause").status_code == 200
    for key in ("failing", "failing", "report", "markup"):
        dev.trigger(created[key]["id"])
        time.sleep(0.01)  # distinct scheduled times
    now = int(time.time() * 1000)
    history.write(
        dev.data_dir,
        history.daily_history(created["report"]["id"], now, days=120, hour_utc_ms=(8 * 60 + 30) * 60_000)
        + history.minutely_history(created["heartbeat"]["id"], now, minutes=60),
    )
    dev.wait_runs(created["failing"]["id"], _terminal(2))
    dev.wait_runs(created["markup"]["id"], _terminal(1))
    dev.wait_runs(created["report"]["id"], lambda runs: runs[0]["state"] == "succeeded")  # the manual one
    return created


def _open(browser: Browser, dev: Dev, path: str = "/console/") -> Any:
    page = browser.page
    page.goto(dev.console_url.replace("/console/", path, 1))
    return page


def test_console_line_carries_the_key_in_the_fragment_only(dev: Dev) -> None:
    assert dev.console_url.startswith(f"{dev.api_url}/console/#key=")
    assert dev.key in dev.console_url.split("#", 1)[1] and dev.key not in dev.console_url.split("#", 1)[0]


def test_jobs_view_finds_the_jobs_with_schedules_in_words_and_sparklines(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    page = _open(browser, dev)
    table = page.locator("#jobs tbody")
    for job in jobs.values():
        if job["status"] != "paused":
            expect(table.locator(f'tr[data-job-id="{job["id"]}"]')).to_contain_text(job["name"])
    report = table.locator(f'tr[data-job-id="{jobs["report"]["id"]}"]')
    expect(report).to_contain_text("At 09:30 (Europe/Berlin)")
    expect(table.locator(f'tr[data-job-id="{jobs["once"]["id"]}"]')).to_contain_text("once at")
    expect(table.locator(f'tr[data-job-id="{jobs["failing"]["id"]}"] [data-testid=last-state]')).to_have_text("dead")
    expect(report.locator("[data-testid=last-state]")).to_have_text("succeeded")
    expect(report.locator("[data-testid=spark] canvas")).to_be_visible()
    spark = chart_option(page, f'tr[data-job-id="{jobs["report"]["id"]}"] [data-testid=spark]')
    assert len(spark["series"][0]["data"]) == 50  # the last 50 runs
    browser.shot("jobs", docs=True)

    page.get_by_label("Search by name").fill("nightly")
    expect(table.locator("tr:visible")).to_have_count(2)
    page.get_by_label("Search by name").fill("")
    page.get_by_label("Filter by status").select_option("paused")
    expect(page).to_have_url(f"{dev.api_url}/console/?status=paused#key={dev.key}")
    expect(table.locator("tr")).to_have_count(1)
    expect(table).to_contain_text("paused-sync")


def test_job_view_timeline_has_one_mark_per_run_and_histogram_and_heatmap_render(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    failing = jobs["failing"]
    page = _open(browser, dev)
    page.locator("#jobs").get_by_role("link", name=failing["name"]).click()
    expect(page.locator("#job-name")).to_contain_text(failing["name"])
    expect(page.locator("#timeline canvas")).to_be_visible()
    runs = dev.runs(failing["id"])

    timeline = chart_option(page, "#timeline")
    assert len(timeline["yAxis"][0]["data"]) == len(runs) == 2  # one row per run
    attempts = [d["value"] for d in timeline["series"][0]["data"] if d["value"][5] == 1]
    # each run failed twice: two red bars per row, in two lanes of it (the retry below the first)
    assert sorted((row, lane, lanes) for row, _, _, lane, lanes, _ in attempts) == [
        (0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)
    ]  # fmt: skip
    assert {d["itemStyle"]["color"] for d in timeline["series"][0]["data"] if d["value"][5] == 1} == {FAILED_COLOR}
    histogram = chart_option(page, "#lateness")
    assert sum(histogram["series"][0]["data"]) == len(runs)
    heatmap = chart_option(page, "#calendar")
    assert heatmap["series"][0]["type"] == "heatmap"
    assert [day[1] for day in heatmap["series"][0]["data"]] == [0]  # today: 0% succeeded
    browser.shot("job-retries")

    report = jobs["report"]
    page.goto(f"{dev.api_url}/console/jobs/{report['id']}#key={dev.key}")
    expect(page.locator("#timeline canvas")).to_be_visible()
    assert len(chart_option(page, "#timeline")["yAxis"][0]["data"]) == 100  # the newest 100 of 121
    assert sum(chart_option(page, "#lateness")["series"][0]["data"]) == 121
    heat = chart_option(page, "#calendar")["series"][0]["data"]
    assert len(heat) == 121 and min(d[1] for d in heat) == 0 and max(d[1] for d in heat) == 100
    expect(page.get_by_test_id("p50")).not_to_have_text("—")
    browser.shot("job", docs=True)


def test_trigger_from_the_page_and_see_the_run_appear(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    job = jobs["report"]
    before = {r["run_id"] for r in dev.runs(job["id"])}
    page = _open(browser, dev, f"/console/jobs/{job['id']}")
    expect(page.locator("#runs tbody tr").first).to_be_visible()
    page.locator("[data-action=trigger]").click()
    expect(page.locator("#confirm")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text("nightly-report")
    page.locator("#confirm-yes").click()

    expect(page.locator("#runs tbody tr").first).to_contain_text("manual")
    new = [r for r in dev.runs(job["id"]) if r["run_id"] not in before]
    assert len(new) == 1 and new[0]["trigger"] == "manual"
    expect(page.locator(f'#runs tr[data-run-id="{new[0]["run_id"]}"]')).to_be_visible()


def test_run_view_reads_the_attempt_log(dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]) -> None:
    failing = jobs["failing"]
    run = dev.runs(failing["id"])[0]
    page = _open(browser, dev, f"/console/jobs/{failing['id']}")
    page.locator(f'#runs tr[data-run-id="{run["run_id"]}"] a').click()
    expect(page.locator("h1")).to_contain_text(run["run_id"])
    attempts = page.get_by_test_id("attempt")
    expect(attempts).to_have_count(2)
    for index in range(2):
        item = attempts.nth(index)
        expect(item).to_contain_text(f"Attempt {index + 1}")
        expect(item).to_contain_text("failed")
        expect(item).to_contain_text("HTTP 500")
        expect(item.get_by_test_id("excerpt")).to_contain_text("the report database is unreachable")
        expect(item).to_contain_text(run["attempts"][index]["worker_id"])
    expect(page.locator("#run-facts")).to_contain_text("dead")
    browser.shot("run", docs=True)


def test_operations_view_shows_the_engines_figures(dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]) -> None:
    stats = dev.http.get("/stats").json()
    page = _open(browser, dev, "/console/ops")
    expect(page.locator("#per-minute canvas")).to_be_visible()
    expect(page.get_by_test_id("ops-finished")).to_contain_text(str(sum(stats["totals"].values())))
    expect(page.get_by_test_id("ops-p99")).to_contain_text("≤")
    expect(page.get_by_test_id("ops-waiting")).to_contain_text(str(stats["open_runs"]["waiting"]))
    expect(page.get_by_test_id("ops-skew")).to_contain_text("one clock")
    per_minute = chart_option(page, "#per-minute")
    drawn = sum(sum(v for v in s["data"]) for s in per_minute["series"])
    assert drawn == sum(stats["totals"].values()) >= 60
    assert sum(chart_option(page, "#ops-lateness")["series"][0]["data"]) == stats["lateness"]["count"]
    browser.shot("ops", docs=True)


def test_operations_view_copes_with_a_deployment_without_run_counters(dev: Dev, browser: Browser) -> None:
    # Given an API that keeps no run counters (aws, -c stats_counters=false): the run figures are null
    def uncounted(route: Any) -> None:
        response = route.fetch()
        body = response.json() | {"runs_counted": False, "totals": None, "per_minute": None, "lateness": None}
        route.fulfill(response=response, json=body)

    page, errors = browser.page, len(browser.console_errors)
    page.route("**/stats?*", uncounted)
    try:
        page = _open(browser, dev, "/console/ops")
        # Then the page says so, draws no run charts, and still shows the queue figures
        expect(page.get_by_test_id("ops-not-counted")).to_contain_text("stats_counters=false")
        for card in ("ops-finished", "ops-p50", "ops-p99"):
            expect(page.get_by_test_id(card)).to_contain_text("not counted")
        expect(page.get_by_test_id("ops-executing")).not_to_have_text("not counted")
        assert page.locator("#per-minute").count() == 0
    finally:
        page.unroute("**/stats?*")
    assert browser.console_errors[errors:] == []


def test_pause_resume_and_delete_ask_first(dev: Dev, browser: Browser, target: str) -> None:
    job = dev.create(**http_job("to-be-deleted", f"{target}/ok"))
    page = _open(browser, dev, f"/console/jobs/{job['id']}")
    page.locator("[data-action=pause]").click()
    page.locator("#confirm-no").click()
    assert dev.http.get(f"/jobs/{job['id']}").json()["status"] == "active"
    page.locator("[data-action=pause]").click()
    page.locator("#confirm-yes").click()
    expect(page.locator("[data-action=resume]")).to_be_visible()
    assert dev.http.get(f"/jobs/{job['id']}").json()["status"] == "paused"
    page.locator("[data-action=resume]").click()
    page.locator("#confirm-yes").click()
    expect(page.locator("[data-action=pause]")).to_be_visible()
    page.locator("[data-action=delete]").click()
    expect(page.locator("#confirm-text")).to_contain_text("cannot be undone")
    page.locator("#confirm-yes").click()
    expect(page.locator("#jobs")).to_be_visible()
    assert dev.http.get(f"/jobs/{job['id']}").json()["status"] == "deleted"


def test_markup_in_a_job_name_and_a_response_renders_as_text(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    evil = "<img src=x onerror=alert(1)>"
    # The API refuses such a name; the console must still escape one (an older or foreign API), so
    # the page is served this job's name through a rewritten API answer.
    assert dev.http.post("/jobs", json=http_job(evil, "https://example.com/x")).status_code == 422
    markup = jobs["markup"]
    page = browser.page

    def rename(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        for job in body.get("items", [body]):
            if job.get("id") == markup["id"]:
                job["name"] = evil
        route.fulfill(response=response, json=body)

    page.route("**/jobs?*", rename)
    page.route(f"**/jobs/{markup['id']}", rename)
    try:
        page.goto(dev.console_url)
        row = page.locator(f'tr[data-job-id="{markup["id"]}"]')
        expect(row).to_contain_text(evil)
        row.get_by_role("link").click()
        expect(page.locator("#job-name")).to_contain_text(evil)
        run = dev.runs(markup["id"])[0]
        page.goto(f"{dev.api_url}/console/runs/{run['run_id']}#key={dev.key}")
        expect(page.get_by_test_id("excerpt")).to_have_text(XSS_BODY)
        expect(page.locator("h1 ~ p a, p a").first).to_contain_text(evil)
    finally:
        page.unroute("**/jobs?*")
        page.unroute(f"**/jobs/{markup['id']}")
    assert page.evaluate("window.__xss") is None
    assert page.locator('img[src="x"], main script').count() == 0
    assert not [e for e in browser.console_errors if e.startswith("dialog")]


def _answer_with(page: Any, pattern: str, body: Any) -> None:
    page.route(pattern, lambda route: route.fulfill(status=200, json=body))


def _offer(page: Any, *templates: str) -> None:
    """The served OpenAPI document, plus optional routes this API does not have (yet)."""

    def extend(route: Any) -> None:
        response = route.fetch()
        document = response.json()
        for template in templates:
            document["paths"].setdefault(template, {"get": {"responses": {"200": {"description": "ok"}}}})
        route.fulfill(response=response, json=document)

    page.route("**/openapi.json", extend)


def test_dependency_graph_shows_upstream_and_dependents_when_the_api_offers_it(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    # GET /jobs/{id}/graph comes with job dependencies (issue 11); its answer, as that API shapes it
    job = jobs["report"]
    node = {"status": "active", "last_run_id": None, "last_run_at": None}
    graph = {
        "job": {**node, "id": job["id"], "name": job["name"], "last_run_state": "succeeded"},
        "upstream": [{**node, "id": jobs["failing"]["id"], "name": "nightly-export", "last_run_state": "dead"}],
        "downstream": [{**node, "id": jobs["markup"]["id"], "name": "markup-echo", "last_run_state": None}],
        "edges": [
            {"upstream": jobs["failing"]["id"], "dependent": job["id"], "when": "finished"},
            {"upstream": job["id"], "dependent": jobs["markup"]["id"], "when": "succeeded"},
        ],
        "truncated": False,
    }
    page = browser.page
    _offer(page, "/jobs/{job_id}/graph")
    _answer_with(page, f"**/jobs/{job['id']}/graph", graph)
    try:
        page.goto(f"{dev.api_url}/console/jobs/{job['id']}#key={dev.key}")
        expect(page.locator("#graph canvas")).to_be_visible()
        option = chart_option(page, "#graph")["series"][0]
        assert sorted(n["name"] for n in option["data"]) == ["markup-echo", "nightly-export", "nightly-report"]
        assert [n["x"] for n in sorted(option["data"], key=lambda n: n["x"])] == [-260, 0, 260]  # up, job, down
        assert [(link["value"]) for link in option["links"]] == ["finished", "succeeded"]
        browser.shot("job-graph")
    finally:
        page.unroute("**/openapi.json")
        page.unroute(f"**/jobs/{job['id']}/graph")
    page.reload()  # not offered: no section, no request
    expect(page.locator("#timeline canvas")).to_be_visible()
    assert page.locator("#graph").count() == 0


def test_limits_and_usage_when_the_api_offers_them(dev: Dev, browser: Browser) -> None:
    # GET /limits comes with tenants (issue 12); its answer, as that API shapes it
    limits = {
        "owner": "local",
        "limits": {"max_jobs": 100, "max_runs_per_minute": None, "max_concurrency": 8,
                   "api_requests_per_second": 50, "weight": 1},
        "usage": {"live_jobs": 7, "running": 2, "runs_this_minute": None},
    }  # fmt: skip
    page = browser.page
    _offer(page, "/limits")
    _answer_with(page, "**/limits", limits)
    try:
        page.goto(f"{dev.api_url}/console/ops#key={dev.key}")
        expect(page.locator("#limits")).to_be_visible()
        expect(page.locator('#limits tr[data-limit="max_jobs"]')).to_contain_text("7")
        expect(page.locator('#limits tr[data-limit="max_runs_per_minute"]')).to_contain_text("none")
        usage = chart_option(page, "#limits-chart")["series"][0]["data"]
        assert usage == [7, 25]  # 7 of 100 jobs, 2 of 8 concurrent runs
    finally:
        page.unroute("**/openapi.json")
        page.unroute("**/limits")


def test_no_script_errors_no_csp_violations_and_the_key_never_in_a_url(dev: Dev, browser: Browser) -> None:
    # runs last in this module: every view above was loaded in this browser
    assert browser.requests, "the browser made no requests"
    assert browser.console_errors == []
    for request in browser.requests:
        assert dev.key not in request.url, request.url
    api_calls = [r for r in browser.requests if "/console/" not in r.url and r.resource_type == "fetch"]
    assert api_calls and all(r.headers.get("authorization") == f"Bearer {dev.key}" for r in api_calls)


def test_calendar_view_and_the_job_page_says_which_times_the_calendar_skips(
    dev: Dev, browser: Browser, target: str
) -> None:
    # issue 32: a calendar excluding the next three days; a daily job that names it (skip)
    today = datetime.now(UTC).date()
    excluded = [(today + timedelta(days=d)).isoformat() for d in (1, 2, 3)]
    assert dev.http.put("/calendars/desk", json={"timezone": "UTC", "exclude_dates": excluded}).status_code == 201
    job = dev.create(**http_job("desk-report", f"{target}/ok", schedule="0 6 * * *", timezone="UTC",
                                calendar={"name": "desk"}))  # fmt: skip
    errors = len(browser.console_errors)
    page = _open(browser, dev, f"/console/jobs/{job['id']}")
    expect(page.locator("#preview tbody tr").first).to_be_visible()
    skipped = page.locator('#preview tr[data-cause="calendar"]')
    expect(skipped).to_have_count(3)
    expect(skipped.first).to_contain_text("is one of its excluded dates")
    page.locator("dl.facts").get_by_role("link", name="desk").click()
    expect(page.locator("#calendar-name")).to_have_text("desk")
    for day in excluded:
        expect(page.locator(f'#calendar-grid td[data-date="{day}"]')).to_have_class("excluded")
    page.goto(f"{dev.api_url}/console/calendars#key={dev.key}")
    expect(page.locator('#calendars tr[data-calendar="desk"]')).to_contain_text("3 dates")
    browser.shot("calendar")
    assert browser.console_errors[errors:] == []


def test_an_accepted_run_shows_its_heartbeat_in_the_runs_table_and_its_own_view(
    dev: Dev, browser: Browser, jobs: dict[str, dict[str, Any]]
) -> None:
    # Given a run a callback job's target accepted (the API's answers for it, as docs/api.md shapes them)
    job = jobs["report"]
    listed = dev.http.get(f"/jobs/{job['id']}/runs").json()
    run = listed["items"][0]
    due, beat = "2027-01-15T08:05:00.000Z", "2027-01-15T08:00:00.000Z"
    accepted = {**run, "state": "accepted", "finished_at": None, "heartbeat_deadline_at": due,
                "heartbeat_at": beat, "progress": "42 %"}  # fmt: skip
    page = browser.page
    routes = (f"**/jobs/{job['id']}/runs?*", f"**/runs/{run['run_id']}")
    _answer_with(page, routes[0], {**listed, "items": [accepted, *listed["items"][1:]]})
    _answer_with(page, routes[1], accepted)
    # Then the job's runs table says until when it lives and its last heartbeat
    page = _open(browser, dev, f"/console/jobs/{job['id']}")
    row = page.locator(f'#runs tr[data-run-id="{run["run_id"]}"]')
    expect(row).to_contain_text("accepted")
    expect(row.get_by_test_id("accepted")).to_contain_text("heartbeat due 08:05:00")
    expect(row.get_by_test_id("accepted")).to_contain_text("(42 %)")
    # and the run's own view, its heartbeat deadline and its last heartbeat with its note
    row.locator("a").click()
    facts = page.locator("#run-facts")
    expect(facts).to_contain_text("Heartbeat due")
    expect(facts).to_contain_text("42 %")
    for pattern in routes:  # the next test sees the API's own answers
        page.unroute(pattern)


def test_replay_ticked_runs_after_a_dry_run_and_a_replay_links_its_original(
    dev: Dev, browser: Browser, target: str
) -> None:
    # Given a job whose two runs died (its target answers 500; no retry)
    job = dev.create(**http_job("replayable-export", f"{target}/fail"))
    for _ in range(2):
        dev.trigger(job["id"])
        time.sleep(0.01)  # distinct scheduled times
    dead = dev.wait_runs(job["id"], _terminal(2))
    errors = len(browser.console_errors)
    page = _open(browser, dev, f"/console/jobs/{job['id']}")
    # The filter form's dry run counts them (the last 24 hours, failed or dead), starting nothing
    page.locator("[data-action=replay]").click()
    page.locator("#replay-preview").click()
    expect(page.locator("#replay-filter-preview").get_by_test_id("replay-count")).to_contain_text("2 runs would")
    # When the owner ticks both runs and asks to replay them
    for run in dead:
        page.locator(f'#runs input[data-replay="{run["run_id"]}"]').check()
    expect(page.locator("#replay-selected-count")).to_have_text("2 selected")
    page.locator("#replay-selected").click()
    # Then the dry run lists them first, and nothing has started yet
    listed = page.locator("#replay-selected-preview")
    expect(listed.get_by_test_id("replay-count")).to_contain_text("2 runs would be replayed")
    expect(listed.locator("tr")).to_have_count(2)
    assert len(dev.runs(job["id"])) == 2
    browser.shot("replay-preview")
    # When they confirm
    listed.locator("[data-action=replay-confirm]").click()
    expect(page.locator("#confirm-text")).to_contain_text("Replay 2 runs?")
    page.locator("#confirm-yes").click()
    # Then one replay of each starts, linked to its original, and shows in the run table
    expect(page.get_by_test_id("replay-done")).to_contain_text("Replayed 2 runs")
    replays = [r for r in dev.runs(job["id"]) if r["trigger"] == "replay"]
    assert sorted(r["replay_of"] for r in replays) == sorted(r["run_id"] for r in dead)
    expect(page.locator(f'#runs tr[data-run-id="{replays[0]["run_id"]}"]')).to_contain_text("replay")
    # And a replay's page links the run it replays
    page.locator(f'#runs tr[data-run-id="{replays[0]["run_id"]}"] a').click()
    expect(page.get_by_test_id("replay-of")).to_have_text(replays[0]["replay_of"])
    page.get_by_test_id("replay-of").get_by_role("link").click()
    expect(page.locator("h1")).to_contain_text(replays[0]["replay_of"])
    assert browser.console_errors[errors:] == []


def test_runs_past_their_deadline_and_a_missed_instant_carry_badges(dev: Dev, browser: Browser, target: str) -> None:
    # Given a job with deadline_s 60: a run still waiting 5 minutes after its time, one that finished
    # 3 minutes after its time, one on time; and an instant of it that produced no run (run_missed)
    job = dev.create(**http_job("deadline-report", f"{target}/ok", deadline_s=60))
    now = int(time.time() * 1000)
    runs = history.deadline_runs(job["id"], now)
    history.write(dev.data_dir, list(runs.values()))
    history.record_missed_instant(dev.data_dir, job["id"], now - 60 * 60_000)
    errors = len(browser.console_errors)
    # Then the jobs list marks the job (a missed run) and its last run (still open past its deadline)
    page = _open(browser, dev)
    row = page.locator(f'#jobs tr[data-job-id="{job["id"]}"]')
    expect(row.get_by_test_id("missed-run-badge")).to_have_text("missed run")
    expect(row.get_by_test_id("last-state").get_by_test_id("deadline-badge")).to_have_text("missed deadline")
    # and the job's run table marks the open and the late run, not the one on time
    page.goto(f"{dev.api_url}/console/jobs/{job['id']}#key={dev.key}")
    expect(page.locator("#runs [data-testid=deadline-badge]")).to_have_count(2)
    for name in ("open", "late"):
        expect(
            page.locator(f'#runs tr[data-run-id="{runs[name].run_id}"]').get_by_test_id("deadline-badge")
        ).to_be_visible()
    expect(page.locator("#job-name").get_by_test_id("missed-run-badge")).to_be_visible()
    expect(page.locator("#job-facts")).to_contain_text("Deadline")
    browser.shot("deadlines")
    # and the late run's page says when it was due, and that it missed it
    page.goto(f"{dev.api_url}/console/runs/{runs['late'].run_id}#key={dev.key}")
    expect(page.locator("h1").get_by_test_id("deadline-badge")).to_be_visible()
    expect(page.get_by_test_id("deadline-fact")).to_contain_text("(deadline_s 60)")
    assert browser.console_errors[errors:] == []
