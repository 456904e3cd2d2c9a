"""The embedded engine closes a thread's SQLite connection when the thread ends.

``punctual dev`` serves the API through starlette's run_in_threadpool, whose worker threads exit
after 10 s idle and are replaced by new ones: a connection per thread that ever ran would pile up
(file descriptors, 16 MB page caches) on a long-running local stack.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from punctual.clock import ManualClock
from tests.conftest import make_embedded_engine

pytestmark = pytest.mark.unit


def test_connections_of_finished_threads_do_not_accumulate(tmp_path: Path, clock: ManualClock) -> None:
    engine = make_embedded_engine(tmp_path, clock)
    try:
        for _ in range(50):  # fifty short-lived request threads, one after another
            t = threading.Thread(target=engine.store.shard_leases)
            t.start()
            t.join()
        gc.collect()
        still_open = engine._db.open_connections()  # type: ignore[attr-defined]
        assert still_open <= 5, f"{still_open} connections of finished threads are still open"
    finally:
        engine.close()
