"""Writers of the embedded file queue for their turn (``engines.embedded.writers``) instead of
polling SQLite's lock: a writer of another process is waited for without a failed BEGIN, and a
forked child does not share its parent's place in the queue."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from punctual.engines.embedded import db as db_module
from punctual.engines.embedded import writers
from punctual.engines.embedded.db import Database

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not hasattr(os, "fork") or writers.fcntl is None, reason="fork and flock are POSIX"),
]

HOLD_S = 0.4


def _fork(body: Callable[[], None]) -> int:
    """Run ``body`` in a forked child that leaves without the parent's cleanup; its pid."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            body()
            code = 0
        finally:
            os._exit(code)
    return child


# Another process: one write transaction held open for HOLD_S, "1" printed once it holds it.
_HOLDER = f"""
import sys, time
from punctual.engines.embedded.db import Database
db = Database(sys.argv[1], shards=1)
with db.write() as conn:
    conn.execute("INSERT INTO t VALUES ('child')")
    print("1", flush=True)
    time.sleep({HOLD_S})
db.close()
"""


def test_a_writer_waits_for_another_process_s_transaction_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.db"
    db = Database(path, shards=1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (v TEXT)")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"1"  # it holds its turn
        polls: list[float] = []
        monkeypatch.setattr(db_module.time, "sleep", polls.append)  # a failed BEGIN IMMEDIATE sleeps
        started = time.monotonic()
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES ('parent')")
        waited = time.monotonic() - started
        monkeypatch.undo()
    finally:
        assert holder.wait(30) == 0
    # Then the write came after the other process's commit, and never found SQLite's lock taken
    assert polls == []
    assert waited > HOLD_S / 4
    rows = [r[0] for r in db.connection().execute("SELECT v FROM t ORDER BY rowid")]
    assert rows == ["child", "parent"]
    assert (tmp_path / "p.db.writers").exists()
    db.close()


def test_a_forked_child_does_not_share_its_parent_s_turn(tmp_path: Path) -> None:
    key = os.path.realpath(tmp_path / "p.db")
    read, write = os.pipe()
    with writers.turn(key):  # the parent holds its turn while the child asks for one

        def ask() -> None:
            got = threading.Event()

            def take() -> None:
                with writers.turn(key):
                    got.set()

            threading.Thread(target=take, daemon=True).start()
            os.write(write, b"1" if got.wait(0.3) else b"0")  # "1": it was let in (wrong)
            got.wait(10)  # once the parent let go, the child gets its turn
            os.write(write, b"1" if got.is_set() else b"0")

        child = _fork(ask)
        first = os.read(read, 1)
    second = os.read(read, 1)
    os.waitpid(child, 0)
    os.close(read)
    os.close(write)
    assert (first, second) == (b"0", b"1")
