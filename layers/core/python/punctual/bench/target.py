"""A no-op HTTP target for benchmarks, in its own process on 127.0.0.1.

It answers every request ``204 No Content`` after ``delay_ms`` (0: at once; 200: like a real
webhook), on keep-alive HTTP/1.1 connections. It is a bare asyncio protocol (uvloop where
installed), not a web framework: at tens of thousands of requests per second the target must not
be what the benchmark measures. Its own process so that it does not compete with the worker for
one interpreter. It records when each request arrived complete and, if asked, its ``Idempotency-Key``
(the run id: ``punctual bench minute`` tells runs and duplicates apart by it).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import ssl
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import cast

from punctual.bench.certificates import throwaway

_ANSWER = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
_MAX_HEAD = 65_536


class _NoOp(asyncio.Protocol):
    """Parses pipelined requests (head, then Content-Length bytes of body) and answers each 204."""

    def __init__(self, delay_s: float, arrivals: list[float], keys: list[str | None] | None = None) -> None:
        self.delay_s = delay_s
        self.arrivals = arrivals  # epoch seconds each request was complete here (shared by connections)
        self.keys = keys  # beside arrivals, each request's Idempotency-Key (None: not recorded)
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.pending = 0  # answers scheduled (delayed) but not yet written; kept in order by call_later

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD and self.transport is not None:
                    self.transport.close()
                return
            head = bytes(self.buffer[:end])
            total = end + 4 + int(_header(head, b"content-length") or 0)
            if len(self.buffer) < total:
                return
            del self.buffer[:total]
            self.arrivals.append(time.time())
            if self.keys is not None:
                key = _header(head, b"idempotency-key")
                self.keys.append(key.decode("latin-1") if key is not None else None)
            self._answer()

    def _answer(self) -> None:
        if self.transport is None:
            return
        if self.delay_s <= 0:
            self.transport.write(_ANSWER)
            return
        asyncio.get_running_loop().call_later(self.delay_s, self._write)

    def _write(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_ANSWER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def _header(head: bytes, wanted: bytes) -> bytes | None:
    """The value of the header named ``wanted`` (lower case) in a request head, or None."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip()
    return None


def serve(conn: Connection, delay_ms: int, tls: tuple[str, str] | None = None, keys: bool = False) -> None:
    """Serve until killed (over TLS with ``tls``: certificate chain and key files); sends the port
    on ``conn`` once listening, then, for each message it receives, the arrival times recorded
    since the last one (with ``keys``, and the message ``"keyed"``: (time, Idempotency-Key) pairs)."""
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
        arrivals: list[float] = []
        seen: list[str | None] | None = [] if keys else None
        server = await loop.create_server(
            lambda: _NoOp(delay_ms / 1000, arrivals, seen), "127.0.0.1", 0, backlog=4096, ssl=context
        )

        def report() -> None:
            keyed = conn.recv() == "keyed"
            conn.send(list(zip(arrivals, seen, strict=True)) if keyed and seen is not None else arrivals[:])
            arrivals.clear()
            if seen is not None:
                seen.clear()

        loop.add_reader(conn.fileno(), report)
        conn.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


@dataclass(frozen=True)
class NoOpTarget:
    url: str
    ca: Path | None  # over HTTPS: the throwaway CA's certificate, for the clients to trust
    _pipe: Connection

    def arrivals(self) -> list[float]:
        """The epoch seconds at which each request since the last call arrived complete."""
        self._pipe.send("arrivals")
        if not self._pipe.poll(30):
            raise RuntimeError("the no-op target did not report")
        return cast(list[float], self._pipe.recv())

    def keyed_arrivals(self) -> list[tuple[float, str | None]]:
        """Since the last call, each request's arrival (epoch seconds) and ``Idempotency-Key`` (None
        when it had none); only for a target started with ``keys``."""
        self._pipe.send("keyed")
        if not self._pipe.poll(30):
            raise RuntimeError("the no-op target did not report")
        return cast(list[tuple[float, str | None]], self._pipe.recv())


@contextmanager
def noop_target(delay_ms: int = 0, host: str = "127.0.0.1") -> Iterator[str]:
    """The URL of a no-op target (answering after ``delay_ms``) that lives as long as the ``with``
    block (:func:`noop_target_process`, for callers that need only its URL)."""
    with noop_target_process(delay_ms, host) as target:
        yield target.url


@contextmanager
def noop_target_process(
    delay_ms: int = 0, host: str = "127.0.0.1", *, tls: bool = False, keys: bool = False
) -> Iterator[NoOpTarget]:
    """A no-op target (answering after ``delay_ms``) that lives as long as the ``with`` block.

    It listens on 127.0.0.1; ``host`` is how the URL names it (a name such as ``localhost`` makes
    every attempt go through name resolution and its SSRF check, as a real webhook's does). With
    ``tls`` it serves HTTPS with a certificate for ``host`` from a throwaway CA, whose certificate
    (``NoOpTarget.ca``) the clients are to trust (``SSL_CERT_FILE``). With ``keys`` it also records
    each request's ``Idempotency-Key`` (:meth:`NoOpTarget.keyed_arrivals`)."""
    with tempfile.TemporaryDirectory(prefix="punctual-target-") as folder:
        files = throwaway(Path(folder), host) if tls else None
        chain = (str(files.certificate), str(files.key)) if files is not None else None
        parent, child = multiprocessing.Pipe()
        process = multiprocessing.get_context("spawn").Process(
            target=serve, args=(child, delay_ms, chain, keys), daemon=True
        )
        process.start()
        try:
            if not parent.poll(30):
                raise RuntimeError("the no-op target did not start")
            scheme = "https" if tls else "http"
            yield NoOpTarget(f"{scheme}://{host}:{parent.recv()}/noop", files.ca if files else None, parent)
        finally:
            process.terminate()
            process.join(5)
