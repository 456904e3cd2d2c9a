"""Bulk loading of the embedded engine: many jobs in few transactions, indexes built after the load.

For benchmarks and imports. A row inserted into a table with three secondary indexes writes a
page of each index; at ten million rows those pages no longer fit the cache and every insert
becomes random I/O. Building an index once, from the rows already in the table, sorts its keys
instead. So a load into an *empty* jobs table drops the table's secondary indexes, inserts in
transactions of ``batch`` rows (no per-row transaction, prepared rows), and recreates the indexes
at the end. A crash in between leaves the file without them: opening it recreates whatever index
is missing (``schema.repair_indexes``), so the worst case is a slow next start, never a broken file.
A load into a table that already holds jobs keeps the indexes (rebuilding them would cost more).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from punctual import ids
from punctual.engines.embedded import schema

BULK_CACHE_KIB = 262_144  # page cache of the loading connection (256 MiB) while the load runs


def load_rows(conn_factory: Any, insert_sql: str, rows: Iterable[Sequence[Any]], *, batch: int) -> int:
    """Insert ``rows`` into ``jobs`` with ``insert_sql``, ``batch`` rows per transaction.

    ``conn_factory`` is the engine's ``Database``: ``write()`` gives a connection inside a write
    transaction. Returns how many rows were inserted (existing ids are skipped by the SQL).
    """
    iterator = iter(rows)
    first = list(islice(iterator, batch))
    if not first:
        return 0
    with conn_factory.write() as conn:
        rebuild = _dropped_indexes(conn) if _is_empty(conn) else []
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        inserted = _insert(conn, insert_sql, first)
    try:
        while chunk := list(islice(iterator, batch)):
            with conn_factory.write() as conn:
                inserted += _insert(conn, insert_sql, chunk)
    finally:
        with conn_factory.write() as conn:
            for sql in rebuild:
                conn.execute(sql)
            conn.execute(f"PRAGMA cache_size = -{schema.CACHE_KIB}")  # back to the engine's setting
        # the load's pages copied from the WAL into the file now (and the WAL emptied), not by the
        # writes that follow it
        conn_factory.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return inserted


def copies_of(
    template_row: Sequence[Any], copies: Iterable[tuple[str, str, int]], shards: int
) -> Iterator[tuple[Any, ...]]:
    """Rows for copies of one job row, each with its own (job id, owner, next_run_at).

    The doc is the template's with ``id``, ``owner`` and ``due_shard`` replaced: one string join
    per row instead of a model and its JSON serialization (what dominates loading otherwise).
    """
    doc = json.loads(template_row[-1])
    varying = ("id", "owner", "due_shard")
    head = json.dumps({k: v for k, v in doc.items() if k not in varying}, separators=(",", ":"))[:-1]
    fixed_before, fixed_after = template_row[2:3], template_row[5:-1]  # status | last_run_at .. before doc
    for job_id, owner, next_run_at in copies:
        shard = ids.shard_of(job_id, shards)
        owner_json = json.dumps(owner)
        row_doc = f'{head},"id":"{job_id}","owner":{owner_json},"due_shard":{shard}}}'
        yield (job_id, owner, *fixed_before, shard, next_run_at, *fixed_after, row_doc)


def _insert(conn: sqlite3.Connection, sql: str, rows: list[Sequence[Any]]) -> int:
    before = conn.total_changes
    conn.executemany(sql, rows)
    return conn.total_changes - before


def _is_empty(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchone() is None


def _dropped_indexes(conn: sqlite3.Connection) -> list[str]:
    """Drop the jobs table's secondary indexes; return the statements that recreate them."""
    found = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in found:
        conn.execute(f'DROP INDEX "{name}"')
    return [sql for _, sql in found]
