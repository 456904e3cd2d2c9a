"""One call of the ``wire`` pool (:class:`Call`): the callbacks that carry it from a slot to its answer.

A call waits on futures only (a queued call's slot, a connection's answer), never in a task or a
coroutine of its own, so that the worker's path costs one future and one callback per call. The
pool (:class:`punctual.execution.targets.wire.WirePool`) creates calls and takes back their slots
and connections; the connection parses the answer (:mod:`punctual.execution.targets.wire_llhttp`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from punctual.execution.targets.wire_host import SLOT, Host
from punctual.execution.targets.wire_parse import NoConnectionInTime, StaleConnection, WireError

if TYPE_CHECKING:
    from punctual.execution.targets.wire import WireConnection, WirePool
    from punctual.execution.targets.wire_deadlines import Deadlines
    from punctual.execution.targets.wire_request import Request

Reply = Callable[[Any], None]  # given the call's Answer, or the error that ended it


class Call:
    """One call of :meth:`WirePool.call`, driven by the callbacks of the futures it waits on.

    On the common paths (a free slot with an idle connection, or a connection handed over by the
    call before it) a call has no task of its own: its request is written at once and the answer's
    future calls back, so a call costs one future and one callback. Only connecting runs in a task.
    ``reply`` gets the :class:`Answer`, or the error (``TimeoutError``, :class:`WireError`,
    ``OSError``; ``asyncio.CancelledError`` once :meth:`cancel` cut it), exactly once.
    """

    __slots__ = (
        "_deadlines",
        "_host",
        "_pool",
        "_reply",
        "_reused",
        "_slot",
        "_waiting",
        "cancelled",
        "connection",
        "deadline",
        "future",
        "limit",
        "owned",
        "request",
    )

    def __init__(  # noqa: PLR0917 - built in one place, per call: positional is cheaper
        self,
        pool: WirePool,
        host: Host,
        deadlines: Deadlines,
        request: Request,
        limit: int,
        deadline: float,
        reply: Reply,
    ) -> None:
        self._pool = pool
        self._host = host
        self._deadlines = deadlines
        self._reply = reply
        self.request = request
        self.limit = limit
        self.deadline = deadline
        self.future: asyncio.Future[Any] | None = None  # while queued: its Answer, or SLOT (a slot, no connection)
        self.connection: WireConnection | None = None  # the connection its request was sent on
        self.owned = False  # one of the key's slots is this call's: passed on when the call ends
        self.cancelled = False
        self._waiting: asyncio.Future[Any] | None = None  # what cancel() cuts: a future or the connect task
        self._reused = False  # the connection was idle in the pool (the server may have closed it)
        self._slot = 0  # the deadline slot of the future it waits on

    def cancel(self) -> None:
        """Cut the call: its connection is closed, its slot passed on, its reply gets
        ``CancelledError`` (unless its answer was in already)."""
        self.cancelled = True
        if self._waiting is not None:
            self._waiting.cancel()

    def _wait(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """The future this call waits on for a slot (queued or armed), cut at its deadline."""
        future = self.future = self._waiting = loop.create_future()
        self._slot = self._deadlines.add(self.deadline, future)
        future.add_done_callback(self._on_queued)
        return future

    def _start(self, *, reuse: bool) -> None:
        """The slot is this call's: an idle connection of the key if ``reuse``, else a new one."""
        connection = self._host.take_idle() if reuse else None
        if connection is not None:
            self._send_on(connection, reused=True)
            return
        connecting = self._waiting = asyncio.ensure_future(self._pool._connect(self.request, self.deadline))
        connecting.add_done_callback(self._on_connected)

    def _send_on(self, connection: WireConnection, *, reused: bool) -> None:
        self.connection = connection
        self._reused = reused
        request = self.request
        waiter = self._waiting = connection.exchange(request.data, request.method == "HEAD", self.limit)
        self._slot = self._deadlines.add(self.deadline, waiter)
        waiter.add_done_callback(self._on_answer)

    def _on_connected(self, connecting: asyncio.Future[WireConnection]) -> None:
        error = _error_of(connecting)
        if error is None and self.cancelled:  # connected just as it was cut
            connecting.result().close()
            error = asyncio.CancelledError()
        if error is not None:
            self._end(error)
        else:
            self._send_on(connecting.result(), reused=False)

    def _on_answer(self, waiter: asyncio.Future[Any]) -> None:
        self._deadlines.discard(self._slot, waiter)
        error = _error_of(waiter)
        if error is None:
            self._end(waiter.result())
        elif isinstance(error, StaleConnection):
            self._stale(retry=self._reused)
        else:
            self._end(error)

    def _on_queued(self, future: asyncio.Future[Any]) -> None:
        self._deadlines.discard(self._slot, future)
        error = _error_of(future)
        if isinstance(error, TimeoutError) and self.connection is None:  # still waiting for a connection
            error = NoConnectionInTime()
        if error is None:
            answer = future.result()
            if answer is not SLOT:  # a connection was handed over and carried the request
                self._end(answer)
            elif self.cancelled:
                self._end(asyncio.CancelledError())
            else:
                self._start(reuse=True)
        elif isinstance(error, StaleConnection):  # the connection handed over was stale
            self._stale(retry=True)
        else:
            self._end(error)  # cut (deadline, cancel) or failed: a slot handed over is passed on

    def _stale(self, *, retry: bool) -> None:
        """The server closed the connection before any byte of the answer: once more on a new
        connection if it had been idle (``retry``), else an error."""
        assert self.connection is not None
        self.connection.close()
        self.connection = None
        if self.cancelled:
            self._end(asyncio.CancelledError())
        elif retry:
            self._start(reuse=False)
        else:
            self._end(WireError("the server closed the connection without an answer"))

    def _end(self, outcome: Any) -> None:
        """Pass the slot and the connection on (if this call holds them), then reply."""
        if self.owned:
            self.owned = False
            self._pool._finish(self._host, self.connection)
        self.connection = None
        self._waiting = None
        self._reply(outcome)


class Volley:
    """Calls armed ahead of an instant (``WirePool.arm``) until ``WirePool.release`` lets them go;
    ``opens_at`` (loop time) is when they are expected to go, from which their timeouts count."""

    __slots__ = ("calls", "opens_at")

    def __init__(self, opens_at: float) -> None:
        self.opens_at = opens_at
        self.calls: list[Call] = []


def _error_of(future: asyncio.Future[Any]) -> BaseException | None:
    """The error that ended ``future`` (marked retrieved), or None if it has a result."""
    if future.cancelled():
        return asyncio.CancelledError()
    return future.exception()
