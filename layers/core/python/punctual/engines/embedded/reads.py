"""Reads of many jobs or runs in one query, and the job row decoder (the worker's hot path).

A job row keeps its state fields (status, next_run_at, last_run_at, updated_at, version) in
columns and the rest of the Job in ``doc`` (see ``engines.embedded.store``). Reading splices the
columns into the document in SQL (:data:`JOB_DOC`) and parses it once, in pydantic's JSON parser without the validators
that only refuse input (``model.stored.StoredReader``): the worker pays this for every job of a burst.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from punctual.engines.embedded.db import Database
from punctual.model import Catchup, Job, JobStatus, Overlap, Run
from punctual.model.stored import StoredReader
from punctual.model.timing import read_timing
from punctual.port import DueJob, JobMark

_CHUNK = 500  # ids per IN (...) list: far below SQLite's bound on variables
_RUNS = StoredReader(Run)
_DOC_CHUNK = 250  # documents per one-step read (a job is ~0.5 KB, at most a few tens of KB)


def _integer(column: str) -> str:
    """An INTEGER-or-NULL column as JSON text; anything else as a string, which the model's
    integer field refuses (a stored job's state is never anything else)."""
    return f"CASE typeof({column}) WHEN 'integer' THEN {column} WHEN 'null' THEN 'null' ELSE '\"not an integer\"' END"


# A job row as one JSON document: ``doc`` holds the job without its state fields (written with
# exclude=_JOB_STATE), which are spliced in from their columns, each as JSON (the status through
# json_quote, which the model's enum then checks): nothing a column holds can end the document early.
JOB_DOC = (
    "CASE WHEN doc = '{}' THEN '{' ELSE substr(doc, 1, length(doc) - 1) || ',' END"
    f" || '\"status\":' || json_quote(status) || ',\"next_run_at\":' || {_integer('next_run_at')}"
    f" || ',\"last_run_at\":' || {_integer('last_run_at')} || ',\"updated_at\":' || {_integer('updated_at')}"
    f" || ',\"version\":' || {_integer('version')} || '}}'"
)
SELECT_JOB = f"SELECT {JOB_DOC} FROM jobs"
_JOBS = StoredReader(Job)
_OVERLAP = {o.value: o for o in Overlap}
_CATCHUP = {c.value: c for c in Catchup}


def job_from_row(row: Sequence[Any]) -> Job:
    """The job of a :data:`SELECT_JOB` row (its one column is the job's document)."""
    return _JOBS.json(row[0])


def due_job_from_row(row: Sequence[Any]) -> DueJob:
    """The claim's view of a job from a row of the due index (``schema.DUE_COLUMNS``, in order)."""
    shard, next_run_at, job_id, owner, schedule, timezone, jitter_s, overlap, catchup, backfill, last_run, timing = row
    rules = read_timing(timing)
    return DueJob(
        job_id, owner, next_run_at, schedule, timezone, jitter_s, _OVERLAP[overlap], _CATCHUP[catchup],
        backfill, last_run, shard, dst=rules.dst, calendar=rules.calendar, run_at=rules.once, priority=rules.priority,
    )  # fmt: skip


def one_step(conn: sqlite3.Connection, query: str, params: Sequence[Any]) -> str | None:
    """The single value of a query that aggregates its rows into one text (``json_group_array``,
    ``group_concat``), or None when it found no row.

    The worker's batch reads return one row, not one per item: the sqlite3 module hands the GIL
    over around every step of a statement, and under a busy event loop in the same process each
    handover cost more than reading the row (measured: 2.6x the CPU per row of a 250-row read).
    """
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def json_rows(text: str | None) -> list[list[Any]]:
    """The rows of a ``json_group_array(json_array(...))`` value (:func:`one_step`)."""
    return [] if text is None else json.loads(text)


def chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    """``items`` in slices of at most ``size`` (one SQL statement each)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def shape(count: int, most: int) -> int:
    """How many rows a statement for ``count`` rows is written for: the next power of two, at most
    ``most``. A statement's text (and so its compiled form) differs with its number of rows, and
    each connection compiles every text it has not kept (milliseconds for a few hundred rows):
    with one text per size a burst compiled ~20 of them per connection, with these, a handful."""
    rows = 1
    while rows < count:
        rows *= 2
    return min(rows, max(most, count))


def values(chunk: Sequence[Sequence[Any]], width: int, rows: int) -> tuple[str, list[Any]]:
    """The ``VALUES`` rows of ``chunk`` (``width`` values each) as SQL text and its parameters,
    padded to ``rows`` rows (e.g. :func:`shape`) with rows of NULLs, which match no row."""
    marks = "(" + ", ".join("?" * width) + ")"
    params = [value for row in chunk for value in row]
    params.extend([None] * (width * (rows - len(chunk))))
    return ", ".join([marks] * rows), params


class BatchReads:
    """:meth:`Store.get_jobs` and :meth:`Store.job_marks` for the
    embedded store: one query per few hundred ids, on the reader connection (no write lock)."""

    _db: Database

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        jobs: dict[str, Job] = {}
        for text in self._jobs_by_id(f"'[' || group_concat({JOB_DOC}, ',') || ']'", job_ids, _DOC_CHUNK):
            jobs.update((job.id, job) for job in _JOBS.json_list(text))
        return jobs

    def get_runs(self, keys: Collection[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        runs: dict[tuple[str, int], Run] = {}
        conn = self._db.connection()
        for chunk in chunks(list(dict.fromkeys(keys)), _DOC_CHUNK):
            rows, params = values(chunk, 2, len(chunk))
            # a join, not "(job_id, scheduled_at) IN (VALUES ...)": SQLite plans that as a scan
            query = (
                f"WITH k(j, s) AS (VALUES {rows}) SELECT '[' || group_concat(r.doc, ',') || ']'"
                " FROM k JOIN runs r ON r.job_id = k.j AND r.scheduled_at = k.s"
            )
            text = one_step(conn, query, params)
            if text is not None:
                runs.update(((run.job_id, run.scheduled_at), run) for run in _RUNS.json_list(text))
        return runs

    def job_marks(self, job_ids: Collection[str]) -> dict[str, JobMark]:
        marks: dict[str, JobMark] = {}
        for text in self._jobs_by_id("json_group_array(json_array(job_id, status, version))", job_ids, _CHUNK):
            marks.update((job_id, JobMark(JobStatus(status), version)) for job_id, status, version in json_rows(text))
        return marks

    def _jobs_by_id(self, aggregate: str, job_ids: Collection[str], size: int) -> Iterator[str]:
        """``SELECT <aggregate> FROM jobs WHERE job_id IN (...)`` for every distinct id, ``size``
        ids per query, each in one step (:func:`one_step`); nothing for a chunk that found no job."""
        conn = self._db.connection()
        for chunk in chunks(list(dict.fromkeys(job_ids)), size):
            marks = ", ".join("?" * len(chunk))
            text = one_step(conn, f"SELECT {aggregate} FROM jobs WHERE job_id IN ({marks})", chunk)
            if text is not None:
                yield text
