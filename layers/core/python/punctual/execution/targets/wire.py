"""A small asyncio HTTP/1.1 client: one request, one bounded answer, pooled keep-alive connections.

Why our own: measured on the 2-core machine (docs/decisions/0050), one process calling a
no-op target reached ~54,000 calls/s through bare asyncio streams, ~5,000-7,000 through aiohttp,
~10,000 through pycurl's multi interface and a few hundred through httpx's AsyncClient. The worker
needs more than 10,000 runs/s per machine, and what it asks of HTTP is small: send one request,
read the status, the headers and the first bytes of the body, never follow a redirect.

How: each connection is an ``asyncio.Protocol`` that parses the answer as its bytes arrive, with
llhttp (Node's parser, through ``httptools``: :mod:`punctual.execution.targets.wire_llhttp`), and
resolves one future per exchange, so a call costs
one write and one wake-up, even when it queued for a connection (the call that frees one writes
the next queued request on it); deadlines share one loop timer (:class:`Deadlines`) instead of a
timer (or an ``asyncio.timeout``) per call. :meth:`WirePool.call` is driven by the callbacks of
those futures (a :class:`Call`, no task or coroutine per call: the worker's path);
:meth:`WirePool.send` awaits the same.

What it guarantees (the rest of the HTTP target's rules live in ``punctual.execution.targets.http``):

- **Pinned to the checked address.** A :class:`Request` names the host *and* the address the
  SSRF guard checked; the connection goes to that address, the name travels in ``Host`` and as
  the TLS server name (so certificates are verified against the name, never the address).
- **Pools per (scheme, host name, checked address, port).** An idle connection is reused only by a
  request with the same four: a TLS session verified for one name is never reused for another
  name on the same address, and a re-resolved address never inherits an old connection.
- **Bounded.** The response head is at most 64 KiB; at most ``excerpt_bytes`` of the body are
  read. A body that is longer (or whose end is unknown) costs its connection, which is closed
  rather than drained. Redirects are answers like any other: never followed.
- **Idle connections expire.** One unused for :data:`IDLE_S` (or closed by its server) is closed,
  and a key with nothing left is forgotten (looked for at most every :data:`SWEEP_S`, by calls):
  a worker that runs for weeks meets addresses it never uses again.
- **At most ``max_per_key`` connections per key** at once, handed out first come, first served: a
  burst of thousands of runs to one webhook queues for connections instead of opening thousands.
  A key starts with ``start_per_key`` slots and grows them while its answers are slow
  (:mod:`punctual.execution.targets.wire_host`): a target that answers at once needs few. A
  pre-leased burst opens its connections ahead (:meth:`WirePool.warm`), up to one per call and
  the ceiling: the slots use some, the rest wait for a slow target's growth.
- **Timeouts.** The whole exchange (waiting for a connection, connect, TLS, request, answer) is cut
  at ``timeout_s`` (within the 10 ms resolution of the shared timer); the connection is then closed.
- A reused connection that the server closed while idle is retried once on a new connection if
  nothing of the answer had arrived (what every HTTP client does; the receiver deduplicates on
  ``Idempotency-Key`` anyway, since delivery is at least once).
- Chunked bodies, ``1xx`` interim answers, HTTP/1.0 servers and ``Connection: close`` are honoured.

Which parser: llhttp by default; ``PUNCTUAL_WIRE_PARSER=house`` (read once, when this module is
imported) selects the hand-written one (:mod:`punctual.execution.targets.wire_parse`), kept to
compare the two (``bench/wire_parsers.py``; issue 28). Both pass the same tests and keep the same
limits and rules.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

from punctual.errors import ConfigError
from punctual.execution.targets import wire_llhttp, wire_parse
from punctual.execution.targets.wire_call import Call, Reply, Volley
from punctual.execution.targets.wire_deadlines import Deadlines
from punctual.execution.targets.wire_host import SLOT, START_PER_KEY, Host
from punctual.execution.targets.wire_parse import MAX_HEAD_BYTES, Answer, WireError
from punctual.execution.targets.wire_request import PoolKey, Request, encode, header_block

__all__ = ["MAX_HEAD_BYTES", "Answer", "Call", "PoolKey", "Request", "WireError", "WirePool", "encode", "header_block"]

IDLE_S = 60.0  # an idle connection unused this long is closed
SWEEP_S = 10.0  # calls look for such connections (and keys nobody uses) at most this often
# connections a key opens ahead of a burst at once (each lane opens its next when one is up): a
# target's listen backlog (nginx's default is 511) takes them instead of dropping handshakes, which
# a client retries only after a second
WARM_AT_ONCE = 256

WireConnection = wire_llhttp.Connection | wire_parse.Connection  # one connection, whichever parser
PARSER_ENV = "PUNCTUAL_WIRE_PARSER"
PARSERS: dict[str, type[WireConnection]] = {"httptools": wire_llhttp.Connection, "house": wire_parse.Connection}
DEFAULT_PARSER = "httptools"  # measured: less CPU per answer (bench/wire_parsers.py), and kept by others


def connection_class(environ: Mapping[str, str] = os.environ) -> type[WireConnection]:
    """The connection class ``PUNCTUAL_WIRE_PARSER`` names in ``environ`` (``httptools`` if unset).

    Raises :class:`ConfigError` naming the variable for any other value."""
    name = environ.get(PARSER_ENV) or DEFAULT_PARSER
    if name not in PARSERS:
        raise ConfigError(f"{PARSER_ENV} must be one of {', '.join(sorted(PARSERS))}, not {name[:40]!r}")
    return PARSERS[name]


Connection = connection_class()  # what every WirePool connects with, chosen once per process


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark an error the caller will not see (its task was cancelled just after the error was set)
    as retrieved, so that asyncio does not log "Future exception was never retrieved"."""
    if future.done() and not future.cancelled():
        future.exception()


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    """A call's reply into the future :meth:`WirePool.send` awaits."""
    if future.done():
        return
    if isinstance(outcome, asyncio.CancelledError):
        future.cancel()
    elif isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class WirePool:
    """Idle keep-alive connections per pool key, for one event loop (not thread-safe, no locks needed).

    ``tls`` is the context for https (certificates verified; the server name is the request's host).

    A call that finds no free slot queues. When an exchange ends with a reusable connection and a
    call is queued, the next call's request is written on that connection at once and that call
    hears only of its answer (one wake-up per call, not one for the slot and one for the answer);
    a connection that cannot be reused passes its slot on to the next call, which connects.
    """

    def __init__(
        self,
        *,
        tls: ssl.SSLContext | None = None,
        max_idle_per_key: int = 256,
        max_per_key: int = 1024,
        start_per_key: int = START_PER_KEY,
        idle_s: float = IDLE_S,
        sweep_s: float = SWEEP_S,
        warm_at_once: int = WARM_AT_ONCE,
    ) -> None:
        self._tls = tls
        self._max_idle = max_idle_per_key
        self._max_per_key = max_per_key
        self._start_per_key = start_per_key  # slots a key starts with, grown while answers are slow (wire_host)
        self._warm_at_once = warm_at_once
        self._hosts: dict[PoolKey, Host] = {}
        self._deadlines: Deadlines | None = None
        # A long-running worker meets keys it never uses again (a name's address changes: DNS
        # round robin, a load balancer's new addresses): their idle connections are closed after
        # idle_s and the keys forgotten, instead of holding sockets and entries for good.
        self._idle_s, self._sweep_s = idle_s, sweep_s
        self._next_sweep = time.monotonic() + sweep_s
        self._warming: set[asyncio.Task[None]] = set()  # strong references: the loop keeps weak ones

    def idle_connections(self) -> int:
        return sum(len(host.idle) for host in self._hosts.values())

    def keys(self) -> int:
        """Pool keys known (with idle connections, calls in flight or queued, or recently used)."""
        return len(self._hosts)

    async def send(self, request: Request, *, timeout_s: float, excerpt_bytes: int) -> Answer:
        """Send ``request`` and read its answer (at most ``excerpt_bytes`` of body) within ``timeout_s``.

        Raises ``TimeoutError`` (the deadline passed), :class:`WireError` or ``OSError``.
        """
        answered: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        call = self.call(request, timeout_s=timeout_s, excerpt_bytes=excerpt_bytes, reply=partial(_settle, answered))
        try:
            return await answered
        except asyncio.CancelledError:
            _retrieved(answered)
            call.cancel()
            raise

    def call(self, request: Request, *, timeout_s: float, excerpt_bytes: int, reply: Reply) -> Call:
        """:meth:`send` by callback: ``reply`` gets the answer or the error (never from within this
        method); the call returned can be cut (:meth:`Call.cancel`)."""
        loop = asyncio.get_running_loop()
        deadlines = self._deadlines_of(loop)
        host = self._host(request.key)
        call = Call(self, host, deadlines, request, excerpt_bytes, loop.time() + timeout_s, reply)
        if host.free > 0 and not host.queue:
            host.free -= 1
            call.owned = True
            call._start(reuse=True)
        else:
            call._wait(loop)
            host.queue.append(call)
            host.watch(loop)
        return call

    def arm(self, request: Request, *, timeout_s: float, excerpt_bytes: int, reply: Reply, volley: Volley) -> Call:
        """:meth:`call`, built ahead of its instant and held by ``volley`` until :meth:`release` lets it
        go: a burst's calls (objects, futures, deadlines) are made while the loop waits for the
        instant, so that at the instant only the writes are left (10,000 calls took 110-140 ms of
        a worker's loop to make, during which no answer was read). ``timeout_s`` counts from
        ``volley.opens_at`` (loop time). The call can be cut while held; it is queued nowhere until
        released."""
        loop = asyncio.get_running_loop()
        deadlines = self._deadlines_of(loop)
        host = self._host(request.key)
        call = Call(self, host, deadlines, request, excerpt_bytes, volley.opens_at + timeout_s, reply)
        call._wait(loop)
        host.held += 1  # the key is not forgotten meanwhile (_sweep)
        volley.calls.append(call)
        return call

    def release(self, volley: Volley) -> None:
        """Let ``volley``'s calls go, in the order they were armed: each takes a free slot of its key
        (its request written at once on an idle connection) or queues for one, behind the calls
        queued already; one cut while held is dropped."""
        loop = asyncio.get_running_loop()
        calls, volley.calls = volley.calls, []
        for call in calls:
            host = call._host
            host.held -= 1
            future = call.future
            assert future is not None
            if future.done():  # cut while held
                continue
            if host.free > 0 and not host.queue:
                host.free -= 1
                self._hand_slot(host, call, future)
            else:
                host.queue.append(call)
                host.watch(loop)

    def warm(self, request: Request, count: int, *, timeout_s: float) -> int:
        """Have ``count`` connections to ``request``'s key (the calls a burst will make on it),
        counting those idle, being opened or in use, up to the key's ceiling (``max_per_key``) and
        ``max_idle_per_key``: open the missing ones ahead of the calls, as idle connections they
        will reuse (a pre-leased burst: the TCP and TLS handshakes happen before the instant, not
        in front of each first request). Returns how many it opens; one that fails or takes past
        ``timeout_s`` is dropped (a call opens its own).

        The key's slots stay as they are (what it started with, or grew to): connections beyond
        them are a reserve. Against a target that answers at once they stay idle (more requests
        in flight only share the same CPU); against a slow one the key grows (``wire_host``) and
        its queued calls take them at once, instead of opening thousands of connections in the
        middle of the burst (~45 us of CPU each on this machine, and an accept on the target's
        side: the first minute of a 200 ms webhook was 0.3-0.5 s later than the next ones). The
        ``count`` newest idle connections are counted on for this burst: they are not closed as
        idle before it; a small burst after a big one leaves the rest to close after ``idle_s``."""
        loop = asyncio.get_running_loop()
        host = self._host(request.key)
        in_use = host.limit - host.free
        now = time.monotonic()
        for connection in host.idle[-count:] if count > 0 else ():  # the newest: the calls reuse them first
            connection.idle_since = now  # counted on; the others still close after idle_s unused
        have = len(host.idle) + host.warming + in_use
        # and never more idle or opening than one key's ceiling across every key: the ceiling is
        # what the open-files limit was sized for (cli.worker), and a burst to several hosts must
        # leave the store its files (found by the HTTP attack on 0222: 2 hosts at 2,048 files)
        spare = self._max_per_key - sum(len(h.idle) + h.warming for h in self._hosts.values())
        wanted = min(count, self._max_idle, self._max_per_key) - have
        room = max(0, min(wanted, spare))
        if not room:
            return 0
        deadline = loop.time() + timeout_s
        host.warming += room
        left = [room]  # not yet started, shared by the lanes
        for _ in range(min(room, self._warm_at_once)):
            task = loop.create_task(self._warm_lane(request, host, deadline, left))
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)
        return room

    async def _warm_lane(self, request: Request, host: Host, deadline: float, left: list[int]) -> None:
        """Open connections one after another while ``left`` wants more; the first that fails
        (refused, TLS, past the deadline: all OSErrors) ends the warm: the calls open their own."""
        while left[0] > 0:
            left[0] -= 1
            try:
                connection = await self._connect(request, deadline)
            except (OSError, asyncio.CancelledError):  # or closed: this one and those not started
                host.warming -= 1 + left[0]
                left[0] = 0
                return
            host.warming -= 1
            self._park(host, connection)  # its key is still known: the sweep keeps keys with warming

    def close(self) -> None:
        for task in list(self._warming):
            task.cancel()
        for host in self._hosts.values():
            host.unwatch()
            for connection in host.idle:
                connection.close()
            host.idle.clear()

    # -- helpers ------------------------------------------------------------------------------

    def _finish(self, host: Host, connection: WireConnection | None) -> None:
        """A call is done with its slot and ``connection``: both go to the next queued call (its
        request written at once) or back to the pool; a connection that cannot be reused is closed."""
        queue = host.queue
        if connection is not None:
            host.answered(connection.sent_at)
        if connection is not None and connection.reusable and connection.usable():
            while queue:
                entry = queue.popleft()
                future = entry.future
                assert future is not None
                if not future.done():  # else it was cut while queued: skip it
                    entry.owned = True
                    entry.connection = connection
                    connection.exchange(entry.request.data, entry.request.method == "HEAD", entry.limit, future)
                    return
            self._park(host, connection)
        elif connection is not None:  # cut (deadline, cancel, error), or not reusable
            connection.close()
        while queue:
            entry = queue.popleft()
            future = entry.future
            assert future is not None
            if not future.done():
                entry.owned = True
                future.set_result(SLOT)
                return
        host.free += 1

    def _hand_slot(self, host: Host, call: Call, future: asyncio.Future[Any]) -> None:
        """A queued or armed ``call`` got a slot: its request is written on the key's newest usable
        idle connection, answering ``future`` (as when a finishing call hands its connection over),
        or, with none idle, ``future`` says so and the call connects."""
        call.owned = True
        connection = host.take_idle()
        if connection is None:
            future.set_result(SLOT)
            return
        call.connection = connection
        connection.exchange(call.request.data, call.request.method == "HEAD", call.limit, future)

    def _deadlines_of(self, loop: asyncio.AbstractEventLoop) -> Deadlines:
        """The loop's deadlines (made on first use; the pool follows a new loop); and the sweep, when due."""
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            deadlines = self._deadlines = Deadlines(loop)
        if time.monotonic() >= self._next_sweep:
            self._sweep()
        return deadlines

    def _host(self, key: PoolKey) -> Host:
        host = self._hosts.get(key)
        if host is None:
            host = self._hosts[key] = Host(self._start_per_key, self._max_per_key)
        return host

    def _park(self, host: Host, connection: WireConnection) -> None:
        """Keep a usable ``connection`` idle for the key's next call, or close it if the key has
        ``max_idle_per_key`` idle already."""
        if len(host.idle) < self._max_idle:
            connection.idle_since = time.monotonic()
            host.idle.append(connection)
        else:
            connection.close()

    def _sweep(self) -> None:
        """Close the idle connections unused for ``idle_s`` (or closed by their server) and forget
        the keys left with nothing: no idle connection, no call holding or waiting for a slot."""
        now = time.monotonic()
        self._next_sweep = now + self._sweep_s
        oldest = now - self._idle_s
        for key, host in list(self._hosts.items()):
            if host.idle:
                kept: list[WireConnection] = []
                for connection in host.idle:
                    if connection.idle_since > oldest and connection.usable():
                        kept.append(connection)
                    else:
                        connection.close()
                host.idle[:] = kept  # in place, in order: the newest (last) are reused first
            if host.unused():
                del self._hosts[key]

    async def _connect(self, request: Request, deadline: float) -> WireConnection:
        tls = None
        if request.scheme == "https":
            tls = self._tls or ssl.create_default_context()
        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(deadline):  # one timer per new connection: rare on keep-alive
            _, connection = await loop.create_connection(
                Connection,
                request.address,
                request.port,
                ssl=tls,
                server_hostname=request.host if tls is not None else None,
            )
        return cast(WireConnection, connection)  # made by Connection: one of the two (mypy joins them)
