"""The ``wire`` client's connection protocol parses answers however their bytes are split.

Each scenario feeds a :class:`Connection` through a fake transport, in the pieces a network might
deliver (one byte at a time, the body across packets, the connection ending mid-answer), and
checks the answer, the error, and whether the connection may carry another request.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

import pytest

from punctual.execution.targets.wire_parse import MAX_HEAD_BYTES, Answer, Connection, StaleConnection, WireError
from tests.unit.wire_parsers import wire_parser

pytestmark = pytest.mark.unit
__all__ = ["wire_parser"]  # the fixture: every scenario against both parsers


@pytest.fixture(autouse=True)
def parsing_with(wire_parser: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "Connection", wire_parser)


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def exchange(
    pieces: Iterable[bytes],
    *,
    limit: int = 100,
    head_only: bool = False,
    end: str | None = None,
    connection: Connection | None = None,
) -> tuple[Answer | BaseException | None, Connection]:
    """Feed ``pieces`` to one exchange; ``end``: "eof" or "reset" after them. The result is the
    answer, the error, or None if the exchange is still waiting for bytes."""

    async def go() -> tuple[Answer | BaseException | None, Connection]:
        conn = connection or Connection()
        if conn.transport is None:
            conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        waiter = conn.exchange(b"GET / HTTP/1.1\r\n\r\n", head_only, limit)
        for piece in pieces:
            conn.data_received(piece)
        if end == "eof":
            conn.eof_received()
            conn.connection_lost(None)
        elif end == "reset":
            conn.connection_lost(ConnectionResetError("reset by peer"))
        if not waiter.done():
            return None, conn
        exc = waiter.exception()
        return (exc if exc is not None else waiter.result()), conn

    return asyncio.run(go())


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Thing:  v \r\n\r\nhello"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n"


@pytest.mark.parametrize("pieces", [[OK], bytewise(OK), [OK[:10], OK[10:50], OK[50:]]], ids=["whole", "bytes", "3"])
def test_a_content_length_answer_in_any_pieces(pieces: list[bytes]) -> None:
    answer, conn = exchange(pieces)
    assert answer == Answer(200, {"content-length": "5", "x-thing": "v"}, b"hello")
    assert conn.reusable and conn.usable()


def test_the_head_and_the_body_in_separate_packets_and_the_body_split() -> None:
    head, body = OK.split(b"\r\n\r\n")
    answer, conn = exchange([head, b"\r\n", b"\r\n", body[:2], body[2:]])
    assert isinstance(answer, Answer) and answer.body == b"hello" and conn.reusable
    waiting, _ = exchange([head + b"\r\n\r\nhel"])
    assert waiting is None  # two bytes of body still to come


@pytest.mark.parametrize("split", ["whole", "bytes"])
def test_chunked_bodies_split_anywhere(split: str) -> None:
    answer, conn = exchange([CHUNKED] if split == "whole" else bytewise(CHUNKED))
    assert isinstance(answer, Answer) and answer.body == b"abcde"
    assert conn.reusable


def test_a_chunked_body_longer_than_the_limit_keeps_its_start_and_costs_the_connection() -> None:
    answer, conn = exchange(bytewise(CHUNKED), limit=4)
    assert isinstance(answer, Answer) and answer.body == b"abcd"
    assert not conn.reusable


def test_a_content_length_body_longer_than_the_limit_keeps_its_start_and_costs_the_connection() -> None:
    answer, conn = exchange([b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", b"x" * 7, b"x" * 7], limit=10)
    assert isinstance(answer, Answer) and answer.body == b"x" * 10
    assert not conn.reusable


def test_a_body_without_length_ends_with_the_connection_and_is_never_reused() -> None:
    waiting, _ = exchange([b"HTTP/1.1 200 OK\r\n\r\npart"])
    assert waiting is None
    answer, conn = exchange([b"HTTP/1.1 200 OK\r\n\r\npart", b"ial"], end="eof")
    assert isinstance(answer, Answer) and answer.body == b"partial"
    assert not conn.reusable and not conn.usable()


@pytest.mark.parametrize(
    ("pieces", "end", "error"),
    [
        ([], "eof", StaleConnection),  # nothing of the answer: a stale keep-alive connection
        ([], "reset", StaleConnection),
        ([b"HTTP/1.1 200 OK\r\nContent-"], "eof", WireError),  # in the middle of the head
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe"], "eof", WireError),  # of the body
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe"], "reset", ConnectionResetError),
        ([CHUNKED[:60]], "eof", WireError),  # of the chunks
    ],
)
def test_the_server_closing_mid_answer(pieces: list[bytes], end: str, error: type[BaseException]) -> None:
    answer, conn = exchange(pieces, end=end)
    assert type(answer) is error
    assert not conn.reusable and not conn.usable()


def test_an_oversized_head_is_an_error_however_it_arrives() -> None:
    big = b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n"
    for pieces in ([big], [big[i : i + 1000] for i in range(0, len(big), 1000)]):
        answer, conn = exchange(pieces)
        assert isinstance(answer, WireError) and "larger than" in str(answer)
        assert not conn.reusable
    # a head of exactly the limit is fine, fed a byte at a time (the search resumes, never restarts)
    head = b"HTTP/1.1 204 No Content\r\nX: "
    exact = head + b"a" * (MAX_HEAD_BYTES - len(head) - 4) + b"\r\n\r\n"
    answer, _ = exchange(bytewise(exact))
    assert isinstance(answer, Answer) and answer.status == 204


def test_interim_answers_are_skipped_even_when_split() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK
    answer, conn = exchange(bytewise(data))
    assert isinstance(answer, Answer) and answer.status == 200 and answer.body == b"hello"
    assert "link" not in answer.headers and conn.reusable


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        OK + b"HTTP/1.1 200 OK\r\n",  # bytes after the answer belong to no request
    ],
    ids=["http/1.0", "connection-close", "trailing-bytes"],
)
def test_answers_after_which_the_connection_is_not_reused(data: bytes) -> None:
    answer, conn = exchange([data])
    assert isinstance(answer, Answer) and answer.status == 200
    assert not conn.reusable


def test_answers_without_a_body() -> None:
    head_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
    for data, head_only in ((head_answer, True), (b"HTTP/1.1 204 No\r\n\r\n", False)):
        answer, conn = exchange([data], head_only=head_only)
        assert isinstance(answer, Answer) and answer.body == b"" and conn.reusable


@pytest.mark.parametrize(
    "data",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",  # no CRLF after the data
    ],
)
def test_malformed_answers_are_errors(data: bytes) -> None:
    answer, conn = exchange([data])
    assert isinstance(answer, WireError)
    assert not conn.reusable


def test_one_connection_carries_answers_one_after_another() -> None:
    first, conn = exchange([OK])
    second, conn = exchange([CHUNKED[:30], CHUNKED[30:]], connection=conn)
    assert isinstance(first, Answer) and isinstance(second, Answer) and second.body == b"abcde"
    assert conn.reusable
    transport: Any = conn.transport
    assert transport.written == [b"GET / HTTP/1.1\r\n\r\n"] * 2


def test_bytes_nobody_asked_for_close_an_idle_connection() -> None:
    _, conn = exchange([OK])
    conn.data_received(b"HTTP/1.1 200 OK\r\n\r\n")
    assert not conn.usable()


@pytest.mark.parametrize(
    "data",
    [
        # two parties that read these differently disagree on where the answer ends (desynchronization)
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 7\r\n\r\nokHTTP/",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\nContent-Length: 2\r\n\r\nok",  # obs-fold
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",  # space before the colon
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF
        b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\x00\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\rContent-Length: 2\r\n\r\nok",  # bare CR
    ],
    ids=[
        "two-lengths",
        "same-length-twice",
        "length-list",
        "length-then-chunked",
        "chunked-then-length",
        "obs-fold",
        "space-before-colon",
        "bare-lf",
        "signed-length",
        "length-overflow",
        "chunk-size-0x",
        "chunk-size-space",
        "chunk-size-overflow",
        "nul-in-value",
        "unasked-upgrade",
        "bare-101",
        "trailer-bare-lf",
        "nul-in-chunk-extension",
        "no-body-status-with-both-framings",
        "bare-cr",
    ],
)
def test_answers_that_could_desynchronize_fail_the_exchange_and_cost_the_connection(data: bytes) -> None:
    for pieces in ([data], bytewise(data)):
        answer, conn = exchange(pieces)
        assert isinstance(answer, WireError), answer
        assert not conn.reusable


@pytest.mark.parametrize(
    ("coding", "chunked"), [(b"gzip, chunked", True), (b"chunked, gzip", False), (b"xchunked", False)]
)
def test_only_a_final_chunked_coding_frames_the_body_in_chunks(coding: bytes, chunked: bool) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + coding + b"\r\n\r\n"
    answer, conn = exchange([head + b"3\r\nabc\r\n0\r\n\r\n"], end=None if chunked else "eof")
    # else the body is every byte up to the end of the connection
    assert isinstance(answer, Answer) and answer.body == (b"abc" if chunked else b"3\r\nabc\r\n0\r\n\r\n")
    assert conn.reusable is chunked


def test_a_head_answer_then_the_next_answer_on_the_same_connection() -> None:
    first, conn = exchange([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"], head_only=True)
    second, conn = exchange([OK], connection=conn)
    assert isinstance(first, Answer) and first.body == b"" and isinstance(second, Answer) and second.body == b"hello"
    assert conn.reusable


def test_bytes_after_a_head_answer_cost_the_connection() -> None:
    answer, conn = exchange([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], head_only=True)
    assert isinstance(answer, Answer) and answer.body == b""
    assert not conn.reusable


def test_trailers_are_read_and_dropped() -> None:
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n"
    answer, conn = exchange(bytewise(data))
    assert isinstance(answer, Answer) and answer.body == b"ok" and "x-sum" not in answer.headers
    assert conn.reusable


def test_a_body_of_exactly_the_limit_keeps_the_connection() -> None:
    for data in (OK, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"):
        answer, conn = exchange(bytewise(data), limit=5)
        assert isinstance(answer, Answer) and answer.body == b"hello"
        assert conn.reusable


def test_an_endless_stream_of_interim_answers_is_cut_at_the_head_limit() -> None:
    answer, conn = exchange([b"HTTP/1.1 100 Continue\r\n\r\n" * 3000])
    assert isinstance(answer, WireError)
    assert not conn.reusable
