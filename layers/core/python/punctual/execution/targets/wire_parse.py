"""One keep-alive HTTP/1.1 connection of the ``wire`` client, parsing answers as their bytes arrive.

The hand-written parser, used with ``PUNCTUAL_WIRE_PARSER=house``; by default connections parse
with llhttp (:mod:`punctual.execution.targets.wire_llhttp`, measured in issue 28). Both share this
module's :class:`Answer`, :class:`WireError`, :class:`StaleConnection` and :data:`MAX_HEAD_BYTES`.

:class:`Connection` is an ``asyncio.Protocol``: :meth:`Connection.exchange` writes a request and
returns a future, and ``data_received`` moves a small state machine over the bytes received so far
(the head found with ``bytes.find``, then the body framed by Content-Length, chunks, or the end of
the connection). The future is resolved once, with the :class:`Answer` or the error, so a call
wakes its coroutine once instead of once per read, and no ``StreamReader`` sits in between.

Bounds: the heads of one answer (its interim answers' included) are at most :data:`MAX_HEAD_BYTES`
in all; at most ``limit`` bytes of body are kept, and a body longer than that, or whose end is the
end of the connection, leaves the connection unusable (it is closed, never drained). So are bytes
that arrive after a complete answer, or while no request is outstanding.

Strict where two parties could disagree on where an answer ends (desynchronization, "response
smuggling"): a head must match RFC 9112's grammar (lines end in CRLF, field names are tokens, no
folded lines, no control bytes in values); a repeated Content-Length, Content-Length beside
Transfer-Encoding, an unbounded length or a malformed chunk size fail the exchange and cost the
connection. Only a final ``chunked`` coding frames the body in chunks (else it ends with the
connection), and a ``101`` (an upgrade no request asked for) is an error.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

MAX_HEAD_BYTES = 65_536
_NO_BODY_STATUSES = frozenset({204, 304})
_MAX_LENGTH_DIGITS = 18  # a Content-Length past this (leading zeros aside) is refused, not read
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_VALUE = rb"[\t\x20-\x7e\x80-\xff]*"  # no control bytes, CR or LF
# a whole head up to its last header line's CRLF: the status line, then "name:value" lines
_STATUS_LINE = rb"HTTP/1\.[0-9] [0-9]{3}(?: " + _VALUE + rb")?\r\n"
_HEAD_GRAMMAR = re.compile(_STATUS_LINE + rb"(?:" + _TOKEN + rb":" + _VALUE + rb"\r\n)*")
_FIELD_LINE = re.compile(_TOKEN + rb":" + _VALUE)  # a trailer
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;" + _VALUE + rb")?")  # size, extensions (ignored)
_BARE_BREAK = re.compile(rb"(?<!\r)\n|\r[^\n]")  # a head still arriving that can never be valid

# what the bytes received next are
_IDLE, _HEAD, _LENGTH, _PREFIX, _CHUNK_SIZE, _CHUNK, _TRAILERS = range(7)


class WireError(Exception):
    """The exchange failed (connection, protocol); the message says how."""


class StaleConnection(Exception):
    """The connection ended before the first byte of the answer."""


class NoConnectionInTime(TimeoutError):
    """The call's deadline passed while it waited for one of its key's connections (all held by
    other calls, up to the per-host cap): its request was never written, so the target is not to
    blame (found by the HTTP attack of 2026-12-02: such runs were recorded as unanswered)."""


class RawHeaders(Mapping[str, str]):
    """An answer's headers as llhttp gave them (name and value bytes, in order), decoded on first
    use: a worker reads a header of few answers (a redirect's Location), and decoding every header
    of every answer (five from nginx) was a third of the parser's CPU per answer."""

    __slots__ = ("_decoded", "_pairs")

    def __init__(self, pairs: list[tuple[bytes, bytes]]) -> None:
        self._pairs = pairs
        self._decoded: dict[str, str] | None = None

    def _dict(self) -> dict[str, str]:
        if self._decoded is None:  # lower-case names; a repeated header keeps its last value
            self._decoded = {
                name.decode("latin-1").lower(): value.decode("latin-1").rstrip(" \t") for name, value in self._pairs
            }
        return self._decoded

    def __getitem__(self, name: str) -> str:
        return self._dict()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return repr(self._dict())


class Answer(NamedTuple):
    status: int
    headers: Mapping[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes  # at most the exchange's limit


class Connection(asyncio.Protocol):
    """A connection to one pool key; one exchange at a time (``reusable`` once it is over)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reusable = False  # the last exchange ended with a complete answer the connection may follow
        self.idle_since = 0.0  # monotonic seconds: when the pool last put it back (WirePool._sweep)
        self.sent_at = 0.0  # monotonic seconds: when the last request was written (wire_host.Host.answered)
        self._ended = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Any] | None = None
        self._state = _IDLE
        self._head_only = False
        self._limit = 0
        self._received = False  # a byte of the current answer has arrived
        self._scanned = 0  # bytes of the buffer already searched for the end of the head or line
        self._head_room = 0  # bytes the answer's heads (interim ones included) may still take
        self._need = 0  # bytes of body (or of the current chunk) still to read
        self._status = 0
        self._headers: dict[str, str] = {}
        self._keep = False  # the answer's head allows another request on this connection
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
        self._waiter = waiter
        self.reusable = False
        self._state = _HEAD
        self._head_only = head_only
        self._limit = limit
        self._received = False
        self._scanned = 0
        self._head_room = MAX_HEAD_BYTES
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
        if waiter is None or waiter.done():  # nobody asked (idle), or the caller gave up: unusable
            self.close()
            return
        self._received = True
        self._buffer += data
        try:
            self._advance()
        except WireError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self._end(None)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        self.transport = None

    # -- parsing ------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Consume what the buffer holds; resolve the waiter once the answer is complete."""
        buffer = self._buffer
        while self._waiter is not None:
            state = self._state
            if state == _HEAD:
                room = self._head_room
                end = buffer.find(b"\r\n\r\n", max(0, self._scanned - 3))
                if end < 0 or end + 4 > room:
                    if len(buffer) > room or end >= 0:
                        raise WireError(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes")
                    if _BARE_BREAK.search(buffer, max(0, self._scanned - 1)):
                        raise WireError("a line of the answer's head does not end with CRLF")
                    self._scanned = len(buffer)
                    return
                if _HEAD_GRAMMAR.fullmatch(buffer, 0, end + 2) is None:
                    raise WireError(f"not a valid HTTP/1.1 answer head: {bytes(buffer[: min(end, 80)])!r}")
                head = buffer[:end].decode("latin-1")
                del buffer[: end + 4]
                self._scanned = 0
                self._head_room = room - end - 4
                self._on_head(head)
            elif state in (_LENGTH, _PREFIX):
                if len(buffer) < self._need:
                    return
                self._body += buffer[: self._need]
                del buffer[: self._need]
                self._done(complete=state == _LENGTH)
            elif state in (_CHUNK_SIZE, _TRAILERS):
                end = buffer.find(b"\r\n", max(0, self._scanned - 1))
                if end < 0:
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise WireError(f"a chunk line is longer than {MAX_HEAD_BYTES} bytes")
                    self._scanned = len(buffer)
                    return
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                self._scanned = 0
                if state == _TRAILERS:
                    if not line:
                        self._done(complete=True)
                    elif _FIELD_LINE.fullmatch(line) is None:
                        raise WireError(f"invalid trailer line {line[:40]!r}")
                else:
                    self._on_chunk_size(line)
            else:  # _CHUNK: the chunk's data and its CRLF
                if len(buffer) < self._need + 2:
                    return
                if buffer[self._need : self._need + 2] != b"\r\n":
                    raise WireError("a chunk does not end with CRLF")
                self._body += buffer[: self._need]
                del buffer[: self._need + 2]
                self._state = _CHUNK_SIZE

    def _on_head(self, head: str) -> None:
        """Act on one head (its grammar checked): an interim answer is skipped, a final one frames the body."""
        lines = head.split("\r\n")
        status = int(lines[0][9:12])
        if status < 200:
            if status == 101:
                raise WireError("the server switched protocols, which no request asked for")
            if status < 100:
                raise WireError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
            return  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length" and name in headers:
                raise WireError("the answer has more than one Content-Length")
            headers[name] = value.strip(" \t")
        self._status = status
        self._headers = headers
        self._keep = not lines[0].startswith("HTTP/1.0") and "close" not in headers.get("connection", "").lower()
        self._body = bytearray()
        coding = headers.get("transfer-encoding")
        length_text = headers.get("content-length")
        if coding is not None and length_text is not None:
            raise WireError("the answer has both Content-Length and Transfer-Encoding")
        if self._head_only or status in _NO_BODY_STATUSES:
            self._done(complete=True)
        elif coding is not None:  # chunked only as the last coding; else the body ends with the connection
            chunked = coding.rsplit(",", 1)[-1].strip(" \t").lower() == "chunked"
            self._state, self._need = (_CHUNK_SIZE, 0) if chunked else (_PREFIX, self._limit)
        elif length_text is not None:
            if not length_text.isdigit() or not length_text.isascii():
                raise WireError(f"invalid Content-Length {length_text[:40]!r}")
            if len(length_text.lstrip("0")) > _MAX_LENGTH_DIGITS:
                raise WireError(f"Content-Length {length_text[:40]!r} is too large")
            length = int(length_text)
            self._state, self._need = (_LENGTH, length) if length <= self._limit else (_PREFIX, self._limit)
        else:  # the body ends when the server closes: the connection is never reused
            self._state, self._need = _PREFIX, self._limit

    def _on_chunk_size(self, line: bytes) -> None:
        match = _CHUNK_LINE.fullmatch(line)
        if match is None:
            raise WireError(f"invalid chunk size line {line[:20]!r}")
        size = int(match.group(1), 16)
        if size == 0:
            self._state = _TRAILERS
        elif len(self._body) + size > self._limit:  # keep what fits, drop the connection
            self._state, self._need = _PREFIX, self._limit - len(self._body)
        else:
            self._state, self._need = _CHUNK, size

    def _done(self, *, complete: bool) -> None:
        waiter = self._waiter
        assert waiter is not None
        self._waiter = None
        self._state = _IDLE
        # bytes past the answer belong to no request: such a connection is not reused
        self.reusable = complete and self._keep and not self._buffer and not self._ended
        if not waiter.done():
            waiter.set_result(Answer(self._status, self._headers, bytes(self._body)))

    def _fail(self, exc: Exception) -> None:
        waiter = self._waiter
        self._waiter = None
        self._state = _IDLE
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
        state = self._state
        if state == _PREFIX:  # a body that ends with the connection (or longer than kept): what came
            self._body += self._buffer[: self._need]
            self._done(complete=False)
        elif state == _HEAD and not self._received:
            self._fail(StaleConnection())
        elif state == _HEAD:
            self._fail(WireError("the connection closed in the middle of the answer's head"))
        elif isinstance(exc, OSError):
            self._fail(exc)
        else:
            self._fail(WireError("the connection closed in the middle of the answer's body"))
