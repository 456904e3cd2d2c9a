"""Handing freed concurrency slots over: a worker's line of waiting runs (``punctual.tenancy.line``),
the gate's side of it (``punctual.tenancy.handoff``), the batched waits (``execution.leasing``), and
the embedded queue's order (priority, a woken message first: ``engines.embedded.queue``)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine, queue
from punctual.execution.holding import COPY_BACK_S
from punctual.execution.leasing import wait_all_for_limits
from punctual.execution.options import ExecutionOptions
from punctual.execution.worker import Worker
from punctual.model import Catchup, HttpTarget, Job, Overlap, Run
from punctual.model.timing import CRON_RULE, read_timing, timing_text
from punctual.port import Delivery, Dispatch, DueJob, SlotOutcome
from punctual.scheduling.planning import PlanOptions, plan
from punctual.tenancy.admission import Admission, Gate
from punctual.tenancy.handoff import Refusals
from punctual.tenancy.limits import LimitCache, Limits
from punctual.tenancy.line import Line

pytestmark = pytest.mark.unit

T = 1_800_000_000_000


def _join(line: Line, run_id: str, priority: int, at: int, *, until: int = T + 10_000, queue: str = "q") -> None:
    line.join("s", run_id, priority=priority, receipt=f"r-{run_id}", queue=queue, now=at, until=until)


def test_the_line_wakes_by_priority_then_by_how_long_each_waited() -> None:
    line = Line()
    _join(line, "old5", 5, T)
    _join(line, "new9", 9, T + 50)
    _join(line, "new5", 5, T + 10)
    _join(line, "old5", 5, T + 90)  # refused again: it keeps its place
    _join(line, "other", 9, T, queue="long")  # a message of another queue comes back on its own
    woken = [line.wake("s", "q", T + 100) for _ in range(4)]
    assert woken == ["r-new9", "r-old5", "r-new5", None]
    assert line.standing("new9") == (0, -9, T + 50)  # woken: first in the worker's lane
    assert line.standing("nobody") is None


def test_a_woken_run_holds_its_slot_until_it_is_back_or_its_grace_ended() -> None:
    line = Line()
    _join(line, "a", 5, T)
    _join(line, "b", 5, T + 10)
    line.wake("s", "q", T + 100)  # a is woken for a freed slot
    assert line.woken_ahead("s", "b", 5, T + 200) == 1  # b (and any fresh run) takes only a slot beyond it
    assert line.woken_ahead("s", "fresh9", 9, T + 200) == 0  # a higher priority is ahead of it
    assert line.woken_ahead("s", "a", 5, T + 200) == 0
    assert line.woken_ahead("s", "b", 5, T + 1_101) == 0  # a never came back
    assert line.leave("s", "b") is None  # a of priority 5 still waits
    assert line.leave("s", "a") == 5  # the last of priority 5: its mark may go
    assert len(line) == 0


def test_places_of_runs_that_never_come_back_lapse() -> None:
    line = Line()
    _join(line, "gone9", 9, T, until=T + 3_000)
    _join(line, "five", 5, T, until=T + 9_000)
    assert line.waiting_above("s", 5, T + 2_000)
    assert not line.waiting_above("s", 5, T + 3_001)
    assert line.wake("s", "q", T + 3_001) == "r-five"


class _Store:
    """The slot calls of a Store (one scope, ``limit`` slots), recording them."""

    def __init__(self, limit: int) -> None:
        self.limit, self.holders, self.marks, self.calls = limit, set(), {}, []  # type: ignore[var-annotated]

    def get_tenant(self, owner: str) -> None:
        return None

    def take_slot(self, scope: str, run_id: str, limit: int, now: int, *, priority: int | None = None) -> SlotOutcome:
        self.calls.append(("take", run_id))
        if run_id in self.holders:
            return SlotOutcome.ALREADY_HELD
        if len(self.holders) >= limit:
            return SlotOutcome.FULL
        if any(p > (priority or 5) and until >= now for p, until in self.marks.items()):
            return SlotOutcome.YIELDED
        self.holders.add(run_id)
        return SlotOutcome.TAKEN

    def release_slot(self, scope: str, run_id: str) -> bool:
        if run_id not in self.holders:
            return False
        self.holders.discard(run_id)
        return True

    def slot_holders(self, scope: str) -> dict[str, int]:
        self.calls.append(("holders", scope))
        return dict.fromkeys(self.holders, T)

    def mark_slot_wait(self, scope: str, priority: int, until: int) -> None:
        self.marks[priority] = max(self.marks.get(priority, 0), until)

    def clear_slot_wait(self, scope: str, priority: int, until: int) -> bool:
        self.calls.append(("clear", priority))
        return self.marks.get(priority) == until and self.marks.pop(priority) is not None


def _gate(store: _Store, clock: ManualClock) -> Gate:
    limits = LimitCache(store, Limits(max_concurrency=store.limit), clock)  # type: ignore[arg-type]
    return Gate(store, limits, clock, rng=random.Random(3))  # type: ignore[arg-type]


def _wait(gate: Gate, admission: Admission) -> None:
    assert not admission.admitted
    gate.line_up(admission, f"receipt-{admission.run_id}", "q")


def test_a_freed_slot_goes_to_the_first_in_line_and_the_mark_ends_with_the_last_urgent_run() -> None:
    clock, store = ManualClock(T), _Store(limit=1)
    gate = _gate(store, clock)
    urgent, routine = Job.model_construct(priority=9, limits=[]), Job.model_construct(priority=5, limits=[])
    assert gate.admit("alice", "running", T, job=routine).admitted
    _wait(gate, gate.admit("alice", "low", T, job=routine))
    _wait(gate, gate.admit("alice", "high", T + 5, job=urgent))  # refused later, but of higher priority
    assert 9 in store.marks
    # When the running run finishes here, its slot is handed to the urgent run, not to the older one
    gate.release("alice", "running")
    assert gate.take_wakes("q", T + 10) == ["receipt-high"]
    assert not gate.admit("alice", "fresh", T + 20, job=routine).admitted  # kept for the woken run
    assert gate.admit("alice", "high", T + 30, job=urgent).admitted
    assert 9 not in store.marks and ("clear", 9) in store.calls  # routine runs need not wait the mark out
    gate.release("alice", "high")
    assert gate.take_wakes("q", T + 40) == ["receipt-low"]
    assert gate.take_wakes("q", T + 40) == []


def test_a_batch_asks_the_store_once_for_runs_it_would_refuse_but_a_slot_holder_keeps_its_slot() -> None:
    clock, store = ManualClock(T), _Store(limit=2)
    gate = _gate(store, clock)
    job = Job.model_construct(priority=5, limits=[])
    store.holders.update({"taken-over", "busy"})  # "taken-over" is back after its worker died
    seen = Refusals()
    outcomes = [gate.admit("alice", run, T, job=job, seen=seen) for run in ("knock1", "knock2", "taken-over", "knock3")]
    assert [a.admitted for a in outcomes] == [False, False, True, False]
    assert outcomes[2].slot is SlotOutcome.ALREADY_HELD
    assert [c for c in store.calls if c[0] == "take"] == [("take", "knock1"), ("take", "taken-over")]
    assert store.calls.count(("holders", "alice")) == 1


class _Runs:
    """The run reads and writes, and the queue calls, of a batch of waits."""

    def __init__(self, runs: dict[tuple[str, int], Run]) -> None:
        self.runs, self.calls, self.reads = runs, [], 0  # type: ignore[var-annotated]

    def get_run(self, job_id: str, scheduled_at: int) -> Run:
        self.reads += 1
        return self.runs[(job_id, scheduled_at)]

    def transition_runs(self, changes: Any) -> list[Run | None]:
        self.calls.append(("transition_runs", len(changes)))
        return [None] * len(changes)

    def extend_many(self, receipts: Any, visibility_s: int) -> None:
        self.calls.append(("extend_many", len(receipts), visibility_s))

    def send(self, dispatches: Any) -> None:
        self.calls.append(("send", [d.priority for d in dispatches]))

    def delete_many(self, receipts: Any) -> None:
        self.calls.append(("delete_many", len(receipts)))


def test_a_batch_of_waits_is_a_few_requests_and_a_resend_keeps_its_priority() -> None:
    clock = ManualClock(T)
    keys = [(f"job_{i:032x}", T) for i in range(4)]
    runs = {k: Run(job_id=k[0], scheduled_at=T, owner="alice", deadline_at=T + 60_000, created_at=T) for k in keys}
    io = _Runs(runs)
    refused = [
        (
            Delivery(ids.run_id_for(*k), T, f"r{i}", 10 if i == 3 else 2, {"priority": "9"}),
            Admission("alice", ids.run_id_for(*k), False, (), T + 700, "max_concurrency 1 reached"),
        )
        for i, k in enumerate(keys)
    ]
    hidden = wait_all_for_limits(io, io, clock, refused, options=ExecutionOptions())  # type: ignore[arg-type]
    assert [d.receipt for d, _ in hidden] == ["r0", "r1", "r2"]  # the fourth was received too often: re-sent
    assert io.reads == 4
    assert io.calls == [
        ("transition_runs", 4),  # their notes, once
        ("extend_many", 3, 1),
        ("send", [9]),
        ("delete_many", 1),
    ]


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=4, clock=ManualClock(T))
    yield engine
    engine.close()


def test_an_owners_messages_go_out_highest_priority_first_and_a_woken_one_first_of_its_priority(engine: Any) -> None:
    rid = [ids.run_id_for(f"job_{i:032x}", T) for i in range(9)]
    engine.queue.send([Dispatch(r, T, group="alice") for r in rid[:4]])  # as messages from before v14 read
    engine.queue.send([Dispatch(r, T, group="alice", priority=9) for r in rid[4:6]])
    engine.queue.send([Dispatch(rid[6], T, group="alice", priority=0), Dispatch(rid[7], T, group="bob")])
    first = engine.queue.receive(4, 30)
    # within alice's share the urgent ones first, then the oldest; bob keeps his turn
    assert [d.run_id for d in first if d.extra["group"] == "alice"] == [rid[4], rid[5], rid[0]]
    assert rid[7] in {d.run_id for d in first}
    assert {d.extra.get("priority") for d in first if d.run_id in rid[4:6]} == {"9"}
    hidden = next(d for d in first if d.run_id == rid[0])
    engine.queue.extend(hidden.receipt, 30)
    engine.queue.wake([hidden.receipt])  # handed a freed slot: ahead of alice's other priority-5 messages
    rest = engine.queue.receive(10, 30)
    assert [d.run_id for d in rest] == [rid[0], rid[1], rid[2], rid[3], rid[6]]
    with pytest.raises(ValueError, match="priority"):
        engine.queue.send([Dispatch(rid[8], T, priority=10)])
    # the hand-out reads the one queue index in its order: one seek per priority, no sort
    sql = queue._GROUP_VISIBLE.split("FROM (", 1)[1][:-1]
    found = " ".join(r[3] for r in engine._db.connection().execute(f"EXPLAIN QUERY PLAN {sql}", ("q", "a", T, 5)))
    assert "pri=? AND visible_at<?" in found and "TEMP B-TREE" not in found


def test_a_jobs_first_message_carries_its_priority_from_the_due_index() -> None:
    assert timing_text(CRON_RULE) is None and timing_text(CRON_RULE, priority=9) == "p=9"
    assert read_timing("p=9").priority == 9 and read_timing(None).priority == 5
    job = Job(
        id="job_" + "b" * 32, owner="alice", name="n", schedule="* * * * *", target=HttpTarget(url="https://e.x/h"),
        priority=9, created_at=T, updated_at=T, next_run_at=T,
    )  # fmt: skip
    assert read_timing(job.timing_text()).priority == 9
    due = DueJob(job.id, "alice", T, "* * * * *", "UTC", 0, Overlap.ALLOW, Catchup.LATEST, 0, None, 0, priority=9)
    assert [d.priority for d in plan(due, T - 2_000, PlanOptions()).dispatches] == [9]


def test_a_copy_of_a_message_the_worker_is_starting_comes_back_after_a_second(engine: Any) -> None:
    # Given two messages of one run received by one worker (a waiting run re-sent fresh while its
    # worker was still leasing the batch it came in: the first message is gone, the copy is all it has)
    run_id = ids.run_id_for("job_" + "c" * 32, T)
    engine.queue.send([Dispatch(run_id, T), Dispatch(run_id, T)])
    first, copy = engine.queue.receive(2, 60)
    worker = Worker(engine, ManualClock(T), worker_id="w")

    async def claim() -> None:
        async with worker.session():
            state = worker._require_state()
            state.in_flight += 2  # as _submit counts them
            futures = {d.receipt: state.loop.create_future() for d in (first, copy)}
            assert worker._claim_starts([first], futures) == [first]
            # When the copy is claimed while the first is being started
            assert worker._claim_starts([copy], futures) == []
            await asyncio.gather(*list(state.tasks))
            worker._resolve(futures[first.receipt], RuntimeError("not started here"))

    asyncio.run(claim())
    # Then the copy waits a second, not its whole visibility timeout (60 s)
    visible = dict(engine._db.connection().execute("SELECT receipt, visible_at FROM queue"))
    assert visible[copy.receipt] == T + COPY_BACK_S * 1000
    assert visible[first.receipt] == T + 60_000
