"""A job's timing rules (its DST policy) in both engines' stored forms and due indexes (issue 32).

The claim plans from the due index alone, so each engine must carry the rules there; a job that keeps
the defaults carries nothing (no byte more per claim), and a file or table written before the rules
existed reads as the defaults."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from punctual.clock import ManualClock
from punctual.engines.aws import items as it
from punctual.engines.aws import job_items as ji
from punctual.engines.embedded import schema
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.store import EmbeddedStore
from punctual.model import HttpTarget, Job
from punctual.model.timing import (
    CRON_RULE,
    DEFAULT_TIMING,
    CalendarMode,
    DstPolicy,
    DstRepeated,
    DstSkipped,
    JobCalendar,
    Timing,
    read_timing,
    timing_text,
)
from punctual.resources import DUE_INDEX

pytestmark = pytest.mark.unit

T = 1_800_000_000_000


def _job(job_id: str = "job_" + "a" * 32, **fields: object) -> Job:
    values: dict[str, object] = {
        "id": job_id,
        "owner": "owner-a",
        "name": "nightly",
        "schedule": "30 1 * * *",
        "timezone": "America/New_York",
        "target": HttpTarget(url="https://example.com/hook"),
        "next_run_at": T,
        "created_at": T,
        "updated_at": T,
        **fields,
    }
    return Job.model_validate(values)


def test_the_timing_text_holds_only_what_differs_from_the_defaults() -> None:
    assert timing_text(CRON_RULE) is None and read_timing(None) == DEFAULT_TIMING
    policy = DstPolicy(DstRepeated.ONCE_LAST, None)
    assert timing_text(policy) == "r=l"
    assert read_timing(timing_text(policy)) == Timing(policy)
    both = DstPolicy(DstRepeated.TWICE, DstSkipped.SKIP)
    calendar = JobCalendar(name="us-bank.v2", mode=CalendarMode.NEXT_BUSINESS_DAY)
    text = timing_text(both, calendar, once=T)
    assert text == f"r=t;s=k;o={T};c=n:us-bank.v2"
    assert read_timing(text) == Timing(both, calendar, T)
    assert timing_text(CRON_RULE, None, once=T) is None  # a one-time job's time is kept with a calendar only
    assert "timing" in DUE_INDEX.non_key_attributes


def test_aws_head_carries_timing_to_the_due_index_only_when_set() -> None:
    plain_head, _ = ji.job_to_items(_job(), retention_days=30)
    assert "timing" not in plain_head and it.item_to_due_job(plain_head).dst == CRON_RULE
    job = _job(dst_repeated="twice", dst_skipped="skip", calendar={"name": "weekdays"})
    head, spec = ji.job_to_items(job, retention_days=30)
    due = it.item_to_due_job(head)
    assert due.dst == DstPolicy(DstRepeated.TWICE, DstSkipped.SKIP) and due.calendar == job.calendar
    assert ji.items_to_job(head, spec) == job
    # the job is a user of its calendar (the by_calendar index: on the spec item, never rewritten by a claim)
    assert "calendar_of" in spec and "calendar_of" not in head and "calendar_of" not in plain_head


def test_embedded_due_index_carries_timing(tmp_path: Path) -> None:
    db = Database(tmp_path / "p.db", shards=1)
    store = EmbeddedStore(db, shards=1, clock=ManualClock(T))
    try:
        store.create_job(_job("job_" + "1" * 32))
        store.create_job(_job("job_" + "2" * 32, dst_repeated="once_last"))
        due = {d.job_id: d.dst for d in store.due_jobs(0, T, 10)}
        assert due == {"job_" + "1" * 32: CRON_RULE, "job_" + "2" * 32: DstPolicy(DstRepeated.ONCE_LAST, None)}
        assert store.get_job("job_" + "2" * 32).dst_repeated is DstRepeated.ONCE_LAST
    finally:
        db.close()


def test_a_v10_file_keeps_its_jobs_due_with_the_defaults(tmp_path: Path) -> None:
    # Given a file as version 10 left it, with one due job
    path = tmp_path / "p.db"
    job = _job()
    with sqlite3.connect(path) as conn:
        for step in schema.MIGRATIONS[:10]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('shards', '1')")
        conn.execute("PRAGMA user_version = 10")
        conn.execute(
            "INSERT INTO jobs (job_id, owner, status, due_shard, next_run_at, created_at, updated_at, version,"
            " schedule, timezone, jitter_s, overlap, catchup, max_backfill, doc)"
            " VALUES (?, 'owner-a', 'active', 0, ?, ?, ?, 1, '30 1 * * *', 'America/New_York', 0, 'allow',"
            " 'latest', 10, ?)",
            (
                job.id,
                T,
                T,
                T,
                job.model_dump_json(exclude={"status", "next_run_at", "last_run_at", "updated_at", "version"}),
            ),
        )
    # When it is opened, then the job is due as before, with cron's rule, and the index is the current one
    db = Database(path, shards=1)
    store = EmbeddedStore(db, shards=1, clock=ManualClock(T))
    try:
        assert [(d.job_id, d.dst) for d in store.due_jobs(0, T, 10)] == [(job.id, CRON_RULE)]
        assert store.get_job(job.id) == job
    finally:
        db.close()
    with sqlite3.connect(path) as conn:
        indexes = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
    assert indexes["jobs_due"] == schema.current_indexes()["jobs_due"] and "timing" in indexes["jobs_due"]
