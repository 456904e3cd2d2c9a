"""Domain models <-> DynamoDB low-level attribute maps (``{"S": ...}``, ``{"N": ...}``).

The low-level client is used on purpose: no Decimal round trips and no TypeSerializer per request.
Layout choices that the store relies on:

- Absent means None: an optional field that is None is not written at all (never a NULL), so
  ``attribute_not_exists(x)`` in a condition means "x is None".
- jobs: two items each, a small head and the spec (:mod:`.job_items`). ``next_run_at`` exists only
  while the job is active. The ``due`` GSI needs both of its key attributes (``due_shard``,
  ``next_run_at``), so that alone keeps the index sparse; ``due_shard`` stays on every job so that
  it round-trips (pause, then resume onto the same shard).
- runs: ``open_shard`` (= ``ids.shard_of(run_id, open_shards)``) exists only while the run is open,
  which keeps the ``open`` GSI sparse; its sort key is the immutable ``scheduled_at``, so leases and
  heartbeats never rewrite the index. ``attempts`` is a list of compact JSON strings, appended with
  ``list_append``; reads keep the newest ``MAX_ATTEMPTS_KEPT``.
- TTL attributes hold epoch *seconds* (DynamoDB ignores anything else); a run's ``expires_at`` is
  already in seconds in the model. Only terminal runs carry the TTL attribute ``expires_at``; an
  open run keeps its retention in ``retain_until`` so that TTL can never delete it.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

from punctual import ids, rules
from punctual.errors import InvalidCursor
from punctual.model import Attempt, Catchup, Overlap, Run, RunState
from punctual.model.timing import read_timing
from punctual.port import Alert, DueJob, ShardLease

Item = dict[str, Any]  # a low-level attribute map
Key = dict[str, Any]

SHARD_PK = "shard"
_DAY_S = 86_400


# -- scalar codecs ---------------------------------------------------------------------------------


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def js(value: Any) -> dict[str, str]:
    """A JSON string attribute (compact: every byte is paid on every write)."""
    return {"S": json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)}


def get_s(item: Item, name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def get_n(item: Item, name: str) -> int | None:
    value = item.get(name)
    return None if value is None else int(value["N"])


def _put(item: Item, name: str, value: dict[str, str] | None) -> None:
    if value is not None:
        item[name] = value


def _opt_n(value: int | None) -> dict[str, str] | None:
    return None if value is None else n(value)


def _opt_s(value: str | None) -> dict[str, str] | None:
    return None if value is None else s(value)


def ttl_seconds(epoch_ms: int) -> int:
    """Epoch seconds for a TTL attribute, rounded up so nothing expires before its time."""
    return -(-epoch_ms // 1000)


# -- keys ------------------------------------------------------------------------------------------


def job_key(job_id: str) -> Key:
    return {"job_id": s(job_id)}


def run_key(job_id: str, scheduled_at: int) -> Key:
    return {"job_id": s(job_id), "scheduled_at": n(scheduled_at)}


def shard_key(shard: int) -> Key:
    return {"pk": s(SHARD_PK), "sk": s(f"{shard:05d}")}


def alert_pk(owner: str) -> str:
    return f"alert#{owner}"


def alert_key(owner: str, run_id: str) -> Key:
    return {"pk": s(alert_pk(owner)), "sk": s(run_id)}


# -- jobs ------------------------------------------------------------------------------------------


def item_to_due_job(item: Item) -> DueJob:
    """A row of the ``due`` index (its INCLUDE projection carries exactly these attributes)."""
    return DueJob(
        job_id=item["job_id"]["S"],
        owner=item["owner"]["S"],
        next_run_at=int(item["next_run_at"]["N"]),
        schedule=get_s(item, "schedule"),
        timezone=item["timezone"]["S"],
        jitter_s=int(item["jitter_s"]["N"]),
        overlap=Overlap(item["overlap"]["S"]),
        catchup=Catchup(item["catchup"]["S"]),
        max_backfill=int(item["max_backfill"]["N"]),
        last_run_at=get_n(item, "last_run_at"),
        due_shard=int(item["due_shard"]["N"]),
        timeout_s=get_n(item, "timeout_s"),
        **_timing(get_s(item, "timing")),
    )


def _timing(text: str | None) -> dict[str, Any]:
    timing = read_timing(text)
    return {"dst": timing.dst, "calendar": timing.calendar, "run_at": timing.once, "priority": timing.priority}


def by_owner_key(item: Item) -> Key:
    """The ``by_owner`` index position of a job item (table key + index key)."""
    return {name: item[name] for name in ("job_id", "owner", "created_at")}


def due_key(job: DueJob) -> Key:
    """The ``due`` index position of a listed job, to continue a listing after it."""
    return {"job_id": s(job.job_id), "due_shard": n(job.due_shard), "next_run_at": n(job.next_run_at)}


# -- runs ------------------------------------------------------------------------------------------


def attempt_value(attempt: Attempt) -> dict[str, str]:
    return {"S": attempt.model_dump_json(exclude_none=True)}


def attempts_value(attempts: list[Attempt]) -> dict[str, Any]:
    return {"L": [attempt_value(a) for a in attempts]}


def run_to_item(run: Run, *, open_shards: int) -> Item:
    """The stored form of ``run``; ``open_shard`` only while it is open."""
    item: Item = {
        "job_id": s(run.job_id),
        "scheduled_at": n(run.scheduled_at),
        "owner": s(run.owner),
        "state": s(run.state.value),
        "trigger": s(run.trigger.value),
        "attempt": n(run.attempt),
        "deadline_at": n(run.deadline_at),
        "created_at": n(run.created_at),
    }
    _put(item, "worker_id", _opt_s(run.worker_id))
    _put(item, "lease_expires_at", _opt_n(run.lease_expires_at))
    _put(item, "started_at", _opt_n(run.started_at))
    _put(item, "finished_at", _opt_n(run.finished_at))
    _put(item, "next_attempt_at", _opt_n(run.next_attempt_at))
    _put(item, "note", _opt_s(run.note))
    _put(item, "replay_of", _opt_s(run.replay_of))
    _put(item, "heartbeat_at", _opt_n(run.heartbeat_at))  # completion callback only
    _put(item, "progress", _opt_s(run.progress))
    if run.released_by:
        item["released_by"] = {"SS": run.released_by}
    if run.expires_at is not None:
        # Only a finished run carries the TTL attribute: DynamoDB must never delete an open run
        # (a run retrying for days would vanish). Open runs keep their retention in retain_until;
        # the terminal write sets expires_at (see store._change_expression).
        item["retain_until" if run.is_open else "expires_at"] = n(run.expires_at)
    if run.attempts:
        item["attempts"] = attempts_value(run.attempts)
    if run.is_open:
        item["open_shard"] = n(open_shard(run.job_id, run.scheduled_at, open_shards))
    return item


def open_shard(job_id: str, scheduled_at: int, open_shards: int) -> int:
    return ids.shard_of(ids.run_id_for(job_id, scheduled_at), open_shards)


def item_to_run(item: Item) -> Run:
    attempts = [Attempt.model_validate_json(entry["S"]) for entry in item.get("attempts", {}).get("L", [])]
    data: dict[str, Any] = {
        "job_id": item["job_id"]["S"],
        "scheduled_at": int(item["scheduled_at"]["N"]),
        "owner": item["owner"]["S"],
        "state": RunState(item["state"]["S"]),
        "trigger": item["trigger"]["S"],
        "attempt": int(item["attempt"]["N"]),
        "worker_id": get_s(item, "worker_id"),
        "lease_expires_at": get_n(item, "lease_expires_at"),
        "started_at": get_n(item, "started_at"),
        "finished_at": get_n(item, "finished_at"),
        "next_attempt_at": get_n(item, "next_attempt_at"),
        "deadline_at": int(item["deadline_at"]["N"]),
        "created_at": int(item["created_at"]["N"]),
        "expires_at": get_n(item, "expires_at") or get_n(item, "retain_until"),
        "note": get_s(item, "note"),
        "released_by": sorted(item["released_by"]["SS"]) if "released_by" in item else None,
        "replay_of": get_s(item, "replay_of"),
        "heartbeat_at": get_n(item, "heartbeat_at"),
        "progress": get_s(item, "progress"),
        "attempts": rules.bounded(attempts),
    }
    return Run.model_validate(data)


def run_position(item: Item) -> Key:
    return {"job_id": item["job_id"], "scheduled_at": item["scheduled_at"]}


# -- shard leases ----------------------------------------------------------------------------------


def item_to_lease(item: Item) -> ShardLease:
    return ShardLease(
        shard=int(item["sk"]["S"]),
        owner=item["owner"]["S"],
        epoch=int(item["epoch"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
    )


# -- alerts ----------------------------------------------------------------------------------------


def alert_to_item(alert: Alert, *, retention_days: int) -> Item:
    return {
        **alert_key(alert.owner, alert.key),
        "owner": s(alert.owner),
        "job_id": s(alert.job_id),
        "created_at": n(alert.created_at),
        "reason": s(alert.reason),
        "expires_ttl": n(ttl_seconds(alert.created_at) + retention_days * _DAY_S),
    }


def item_to_alert(item: Item) -> Alert:
    return Alert.stored(
        item["owner"]["S"], item["sk"]["S"], item["job_id"]["S"], int(item["created_at"]["N"]), item["reason"]["S"]
    )


# -- cursors ------------------------------------------------------------------------------------------


def job_cursor_key(cursor: str, owner: str) -> Key:
    position = ids.decode_cursor("jobs", cursor)
    created_at, job_id = position.get("c"), position.get("j")
    if position.get("o") != owner or not _is_int(created_at) or not isinstance(job_id, str):
        raise InvalidCursor("cursor is not valid for this listing; start again without it", field="cursor")
    return {"owner": s(owner), "created_at": n(created_at), "job_id": s(job_id)}


def run_cursor_key(cursor: str, job_id: str) -> Key:
    position = ids.decode_cursor("runs", cursor)
    scheduled_at = position.get("s")
    if position.get("j") != job_id or not _is_int(scheduled_at):
        raise InvalidCursor("cursor is not valid for this listing; start again without it", field="cursor")
    return run_key(job_id, scheduled_at)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
