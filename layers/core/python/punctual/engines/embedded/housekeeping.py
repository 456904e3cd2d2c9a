"""The embedded engine's purge of the records that no retention of theirs removes: owner alerts, and
the ``tenant_starts`` rows (rate records, slot-wait marks). The aws engine's storage expires the
same items by itself (TTL on the alerts and the rate records).

Part of ``Store.purge_expired`` (the reaper's purge, once a pass), in its write transaction and
within its bound, after the runs, notifications and deleted jobs:

- an alert goes when it is older than the run history retention (``created_at`` before
  ``deleted_before``), as the aws engine's TTL removes it ``retention_days`` after its creation;
- a rate record goes :data:`~punctual.tenancy.rates.FORGET_AFTER_MS` after the latest of its
  ``next_at``, ``queue_end`` and ``guard_until``, when it decides nothing a missing record would
  not (the aws engine's TTL is a minute after ``max(next_at, queue_end)``). A writer that read it
  just before and writes after it went fails its compare-and-set, reads again and starts afresh
  (unless, in those milliseconds, other writers made a new record up to the very version it read:
  the race the aws engine's TTL has too);
- a slot-wait mark goes the same margin after the latest ``until`` it holds (a mark lapsed on
  every worker whose clock is within that margin decides nothing).

Alerts are found by a scan of their table and the other two by one of ``tenant_starts`` (a row per
scope with a limit in use: the purge keeps it to the scopes of the last minutes), once a reaper
pass (every 60 s by default).
"""

from __future__ import annotations

import sqlite3

from punctual.engines.embedded.tenants import WAITS_PREFIX
from punctual.tenancy.rates import FORGET_AFTER_MS

_PURGE_ALERTS = "DELETE FROM alerts WHERE rowid IN (SELECT rowid FROM alerts WHERE created_at < ? LIMIT ?)"
# The wait marks are the keys from WAITS_PREFIX up to the same text with its last character's
# successor (":" then ";"); every other row is a rate record.
_WAITS_END = WAITS_PREFIX[:-1] + chr(ord(WAITS_PREFIX[-1]) + 1)
_RATE_LAST = "max(json_extract(doc, '$.next_at'), json_extract(doc, '$.queue_end'), json_extract(doc, '$.guard_until'))"
_PURGE_RATES = (
    "DELETE FROM tenant_starts WHERE owner IN (SELECT owner FROM tenant_starts"
    f" WHERE (owner < ? OR owner >= ?) AND {_RATE_LAST} < ? LIMIT ?)"
)
_PURGE_WAITS = (
    "DELETE FROM tenant_starts WHERE owner IN (SELECT owner FROM tenant_starts"
    " WHERE owner >= ? AND owner < ? AND (SELECT max(value) FROM json_each(doc)) < ? LIMIT ?)"
)


def purge_records(conn: sqlite3.Connection, now: int, deleted_before: int, limit: int) -> int:
    """Delete at most ``limit`` rows (alerts first) that the module docstring says may go, inside the
    caller's write transaction (``Store.purge_expired``); ``now`` and ``deleted_before`` are epoch ms.
    Returns how many were deleted."""
    deleted = conn.execute(_PURGE_ALERTS, (deleted_before, max(0, limit))).rowcount
    forgotten = now - FORGET_AFTER_MS
    deleted += conn.execute(_PURGE_RATES, (WAITS_PREFIX, _WAITS_END, forgotten, max(0, limit - deleted))).rowcount
    deleted += conn.execute(_PURGE_WAITS, (WAITS_PREFIX, _WAITS_END, forgotten, max(0, limit - deleted))).rowcount
    return deleted
