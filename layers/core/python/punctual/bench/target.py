"""A no-op HTTP target for benchmarks: answers every request 204, in its own process on 127.0.0.1.

Its own process so that the target's work does not compete with the worker for one interpreter.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection


class _NoOp(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Silent: a benchmark prints figures, not request lines."""


def _serve(conn: Connection) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoOp)
    server.daemon_threads = True
    conn.send(server.server_address[1])
    server.serve_forever()


@contextmanager
def noop_target() -> Iterator[str]:
    """The URL of a no-op target that lives as long as the ``with`` block."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(child,), daemon=True)
    process.start()
    try:
        if not parent.poll(10):
            raise RuntimeError("the no-op target did not start")
        yield f"http://127.0.0.1:{parent.recv()}/noop"
    finally:
        process.terminate()
        process.join(5)
