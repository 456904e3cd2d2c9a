"""Fault injection for the randomized tier: proxies around an engine's store and queue that crash,
throttle, lose or duplicate at random, and per-component skewed clocks (see ``chaos``)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from punctual.clock import ManualClock
from punctual.errors import Throttled
from punctual.port import Delivery, Dispatch, Queue, Store

STORE_WRITES = frozenset(
    {
        "insert_runs",
        "advance_jobs",
        "lease_run",
        "heartbeat_run",
        "finish_run",
        "transition_run",
        "lease_runs",
        "heartbeat_runs",
        "finish_runs",
        "acquire_shard",
        "renew_shard",
        "release_shard",
        "record_alert",
        "callback_beat",  # the API's writes of a callback (tests.faults.sim_callbacks)
        "callback_complete",
    }
)
STORE_READS = frozenset(
    {
        "get_job",
        "get_run",
        "get_jobs",
        "get_runs",
        "job_marks",
        "due_jobs",
        "past_deadline_runs",
        "shard_leases",
        "get_calendar",  # the claim's read of a job's calendar (through the scheduler's cache)
    }
)
WRITE_FAULTS = ("crash_before", "crash_after", "throttle")
INTERLEAVE_WAIT_S = 0.01  # how long a decision waits for the request interleaved with it (then both race)


class Crash(BaseException):
    """The process was killed at this point (a BaseException: no handler of the code under test catches it)."""


@dataclass
class Faults:
    """Decides, at each step offered to it, whether to inject a fault, and counts what it injected."""

    rng: random.Random
    rate: float
    enabled: bool = True
    injected: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    paused: int = 0  # > 0 while a nested worker runs inside a target (its faults are its own turn's)

    def roll(self, site: str, menu: Sequence[str]) -> str | None:
        if not self.enabled or self.paused or self.rng.random() >= self.rate:
            return None
        return self.rng.choice(menu)

    def count(self, kind: str, site: str) -> None:
        self.injected[kind] += 1
        self.log.append(f"{kind}@{site}")

    @property
    def points(self) -> int:
        return sum(self.injected.values())


class FaultyStore:
    """The engine's store with faults around every write; reads pass through.

    :meth:`before_write_once` runs another request just before the next call of a named method
    (two requests interleaved: the second one's reads and writes land between the first one's
    reads and its write); ``observe`` sees every write's arguments and result."""

    def __init__(self, inner: Store, faults: Faults) -> None:
        self._inner, self._faults = inner, faults
        self._hook: tuple[frozenset[str], Callable[[], None]] | None = None
        self.observe: Callable[[str, tuple[Any, ...], Any], None] | None = None

    def before_write_once(self, names: frozenset[str], fn: Callable[[], None] | None) -> None:
        self._hook = None if fn is None else (names, fn)

    def decide_edges(self, owner: str, decide: Callable[[Any], Any]) -> Any:
        """The engine's atomic graph decision; with a hook set, the other request runs once this
        one has decided (its reads done, its write not): in a thread, as a second API process
        would, given ``INTERLEAVE_WAIT_S`` to finish before this one writes (on SQLite it waits
        for this one's write lock), then joined."""
        if self._hook is None or "decide_edges" not in self._hook[0]:
            return self._inner.decide_edges(owner, decide)
        fn, self._hook = self._hook[1], None
        other = threading.Thread(target=fn, daemon=True)

        def decided(reads: Any) -> Any:
            change = decide(reads)
            if not other.is_alive() and other.ident is None:
                other.start()
                other.join(INTERLEAVE_WAIT_S)
            return change

        try:
            return self._inner.decide_edges(owner, decided)
        finally:
            if other.ident is not None:
                other.join(10)

    def __getattr__(self, name: str) -> Any:
        if self._hook is not None and name in self._hook[0]:
            fn, self._hook = self._hook[1], None
            fn()
        attr = getattr(self._inner, name)
        if name in STORE_READS:
            return self._read(name, attr)
        if name not in STORE_WRITES:
            return attr

        def write(*args: Any, **kwargs: Any) -> Any:
            kind = self._faults.roll(name, WRITE_FAULTS)
            if kind is not None:
                self._faults.count(kind, name)
            if kind == "crash_before":
                raise Crash(f"before {name}")
            if kind == "throttle":
                raise Throttled(f"{name} throttled (injected)")
            result = attr(*args, **kwargs)
            if self.observe is not None:
                self.observe(name, args, result)
            if kind == "crash_after":
                raise Crash(f"after {name}")
            return result

        return write

    def _read(self, name: str, attr: Any) -> Any:
        def read(*args: Any, **kwargs: Any) -> Any:
            if self._faults.roll(name, ("throttle", "none")) == "throttle":  # reads: half the rate
                self._faults.count("throttle", name)
                raise Throttled(f"{name} throttled (injected)")
            return attr(*args, **kwargs)

        return read


class FaultyQueue:
    """The dispatch queue with crashes, lost and duplicated messages."""

    def __init__(self, inner: Queue, faults: Faults) -> None:
        self._inner, self._faults = inner, faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        out = list(dispatches)
        kind = self._faults.roll("send", (*WRITE_FAULTS, "lose", "duplicate")) if out else None
        if kind is not None:
            self._faults.count(kind, "send")
        if kind == "crash_before":
            raise Crash("before send")
        if kind == "throttle":
            raise Throttled("send throttled (injected)")
        if kind == "lose":
            out.pop(self._faults.rng.randrange(len(out)))  # "sent", never delivered
        elif kind == "duplicate":
            out.append(self._faults.rng.choice(out))
        self._inner.send(out)
        if kind == "crash_after":
            raise Crash("after send")

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        got = self._inner.receive(max_messages, visibility_s, 0.0)
        kind = self._faults.roll("receive", ("lose", "duplicate")) if got else None
        if kind is not None:
            self._faults.count(kind, "receive")
        if kind == "lose":
            lost = got.pop(self._faults.rng.randrange(len(got)))
            self._inner.delete(lost.receipt)
        elif kind == "duplicate":  # delivered twice (SQS is at-least-once): a second consumer gets it too
            copy = self._faults.rng.choice(got)
            if self._faults.rng.random() < 0.5:  # within this receive
                got.insert(self._faults.rng.randrange(len(got) + 1), copy)
            else:  # as a copy of its own (its own receipt): the next receive, by this worker or another
                self._inner.send([Dispatch(copy.run_id, not_before=copy.not_before)])
        return got

    def extend(self, receipt: str, visibility_s: int) -> None:
        kind = self._faults.roll("extend", ("crash_before", "crash_after", "lose"))
        if kind is not None:
            self._faults.count(kind, "extend")
        if kind == "crash_before":
            raise Crash("before extend")
        if kind == "lose":
            self._inner.delete(receipt)
            return
        self._inner.extend(receipt, visibility_s)
        if kind == "crash_after":
            raise Crash("after extend")

    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        kind = self._faults.roll("extend_many", ("crash_before", "crash_after", "lose")) if receipts else None
        if kind is not None:
            self._faults.count(kind, "extend_many")
        if kind == "crash_before":
            raise Crash("before extend_many")
        if kind == "lose":
            lost = self._faults.rng.choice(list(receipts))
            self._inner.delete(lost)
            receipts = [r for r in receipts if r != lost]
        self._inner.extend_many(receipts, visibility_s)
        if kind == "crash_after":
            raise Crash("after extend_many")

    def delete_many(self, receipts: Sequence[str]) -> None:
        kind = self._faults.roll("delete_many", ("crash_before", "crash_after")) if receipts else None
        if kind is not None:
            self._faults.count(kind, "delete_many")
        if kind == "crash_before":
            raise Crash("before delete_many")
        self._inner.delete_many(receipts)
        if kind == "crash_after":
            raise Crash("after delete_many")

    def delete(self, receipt: str) -> None:
        kind = self._faults.roll("delete", ("crash_before", "crash_after"))
        if kind is not None:
            self._faults.count(kind, "delete")
        if kind == "crash_before":
            raise Crash("before delete")
        self._inner.delete(receipt)
        if kind == "crash_after":
            raise Crash("after delete")


@dataclass
class FaultyEngine:
    store: Any
    queue: Any
    dead_letters: Queue
    shards: int


class SkewedClock:
    """A component's clock: the simulation's time plus its own offset. Sleeping lets time pass."""

    def __init__(self, base: ManualClock, offset_ms: int) -> None:
        self.base, self.offset_ms = base, offset_ms

    def now_ms(self) -> int:
        return self.base.now_ms() + self.offset_ms

    def sleep(self, seconds: float) -> None:
        self.base.advance(int(seconds * 1000))
