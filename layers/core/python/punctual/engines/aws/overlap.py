"""The overlap decision of a run's first lease on DynamoDB (the rules are ``punctual.rules.overlap_*``).

Only jobs with ``overlap`` forbid or replace pay for it: one consistent Query, newest first, that
reads the run itself and the runs before it (usually one: the scan stops at the first run that
started and ended), then at most a conditional write per run it changes. Each write is a
compare-and-set on the run as read, so a race is harmless:

- forbid: the skip is written only if the new run is still as read (scheduled); if a duplicate
  delivery leased or skipped it first, the ordinary lease path reports what it found;
- replace: an earlier run that finished or moved on meanwhile is re-read, and cancelled only while
  still open (at most twice); the new run is then leased as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from punctual import rules
from punctual.engines.aws import items as it
from punctual.engines.aws.items import n, s
from punctual.engines.aws.tables import Tables
from punctual.errors import ConcurrentModification, RunNotFound
from punctual.model import Overlap, Run
from punctual.port import LeaseOutcome, LeaseResult, RunChange

_FIRST_PAGE = 4  # the run and its few predecessors: enough in the common case
_PAGE = 100

Transition = Callable[[Run, RunChange], Run]
Reread = Callable[[str, int], Run]


def decide(
    tables: Tables,
    runs_table: str,
    job_id: str,
    scheduled_at: int,
    *,
    overlap: Overlap,
    now: int,
    transition: Transition,
    reread: Reread,
) -> LeaseResult | None:
    """Apply the overlap policy before a lease: a SKIPPED result, or None to lease as usual."""
    rows = _runs_up_to(tables, runs_table, job_id, scheduled_at)
    run = next(rows, None)
    if run is None or run.scheduled_at != scheduled_at or not rules.overlap_applies(run, overlap):
        return None  # gone, or not its first lease: the lease path says what it is
    blockers = rules.overlap_blockers(overlap, rows)
    action = rules.overlap_action(overlap, blockers)
    if action is rules.OverlapAction.SKIP:
        try:
            return LeaseResult(LeaseOutcome.SKIPPED, transition(run, rules.overlap_skip(blockers[0], now)))
        except ConcurrentModification:
            return None  # another delivery got there first
    for blocker in blockers:  # REPLACE (LEASE: none)
        _cancel(blocker, rules.overlap_replacement(run, now), transition, reread)
    return None


def _cancel(run: Run, change: RunChange, transition: Transition, reread: Reread) -> None:
    for _ in range(2):
        try:
            transition(run, change)
            return
        except ConcurrentModification:
            try:
                run = reread(run.job_id, run.scheduled_at)
            except RunNotFound:
                return
            if not run.is_open:
                return  # it finished meanwhile: nothing to replace, its finish stands


def _runs_up_to(tables: Tables, runs_table: str, job_id: str, scheduled_at: int) -> Iterator[Run]:
    """The job's runs with ``scheduled_at <= scheduled_at``, newest first, consistent, paged lazily."""
    request: dict[str, Any] = {
        "TableName": runs_table,
        "KeyConditionExpression": "job_id = :job AND scheduled_at <= :at",
        "ExpressionAttributeValues": {":job": s(job_id), ":at": n(scheduled_at)},
        "ScanIndexForward": False,
        "ConsistentRead": True,
        "Limit": _FIRST_PAGE,
    }
    for _ in range(1 + rules.OVERLAP_SCAN // _PAGE):
        page = tables.client.query(**request)
        yield from (it.item_to_run(item) for item in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return
        request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"], "Limit": _PAGE}
