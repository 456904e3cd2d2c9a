"""DynamoDB I/O for the ``aws`` engine's store: conditional writes as outcomes, paging and batches.

Nothing here knows what a job or a run is: :mod:`.store` decides what to write (from the rules,
:mod:`.conditions` and :mod:`.updates`) and calls these helpers to write and read it. A failed
condition becomes ``Written(applied=False, item=<old image>)``; every other ``ClientError``
propagates unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from botocore.exceptions import ClientError

from punctual.engines.aws.items import Item, Key
from punctual.errors import Throttled

T = TypeVar("T")
R = TypeVar("R")

_CONDITION_FAILED = "ConditionalCheckFailedException"
_TRANSACTION_CANCELLED = "TransactionCanceledException"
_TRANSACTION_CONFLICT = "TransactionConflictException"
_CANCELLED_BY_A_RACE = {"None", "ConditionalCheckFailed", "TransactionConflict"}  # per-action reason codes
MAX_TRANSACTION_ACTIONS = 100  # DynamoDB's limit of actions (distinct items) per transaction
_MAX_LIST_PAGES = 10  # Query pages one listing may read when a filter drops most items
_BATCH_GET = 100  # BatchGetItem maximum keys
_BATCH_GET_TRIES = 5
_MAX_QUERY_LIMIT = 1000
MAX_PAGE = 1_000  # largest page a listing returns, whatever limit asks for (as the embedded engine)


@dataclass(frozen=True, slots=True)
class Written:
    """What a conditional write did: applied or not, and the item DynamoDB returned with it.

    ``item`` is the new image when applied (if asked for), the old image when the condition failed
    (None if there was no item).
    """

    applied: bool
    item: Item | None


def condition_failed(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED)


def in_conflict(exc: ClientError) -> bool:
    """A single write refused because a transaction on the same item was in flight (a job's edit
    is one: :mod:`.job_items`)."""
    return bool(exc.response.get("Error", {}).get("Code") == _TRANSACTION_CONFLICT)


def _old_image(exc: ClientError) -> Item | None:
    """The item as the failed condition saw it (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    item = cast(dict[str, Any], exc.response).get("Item")
    return cast(Item | None, item)


class Tables:
    """One DynamoDB client and a small thread pool for concurrent single-item requests."""

    def __init__(self, client: Any, *, max_workers: int = 8) -> None:
        self.client = client
        self._max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- I/O helpers -------------------------------------------------------------------------------

    def get(self, table: str, key: Key, *, consistent: bool = True) -> Item | None:
        item: Item | None = self.client.get_item(TableName=table, Key=key, ConsistentRead=consistent).get("Item")
        return item

    def put(self, table: str, item: Item, guard: dict[str, Any], *, old_on_failure: bool = False) -> Written:
        extra = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if old_on_failure else {}
        try:
            self.client.put_item(TableName=table, Item=item, **guard, **extra)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return Written(False, _old_image(exc))
        return Written(True, item)

    def update(
        self,
        table: str,
        key: Key,
        request: dict[str, Any],
        *,
        returns: str = "ALL_NEW",
        old_on_failure: bool = True,
        conflict_refuses: bool = False,
    ) -> Written:
        """One conditional UpdateItem. ``conflict_refuses``: a transaction in flight on the item (an
        edit of a job, :mod:`.job_items`) counts as a refusal too, instead of raising."""
        extra = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if old_on_failure else {}
        try:
            response = self.client.update_item(TableName=table, Key=key, ReturnValues=returns, **request, **extra)
        except ClientError as exc:
            if conflict_refuses and in_conflict(exc):
                return Written(False, None)
            if not condition_failed(exc):
                raise
            return Written(False, _old_image(exc))
        return Written(True, response.get("Attributes"))

    def transact(self, actions: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """One ``TransactWriteItems`` of ``actions`` (at most ``MAX_TRANSACTION_ACTIONS``).

        Returns None when it applied; when DynamoDB cancelled it for a failed condition or a
        conflict with another transaction on one of its items, the cancellation reasons (one per
        action, in order: ``Code``, and ``Item`` for a failed condition that asked for
        ``ALL_OLD``). Any other cancellation (throttling, a validation error) propagates, as the
        same error of a single write does.
        """
        try:
            self.client.transact_write_items(TransactItems=actions)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != _TRANSACTION_CANCELLED:
                raise
            reasons: list[dict[str, Any]] = cast(dict[str, Any], exc.response).get("CancellationReasons", [])
            if not {reason.get("Code", "None") for reason in reasons} <= _CANCELLED_BY_A_RACE:
                raise
            return reasons
        return None

    def collect(
        self, request: dict[str, Any], limit: int, position: Callable[[Item], Key]
    ) -> tuple[list[Item], Key | None]:
        """Query pages until ``limit`` items passed the filter, reading at most a bounded number of pages.

        Returns the items and where the next page starts (None on the last page). That position is the
        last *returned* item when the listing stops inside a page (a page's LastEvaluatedKey would skip
        the rest of it), or the page's LastEvaluatedKey when every item of the page was taken or filtered.
        """
        limit = max(1, min(limit, MAX_PAGE))
        found: list[Item] = []
        for _ in range(_MAX_LIST_PAGES):
            want = limit - len(found)
            # one extra row tells "more follow" without a trailing empty page
            page = self.client.query(**request, Limit=min(max(want + 1, 25), _MAX_QUERY_LIMIT))
            rows = page.get("Items", [])
            if len(rows) > want:
                found.extend(rows[:want])
                return found, position(found[-1])
            found.extend(rows)
            after = page.get("LastEvaluatedKey")
            if after is None:
                return found, None
            request = {**request, "ExclusiveStartKey": after}
            if len(found) == limit:
                return found, after
        return found, request.get("ExclusiveStartKey")

    def query_all(self, request: dict[str, Any], max_pages: int | None = None) -> list[Item]:
        rows: list[Item] = []
        pages = 0
        while max_pages is None or pages < max_pages:
            page = self.client.query(**request)
            pages += 1
            rows.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}
        return rows

    def each(self, fn: Callable[[T], R], values: Sequence[T]) -> list[R]:
        """``fn`` over ``values``, concurrently when there are several (boto3 clients are thread-safe)."""
        if len(values) <= 1:
            return [fn(value) for value in values]
        return list(self.executor().map(fn, values))

    def executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="punctual-ddb")
            return self._pool

    def batch_get(self, table: str, keys: list[Key], *, complete: bool = False, consistent: bool = True) -> list[Item]:
        """Reads of ``keys`` (any number), in no particular order; missing items are absent.

        Strongly consistent unless ``consistent`` is False (half the read units: for items whose
        reader can tell a stale copy, see :mod:`.job_items`). Keys DynamoDB still leaves unprocessed
        after the retries are skipped, or with ``complete`` raise :class:`Throttled` (a listing must
        not silently drop items its cursor moves past).
        """
        items: list[Item] = []
        for chunk_start in range(0, len(keys), _BATCH_GET):
            pending = keys[chunk_start : chunk_start + _BATCH_GET]
            for attempt in range(_BATCH_GET_TRIES):
                request = {table: {"Keys": pending, "ConsistentRead": consistent}}
                response = self.client.batch_get_item(RequestItems=request)
                items.extend(response.get("Responses", {}).get(table, []))
                pending = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
                if not pending:
                    break
                time.sleep(0.05 * 2**attempt)  # throttled: back off; what is left waits for the next sweep
            if pending and complete:
                raise Throttled(f"DynamoDB left {len(pending)} reads unprocessed; retry the request")
        return items
