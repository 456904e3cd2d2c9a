"""The jobs of ``punctual bench minute``: every-minute cron jobs calling the webhook, created over the
HTTP API as a user creates them (``POST /jobs`` on a few keep-alive connections at once), or
bulk-loaded into the embedded store, which is not an API path (the API has no bulk create).
"""

from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from punctual.api.auth import DEFAULT_DEV_OWNER
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines import open_engine

CONNECTIONS = 8  # concurrent POST /jobs, each on its own keep-alive connection
ATTEMPTS = 5  # per job, on a transport error, a 429 or a 5xx (the Idempotency-Key makes a retry safe)
TIMEOUT_S = 30.0
EVERY_MINUTE = "* * * * *"


class CreateFailed(RuntimeError):
    """The API refused a job (a 4xx other than 429), or kept failing."""


@dataclass(frozen=True)
class Created:
    job_ids: list[str]
    via: str  # "api" or "bulk"
    seconds: float  # from the first request to the last answer (bulk: the load)
    connections: int | None  # concurrent requests (api)
    first_due: int | None = None  # bulk: the boundary the jobs are first due at (api: the next one after creating)

    def figures(self) -> dict[str, Any]:
        rate = round(len(self.job_ids) / self.seconds) if self.seconds > 0 else None
        return {
            "via": self.via,
            "jobs": len(self.job_ids),
            "seconds": round(self.seconds, 3),
            "creates_per_second": rate,
            "connections": self.connections,
        }


def create_over_api(
    api_url: str, api_key: str, count: int, target_url: str, *, connections: int = CONNECTIONS
) -> Created:
    """``count`` every-minute jobs calling ``target_url`` (POST), created with ``POST /jobs``, each with
    an ``Idempotency-Key``, on ``connections`` connections at once. Raises :class:`CreateFailed`."""
    batch = secrets.token_hex(6)
    job_ids = [""] * count
    failed = threading.Event()

    def create_slot(slot: int) -> None:
        headers = {"Authorization": f"Bearer {api_key}"}
        with httpx.Client(base_url=api_url, headers=headers, timeout=TIMEOUT_S) as client:
            for index in range(slot, count, connections):
                if failed.is_set():
                    return
                try:
                    job_ids[index] = _create_one(client, _spec(index, target_url), f"minute-{batch}-{index}")
                except Exception:
                    failed.set()  # the other connections stop too
                    raise

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=connections, thread_name_prefix="bench-create") as pool:
        for result in [pool.submit(create_slot, slot) for slot in range(connections)]:
            result.result()
    return Created(job_ids, "api", time.perf_counter() - started, connections)


def bulk_load(data_dir: Path, count: int, target_url: str, due_at: int) -> Created:
    """``count`` every-minute jobs due first at ``due_at``, written straight into the embedded store
    under ``data_dir`` (``bulk_load_jobs``, as ``punctual bench burst`` loads its jobs)."""
    clock = SystemClock()
    settings = Settings.from_env(engine="embedded", data_dir=str(data_dir))
    engine = open_engine(settings, clock=clock)
    try:
        now = clock.now_ms()
        jobs = list(
            bench_jobs(count, now=now, due_at=due_at, shards=settings.shards, url=target_url, owner=DEFAULT_DEV_OWNER)
        )
        store: Any = engine.store  # bulk loading is the embedded store's, not the port's
        started = time.perf_counter()
        store.bulk_load_jobs(jobs)
        seconds = time.perf_counter() - started
    finally:
        engine.close()
    return Created([job.id for job in jobs], "bulk", seconds, None, due_at)


def _spec(index: int, target_url: str) -> dict[str, Any]:
    """A job as a user writes it: every minute, POST to the webhook; every other field its default."""
    return {
        "name": f"minute-{index}",
        "schedule": EVERY_MINUTE,
        "timezone": "UTC",
        "target": {"type": "http", "url": target_url, "method": "POST"},
    }


def _create_one(client: httpx.Client, spec: dict[str, Any], key: str) -> str:
    problem = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(0.2 * 2**attempt)
        try:
            response = client.post("/jobs", json=spec, headers={"Idempotency-Key": key})
        except httpx.TransportError as exc:
            problem = repr(exc)
            continue
        if response.status_code in (200, 201):  # 200: a retry the key replayed
            return str(response.json()["id"])
        problem = f"POST /jobs answered {response.status_code}: {response.text[:500]}"
        if response.status_code != 429 and response.status_code < 500:
            break
    raise CreateFailed(problem)
