"""Contract: the dispatch queue and its dead-letter queue (delay, visibility, receive counts, redrive).

moto's SQS runs on real time, so the delay and visibility tests use 1-2 s on both engines
through ``elapse`` (ManualClock on embedded, a real sleep too on aws). Every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.port import Delivery, Dispatch, Engine, Queue
from punctual.resources import DISPATCH_QUEUE
from tests.contract.factories import drain

pytestmark = pytest.mark.contract

Elapse = Callable[[float], None]
JOB_ID = ids.new_job_id()


def _dispatch(i: int, clock: ManualClock, delay_s: int = 0) -> Dispatch:
    scheduled_at = clock.now_ms() + i * 60_000
    return Dispatch(ids.run_id_for(JOB_ID, scheduled_at), not_before=scheduled_at + 123, delay_s=delay_s)


def _run_ids(deliveries: list[Delivery]) -> list[str]:
    return sorted(d.run_id for d in deliveries)


def test_send_and_receive_round_trip(engine: Engine, clock: ManualClock) -> None:
    sent = [_dispatch(i, clock) for i in range(3)]
    engine.queue.send(sent)
    assert engine.queue.depth() == 3

    got = drain(engine.queue, visibility_s=60)

    assert sorted((d.run_id, d.not_before) for d in got) == sorted((s.run_id, s.not_before) for s in sent)
    assert all(d.receive_count == 1 for d in got)
    assert len({d.receipt for d in got}) == 3
    assert engine.queue.depth() == 3  # in flight still counts
    assert engine.dead_letters.depth() == 0


def test_send_nothing(engine: Engine) -> None:
    engine.queue.send([])
    assert engine.queue.depth() == 0
    assert engine.queue.receive(10, 60) == []


def test_many_messages_are_each_delivered_once(engine: Engine, clock: ManualClock) -> None:
    sent = [_dispatch(i, clock) for i in range(25)]  # more than one SQS batch
    engine.queue.send(sent)
    first = engine.queue.receive(25, 60)  # more than SQS returns at once: fewer is fine
    assert 1 <= len(first) <= 25
    got = first + drain(engine.queue, visibility_s=60)
    assert _run_ids(got) == sorted(s.run_id for s in sent)


def test_receive_respects_max_messages(engine: Engine, clock: ManualClock) -> None:
    engine.queue.send([_dispatch(i, clock) for i in range(5)])
    assert len(engine.queue.receive(2, 60)) <= 2
    assert len(engine.queue.receive(1, 60)) == 1


def test_delay_hides_a_message_until_its_time(engine: Engine, clock: ManualClock, elapse: Elapse) -> None:
    now_msg, later_msg = _dispatch(0, clock), _dispatch(1, clock, delay_s=2)
    engine.queue.send([now_msg, later_msg])
    assert engine.queue.depth() == 2  # delayed messages count

    assert _run_ids(drain(engine.queue)) == [now_msg.run_id]
    elapse(2.2)
    [late] = _receive_within(engine.queue, 2.0)
    assert (late.run_id, late.not_before, late.receive_count) == (later_msg.run_id, later_msg.not_before, 1)


def test_visibility_timeout_hides_a_received_message(engine: Engine, clock: ManualClock, elapse: Elapse) -> None:
    sent = _dispatch(0, clock)
    engine.queue.send([sent])
    [first] = engine.queue.receive(10, visibility_s=2)
    assert first.receive_count == 1
    assert engine.queue.receive(10, 60) == []  # in flight: hidden

    elapse(2.2)
    [second] = _receive_within(engine.queue, 2.0)
    assert second.run_id == sent.run_id
    assert second.not_before == sent.not_before
    assert second.receive_count == 2


def test_extend_hides_longer_and_zero_makes_visible_now(engine: Engine, clock: ManualClock, elapse: Elapse) -> None:
    engine.queue.send([_dispatch(0, clock)])
    [first] = engine.queue.receive(10, visibility_s=1)
    engine.queue.extend(first.receipt, 30)  # a heartbeat: still working on it
    elapse(1.2)
    assert engine.queue.receive(10, 60) == []

    engine.queue.extend(first.receipt, 0)  # give it back now
    [again] = _receive_within(engine.queue, 2.0)
    assert again.run_id == first.run_id
    assert again.receive_count == 2


def test_delete_removes_a_received_message(engine: Engine, clock: ManualClock) -> None:
    keep, done = _dispatch(0, clock), _dispatch(1, clock)
    engine.queue.send([keep, done])
    got = {d.run_id: d for d in engine.queue.receive(10, visibility_s=0)}  # visibility 0: visible again at once
    if len(got) < 2:  # SQS may return fewer than asked for
        got |= {d.run_id: d for d in engine.queue.receive(10, visibility_s=0)}
    assert set(got) == {keep.run_id, done.run_id}
    engine.queue.delete(got[done.run_id].receipt)

    again = _receive_within(engine.queue, 2.0)
    assert [d.run_id for d in again] == [keep.run_id]
    assert again[0].receive_count >= 2
    engine.queue.delete(again[0].receipt)
    assert engine.queue.depth() == 0
    assert engine.queue.receive(10, 0) == []


def test_receive_count_increments_per_delivery(engine: Engine, clock: ManualClock) -> None:
    engine.queue.send([_dispatch(0, clock)])
    counts = []
    for _ in range(4):
        [delivery] = engine.queue.receive(1, 30)
        counts.append(delivery.receive_count)
        engine.queue.extend(delivery.receipt, 0)
    assert counts == [1, 2, 3, 4]


def test_a_message_received_max_receives_times_is_dead_lettered(engine: Engine, clock: ManualClock) -> None:
    max_receives = DISPATCH_QUEUE.max_receives
    assert max_receives is not None
    poison, healthy = _dispatch(0, clock), _dispatch(1, clock)
    engine.queue.send([poison])

    for expected in range(1, max_receives + 1):
        [delivery] = engine.queue.receive(1, 30)  # a worker crashes on it every time
        assert (delivery.run_id, delivery.receive_count) == (poison.run_id, expected)
        engine.queue.extend(delivery.receipt, 0)

    engine.queue.send([healthy])
    rest = drain(engine.queue)  # the next receive moves the poison message instead of delivering it
    assert [d.run_id for d in rest] == [healthy.run_id]

    [dead] = _receive_within(engine.dead_letters, 2.0)
    assert dead.run_id == poison.run_id
    assert dead.not_before == poison.not_before
    engine.dead_letters.delete(dead.receipt)
    assert engine.dead_letters.receive(10, 0) == []


def test_the_dead_letter_queue_is_a_queue(engine: Engine, clock: ManualClock) -> None:
    sent = _dispatch(0, clock)
    engine.dead_letters.send([sent])
    [got] = engine.dead_letters.receive(10, 30)
    assert (got.run_id, got.not_before, got.receive_count) == (sent.run_id, sent.not_before, 1)
    assert engine.queue.depth() == 0


def test_long_poll_on_an_empty_queue_is_bounded(engine: Engine) -> None:
    started = time.monotonic()
    assert engine.queue.receive(10, 30, wait_s=1.0) == []
    assert time.monotonic() - started < 5.0


def test_queues_have_names(engine: Engine) -> None:
    assert engine.queue.name
    assert engine.dead_letters.name
    assert engine.queue.name != engine.dead_letters.name


def _receive_within(queue: Queue, seconds: float, visibility_s: int = 60) -> list[Delivery]:
    """Receive until something arrives, polling for at most ``seconds`` of real time."""
    deadline = time.monotonic() + seconds
    while True:
        got = queue.receive(10, visibility_s)
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(0.05)
