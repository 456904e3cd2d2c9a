"""The worker's common cases as one SQL statement per few hundred runs: lease scheduled runs, finish
held attempts.

A burst of 20,000 runs spent most of the worker's SQLite time on two statements per run for each
step (a guarded UPDATE, then a SELECT of the row to parse it), each of which also hands the GIL to
whichever thread waits for it. Here a batch is one ``UPDATE ... FROM (VALUES ...) RETURNING``: the
guard (the run is scheduled; the lease is still ours) is in its WHERE clause, the change is the
same fields in the columns and in the document, and the rows it returns are the runs as written.

A finish whose caller holds the leased run (``Finish.leased``) is not parsed back: the finished run
is ``rules.apply_change`` of that copy (see ``Finish``), and a chunk of such finishes runs without
RETURNING when the guard accepts all of them (see ``_all_applied``).

Only the common case is decided here. Every run whose row the statement did not return goes
through the per-run path of ``engines.embedded.runs`` (which reads the row and decides with
``punctual.rules``), in the caller's same write transaction, so the outcome is the one the per-run
path would have given. The contract tests prove both paths write the same run
(tests/contract/test_prelease.py, tests/contract/test_batches.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from punctual import rules
from punctual.engines.embedded.reads import chunks, one_step, shape, values
from punctual.model import MAX_ATTEMPTS_KEPT, RUN_TRANSITIONS, Attempt, Overlap, Run, RunState
from punctual.model.stored import StoredReader
from punctual.port import Finish, LeaseRequest, Reservation, RunChange

_CHUNK = 400  # rows per statement: 13 variables each at most, far below SQLite's bound
_RUNS = StoredReader(Run)  # pydantic's parser without model_validate_json's wrapper (~1 us a run)
_ATTEMPT_JSON = Attempt.__pydantic_serializer__.to_json  # model_dump_json without its wrapper (~1 us a run)

RunKey = tuple[str, int]

# rules.leased for a scheduled run: the same fields in the columns and in the document, guarded by
# the state. started_at is kept once set (a run leased again after its worker vanished): the column
# holds the document's value (schema v9), so the document is not parsed to find it. A waiting run's
# note goes with the wait.
_LEASE_SET = (
    "WITH k(j, s, w, u, st) AS (VALUES {rows})"
    " UPDATE runs SET state = 'running', attempt = runs.attempt + 1, worker_id = k.w, lease_expires_at = k.u,"
    " deadline_at = k.u, next_attempt_at = NULL, started_at = coalesce(runs.started_at, k.st),"
    " doc = json_set(runs.doc, '$.state', 'running', '$.attempt', runs.attempt + 1, '$.worker_id', k.w,"
    " '$.lease_expires_at', k.u, '$.deadline_at', k.u, '$.started_at', coalesce(runs.started_at, k.st),"
    " '$.next_attempt_at', NULL, '$.note', NULL)"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'scheduled'"
    # not reserved by another worker for its instant (rules.reserved_by_another)
    " AND (runs.worker_id IS NULL OR runs.worker_id = k.w OR runs.lease_expires_at < k.st)"
)
# _LEASE_SET for runs the caller read while scheduled at attempt k.a (LeaseRequest.seen): leased
# only if still so, and then the result is rules.leased of that copy, not read back.
_LEASE_SEEN_SET = (
    "WITH k(j, s, w, u, st, a) AS (VALUES {rows})"
    + _LEASE_SET.split("AS (VALUES {rows})", 1)[1]
    + " AND runs.attempt = k.a"
)
# The confirm of a reservation (rules.confirms): reserved by this worker at the attempt seen.
_CONFIRM_SET = _LEASE_SEEN_SET + " AND runs.worker_id = k.w"
# rules.reserved: a scheduled run reserved for its instant (worker and lease end; nothing else).
_RESERVE = (
    "WITH k(j, s, w, u, a, n) AS (VALUES {rows})"
    " UPDATE runs SET worker_id = k.w, lease_expires_at = k.u,"
    " doc = json_set(runs.doc, '$.worker_id', k.w, '$.lease_expires_at', k.u)"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'scheduled'"
    " AND runs.attempt = k.a AND (runs.worker_id IS NULL OR runs.worker_id = k.w OR runs.lease_expires_at < k.n)"
    " RETURNING runs.job_id, runs.scheduled_at"
)
# The documents of the rows a chunk of _LEASE_SET leased (all of them), as one JSON array.
_LEASED_DOCS = (
    "WITH k(j, s) AS (VALUES {rows})"
    " SELECT '[' || group_concat(runs.doc, ',') || ']'"
    " FROM k JOIN runs ON runs.job_id = k.j AND runs.scheduled_at = k.s"
)

# rules.apply_change under rules.holds_lease, for a change that appends an attempt record to a
# log with room for it (a full log is trimmed by the per-run path). The SET expressions read the
# row as it was, so the columns and the document get the same values. A field the change leaves
# as it is (a note or finished_at of None) is not read back from the document: its json_set pair
# sets '$.state' to k.st a second time instead, which changes nothing (a read parses the whole
# document again). ``room`` is 1 when the caller's copy of the leased run shows room in the log
# (``Finish.leased``): the log is then not parsed to check it.
_FINISH_SET = (
    "WITH k(j, s, w, a, st, dl, rec, fin, nxt, att, note, clr, room) AS (VALUES {rows})"
    " UPDATE runs SET state = k.st, deadline_at = k.dl, attempt = coalesce(k.att, runs.attempt),"
    " worker_id = CASE WHEN k.clr THEN NULL ELSE runs.worker_id END,"
    " lease_expires_at = CASE WHEN k.clr THEN NULL ELSE runs.lease_expires_at END,"
    " next_attempt_at = CASE WHEN k.st = 'retrying' THEN coalesce(k.nxt, runs.next_attempt_at) END,"
    " finished_at = coalesce(k.fin, runs.finished_at),"
    " doc = json_set(runs.doc, '$.state', k.st, '$.deadline_at', k.dl, '$.attempt', coalesce(k.att, runs.attempt),"
    " '$.worker_id', CASE WHEN k.clr THEN NULL ELSE runs.worker_id END,"
    " '$.lease_expires_at', CASE WHEN k.clr THEN NULL ELSE runs.lease_expires_at END,"
    " '$.next_attempt_at', CASE WHEN k.st = 'retrying' THEN coalesce(k.nxt, runs.next_attempt_at) END,"
    " CASE WHEN k.fin IS NULL THEN '$.state' ELSE '$.finished_at' END, coalesce(k.fin, k.st),"
    " CASE WHEN k.note IS NULL THEN '$.state' ELSE '$.note' END, coalesce(k.note, k.st),"
    " '$.attempts[#]', json(k.rec))"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'running'"
    " AND runs.worker_id = k.w AND runs.attempt = k.a"
    f" AND (k.room OR json_array_length(runs.doc, '$.attempts') < {MAX_ATTEMPTS_KEPT})"
)
# The confirm merged into the finish (Finish.confirm): rules.apply_change of rules.leased under
# rules.confirms (scheduled, reserved by this worker at the attempt seen), for a change that clears
# the lease, appends a record to a log with room for it and leaves the attempt to the lease. The
# lease's fields the change does not overwrite: attempt + 1, started_at kept once set, no note.
_CONFIRMED_FINISH_SET = (
    "WITH k(j, s, w, a, st, dl, rec, fin, nxt, note, sa) AS (VALUES {rows})"
    " UPDATE runs SET state = k.st, deadline_at = k.dl, attempt = runs.attempt + 1,"
    " worker_id = NULL, lease_expires_at = NULL,"
    " next_attempt_at = CASE WHEN k.st = 'retrying' THEN k.nxt END,"
    " started_at = coalesce(runs.started_at, k.sa), finished_at = coalesce(k.fin, runs.finished_at),"
    " doc = json_set(runs.doc, '$.state', k.st, '$.deadline_at', k.dl, '$.attempt', runs.attempt + 1,"
    " '$.worker_id', NULL, '$.lease_expires_at', NULL,"
    " '$.next_attempt_at', CASE WHEN k.st = 'retrying' THEN k.nxt END,"
    " '$.started_at', coalesce(runs.started_at, k.sa),"
    " CASE WHEN k.fin IS NULL THEN '$.state' ELSE '$.finished_at' END, coalesce(k.fin, k.st),"
    " '$.note', k.note, '$.attempts[#]', json(k.rec))"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'scheduled'"
    " AND runs.worker_id = k.w AND runs.attempt = k.a"
    f" AND json_array_length(runs.doc, '$.attempts') < {MAX_ATTEMPTS_KEPT}"
)
_CONFIRMED_FINISH = _CONFIRMED_FINISH_SET + " RETURNING runs.job_id, runs.scheduled_at"
_FINISH = _FINISH_SET + " RETURNING runs.job_id, runs.scheduled_at, runs.doc"
_LEASE = _LEASE_SET + " RETURNING runs.doc"
# an accepted attempt moves its lease to the heartbeat deadline (RunChange.lease_until): the per-run path
_FINISHABLE = RUN_TRANSITIONS[RunState.RUNNING] - {RunState.ACCEPTED}


def lease_scheduled(
    conn: sqlite3.Connection, requests: Sequence[LeaseRequest], worker_id: str, now: int
) -> dict[RunKey, Run]:
    """Lease every still-scheduled run of the ``overlap=allow`` ``requests`` that nothing withdraws
    (the first request for a run; a repeat is left to the per-run path, which finds it held).
    Returns the leased runs by (job_id, scheduled_at), inside the caller's write transaction."""
    rows: dict[RunKey, tuple[Any, ...]] = {}
    seen: dict[RunKey, tuple[Run, int]] = {}  # read by the caller while scheduled: (the run, its lease)
    confirms: dict[RunKey, tuple[Run, int]] = {}  # reserved by this worker: confirmed, or left to the per-run path
    for request in requests:
        key = (request.job_id, request.scheduled_at)
        if request.overlap is Overlap.ALLOW and request.withdrawn is None and key not in rows and key not in seen:
            if request.seen is not None and request.seen.state is RunState.SCHEDULED:
                (confirms if request.confirm else seen)[key] = (request.seen, request.lease_ms)
            elif not request.confirm:
                rows[key] = (request.job_id, request.scheduled_at, worker_id, now + request.lease_ms, now)
    leased: dict[RunKey, Run] = {}
    for chunk in chunks(list(confirms.items()), _CHUNK):  # all-or-per-run: a confirm never falls to a lease
        params = [(*key, worker_id, now + lease_ms, now, run.attempt) for key, (run, lease_ms) in chunk]
        if _all_applied(conn, _CONFIRM_SET, 6, params):
            leased.update((key, rules.leased(run, worker_id, now, lease_ms)) for key, (run, lease_ms) in chunk)
    for chunk in chunks(list(seen.items()), _CHUNK):  # no read back: rules.leased of the copy read
        params = [(*key, worker_id, now + lease_ms, now, run.attempt) for key, (run, lease_ms) in chunk]
        if _all_applied(conn, _LEASE_SEEN_SET, 6, params):
            leased.update((key, rules.leased(run, worker_id, now, lease_ms)) for key, (run, lease_ms) in chunk)
        else:  # some moved on since they were read: leased (or not) as if unseen
            rows.update((key, (*key, worker_id, now + lease_ms, now)) for key, (_, lease_ms) in chunk)
    for chunk in chunks(list(rows.values()), _CHUNK):
        if _all_applied(conn, _LEASE_SET, 5, chunk):  # the common case: read back in one step
            keys, params = values([row[:2] for row in chunk], 2, shape(len(chunk), _CHUNK))
            runs = _RUNS.json_list(one_step(conn, _LEASED_DOCS.format(rows=keys), params) or "[]")
        else:  # some were not scheduled any more: RETURNING says which were leased
            runs = [_RUNS.json(doc) for (doc,) in _execute(conn, _LEASE, 5, chunk, padded=True)]
        leased.update(((run.job_id, run.scheduled_at), run) for run in runs)
    return leased


def reserve_scheduled(
    conn: sqlite3.Connection, reservations: Sequence[Reservation], worker_id: str, now: int
) -> list[Run | None]:
    """:meth:`Store.reserve_runs` inside the caller's write transaction: one statement per chunk,
    the reserved runs known by the keys it returns (``rules.reserved`` of each seen copy)."""
    result: list[Run | None] = [None] * len(reservations)
    index = {(r.seen.job_id, r.seen.scheduled_at): i for i, r in enumerate(reservations)}
    rows = [(*key, worker_id, reservations[i].until, reservations[i].seen.attempt, now) for key, i in index.items()]
    for chunk in chunks(rows, _CHUNK):
        for job_id, scheduled_at in _execute(conn, _RESERVE, 6, chunk, padded=True):
            i = index[(job_id, scheduled_at)]
            result[i] = rules.reserved(reservations[i].seen, worker_id, reservations[i].until)
    return result


def finish_held(conn: sqlite3.Connection, finishes: Sequence[Finish]) -> dict[RunKey, Run]:
    """Apply every finish that appends an attempt record, where its lease is still held and the
    log has room (the first finish for a run; a repeat is left to the per-run path). Returns the
    finished runs by (job_id, scheduled_at), inside the caller's write transaction. A confirmed
    finish (``Finish.confirm``) is :func:`confirm_finished`'s.

    A finish whose ``leased`` copy is usable (:func:`_usable`) returns ``rules.apply_change`` of it
    (see :class:`~punctual.port.Finish`), the others the row as written, parsed."""
    rows: dict[RunKey, tuple[Any, ...]] = {}
    known: dict[RunKey, tuple[Run, RunChange]] = {}
    for finish in finishes:
        hold, change = finish.hold, finish.change
        key = (hold.job_id, hold.scheduled_at)
        if change.append is None or change.state not in _FINISHABLE or key in rows or finish.confirm:
            continue
        leased = _usable(finish)
        if leased is not None:
            if len(leased.attempts) >= MAX_ATTEMPTS_KEPT:
                continue  # a full log: trimmed by the per-run path
            known[key] = (leased, change)
        rows[key] = (
            hold.job_id, hold.scheduled_at, hold.worker_id, hold.attempt, str(change.state), change.deadline_at,
            _ATTEMPT_JSON(change.append).decode(), change.finished_at, change.next_attempt_at, change.attempt,
            change.note, 1 if change.clear_lease else 0, 0 if leased is None else 1,
        )  # fmt: skip
    written: dict[RunKey, Run] = {}
    for chunk in chunks(list(rows.values()), _CHUNK):
        keys = [(row[0], row[1]) for row in chunk]
        if all(key in known for key in keys) and _all_applied(conn, _FINISH_SET, 13, chunk):
            written.update((key, rules.apply_change(*known[key])) for key in keys)
            continue
        for job_id, scheduled_at, doc in _execute(conn, _FINISH, 13, chunk, padded=True):
            key = (job_id, scheduled_at)
            copy = known.get(key)
            written[key] = Run.model_validate_json(doc) if copy is None else rules.apply_change(*copy)
    return written


def confirm_finished(conn: sqlite3.Connection, finishes: Sequence[Finish]) -> dict[RunKey, Run]:
    """Apply every confirmed finish (``Finish.confirm``) of the common case: one statement per chunk,
    each run written where ``rules.confirms`` holds and its log has room, the result
    ``rules.apply_change(finish.leased, change)`` (as a confirm's is ``rules.leased`` of the copy
    seen). Returns the finished runs by (job_id, scheduled_at); the others are left to the per-run
    path (``runs.confirmed_finish_in``), in the caller's write transaction."""
    rows: dict[RunKey, tuple[Any, ...]] = {}
    known: dict[RunKey, tuple[Run, RunChange]] = {}
    for finish in finishes:
        hold, change, leased = finish.hold, finish.change, finish.leased
        key = (hold.job_id, hold.scheduled_at)
        common = (
            finish.confirm
            and leased is not None
            and leased.started_at is not None
            and leased.attempt == hold.attempt
            and change.append is not None
            and change.state in _FINISHABLE
            and change.clear_lease
            and change.attempt is None
        )
        if not common or key in rows:
            continue
        assert leased is not None and change.append is not None
        known[key] = (leased, change)
        rows[key] = (
            hold.job_id, hold.scheduled_at, hold.worker_id, hold.attempt - 1, str(change.state), change.deadline_at,
            _ATTEMPT_JSON(change.append).decode(), change.finished_at, change.next_attempt_at, change.note,
            leased.started_at,
        )  # fmt: skip
    written: dict[RunKey, Run] = {}
    for chunk in chunks(list(rows.values()), _CHUNK):
        if _all_applied(conn, _CONFIRMED_FINISH_SET, 11, chunk):
            keys = [(row[0], row[1]) for row in chunk]
        else:  # some reservations were lost: RETURNING says which were written
            keys = list(_execute(conn, _CONFIRMED_FINISH, 11, chunk, padded=True))
        written.update(((job_id, at), rules.apply_change(*known[(job_id, at)])) for job_id, at in keys)
    return written


def _all_applied(conn: sqlite3.Connection, template: str, width: int, chunk: Sequence[tuple[Any, ...]]) -> bool:
    """Write every row of ``chunk`` with ``template`` (no RETURNING: one SQLite step for the chunk,
    not one per row), or change nothing and return False if its guard refused any (the caller
    then runs the statement with RETURNING to learn which)."""
    conn.execute("SAVEPOINT all_applied")
    before = conn.total_changes  # Cursor.rowcount is -1 for a statement that starts with WITH
    _execute(conn, template, width, chunk, padded=True)
    applied = conn.total_changes - before == len(chunk)  # one row per key (a key is in the chunk once)
    if not applied:
        conn.execute("ROLLBACK TO all_applied")
    conn.execute("RELEASE all_applied")
    return applied


def _usable(finish: Finish) -> Run | None:
    """``finish.leased`` if it is the run its hold leased and the change overwrites what the
    holder's heartbeats may have changed since (the lease and the deadline); else None."""
    run, hold = finish.leased, finish.hold
    usable = (
        run is not None
        and finish.change.clear_lease
        and run.state is RunState.RUNNING
        and run.job_id == hold.job_id
        and run.scheduled_at == hold.scheduled_at
        and run.worker_id == hold.worker_id
        and run.attempt == hold.attempt
    )
    return run if usable else None


def _execute(
    conn: sqlite3.Connection, template: str, width: int, chunk: Sequence[tuple[Any, ...]], *, padded: bool = False
) -> sqlite3.Cursor:
    """``template`` on the rows of ``chunk``; ``padded``: with rows of NULLs (which match no run)
    up to :func:`shape` rows."""
    rows, params = values(chunk, width, shape(len(chunk), _CHUNK) if padded else len(chunk))
    return conn.execute(template.format(rows=rows), params)
