"""A ``wire`` pool key's slots grow while its answers are slow, and only then (``wire_host``).

The rules are checked on :class:`Host` with a hand-moved clock; the pool's growth end to end
against a server that never answers (``RawServer`` from ``test_async_targets``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from punctual.execution.targets import wire_host
from punctual.execution.targets.wire import WirePool
from punctual.execution.targets.wire_host import CHECK_S, SLOT, SLOW_S, Host
from tests.unit.test_async_targets import raw
from tests.unit.test_wire_pool import gathered, request, status_or_type
from tests.unit.wire_parsers import wire_parser

pytestmark = pytest.mark.unit
__all__ = ["raw", "wire_parser"]  # the fixtures (wire_parser: each test with both answer parsers)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    moved = Clock()
    monkeypatch.setattr(wire_host.time, "monotonic", moved)
    yield moved


def busy(loop: asyncio.AbstractEventLoop, start: int, ceiling: int, waiting: int) -> tuple[Host, list[Any]]:
    """A key whose ``start`` slots are all held by calls in flight, and ``waiting`` calls queued on
    it (what WirePool.call does when no slot is free)."""
    host = Host(start, ceiling)
    host.free = 0
    calls = [SimpleNamespace(future=loop.create_future(), owned=False) for _ in range(waiting)]
    host.queue.extend(calls)  # type: ignore[arg-type]
    host.watch(loop)
    return host, calls


def on_a_loop(body: Any) -> Any:
    async def go() -> Any:
        return body(asyncio.get_running_loop())

    return asyncio.run(go())


def test_no_answer_for_slow_s_gives_every_queued_call_a_slot_up_to_the_ceiling(clock: Clock) -> None:
    # A target that holds every request it was sent (a 200 ms webhook in a first minute): doubling
    # would leave most of the queue waiting one more look per doubling
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, calls = busy(loop, 2, 6, waiting=5)
        assert host.check is not None
        clock.now += SLOW_S + 0.001
        host._look(loop, clock.now)  # on time, and nothing answered since the calls queued
        assert host.limit == 6 and host.free == 0
        assert [c.owned for c in calls] == [True, True, True, True, False]
        assert [c.future.done() and c.future.result() is SLOT for c in calls[:4]] == [True] * 4
        assert list(host.queue) == calls[4:] and host.check is None  # at the ceiling: no more looks

    on_a_loop(body)


def test_a_silent_key_with_room_takes_only_the_slots_its_queue_needs(clock: Clock) -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, calls = busy(loop, 2, 64, waiting=3)
        clock.now += SLOW_S + 0.001
        host._look(loop, clock.now)
        assert (host.limit, host.free) == (5, 0) and all(c.owned for c in calls) and not host.queue
        assert host.check is None  # nothing queued: nothing to look at

    on_a_loop(body)


def test_answers_that_come_but_slowly_double_the_slots(clock: Clock) -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, calls = busy(loop, 2, 64, waiting=5)
        clock.now += CHECK_S
        host.answered(clock.now - SLOW_S - 0.001)  # an answer came just now, after SLOW_S
        host._look(loop, clock.now)
        assert host.limit == 4 and [c.owned for c in calls] == [True, True, False, False, False]
        assert host.check is not None
        host.check.cancel()

    on_a_loop(body)


def test_quick_answers_keep_the_slots(clock: Clock) -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, _ = busy(loop, 2, 8, waiting=3)
        for _ in range(3):  # a target that answers within a few ms while the calls queue
            clock.now += CHECK_S / 3
            host.answered(clock.now - 0.002)
            clock.now += CHECK_S / 3
            host.answered(clock.now - 0.002)
            clock.now += CHECK_S / 3
            host._look(loop, clock.now)
        assert host.limit == 2 and len(host.queue) == 3
        assert host.check is not None
        host.check.cancel()

    on_a_loop(body)


def test_a_slow_last_answer_grows_the_key_up_to_its_ceiling(clock: Clock) -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, _ = busy(loop, 2, 5, waiting=10)
        limits = []
        for _ in range(3):
            clock.now += CHECK_S
            host.answered(clock.now - SLOW_S - 0.001)  # answers keep coming, each as slow as SLOW_S
            host._look(loop, clock.now)
            limits.append(host.limit)
        assert limits == [4, 5, 5]  # doubled, then capped at the ceiling
        assert host.check is None  # at the ceiling nothing is looked at any more

    on_a_loop(body)


def test_a_check_that_runs_late_does_not_grow_the_key(clock: Clock) -> None:
    # The loop was busy (starting thousands of calls): the answers waited on it, not on the target.
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, _ = busy(loop, 2, 8, waiting=3)
        due = clock.now + CHECK_S
        clock.now += 4 * SLOW_S
        host._look(loop, due)
        assert host.limit == 2 and host.check is not None
        host.check.cancel()

    on_a_loop(body)


def test_calls_cut_while_queued_get_no_slot_and_the_slot_stays_free(clock: Clock) -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, calls = busy(loop, 2, 4, waiting=2)
        calls[0].future.cancel()
        clock.now += SLOW_S + 0.001
        host._look(loop, clock.now)
        assert host.limit == 4 and host.free == 1 and calls[1].owned and not calls[0].owned
        assert not host.queue

    on_a_loop(body)


def test_a_key_never_starts_above_its_ceiling_and_is_unused_only_with_every_slot_free() -> None:
    host = Host(256, 3)
    assert host.limit == host.free == 3 and host.unused()
    host.free -= 1
    assert not host.unused()


def test_the_pool_opens_more_connections_while_no_answer_comes(raw: Any) -> None:
    # Given a target that never answers, a key that starts with 2 connections and may use 8
    srv = raw([b"HANG"] * 8)
    pool = WirePool(start_per_key=2, max_per_key=8)
    # When 8 calls are made at once
    answers = gathered(pool, srv.port, [1.5] * 8)
    # Then the queued ones got connections of their own once nothing answered for SLOW_S
    assert status_or_type(answers) == ["TimeoutError"] * 8
    assert srv.connections == 8


def test_the_pool_never_opens_more_than_its_ceiling(raw: Any) -> None:
    srv = raw([b"HANG"] * 6)
    answers = gathered(WirePool(start_per_key=2, max_per_key=2), srv.port, [0.5] * 4)
    # the two written time out unanswered; the two that never got a connection say so
    assert status_or_type(answers) == ["TimeoutError"] * 2 + ["NoConnectionInTime"] * 2 and srv.connections == 2


def test_widen_gives_the_new_slots_to_the_queued_first_and_never_passes_the_ceiling() -> None:
    def body(loop: asyncio.AbstractEventLoop) -> None:
        host, calls = busy(loop, 2, 8, waiting=3)
        host.widen(20)  # asked past the ceiling: 8 slots, 3 to the queued calls, 3 free
        assert (host.limit, host.free) == (8, 3)
        assert [c.owned for c in calls] == [True, True, True] and not host.queue
        host.widen(4)  # never narrows
        assert (host.limit, host.free) == (8, 3)
        host.unwatch()

    on_a_loop(body)


def test_a_burst_warms_a_connection_per_call_up_to_the_ceiling_and_keeps_its_slots(raw: Any) -> None:
    # Given a key that starts with 2 slots and may grow to 8
    srv = raw([])
    pool = WirePool(start_per_key=2, max_idle_per_key=16, max_per_key=8)

    async def go() -> tuple[int, int, int, int, int]:
        # When a burst of 5 calls warms its connections, then of 15 (the instant's next receive)
        first = pool.warm(request(srv.port), 5, timeout_s=5)
        second = pool.warm(request(srv.port), 15, timeout_s=5)
        host = pool._hosts[request(srv.port).key]
        while host.warming:
            await asyncio.sleep(0.01)
        # Then one connection per call, up to the ceiling, and the slots are still what it starts with
        idle, limit = len(host.idle), host.limit
        again = pool.warm(request(srv.port), 10, timeout_s=5)  # all there: nothing more is opened
        pool.close()
        return first, second, idle, limit, again

    assert asyncio.run(go()) == (5, 3, 8, 2, 0)


def test_connections_warmed_for_a_burst_are_not_closed_as_idle_before_it(raw: Any) -> None:
    srv = raw([])
    pool = WirePool(start_per_key=2, max_idle_per_key=8, max_per_key=8, idle_s=60.0)

    async def go() -> tuple[int, list[bool]]:
        pool.warm(request(srv.port), 4, timeout_s=5)
        host = pool._hosts[request(srv.port).key]
        while host.warming:
            await asyncio.sleep(0.01)
        for connection in host.idle:  # opened for the last minute's burst and not used since
            connection.idle_since -= 61.0
        opened = pool.warm(request(srv.port), 4, timeout_s=5)  # the next burst counts on them
        pool._sweep()  # the burst's first call looks for idle connections to close
        kept = [connection.usable() for connection in host.idle]
        pool.close()
        return opened, kept

    assert asyncio.run(go()) == (0, [True] * 4)


def test_a_burst_opens_its_connections_a_few_at_a_time(raw: Any) -> None:
    # Given a pool that opens at most 2 connections of a key ahead at once
    srv = raw([])
    pool = WirePool(max_idle_per_key=16, max_per_key=16, warm_at_once=2)

    async def go() -> tuple[int, int, int, int]:
        # When a burst of 7 calls warms its connections
        opened = pool.warm(request(srv.port), 7, timeout_s=5)
        lanes = len(pool._warming)
        host = pool._hosts[request(srv.port).key]
        while host.warming:
            await asyncio.sleep(0.01)
        # Then 2 lanes opened all 7, one after another, and nothing is left warming
        idle = len(host.idle)
        pool.close()
        return opened, lanes, idle, host.warming

    assert asyncio.run(go()) == (7, 2, 7, 0)


def test_a_refused_warm_ends_every_lane_and_leaves_nothing_warming() -> None:
    import socket

    with socket.socket() as unused:  # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    pool = WirePool(max_idle_per_key=16, max_per_key=16, warm_at_once=2)

    async def go() -> tuple[int, int, int]:
        opened = pool.warm(request(port), 9, timeout_s=2)
        host = pool._hosts[request(port).key]
        for _ in range(100):  # bounded: until the lanes gave up
            if not pool._warming:
                break
            await asyncio.sleep(0.02)
        result = opened, host.warming, len(host.idle)
        pool.close()
        return result

    assert asyncio.run(go()) == (9, 0, 0)


def test_a_small_burst_after_a_big_one_counts_on_its_own_connections_only(raw: Any) -> None:
    # Found by the attack on 0222: a warm refreshed every idle connection, so a burst of one call a
    # minute kept a big burst's whole reserve open for good
    srv = raw([])
    pool = WirePool(start_per_key=2, max_idle_per_key=16, max_per_key=16, idle_s=60.0)

    async def go() -> int:
        pool.warm(request(srv.port), 6, timeout_s=5)  # the big burst's connections
        host = pool._hosts[request(srv.port).key]
        while host.warming:
            await asyncio.sleep(0.01)
        for connection in host.idle:  # unused since the big burst, a minute ago
            connection.idle_since -= 61.0
        assert pool.warm(request(srv.port), 1, timeout_s=5) == 0  # the next minute: a burst of one call
        pool._sweep()
        kept = len(host.idle)
        pool.close()
        return kept

    assert asyncio.run(go()) == 1


def test_the_connections_opened_ahead_stay_within_one_ceiling_across_every_key(raw: Any) -> None:
    # Found by the attack on 0222: a worker at 2,048 open files warmed 1,024 to each of 2 hosts and
    # its store could no longer open its database
    one, two = raw([]), raw([])
    pool = WirePool(start_per_key=2, max_idle_per_key=8, max_per_key=8)

    async def go() -> list[int]:
        opened = [pool.warm(request(one.port), 6, timeout_s=5), pool.warm(request(two.port), 6, timeout_s=5)]
        while any(host.warming for host in pool._hosts.values()):
            await asyncio.sleep(0.01)
        opened.append(pool.idle_connections())
        pool.close()
        return opened

    assert asyncio.run(go()) == [6, 2, 8]
