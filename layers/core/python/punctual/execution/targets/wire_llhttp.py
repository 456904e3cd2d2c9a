"""One keep-alive HTTP/1.1 connection of the ``wire`` client, parsing answers with llhttp (``httptools``).

:class:`Connection` is an ``asyncio.Protocol``: :meth:`Connection.exchange` writes a request and
returns a future; ``data_received`` feeds the bytes to an ``httptools.HttpResponseParser`` (llhttp,
Node's parser, in C: fuzzed and kept by others), whose callbacks collect the answer. The future is
resolved once, with the :class:`Answer` or the error.

llhttp frames the body (Content-Length, chunks, the end of the connection) and refuses what makes
two parties disagree on where an answer ends: a repeated Content-Length, Content-Length beside
Transfer-Encoding, folded header lines, malformed chunk sizes. Such an answer fails the exchange
and costs the connection. What stays ours:

- **Bounds.** The heads of one answer (interim ones included) are at most :data:`MAX_HEAD_BYTES`:
  while a head is incomplete the parser is fed no more than the bytes left, so a header that never
  ends is cut there. At most ``limit`` bytes of body are kept; a body longer than that, or whose
  end is the end of the connection, leaves the connection unusable (closed, never drained).
- **Which answer counts.** ``1xx`` interim answers are skipped; a HEAD request's answer (or a
  204 or 304) has no body; a ``101`` (an upgrade nobody asked for) is an error.
- **Reuse.** A connection carries another request only after a complete answer that llhttp says
  keeps the connection alive, with no byte after it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser

from punctual.execution.targets.wire_parse import MAX_HEAD_BYTES, Answer, RawHeaders, StaleConnection, WireError

__all__ = ["MAX_HEAD_BYTES", "Answer", "Connection", "StaleConnection", "WireError"]


class _Stop(Exception):
    """Raised in a parser callback to stop parsing: the answer is given, the bytes left are not read."""


class Connection(asyncio.Protocol):
    """A connection to one pool key; one exchange at a time (``reusable`` once it is over)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reusable = False  # the last exchange ended with a complete answer the connection may follow
        self.idle_since = 0.0  # monotonic seconds: when the pool last put it back (WirePool._sweep)
        self.sent_at = 0.0  # monotonic seconds: when the last request was written (wire_host.Host.answered)
        self._ended = False
        self._parser: HttpResponseParser | None = None  # None: a new one for the next exchange
        self._waiter: asyncio.Future[Any] | None = None
        self._head_only = False
        self._limit = 0
        self._received = False  # a byte of the current answer has arrived
        self._in_head = False  # the answer's (final) head is not complete yet
        self._head_left = 0  # bytes the answer's heads may still take
        self._until_end = False  # the body ends with the connection, or is longer than the limit
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []  # the final head's, as given (RawHeaders)
        self._body = bytearray()

    # -- the pool's side ----------------------------------------------------------------------

    def usable(self) -> bool:
        return not self._ended and self.transport is not None and not self.transport.is_closing()

    def exchange(
        self, data: bytes, head_only: bool, limit: int, waiter: asyncio.Future[Any] | None = None
    ) -> asyncio.Future[Any]:
        """Write ``data`` (a whole request); ``waiter`` (a new future if None) gets the answer, keeping
        at most ``limit`` bytes of its body (``head_only``: a HEAD request, so the answer has no body)."""
        assert self.transport is not None and self._waiter is None
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
        if self._parser is None:
            self._parser = HttpResponseParser(self)
        self._waiter = waiter
        self.reusable = False
        self._head_only = head_only
        self._limit = limit
        self._received = False
        self._in_head = True
        self._head_left = MAX_HEAD_BYTES
        self._until_end = False
        self.sent_at = time.monotonic()
        self.transport.write(data)
        return waiter

    def close(self) -> None:
        self._ended = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        parser = self._parser
        if waiter is None or waiter.done() or parser is None:  # nobody asked (idle), or the caller gave up
            self.close()
            return
        self._received = True
        try:
            if not self._in_head:
                parser.feed_data(data)
            elif len(data) <= self._head_left:
                parser.feed_data(data)
                if self._in_head:  # every byte was the head's
                    self._head_left -= len(data)
            else:  # the head may end within the bytes left, or it is too large
                parser.feed_data(memoryview(data)[: self._head_left])
                if self._in_head and self._waiter is not None:
                    raise WireError(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes")
                parser.feed_data(memoryview(data)[self._head_left :])
        except HttpParserUpgrade:
            self._fail(WireError("the server switched protocols, which no request asked for"))
        except HttpParserError as exc:  # the answer is malformed, or a callback stopped the parser
            self._fail(WireError(f"not a valid HTTP/1.1 answer: {exc}"))
        except WireError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self._end(None)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        self.transport = None

    # -- the parser's callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None:  # bytes after the answer belong to no request
            raise _Stop
        self._headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:  # else a trailer: dropped
            self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        status = parser.get_status_code()
        if status < 100 or not parser.get_http_version().startswith("1."):
            self._fail(WireError(f"not an HTTP/1.x answer (status {status}, HTTP/{parser.get_http_version()})"))
            raise _Stop
        if status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            return
        self._in_head = False
        self._status = status
        self._body = bytearray()
        if self._head_only:  # llhttp expects the body the head announces: this parser is done
            self._parser = None
            self._done(complete=parser.should_keep_alive())
            return
        length, codings = _framing(self._headers)
        if length is not None:
            self._until_end = int(length) > self._limit  # llhttp checked: digits, said once
        else:  # chunked (as the last coding), or a body that ends with the connection
            self._until_end = codings.rsplit(b",", 1)[-1].strip().lower() != b"chunked"
        if self._until_end and self._limit == 0:
            self._done(complete=False)

    def on_body(self, data: bytes) -> None:
        if self._waiter is None:  # after the answer (a HEAD's announced body, or past the limit)
            raise _Stop
        body = self._body
        room = self._limit - len(body)
        if len(data) < room or (len(data) == room and not self._until_end):
            body += data
            return
        body += data[:room]  # the body reached the limit: keep its start, never drain the rest
        self._done(complete=False)
        raise _Stop

    def on_message_complete(self) -> None:
        parser = self._parser
        if self._in_head or self._waiter is None or parser is None:  # an interim answer, or a HEAD's end
            return
        self._done(complete=parser.should_keep_alive())

    # -- ending -------------------------------------------------------------------------------

    def _done(self, *, complete: bool) -> None:
        """Give the answer; ``complete``: the connection may carry the next request (unless bytes follow)."""
        waiter = self._waiter
        assert waiter is not None
        self._waiter = None
        self.reusable = complete and not self._ended
        if not complete:
            self._parser = None
        if not waiter.done():
            waiter.set_result(Answer(self._status, RawHeaders(self._headers), bytes(self._body)))

    def _fail(self, exc: Exception) -> None:
        """Fail the exchange (if still outstanding); the connection is not reused either way."""
        waiter = self._waiter
        self._waiter = None
        self._parser = None
        self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _end(self, exc: Exception | None) -> None:
        """The connection ended (EOF, reset): answer the outstanding exchange as far as it got."""
        if self._ended and self._waiter is None:
            return
        self._ended = True
        self.reusable = False
        if self._waiter is None:
            return
        if not self._in_head and self._until_end:  # a body that ends with the connection: what came
            self._done(complete=False)
        elif self._in_head and not self._received:
            self._fail(StaleConnection())
        elif self._in_head:
            self._fail(WireError("the connection closed in the middle of the answer's head"))
        elif isinstance(exc, OSError):
            self._fail(exc)
        else:
            self._fail(WireError("the connection closed in the middle of the answer's body"))


def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, bytes]:
    """The head's Content-Length (None: absent) and Transfer-Encoding (b"": absent), the last of
    each (llhttp refused a repeated Content-Length); names compared by length first: most are neither."""
    length, codings = None, b""
    for name, value in headers:
        size = len(name)
        if size == 14 and name.lower() == b"content-length":
            length = value
        elif size == 17 and name.lower() == b"transfer-encoding":
            codings = value
    return length, codings
