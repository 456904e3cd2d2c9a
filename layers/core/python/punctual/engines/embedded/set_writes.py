"""The worker's common cases as one SQL statement per few hundred runs: lease scheduled runs, finish
held attempts.

A burst of 20,000 runs spent most of the worker's SQLite time on two statements per run for each
step (a guarded UPDATE, then a SELECT of the row to parse it), each of which also hands the GIL to
whichever thread waits for it. Here a batch is one ``UPDATE ... FROM (VALUES ...) RETURNING``: the
guard (the run is scheduled; the lease is still ours) is in its WHERE clause, the change is the
same fields in the columns and in the document, and the rows it returns are the runs as written.

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

from punctual.engines.embedded.reads import chunks
from punctual.model import MAX_ATTEMPTS_KEPT, RUN_TRANSITIONS, Overlap, Run, RunState
from punctual.port import Finish, LeaseRequest

_CHUNK = 400  # rows per statement: 12 variables each, far below SQLite's bound

RunKey = tuple[str, int]

# rules.leased for a scheduled run: the same fields in the columns and in the document, guarded by the state.
_LEASE = (
    "WITH k(j, s, w, u, st) AS (VALUES {rows})"
    " UPDATE runs SET state = 'running', attempt = runs.attempt + 1, worker_id = k.w, lease_expires_at = k.u,"
    " deadline_at = k.u, next_attempt_at = NULL, doc = json_set(runs.doc, '$.state', 'running',"
    " '$.attempt', runs.attempt + 1, '$.worker_id', k.w, '$.lease_expires_at', k.u, '$.deadline_at', k.u,"
    " '$.started_at', coalesce(json_extract(runs.doc, '$.started_at'), k.st), '$.next_attempt_at', NULL)"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'scheduled'"
    " RETURNING runs.doc"
)

# rules.apply_change under rules.holds_lease, for a change that appends an attempt record to a
# log with room for it (a full log is trimmed by the per-run path). The SET expressions read the
# row as it was, so the columns and the document get the same values.
_FINISH = (
    "WITH k(j, s, w, a, st, dl, rec, fin, nxt, att, note, clr) AS (VALUES {rows})"
    " UPDATE runs SET state = k.st, deadline_at = k.dl, attempt = coalesce(k.att, runs.attempt),"
    " worker_id = CASE WHEN k.clr THEN NULL ELSE runs.worker_id END,"
    " lease_expires_at = CASE WHEN k.clr THEN NULL ELSE runs.lease_expires_at END,"
    " next_attempt_at = CASE WHEN k.st = 'retrying' THEN coalesce(k.nxt, runs.next_attempt_at) END,"
    " doc = json_set(runs.doc, '$.state', k.st, '$.deadline_at', k.dl, '$.attempt', coalesce(k.att, runs.attempt),"
    " '$.worker_id', CASE WHEN k.clr THEN NULL ELSE runs.worker_id END,"
    " '$.lease_expires_at', CASE WHEN k.clr THEN NULL ELSE runs.lease_expires_at END,"
    " '$.next_attempt_at', CASE WHEN k.st = 'retrying' THEN coalesce(k.nxt, runs.next_attempt_at) END,"
    " '$.finished_at', coalesce(k.fin, json_extract(runs.doc, '$.finished_at')),"
    " '$.note', coalesce(k.note, json_extract(runs.doc, '$.note')),"
    " '$.attempts[#]', json(k.rec))"
    " FROM k WHERE runs.job_id = k.j AND runs.scheduled_at = k.s AND runs.state = 'running'"
    " AND runs.worker_id = k.w AND runs.attempt = k.a"
    f" AND json_array_length(runs.doc, '$.attempts') < {MAX_ATTEMPTS_KEPT}"
    " RETURNING runs.doc"
)
_FINISHABLE = RUN_TRANSITIONS[RunState.RUNNING]


def lease_scheduled(
    conn: sqlite3.Connection, requests: Sequence[LeaseRequest], worker_id: str, now: int
) -> dict[RunKey, Run]:
    """Lease every still-scheduled run of the ``overlap=allow`` ``requests`` (the first request
    for a run; a repeat is left to the per-run path, which finds it held). Returns the leased runs
    by (job_id, scheduled_at), inside the caller's write transaction."""
    rows: dict[RunKey, tuple[Any, ...]] = {}
    for request in requests:
        key = (request.job_id, request.scheduled_at)
        if request.overlap is Overlap.ALLOW and key not in rows:
            start = max(now, request.starts_at or now)
            rows[key] = (request.job_id, request.scheduled_at, worker_id, start + request.lease_ms, start)
    return _returned(conn, _LEASE, 5, list(rows.values()))


def finish_held(conn: sqlite3.Connection, finishes: Sequence[Finish]) -> dict[RunKey, Run]:
    """Apply every finish that appends an attempt record, where its lease is still held and the
    log has room (the first finish for a run; a repeat is left to the per-run path). Returns the
    finished runs by (job_id, scheduled_at), inside the caller's write transaction."""
    rows: dict[RunKey, tuple[Any, ...]] = {}
    for finish in finishes:
        hold, change = finish.hold, finish.change
        key = (hold.job_id, hold.scheduled_at)
        if change.append is None or change.state not in _FINISHABLE or key in rows:
            continue
        rows[key] = (
            hold.job_id, hold.scheduled_at, hold.worker_id, hold.attempt, change.state.value, change.deadline_at,
            change.append.model_dump_json(), change.finished_at, change.next_attempt_at, change.attempt,
            change.note, 1 if change.clear_lease else 0,
        )  # fmt: skip
    return _returned(conn, _FINISH, 12, list(rows.values()))


def _returned(conn: sqlite3.Connection, template: str, width: int, rows: list[tuple[Any, ...]]) -> dict[RunKey, Run]:
    written: dict[RunKey, Run] = {}
    for chunk in chunks(rows, _CHUNK):
        marks = "(" + ", ".join("?" * width) + ")"
        params = [value for row in chunk for value in row]
        for (doc,) in conn.execute(template.format(rows=", ".join([marks] * len(chunk))), params):
            run = Run.model_validate_json(doc)
            written[(run.job_id, run.scheduled_at)] = run
    return written
