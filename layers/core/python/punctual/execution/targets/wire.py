"""A small asyncio HTTP/1.1 client: one request, one bounded answer, pooled keep-alive connections.

Why our own: measured on the 2-core machine (docs/decisions.md, issue 9), one process calling a
no-op target reached ~54,000 calls/s through bare asyncio streams, ~5,000-7,000 through aiohttp,
~10,000 through pycurl's multi interface and a few hundred through httpx's AsyncClient. The worker
needs more than 10,000 runs/s per machine, and what it asks of HTTP is small: send one request,
read the status, the headers and the first bytes of the body, never follow a redirect.

What it guarantees (the rest of the HTTP target's rules live in ``punctual.execution.targets.http``):

- **Pinned to the checked address.** A :class:`Request` names the host *and* the address the
  SSRF guard checked; the connection goes to that address, the name travels in ``Host`` and as
  the TLS server name (so certificates are verified against the name, never the address).
- **Pools per (scheme, host name, checked address, port).** An idle connection is reused only by a
  request with the same four: a TLS session verified for one name is never reused for another
  name on the same address, and a re-resolved address never inherits an old connection.
- **Bounded.** The response head is at most 64 KiB; at most ``excerpt_bytes`` of the body are
  read. A body that is longer (or whose end is unknown) costs its connection, which is closed
  rather than drained.
- **At most ``max_per_key`` connections per key** at once: a burst of thousands of runs to one
  webhook queues for connections instead of opening thousands of them.
- **Timeouts.** The whole exchange (connect, TLS, request, answer) is cut at ``timeout_s``; the
  connection is then closed.
- A reused connection that the server closed while idle is retried once on a new connection if
  nothing of the answer had arrived (what every HTTP client does; the receiver deduplicates on
  ``Idempotency-Key`` anyway, since delivery is at least once).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HEAD_BYTES = 65_536
_NO_BODY_STATUSES = frozenset({204, 304})


class WireError(Exception):
    """The exchange failed (connection, protocol); the message says how."""


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    scheme: str  # "http" | "https"
    host: str  # the name from the URL: Host header and TLS server name
    address: str  # the checked address to connect to
    port: int
    target: str  # path and query, e.g. "/hook?x=1"
    headers: Mapping[str, str]  # complete except Content-Length (added from body) and Connection
    body: bytes | None = None

    @property
    def pool_key(self) -> tuple[str, str, str, int]:
        return (self.scheme, self.host, self.address, self.port)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes  # at most excerpt_bytes


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class _Slots:
    """A FIFO counting semaphore whose release is O(1) with thousands of waiters.

    ``asyncio.Semaphore`` (3.11) scans its whole waiter queue on every release: with 10,000
    requests waiting for 1,024 connections that was the worker's largest single cost.
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a slot, then cancelled: pass it on
                self._release()
            else:
                waiter.cancel()  # left in the queue: _release skips it
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes straight to the next waiter
                return
        self._free += 1


class WirePool:
    """Idle keep-alive connections per pool key, for one event loop (not thread-safe, no locks needed).

    ``tls`` is the context for https (certificates verified; the server name is the request's host).
    """

    def __init__(
        self, *, tls: ssl.SSLContext | None = None, max_idle_per_key: int = 256, max_per_key: int = 1024
    ) -> None:
        self._tls = tls
        self._max_idle = max_idle_per_key
        self._max_per_key = max_per_key
        self._idle: defaultdict[tuple[str, str, str, int], list[_Connection]] = defaultdict(list)
        self._slots: dict[tuple[str, str, str, int], _Slots] = {}

    def idle_connections(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    async def send(self, request: Request, *, timeout_s: float, excerpt_bytes: int) -> Answer:
        """Send ``request`` and read its answer (at most ``excerpt_bytes`` of body) within ``timeout_s``.

        Raises ``TimeoutError`` (the deadline passed), :class:`WireError` or ``OSError``.
        """
        slots = self._slots.get(request.pool_key)
        if slots is None:
            slots = self._slots[request.pool_key] = _Slots(self._max_per_key)
        async with asyncio.timeout(timeout_s), slots:
            connection, reused = await self._connection(request)
            try:
                return await self._exchange(connection, request, excerpt_bytes)
            except _StaleConnection:
                if not reused:
                    raise WireError("the server closed the connection without an answer") from None
            connection, _ = await self._connection(request, fresh=True)
            try:
                return await self._exchange(connection, request, excerpt_bytes)
            except _StaleConnection:
                raise WireError("the server closed the connection without an answer") from None

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

    # -- helpers ------------------------------------------------------------------------------

    async def _connection(self, request: Request, *, fresh: bool = False) -> tuple[_Connection, bool]:
        idle = self._idle.get(request.pool_key)
        while idle and not fresh:
            connection = idle.pop()
            if connection.usable():
                return connection, True
            connection.close()
        tls = None
        if request.scheme == "https":
            tls = self._tls or ssl.create_default_context()
        reader, writer = await asyncio.open_connection(
            request.address,
            request.port,
            ssl=tls,
            server_hostname=request.host if tls is not None else None,
            limit=MAX_HEAD_BYTES,
        )
        return _Connection(reader, writer), False

    async def _exchange(self, connection: _Connection, request: Request, excerpt_bytes: int) -> Answer:
        keep = False
        try:
            connection.writer.write(_encode(request))
            status, headers, http10 = await _read_head(connection.reader)
            body, complete = await _read_body(connection.reader, request.method, status, headers, excerpt_bytes)
            keep = complete and not http10 and headers.get("connection", "").lower() != "close"
            return Answer(status, headers, body)
        finally:
            if keep and len(self._idle[request.pool_key]) < self._max_idle:
                self._idle[request.pool_key].append(connection)
            else:
                connection.close()


class _StaleConnection(Exception):
    """The connection ended before the first byte of the answer."""


def _encode(request: Request) -> bytes:
    lines = [f"{request.method} {request.target} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    if request.body is not None:
        lines.append(f"Content-Length: {len(request.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + request.body if request.body else head


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status, headers and whether the server speaks HTTP/1.0; skips 1xx interim answers."""
    first = True
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if first and not exc.partial:
                raise _StaleConnection from None
            raise WireError("the connection closed in the middle of the answer's head") from None
        except asyncio.LimitOverrunError:
            raise WireError(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes") from None
        except ConnectionResetError:
            if first:
                raise _StaleConnection from None
            raise
        first = False
        lines = raw.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise WireError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:
            continue
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return status, headers, version == "HTTP/1.0"


async def _read_body(
    reader: asyncio.StreamReader, method: str, status: int, headers: dict[str, str], limit: int
) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether the whole body was read (connection reusable)."""
    if method == "HEAD" or status in _NO_BODY_STATUSES:
        return b"", True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader, limit)
    length_text = headers.get("content-length")
    if length_text is not None:
        if not length_text.isdigit():
            raise WireError(f"invalid Content-Length {length_text[:40]!r}")
        length = int(length_text)
        if length == 0:
            return b"", True
        if length <= limit:
            return await reader.readexactly(length), True
        return await _read_up_to(reader, limit), False
    return await _read_up_to(reader, limit), False  # ends when the server closes: never reused


async def _read_up_to(reader: asyncio.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await reader.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        text = line.split(b";", 1)[0].strip()
        try:
            chunk_size = int(text, 16)
        except ValueError:
            raise WireError(f"invalid chunk size {text[:20]!r}") from None
        if chunk_size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)[:limit], True
        if size + chunk_size > limit:
            chunks.append(await _read_up_to(reader, limit - size))
            return b"".join(chunks), False
        chunks.append(await reader.readexactly(chunk_size))
        size += chunk_size
        await reader.readexactly(2)  # the CRLF after the chunk
