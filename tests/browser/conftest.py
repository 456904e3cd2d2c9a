"""The console in a real headless Chromium (Debian's ``chromium``), driven by Playwright's Python API.

``dev`` runs ``punctual dev`` as a subprocess on a fresh data dir (port 0) and reads the lines it
prints, including ``Console: <url>#key=...``; its workers deliver runs to ``target``, a small HTTP
server on 127.0.0.1 that answers 200, 500, or a body with markup in it. ``browser`` is a fresh
Chromium profile (an empty user-data-dir) per test module. Screenshots go to
``test-artifacts/console/`` (kept as CI artifacts); with ``PUNCTUAL_UPDATE_DOCS_IMG=1`` the ones
shown in docs/console.md are also copied to ``docs/img/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = Path(os.environ.get("PUNCTUAL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
DOCS_IMG = ROOT / "docs" / "img"
XSS_BODY = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
START_TIMEOUT_S = 60.0


# -- the target the runs call ------------------------------------------------------------------------


class _Target(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        if self.path.startswith("/fail"):
            self._answer(500, '{"error": "the report database is unreachable"}')
        elif self.path.startswith("/xss"):
            self._answer(200, XSS_BODY, "text/html")
        else:
            self._answer(200, '{"ok": true, "rows": 1284}')

    def _answer(self, status: int, body: str, media: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture(scope="session")
def target() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# -- punctual dev ---------------------------------------------------------------------------------


@dataclass
class Dev:
    api_url: str
    key: str
    console_url: str
    data_dir: Path
    http: httpx.Client

    def create(self, **spec: Any) -> dict[str, Any]:
        response = self.http.post("/jobs", json=spec)
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def trigger(self, job_id: str) -> dict[str, Any]:
        response = self.http.post(f"/jobs/{job_id}/trigger")
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/jobs/{job_id}/runs", params={"limit": 100})
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["items"]
        return items

    def wait_runs(
        self, job_id: str, done: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 60.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            runs = self.runs(job_id)
            if done(runs):
                return runs
            assert time.monotonic() < deadline, f"runs of {job_id} did not get there: {[r['state'] for r in runs]}"
            time.sleep(0.25)


def http_job(name: str, url: str, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "schedule": "30 9 * * *",
        "timezone": "Europe/Berlin",
        "target": {"type": "http", "url": url, "method": "POST", "headers": {}},
        "timeout_s": 10,
        "max_retries": 0,
    }
    spec.update(overrides)
    return spec


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    data_dir = tmp_path_factory.mktemp("dev")
    env = {**os.environ, "PUNCTUAL_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "punctual.cli", "dev", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    lines: list[str] = []
    try:
        found = _read_until(process, lines, "Console: ")
        console_url = found.split("Console: ", 1)[1].strip()
        api_url = next(line.split(": ", 1)[1].strip() for line in lines if line.startswith("Punctual API: "))
        key = next(line.split(": ", 1)[1].strip() for line in lines if line.startswith("API key: "))
        threading.Thread(target=_drain, args=(process, lines), daemon=True).start()
        with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=10) as http:
            yield Dev(api_url, key, console_url, data_dir, http)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _read_until(process: subprocess.Popen[str], lines: list[str], marker: str) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith(marker):
            return line.rstrip("\n")
    raise AssertionError("punctual dev did not print its console URL:\n" + "\n".join(lines[-30:]))


def _drain(process: subprocess.Popen[str], lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        del lines[:-500]


# -- the browser ------------------------------------------------------------------------------------


@dataclass
class Browser:
    context: Any
    page: Any
    console_errors: list[str]
    requests: list[Any]

    def shot(self, name: str, *, docs: bool = False) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        if docs and os.environ.get("PUNCTUAL_UPDATE_DOCS_IMG") == "1":
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_IMG / f"console-{name}.png")
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    assert not any(profile.iterdir())  # a new, empty user-data-dir
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1360, "height": 900},
            timezone_id="UTC",
        )
        context.set_default_timeout(20_000)
        page = context.pages[0] if context.pages else context.new_page()
        errors: list[str] = []
        requests: list[Any] = []
        page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        # with the script's stack and page: a rare error's origin is otherwise lost (issue 9 CI, 2026-12-01)
        page.on("pageerror", lambda e: errors.append(f"pageerror: {e} on {page.url}\n{e.stack}"))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: requests.append(r))  # noqa: PLW0108 - Playwright needs a function it can tag
        try:
            yield Browser(context, page, errors, requests)
        finally:
            context.close()


def chart_option(page: Any, selector: str) -> dict[str, Any]:
    """The option ECharts holds for the chart in ``selector`` (what it draws)."""
    raw = page.evaluate(
        "(sel) => { const c = window.echarts.getInstanceByDom(document.querySelector(sel));"
        " return c ? JSON.stringify(c.getOption()) : null; }",
        selector,
    )
    assert raw is not None, f"no chart rendered in {selector}"
    option: dict[str, Any] = json.loads(raw)
    return option


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
