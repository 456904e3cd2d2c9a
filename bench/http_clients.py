"""Which async HTTP client can the worker afford? Calls/s of each candidate against a no-op target.

Run: ``.venv/bin/python bench/http_clients.py [--calls 20000] [--concurrency 64,256]``

The target is ``punctual.bench.target`` (another process, 127.0.0.1, 204 at once, keep-alive).
Each candidate makes ``--calls`` POSTs with a small JSON body and the headers the HTTP target sends,
``concurrency`` at a time, on one event loop (uvloop where installed, as the worker uses).
Candidates that are not installed are skipped (aiohttp and pycurl are not project dependencies).
Figures are recorded in docs/benchmarks.md; the machine is shared, so compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, "layers/core/python")

from punctual.bench.target import noop_target

BODY = json.dumps({"hello": "world", "n": 1}).encode()
HEADERS = {
    "User-Agent": "punctual/0.1",
    "Content-Type": "application/json",
    "Idempotency-Key": "job_x:1800000000000",
    "X-Punctual-Run-Id": "job_x:1800000000000",
    "X-Punctual-Attempt": "1",
    "X-Punctual-Scheduled-At": "2027-01-15T08:00:00.000Z",
    "X-Punctual-Job-Id": "job_x",
}


async def _fan_out(calls: int, concurrency: int, one: Callable[[], Awaitable[int]]) -> None:
    remaining = calls

    async def lane() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            status = await one()
            assert status == 204, status

    await asyncio.gather(*(lane() for _ in range(concurrency)))


async def run_aiohttp(url: str, calls: int, concurrency: int) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            async with session.post(url, data=BODY, headers=HEADERS, allow_redirects=False) as response:
                await response.content.read(2048)
                return response.status

        await _fan_out(calls, concurrency, one)


async def run_httpx(url: str, calls: int, concurrency: int) -> None:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:

        async def one() -> int:
            async with client.stream("POST", url, content=BODY, headers=HEADERS) as response:
                async for _ in response.aiter_bytes():
                    break
                return response.status_code

        await _fan_out(calls, concurrency, one)


async def run_punctual(url: str, calls: int, concurrency: int) -> None:
    """The worker's own client (``punctual.execution.targets.wire``), with its SSRF-pinned pools."""
    from punctual.execution.targets.wire import Request, WirePool

    pool = WirePool(max_idle_per_key=concurrency, start_per_key=concurrency)
    parts = url.split("/", 3)
    host, port = parts[2].split(":")
    headers = {"Host": parts[2], **HEADERS}
    target = "/" + parts[3]
    request = Request.of("POST", "http", host, "127.0.0.1", int(port), target=target, headers=headers, body=BODY)

    async def one() -> int:
        answer = await pool.send(request, timeout_s=10.0, excerpt_bytes=2048)
        return answer.status

    try:
        await _fan_out(calls, concurrency, one)
    finally:
        pool.close()


async def run_minimal(url: str, calls: int, concurrency: int) -> None:
    """A bare asyncio streams client: the floor (keep-alive, Content-Length responses only)."""
    parts = url.split("/", 3)
    host, port = parts[2].split(":")
    head = f"POST /{parts[3]} HTTP/1.1\r\nHost: {parts[2]}\r\nContent-Length: {len(BODY)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items()) + "\r\n"
    payload = head.encode() + BODY
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def one() -> int:
        reader, writer = idle.pop() if idle else await asyncio.open_connection(host, int(port))
        writer.write(payload)
        raw = await reader.readuntil(b"\r\n\r\n")
        status = int(raw[9:12])
        idle.append((reader, writer))
        return status

    await _fan_out(calls, concurrency, one)
    for _, writer in idle:
        writer.close()


def run_pycurl(url: str, calls: int, concurrency: int) -> None:
    import pycurl

    multi = pycurl.CurlMulti()
    header_list = [f"{k}: {v}" for k, v in HEADERS.items()]
    free = []
    for _ in range(concurrency):
        handle = pycurl.Curl()
        handle.setopt(pycurl.URL, url)
        handle.setopt(pycurl.POSTFIELDS, BODY)
        handle.setopt(pycurl.HTTPHEADER, header_list)
        handle.setopt(pycurl.WRITEFUNCTION, lambda data: None)
        free.append(handle)
    started = done = 0
    while done < calls:
        while free and started < calls:
            multi.add_handle(free.pop())
            started += 1
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, ok, failed = multi.info_read()
        for handle in ok:
            assert handle.getinfo(pycurl.RESPONSE_CODE) == 204
            multi.remove_handle(handle)
            free.append(handle)
            done += 1
        if failed:
            raise RuntimeError(failed)
        multi.select(0.01)


CANDIDATES: dict[str, Callable[[str, int, int], Any]] = {
    "minimal asyncio streams": run_minimal,
    "punctual wire client": run_punctual,
    "aiohttp": run_aiohttp,
    "httpx AsyncClient": run_httpx,
    "pycurl multi": run_pycurl,
}


def measure(name: str, url: str, calls: int, concurrency: int) -> float | None:
    run = CANDIDATES[name]
    try:
        started = time.perf_counter()
        if asyncio.iscoroutinefunction(run):
            asyncio.run(run(url, calls, concurrency))
        else:
            run(url, calls, concurrency)
    except ImportError:
        return None
    return calls / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--only", default="")
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    if not args.no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop

            uvloop.install()
    names = [n for n in CANDIDATES if not args.only or args.only in n]
    results: dict[str, dict[str, float | None]] = {}
    with noop_target() as url:
        for name in names:
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                rate = measure(name, url, args.calls, concurrency)
                results.setdefault(name, {})[str(concurrency)] = None if rate is None else round(rate)
                print(f"{name:<26} concurrency {concurrency:>4}: {'-' if rate is None else f'{rate:,.0f}'} calls/s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
