"""What the two HTTP clients actually send verifies with ``verify()`` (issue 26, case 6), for many
method and URL shapes: query strings, default and other ports, IPv6 hosts, percent-escapes,
non-ASCII paths and hosts, names resolved at the call.

A real server on 127.0.0.1 and [::1] (``http.server``, as a receiver would write one: the URL is
``http://`` + its Host header + ``self.path``) receives the calls of every path of the worker's
asyncio client (the template, the dict of a job with headers, a request built ahead, a name
resolved at the call) and of the blocking client. Default ports and public names cannot be
listened on here: for those, the asyncio client's request is checked as the bytes it writes, and
the blocking client's as httpx hands it to its transport.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

import httpx
import pytest

from punctual import ids
from punctual.engines.embedded.keys import LocalKeys
from punctual.execution.targets import Targets, http
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.request_rules import target_url
from punctual.execution.targets.signing import SignatureError, verify
from punctual.model import HttpTarget, Job
from tests.unit.local_target import LOCAL, job_with, run_of

pytestmark = pytest.mark.unit

# (method, path and query as written in the job's URL)
PATHS = [
    ("POST", "/hook"),
    ("GET", "/ping?x=1&x=2&empty=&flag"),
    ("DELETE", "/accounts/42?purge=1"),
    ("PUT", "/a%2Fb/c%20d?q=%E2%82%AC&r=a+b&s=%2f"),
    ("PATCH", "/ünï/päth?q=ü"),
    ("POST", ""),
    ("GET", "/x?"),
    ("POST", "/UPPER/Case?Q=V#fragment"),
]
# (method, URL) the worker cannot reach from here: public names, default ports
UNREACHABLE = [
    ("GET", "https://reports.example/ping"),
    ("DELETE", "https://billing.example:443/accounts/42?purge=1"),
    ("POST", "http://Hooks.Example:80/x?y=%2F"),
    ("PUT", "http://hooks.example:443/x"),  # 443 is not http's default: the port is signed
    ("PATCH", "https://[2001:DB8::1]/x?y"),
    ("POST", "https://[2001:db8::1]:8443/x"),
    ("POST", "https://bücher.example/ä?ö=1"),
]


class Received(NamedTuple):
    method: str
    url: str  # http:// + the Host header + the request target as received
    headers: dict[str, str]  # lower-case names
    body: bytes
    names: tuple[str, ...] = ()  # every header name as received, in order (a repeated one twice)


class Receiver:
    """An ``http.server`` on 127.0.0.1 and [::1], on the same port (so ``localhost`` reaches it
    whichever address a lookup gives first), that records every request and answers 204."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._servers: list[ThreadingHTTPServer] = []
        for _ in range(20):  # a port free on both addresses
            first = _server(socket.AF_INET, "127.0.0.1", 0, self.received)
            try:
                second = _server(socket.AF_INET6, "::1", first.server_address[1], self.received)
            except OSError:
                first.server_close()
                continue
            self._servers = [first, second]
            break
        assert self._servers, "no port free on both 127.0.0.1 and ::1"
        self.port = self._servers[0].server_address[1]
        for server in self._servers:
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def _server(family: socket.AddressFamily, address: str, port: int, received: list[Received]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the worker's pool expects

        def _record(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            names = tuple(self.headers.keys())
            received.append(Received(self.command, f"http://{headers['host']}{self.path}", headers, body, names))
            self.send_response(204)
            self.end_headers()

        def do_GET(self) -> None:
            self._record()

        def do_POST(self) -> None:
            self._record()

        def do_PUT(self) -> None:
            self._record()

        def do_PATCH(self) -> None:
            self._record()

        def do_DELETE(self) -> None:
            self._record()

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

    return Server((address, port), Handler)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def keys(tmp_path: Any) -> LocalKeys:
    return LocalKeys(tmp_path / "secrets.key")


def check_signed(received: list[Received], secret: str, *, v1: bool | None = True) -> None:
    """Every request verifies for itself, and for no other of the requests' method and URL nor
    another job; each carries v2, and v1 too if ``v1`` (None: either)."""
    assert received
    for one in received:
        header = one.headers["punctual-signature"]
        assert "v2=" in header and (v1 is None or ("v1=" in header) is v1)
        run_id, job_id = one.headers["x-punctual-run-id"], one.headers["x-punctual-job-id"]
        assert verify(secret, header, run_id, one.body, method=one.method, url=one.url, job_id=job_id) > 0
        others = {(other.method, other.url) for other in received} - {(one.method, one.url)}
        for method, url in others:
            with pytest.raises(SignatureError):
                verify(secret, header, run_id, one.body, method=method, url=url, job_id=job_id)
        with pytest.raises(SignatureError):
            verify(secret, header, run_id, one.body, method=one.method, url=one.url, job_id="job_" + "f" * 32)


def jobs_for(port: int, **target: Any) -> list[Job]:
    """A job (each its own id, so its own run) per host and path of :data:`PATHS`."""
    hosts = [f"127.0.0.1:{port}", f"[::1]:{port}", f"localhost:{port}"]
    made = [
        job_with(HttpTarget(url=f"http://{host}{path}", method=method, **target))
        for host in hosts
        for method, path in PATHS
    ]
    return [job.model_copy(update={"id": ids.new_job_id()}) for job in made]


def execute_all(targets: AsyncTargets, jobs: list[Job], *, prebuild: bool = False) -> None:
    async def go() -> None:
        runs = [run_of(job) for job in jobs]
        try:
            if prebuild:
                for job, run in zip(jobs, runs, strict=True):
                    targets.prebuild(job, run, 1)
                assert len(targets._prebuilt) == len(jobs)
            results = await asyncio.gather(*(targets.execute(j, r, 1, 5.0) for j, r in zip(jobs, runs, strict=True)))
            assert all(result.ok for result in results), [r for r in results if not r.ok]
            assert not targets._prebuilt  # each prebuilt request was the one sent
        finally:
            targets.close()

    asyncio.run(go())


@pytest.mark.parametrize("prebuild", [False, True], ids=["at-the-call", "built-ahead"])
@pytest.mark.parametrize("own_headers", [False, True], ids=["template", "job-headers"])
def test_what_the_asyncio_client_sends_verifies(
    receiver: Receiver, keys: LocalKeys, own_headers: bool, prebuild: bool
) -> None:
    headers = {"X-Tenant": "acme"} if own_headers else {}
    jobs = jobs_for(receiver.port, headers=headers)
    execute_all(AsyncTargets(LOCAL, keys=keys), jobs, prebuild=prebuild)
    assert len(receiver.received) == len(jobs)
    check_signed(receiver.received, keys.signing_secret(jobs[0].owner))
    # the paths arrived as httpx writes them (escapes kept, non-ASCII escaped, no fragment)
    paths = {one.url.split(f":{receiver.port}", 1)[1] for one in receiver.received}
    assert paths == {
        "/hook", "/ping?x=1&x=2&empty=&flag", "/accounts/42?purge=1", "/a%2Fb/c%20d?q=%E2%82%AC&r=a+b&s=%2f",
        "/%C3%BCn%C3%AF/p%C3%A4th?q=%C3%BC", "/", "/x?", "/UPPER/Case?Q=V",
    }  # fmt: skip


def test_a_job_that_opts_out_of_v1_sends_v2_alone(receiver: Receiver, keys: LocalKeys) -> None:
    jobs = jobs_for(receiver.port, signature="v2")[:3]
    execute_all(AsyncTargets(LOCAL, keys=keys), jobs)
    check_signed(receiver.received, keys.signing_secret(jobs[0].owner), v1=False)


def test_what_the_blocking_client_sends_verifies(receiver: Receiver, keys: LocalKeys) -> None:
    jobs = jobs_for(receiver.port) + jobs_for(receiver.port, headers={"X-Tenant": "acme"})[:3]
    targets = Targets(LOCAL, keys=keys)
    for job in jobs:
        result = targets.execute(job, run_of(job), 1, time.monotonic() + 5)
        assert result.ok, result
    check_signed(receiver.received, keys.signing_secret(jobs[0].owner))


def test_a_job_that_sends_its_own_content_type_and_user_agent_sends_each_once_and_signed(
    receiver: Receiver, keys: LocalKeys
) -> None:
    # JOB_MAY_SET (api-edges) with v2 (signing): the job's own User-Agent and Content-Type, in any
    # case, replace Punctual's exactly once on both clients, and the request as sent still verifies
    own = {"content-type": "application/cloudevents+json", "USER-AGENT": "mine/1", "X-Tenant": "acme"}
    jobs = jobs_for(receiver.port, headers=own)[:: len(PATHS) - 1]
    execute_all(AsyncTargets(LOCAL, keys=keys), jobs)
    blocking = Targets(LOCAL, keys=keys)
    for job in jobs:
        assert blocking.execute(job, run_of(job), 1, time.monotonic() + 5).ok
    assert len(receiver.received) == 2 * len(jobs)
    check_signed(receiver.received, keys.signing_secret(jobs[0].owner))
    for one in receiver.received:
        names = [name.lower() for name in one.names]
        assert names.count("content-type") == names.count("user-agent") == names.count("host") == 1, one.names
        assert (one.headers["content-type"], one.headers["user-agent"]) == ("application/cloudevents+json", "mine/1")


# -- hosts and ports the tests cannot listen on -----------------------------------------------------


def parse(data: bytes) -> tuple[str, str, dict[str, str], bytes]:
    """(method, request target, headers by lower-case name, body) of a request as written."""
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _ = request_line.split(" ")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return method, target, headers, body


@pytest.mark.parametrize(("method", "url"), UNREACHABLE)
def test_the_asyncio_client_signs_the_request_it_writes(method: str, url: str, keys: LocalKeys) -> None:
    targets = AsyncTargets(LOCAL, keys=keys)
    secret = keys.signing_secret("alice")
    parsed = target_url(url)
    for headers in ({}, {"X-Tenant": "acme"}):
        job = job_with(HttpTarget(url=url, method=method, headers=headers))
        built = targets._build(job, run_of(job), 1, parsed, "192.0.2.10")
        sent_method, target, sent, body = parse(built.data)
        assert sent_method == method
        # as a receiver rebuilds it from the Host header and the request target, and as the job's URL
        for received_url in (f"{parsed.scheme}://{sent['host']}{target}", url):
            verify(secret, sent["punctual-signature"], sent["x-punctual-run-id"], body,
                   method=method, url=received_url, job_id=job.id)  # fmt: skip
        for other_method, other_url in UNREACHABLE:
            if (other_method, other_url) != (method, url):
                with pytest.raises(SignatureError):
                    verify(secret, sent["punctual-signature"], sent["x-punctual-run-id"], body,
                           method=other_method, url=other_url, job_id=job.id)  # fmt: skip
    targets.close()


def test_the_blocking_client_signs_the_request_httpx_sends(keys: LocalKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        request.read()
        seen.append(request)
        return httpx.Response(204)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    monkeypatch.setattr(http, "_client", lambda *args: client)
    monkeypatch.setattr(http, "resolve", lambda *args, **kwargs: "192.0.2.10")
    targets = Targets(LOCAL, keys=keys)
    secret = keys.signing_secret("alice")
    for method, url in UNREACHABLE:
        job = job_with(HttpTarget(url=url, method=method))
        assert targets.execute(job, run_of(job), 1, time.monotonic() + 5).ok
        request = seen[-1]
        assert request.url.host == "192.0.2.10"  # the checked address; the name travels in Host
        target = request.url.raw_path.decode()
        for received_url in (f"{request.url.scheme}://{request.headers['host']}{target}", url):
            verify(secret, request.headers["punctual-signature"], request.headers["x-punctual-run-id"],
                   request.content, method=request.method, url=received_url, job_id=job.id)  # fmt: skip


def test_an_unsigned_worker_sends_no_signature(receiver: Receiver) -> None:
    jobs = jobs_for(receiver.port)[:2]
    execute_all(AsyncTargets(LOCAL), jobs)
    assert all("punctual-signature" not in one.headers for one in receiver.received)


__all__ = ["Receiver", "check_signed", "receiver"]
