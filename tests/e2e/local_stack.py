"""The embedded stack in this process, over real HTTP on 127.0.0.1: the API server, a worker thread
and optionally a reaper thread, assembled as every process assembles them
(``punctual.runtime.assembly``), and one owner's client whose every response is checked against the
served OpenAPI document. The e2e files that need the stack's parts in the test's own process (its
runtime, a clock moved forward, a reaper ticked by hand) open one per module with
:func:`local_stack`; the files that run it as separate processes use ``contract_http.System``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from punctual.api.auth import ApiKeys
from punctual.api.caller import Services
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.execution.loop import Tuning
from punctual.local.server import LocalServer
from punctual.runtime.assembly import Runtime
from tests.e2e.conftest import ApiClient, Contract

JOIN_S = 10.0


@dataclass(frozen=True)
class LocalStack:
    api: ApiClient
    runtime: Runtime
    clock: SystemClock  # the stack's clock: a test may move it forward by its offset_ms


@contextmanager
def local_stack(data_dir: Path, key: str, owner: str, *, reaper: bool = False) -> Iterator[LocalStack]:
    """The stack on a SQLite file in ``data_dir`` (4 shards, loopback targets allowed), ``owner``'s
    client with ``key``; with ``reaper``, a reaper thread every 0.3 s beside the worker (else the
    test ticks ``runtime.reaper()`` itself). Everything is stopped and closed on exit."""
    settings = Settings(data_dir=str(data_dir), shards=4, target_allow_loopback=True)
    clock = SystemClock()
    runtime = Runtime.open(settings, clock=clock)
    server = LocalServer(Services.of(runtime.engine, settings, clock), ApiKeys({key: owner}))
    url = server.start()
    runtime.settings = settings.model_copy(update={"callback_base_url": url})  # callback jobs report here
    stop = threading.Event()
    components = [runtime.worker(tuning=Tuning(wait_s=0.2)), *([runtime.reaper(interval_s=0.3)] if reaper else [])]
    threads = [threading.Thread(target=c.run, args=(stop,), daemon=True) for c in components]
    for thread in threads:
        thread.start()
    client = ApiClient(url, key, Contract(httpx.get(f"{url}/openapi.json", timeout=10).json()), owner)
    try:
        yield LocalStack(client, runtime, clock)
    finally:
        stop.set()
        for thread in threads:
            thread.join(JOIN_S)
        client.close()
        server.stop()
        runtime.close()
