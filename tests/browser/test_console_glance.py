"""The console at a glance (issue 31) in headless Chromium against ``punctual dev``: why runs wait
and what a job runs after, on every page that lists them; the live refresh and its indicator; the
run timeline as a Gantt of attempts with durations and a state filter; the owner's own backlog and a
window control on Operations; the empty and wrong-key states; a 420 px screen.

Few page loads, each asserting several things (the browser tier's budget). Runs that wait for a
limit are written into the stack's SQLite file as a worker leaves them (``note: waiting: ...``) and
then started and finished through the store, as the worker would once the limit lets it; the page's
timers run on Playwright's clock, so a live refresh is a fast-forward, not a sleep. Every page must
load without a script error or a console error.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser import history
from tests.browser.conftest import Browser, Dev, chart_option, http_job

pytestmark = pytest.mark.browser

FAILED_COLOR, SUCCEEDED_COLOR = "#d64541", "#2e9d5b"
RATE = "max_runs_per_minute 4"
KEYED = "concurrency_key report 2"  # a limit the console does not know: shown as the API words it
# Chromium logs every 401 answer as a console error ("Failed to load resource"): expected once the
# page is opened with a wrong key, and only then.
REFUSED_LOAD = "Failed to load resource: the server responded with a status of 401"


@pytest.fixture(scope="module")
def world(dev: Dev, target: str) -> dict[str, Any]:
    daily = {"schedule": "0 3 * * *", "timezone": "UTC"}
    jobs = {
        "extract": dev.create(**http_job("extract", f"{target}/ok", **daily)),
        "throttled": dev.create(**http_job("throttled-export", f"{target}/ok", **daily)),
        "keyed": dev.create(**http_job("keyed-report", f"{target}/ok", **daily)),
        "retried": dev.create(**http_job("flaky-sync", f"{target}/ok", **daily)),
        "fresh": dev.create(**http_job("fresh-job", f"{target}/ok", **daily)),
    }
    jobs["load"] = dev.create(
        **http_job(
            "load", f"{target}/ok", schedule=None, depends_on={"jobs": [jobs["extract"]["id"]], "when": "succeeded"}
        )
    )
    now = int(time.time() * 1000)
    waiting = history.waiting_run(jobs["throttled"]["id"], now - 30_000, RATE, now)
    stale = history.retried_history(jobs["throttled"]["id"], now)[0]  # succeeded long ago, but its note
    stale = stale.model_copy(update={"note": f"waiting: {RATE}"})  # still says it waits (older versions)
    runs = [waiting, stale, history.waiting_run(jobs["keyed"]["id"], now - 20_000, KEYED, now)]
    history.write(dev.data_dir, runs + history.retried_history(jobs["retried"]["id"], now))
    return {"jobs": jobs, "waiting": waiting, "stale": stale}


def _goto(browser: Browser, dev: Dev, path: str, key: str | None = None) -> Any:
    browser.page.goto(f"{dev.api_url}{path}#key={key or dev.key}")
    return browser.page


def _api_requests(browser: Browser) -> int:
    return sum(1 for r in browser.requests if r.resource_type == "fetch" and "/console/" not in r.url)


def _set_hidden(page: Any, hidden: bool) -> None:
    page.evaluate(
        """(hidden) => {
            if (hidden) {
                Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
                Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
            } else {
                delete document.hidden;
                delete document.visibilityState;
            }
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_jobs_list_says_why_runs_wait_and_what_jobs_run_after_live(
    dev: Dev, browser: Browser, world: dict[str, Any]
) -> None:
    jobs, page = world["jobs"], browser.page
    page.clock.install()  # timers run on Playwright's clock: a live refresh is a fast-forward
    _goto(browser, dev, "/console/")
    row = lambda key: page.locator(f'#jobs tr[data-job-id="{jobs[key]["id"]}"]')  # noqa: E731

    # Why runs wait: the owner's limit, and a limit the console does not know, as the API words them
    expect(row("throttled").get_by_test_id("waiting")).to_have_text(f"waiting: {RATE}")
    expect(row("keyed").get_by_test_id("waiting")).to_have_text(f"waiting: {KEYED}")
    expect(row("retried").get_by_test_id("last-state")).to_have_text("succeeded")  # nothing waits there
    # What depends on what: "after extract (succeeded)", linked, and what it still waits for
    after = row("load").get_by_test_id("depends-on")
    expect(after).to_have_text("after extract (succeeded)")
    expect(after.get_by_role("link", name="extract")).to_have_attribute(
        "href", f"/console/jobs/{jobs['extract']['id']}#key={dev.key}"
    )
    expect(row("load").get_by_test_id("next")).to_have_text("waiting for extract")
    live = page.locator("#live")
    expect(live).to_have_attribute("data-state", "live")
    expect(live).to_contain_text("Live")
    browser.shot("jobs-waiting")

    # When the limit lets the waiting run start and it succeeds, the next refresh clears its reason
    history.start_and_finish(dev.data_dir, world["waiting"], int(time.time() * 1000))
    page.clock.fast_forward(11_000)
    expect(row("throttled").get_by_test_id("last-state")).to_have_text("succeeded")
    expect(row("throttled").get_by_test_id("waiting")).to_have_count(0)
    expect(row("keyed").get_by_test_id("waiting")).to_have_text(f"waiting: {KEYED}")

    # A hidden tab polls nothing and says so; shown again, it refreshes at once
    _set_hidden(page, True)
    expect(live).to_have_attribute("data-state", "paused")
    before = _api_requests(browser)
    page.clock.fast_forward(60_000)
    page.wait_for_timeout(300)
    assert _api_requests(browser) == before
    _set_hidden(page, False)
    expect(live).to_have_attribute("data-state", "live")
    assert _api_requests(browser) > before
    assert browser.console_errors == []


def test_job_pages_gantt_of_attempts_durations_filter_waits_and_empty_state(
    dev: Dev, browser: Browser, world: dict[str, Any]
) -> None:
    jobs, page = world["jobs"], browser.page
    retried = {r["run_id"]: r for r in dev.runs(jobs["retried"]["id"])}
    _goto(browser, dev, f"/console/jobs/{jobs['retried']['id']}")
    expect(page.locator("#timeline canvas")).to_be_visible()

    # A Gantt of attempts: time on the x axis (ticks on round times), one row per run, a bar per
    # attempt as wide as it took and coloured by outcome, a run's retries stacked in its row
    option = chart_option(page, "#timeline")
    assert option["xAxis"][0]["type"] == "time"
    assert len(option["yAxis"][0]["data"]) == len(retried) == 4
    bars = [d for d in option["series"][0]["data"] if d["value"][5] == 1]  # attempts (not waits)
    assert sorted(d["value"][2] - d["value"][1] for d in bars) == [500, 700, 1_500, 1_500, 2_000, 8_000]
    by_row: dict[int, list[dict[str, Any]]] = {}
    for bar in bars:
        by_row.setdefault(bar["value"][0], []).append(bar)
    stacked = sorted((row for row in by_row.values() if len(row) == 2), key=lambda row: row[0]["value"][1])
    assert [[(b["value"][3], b["value"][4]) for b in row] for row in stacked] == [[(0, 2), (1, 2)]] * 2
    assert [b["itemStyle"]["color"] for b in stacked[0]] == [FAILED_COLOR, SUCCEEDED_COLOR]  # timeout, then ok
    assert {b["itemStyle"]["color"] for b in stacked[1]} == {FAILED_COLOR}  # failed twice: dead
    # the calendar spans the job's life (created today, runs from minutes ago), not months
    start, end = chart_option(page, "#calendar")["calendar"][0]["range"]
    assert start >= end[:8] + "00" or start == end  # the same day (or yesterday, just after midnight)
    # a duration column: the retried run took 12 s from its first start to its last end
    table = page.locator("#runs tbody")
    expect(table.locator("tr")).to_have_count(4)
    retried_row = next(r for r in retried.values() if len(r["attempts"]) == 2 and r["state"] == "succeeded")
    expect(table.locator(f'tr[data-run-id="{retried_row["run_id"]}"] [data-testid=duration]')).to_have_text("12.0 s")
    # a state filter: the timeline and the table show the dead run only
    page.locator("#state-filter").select_option("dead")
    expect(table.locator("tr")).to_have_count(1)
    expect(table).to_contain_text("dead")
    assert len(chart_option(page, "#timeline")["yAxis"][0]["data"]) == 1
    assert "state=dead" in page.url
    page.locator("#state-filter").select_option("")
    browser.shot("job-gantt")

    # A run still waiting says why in the runs table; a run that waited and then ran does not, and
    # its log keeps what it waited for
    _goto(browser, dev, f"/console/jobs/{jobs['keyed']['id']}")
    expect(page.locator("#runs [data-testid=why]").first).to_have_text(f"waiting: {KEYED}")
    _goto(browser, dev, f"/console/jobs/{jobs['throttled']['id']}")
    for run in (world["waiting"], world["stale"]):
        row = page.locator(f'#runs tr[data-run-id="{run.run_id}"]')
        expect(row).to_contain_text("succeeded")
        expect(row.get_by_test_id("why")).to_have_text("")
    page.locator(f'#runs tr[data-run-id="{world["waiting"].run_id}"] a').click()
    expect(page.get_by_test_id("attempt-waited")).to_have_text(f"started after waiting for {RATE}")
    expect(page.locator("#run-facts")).not_to_contain_text("Why")

    # A dependent job says what it runs after and waits for; a job without runs shows one state
    _goto(browser, dev, f"/console/jobs/{jobs['load']['id']}")
    facts = page.locator("#job-facts")
    expect(facts).to_contain_text("after extract (succeeded)")
    expect(facts.get_by_role("link", name="extract")).to_be_visible()
    expect(facts).to_contain_text("waiting for extract")
    expect(page.get_by_test_id("no-runs")).to_have_text("No runs yet — runs after extract (succeeded)")
    _goto(browser, dev, f"/console/jobs/{jobs['fresh']['id']}")
    expect(page.get_by_test_id("no-runs")).to_have_text(
        f"No runs yet — next at {jobs['fresh']['next_run_at'][:10]} {jobs['fresh']['next_run_at'][11:19]} UTC"
    )
    assert page.locator("#view canvas, #timeline, #lateness, #calendar, #runs").count() == 0
    browser.shot("job-empty")
    assert browser.console_errors == []


def test_operations_window_own_backlog_and_the_queue_for_operators_only(
    dev: Dev, browser: Browser, world: dict[str, Any]
) -> None:
    page = browser.page
    stats = dev.http.get("/stats", params={"minutes": 1440}).json()
    _goto(browser, dev, "/console/ops?minutes=1440")  # once a red box: the API capped the window at 360

    expect(page.locator("h1")).to_have_text("Operations · last 24 hours")
    expect(page.locator("#ops-window")).to_have_value("1440")
    expect(page.locator("#per-minute canvas")).to_be_visible()
    expect(page.locator("#view h2").first).to_have_text("Runs per 5 minutes by outcome")
    assert len(chart_option(page, "#per-minute")["xAxis"][0]["data"]) == len(stats["per_minute"]) >= 288
    # the owner's own backlog; the deployment's queue is not the owner's to see
    assert stats["queue"] is None
    expect(page.get_by_test_id("ops-waiting")).to_contain_text(str(stats["open_runs"]["waiting"]))
    expect(page.get_by_test_id("ops-executing")).to_contain_text(str(stats["open_runs"]["executing"]))
    assert stats["open_runs"]["waiting"] >= 1  # keyed-report's run waits
    expect(page.get_by_test_id("ops-depth")).to_have_count(0)
    browser.shot("ops-window")

    # An operator's answer carries the deployment's queue: then it is shown
    def as_operator(route: Any) -> None:
        response = route.fetch()
        route.fulfill(response=response, json=response.json() | {"queue": {"depth": 17, "dead_letters": 2}})

    page.route("**/stats?*", as_operator)
    try:
        page.locator("#ops-window").select_option("10080")
        expect(page).to_have_url(f"{dev.api_url}/console/ops?minutes=10080#key={dev.key}")
        expect(page.locator("h1")).to_have_text("Operations · last 7 days")
        expect(page.get_by_test_id("ops-depth")).to_contain_text("17")
        expect(page.get_by_test_id("ops-dead-letters")).to_contain_text("2")
        expect(page.locator("#view h2").first).to_have_text("Runs per hour by outcome")
    finally:
        page.unroute("**/stats?*")
    assert browser.console_errors == []


def test_a_wrong_key_is_refused_and_a_narrow_screen_fits(dev: Dev, browser: Browser, world: dict[str, Any]) -> None:
    page = browser.page
    _goto(browser, dev, "/console/", key="not-the-key")
    expect(page.locator("#sign-in-help")).to_contain_text("The key in this link was refused.")
    expect(page.locator("#sign-in-help")).to_contain_text("punctual dev")
    expect(page.locator("#who")).to_have_text("key refused")
    browser.shot("key-refused")
    # leave the refused page before counting: its poll may refuse once more (a 401 logged by
    # Chromium) while a same-path link with the right key only changes the hash (seen in CI)
    page.goto("about:blank")
    refused = [e for e in browser.console_errors if REFUSED_LOAD in e]
    assert refused and refused == browser.console_errors
    browser.console_errors.clear()

    page.set_viewport_size({"width": 420, "height": 860})
    try:
        for path, ready, name in (
            ("/console/", "#jobs tbody tr", "narrow-jobs"),
            (f"/console/jobs/{world['jobs']['retried']['id']}", "#timeline canvas", "narrow-job"),
            ("/console/ops", "#per-minute canvas", "narrow-ops"),
        ):
            _goto(browser, dev, path)
            expect(page.locator(ready).first).to_be_visible()
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 420, f"{path} is {width} px wide at 420 px"
            browser.shot(name)
        _goto(browser, dev, "/console/")
        expect(page.locator("#jobs tbody tr").first).to_be_visible()
        lines = page.evaluate(
            "() => [...document.querySelectorAll('td.name a')].map((a) => [a.textContent, a.getClientRects().length])"
        )
        assert lines and all(count == 1 for _, count in lines), lines  # no name broken inside a word
    finally:
        page.set_viewport_size({"width": 1360, "height": 900})
    assert browser.console_errors == []
    # offline: every request of every page above went to this stack (no CDN, no font service)
    assert browser.requests and all(r.url.startswith((dev.api_url, "data:")) for r in browser.requests)
