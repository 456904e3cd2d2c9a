"""``punctual console --api-url`` against the aws engine on a moto server, behind a stand-in for API
Gateway's IAM authorization that verifies every request's SigV4 signature (``sigv4.verify``).

The stand-in turns a verified request into the Lambda event API Gateway would send (the caller's
IAM user as ``identity.userArn``) and hands it to the API, so the owner is the signing identity.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import SystemClock
from punctual.console import proxy
from punctual.local.server import BackgroundServer, to_event, to_response
from tests.browser import sigv4
from tests.browser.conftest import ROOT, Browser, http_job

pytestmark = pytest.mark.browser

REGION = "eu-central-1"
AKID, SECRET = "AKIDCONSOLETEST00001", "console-test-secret"
OTHER_AKID, OTHER_SECRET = "AKIDSOMEONEELSE00002", "someone-else-secret"
ACCOUNT = "123456789012"
STAGE = "v1"


@dataclass
class Gateway:
    url: str
    verified: list[str] = field(default_factory=list)  # "METHOD path" of each request it let through
    refused: list[str] = field(default_factory=list)  # why it refused the others


def gateway_app(services: Services, gateway: Gateway) -> Starlette:
    keys = {AKID: SECRET, OTHER_AKID: OTHER_SECRET}

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        query = request.query_params.multi_items()
        akid, reason = sigv4.verify(request.method, request.url.path, query, headers, body, keys, REGION)
        if akid is None:
            gateway.refused.append(str(reason))
            return JSONResponse({"message": f"Forbidden: {reason}"}, status_code=403)
        gateway.verified.append(f"{request.method} {request.url.path}")
        event = to_event(request, body, None)
        # API Gateway passes the resource path without the stage (the URL has /v1 in front)
        event["path"] = event["path"].removeprefix(f"/{STAGE}") or "/"
        event["pathParameters"] = {"proxy": event["path"].lstrip("/")}
        event["requestContext"].update(stage=STAGE, path=request.url.path)
        event["requestContext"]["identity"]["userArn"] = f"arn:aws:iam::{ACCOUNT}:user/{akid}"
        return to_response(await run_in_threadpool(handle, event, None, services))

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST", "PATCH", "DELETE"])])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    from tests.e2e.conftest import _open_aws

    with pytest.MonkeyPatch.context() as env:
        engine, settings, stop_moto = _open_aws(tmp_path_factory.mktemp("aws"), env)
        server = BackgroundServer(gateway_app(Services.of(engine, settings, SystemClock()), gw := Gateway("")))
        try:
            gw.url = server.start() + "/v1"  # a stage path, as API Gateway's URLs have
            yield gw
        finally:
            server.stop()
            engine.close()
            stop_moto()


@dataclass
class Proxy:
    url: str
    token: str
    http: httpx.Client


@pytest.fixture(scope="module")
def console(gateway: Gateway) -> Iterator[Proxy]:
    token = proxy.new_token()
    hosts: set[str] = set()
    signer = proxy.SigV4Signer(Credentials(AKID, SECRET), REGION)
    server = BackgroundServer(proxy.proxy_app(gateway.url, signer, token, allowed_hosts=lambda: hosts))
    url = server.start()
    hosts.add(f"127.0.0.1:{server.port}")
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            yield Proxy(url, token, http)
    finally:
        server.stop()


def _signed(method: str, url: str, body: bytes, akid: str, secret: str) -> dict[str, str]:
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(akid, secret), "execute-api", REGION).add_auth(request)
    return dict(request.headers.items())


def test_every_request_through_the_console_is_signed_with_sigv4(gateway: Gateway, console: Proxy) -> None:
    before = len(gateway.verified)
    created = console.http.post("/jobs", json=http_job("signed-job", "https://example.com/hook"))
    assert created.status_code == 201, created.text
    job = created.json()
    assert [j["id"] for j in console.http.get("/jobs", params={"limit": 10}).json()["items"]] == [job["id"]]
    assert console.http.post(f"/jobs/{job['id']}/trigger").status_code == 202
    stats = console.http.get("/stats", params={"minutes": 5})
    assert stats.status_code == 200 and stats.json()["clock_skew_ms"] is not None  # the aws engine answered
    assert console.http.get("/openapi.json").status_code == 200
    assert gateway.verified[before:] == [
        "POST /v1/jobs",
        "GET /v1/jobs",
        f"POST /v1/jobs/{job['id']}/trigger",
        "GET /v1/stats",
        "GET /v1/openapi.json",
    ]
    # the owner is the signing identity: another IAM user sees none of it
    url = f"{gateway.url}/jobs?limit=10"
    theirs = httpx.get(url, headers=_signed("GET", url, b"", OTHER_AKID, OTHER_SECRET))
    assert theirs.status_code == 200 and theirs.json()["items"] == []


def test_the_gateway_stand_in_refuses_what_is_not_signed_right(gateway: Gateway) -> None:
    url = f"{gateway.url}/jobs"
    body = b'{"name": "x"}'
    assert httpx.get(url).status_code == 403
    assert httpx.get(url, headers=_signed("GET", url, b"", AKID, "wrong-secret")).status_code == 403
    tampered = _signed("POST", url, body, AKID, SECRET)
    assert httpx.post(url, content=b'{"name": "y"}', headers=tampered).status_code == 403
    moved = _signed("GET", url, b"", AKID, SECRET)
    assert httpx.get(f"{gateway.url}/stats", headers=moved).status_code == 403
    assert gateway.refused[-4:] == [
        "missing or malformed SigV4 Authorization header",
        "signature does not match",
        "signature does not match",
        "signature does not match",
    ]


def test_the_proxy_forwards_only_its_own_pages_requests(console: Proxy, gateway: Gateway) -> None:
    before = len(gateway.verified)
    assert httpx.get(f"{console.url}/jobs").status_code == 401  # no session token: a foreign page
    assert httpx.get(f"{console.url}/jobs", headers={"Authorization": "Bearer nope"}).status_code == 401
    rebound = console.http.get("/jobs", headers={"Host": "attacker.example"})  # DNS rebinding
    assert rebound.status_code == 403
    assert len(gateway.verified) == before  # nothing reached the API
    page = httpx.get(f"{console.url}/console/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]


def test_the_console_page_works_through_the_signing_proxy(console: Proxy, browser: Browser) -> None:
    page = browser.page
    page.goto(f"{console.url}/console/#key={console.token}")
    expect(page.locator("#jobs tbody")).to_contain_text("signed-job")
    page.locator("#jobs").get_by_role("link", name="signed-job").click()
    expect(page.locator("#timeline canvas")).to_be_visible()
    page.goto(f"{console.url}/console/ops#key={console.token}")
    expect(page.get_by_test_id("ops-skew")).not_to_contain_text("one clock")  # the aws engine's clock
    browser.shot("proxy-ops")
    assert browser.console_errors == []
    assert all(console.token not in r.url for r in browser.requests)


def test_jobs_come_in_pages_with_load_more(console: Proxy, browser: Browser) -> None:
    for i in range(101):
        response = console.http.post("/jobs", json=http_job(f"paged-{i:03d}", "https://example.com/hook"))
        assert response.status_code == 201, response.text
    page = browser.page
    page.goto(f"{console.url}/console/#key={console.token}")
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(100)  # one page: the newest 100
    expect(page.locator("#jobs-count")).to_have_text("100 of 100 jobs loaded")
    page.locator("#load-more").click()
    expect(rows).to_have_count(102)  # 101 + the signed-job
    expect(page.locator("#load-more")).to_be_hidden()
    expect(page.locator("#jobs tbody")).to_contain_text("paged-000")


def test_punctual_console_command_signs_with_the_callers_credentials(gateway: Gateway) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": AKID, "AWS_SECRET_ACCESS_KEY": SECRET, "PYTHONUNBUFFERED": "1"}
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_PROFILE", None)
    command = [sys.executable, "-m", "punctual.cli", "console", "--api-url", gateway.url, "--port", "0"]
    process = subprocess.Popen(
        [*command, "--region", REGION], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
    )
    try:
        assert process.stdout is not None
        line = _first_line(process, "Console: ")
        console_url = line.split("Console: ", 1)[1].strip()
        base, token = console_url.split("/console/#key=")
        before = len(gateway.verified)
        response = httpx.get(f"{base}/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert response.status_code == 200, response.text
        assert response.json()["items"], "the signing identity's jobs"
        # the stand-in records only requests whose SigV4 signature verified; a page left open by an
        # earlier test of this module may still poll through its own proxy, hence "in", not "=="
        assert "GET /v1/jobs" in gateway.verified[before:]
    finally:
        process.terminate()
        process.wait(timeout=20)


def _first_line(process: subprocess.Popen[str], marker: str) -> str:
    found: list[str] = []
    seen: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if line.startswith(marker):
                found.append(line)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    assert found, f"punctual console printed no {marker!r} line: {''.join(seen)[-2000:]}"
    return found[0]
