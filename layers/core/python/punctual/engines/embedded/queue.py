"""The embedded :class:`~punctual.port.Queue`: SQS semantics on a table of the same SQLite file.

A message is a row of ``queue`` with the queue's name. Its life, with times in epoch ms::

    send ──> hidden until visible_at (delay) ──receive──> in flight: receive_count + 1, new receipt,
              ^                                           │  hidden until now + visibility
              └──────── visibility ends, not deleted ─────┘──delete(receipt)──> gone
    receive finds receive_count >= max_receives ──> moved to the dead-letter queue (count reset)

The receipt changes on every receive, and ``extend``/``delete`` match on it, so a worker holding
a stale receipt (its message was redelivered to someone else since) changes nothing.

Fair hand-out: each message carries its run's owner (``grp``, from ``Dispatch.group``; '' for
none), and ``receive`` hands visible messages out round-robin across owners, weighted by the
owners' tenant ``weight`` (``punctual.tenancy.fairness``): one owner's backlog never sits in front
of another owner's due run. Within an owner, highest priority first (``pri``, from
``Dispatch.priority``: the run's job's priority, 5 where the sender does not give it; schema v14),
then oldest visible first, a message woken for a freed concurrency slot (``wake``) first of its
priority: an urgent run's first message is not handed out behind its owner's backlog.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
from collections.abc import Sequence

from punctual.clock import Clock
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.reads import chunks, json_rows, one_step, shape, values
from punctual.model.limits import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
from punctual.port import Delivery, Dispatch, Queue
from punctual.resources import MAX_DELAY_S
from punctual.tenancy.fairness import RoundRobin

_Row = tuple[int, str, int, int, str, int]  # a _VISIBLE row: id, body, receive_count, sent_at, its group, pri

# A body as _body writes it, for a run id and an integer not_before (no escapes in either).
_BODY = re.compile(r'\{"run_id":"(run_[0-9a-f]{32}_[0-9]{1,15})","not_before":(-?(?:0|[1-9][0-9]{0,17}))\}')

POLL_S = 0.05  # longest pause between two looks at an empty queue during a long poll
_MIN_PAUSE_S = 0.001

WEIGHTS_TTL_MS = 5_000  # how long the owners' weights are reused before being read again
WAKE_AHEAD_MS = 86_400_000  # a woken message counts as visible since a day ago (see wake)

# Every priority, as an IN list: the index (queue, grp, pri DESC, visible_at, id) is then one seek
# per priority, each a range on visible_at, read in the index's order (no sort, and a LIMIT stops
# it); without the list, a scan of the owner's messages would pass every hidden one of a higher
# priority (a backlog in flight) before the first visible one of a lower.
_PRIORITIES = ", ".join(str(p) for p in range(MAX_PRIORITY, MIN_PRIORITY - 1, -1))
# One group's first visible messages (highest priority, then oldest), in one step (reads.one_step),
# each row led by its sort key.
_GROUP_VISIBLE = (
    "SELECT json_group_array(json_array(-pri, visible_at, id, body, receive_count, sent_at, pri)) FROM ("
    "SELECT pri, visible_at, id, body, receive_count, sent_at FROM queue INDEXED BY queue_group_visible"
    f" WHERE queue = ? AND grp = ? AND pri IN ({_PRIORITIES}) AND visible_at <= ?"
    " ORDER BY pri DESC, visible_at, id LIMIT ?)"
)
# The owners with messages, one index seek each (a skip-scan): cheap however deep the backlog.
_GROUPS = (
    "WITH RECURSIVE g(grp) AS ("
    " SELECT (SELECT grp FROM queue INDEXED BY queue_group_visible WHERE queue = ?1 ORDER BY grp LIMIT 1)"
    " UNION ALL SELECT (SELECT grp FROM queue INDEXED BY queue_group_visible WHERE queue = ?1 AND grp > g.grp"
    " ORDER BY grp LIMIT 1) FROM g WHERE g.grp IS NOT NULL) SELECT grp FROM g WHERE grp IS NOT NULL"
)
_WEIGHTS = "SELECT owner, weight FROM tenants WHERE weight != 1"
# The idle poll's reads, one index seek per owner with messages (as _GROUPS).
_ANY_VISIBLE = (
    f"{_GROUPS[: _GROUPS.rindex(' SELECT grp FROM g')]} SELECT 1 FROM g WHERE EXISTS (SELECT 1 FROM queue"
    f" INDEXED BY queue_group_visible WHERE queue = ?1 AND grp = g.grp AND pri IN ({_PRIORITIES})"
    " AND visible_at <= ?2) LIMIT 1"
)
_NEXT_VISIBLE = (
    f"{_GROUPS[: _GROUPS.rindex(' SELECT grp FROM g')]}, p(pri) AS (VALUES ({_PRIORITIES.replace(', ', '), (')}))"
    " SELECT min((SELECT min(visible_at) FROM queue INDEXED BY queue_group_visible"
    " WHERE queue = ?1 AND grp = g.grp AND pri = p.pri)) FROM g, p"
)
# Every message of a receive in one statement; the receipt is "<id>.<token>" (see _take).
_DELIVER = (
    "UPDATE queue SET receive_count = receive_count + 1, visible_at = ?, receipt = id || '.' || ? WHERE id IN ({ids})"
)
_DEAD_LETTER = "UPDATE queue SET queue = ?, receive_count = 0, visible_at = ?, receipt = NULL WHERE id = ?"
# The messages of (id, receipt) pairs, in this queue (the last variable).
_DELETE_CHUNK = 512
_DELETE_MATCHING = (
    "DELETE FROM queue WHERE id IN (SELECT q.id FROM (VALUES {rows}) AS k"
    " JOIN queue q ON q.id = k.column1 AND q.receipt = k.column2 AND q.queue = ?)"
)


class EmbeddedQueue(Queue):
    """One named queue. ``max_receives`` and ``dead_letter`` are given together (the redrive policy)."""

    def __init__(
        self,
        db: Database,
        name: str,
        *,
        clock: Clock,
        retention_s: int,
        max_receives: int | None = None,
        dead_letter: str | None = None,
    ) -> None:
        if (max_receives is None) != (dead_letter is None):
            raise ValueError("give both max_receives and dead_letter, or neither")
        self.name = name
        self._db = db
        self._clock = clock
        self._retention_ms = retention_s * 1000
        self._max_receives = max_receives
        self._dead_letter = dead_letter
        self._turns = RoundRobin()
        self._weights: tuple[int, dict[str, int]] = (0, {})

    def send(self, dispatches: Sequence[Dispatch]) -> None:
        """Enqueue every dispatch in one transaction (all or none). Raises ValueError for a delay
        outside 0..900 s (as SQS refuses it)."""
        now = self._clock.now_ms()
        rows = [(self.name, _body(d), now + _delay_ms(d), now, d.group or "", _priority(d)) for d in dispatches]
        if not rows:
            return
        with self._db.write() as conn:
            conn.executemany(
                "INSERT INTO queue (queue, body, visible_at, sent_at, grp, pri) VALUES (?, ?, ?, ?, ?, ?)", rows
            )

    def receive(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> list[Delivery]:
        """Up to ``max_messages`` visible messages, round-robin across owners, each hidden for
        ``visibility_s``. Polls until one is delivered or ``wait_s`` has passed (bounded even if the
        clock stands still). Messages past their retention are dropped instead of delivered.
        """
        if max_messages < 1 or visibility_s < 0:
            raise ValueError("max_messages must be >= 1 and visibility_s >= 0")
        deadline = self._clock.now_ms() + int(wait_s * 1000)
        for _ in range(int(wait_s / _MIN_PAUSE_S) + 1):
            deliveries = self._receive_once(max_messages, visibility_s)
            now = self._clock.now_ms()
            if deliveries or now >= deadline:
                return deliveries
            self._clock.sleep(self._pause(now, deadline))
        return []

    def extend(self, receipt: str, visibility_s: int) -> None:
        """Hide the message for ``visibility_s`` more seconds (0: visible now). A stale or unknown
        receipt is a no-op."""
        message_id = _message_id(receipt)
        if message_id is None:
            return
        visible_at = self._clock.now_ms() + visibility_s * 1000
        with self._db.write() as conn:
            conn.execute(
                "UPDATE queue SET visible_at = ? WHERE id = ? AND receipt = ? AND queue = ?",
                (visible_at, message_id, receipt, self.name),
            )

    def delete(self, receipt: str) -> None:
        """Remove the message this receipt delivered. A stale or unknown receipt is a no-op."""
        message_id = _message_id(receipt)
        if message_id is None:
            return
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM queue WHERE id = ? AND receipt = ? AND queue = ?", (message_id, receipt, self.name)
            )

    def extend_many(self, receipts: Sequence[str], visibility_s: int) -> None:
        """:meth:`extend` for every receipt, in one transaction."""
        rows = [(m, r) for r in receipts if (m := _message_id(r)) is not None]
        if not rows:
            return
        visible_at = self._clock.now_ms() + visibility_s * 1000
        with self._db.write() as conn:
            conn.executemany(
                "UPDATE queue SET visible_at = ? WHERE id = ? AND receipt = ? AND queue = ?",
                [(visible_at, m, r, self.name) for m, r in rows],
            )

    def wake(self, receipts: Sequence[str]) -> None:
        """Visible now, and first of their owners' visible messages: the hand-out takes an owner's
        oldest visible first, so a woken message is made visible since ``WAKE_AHEAD_MS`` ago (the
        owners' shares are unchanged: the round-robin across owners comes first)."""
        rows = [(m, r) for r in receipts if (m := _message_id(r)) is not None]
        if not rows:
            return
        visible_at = self._clock.now_ms() - WAKE_AHEAD_MS  # woken ones among themselves: in wake order
        with self._db.write() as conn:
            conn.executemany(
                "UPDATE queue SET visible_at = ? WHERE id = ? AND receipt = ? AND queue = ?",
                [(visible_at, m, r, self.name) for m, r in rows],
            )

    def delete_many(self, receipts: Sequence[str]) -> None:
        """:meth:`delete` for every receipt, in one transaction."""
        if not receipts:
            return
        with self._db.write() as conn:
            self.delete_in(conn, receipts)

    def delete_in(self, conn: sqlite3.Connection, receipts: Sequence[str]) -> None:
        """Delete the messages of ``receipts`` inside the caller's write transaction (stale ones: no-op).

        One statement per few hundred receipts rather than one per receipt: each statement is one
        step of SQLite, and the sqlite3 module hands the GIL over around every step."""
        rows = [(m, r) for r in receipts if (m := _message_id(r)) is not None]
        for chunk in chunks(rows, _DELETE_CHUNK):
            pairs, params = values(chunk, 2, shape(len(chunk), _DELETE_CHUNK))  # (NULL, NULL) matches no message
            conn.execute(_DELETE_MATCHING.format(rows=pairs), [*params, self.name])

    def depth(self) -> int:
        """Every message of this queue: visible, delayed and in flight (exact, not approximate)."""
        row = self._db.connection().execute("SELECT count(*) FROM queue WHERE queue = ?", (self.name,)).fetchone()
        return int(row[0])

    # -- helpers ------------------------------------------------------------------------------

    def _receive_once(self, max_messages: int, visibility_s: int) -> list[Delivery]:
        now = self._clock.now_ms()
        # A plain read first: an idle poller never takes the write lock other processes need.
        if self._db.connection().execute(_ANY_VISIBLE, (self.name, now)).fetchone() is None:
            return []
        deliveries: dict[int, Delivery] = {}
        weights = self._owner_weights(now)
        with self._db.write() as conn:
            groups = [row[0] for row in conn.execute(_GROUPS, (self.name,))]
            # Repeat while dropped or dead-lettered rows left room; rows delivered with visibility 0
            # stay visible, hence the look-ahead by len(deliveries) and the skip.
            seen: dict[str, set[int]] = {}  # rows picked already, per group: still visible until taken

            def fetch(group: str, n: int) -> list[_Row]:
                picked = seen.setdefault(group, set())
                # sorted here: an aggregate's order of rows is not promised (ORDER BY in one: SQLite 3.44)
                found = sorted(json_rows(one_step(conn, _GROUP_VISIBLE, (self.name, group, now, n + len(picked)))))
                rows: list[_Row] = [(r[2], r[3], r[4], r[5], group, r[6]) for r in found if r[2] not in picked][:n]
                picked.update(r[0] for r in rows)
                return rows

            # One receipt token per receive (a message is delivered once per call, so id.token is
            # unique), and one statement for every delivery: a burst receives thousands per second.
            token = secrets.token_hex(8)
            while len(deliveries) < max_messages:
                rows = self._turns.pick(groups, max_messages - len(deliveries), fetch, weights)
                if not rows:
                    break
                for row in rows:
                    delivery = self._take(conn, row, now, token)
                    if delivery is not None:
                        deliveries[row[0]] = delivery
            for ids in chunks(list(deliveries)):
                marks = ", ".join("?" * len(ids))
                conn.execute(_DELIVER.format(ids=marks), (now + visibility_s * 1000, token, *ids))
        return list(deliveries.values())

    def _owner_weights(self, now: int) -> dict[str, int]:
        """Owners whose tenant weight is not 1, read at most every ``WEIGHTS_TTL_MS``."""
        read_at, weights = self._weights
        if now - read_at >= WEIGHTS_TTL_MS or now < read_at:
            weights = {owner: int(weight) for owner, weight in self._db.connection().execute(_WEIGHTS)}
            self._weights = (now, weights)
        return weights

    def _take(self, conn: sqlite3.Connection, row: _Row, now: int, token: str) -> Delivery | None:
        """The delivery of one visible message (a ``_VISIBLE`` row; the caller marks it delivered),
        or None if it was dropped (past retention) or moved to the dead-letter queue (receives used up)."""
        message_id, body, count, sent_at, group, priority = row
        if sent_at + self._retention_ms < now:
            conn.execute("DELETE FROM queue WHERE id = ?", (message_id,))
            return None
        if self._max_receives is not None and count >= self._max_receives:
            conn.execute(_DEAD_LETTER, (self._dead_letter, now, message_id))
            return None
        run_id, not_before = _read_body(body)
        extra = {"message_id": str(message_id), "sent_at": str(sent_at)}
        if group:  # the run's owner, as SQS gives its MessageGroupId (a message re-sent keeps it)
            extra["group"] = group
        if priority != DEFAULT_PRIORITY:  # a re-send keeps it (port.message_priority)
            extra["priority"] = str(priority)
        return Delivery(run_id, not_before, f"{message_id}.{token}", count + 1, extra)

    def _pause(self, now: int, deadline: int) -> float:
        """How long to sleep: until the next message turns visible, at most POLL_S, never past the deadline."""
        row = self._db.connection().execute(_NEXT_VISIBLE, (self.name,)).fetchone()
        until = deadline if row[0] is None else min(deadline, max(row[0], now))
        return max(_MIN_PAUSE_S, min(POLL_S, (until - now) / 1000))


def _body(dispatch: Dispatch) -> str:
    return json.dumps({"run_id": dispatch.run_id, "not_before": dispatch.not_before}, separators=(",", ":"))


def _read_body(body: str) -> tuple[str, int]:
    """The run id and not_before of a message body. A body as :func:`_body` writes it is read by
    one regular expression (a third of ``json.loads``, paid for every message of a burst); any
    other goes through ``json.loads``, which raises for one that is not JSON, as it always did."""
    match = _BODY.fullmatch(body)
    if match is not None:
        return match[1], int(match[2])
    data = json.loads(body)
    return data["run_id"], data["not_before"]


def _priority(dispatch: Dispatch) -> int:
    if dispatch.priority is None:
        return DEFAULT_PRIORITY
    if not MIN_PRIORITY <= dispatch.priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be within {MIN_PRIORITY}..{MAX_PRIORITY}, not {dispatch.priority}")
    return dispatch.priority


def _delay_ms(dispatch: Dispatch) -> int:
    if not 0 <= dispatch.delay_s <= MAX_DELAY_S:
        raise ValueError(f"delay_s must be within 0..{MAX_DELAY_S}, not {dispatch.delay_s} (run {dispatch.run_id})")
    return dispatch.delay_s * 1000


def _message_id(receipt: str) -> int | None:
    """The message id a receipt names, or None if the receipt was not made by this engine."""
    head, _, _ = receipt.partition(".")
    return int(head) if head.isdigit() else None
