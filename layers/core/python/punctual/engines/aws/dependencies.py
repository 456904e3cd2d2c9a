"""The ``aws`` engine's dependency items: reverse edges and release records in the ``leases`` table.

Layout (the table's generic ``pk``/``sk`` key, next to shard leases and alerts):

- reverse edge ``upstream -> dependent``: ``pk = dependents#<upstream_id>``, ``sk = <dependent_id>``,
  so "who depends on me" is one Query of one partition. No component may DeleteItem
  (``infra/constructs/access.py``): an edge is retired in place (``unlinked``, skipped by the
  Query) and removed by the table's TTL a day later; a new link (PutItem) replaces it whole;
- release record of a dependent: ``pk = release#<dependent_id>``, ``sk = -``, with
  ``release_gen`` (N), ``released_at`` (N) and one ``u_<upstream hex>`` attribute per filled slot
  (``"<run_id> <finished_at>"``). Every change is one conditional UpdateItem on that item;
- the owner's graph sequence: ``pk = graph#<owner>``, ``sk = -``, ``seq`` (N), for dependency
  decisions too large to list their conditions (:mod:`.edges`, which also writes the edges).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from punctual.engines.aws.items import Item, Key, n, s, ttl_seconds
from punctual.engines.aws.tables import Tables
from punctual.port import ReleaseSlot, ReleaseState

EDGE_PREFIX = "dependents#"
RELEASE_PREFIX = "release#"
_SLOT_PREFIX = "u_"

# Named conditions (the rule each write applies).
SLOT_FREE = "attribute_not_exists({slot})"
NOTHING_RELEASED = "attribute_not_exists(released_at)"
AFTER_LAST_RELEASE = "released_at < :finished_at"
SLOT_FILLABLE = f"{SLOT_FREE} AND ({NOTHING_RELEASED} OR {AFTER_LAST_RELEASE})"
SAME_GENERATION = "release_gen = :generation"
EDGE_EXISTS = "attribute_exists(pk)"
RETIRED_EDGE_TTL_S = 86_400


class DependencyItems:
    """The dependency methods of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    leases_table: str

    def link_dependent(self, dependent_id: str, upstream_ids: Sequence[str]) -> None:
        for upstream_id in upstream_ids:  # at most MAX_UPSTREAMS plain puts (idempotent)
            self._tables.client.put_item(TableName=self.leases_table, Item=edge_key(upstream_id, dependent_id))

    def unlink_dependent(self, dependent_id: str, upstream_ids: Sequence[str], now: int) -> None:
        request = {
            "UpdateExpression": "SET unlinked = :yes, expires_ttl = :ttl",
            "ConditionExpression": EDGE_EXISTS,  # an absent edge stays absent
            "ExpressionAttributeValues": {":yes": {"BOOL": True}, ":ttl": n(ttl_seconds(now) + RETIRED_EDGE_TTL_S)},
        }
        for upstream_id in upstream_ids:
            key = edge_key(upstream_id, dependent_id)
            self._tables.update(self.leases_table, key, request, returns="NONE", old_on_failure=False)

    def dependents_of(self, upstream_id: str) -> list[str]:
        request: dict[str, Any] = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(EDGE_PREFIX + upstream_id)},
            "FilterExpression": "attribute_not_exists(unlinked)",
            "ProjectionExpression": "sk",
            "ConsistentRead": True,
        }
        # one page unless a job has tens of thousands of dependents
        return [item["sk"]["S"] for item in self._tables.query_all(request)]

    def get_release(self, dependent_id: str) -> ReleaseState:
        return _state(dependent_id, self._tables.get(self.leases_table, _release_key(dependent_id)))

    def fill_release(self, dependent_id: str, slot: ReleaseSlot) -> tuple[bool, ReleaseState]:
        name = _slot_name(slot.upstream_id)
        request = {
            "UpdateExpression": f"SET {name} = :slot, release_gen = if_not_exists(release_gen, :zero)",
            "ConditionExpression": SLOT_FILLABLE.format(slot=name),
            "ExpressionAttributeValues": {
                ":slot": s(f"{slot.run_id} {slot.finished_at}"),
                ":zero": n(0),
                ":finished_at": n(slot.finished_at),
            },
        }
        written = self._tables.update(self.leases_table, _release_key(dependent_id), request)
        return written.applied, _state(dependent_id, written.item)

    def complete_release(self, state: ReleaseState, released_at: int) -> bool:
        update = "SET release_gen = release_gen + :one, released_at = :released_at"
        if state.slots:
            update += " REMOVE " + ", ".join(_slot_name(slot.upstream_id) for slot in state.slots)
        request = {
            "UpdateExpression": update,
            "ConditionExpression": SAME_GENERATION,
            "ExpressionAttributeValues": {
                ":one": n(1),
                ":released_at": n(released_at),
                ":generation": n(state.generation),
            },
        }
        return self._tables.update(self.leases_table, _release_key(state.dependent_id), request, returns="NONE").applied


def edge_key(upstream_id: str, dependent_id: str) -> Key:
    return {"pk": s(EDGE_PREFIX + upstream_id), "sk": s(dependent_id)}


def _release_key(dependent_id: str) -> Key:
    return {"pk": s(RELEASE_PREFIX + dependent_id), "sk": s("-")}


def _slot_name(upstream_id: str) -> str:
    return _SLOT_PREFIX + upstream_id.removeprefix("job_")  # job ids are job_ + 32 hex: a safe name


def _state(dependent_id: str, item: Item | None) -> ReleaseState:
    if not item:
        return ReleaseState(dependent_id)
    slots = []
    for name, value in sorted(item.items()):
        if name.startswith(_SLOT_PREFIX):
            run_id, finished_at = value["S"].split(" ")
            slots.append(ReleaseSlot("job_" + name.removeprefix(_SLOT_PREFIX), run_id, int(finished_at)))
    generation = int(item["release_gen"]["N"]) if "release_gen" in item else 0
    released_at = int(item["released_at"]["N"]) if "released_at" in item else None
    return ReleaseState(dependent_id, generation, released_at, tuple(slots))
