"""A no-op HTTP target for benchmarks, in its own process on 127.0.0.1.

It answers every request ``204 No Content`` after ``delay_ms`` (0: at once; 200: like a real
webhook), on keep-alive HTTP/1.1 connections. It is a bare asyncio protocol (uvloop where
installed), not a web framework: at tens of thousands of requests per second the target must not
be what the benchmark measures. Its own process so that it does not compete with the worker for
one interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import cast

_ANSWER = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
_MAX_HEAD = 65_536


class _NoOp(asyncio.Protocol):
    """Parses pipelined requests (head, then Content-Length bytes of body) and answers each 204."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
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
            length = _content_length(bytes(self.buffer[:end]))
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            del self.buffer[:total]
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


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip() or 0)
    return 0


def serve(conn: Connection, delay_ms: int) -> None:
    """Serve until killed; sends the port on ``conn`` once listening."""
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _NoOp(delay_ms / 1000), "127.0.0.1", 0, backlog=4096)
        conn.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


@contextmanager
def noop_target(delay_ms: int = 0, host: str = "127.0.0.1") -> Iterator[str]:
    """The URL of a no-op target (answering after ``delay_ms``) that lives as long as the ``with`` block.

    It listens on 127.0.0.1; ``host`` is how the URL names it (a name such as ``localhost`` makes
    every attempt go through name resolution and its SSRF check, as a real webhook's does)."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=serve, args=(child, delay_ms), daemon=True)
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the no-op target did not start")
        yield f"http://{host}:{parent.recv()}/noop"
    finally:
        process.terminate()
        process.join(5)
