"""The embedded :class:`~punctual.port.Store`: jobs, runs, shard leases and alerts in SQLite.

Every conditional operation is one ``BEGIN IMMEDIATE`` transaction that reads the row, decides
with ``punctual.rules`` and writes; no other connection can write in between, so the rule is
applied to exactly the state it read. Batched claim operations (``insert_runs``,
``advance_jobs``) run a whole batch in one transaction: that is what makes thousands of runs per
second possible (one commit per batch instead of one per row).

Row layout: a run row's columns and its ``doc`` (the whole Run as JSON) are always written
together from one Run. A job row keeps the fields the claim rewrites (status, next_run_at,
last_run_at, updated_at, version) only in columns and the rest of the Job in ``doc``, so an
advance binds five small values and never parses or re-serializes JSON; a read merges the two.

The run steps taken inside a transaction (lease, heartbeat, finish, the run row codec) are in
:mod:`.runs`; shard leases (:mod:`.shards`), batched reads, dependencies (and their decisions,
:mod:`.edges`), tenants, stats and run outcomes (:mod:`.outcomes`) are mixins.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from punctual import ids, rules
from punctual.clock import Clock
from punctual.engines.embedded import bulk
from punctual.engines.embedded.calendars import EmbeddedCalendars
from punctual.engines.embedded.callbacks import EmbeddedCallbacks
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.edges import EdgeDecisions
from punctual.engines.embedded.housekeeping import purge_records
from punctual.engines.embedded.outcomes import EmbeddedOutcomes, purge_notifications
from punctual.engines.embedded.reads import SELECT_JOB, due_job_from_row, job_from_row
from punctual.engines.embedded.runs import (
    extend_in,
    finish_all_in,
    finish_in,
    held,
    lease_all_in,
    lease_in,
    load_run,
    run_row,
    save_run,
)
from punctual.engines.embedded.schema import DUE_COLUMNS, OPEN_RUN_SQL, RUN_EXPIRY_SQL, TERMINAL_RUN_SQL
from punctual.engines.embedded.set_writes import reserve_scheduled
from punctual.engines.embedded.shards import EmbeddedShards
from punctual.engines.embedded.stats import EmbeddedStats
from punctual.engines.embedded.tenants import EmbeddedTenants
from punctual.engines.embedded.watch import EmbeddedWatch
from punctual.errors import ConcurrentModification, InvalidCursor, JobAlreadyExists, JobNotFound, RunNotFound
from punctual.model import Job, JobStatus, Run
from punctual.port import (
    Advance,
    Alert,
    Beat,
    DueJob,
    Finish,
    Hold,
    LeaseRequest,
    LeaseResult,
    Page,
    Reservation,
    RunChange,
    RunQuery,
    Store,
)

MAX_PAGE = 1_000  # largest page a listing returns, whatever limit asks for

_JOB_STATE = {"status", "next_run_at", "last_run_at", "updated_at", "version"}  # columns only, not in doc
_JOB_COLUMNS = (
    "job_id", "owner", "status", "due_shard", "next_run_at", "last_run_at", "created_at", "updated_at",
    "version", "schedule", "timezone", "jitter_s", "overlap", "catchup", "max_backfill", "timing", "calendar",
    "doc",
)  # fmt: skip
_JOB_VALUES = f"({', '.join(_JOB_COLUMNS)}) VALUES ({', '.join('?' * len(_JOB_COLUMNS))})"
_INSERT_JOB = f"INSERT INTO jobs {_JOB_VALUES} ON CONFLICT DO NOTHING"
_REPLACE_JOB = f"UPDATE jobs SET ({', '.join(_JOB_COLUMNS)}) = ({', '.join('?' * len(_JOB_COLUMNS))}) WHERE job_id = ?"
_SELECT_JOB = SELECT_JOB

# The due query names the partial index: INDEXED BY makes a plan that cannot use it an error
# instead of a silent table scan. The index covers every selected column.
_DUE = (
    f"SELECT {', '.join(DUE_COLUMNS)}, rowid FROM jobs INDEXED BY jobs_due"
    " WHERE due_shard = ?1 AND status = 'active' AND next_run_at <= ?2 {after}"
    " ORDER BY next_run_at, job_id LIMIT ?3"
)
_DUE_FIRST = _DUE.format(after="")
_DUE_AFTER = _DUE.format(after="AND (next_run_at, job_id) > (?4, ?5)")
# The seed's claim statement: zero rows changed means another scheduler (or an edit) moved the job.
_ADVANCE = (
    "UPDATE jobs SET next_run_at = ?1, last_run_at = ?2, updated_at = ?3, version = version + 1,"
    " status = CASE WHEN ?1 IS NULL THEN 'completed' ELSE 'active' END"
    " WHERE job_id = ?4 AND next_run_at = ?5 AND status = 'active'"
)
# The same statement at a known row: the due index stores each entry's rowid, so the advance
# that follows a due query goes straight to the row instead of first finding job_id in the
# primary-key index (at 10M jobs a random leaf of a ~450 MB index per claim, and the interior
# pages that evicts). The job_id condition stays: a stale position matches nothing (see
# advance_jobs).
_ADVANCE_AT = _ADVANCE + " AND rowid = ?6"
_MAX_POSITIONS = 100_000  # remembered due rows at most (a claim advances what it read at once)

_INSERT_RUN = (
    "INSERT INTO runs (job_id, scheduled_at, owner, state, attempt, worker_id, lease_expires_at, next_attempt_at,"
    " deadline_at, created_at, doc, started_at, finished_at, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


_PURGE_RUNS = (
    "DELETE FROM runs WHERE (job_id, scheduled_at) IN (SELECT job_id, scheduled_at FROM runs"
    f" WHERE {TERMINAL_RUN_SQL} AND {RUN_EXPIRY_SQL} < ? LIMIT ?)"
)
_PURGE_JOBS = (
    "DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs WHERE status = 'deleted' AND updated_at < ? LIMIT ?)"
)
_PAST_DEADLINE = (
    f"SELECT doc FROM runs INDEXED BY runs_open WHERE {OPEN_RUN_SQL}"
    " AND deadline_at < ? AND scheduled_at <= ? ORDER BY deadline_at LIMIT ?"
)


class EmbeddedStore(
    EmbeddedShards,
    EdgeDecisions,
    EmbeddedTenants,
    EmbeddedStats,
    EmbeddedOutcomes,
    EmbeddedWatch,
    EmbeddedCalendars,
    EmbeddedCallbacks,
    Store,
):
    """The Store port on one SQLite file (see the module docstring for the row layout)."""

    def __init__(self, db: Database, *, shards: int, clock: Clock) -> None:
        self.shards = shards
        self._db = db
        self._clock = clock
        # job_id -> rowid of due jobs just read (due_jobs), consumed by advance_jobs
        self._positions: dict[str, int] = {}

    # -- jobs --------------------------------------------------------------------------------

    def create_job(self, job: Job) -> None:
        with self._db.write() as conn:
            self._insert_job(conn, job)

    def get_job(self, job_id: str) -> Job:
        row = self._db.connection().execute(f"{_SELECT_JOB} WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(f"job {job_id} not found", field="job_id")
        return job_from_row(row)

    def list_jobs(
        self, owner: str, *, status: JobStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Job]:
        where: list[str] = ["owner = ?"]
        params: list[Any] = [owner]
        if status is None:
            where.append("status != 'deleted'")
        else:
            where.append("status = ?")
            params.append(str(status))
        if cursor is not None:
            position = _position("jobs", cursor, owner)
            where.append("(created_at, job_id) < (?, ?)")
            params += [_field(position, "created_at", int), _field(position, "job_id", str)]
        order = "ORDER BY created_at DESC, job_id DESC"
        rows, more = self._page(f"{_SELECT_JOB} WHERE {' AND '.join(where)} {order}", params, limit)
        jobs = [job_from_row(row) for row in rows]
        if not more:
            return Page(jobs)
        last = {"for": owner, "created_at": jobs[-1].created_at, "job_id": jobs[-1].id}
        return Page(jobs, ids.encode_cursor("jobs", last))

    def update_job(self, job: Job, expected_version: int) -> Job:
        with self._db.write() as conn:
            return self._replace_job(conn, job, expected_version)

    def bulk_load_jobs(self, jobs: Iterable[Job], batch: int = 200_000) -> int:
        """Insert many jobs fast (benchmarks, imports): ``batch`` jobs per transaction, indexes
        built after the load into an empty table (``punctual.engines.embedded.bulk``).

        Jobs whose id exists are skipped. Returns how many were inserted.
        """
        return bulk.load_rows(self._db, _INSERT_JOB, (self._job_row(job) for job in jobs), batch=batch)

    def bulk_load_copies(self, template: Job, copies: Iterable[tuple[str, str, int]], batch: int = 200_000) -> int:
        """Like :meth:`bulk_load_jobs` for copies of ``template`` that differ only in
        (job id, owner, next_run_at): prepared rows, no model per job. Returns how many were inserted."""
        rows = bulk.copies_of(self._job_row(template), copies, self.shards)
        return bulk.load_rows(self._db, _INSERT_JOB, rows, batch=batch)

    # -- claim ---------------------------------------------------------------------------------

    def due_jobs(self, shard: int, until: int, limit: int, after: DueJob | None = None) -> list[DueJob]:
        conn, limit = self._db.connection(), max(0, limit)  # a negative LIMIT means none to SQLite
        if after is None:
            rows = conn.execute(_DUE_FIRST, (shard, until, limit)).fetchall()
        else:
            rows = conn.execute(_DUE_AFTER, (shard, until, limit, after.next_run_at, after.job_id)).fetchall()
        if len(self._positions) + len(rows) > _MAX_POSITIONS:
            self._positions.clear()  # read and never advanced (a claim that failed): forget them
        self._positions.update((row[2], row[-1]) for row in rows)
        return [due_job_from_row(row[:-1]) for row in rows]

    def insert_runs(self, runs: Sequence[Run], *, window: bool = False) -> list[bool]:
        rows = [run_row(run) for run in runs]  # serialize before taking the write lock
        if not rows:
            return []
        with self._db.write() as conn:
            return [conn.execute(_INSERT_RUN, row).rowcount == 1 for row in rows]

    def advance_jobs(self, advances: Sequence[Advance]) -> list[bool]:
        """Advances in row order (the rows the due query just found, by rowid; the others after):
        page by page through the file instead of at random. A remembered position that matches
        nothing (the job was deleted and created again, or the file vacuumed) is retried by id."""
        positions = [self._positions.pop(a.job_id, None) for a in advances]
        rows = [(a.next_run_at, a.last_run_at, a.now, a.job_id, a.expected_next_run_at) for a in advances]
        if not rows:
            return []
        order = sorted(range(len(rows)), key=lambda i: (positions[i] is None, positions[i] or 0))
        done = [False] * len(rows)
        with self._db.write() as conn:
            for i in order:
                at = positions[i]
                changed = at is not None and conn.execute(_ADVANCE_AT, (*rows[i], at)).rowcount == 1
                done[i] = changed or conn.execute(_ADVANCE, rows[i]).rowcount == 1
        return done

    # -- runs ---------------------------------------------------------------------------------

    def get_run(self, job_id: str, scheduled_at: int) -> Run:
        run = load_run(self._db.connection(), job_id, scheduled_at)
        if run is None:
            raise RunNotFound(f"run {ids.run_id_for(job_id, scheduled_at)} not found", field="run_id")
        return run

    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]:
        where: list[str] = ["job_id = ?"]
        params: list[Any] = [job_id]
        if query.states:
            where.append(f"state IN ({', '.join('?' * len(query.states))})")
            params += sorted(str(state) for state in query.states)
        bounds: list[tuple[str, int | None]] = [("scheduled_at >= ?", query.since), ("scheduled_at <= ?", query.until)]
        if query.cursor is not None:
            position = _position("runs", query.cursor, job_id)
            bounds.append(("scheduled_at < ?", _field(position, "scheduled_at", int)))
        for clause, value in bounds:
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = f"SELECT doc FROM runs WHERE {' AND '.join(where)} ORDER BY scheduled_at DESC"
        rows, more = self._page(sql, params, query.limit)
        runs = [Run.model_validate_json(row[0]) for row in rows]
        if not more:
            return Page(runs)
        return Page(runs, ids.encode_cursor("runs", {"for": job_id, "scheduled_at": runs[-1].scheduled_at}))

    def lease_one(self, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
        with self._db.write() as conn:
            return lease_in(conn, request, worker_id, now)

    def heartbeat_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, lease_expires_at: int) -> Run:
        with self._db.write() as conn:
            return extend_in(conn, Beat(Hold(job_id, scheduled_at, worker_id, attempt), lease_expires_at))

    def finish_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, change: RunChange) -> Run:
        with self._db.write() as conn:
            return finish_in(conn, Hold(job_id, scheduled_at, worker_id, attempt), change)

    # Batches: one transaction for the whole batch, each item decided by the same code as a single call.

    def lease_runs(self, requests: Sequence[LeaseRequest], worker_id: str, now: int) -> list[LeaseResult]:
        if not requests:
            return []
        with self._db.write() as conn:
            return lease_all_in(conn, requests, worker_id, now)

    def reserve_runs(self, reservations: Sequence[Reservation], worker_id: str, now: int) -> list[Run | None]:
        if not reservations:
            return []
        with self._db.write() as conn:
            return reserve_scheduled(conn, reservations, worker_id, now)

    def heartbeat_runs(self, beats: Sequence[Beat]) -> list[bool]:
        if not beats:
            return []
        with self._db.write() as conn:
            return [held(extend_in, conn, beat) is not None for beat in beats]

    def finish_runs(self, finishes: Sequence[Finish]) -> list[Run | None]:
        if not finishes:
            return []
        with self._db.write() as conn:
            return finish_all_in(conn, finishes)

    def transition_run(self, current: Run, change: RunChange) -> Run:
        with self._db.write() as conn:
            stored = load_run(conn, current.job_id, current.scheduled_at)
            if stored is None or not rules.unchanged_since(stored, current):
                raise ConcurrentModification(f"run {current.run_id} changed since it was read", field="run_id")
            changed = rules.apply_change(stored, change)
            save_run(conn, changed)
        return changed

    def past_deadline_runs(self, now: int, scheduled_before: int, limit: int) -> list[Run]:
        rows = self._db.connection().execute(_PAST_DEADLINE, (now, scheduled_before, max(0, limit))).fetchall()
        return [Run.model_validate_json(row[0]) for row in rows]

    def purge_expired(self, now: int, deleted_before: int, limit: int) -> int:
        with self._db.write() as conn:
            runs = conn.execute(_PURGE_RUNS, (now // 1000, max(0, limit))).rowcount
            runs += purge_notifications(conn, now // 1000, max(0, limit - runs))
            jobs = conn.execute(_PURGE_JOBS, (deleted_before, max(0, limit - runs))).rowcount
            return runs + jobs + purge_records(conn, now, deleted_before, limit - runs - jobs)  # alerts, rates

    # -- alerts -------------------------------------------------------------------------------

    def record_alert(self, alert: Alert) -> bool:
        with self._db.write() as conn:
            return bool(
                conn.execute(
                    "INSERT INTO alerts (owner, run_id, job_id, created_at, reason) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    (alert.owner, alert.key, alert.job_id, alert.created_at, alert.reason),
                ).rowcount
            )

    def list_alerts(self, owner: str, limit: int = 50) -> list[Alert]:
        rows = self._db.connection().execute(
            "SELECT owner, run_id, job_id, created_at, reason FROM alerts WHERE owner = ?"
            " ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (owner, max(1, min(limit, MAX_PAGE))),
        )
        return [Alert.stored(*row) for row in rows]

    # -- helpers ------------------------------------------------------------------------------

    def _insert_job(self, conn: sqlite3.Connection, job: Job) -> None:
        """:meth:`create_job` inside the caller's write transaction."""
        if conn.execute(_INSERT_JOB, self._job_row(job)).rowcount == 0:
            raise JobAlreadyExists(f"job {job.id} already exists", field="id")

    def _replace_job(self, conn: sqlite3.Connection, job: Job, expected_version: int) -> Job:
        """:meth:`update_job` inside the caller's write transaction."""
        stored = job.model_copy(update={"version": expected_version + 1})
        row = self._job_row(stored)
        found = conn.execute("SELECT version FROM jobs WHERE job_id = ?", (job.id,)).fetchone()
        if found is None:
            raise JobNotFound(f"job {job.id} not found", field="job_id")
        if found[0] != expected_version:
            raise ConcurrentModification(
                f"job {job.id} is at version {found[0]}, not {expected_version}; read it again", field="version"
            )
        conn.execute(_REPLACE_JOB, (*row, job.id))
        return stored

    def _page(self, sql: str, params: list[Any], limit: int) -> tuple[list[Any], bool]:
        """At most ``limit`` (bounded to 1..MAX_PAGE) rows of ``sql``, and whether more follow."""
        limit = max(1, min(limit, MAX_PAGE))
        rows = self._db.connection().execute(f"{sql} LIMIT ?", (*params, limit + 1)).fetchall()
        return rows[:limit], len(rows) > limit

    def _job_row(self, job: Job) -> tuple[Any, ...]:
        """The jobs row for ``job``. Raises ValueError for a job the due index could not serve."""
        if not 0 <= job.due_shard < self.shards:
            raise ValueError(f"job {job.id} has due_shard {job.due_shard}; this store has {self.shards} shards")
        if job.status is JobStatus.ACTIVE and job.next_run_at is None and job.depends_on is None:
            raise ValueError(f"active job {job.id} needs next_run_at")
        doc = job.model_dump_json(exclude=_JOB_STATE)
        return (
            job.id, job.owner, str(job.status), job.due_shard, job.next_run_at, job.last_run_at, job.created_at,
            job.updated_at, job.version, job.schedule, job.timezone, job.jitter_s, str(job.overlap),
            str(job.catchup), job.max_backfill, job.timing_text(),
            None if job.calendar is None else job.calendar.name, doc,
        )  # fmt: skip


def _position(kind: str, cursor: str, scope: str) -> dict[str, Any]:
    """A decoded cursor of listing ``kind`` made for ``scope`` (the owner or job listed).

    A cursor belongs to the listing that made it: raises :class:`InvalidCursor` otherwise.
    """
    position = ids.decode_cursor(kind, cursor)
    if position.get("for") != scope:
        raise InvalidCursor("cursor is not valid for this listing; start again without it", field="cursor")
    return position


def _field(position: dict[str, Any], name: str, kind: type) -> Any:
    """One typed value of a decoded cursor position; raises :class:`InvalidCursor` if it is missing."""
    value = position.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidCursor("cursor is not valid for this listing; start again without it", field="cursor")
    return value
