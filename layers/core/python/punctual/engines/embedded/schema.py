"""The SQLite schema of the embedded engine: the tables of ``punctual.resources``, one file.

Tables mirror DESIGN.md §2:

- ``jobs``: one row per job. The scheduling state the claim rewrites (status, next_run_at,
  last_run_at, updated_at, version) lives only in columns; ``doc`` holds the rest of the job as
  JSON (see ``store.py``). ``jobs_due`` is the due index: partial on ``status = 'active'`` (the
  sparse GSI ``due``) and covering the ``DueJob`` projection (``resources.DUE_INDEX``), so
  ``due_jobs`` is one range scan of one index whatever the size of the table.
- ``runs``: keyed by (job_id, scheduled_at), which makes a second insert of the same run
  impossible. ``runs_open`` is the open-runs index (partial on open states), ordered by
  ``deadline_at`` so the reaper reads exactly the runs that are past their deadline.
- ``shard_leases``, ``alerts``: scheduler shard ownership and owner alerts (the ``leases`` table).
- ``queue``: the dispatch queue and its dead-letter queue (column ``queue``), with per-message ``visible_at``
  (delay and visibility timeout), ``receive_count``, the current ``receipt`` and ``pri`` (v15: ``.schema_v15``).
- ``dependents``, ``releases``: job dependencies (reverse edges and release records; v5).
- ``tenants``, ``tenant_slots``, ``tenant_starts``: per-owner limits, the concurrency slots held by
  running runs of limited owners, and each rate-limited owner's record of starts (``punctual.tenancy``).
- ``notifications``: what runs owe their jobs' ``notify`` webhooks, pending ones indexed by their next try (v11).
- ``calendars``: owners' calendars (``punctual.calendars``; v12); ``idempotency_keys`` (v13: ``.idempotency``).
- ``meta``: facts fixed when the file was created (the number of due shards).

Migrations: ``PRAGMA user_version`` is the schema version; :func:`migrate` applies the steps a
file has not seen yet, in one write transaction, so concurrent openers cannot both apply them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from punctual.engines.embedded.idempotency import V13
from punctual.engines.embedded.schema_callbacks import V14
from punctual.engines.embedded.schema_v15 import V15
from punctual.errors import ConfigError
from punctual.model import OPEN_STATES, TERMINAL_STATES, RunState
from punctual.resources import DUE_INDEX, ROUTING_ATTRIBUTES

# SQL literal lists of the indexes up to v6 (v7 respells them: OPEN_RUN_SQL, TERMINAL_RUN_SQL).
OPEN_STATES_SQL = "(" + ", ".join(f"'{state.value}'" for state in sorted(OPEN_STATES)) + ")"


def _state_is_one_of(states: Iterable[RunState]) -> str:
    """``(state = 'a' OR state = 'b' ...)``: a partial index's WHERE, and the term a query repeats
    verbatim so that the planner can use the index."""
    return "(" + " OR ".join(f"state = '{state.value}'" for state in sorted(states)) + ")"


# One queue serves every run here: the attributes the aws engine routes by are not claimed.
DUE_COLUMNS = (
    "due_shard",
    "next_run_at",
    "job_id",
    *(a for a in DUE_INDEX.non_key_attributes if a not in ROUTING_ATTRIBUTES),
)
# The due index as v1 made it (v12 adds ``timing``): the index of a step is the one of its time.
_V1_DUE_COLUMNS = tuple(c for c in DUE_COLUMNS if c != "timing")

_V1 = (
    """
    CREATE TABLE jobs (
        job_id       TEXT PRIMARY KEY,
        owner        TEXT NOT NULL,
        status       TEXT NOT NULL,
        due_shard    INTEGER NOT NULL,
        next_run_at  INTEGER,
        last_run_at  INTEGER,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        version      INTEGER NOT NULL,
        schedule     TEXT,
        timezone     TEXT NOT NULL,
        jitter_s     INTEGER NOT NULL,
        overlap      TEXT NOT NULL,
        catchup      TEXT NOT NULL,
        max_backfill INTEGER NOT NULL,
        doc          TEXT NOT NULL
    )
    """,
    # status is in the key only so that the index covers the due query (which must name it).
    f"CREATE INDEX jobs_due ON jobs({', '.join(_V1_DUE_COLUMNS)}, status) WHERE status = 'active'",
    "CREATE INDEX jobs_by_owner ON jobs(owner, created_at DESC, job_id DESC)",
    """
    CREATE TABLE runs (
        job_id           TEXT NOT NULL,
        scheduled_at     INTEGER NOT NULL,
        owner            TEXT NOT NULL,
        state            TEXT NOT NULL,
        attempt          INTEGER NOT NULL,
        worker_id        TEXT,
        lease_expires_at INTEGER,
        next_attempt_at  INTEGER,
        deadline_at      INTEGER NOT NULL,
        created_at       INTEGER NOT NULL,
        doc              TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at)
    )
    """,
    f"CREATE INDEX runs_open ON runs(deadline_at, scheduled_at) WHERE state IN {OPEN_STATES_SQL}",
    """
    CREATE TABLE shard_leases (
        shard      INTEGER PRIMARY KEY,
        owner      TEXT NOT NULL,
        epoch      INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE alerts (
        owner      TEXT NOT NULL,
        run_id     TEXT NOT NULL,
        job_id     TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        reason     TEXT NOT NULL,
        PRIMARY KEY (owner, run_id)
    )
    """,
    "CREATE INDEX alerts_by_owner ON alerts(owner, created_at DESC, run_id DESC)",
    """
    CREATE TABLE queue (
        id            INTEGER PRIMARY KEY,
        queue         TEXT NOT NULL,
        body          TEXT NOT NULL,
        visible_at    INTEGER NOT NULL,
        receive_count INTEGER NOT NULL DEFAULT 0,
        receipt       TEXT,
        sent_at       INTEGER NOT NULL
    )
    """,
    "CREATE INDEX queue_visible ON queue(queue, visible_at, id)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

# v2: retention. Terminal runs by their expiry (epoch seconds, in the doc) and deleted jobs by
# their last update, so purge_expired reads only what it deletes (the aws engine uses TTL).
TERMINAL_STATES_SQL = "(" + ", ".join(f"'{state.value}'" for state in sorted(TERMINAL_STATES)) + ")"
_DOC_EXPIRY_SQL = "json_extract(doc, '$.expires_at')"
_V2 = (
    f"CREATE INDEX runs_expired ON runs({_DOC_EXPIRY_SQL}) WHERE state IN {TERMINAL_STATES_SQL}",
    "CREATE INDEX jobs_deleted ON jobs(updated_at) WHERE status = 'deleted'",
)

# v3: run stats (GET /stats). Terminal runs by owner and the time they are counted at, so the
# aggregate reads one index range per window (punctual.port.stats, engines/embedded/stats.py).
_DOC_COUNTED_AT_SQL = "coalesce(json_extract(doc, '$.finished_at'), scheduled_at)"
_V3 = (f"CREATE INDEX runs_done ON runs(owner, {_DOC_COUNTED_AT_SQL}) WHERE state IN {TERMINAL_STATES_SQL}",)

# v4: the stats index also covers the state and the start lateness, so the aggregate never reads
# a run's row or parses its JSON (measured at 100k runs in the window: ~2.7 s before, ~0.1 s to read).
_DOC_LATENESS_SQL = "json_extract(doc, '$.started_at') - scheduled_at"
_V4 = (
    "DROP INDEX runs_done",
    f"CREATE INDEX runs_stats ON runs(owner, {_DOC_COUNTED_AT_SQL}, state, {_DOC_LATENESS_SQL})"
    f" WHERE state IN {TERMINAL_STATES_SQL}",
)

# v5: job dependencies (punctual.dependencies). Reverse edges keyed by the upstream job, so a
# finished run finds its dependents with one range read; one release record per dependent job.
_V5 = (
    """
    CREATE TABLE dependents (
        upstream_id  TEXT NOT NULL,
        dependent_id TEXT NOT NULL,
        PRIMARY KEY (upstream_id, dependent_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE releases (
        dependent_id TEXT PRIMARY KEY,
        generation   INTEGER NOT NULL,
        released_at  INTEGER,
        slots        TEXT NOT NULL
    )
    """,
)

# v6: tenants (punctual.tenancy). Limits per owner, the concurrency slots runs of limited owners
# hold while they run, per-owner rate windows, and the owner of each queued message (the
# round-robin hand-out across owners; '' for none, as for messages sent before v6).
_V6 = (
    """
    CREATE TABLE tenants (
        owner      TEXT PRIMARY KEY,
        weight     INTEGER NOT NULL DEFAULT 1,
        updated_at INTEGER NOT NULL,
        doc        TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE tenant_slots (
        owner    TEXT NOT NULL,
        run_id   TEXT NOT NULL,
        taken_at INTEGER NOT NULL,
        PRIMARY KEY (owner, run_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE tenant_rates (
        owner      TEXT NOT NULL,
        window     INTEGER NOT NULL,
        used       INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (owner, window)
    ) WITHOUT ROWID
    """,
    "ALTER TABLE queue ADD COLUMN grp TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX queue_group_visible ON queue(queue, grp, visible_at, id)",
)

# v7: the partial indexes on runs name their states as equalities joined by OR, not IN lists.
# SQLite 3.40 evaluates an index's WHERE for the old and the new row of every UPDATE that
# changes ``state``, and builds a fresh ephemeral table for each IN list each time: three such
# indexes cost ~14 us per updated run (a lease, a finish), the equalities well under 1 us
# (docs/decisions/0109). Queries spell the same predicate so the planner matches them.
OPEN_RUN_SQL = _state_is_one_of(OPEN_STATES)
TERMINAL_RUN_SQL = _state_is_one_of(TERMINAL_STATES)
_V7 = (
    "DROP INDEX runs_open",
    f"CREATE INDEX runs_open ON runs(deadline_at, scheduled_at) WHERE {OPEN_RUN_SQL}",
    "DROP INDEX runs_expired",
    f"CREATE INDEX runs_expired ON runs({_DOC_EXPIRY_SQL}) WHERE {TERMINAL_RUN_SQL}",
    "DROP INDEX runs_stats",
    f"CREATE INDEX runs_stats ON runs(owner, {_DOC_COUNTED_AT_SQL}, state, {_DOC_LATENESS_SQL})"
    f" WHERE {TERMINAL_RUN_SQL}",
)

# v8: the queue keeps one index on visibility, by owner (queue_group_visible, v6). The first one
# (queue, visible_at, id) served only the idle poll's two reads, which now seek each owner's
# messages instead; every send, receive, hide and delete wrote both (~1.5 us a message).
_V8 = ("DROP INDEX queue_visible",)

# v9: the three times the run indexes sort by are columns, not expressions on the document. An
# index on json_extract(doc, ...) parses the whole document once per expression for every row it
# takes in: three parses per finished run (1-3 us of a ~15 us finish, docs/decisions/0116).
# expires_at is written once, when the run is created; started_at by its first lease; finished_at
# by its finish. Every writer sets the column and the document's field to the same value
# (runs.run_row, set_writes).
RUN_EXPIRY_SQL = "expires_at"
RUN_COUNTED_AT_SQL = "coalesce(finished_at, scheduled_at)"
RUN_LATENESS_SQL = "started_at - scheduled_at"
_V9 = (
    "ALTER TABLE runs ADD COLUMN started_at INTEGER",
    "ALTER TABLE runs ADD COLUMN finished_at INTEGER",
    "ALTER TABLE runs ADD COLUMN expires_at INTEGER",
    "UPDATE runs SET started_at = json_extract(doc, '$.started_at'), finished_at = json_extract(doc, '$.finished_at'),"
    " expires_at = json_extract(doc, '$.expires_at')",
    "DROP INDEX runs_expired",
    f"CREATE INDEX runs_expired ON runs({RUN_EXPIRY_SQL}) WHERE {TERMINAL_RUN_SQL}",
    "DROP INDEX runs_stats",
    f"CREATE INDEX runs_stats ON runs(owner, {RUN_COUNTED_AT_SQL}, state, {RUN_LATENESS_SQL}) WHERE {TERMINAL_RUN_SQL}",
)

# v10: max_runs_per_minute is one record per owner (punctual.tenancy.rates: the owner's next start
# on an even spacing, the turn of its last waiting run, the starts of the last minute), written by
# compare-and-set on its version; the per-second windows of v6 go.
_V10 = (
    """
    CREATE TABLE tenant_starts (
        owner   TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        doc     TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    "DROP TABLE tenant_rates",
)

# v11: the notifications a job's notify webhook is owed (punctual.runs.outcomes), one per run, and
# the outbox of the pending ones by when they are tried next (the reaper drains it).
_V11 = (
    """
    CREATE TABLE notifications (
        job_id       TEXT NOT NULL,
        scheduled_at INTEGER NOT NULL,
        state        TEXT NOT NULL,
        next_at      INTEGER NOT NULL,
        tries        INTEGER NOT NULL,
        expires_at   INTEGER,
        doc          TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX notifications_due ON notifications(next_at) WHERE state = 'pending'",
    "CREATE INDEX notifications_expired ON notifications(expires_at) WHERE state <> 'pending'",
)

# v12: calendars (punctual.calendars). A job's timing rules (its DST policy and calendar:
# punctual.model.timing) in a column the due index covers, NULL for a job that keeps the defaults
# (every job stored before v12); the name of the calendar it uses in a column of its own, indexed for
# the users of a calendar (a delete is refused while there are some); the owners' calendars.
_V12 = (
    "ALTER TABLE jobs ADD COLUMN timing TEXT",
    "ALTER TABLE jobs ADD COLUMN calendar TEXT",
    "DROP INDEX jobs_due",
    f"CREATE INDEX jobs_due ON jobs({', '.join(DUE_COLUMNS)}, status) WHERE status = 'active'",
    "CREATE INDEX jobs_by_calendar ON jobs(owner, calendar) WHERE calendar IS NOT NULL AND status != 'deleted'",
    "CREATE TABLE calendars (owner TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, doc TEXT NOT NULL,"
    " PRIMARY KEY (owner, name)) WITHOUT ROWID",
)

# MIGRATIONS[n] takes a file from version n to n + 1 (v14: accepted runs, engines.embedded.schema_callbacks)
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12, V13, V14, V15)
SCHEMA_VERSION = len(MIGRATIONS)

SYNCHRONOUS_MODES = frozenset({"NORMAL", "FULL", "EXTRA"})
CACHE_KIB = 16_384  # page cache per connection, at most (see configure)
MMAP_BYTES = 268_435_456  # the file's first 256 MiB are read through a memory map (see configure)
WAL_FALLBACK_PAGES = 100_000  # ~400 MB of WAL: a writer checkpoints itself only past this


def configure(conn: sqlite3.Connection, *, synchronous: str, busy_timeout_ms: int) -> None:
    """Per-connection settings (pragmas other than journal_mode do not persist in the file).

    ``synchronous=NORMAL`` in WAL mode fsyncs only at checkpoints: a committed transaction is in
    the WAL file in the OS page cache when COMMIT returns, so it survives a crash or ``kill -9``
    of any process (the requirement), but the newest commits can be lost if the machine loses
    power. ``FULL`` fsyncs the WAL on every commit for power-loss durability, at a large cost
    per transaction.
    """
    if synchronous not in SYNCHRONOUS_MODES:
        raise ConfigError(f"synchronous must be one of {sorted(SYNCHRONOUS_MODES)}, not {synchronous!r}")
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA temp_store = MEMORY")
    # 16 MB of page cache per connection holds the upper levels of every index at a million
    # jobs; the OS page cache holds the rest. 64 MB measured no faster at 1M and 3M jobs (a bigger
    # cache is mostly discarded anyway: SQLite drops a connection's cache whenever another
    # connection has written).
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    # Checkpoints (copying the WAL back into the file) are the only fsyncs under NORMAL. A thread
    # runs them when this process's writes pause, or 5 s after a commit at most
    # (punctual.engines.embedded.checkpoint), off the writers' path; a committing writer
    # checkpoints itself only when the WAL passes 100,000 pages (~400 MB: that thread is starved),
    # instead of SQLite's 1,000. The WAL file is truncated back to 64 MB after.
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_FALLBACK_PAGES}")
    conn.execute("PRAGMA journal_size_limit = 67108864")
    # Pages of the file's first MMAP_BYTES are read through a memory map instead of a read() per
    # page. SQLite drops a connection's page cache whenever another connection wrote, so during a
    # burst every batch of the worker re-reads its jobs' pages: mapped, the burst measured about a
    # quarter less worker CPU per run (docs/decisions/0103). Mapped pages that were touched count in
    # the process's RSS, though they are the OS page cache's, shared and reclaimable: hence a bound.
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


def enable_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (persistent; readers never block the writer and vice versa)."""
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise ConfigError(f"SQLite refused WAL mode for this file (journal_mode={mode}); use a local disk")


def migrate(conn: sqlite3.Connection, *, shards: int) -> None:
    """Bring the file to :data:`SCHEMA_VERSION` and check it was created for ``shards`` shards.

    Raises :class:`ConfigError` for a file written by a newer Punctual, or one created with a
    different number of due shards (its jobs' ``due_shard`` values would be wrong: reducing the
    count would strand every job in a shard that no scheduler claims).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise ConfigError(f"database schema version {version} is newer than this Punctual ({SCHEMA_VERSION})")
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        repair_indexes(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("INSERT INTO meta (key, value) VALUES ('shards', ?) ON CONFLICT DO NOTHING", (str(shards),))
        stored = int(conn.execute("SELECT value FROM meta WHERE key = 'shards'").fetchone()[0])
        if stored != shards:
            raise ConfigError(f"this database was created with {stored} due shards, not {shards}; keep PUNCTUAL_SHARDS")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def repair_indexes(conn: sqlite3.Connection) -> list[str]:
    """Create every index of the current schema that is missing (a bulk load that died before
    rebuilding its indexes: ``punctual.engines.embedded.bulk``). Returns the names created."""
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    created = []
    for name, statement in current_indexes().items():
        if name not in present:
            conn.execute(statement)
            created.append(name)
    return created


def current_indexes() -> dict[str, str]:
    """Index name -> the statement that creates it, as the migrations leave the schema."""
    indexes: dict[str, str] = {}
    for step in MIGRATIONS:
        for statement in step:
            words = statement.split()
            if words[:2] == ["CREATE", "INDEX"]:
                indexes[words[2]] = statement
            elif words[:2] == ["DROP", "INDEX"]:
                indexes.pop(words[2], None)
    return indexes
