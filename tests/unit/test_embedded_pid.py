"""The embedded engine's process id without a system call: still right in a forked child."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from punctual.engines.embedded import pid
from punctual.engines.embedded.db import Database

pytestmark = pytest.mark.unit


def test_the_id_is_this_process_s() -> None:
    assert pid.current() == os.getpid()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_knows_its_own_id_and_opens_its_own_connection(tmp_path: Path) -> None:
    db = Database(tmp_path / "p.db", shards=1)
    parent_conn = db.connection()
    parent = os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report, then leave without running the parent's cleanup
        try:
            ok = pid.current() == os.getpid() != parent and db.connection() is not parent_conn
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(child, 0)
    assert answer == b"1"
    assert pid.current() == os.getpid()
    assert db.connection() is parent_conn  # the parent keeps its own
    db.close()
