"""A replay with an ``Idempotency-Key`` (``POST /runs/replay``): repeating the request (a retried HTTP
call) starts no run twice, whether it comes after the first answered, while it is still at work, or
after it died half way.

The key names one record per (owner, key), kept :data:`KEY_WINDOW_MS` from the first request
(``punctual.port.idempotency``). It holds:

- a digest of the request: the same key with another request is :class:`IdempotencyKeyReused`;
- ``at``, when the first request began: the replays' instants derive from it and from each
  original's rank (``punctual.jobs.replay``), so every request carrying the key out names the same
  runs, and a second insert of one is a no-op on both engines;
- ``beat``: the request carrying it out renews it at least every :data:`RENEW_MS`. Another request
  within :data:`LEASE_MS` of the last beat is :class:`IdempotencyKeyInUse` (409, ``Retry-After``);
  after it (longer than the API may take: 29 s on AWS), it takes over and carries on from what the
  window holds (``Store.replays_between``, strongly consistent);
- the answer (the count), once done: any later request with the key gets it, with nothing read or
  written but the record.

Timeline (see ``punctual.port.idempotency`` for the writes)::

    first request: read (absent) -> find (reads; bad input raises: nothing written) -> claim -> start
                   -> answer
    repeat:        read -> same digest? -> answered: the answer | at work: 409 | stopped: take over,
                   find with the first at, start (resume) -> answer

A dry run writes nothing and takes no key (the API does not pass it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import replace

from punctual.clock import Clock
from punctual.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from punctual.jobs import checks, replay
from punctual.jobs.replay import Replayed, ReplayOptions, ReplayQuery
from punctual.port import IdempotencyRecord, Queue, Store

KEY_WINDOW_MS = 24 * 3_600_000  # a key names its request for a day (then it may name a new one)
LEASE_MS = 60_000  # a request at work holds its key this long past its last beat (API Gateway: 29 s)
RENEW_MS = LEASE_MS // 4  # how often it beats at most (one write per 15 s of work)
SCOPE = "replay:"  # records of this route's keys (another route's keys are other records)
FIELD = "Idempotency-Key"

logger = logging.getLogger(__name__)


def replay_with_key(
    store: Store, queue: Queue, owner: str, query: ReplayQuery, key: str, *, clock: Clock, options: ReplayOptions
) -> Replayed:
    """Replay what ``query`` selects once per ``key`` (see the module docstring).

    Raises what :func:`punctual.jobs.replay.replay_runs` raises (before anything is written), and
    :class:`InvalidInput` (a malformed key), :class:`IdempotencyKeyReused` (the key was used for
    another request within its window; nothing written) and :class:`IdempotencyKeyInUse` (another
    request with the key is at work; nothing written)."""
    checks.check_idempotency_key(key)
    now = clock.now_ms()
    scoped, digest = SCOPE + key, fingerprint(query)
    record = store.get_idempotency_record(owner, scoped, now)
    if record is None:
        found = replay.find(store, owner, query, now)
        mine = IdempotencyRecord(owner, scoped, digest, at=now, beat=now, expires_at=now + KEY_WINDOW_MS)
        record = store.claim_idempotency_record(mine, now)
        if record == mine:
            return _carry_out(store, queue, mine, found, clock, options, resume=False)
    if record.fingerprint != digest:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used for another replay request within the last 24 hours; use a new key",
            field=FIELD,
        )
    if record.result is not None:
        return Replayed([], [], int(json.loads(record.result)["count"]), repeated=True)
    if now < record.beat + LEASE_MS or not store.update_idempotency_record(owner, scoped, record.beat, now, None):
        raise _in_use(record, now)
    # the request that carried it stopped (it died, or it failed and let go): carry on from its instants
    taken = replace(record, beat=now)
    try:
        found = replay.find(store, owner, query, record.at)
    except Exception:
        _let_go(store, taken)
        raise
    return _carry_out(store, queue, taken, found, clock, options, resume=True)


def fingerprint(query: ReplayQuery) -> str:
    """A digest of what ``query`` asks, whatever its order or spelling (instants, sets)."""
    canonical = {
        "from": query.since,
        "to": query.until,
        "states": sorted(str(state) for state in query.states),
        "job_ids": None if query.job_ids is None else sorted(set(query.job_ids)),
    }
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:32]


def _carry_out(  # noqa: PLR0917 - the request and what it holds
    store: Store,
    queue: Queue,
    record: IdempotencyRecord,
    found: replay.Found,
    clock: Clock,
    options: ReplayOptions,
    *,
    resume: bool,
) -> Replayed:
    """Start the replays under ``record`` (held by this request at ``record.beat``), then store the answer."""
    held = [record]
    try:
        done = replay.start(
            store,
            queue,
            record.owner,
            found,
            record.at,
            clock.now_ms(),
            options=options,
            resume=resume,
            beat=_renewal(store, held, clock),
        )
    except Exception:
        _let_go(store, held[0])
        raise
    answer = json.dumps({"count": done.count})
    if not store.update_idempotency_record(record.owner, record.key, held[0].beat, clock.now_ms(), answer):
        # taken over at the very end (this request stalled past its lease): the other one answers the same
        logger.warning("replay key %s of %s was taken over before its answer was stored", record.key, record.owner)
    return done


def _renewal(store: Store, held: list[IdempotencyRecord], clock: Clock) -> Callable[[], None]:
    """The beat :func:`punctual.jobs.replay.start` calls before each step: renews the hold every
    :data:`RENEW_MS`; raises :class:`IdempotencyKeyInUse` if another request took it over."""

    def beat() -> None:
        record, now = held[0], clock.now_ms()
        if now - record.beat < RENEW_MS:
            return
        if not store.update_idempotency_record(record.owner, record.key, record.beat, now, None):
            raise IdempotencyKeyInUse(
                "another request with this Idempotency-Key took it over; it carries the replay on",
                retry_after_s=1,
                field=FIELD,
            )
        held[0] = replace(record, beat=now)

    return beat


def _let_go(store: Store, record: IdempotencyRecord) -> None:
    """After an error: let a retry carry on at once rather than wait out the lease. Best effort (the
    error being raised is the one that matters; the lease frees the key anyway)."""
    with contextlib.suppress(Exception):
        store.update_idempotency_record(record.owner, record.key, record.beat, 0, None)


def _in_use(record: IdempotencyRecord, now: int) -> IdempotencyKeyInUse:
    left_s = max(1, -(-(record.beat + LEASE_MS - now) // 1000))
    return IdempotencyKeyInUse(
        "a replay request with this Idempotency-Key is still at work; retry shortly for its answer",
        retry_after_s=min(left_s, 5),  # it is usually done within seconds; one that died frees it by LEASE_MS
        field=FIELD,
    )
