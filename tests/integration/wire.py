"""Counting on the wire: requests per operation and DynamoDB write units, from botocore's events.

moto reports ``ConsumedCapacity`` as a constant 1.0 per request whatever the item size and
indexes, so :class:`WriteMeter` computes each write's units from the item before and after it with
DynamoDB's published rules; :class:`RequestCounter` counts the requests each client sends.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import boto3

from punctual.engines.aws import AwsEngine
from punctual.resources import TABLES, IndexDef, TableDef


class RequestCounter:
    """Counts requests per (service, operation) sent by the engine's DynamoDB and SQS clients."""

    def __init__(self, *clients: Any) -> None:
        self.counts: Counter[str] = Counter()
        self._clients = clients
        for client in clients:
            client.meta.events.register("before-call", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.counts[f"{model.service_model.service_name}:{model.name}"] += 1

    def close(self) -> None:
        for client in self._clients:
            client.meta.events.unregister("before-call", self._record)

    def of(self, service: str) -> dict[str, int]:
        prefix = f"{service}:"
        return {k.removeprefix(prefix): v for k, v in self.counts.items() if k.startswith(prefix)}


_WRITES = ("PutItem", "UpdateItem", "DeleteItem")


class WriteMeter:
    """Counts write requests per phase and computes their write units from before/after images.

    DynamoDB's rules: a write costs ceil(max(size before, size after) / 1 KB) units on the table;
    on each GSI, an entry put or deleted costs ceil(entry size / 1 KB), a key change is a delete
    plus a put, and an update of projected attributes costs one write. An index entry's size is
    its projected attributes plus 100 bytes.
    """

    def __init__(self, engine: AwsEngine, tables: tuple[TableDef, ...] = TABLES) -> None:
        self._events = engine.clients.dynamodb.meta.events
        # an unserialized client for the before/after reads: safe inside request hooks (no lock re-entry)
        self._reader = boto3.client("dynamodb", region_name=engine.settings.region)
        self._tables = {table.logical_name: table for table in tables}
        self._phase = ""
        self.requests: dict[str, int] = {}
        self.units: dict[str, int] = {}
        self.largest: dict[str, int] = {}  # the largest item image (before or after) a phase wrote, bytes
        # before-parameter-build sees the API parameters; after-call shares its request context
        self._events.register("before-parameter-build.dynamodb", self._on_before)
        self._events.register("after-call.dynamodb", self._on_after)

    def phase(self, name: str) -> WriteMeter:
        self._phase = name
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._phase = ""

    def close(self) -> None:
        self._events.unregister("before-parameter-build.dynamodb", self._on_before)
        self._events.unregister("after-call.dynamodb", self._on_after)

    def _on_before(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if model.name in _WRITES and self._phase:
            context["meter"] = (dict(params), self._image(params))

    def _on_after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if "meter" not in context:
            return
        params, before = context.pop("meter")
        table = self._table_def(params["TableName"])
        after = self._image(params)
        units = _write_units(table, before, after)
        self.requests[self._phase] = self.requests.get(self._phase, 0) + 1
        self.units[self._phase] = self.units.get(self._phase, 0) + units
        size = max(item_size(before or {}), item_size(after or {}))
        self.largest[self._phase] = max(self.largest.get(self._phase, 0), size)

    def _table_def(self, physical: str) -> TableDef:
        return self._tables[physical.split("-", 1)[1]]

    def _image(self, params: dict[str, Any]) -> dict[str, Any] | None:
        table = self._table_def(params["TableName"])
        names = [table.partition.name, *([table.sort.name] if table.sort else [])]
        key = params.get("Key") or {name: params["Item"][name] for name in names}
        item: dict[str, Any] | None = self._reader.get_item(
            TableName=params["TableName"], Key=key, ConsistentRead=True
        ).get("Item")
        return item


def _write_units(table: TableDef, before: dict[str, Any] | None, after: dict[str, Any] | None) -> int:
    units = _units(max(item_size(before or {}), item_size(after or {})))
    for index in table.indexes:
        old, new = _index_entry(table, index, before), _index_entry(table, index, after)
        if old is None and new is None:
            continue
        if old is None or new is None:
            units += _units(item_size(old or new or {}) + 100)
        elif any(old[k.name] != new[k.name] for k in _index_keys_of(index)):
            units += _units(item_size(old) + 100) + _units(item_size(new) + 100)
        elif old != new:
            units += _units(item_size(new) + 100)
    return units


def _index_keys_of(index: IndexDef) -> list[Any]:
    return [index.partition, *([index.sort] if index.sort else [])]


def _index_entry(table: TableDef, index: IndexDef, item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None or any(key.name not in item for key in _index_keys_of(index)):
        return None  # sparse: an item without every index key attribute is not in the index
    if index.projection == "ALL":
        return dict(item)
    names = {table.partition.name, *([table.sort.name] if table.sort else []), *(k.name for k in _index_keys_of(index))}
    if index.projection == "INCLUDE":
        names |= set(index.non_key_attributes)
    return {name: value for name, value in item.items() if name in names}


def _units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, raw), *_ = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in raw.items())
    return 1


_READS = ("GetItem", "BatchGetItem", "Query")
_READ_UNIT = 4096


class ReadMeter:
    """Read units per phase, from the items each read returned, by DynamoDB's published rules.

    A GetItem costs ceil(size / 4 KB) units strongly consistent, half that eventually consistent,
    and a key with no item the minimum (1 or 0.5); BatchGetItem costs each key as a GetItem; a Query
    costs the total size of the items it returned, rounded up to 4 KB once, halved unless strongly
    consistent (a GSI's always are eventually consistent). A Query's filter is not seen: only use it
    on queries without one.
    """

    def __init__(self, engine: AwsEngine) -> None:
        self._events = engine.clients.dynamodb.meta.events
        self._phase = ""
        self.units: dict[str, float] = {}
        self.requests: dict[str, int] = {}
        self._events.register("before-parameter-build.dynamodb", self._on_before)
        self._events.register("after-call.dynamodb", self._on_after)

    def phase(self, name: str) -> ReadMeter:
        self._phase = name
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._phase = ""

    def close(self) -> None:
        self._events.unregister("before-parameter-build.dynamodb", self._on_before)
        self._events.unregister("after-call.dynamodb", self._on_after)

    def _on_before(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if model.name in _READS and self._phase:
            context["read_meter"] = dict(params)

    def _on_after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params = context.pop("read_meter", None)
        if params is None:
            return
        units = read_units(model.name, params, parsed)
        self.units[self._phase] = self.units.get(self._phase, 0.0) + units
        self.requests[self._phase] = self.requests.get(self._phase, 0) + 1


def read_units(operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
    """The read units of one read request (see :class:`ReadMeter`)."""
    if operation == "GetItem":
        factor = 1.0 if params.get("ConsistentRead") else 0.5
        return factor * _units_of(item_size(parsed.get("Item") or {}), _READ_UNIT)
    if operation == "BatchGetItem":
        total = 0.0
        for table, request in params["RequestItems"].items():
            factor = 1.0 if request.get("ConsistentRead") else 0.5
            found = parsed.get("Responses", {}).get(table, [])
            unprocessed = parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            missing = len(request["Keys"]) - len(found) - len(unprocessed)
            total += factor * (sum(_units_of(item_size(item), _READ_UNIT) for item in found) + missing)
        return total
    factor = 1.0 if params.get("ConsistentRead") and "IndexName" not in params else 0.5
    return factor * _units_of(sum(item_size(item) for item in parsed.get("Items", [])), _READ_UNIT)


def _units_of(size: int, unit: int) -> int:
    return max(1, math.ceil(size / unit))
