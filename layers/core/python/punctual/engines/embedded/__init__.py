"""The ``embedded`` engine: the whole port on one SQLite file in WAL mode.

The default for ``punctual dev`` and for anyone who runs Punctual on one machine: any number of
threads and processes on that machine may open the same file (see ``db.py``). A committed write
survives ``kill -9`` of any process; ``synchronous="FULL"`` extends that to power loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from punctual import resources
from punctual.clock import Clock
from punctual.config import Settings
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.keys import KEY_FILE, LocalKeys
from punctual.engines.embedded.queue import EmbeddedQueue
from punctual.engines.embedded.runs import finish_all_in
from punctual.engines.embedded.store import EmbeddedStore
from punctual.model import Run
from punctual.port import Engine, Finish

__all__ = ["DB_FILE", "EmbeddedEngine", "EmbeddedQueue", "EmbeddedStore"]

DB_FILE = "punctual.db"  # the file's name inside Settings.data_dir


class EmbeddedEngine(Engine):
    """A Store, the dispatch queue and its dead-letter queue, all on the SQLite file ``path``.

    ``max_receives`` is the dispatch queue's redrive policy (None: never dead-letter).
    ``open_shards`` is accepted for parity with the ``aws`` engine, whose open-runs index is
    sharded to spread writes; a SQLite index needs no sharding, so it is unused here.
    Raises :class:`punctual.errors.ConfigError` if the file cannot be used (newer schema, other
    shard count, no WAL support).
    """

    store: EmbeddedStore
    queue: EmbeddedQueue
    dead_letters: EmbeddedQueue

    def __init__(
        self,
        path: str | Path,
        *,
        shards: int,
        open_shards: int = 16,
        clock: Clock,
        max_receives: int | None = resources.DISPATCH_QUEUE.max_receives,
        synchronous: str = "NORMAL",
    ) -> None:
        self.path = Path(path)
        self.open_shards = open_shards
        self._db = Database(self.path, shards=shards, synchronous=synchronous)
        self.store = EmbeddedStore(self._db, shards=shards, clock=clock)
        self.keys = LocalKeys(self.path.parent / KEY_FILE)
        dead = resources.DEAD_LETTER_QUEUE
        dispatch = resources.DISPATCH_QUEUE
        self.dead_letters = EmbeddedQueue(self._db, dead.logical_name, clock=clock, retention_s=dead.retention_s)
        self.queue = EmbeddedQueue(
            self._db,
            dispatch.logical_name,
            clock=clock,
            retention_s=dispatch.retention_s,
            max_receives=max_receives,
            dead_letter=None if max_receives is None else dead.logical_name,
        )

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: Clock, **options: Any) -> EmbeddedEngine:
        """The engine on ``<settings.data_dir>/punctual.db`` (the directory is created)."""
        data_dir = Path(settings.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls(data_dir / DB_FILE, shards=settings.shards, open_shards=settings.open_shards, clock=clock, **options)

    def finish_and_ack(self, finishes: Sequence[Finish]) -> list[Run | None]:
        """Every finish and the deletion of the acknowledged messages in one transaction: a run is
        never finished with its message left behind, nor its message deleted without its finish."""
        if not finishes:
            return []
        with self._db.write() as conn:
            results = finish_all_in(conn, finishes)
            acks = [f.ack for f, run in zip(finishes, results, strict=True) if run is not None and f.ack is not None]
            self.queue.delete_in(conn, acks)
        return results

    def checkpoint(self) -> bool:
        """Copy every committed page in the WAL back into the file now, sync it and empty the WAL
        (benchmarks; the engine's checkpoint thread does this on its own after writes pause).
        Returns False if other connections kept it from completing for ``db.BUSY_TIMEOUT_MS``."""
        return self._db.checkpoint()

    def close(self) -> None:
        """Close this process's connections to the file."""
        self._db.close()
