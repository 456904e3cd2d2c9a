"""The ``wire`` pool: TLS verified against the host name, deadlines, and the per-key connection limit.

Servers are threads on 127.0.0.1 (``RawServer`` from ``test_async_targets``); the TLS server holds
a certificate for ``tls.test`` signed by a throwaway CA made here, so the client verifies for real.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from punctual.errors import ConfigError
from punctual.execution.targets import wire, wire_llhttp, wire_parse
from punctual.execution.targets.wire import Request, WireError, WirePool
from punctual.execution.targets.wire_call import Volley
from punctual.execution.targets.wire_deadlines import Deadlines
from tests.unit.test_async_targets import OK, raw, request
from tests.unit.wire_parsers import wire_parser

pytestmark = pytest.mark.unit
__all__ = ["raw", "wire_parser"]  # the fixtures (wire_parser: each test with both answer parsers)


def _certificate(subject: str, key: Any, issuer: x509.Name | None, issuer_key: Any, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context for ``tls.test``, client context trusting only the throwaway CA)."""
    folder: Path = tmp_path_factory.mktemp("tls")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("punctual test CA", ca_key, None, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _certificate("tls.test", key, ca.subject, ca_key, ca=False)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "leaf.pem", folder / "key.pem")
    client = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    return server, client


def https(port: int, host: str) -> Request:
    return Request.of("POST", "https", host, "127.0.0.1", port, target="/x", headers={"Host": host}, body=b"{}")


def sends(pool: WirePool, requests: list[Request], timeout_s: float = 5.0) -> list[Any]:
    """Send ``requests`` one after another; each answer or error."""

    async def go() -> list[Any]:
        answers: list[Any] = []
        try:
            for req in requests:
                try:
                    answers.append(await pool.send(req, timeout_s=timeout_s, excerpt_bytes=100))
                except (WireError, OSError) as exc:  # TimeoutError is an OSError
                    answers.append(exc)
        finally:
            pool.close()
        return answers

    return asyncio.run(go())


def test_https_is_verified_against_the_host_name_and_pooled_per_name(raw: Any, tls: Any) -> None:
    server_context, client_context = tls
    srv = raw([OK, OK, OK], tls=server_context)
    answers = sends(WirePool(tls=client_context), [https(srv.port, "tls.test"), https(srv.port, "tls.test")])
    assert [a.status for a in answers] == [200, 200] and answers[1].body == b"ok"
    assert srv.connections == 1  # the second request reused the verified connection
    # the same address under a name the certificate does not hold is refused, never reused
    [refused] = sends(WirePool(tls=client_context), [https(srv.port, "other.test")])
    assert isinstance(refused, ssl.SSLCertVerificationError)


def test_https_fails_against_an_untrusted_certificate(raw: Any, tls: Any) -> None:
    srv = raw([OK], tls=tls[0])
    [refused] = sends(WirePool(tls=ssl.create_default_context()), [https(srv.port, "tls.test")])
    assert isinstance(refused, ssl.SSLCertVerificationError)


def test_a_stale_connection_is_retried_once_and_a_fresh_one_that_closes_is_an_error(raw: Any) -> None:
    srv = raw([OK, b"CLOSE", b"CLOSE"])
    answers = sends(WirePool(), [request(srv.port), request(srv.port)])
    assert answers[0].status == 200
    assert isinstance(answers[1], WireError) and "without an answer" in str(answers[1])
    assert srv.connections == 2  # the stale one and exactly one retry


def test_the_deadline_cuts_the_exchange_and_the_wait_for_a_connection(raw: Any) -> None:
    # Given one connection allowed per key, held by a request the server never answers
    srv = raw([b"HANG", OK])
    pool = WirePool(max_per_key=1)

    async def go() -> list[Any]:
        loop = asyncio.get_running_loop()

        async def timed(timeout_s: float) -> tuple[Any, float]:
            started = loop.time()
            try:
                answer: Any = await pool.send(request(srv.port), timeout_s=timeout_s, excerpt_bytes=10)
            except TimeoutError as exc:
                answer = exc
            return answer, loop.time() - started

        hung = asyncio.ensure_future(timed(0.6))
        await asyncio.sleep(0.05)
        waiting = await timed(0.2)  # When a second one waits for the connection past its own deadline
        after = await timed(5.0)  # and a third comes once the first has given up
        try:
            return [await hung, waiting, after]
        finally:
            pool.close()

    (hung, hung_s), (waiting, waiting_s), (after, _) = asyncio.run(go())
    # Then both are cut at their deadlines (never early), the hung connection is closed, and the
    # slot it held serves the next request on a new connection
    assert isinstance(hung, TimeoutError) and 0.6 <= hung_s < 3
    assert isinstance(waiting, TimeoutError) and 0.2 <= waiting_s < 2
    assert after.status == 200 and srv.connections == 2


def test_waiters_get_connections_first_come_first_served(raw: Any) -> None:
    srv = raw([OK] * 6)
    pool = WirePool(max_per_key=1)
    order: list[int] = []

    async def go() -> None:
        async def one(i: int) -> None:
            await pool.send(request(srv.port), timeout_s=5, excerpt_bytes=10)
            order.append(i)

        try:
            await asyncio.gather(*(one(i) for i in range(6)))
        finally:
            pool.close()

    started = time.monotonic()
    asyncio.run(go())
    assert order == list(range(6)) and srv.connections == 1 and time.monotonic() - started < 10


def gathered(pool: WirePool, port: int, timeouts: list[float], *, cancel: int | None = None) -> list[Any]:
    """Send len(timeouts) requests at once (queued behind each other when the pool allows one
    connection); ``cancel``: the index of one to cancel while it waits. Each answer or error."""

    async def go() -> list[Any]:
        async def one(timeout_s: float) -> Any:
            try:
                return await pool.send(request(port), timeout_s=timeout_s, excerpt_bytes=10)
            except (WireError, OSError) as exc:
                return exc

        tasks = [asyncio.ensure_future(one(t)) for t in timeouts]
        if cancel is not None:
            await asyncio.sleep(0.05)
            tasks[cancel].cancel()
        try:
            return list(await asyncio.gather(*tasks, return_exceptions=True))
        finally:
            pool.close()

    return asyncio.run(go())


def status_or_type(answers: list[Any]) -> list[Any]:
    return [a.status if hasattr(a, "status") else type(a).__name__ for a in answers]


def test_a_queued_call_handed_a_stale_connection_retries_once_on_a_new_one(raw: Any) -> None:
    srv = raw([OK, b"CLOSE", OK])
    assert status_or_type(gathered(WirePool(max_per_key=1), srv.port, [5, 5])) == [200, 200]
    assert srv.connections == 2


def test_a_queued_call_handed_a_connection_is_cut_at_its_deadline_and_its_slot_passed_on(raw: Any) -> None:
    srv = raw([OK, b"HANG", OK])
    answers = gathered(WirePool(max_per_key=1), srv.port, [5, 0.3, 5])
    assert status_or_type(answers) == [200, "TimeoutError", 200]
    assert srv.connections == 2  # the hung connection was closed, not handed on


def test_a_connection_that_cannot_be_reused_passes_its_slot_to_the_next_call(raw: Any) -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    srv = raw([closing, OK, OK])
    assert status_or_type(gathered(WirePool(max_per_key=1), srv.port, [5, 5, 5])) == [200, 200, 200]
    assert srv.connections == 2


def test_a_call_cancelled_while_queued_loses_no_slot(raw: Any) -> None:
    srv = raw([b"HANG", OK, OK])
    answers = gathered(WirePool(max_per_key=1), srv.port, [0.4, 5, 5], cancel=1)
    assert status_or_type(answers) == ["TimeoutError", "CancelledError", 200]


def test_deadlines_expire_only_due_waits_and_keep_nothing_for_waits_that_ended() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        far: asyncio.Future[Any] = loop.create_future()
        deadlines.add(loop.time() + 60, far)
        ended = [loop.create_future() for _ in range(100)]
        for waiter in ended:  # waits that end in time are forgotten at once
            deadlines.discard(deadlines.add(loop.time() + 0.05, waiter), waiter)
        near: asyncio.Future[Any] = loop.create_future()
        started = loop.time()
        deadlines.add(started + 0.1, near)
        with pytest.raises(TimeoutError):
            await near
        assert loop.time() - started >= 0.1  # never early
        assert not far.done() and not any(w.done() for w in ended)
        assert deadlines.pending() == 1 and len(deadlines._buckets) == 1

    asyncio.run(go())


def test_closing_the_pool_closes_idle_connections_and_leaves_calls_in_flight_their_deadlines(raw: Any) -> None:
    srv = raw([OK, b"HANG"])
    pool = WirePool()

    async def go() -> Any:
        await pool.send(request(srv.port), timeout_s=5, excerpt_bytes=10)
        assert pool.idle_connections() == 1
        in_flight = asyncio.ensure_future(pool.send(request(srv.port), timeout_s=0.3, excerpt_bytes=10))
        await asyncio.sleep(0.05)
        pool.close()
        await asyncio.wait([in_flight], timeout=5)
        return in_flight

    started = time.monotonic()
    in_flight = asyncio.run(go())
    assert isinstance(in_flight.exception(), TimeoutError) and time.monotonic() - started < 3  # not wait's 5 s
    assert pool.idle_connections() == 0


def test_idle_connections_unused_for_a_while_are_closed_and_their_keys_forgotten(raw: Any) -> None:
    srv = raw([OK, OK, OK])
    pool = WirePool(idle_s=1.0, sweep_s=0.05)

    def named(host: str) -> Request:  # one server, two pool keys (as after a name's address changed)
        return Request.of("POST", "http", host, "127.0.0.1", srv.port, target="/x", headers={"Host": host}, body=b"{}")

    async def go() -> None:
        try:
            await pool.send(named("old.test"), timeout_s=5, excerpt_bytes=10)
            assert pool.keys() == 1 and pool.idle_connections() == 1
            await asyncio.sleep(0.6)  # past a sweep, not past idle_s: the connection is kept
            await pool.send(named("new.test"), timeout_s=5, excerpt_bytes=10)
            assert pool.keys() == 2 and pool.idle_connections() == 2
            await asyncio.sleep(0.6)  # old.test's connection has been idle 1.2 s, new.test's 0.6 s
            await pool.send(named("new.test"), timeout_s=5, excerpt_bytes=10)
            assert pool.keys() == 1 and pool.idle_connections() == 1  # old.test's closed, its key forgotten
        finally:
            # on the pool's loop: closed after the loop, an idle connection the server has not
            # hung up on yet (a slow moment) cannot close its transport any more
            pool.close()

    asyncio.run(go())
    assert srv.connections == 2  # new.test's second call reused its connection


def test_warm_opens_the_connections_calls_will_reuse_and_no_more_than_the_key_can_use(raw: Any) -> None:
    srv = raw([OK, OK, OK])
    pool = WirePool(max_idle_per_key=3, max_per_key=3)

    async def go() -> list[Any]:
        assert pool.warm(request(srv.port), 5, timeout_s=5) == 3  # bounded by the key's idle connections
        assert pool.warm(request(srv.port), 5, timeout_s=5) == 0  # those being opened count
        for _ in range(100):  # bounded: until the three are open
            if pool.idle_connections() == 3:
                break
            await asyncio.sleep(0.02)
        assert pool.idle_connections() == 3 and pool.warm(request(srv.port), 5, timeout_s=5) == 0
        try:
            return await asyncio.gather(
                *(pool.send(request(srv.port), timeout_s=5, excerpt_bytes=10) for _ in range(3))
            )
        finally:
            pool.close()

    answers = asyncio.run(go())
    assert [answer.status for answer in answers] == [200, 200, 200]
    assert srv.connections == 3  # the calls reused the warmed connections


def test_a_warm_connection_that_fails_leaves_nothing_behind() -> None:
    import socket

    with socket.socket() as unused:  # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    pool = WirePool()

    async def go() -> None:
        assert pool.warm(request(port), 2, timeout_s=2) == 2
        for _ in range(100):
            if not pool._warming:
                break
            await asyncio.sleep(0.02)
        assert pool.idle_connections() == 0 and not pool._warming
        pool.close()

    asyncio.run(go())


def test_the_parser_is_llhttp_unless_the_environment_names_the_hand_written_one() -> None:
    assert wire.connection_class({}) is wire_llhttp.Connection
    assert wire.connection_class({"PUNCTUAL_WIRE_PARSER": ""}) is wire_llhttp.Connection
    assert wire.connection_class({"PUNCTUAL_WIRE_PARSER": "httptools"}) is wire_llhttp.Connection
    assert wire.connection_class({"PUNCTUAL_WIRE_PARSER": "house"}) is wire_parse.Connection
    with pytest.raises(ConfigError, match="PUNCTUAL_WIRE_PARSER must be one of house, httptools, not 'h11'"):
        wire.connection_class({"PUNCTUAL_WIRE_PARSER": "h11"})


def armed_replies(
    pool: WirePool,
    requests: list[Request],
    *,
    opens_in_s: float,
    timeout_s: float = 5.0,
    cut: int | None = None,
    check: Any = None,
) -> list[Any]:
    """Arm ``requests`` behind one volley opening ``opens_in_s`` from now (``cut``: the index of one
    cut while held), wait for the opening, call ``check()`` (nothing released yet), release them and
    wait for every reply; the replies in the order they came, as (index, answer or error)."""

    async def go() -> list[Any]:
        loop = asyncio.get_running_loop()
        volley = Volley(loop.time() + opens_in_s)
        replies: list[Any] = []
        done = asyncio.Event()

        def reply(index: int, outcome: Any) -> None:
            replies.append((index, outcome))
            if len(replies) == len(requests):
                done.set()

        calls = [
            pool.arm(req, timeout_s=timeout_s, excerpt_bytes=10, reply=partial(reply, i), volley=volley)
            for i, req in enumerate(requests)
        ]
        try:
            if cut is not None:
                calls[cut].cancel()
            await asyncio.sleep(max(0.0, volley.opens_at - loop.time()))
            if check is not None:
                check()
            pool.release(volley)
            await asyncio.wait_for(done.wait(), 10)
            return replies
        finally:
            pool.close()

    return asyncio.run(go())


def test_armed_calls_are_written_only_once_released_in_the_order_they_were_armed(raw: Any) -> None:
    srv = raw([OK] * 4)
    pool = WirePool(max_per_key=1)  # one connection: the answers come in the order the requests go

    def nothing_sent_yet() -> None:
        assert len(srv.answers) == 4 and srv.connections == 0 and pool.keys() == 1

    replies = armed_replies(pool, [request(srv.port)] * 4, opens_in_s=0.3, check=nothing_sent_yet)
    assert [(i, a.status) for i, a in replies] == [(0, 200), (1, 200), (2, 200), (3, 200)]
    assert srv.connections == 1


def test_a_call_cut_while_armed_replies_cancelled_and_the_others_go(raw: Any) -> None:
    srv = raw([OK, OK])
    pool = WirePool(max_per_key=1)
    replies = armed_replies(pool, [request(srv.port)] * 3, opens_in_s=0.1, cut=1)
    assert sorted((i, status_or_type([a])[0]) for i, a in replies) == [(0, 200), (1, "CancelledError"), (2, 200)]
    assert replies[0][0] == 1  # the cut one heard at once, before the volley opened
    host = next(iter(pool._hosts.values()))
    assert host.held == 0 and host.free == host.limit and not host.queue


def test_an_armed_calls_timeout_counts_from_the_volley_opening(raw: Any) -> None:
    srv = raw([b"HANG"])
    started = time.monotonic()
    replies = armed_replies(WirePool(), [request(srv.port)], opens_in_s=0.4, timeout_s=0.3)
    assert status_or_type([replies[0][1]]) == ["TimeoutError"]
    assert time.monotonic() - started >= 0.65  # 0.4 s held, then 0.3 s of its own


def test_a_key_with_armed_calls_is_not_forgotten_while_they_wait(raw: Any) -> None:
    srv = raw([OK])
    pool = WirePool(idle_s=0.05, sweep_s=0.01)

    def swept_and_kept() -> None:
        pool._sweep()  # its key has nothing but the armed call: no idle connection, no slot held
        assert pool.keys() == 1

    replies = armed_replies(pool, [request(srv.port)], opens_in_s=0.1, check=swept_and_kept)
    assert replies[0][1].status == 200
