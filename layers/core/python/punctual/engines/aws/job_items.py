"""A job as two DynamoDB items: its small *head*, which the claim rewrites, and its *spec*.

DynamoDB bills a write by the size of the item (the larger of its images before and after), in
whole KB. The claim advances a job on every run; when it rewrote one item holding the payload and
the target's headers, a job with a 1 KB payload and 4 KB of headers cost 6 units per claim plus
the ``due`` index's 2. So the job is kept as two items of the ``jobs`` table:

- the head, key ``job_id = <id>``: what scheduling reads and writes (status, ``next_run_at``,
  ``due_shard``, ``version``, the schedule and the ``due`` index's projection), the conditions of
  dependency decisions (``depends_on``, ``has_dependents``), the ``by_owner`` index's key,
  ``spec_version``, and the state of ``pause_after_failures`` (``paused_after``, ``resumed_at``). It
  is what every conditional write of a job is conditioned on, so pause, resume, edit and delete still
  move exactly what the claim (``JOB_STILL_DUE``) and the API (``VERSION_MATCHES``) check. Under 1 KB
  for every job whose owner, schedule, time zone and calendar name fit ``HEAD_TEXT_BYTES``
  (tests/unit/test_aws_job_items.py): one write unit per claim;
- the spec, key ``job_id = <id>#spec``: what only executing a run needs (name, payload, target with
  its headers, retry policy, ``pause_after_failures`` and ``notify``) and ``spec_version``. Written
  only with the head, in one transaction (create, edit, pause, delete); never by a claim, nor by a
  pause for failures (``engines.aws.outcomes``). It carries no ``owner``/``created_at`` and no
  ``due_shard``/``next_run_at``, so it is in neither index.

``spec_version`` is the job's ``version`` when its spec was last written, on both items. A claim
bumps the head's ``version`` but not ``spec_version``. A reader takes the head strongly consistent
and the spec eventually consistent (half the read units): a spec whose ``spec_version`` differs
from the head's is stale or newer than the head read, and is read again (:mod:`.jobs`).

A head without ``spec_version`` is a job stored whole by an earlier version: read as it is, and
split by its next write.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from punctual.engines.aws.calendars import calendar_of
from punctual.engines.aws.items import Item, Key, get_n, get_s, js, n, s, ttl_seconds
from punctual.model import DEFAULT_PRIORITY, Completion, Job, JobStatus
from punctual.model.stored import StoredReader
from punctual.model.timing import read_timing

SPEC_SUFFIX = "#spec"  # job ids are job_ + 32 hex digits: a spec key never names a head
_DAY_S = 86_400
_JOBS = StoredReader(Job)  # stored jobs are parsed without the checks that only refuse input
# The head's text fields whose length the user or the authorizer chooses (owner, schedule, time zone,
# calendar name); everything else in a head is bounded by the model. At most this many bytes of them
# together keep a head under 1 KB.
HEAD_TEXT_BYTES = 700


def spec_key(job_id: str) -> Key:
    return {"job_id": s(job_id + SPEC_SUFFIX)}


def job_to_items(job: Job, *, retention_days: int) -> tuple[Item, Item]:
    """The head and spec items of ``job``; due-index attributes only while it is active.

    Raises ValueError for an active job without ``next_run_at`` (unless it depends on others) and
    for a payload that is not JSON (infinity, NaN).
    """
    if job.status is JobStatus.ACTIVE and job.next_run_at is None and job.depends_on is None:
        raise ValueError(f"active job {job.id} needs next_run_at")
    head: Item = {
        "job_id": s(job.id),
        "owner": s(job.owner),
        "timezone": s(job.timezone),
        "timeout_s": n(job.timeout_s),
        "jitter_s": n(job.jitter_s),
        "overlap": s(job.overlap.value),
        "catchup": s(job.catchup.value),
        "max_backfill": n(job.max_backfill),
        "status": s(job.status.value),
        "due_shard": n(job.due_shard),
        "created_at": n(job.created_at),
        "updated_at": n(job.updated_at),
        "version": n(job.version),
        "spec_version": n(job.version),
    }
    _put(head, "schedule", None if job.schedule is None else s(job.schedule))
    _put(head, "run_at", None if job.run_at is None else s(job.run_at.isoformat()))
    _put(head, "last_run_at", None if job.last_run_at is None else n(job.last_run_at))
    _put(head, "rescheduled_at", None if job.rescheduled_at is None else n(job.rescheduled_at))
    _put(head, "depends_on", None if job.depends_on is None else {"S": job.depends_on.model_dump_json()})
    timing = job.timing_text()  # in the due index's projection: the claim plans with it
    _put(head, "timing", None if timing is None else s(timing))
    _put(head, "paused_after", None if job.paused_after is None else s(job.paused_after))
    _put(head, "resumed_at", None if job.resumed_at is None else n(job.resumed_at))
    if job.has_dependents:
        head["has_dependents"] = {"BOOL": True}
    if job.status is JobStatus.ACTIVE and job.next_run_at is not None:
        head["next_run_at"] = n(job.next_run_at)
    spec: Item = {
        **spec_key(job.id),
        "spec_version": n(job.version),
        "name": s(job.name),
        "target": {"S": job.target.model_dump_json()},
        "max_retries": n(job.max_retries),
        "retry": {"S": job.retry.model_dump_json()},
    }
    _put(spec, "payload", None if job.payload is None else js(job.payload))
    _put(spec, "pause_after_failures", None if job.pause_after_failures is None else n(job.pause_after_failures))
    _put(spec, "notify", None if job.notify is None else {"S": job.notify.model_dump_json()})
    _put(spec, "deadline_s", None if job.deadline_s is None else n(job.deadline_s))
    # async completion: written only for a callback job, so every other job is stored as before
    _put(spec, "completion", None if job.completion is Completion.RESPONSE else s(job.completion.value))
    _put(spec, "heartbeat_timeout_s", None if job.heartbeat_timeout_s is None else n(job.heartbeat_timeout_s))
    # priority and keyed limits: written only when set, so a job without them is stored as before
    _put(spec, "priority", None if job.priority == DEFAULT_PRIORITY else n(job.priority))
    _put(spec, "limits", None if not job.limits else js([limit.model_dump(exclude_none=True) for limit in job.limits]))
    if job.calendar is not None and job.status is not JobStatus.DELETED:  # the by_calendar index: its users
        spec["calendar_of"] = s(calendar_of(job.owner, job.calendar.name))
    if job.status is JobStatus.DELETED:
        # kept for history until retention, then DynamoDB TTL removes both items
        expires = n(ttl_seconds(job.updated_at) + retention_days * _DAY_S)
        head["expires_at"] = spec["expires_at"] = expires
    return head, spec


def needs_spec(head: Item) -> bool:
    """Whether ``head`` is read with a spec item (False: a job stored whole by an earlier version)."""
    return "spec_version" in head


def spec_matches(head: Item, spec: Item | None) -> bool:
    """Whether ``spec`` is the spec ``head`` names (the same ``spec_version``)."""
    return spec is not None and spec.get("spec_version") == head.get("spec_version")


def items_to_job(head: Item, spec: Item | None = None) -> Job:
    """The job of ``head`` and its matching ``spec`` (None for a head stored whole)."""
    whole = head if spec is None else spec
    payload = get_s(whole, "payload")
    run_at = get_s(head, "run_at")
    depends_on = get_s(head, "depends_on")
    timing = read_timing(get_s(head, "timing"))
    data: dict[str, Any] = {
        "id": get_s(head, "job_id"),
        "owner": get_s(head, "owner"),
        "name": get_s(whole, "name"),
        "schedule": get_s(head, "schedule"),
        "timezone": get_s(head, "timezone"),
        "dst_repeated": timing.dst.repeated,
        "dst_skipped": timing.dst.skipped,
        "calendar": timing.calendar,
        "run_at": None if run_at is None else datetime.fromisoformat(run_at),
        "depends_on": None if depends_on is None else json.loads(depends_on),
        "has_dependents": head.get("has_dependents", {}).get("BOOL", False),
        "payload": None if payload is None else json.loads(payload),
        "target": json.loads(whole["target"]["S"]),
        "timeout_s": get_n(head, "timeout_s"),
        "max_retries": get_n(whole, "max_retries"),
        "retry": json.loads(whole["retry"]["S"]),
        "priority": DEFAULT_PRIORITY if (priority := get_n(whole, "priority")) is None else priority,
        "limits": json.loads(get_s(whole, "limits") or "[]"),
        "jitter_s": get_n(head, "jitter_s"),
        "overlap": get_s(head, "overlap"),
        "catchup": get_s(head, "catchup"),
        "max_backfill": get_n(head, "max_backfill"),
        "status": get_s(head, "status"),
        "next_run_at": get_n(head, "next_run_at"),
        "last_run_at": get_n(head, "last_run_at"),
        "rescheduled_at": get_n(head, "rescheduled_at"),
        "due_shard": get_n(head, "due_shard"),
        "created_at": get_n(head, "created_at"),
        "updated_at": get_n(head, "updated_at"),
        "version": get_n(head, "version"),
    }
    for name, value in (
        ("pause_after_failures", get_n(whole, "pause_after_failures")),
        ("notify", None if (notify := get_s(whole, "notify")) is None else json.loads(notify)),
        ("deadline_s", get_n(whole, "deadline_s")),
        ("completion", get_s(whole, "completion")),
        ("heartbeat_timeout_s", get_n(whole, "heartbeat_timeout_s")),
        ("paused_after", get_s(head, "paused_after")),
        ("resumed_at", get_n(head, "resumed_at")),
    ):
        if value is not None:  # set only when set: a job's model leaves them out while unset
            data[name] = value
    return _JOBS.python(data)


def _put(item: Item, name: str, value: dict[str, Any] | None) -> None:
    if value is not None:
        item[name] = value
