"""History written straight into the dev stack's SQLite file (the embedded engine allows several
processes on one file), so the console has weeks of runs to draw: what a real deployment shows."""

from __future__ import annotations

from pathlib import Path

from punctual import ids
from punctual.api.auth import DEFAULT_DEV_OWNER
from punctual.cli.common import engine_from_settings
from punctual.config import Settings
from punctual.model import AlertKind, Attempt, AttemptOutcome, Run, RunState, Trigger
from punctual.port import Alert, RunChange

DAY_MS = 86_400_000
MINUTE_MS = 60_000


def _attempt(number: int, start: int, took: int, outcome: AttemptOutcome, **extra: object) -> Attempt:
    return Attempt(
        number=number,
        worker_id=f"worker-{1 + number % 2}",
        started_at=start,
        finished_at=start + took,
        outcome=outcome,
        **extra,  # type: ignore[arg-type]
    )


def _run(job_id: str, scheduled_at: int, late: int, attempts: list[Attempt], state: RunState) -> Run:
    return Run(
        job_id=job_id,
        scheduled_at=scheduled_at,
        owner=DEFAULT_DEV_OWNER,
        state=state,
        trigger=Trigger.SCHEDULE,
        attempt=len(attempts),
        started_at=scheduled_at + late,
        finished_at=attempts[-1].finished_at,
        deadline_at=scheduled_at + DAY_MS,
        created_at=scheduled_at - 2_000,
        expires_at=(scheduled_at + 400 * DAY_MS) // 1000,
        attempts=attempts,
    )


def daily_history(job_id: str, now: int, days: int, hour_utc_ms: int) -> list[Run]:
    """One run a day for ``days`` days: mostly on time and fine, some retried, a few dead."""
    runs = []
    today = now - now % DAY_MS
    for day in range(days, 0, -1):
        at = today - day * DAY_MS + hour_utc_ms
        late = 15 + (day * 37) % 180 + (2_400 if day % 17 == 0 else 0)
        start = at + late
        ok = {"status_code": 200, "response_excerpt": '{"ok": true, "rows": 1284}'}
        failed = {"status_code": 500, "error": "HTTP 500", "response_excerpt": '{"error": "database unreachable"}'}
        if day % 23 == 0:
            attempts = [
                _attempt(1, start, 900, AttemptOutcome.FAILED, **failed),
                _attempt(2, start + 10_900, 1_100, AttemptOutcome.FAILED, **failed),
            ]
            runs.append(_run(job_id, at, late, attempts, RunState.DEAD))
        elif day % 9 == 0:
            attempts = [
                _attempt(1, start, 30_000, AttemptOutcome.TIMEOUT, error="timed out after 30 s"),
                _attempt(2, start + 40_000, 4_000 + day * 10, AttemptOutcome.SUCCEEDED, **ok),
            ]
            runs.append(_run(job_id, at, late, attempts, RunState.SUCCEEDED))
        else:
            attempts = [_attempt(1, start, 3_000 + (day * 131) % 9_000, AttemptOutcome.SUCCEEDED, **ok)]
            runs.append(_run(job_id, at, late, attempts, RunState.SUCCEEDED))
    return runs


def minutely_history(job_id: str, now: int, minutes: int) -> list[Run]:
    """One run a minute for the last ``minutes`` minutes (the operations view's hour)."""
    runs = []
    this_minute = now - now % MINUTE_MS
    for back in range(minutes, 0, -1):
        at = this_minute - back * MINUTE_MS
        late = 8 + (back * 53) % 140 + (900 if back % 13 == 0 else 0)
        if back % 11 == 0:
            attempt = _attempt(1, at + late, 250, AttemptOutcome.FAILED, status_code=503, error="HTTP 503")
            runs.append(_run(job_id, at, late, [attempt], RunState.FAILED))
        else:
            attempt = _attempt(1, at + late, 120 + back, AttemptOutcome.SUCCEEDED, status_code=204)
            runs.append(_run(job_id, at, late, [attempt], RunState.SUCCEEDED))
    return runs


def write(data_dir: Path, runs: list[Run]) -> None:
    _, engine = engine_from_settings(Settings(data_dir=str(data_dir)))
    try:
        inserted = engine.store.insert_runs(runs)
        assert all(inserted), "history runs must be new"
    finally:
        engine.close()


def waiting_run(job_id: str, scheduled_at: int, reason: str, now: int) -> Run:
    """A due run that waits for ``reason`` (its note, as a worker writes it), left alone by the
    reaper for an hour (its deadline) and never queued: it waits until the test starts it."""
    return Run(
        job_id=job_id,
        scheduled_at=scheduled_at,
        owner=DEFAULT_DEV_OWNER,
        state=RunState.SCHEDULED,
        trigger=Trigger.SCHEDULE,
        deadline_at=now + 3_600_000,
        created_at=scheduled_at - 2_000,
        expires_at=(now + 30 * DAY_MS) // 1000,
        note=f"waiting: {reason}",
    )


def retried_history(job_id: str, now: int) -> list[Run]:
    """Four runs a minute apart: fine; a timeout then a success (a retry); failed twice (dead); fine."""
    runs = []
    ok = {"status_code": 200}
    failed = {"status_code": 500, "error": "HTTP 500"}
    for back, shape in ((4, "ok"), (3, "retried"), (2, "dead"), (1, "ok")):
        at = now - now % MINUTE_MS - back * MINUTE_MS
        start = at + 40
        if shape == "retried":
            attempts = [
                _attempt(1, start, 8_000, AttemptOutcome.TIMEOUT, error="timed out after 8 s"),
                _attempt(2, start + 10_000, 2_000, AttemptOutcome.SUCCEEDED, **ok),
            ]
            runs.append(_run(job_id, at, 40, attempts, RunState.SUCCEEDED))
        elif shape == "dead":
            attempts = [
                _attempt(1, start, 500, AttemptOutcome.FAILED, **failed),
                _attempt(2, start + 5_500, 700, AttemptOutcome.FAILED, **failed),
            ]
            runs.append(_run(job_id, at, 40, attempts, RunState.DEAD))
        else:
            runs.append(
                _run(job_id, at, 40, [_attempt(1, start, 1_500, AttemptOutcome.SUCCEEDED, **ok)], RunState.SUCCEEDED)
            )
    return runs


def start_and_finish(data_dir: Path, run: Run, now: int) -> None:
    """What a worker does once ``run``'s limit lets it start: lease (the note goes), then succeed
    (the attempt's log keeps what it waited for)."""
    _, engine = engine_from_settings(Settings(data_dir=str(data_dir)))
    try:
        store = engine.store
        leased = store.lease_run(run.job_id, run.scheduled_at, "worker-1", now, 60_000)
        assert leased.run is not None and leased.run.note is None
        waited = (run.note or "").removeprefix("waiting: ")
        record = _attempt(1, now, 300, AttemptOutcome.SUCCEEDED, status_code=200, waited=waited)
        change = RunChange(
            state=RunState.SUCCEEDED, now=now + 300, deadline_at=now + 300, finished_at=now + 300, append=record
        )
        store.finish_run(run.job_id, run.scheduled_at, "worker-1", 1, change)
    finally:
        engine.close()


def deadline_runs(job_id: str, now: int) -> dict[str, Run]:
    """Runs of a job with ``deadline_s`` 60: one still waiting 5 minutes after its time (left alone by
    the reaper for an hour, never queued), one that finished 3 minutes after its time, one on time."""
    ok = {"status_code": 200}
    open_run = Run(
        job_id=job_id,
        scheduled_at=now - 5 * MINUTE_MS,
        owner=DEFAULT_DEV_OWNER,
        state=RunState.SCHEDULED,
        trigger=Trigger.SCHEDULE,
        deadline_at=now + 3_600_000,
        created_at=now - 5 * MINUTE_MS - 2_000,
        expires_at=(now + 30 * DAY_MS) // 1000,
    )
    late_at, on_time_at = now - 20 * MINUTE_MS, now - 30 * MINUTE_MS
    late = _run(
        job_id,
        late_at,
        40,
        [_attempt(1, late_at + 40, 3 * MINUTE_MS, AttemptOutcome.SUCCEEDED, **ok)],
        RunState.SUCCEEDED,
    )
    on_time = _run(
        job_id,
        on_time_at,
        40,
        [_attempt(1, on_time_at + 40, 2_000, AttemptOutcome.SUCCEEDED, **ok)],
        RunState.SUCCEEDED,
    )
    return {"open": open_run, "late": late, "on_time": on_time}


def record_missed_instant(data_dir: Path, job_id: str, due_at: int) -> None:
    """The ``run_missed`` alert the reaper records when an instant of a job produced no run in time."""
    _, engine = engine_from_settings(Settings(data_dir=str(data_dir)))
    try:
        reason = (
            f"job {job_id}: its run due at {due_at} had not started 60s later (deadline_s=60): no scheduler claimed it"
        )
        alert = Alert(
            DEFAULT_DEV_OWNER, ids.run_id_for(job_id, due_at), job_id, due_at + 61_000, reason, AlertKind.RUN_MISSED
        )
        assert engine.store.record_alert(alert)
    finally:
        engine.close()
