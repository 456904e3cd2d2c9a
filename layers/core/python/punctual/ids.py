"""Identifiers, shard hashing and pagination cursors.

- A job id is ``job_`` + 32 hex chars: random, or derived from (owner, Idempotency-Key) so that
  an idempotent create can be a plain conditional insert.
- A run id is derived from (job_id, scheduled_at): ``run_<hex>_<scheduled_at_ms>``. The same run
  can never be inserted twice, targets can deduplicate on it, and ``GET /runs/{id}`` decodes it to
  the table key (one GetItem).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
import zlib
from typing import Any

from punctual.errors import InvalidCursor, InvalidId

# The same patterns are declared in the OpenAPI document (path parameters), so a client can tell a
# malformed id (422 invalid_id) from one that does not exist (404) before it asks.
JOB_ID_PATTERN = r"^job_[0-9a-f]{32}$"
RUN_ID_PATTERN = r"^run_[0-9a-f]{32}_[0-9]{1,15}$"
_JOB_ID = re.compile(JOB_ID_PATTERN)
_RUN_ID = re.compile(r"^run_([0-9a-f]{32})_([0-9]{1,15})$")


def new_job_id() -> str:
    return f"job_{uuid.uuid4().hex}"


def job_id_for_idempotency_key(owner: str, key: str) -> str:
    digest = hashlib.blake2b(f"{owner}\x00{key}".encode(), digest_size=16).hexdigest()
    return f"job_{digest}"


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise InvalidId(f"'{job_id}' is not a job id (expected job_ followed by 32 hex digits)", field="job_id")
    return job_id


def run_id_for(job_id: str, scheduled_at: int) -> str:
    return f"run_{job_id[4:]}_{scheduled_at}"


def is_run_id(run_id: object) -> bool:
    """Whether ``run_id`` is a run id (:func:`parse_run_id` would accept it), without parsing it."""
    return isinstance(run_id, str) and _RUN_ID.fullmatch(run_id) is not None


def parse_run_id(run_id: str) -> tuple[str, int]:
    """Return (job_id, scheduled_at) encoded in a run id, or raise :class:`InvalidId`."""
    match = _RUN_ID.fullmatch(run_id) if isinstance(run_id, str) else None
    if not match:
        raise InvalidId(f"'{run_id}' is not a run id (expected run_<32 hex>_<epoch ms>)", field="run_id")
    return f"job_{match.group(1)}", int(match.group(2))


def shard_of(key: str, shards: int) -> int:
    """Stable shard of a key (crc32, identical in every process and language)."""
    return zlib.crc32(key.encode()) % shards


def unit_fraction(key: str) -> float:
    """A deterministic number in [0, 1) derived from a key (used for jitter)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# -- cursors ------------------------------------------------------------------------------------
# A cursor is an opaque, url-safe token around a small JSON position. It carries a kind tag and a
# checksum so that a cursor from another listing, a truncated one, or a hand-edited one is refused
# with a clear 400 instead of silently restarting or failing deep in an engine.


def encode_cursor(kind: str, position: dict[str, Any]) -> str:
    raw = json.dumps({"k": kind, "p": position}, separators=(",", ":"), sort_keys=True).encode()
    check = hashlib.blake2b(raw, digest_size=4).digest()
    return base64.urlsafe_b64encode(check + raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str) -> dict[str, Any]:
    try:
        blob = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        check, raw = blob[:4], blob[4:]
        if hashlib.blake2b(raw, digest_size=4).digest() != check:
            raise ValueError("checksum")
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("k") != kind or not isinstance(data.get("p"), dict):
            raise ValueError("kind")
        position: dict[str, Any] = data["p"]
        if any(isinstance(v, int) and not -(2**63) <= v < 2**63 for v in position.values()):
            raise ValueError("out of range")  # no stored key is that large; engines would overflow
        return position
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidCursor("cursor is not valid for this listing; start again without it", field="cursor") from exc
