"""What parsing one HTTP/1.1 answer costs the ``wire`` client: the hand-written parser against llhttp's.

Run: ``.venv/bin/python bench/wire_parsers.py [--answers 20000] [--rounds 7] [--json]``

No network, no loop turn: one connection (:mod:`punctual.execution.targets.wire_parse`, "house", or
:mod:`punctual.execution.targets.wire_llhttp`, "httptools") on a transport that drops what is
written; per answer, what a call costs the connection: ``exchange`` (write the request, a new
future), ``data_received`` with the answer's bytes, and the future's result. The answers are the
typical ones: the no-op bench target's 204, a small 200 with Content-Length (a JSON body), a
chunked body, a ``100 Continue`` before a 200, chunks with trailers, and the small 200 arriving
head and body in two reads. Reported in microseconds of process CPU per answer, the best of
``--rounds`` (the two parsers alternate within each round: this machine's speed drifts), and the
ratio httptools / house.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, "layers/core/python")

from punctual.execution.targets import wire_llhttp, wire_parse

PARSERS: dict[str, Any] = {"house": wire_parse.Connection, "httptools": wire_llhttp.Connection}
REQUEST = b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
_HEAD_200 = (
    b"HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 08:00:00 GMT\r\nServer: uvicorn\r\n"
    b"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n"
)
_BODY_200 = b'{"ok":true,"id":"r_123456"}'
_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
ANSWERS: dict[str, list[bytes]] = {
    "204 (bench target)": [b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"],
    "200 content-length": [_HEAD_200 + _BODY_200],
    "200 chunked": [_CHUNKED + b'10\r\n{"ok":true,"n":1\r\nc\r\n,"id":"r_1"}\r\n0\r\n\r\n'],
    "100-continue, 200": [b"HTTP/1.1 100 Continue\r\n\r\n" + _HEAD_200 + _BODY_200],
    "chunked + trailers": [_CHUNKED + b"1b\r\n" + _BODY_200 + b"\r\n0\r\nX-Checksum: abc\r\nX-Took: 3\r\n\r\n"],
    "200 in two reads": [_HEAD_200, _BODY_200],
}
LIMIT = 4096


class _Sink:
    """A transport that keeps nothing: the connection writes its request here."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def _cpu_us(parser: Any, pieces: list[bytes], answers: int) -> float:
    """Process-CPU microseconds per answer of ``answers`` exchanges on one keep-alive connection."""
    connection = parser()
    connection.connection_made(_Sink())
    gc.collect()
    started = time.process_time()
    for _ in range(answers):
        waiter = connection.exchange(REQUEST, False, LIMIT)
        for piece in pieces:
            connection.data_received(piece)
        waiter.result()  # raises if the answer was refused
    took = time.process_time() - started
    assert connection.reusable, "the connection should carry the next request"
    return took * 1e6 / answers


async def measure(answers: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per answer kind, per parser: the best of ``rounds`` (in us of process CPU per answer)."""
    best: dict[str, dict[str, float]] = {kind: {} for kind in ANSWERS}
    for round_ in range(rounds):
        order = sorted(PARSERS) if round_ % 2 == 0 else sorted(PARSERS, reverse=True)
        for kind, pieces in ANSWERS.items():
            for name in order:
                us = _cpu_us(PARSERS[name], pieces, answers)
                best[kind][name] = min(best[kind].get(name, float("inf")), us)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20_000, help="answers per kind, parser and round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (the best is reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    load = os.getloadavg()
    best = asyncio.run(measure(args.answers, args.rounds))
    if args.json:
        print(json.dumps({"load_average": load, "us_per_answer": best}, indent=2))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; best of {args.rounds} x {args.answers} answers")
    print(f"{'answer':24} {'house us':>9} {'httptools us':>13} {'ratio':>6}")
    for kind, figures in best.items():
        house, llhttp = figures["house"], figures["httptools"]
        print(f"{kind:24} {house:9.2f} {llhttp:13.2f} {llhttp / house:6.2f}")


if __name__ == "__main__":
    main()
