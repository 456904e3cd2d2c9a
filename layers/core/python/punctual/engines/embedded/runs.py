"""Run rows inside one SQLite transaction: the row codec, reading and writing a run, and the
lease, heartbeat and finish steps, each deciding with ``punctual.rules`` on the row it read.

Used by :class:`~punctual.engines.embedded.store.EmbeddedStore` and by the engine's
``finish_and_ack`` (finish and delete the message in one transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from punctual import ids, rules
from punctual.engines.embedded.set_writes import confirm_finished, finish_held, lease_scheduled
from punctual.errors import LeaseLost
from punctual.model import Run
from punctual.port import Beat, Finish, Hold, LeaseOutcome, LeaseRequest, LeaseResult, RunChange

_UPDATE_RUN = (
    "UPDATE runs SET owner = ?3, state = ?4, attempt = ?5, worker_id = ?6, lease_expires_at = ?7,"
    " next_attempt_at = ?8, deadline_at = ?9, created_at = ?10, doc = ?11, started_at = ?12, finished_at = ?13,"
    " expires_at = ?14 WHERE job_id = ?1 AND scheduled_at = ?2"
)
_SELECT_RUN = "SELECT doc FROM runs WHERE job_id = ? AND scheduled_at = ?"
_SELECT_EARLIER_RUNS = "SELECT doc FROM runs WHERE job_id = ? AND scheduled_at < ? ORDER BY scheduled_at DESC LIMIT ?"


def run_row(run: Run) -> tuple[Any, ...]:
    """The row of ``run``: the columns in the order ``_UPDATE_RUN`` and ``store._INSERT_RUN`` number them."""
    # str() of a StrEnum is its value; it also accepts a plain str in a model_construct'ed Run.
    return (
        run.job_id, run.scheduled_at, run.owner, str(run.state), run.attempt, run.worker_id,
        run.lease_expires_at, run.next_attempt_at, run.deadline_at, run.created_at, run.model_dump_json(),
        run.started_at, run.finished_at, run.expires_at,
    )  # fmt: skip


def load_run(conn: sqlite3.Connection, job_id: str, scheduled_at: int) -> Run | None:
    row = conn.execute(_SELECT_RUN, (job_id, scheduled_at)).fetchone()
    return None if row is None else Run.model_validate_json(row[0])


def earlier_runs(conn: sqlite3.Connection, job_id: str, scheduled_at: int) -> Iterator[Run]:
    """The job's runs scheduled before ``scheduled_at``, newest first, read lazily."""
    for (doc,) in conn.execute(_SELECT_EARLIER_RUNS, (job_id, scheduled_at, rules.OVERLAP_SCAN)):
        yield Run.model_validate_json(doc)


def save_run(conn: sqlite3.Connection, run: Run) -> None:
    conn.execute(_UPDATE_RUN, run_row(run))


def lease_all_in(
    conn: sqlite3.Connection, requests: Sequence[LeaseRequest], worker_id: str, now: int
) -> list[LeaseResult]:
    """Each lease inside the caller's write transaction (``Store.lease_run``'s rules): the overlap
    decision and the lease are atomic. The common case (a scheduled run, overlap allow) is one
    statement per few hundred leases (``set_writes.lease_scheduled``); the rest, one by one."""
    leased = lease_scheduled(conn, requests, worker_id, now)
    return [
        LeaseResult(LeaseOutcome.LEASED, run)
        if (run := leased.pop((request.job_id, request.scheduled_at), None)) is not None
        else _lease_by_rules(conn, request, worker_id, now)
        for request in requests
    ]


def lease_in(conn: sqlite3.Connection, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
    """:func:`lease_all_in` of one request."""
    return lease_all_in(conn, [request], worker_id, now)[0]


def _lease_by_rules(conn: sqlite3.Connection, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
    """A lease that is not the common case: the row is read and ``punctual.rules`` decide."""
    run = load_run(conn, request.job_id, request.scheduled_at)
    outcome = rules.lease_outcome(run, now, worker_id)
    lost = request.confirm and request.seen is not None and not rules.confirms(run, worker_id, request.seen.attempt)
    if lost and run is not None:  # a confirm of a reservation lost meanwhile: never a lease here
        return LeaseResult(outcome if outcome is not LeaseOutcome.LEASED else LeaseOutcome.HELD, run)
    if run is None or outcome is not LeaseOutcome.LEASED:
        return LeaseResult(outcome, run)
    withdrawal = rules.withdrawn(run, request.withdrawn, now)
    if withdrawal is not None:  # the job as read at the instant cancels the run: never called
        cancelled = rules.apply_change(run, withdrawal)
        save_run(conn, cancelled)
        return LeaseResult(LeaseOutcome.SKIPPED, cancelled)
    if rules.overlap_applies(run, request.overlap):
        blockers = rules.overlap_blockers(request.overlap, earlier_runs(conn, run.job_id, run.scheduled_at))
        action = rules.overlap_action(request.overlap, blockers)
        if action is rules.OverlapAction.SKIP:
            skipped = rules.apply_change(run, rules.overlap_skip(blockers[0], now))
            save_run(conn, skipped)
            return LeaseResult(LeaseOutcome.SKIPPED, skipped)
        for blocker in blockers:  # REPLACE (LEASE: none)
            save_run(conn, rules.apply_change(blocker, rules.overlap_replacement(run, now)))
    leased = rules.leased(run, worker_id, now, request.lease_ms)
    save_run(conn, leased)
    return LeaseResult(LeaseOutcome.LEASED, leased)


def finish_all_in(conn: sqlite3.Connection, finishes: Sequence[Finish]) -> list[Run | None]:
    """Each finish inside the caller's write transaction; None where the lease was lost (for a
    ``Finish.confirm``: the reservation). The common case is one statement per few hundred finishes
    (``set_writes.finish_held``, ``set_writes.confirm_finished``); the rest, one by one."""
    done = finish_held(conn, finishes)
    confirmed = confirm_finished(conn, finishes) if any(finish.confirm for finish in finishes) else {}
    results: list[Run | None] = []
    for finish in finishes:
        key = (finish.hold.job_id, finish.hold.scheduled_at)
        if finish.confirm:
            run = confirmed.pop(key, None)
            results.append(run if run is not None else confirmed_finish_in(conn, finish))
        else:
            run = done.pop(key, None)
            results.append(run if run is not None else held(finish_in, conn, finish.hold, finish.change))
    return results


def confirmed_finish_in(conn: sqlite3.Connection, finish: Finish) -> Run | None:
    """``Finish.confirm``: the confirm and the finish in one write, iff the run is still reserved by
    the hold's worker at the attempt before the hold's (``rules.confirms``, the confirm's guard);
    the run as written, or None (the reservation was lost: nothing is written)."""
    hold, leased = finish.hold, finish.leased
    if leased is None or leased.started_at is None or leased.lease_expires_at is None:
        raise ValueError("a confirmed finish needs the run as leased")
    run = load_run(conn, hold.job_id, hold.scheduled_at)
    if not rules.confirms(run, hold.worker_id, hold.attempt - 1):
        return None
    assert run is not None
    start = leased.started_at  # the attempt's start, as its confirm would have leased the stored run
    begun = rules.leased(run, hold.worker_id, start, leased.lease_expires_at - start)
    finished = rules.apply_change(begun, finish.change)
    save_run(conn, finished)
    return finished


def finish_in(conn: sqlite3.Connection, hold: Hold, change: RunChange) -> Run:
    finished = rules.apply_change(held_run(conn, hold.job_id, hold.scheduled_at, hold.worker_id, hold.attempt), change)
    save_run(conn, finished)
    return finished


def extend_in(conn: sqlite3.Connection, beat: Beat) -> Run:
    hold = beat.hold
    run = held_run(conn, hold.job_id, hold.scheduled_at, hold.worker_id, hold.attempt)
    until = beat.lease_expires_at
    extended = run.model_copy(update={"lease_expires_at": until, "deadline_at": until})
    save_run(conn, extended)
    return extended


def held(step: Callable[..., Run], conn: sqlite3.Connection, *args: Any) -> Run | None:
    """``step`` under a lease, or None if the lease was lost (a batch goes on past a lost lease)."""
    try:
        return step(conn, *args)
    except LeaseLost:
        return None


def held_run(conn: sqlite3.Connection, job_id: str, scheduled_at: int, worker_id: str, attempt: int) -> Run:
    """The run iff ``worker_id`` still holds its lease for ``attempt``; raises :class:`LeaseLost`."""
    run = load_run(conn, job_id, scheduled_at)
    if run is None or not rules.holds_lease(run, worker_id, attempt):
        run_id = ids.run_id_for(job_id, scheduled_at)
        raise LeaseLost(f"worker {worker_id} no longer holds run {run_id} (attempt {attempt})", field="run_id")
    return run
