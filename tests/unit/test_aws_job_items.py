"""Item sizes of the aws engine (issue 30, item 1): every write a run needs stays under 1 KB.

A job is a small head (what the claim rewrites) and a spec (payload, target, headers: never written
by a claim): ``punctual.engines.aws.job_items``. A finish fits its log entry to the run's record
(``punctual.execution.changes.fit_record``). Sizes by DynamoDB's rules (``tests.integration.wire``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from punctual import rules
from punctual.engines.aws import items as it
from punctual.engines.aws import job_items as ji
from punctual.execution.changes import fit_record
from punctual.model import (
    MAX_BACKFILL,
    MAX_EXCERPT_CHARS,
    MAX_JITTER_S,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    Attempt,
    AttemptOutcome,
    HttpTarget,
    Job,
    JobStatus,
    RetryPolicy,
    Run,
    RunState,
)
from punctual.model.bounds import MIN_ERROR_KEPT, RUN_RECORD_BYTES
from punctual.model.states import Catchup, Overlap
from punctual.model.timing import CalendarMode, DstRepeated, DstSkipped, JobCalendar
from punctual.port import RunChange
from punctual.resources import DUE_INDEX, JOBS
from tests.integration.wire import _index_entry, item_size

pytestmark = pytest.mark.unit

BIG = 9_999_999_999_999  # epoch ms in the year 2286: every time field at its widest
T = 1_800_000_000_000
HEADERS = {f"x-hdr-{i}": "h" * 505 for i in range(8)}  # 4 KB


def _job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": "job_" + "f" * 32,
        "owner": "owner-a",
        "name": "nightly-report",
        "schedule": "*/5 * * * *",
        "timezone": "Europe/Berlin",
        "target": HttpTarget(url="https://example.com/hook", headers=HEADERS),
        "payload": {"data": "p" * 1013},
        "next_run_at": T,
        "due_shard": 3,
        "created_at": T,
        "updated_at": T,
        **fields,
    }
    return Job(**values)


def _widest(owner: str, schedule: str, timezone: str, calendar: str) -> Job:
    """A job with every field of its head at the widest the model allows, but the four texts."""
    return Job.model_construct(
        **{
            **_job().__dict__,
            "owner": owner,
            "schedule": schedule,
            "timezone": timezone,
            "status": JobStatus.COMPLETED,  # the longest status a claim writes
            "next_run_at": BIG,
            "last_run_at": BIG,
            "rescheduled_at": BIG,
            "due_shard": 99_999,
            "created_at": BIG,
            "updated_at": BIG,
            "version": 9_999_999_999,
            "timeout_s": MAX_TIMEOUT_S,
            "jitter_s": MAX_JITTER_S,
            "overlap": Overlap.REPLACE,
            "catchup": Catchup.BACKFILL,
            "max_backfill": MAX_BACKFILL,
            "has_dependents": True,
            "dst_repeated": DstRepeated.ONCE_FIRST,  # the longest timing text
            "dst_skipped": DstSkipped.SHIFT,
            "calendar": JobCalendar(name=calendar, mode=CalendarMode.NEXT_BUSINESS_DAY),
        }
    )


def test_a_head_stays_under_one_write_unit_while_its_texts_fit_the_stated_bound() -> None:
    # Given the owner, schedule, time zone and calendar name sharing HEAD_TEXT_BYTES (the time zone,
    # schedule and calendar name at their model bounds, the owner taking the rest), every other field at its widest
    timezone, schedule, calendar = "z" * 64, "5" * 256, "c" * 64
    owner = "o" * (ji.HEAD_TEXT_BYTES - len(timezone) - len(schedule) - len(calendar))
    head, _ = ji.job_to_items(_widest(owner, schedule, timezone, calendar), retention_days=30)
    head["next_run_at"] = it.n(BIG)  # as a claim leaves it (a completed job has none: the widest case)
    # Then the head, the item a claim rewrites, and its due-index entry each cost one write unit
    assert item_size(head) <= 1024
    entry = _index_entry(JOBS, DUE_INDEX, head)
    assert entry is not None and item_size(entry) + 100 <= 1024


def test_the_reference_job_splits_into_a_small_head_and_its_spec() -> None:
    job = _job(max_retries=MAX_RETRIES, retry=RetryPolicy(backoff_s=5, max_backoff_s=50), last_run_at=T - 60_000)
    head, spec = ji.job_to_items(job, retention_days=30)
    # the head holds no payload, target or headers; the spec holds them and is in neither index
    assert item_size(head) < 300 and item_size(spec) > 5 * 1024
    assert not {"payload", "target", "name", "retry", "max_retries"} & head.keys()
    assert not {"owner", "created_at", "due_shard", "next_run_at"} & spec.keys()
    assert spec["job_id"] == {"S": job.id + ji.SPEC_SUFFIX} and ji.spec_matches(head, spec)
    assert ji.items_to_job(head, spec) == job


def test_a_spec_of_another_version_does_not_match_its_head() -> None:
    head, spec = ji.job_to_items(_job(version=3), retention_days=30)
    newer, _ = ji.job_to_items(_job(version=4), retention_days=30)
    assert ji.spec_matches(head, spec) and not ji.spec_matches(newer, spec) and not ji.spec_matches(head, None)
    # a claim bumps the head's version, never its spec_version: the spec still matches
    head["version"] = it.n(9)
    assert ji.spec_matches(head, spec)


def test_a_job_stored_whole_by_an_earlier_version_still_reads() -> None:
    job = _job()
    head, spec = ji.job_to_items(job, retention_days=30)
    whole = {**head, **{k: v for k, v in spec.items() if k not in ("job_id", "spec_version")}}
    del whole["spec_version"]
    assert not ji.needs_spec(whole) and ji.items_to_job(whole) == job


def test_deleted_jobs_expire_both_items() -> None:
    head, spec = ji.job_to_items(_job(status=JobStatus.DELETED, next_run_at=None), retention_days=30)
    assert head["expires_at"] == spec["expires_at"] == it.n(T // 1000 + 30 * 86_400)


# -- a finish's log entry -------------------------------------------------------------------------


def _leased(owner: str = "owner-a") -> Run:
    return Run(
        job_id="job_" + "f" * 32,
        scheduled_at=T,
        owner=owner,
        state=RunState.RUNNING,
        attempt=1,
        worker_id="worker-0123456789abcdef",
        lease_expires_at=T + 60_000,
        started_at=T + 5,
        deadline_at=T + 60_000,
        created_at=T - 5_000,
        expires_at=T // 1000 + 30 * 86_400,
    )


def _finish(run: Run, *, excerpt: str | None = None, error: str | None = None) -> RunChange:
    outcome = AttemptOutcome.FAILED if error else AttemptOutcome.SUCCEEDED
    record = Attempt(
        number=1,
        worker_id=run.worker_id,
        started_at=T + 5,
        finished_at=T + 90,
        outcome=outcome,
        status_code=500 if error else 200,
        error=error,
        response_excerpt=excerpt,
    )
    state = RunState.FAILED if error else RunState.SUCCEEDED
    return RunChange(state=state, now=T + 90, deadline_at=T + 90, append=record, finished_at=T + 90)


def _stored_bytes(run: Run, change: RunChange) -> int:
    after = rules.apply_change(run, change)
    item = it.run_to_item(after, open_shards=16)
    assert item_size(item) <= len(after.model_dump_json(exclude_none=True).encode())  # the JSON bounds the item
    return item_size(item)


def test_a_full_ascii_excerpt_fits_and_is_kept_whole() -> None:
    run = _leased()
    change = _finish(run, excerpt="r" * MAX_EXCERPT_CHARS)
    assert fit_record(run, change) is change
    assert _stored_bytes(run, change) <= 1024


def test_an_excerpt_that_does_not_fit_is_cut_to_fit() -> None:
    # Given a response of multi-byte characters: 512 characters, 1.5 KB
    run = _leased()
    change = _finish(run, excerpt="é" * MAX_EXCERPT_CHARS)
    fitted = fit_record(run, change)
    # Then the entry keeps what fits, marked as cut, and the record is one write unit
    assert fitted.append is not None and fitted.append.response_excerpt is not None
    assert fitted.append.response_excerpt.endswith("...") and 100 < len(fitted.append.response_excerpt) < 512
    assert _stored_bytes(run, fitted) <= 1024
    assert replace(fitted, append=change.append) == change  # nothing else changed


def test_the_error_is_cut_after_the_excerpt_but_keeps_its_start() -> None:
    run = _leased(owner="o" * 200)
    change = _finish(run, excerpt="x" * 300, error="E" * 1000)
    fitted = fit_record(run, change)
    assert fitted.append is not None
    assert fitted.append.response_excerpt is None
    assert fitted.append.error is not None and fitted.append.error.startswith("E" * MIN_ERROR_KEPT)
    assert _stored_bytes(run, fitted) <= RUN_RECORD_BYTES


def test_a_record_over_the_bound_for_other_reasons_keeps_the_errors_start() -> None:
    run = _leased(owner="o" * 900)  # an owner near the authorizer's bound: no room at all
    change = _finish(run, excerpt="x", error="E" * 500)
    fitted = fit_record(run, change)
    assert fitted.append is not None and fitted.append.response_excerpt is None
    assert fitted.append.error == "E" * MIN_ERROR_KEPT + "..."
