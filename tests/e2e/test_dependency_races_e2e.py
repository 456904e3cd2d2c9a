"""Concurrent dependency edits over HTTP, through two `punctual api` processes on one data dir.

Issue 26, case 5: A→B through one API process while B→A through another used to store both edges
(each check read the graph before the other's write), and one trigger then released runs forever.
Here many pairs of such requests are fired at the two processes at once (released together by a
barrier), and after every round the graph must be acyclic and no live job may name a deleted
upstream. The forced interleavings, on both engines, are in tests/contract/test_dependency_races.py;
this is the same guarantee end to end, across processes that share only the SQLite file. (The aws
engine is not run here: moto, the only DynamoDB these tests have, is not safe under concurrent
requests from several processes, and answers concurrent transactions with HTTP 500s; see
``punctual.engines.aws.clients``, ``serialize``.)

Against the code before decisions (2026-12-01) both tests failed within the first rounds: a stored
A↔B cycle in round 1, and a 204 delete next to a 201 create naming the deleted job in round 3.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import cron_spec

pytestmark = pytest.mark.e2e

KEY = "pk_races_0123456789abcdef"
ROUNDS = 24  # pairs of racing requests per scenario (bounded: a few seconds on 2 cores)
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def apis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two `punctual api` processes on one data dir (the embedded engine), by URL."""
    data_dir = tmp_path_factory.mktemp("races") / ".punctual"
    processes = [_start_api(data_dir) for _ in range(2)]
    try:
        yield [url for _, url in processes]
    finally:
        for process, _ in processes:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def _start_api(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PUNCTUAL_API_KEYS", None)
    command = [sys.executable, "-m", "punctual.cli", "api", "--port", "0", "--data-dir", str(data_dir)]
    process = subprocess.Popen(
        [*command, "--api-key", KEY],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=data_dir.parent,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    url_line = lines.get(timeout=30)
    assert url_line.startswith("Punctual API: http://127.0.0.1:"), url_line
    return process, url_line.split(": ", 1)[1].strip()


def _clients(urls: list[str]) -> list[httpx.Client]:
    auth = {"Authorization": f"Bearer {KEY}"}
    return [httpx.Client(base_url=url, headers=auth, timeout=TIMEOUT_S) for url in urls]


def _at_once(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Run ``calls`` in threads released together; their responses, in order."""
    barrier = threading.Barrier(len(calls))
    responses: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(TIMEOUT_S)
        responses[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S * 2)
    assert all(isinstance(r, httpx.Response) for r in responses), "a request did not finish"
    return responses


def _create(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = client.post("/jobs", json=cron_spec(**fields))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _depend(client: httpx.Client, job_id: str, upstream_ids: list[str]) -> httpx.Response:
    return client.patch(f"/jobs/{job_id}", json={"schedule": None, "depends_on": {"jobs": upstream_ids}})


def _graph(client: httpx.Client, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    jobs = {}
    for job_id in job_ids:
        response = client.get(f"/jobs/{job_id}")
        assert response.status_code == 200, response.text
        jobs[job_id] = response.json()
    return jobs


def _upstreams(job: dict[str, Any]) -> list[str]:
    return list(job["depends_on"]["jobs"]) if job.get("depends_on") else []


def test_two_processes_patching_a_to_b_and_b_to_a_at_once_never_store_a_cycle(apis: list[str]) -> None:
    one, two = _clients(apis)
    for i in range(ROUNDS):
        a, b = _create(one, name=f"a-{i}")["id"], _create(one, name=f"b-{i}")["id"]
        first, second = _at_once([partial(_depend, one, a, [b]), partial(_depend, two, b, [a])])
        jobs = _graph(one, [a, b])
        assert not (_upstreams(jobs[a]) == [b] and _upstreams(jobs[b]) == [a]), f"round {i}: a cycle was stored"
        statuses = (first.status_code, second.status_code)
        assert sorted(statuses) in ([200, 409], [200, 422]), f"round {i}: {statuses} {first.text} {second.text}"
        loser = first if first.status_code != 200 else second
        assert loser.json()["code"] in ("dependency_cycle", "concurrent_modification"), loser.text


def test_a_delete_and_a_create_naming_the_deleted_job_never_both_land(apis: list[str]) -> None:
    one, two = _clients(apis)
    for i in range(ROUNDS):
        up = _create(one, name=f"up-{i}")["id"]
        spec = cron_spec(name=f"down-{i}", schedule=None, depends_on={"jobs": [up]})
        deleted, created = _at_once([partial(one.delete, f"/jobs/{up}"), partial(two.post, "/jobs", json=spec)])
        assert (deleted.status_code, created.status_code) in ((204, 404), (409, 201)), (
            f"round {i}: delete {deleted.status_code} {deleted.text}, create {created.status_code} {created.text}"
        )
        if created.status_code == 201:
            assert one.get(f"/jobs/{up}").json()["status"] == "active"
            assert deleted.json()["code"] == "has_dependents"
