"""The worker's async targets (``AsyncTargets`` over the ``wire`` client) keep the HTTP target's rules.

The HTTP target's scenarios run through both clients in ``test_targets`` (the same local server on
127.0.0.1, ``tests.unit.local_target``); here is what only the pooled client can get wrong: checked
addresses kept for their time, reuse per (scheme, host name, checked address, port), bodies it must
not read to the end, stale connections, requests built ahead.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.resolutions import Resolutions
from punctual.execution.targets.wire import Request, WireError, WirePool
from punctual.model import HttpTarget, Job, Run, SqsTarget
from tests.unit.local_target import (
    INVOCATION,
    LOCAL,
    RUN_ID,
    SCHEDULED_AT,
    STRICT,
    job_with,
    run_of,
    send_async,
    server,
    url,
)
from tests.unit.wire_parsers import wire_parser

pytestmark = pytest.mark.unit
__all__ = ["server", "wire_parser"]  # fixtures: local_target (``raw`` shared with test_wire_pool), both parsers


def test_a_name_goes_to_its_checked_address_until_the_check_expires(server, monkeypatch):
    # Given a name whose first answer is allowed and whose later answers point at the metadata service
    answers = iter(["127.0.0.1", "169.254.169.254", "169.254.169.254"])
    lookups: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "rebind.test":
            lookups.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    now = [100.0]
    resolutions = Resolutions(ttl_s=10, now=lambda: now[0])
    port = server.server_address[1]
    target = HttpTarget(url=f"http://rebind.test:{port}/ok")
    result = send_async(target, targets=AsyncTargets(LOCAL, resolutions=resolutions))
    assert result.ok
    [(_, _, headers, _)] = server.requests
    assert headers["Host"] == f"rebind.test:{port}"
    # Then within the check's 10 s the next attempt goes to the address checked, without a lookup
    now[0] += 9.9
    assert send_async(target, targets=AsyncTargets(LOCAL, resolutions=resolutions)).ok
    assert lookups == ["rebind.test"] and len(server.requests) == 2
    # and once it expired, the name is resolved again and refused (no unchecked address is ever used)
    now[0] += 0.2
    refused = send_async(target, targets=AsyncTargets(LOCAL, resolutions=resolutions))
    assert not refused.ok and "link-local" in (refused.error or "")
    assert lookups == ["rebind.test", "rebind.test"] and len(server.requests) == 2
    # and a refusal is not kept: the next attempt asks again
    assert not send_async(target, targets=AsyncTargets(LOCAL, resolutions=resolutions)).ok
    assert len(lookups) == 3


def test_aws_kinds_run_off_the_loop_through_the_blocking_dispatcher():
    calls: list[str] = []

    class Recording:
        def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> Any:
            calls.append(threading.current_thread().name)
            from punctual.execution.targets.types import succeeded

            return succeeded(None, "sent")

    targets = AsyncTargets(LOCAL, sync=Recording())  # type: ignore[arg-type]
    result = send_async(SqsTarget(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/q"), targets=targets)
    assert result.ok and calls and calls[0] != threading.main_thread().name


# -- the wire client ---------------------------------------------------------------------------------------


class RawServer:
    """A socket server that answers each request with the next canned bytes and counts connections
    (over TLS with ``tls``; b"HANG" never answers, b"CLOSE" closes the connection)."""

    def __init__(self, answers: list[bytes], tls: ssl.SSLContext | None = None) -> None:
        self.answers = list(answers)
        self.tls = tls
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):  # the client refused our certificate
                conn.close()
                return
        with conn:
            buffer = b""
            while self.answers:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                answer = self.answers.pop(0)
                if answer == b"CLOSE":
                    return
                if answer == b"HANG":
                    conn.recv(1)  # until the client gives up
                    return
                conn.sendall(answer)

    def close(self) -> None:
        self.answers.clear()
        self.sock.close()


@pytest.fixture
def raw() -> Iterator[Any]:
    servers: list[RawServer] = []

    def make(answers: list[bytes], tls: ssl.SSLContext | None = None) -> RawServer:
        servers.append(RawServer(answers, tls))
        return servers[-1]

    yield make
    for srv in servers:
        srv.close()


def request(port: int, host: str = "127.0.0.1", method: str = "POST") -> Request:
    return Request.of(method, "http", host, "127.0.0.1", port, target="/x", headers={"Host": host}, body=b"{}")


def exchange(pool: WirePool, requests: list[Request], excerpt_bytes: int = 100) -> list[Any]:
    async def go():
        answers = []
        for req in requests:
            try:
                answers.append(await pool.send(req, timeout_s=5, excerpt_bytes=excerpt_bytes))
            except (WireError, OSError) as exc:
                answers.append(exc)
        pool.close()
        return answers

    return asyncio.run(go())


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_keep_alive_reuses_a_connection_only_for_the_same_host_name(raw):
    srv = raw([OK, OK, OK, OK])
    pool = WirePool()
    answers = exchange(pool, [request(srv.port), request(srv.port), request(srv.port, host="other.test")])
    assert [a.status for a in answers] == [200, 200, 200]
    assert srv.connections == 2  # the same address under another name got its own connection


def test_chunked_bodies_are_read_and_the_connection_reused(raw):
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    srv = raw([chunked, OK])
    answers = exchange(WirePool(), [request(srv.port), request(srv.port)])
    assert answers[0].body == b"abcde" and answers[1].body == b"ok"
    assert srv.connections == 1


def test_a_body_longer_than_the_excerpt_costs_its_connection(raw):
    long = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000
    srv = raw([long, OK])
    answers = exchange(WirePool(), [request(srv.port), request(srv.port)], excerpt_bytes=10)
    assert answers[0].body == b"x" * 10 and answers[1].status == 200
    assert srv.connections == 2


def test_interim_answers_are_skipped_and_connection_close_is_honoured(raw):
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    srv = raw([answer, OK])
    answers = exchange(WirePool(), [request(srv.port), request(srv.port)])
    assert [a.status for a in answers] == [204, 200]
    assert srv.connections == 2


def test_a_connection_the_server_closed_while_idle_is_retried_once_on_a_new_one(raw):
    srv = raw([OK, b"CLOSE", OK])
    answers = exchange(WirePool(), [request(srv.port), request(srv.port)])
    assert [a.status for a in answers] == [200, 200]
    assert srv.connections == 2


def test_garbage_and_oversized_heads_are_errors(raw):
    srv = raw([b"SPDY/3 200 OK\r\n\r\n"])
    [answer] = exchange(WirePool(), [request(srv.port)])
    assert isinstance(answer, WireError)
    big = raw([b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"])
    [answer] = exchange(WirePool(), [request(big.port)])
    assert isinstance(answer, WireError)


def test_a_request_built_ahead_of_its_instant_is_sent_as_built(server):
    # Given an attempt whose request was built ahead of its instant (a pre-leased run), off the loop
    job = job_with(HttpTarget(url=url(server, "/ok")))
    run = run_of(job)
    targets = AsyncTargets(LOCAL)

    async def go():
        try:
            targets.prebuild(job, run, INVOCATION.attempt)
            assert len(targets._prebuilt) == 1
            # When it executes with the job unchanged
            return await targets.execute(job, run, INVOCATION.attempt, 5.0)
        finally:
            targets.close()

    result = asyncio.run(go())
    # Then the prebuilt request was sent (and used up), with every header of an attempt
    assert result.ok and not targets._prebuilt
    [(method, path, headers, body)] = server.requests
    assert (method, path) == ("POST", "/ok") and headers["Idempotency-Key"] == RUN_ID
    assert headers["X-Punctual-Attempt"] == str(INVOCATION.attempt) and json.loads(body) == INVOCATION.payload


def prebuilt_attempts(targets, ports):
    """An attempt built ahead to 127.0.0.1 on each of ``ports``, each of its own job and run."""
    attempts = []
    for index, port in enumerate(ports):
        job = job_with(HttpTarget(url=f"http://127.0.0.1:{port}/ok"))
        run = run_of(job).model_copy(update={"scheduled_at": SCHEDULED_AT + index})
        targets.prebuild(job, run, INVOCATION.attempt)
        attempts.append((run.run_id, INVOCATION.attempt))
    return attempts


async def until_idle(targets, connections):
    """Until the pool has ``connections`` idle (bounded: 2 s)."""
    for _ in range(100):
        if targets._pool.idle_connections() == connections:
            return
        await asyncio.sleep(0.02)


def test_warm_opens_one_connection_per_prebuilt_attempt_and_key(raw):
    # Given three attempts built ahead to one key, one to another, and one never built
    srv, other = raw([OK]), raw([OK])
    targets = AsyncTargets(LOCAL)
    attempts = prebuilt_attempts(targets, [srv.port, srv.port, srv.port, other.port])

    async def go():
        try:
            # When their connections are warmed before the instant
            opening = targets.warm([*attempts, ("run_never_built", 1)])
            await until_idle(targets, 4)
            return opening, targets._pool.idle_connections()
        finally:
            targets.close()

    # Then one connection per attempt and key was opened, and is idle for the calls to reuse
    assert asyncio.run(go()) == (4, 4)
    assert (srv.connections, other.connections) == (3, 1)


def test_an_instant_held_in_several_receives_warms_one_connection_per_call_and_the_next_minute_none(raw):
    # Given six attempts to one key built ahead for one instant, and two for the next minute's
    srv = raw([OK])
    targets = AsyncTargets(LOCAL)
    attempts = prebuilt_attempts(targets, [srv.port] * 8)

    async def go():
        try:
            # When the instant's attempts come in three receives (2, 2, 2): each opens its own
            opened = [targets.warm(attempts[i : i + 2], SCHEDULED_AT) for i in (0, 2, 4)]
            await until_idle(targets, 6)
            # and a minute later two attempts find the six idle: nothing more is opened
            opened.append(targets.warm(attempts[6:], SCHEDULED_AT + 60_000))
            return opened, targets._pool.idle_connections()
        finally:
            targets.close()

    assert asyncio.run(go()) == ([2, 2, 2, 0], 6)
    assert srv.connections == 6


def test_a_warm_without_an_instant_counts_its_own_attempts_only(raw):
    srv = raw([OK])
    targets = AsyncTargets(LOCAL)
    attempts = prebuilt_attempts(targets, [srv.port] * 2)

    async def go():
        try:
            return [targets.warm(attempts), targets.warm(attempts)]  # the same two, warmed twice
        finally:
            targets.close()

    assert asyncio.run(go()) == [2, 0]


def test_a_request_built_ahead_is_rebuilt_when_the_job_changed_and_never_for_a_refused_address(server):
    # Given a request built for version 1 of a job, which then moved to another path (version 2)
    job = job_with(HttpTarget(url=url(server, "/ok")))
    changed = job.model_copy(update={"target": HttpTarget(url=url(server, "/ok?v=2")), "version": 2})
    run = run_of(job)
    targets = AsyncTargets(LOCAL)

    async def go():
        try:
            targets.prebuild(job, run, INVOCATION.attempt)
            return await targets.execute(changed, run, INVOCATION.attempt, 5.0)
        finally:
            targets.close()

    asyncio.run(go())
    # Then the job as it is now was executed (the test server answers that path 404)
    [(_, path, _, _)] = server.requests
    assert path == "/ok?v=2"
    # And an address the policy refuses is never built ahead (execute answers it as always)
    strict = AsyncTargets(STRICT)
    strict.prebuild(job, run, INVOCATION.attempt)
    assert not strict._prebuilt
    strict.forget(run, INVOCATION.attempt)  # a no-op for an attempt never built
    strict.close()


@pytest.mark.parametrize("v1", [True, False], ids=["v1+v2", "v2"])
@pytest.mark.parametrize(
    ("headers", "secret_headers", "secret"),
    [({}, {}, None), ({}, {}, "psk_x"), ({"Authorization": "Bearer t", "X-A": "1"}, {"X-Key": "k"}, "psk_x")],
    ids=["plain", "signed", "job-headers"],
)
def test_the_header_block_is_the_request_headers_as_lines(headers, secret_headers, secret, v1):
    # the asyncio client's template must send exactly what the blocking client sends, in order
    from dataclasses import replace

    from punctual.execution.targets import signing

    invocation = replace(INVOCATION, secret_headers=secret_headers, signing_secret=secret)
    line = {"method": "PUT", "path": "/h?q=1", "v1": v1, "now_s": 1_800_000_000}
    expected = signing.request_headers(headers, invocation, "h.test:8080", b"{}", **line)
    block = signing.header_block(headers, invocation, "h.test:8080", b"{}", **line)
    assert block == "".join(f"{name}: {value}\r\n" for name, value in expected.items())
    assert ("Punctual-Signature" in expected) is (secret is not None)
    assert ("v1=" in expected.get("Punctual-Signature", "v1=")) is (v1 or secret is None)


@pytest.mark.parametrize("secret", ["psk_" + "k" * 43, "", "x" * 64, "y" * 65, "é" * 100])
def test_signatures_are_hmac_sha256_of_timestamp_run_and_body(secret):
    import hashlib
    import hmac

    from punctual.execution.targets import signing

    for body in (b"", b"null", b'{"a":1}' * 50):
        expected = hmac.new(secret.encode(), b"1800000000." + RUN_ID.encode() + b"." + body, hashlib.sha256)
        assert signing.signature(secret, 1_800_000_000, RUN_ID, body) == expected.hexdigest()


@pytest.mark.parametrize("signature", [None, "v2", "v1+v2"])
@pytest.mark.parametrize("method", ["POST", "GET"])
@pytest.mark.parametrize("keyed", [False, True], ids=["unsigned", "signed"])
def test_a_request_from_the_template_is_the_request_from_the_invocation(
    method, keyed, signature, tmp_path, monkeypatch
):
    # a job without headers of its own skips the Invocation: the bytes must be the same
    from punctual.engines.embedded.keys import LocalKeys
    from punctual.execution.targets import aio, request_rules
    from punctual.execution.targets.types import Invocation

    monkeypatch.setattr(aio.time, "time", lambda: 1_800_000_000.5)
    job = job_with(HttpTarget(url="http://127.0.0.1:8080/hook?x=1", method=method, signature=signature))
    run = run_of(job)
    targets = AsyncTargets(LOCAL, keys=LocalKeys(tmp_path / "k.key") if keyed else None)
    url = request_rules.target_url(job.target.url)
    built = targets._build(job, run, 2, url, "127.0.0.1")
    expected = aio._request(job.target, Invocation.of(job, run, 2, targets.keys), url, "127.0.0.1")
    assert built == expected
    assert (b"Punctual-Signature" in built.data) is keyed
