"""Window markers: one ``open`` index entry for a claim window's runs instead of one per run.

A claim window (``punctual.scheduling.planning``) inserts a job's times up to its window boundary
at once: 10 runs of a minute job. Each run in the sparse ``open`` index would cost 2 write units
(its entry put at insert and deleted at its terminal write). Instead, when a claim inserts two or
more scheduled runs of one job (and the deployment keeps the index), it first puts one *marker*
in the runs table and inserts the runs without ``open_shard``:

- key ``job_id = "window#<job_id>#<last time>"`` (no job id has a ``#``: never listed, never read
  as a run), ``scheduled_at`` = the first time; ``open_shard`` as the first run's; ``times`` the
  runs' times. About 200 bytes: 1 write unit, and 1 for its index entry.
- The reaper (``past_deadline_runs``) reads a marker once its *last* time is as old as it reads
  runs (``scheduled_before``; the key says so, without a read), reads the marker's runs (consistent),
  takes those open and past their deadline as it takes any, and *closes* the marker when every run
  it names has ended or does not exist (a claim that died between the marker and its runs): the
  entry leaves the index (``REMOVE open_shard``, 1 unit and 1 for the entry) and TTL removes the
  item after a day. A marker with a run still open stays, and is read again next pass.
- Deadline alerts (``stale_open_runs``) and GET /stats' due open runs (``open_runs``) read the
  markers' runs as they read run entries.

So a window of K runs pays 4 units of the open index instead of 2 K (0.4 a run for K = 10). The
price: a window run whose message was lost is found once the window's last time is a reaper age
old (up to the window later than a run with its own entry); a message is lost only by an
operator purging the queue or a bug (decision 0069), the dead-letter queue is drained as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.items import Item, Key, n, s
from punctual.engines.aws.tables import Tables
from punctual.model import Run, RunState, Trigger

PREFIX = "window#"
CLOSED_TTL_S = 86_400  # a closed marker is kept this long (TTL): nothing reads it once closed


def windows_of(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The runs of a window claim's insert that share a marker, by job: two or more scheduled runs of
    one job from its schedule. Other runs keep their own ``open`` entries."""
    by_job: dict[str, list[Run]] = {}
    for run in runs:
        if run.state is RunState.SCHEDULED and run.trigger is Trigger.SCHEDULE:
            by_job.setdefault(run.job_id, []).append(run)
    return {job_id: group for job_id, group in by_job.items() if len(group) > 1}


def marker_item(runs: list[Run], open_shards: int) -> Item:
    """The marker of one job's window runs (at least two, one job)."""
    times = sorted(run.scheduled_at for run in runs)
    first = runs[0]
    return {
        "job_id": s(f"{PREFIX}{first.job_id}#{times[-1]}"),
        "scheduled_at": n(times[0]),
        "owner": s(first.owner),
        "open_shard": n(it.open_shard(first.job_id, times[0], open_shards)),
        "times": {"NS": [str(t) for t in times]},
    }


def is_marker(job_id: str) -> bool:
    return job_id.startswith(PREFIX)


def marked(key: tuple[str, int]) -> tuple[str, int]:
    """(job id, last time) of a marker's key (job_id, first time)."""
    job_id, last = key[0].removeprefix(PREFIX).rsplit("#", 1)
    return job_id, int(last)


class DynamoWindows:
    """The inserts of :class:`~punctual.engines.aws.store.DynamoStore`'s runs, and window markers."""

    _tables: Tables
    runs_table: str
    open_shards: int
    open_index: bool

    _tally: Callable[[Run], None]  # the store's GET /stats counter of a run inserted terminal

    def insert_runs(self, runs: Sequence[Run], *, window: bool = False) -> list[bool]:
        """Each run unless its (job_id, scheduled_at) exists; a claim window's runs under one marker."""
        marked_runs = self._put_markers(runs) if window else set()
        return self._tables.each(lambda run: self._insert_run(run, (run.job_id, run.scheduled_at) in marked_runs), runs)

    def _insert_run(self, run: Run, marked_run: bool) -> bool:
        item = it.run_to_item(run, open_shards=self.open_shards)
        if marked_run:
            del item["open_shard"]  # its window's marker stands for it in the open index
        inserted = self._tables.put(self.runs_table, item, c.guarded(c.RUN_NOT_EXISTS)).applied
        if inserted and run.state.is_terminal:  # a skipped time, recorded already closed
            self._tally(run)
        return inserted

    def _put_markers(self, runs: Sequence[Run]) -> set[tuple[str, int]]:
        """Put the markers of ``runs``' windows (before their runs: a marker naming a run not yet
        inserted is harmless, a run inserted without its marker would not be watched). Returns the
        runs that go without their own ``open`` entry, by key. Idempotent (a repeated claim)."""
        if not self.open_index:
            return set()
        windows = windows_of(runs)
        markers = [marker_item(group, self.open_shards) for group in windows.values()]
        guard = c.guarded(c.RUN_NOT_EXISTS)
        self._tables.each(lambda item: self._tables.put(self.runs_table, item, guard), markers)
        return {(run.job_id, run.scheduled_at) for group in windows.values() for run in group}

    def _marker_runs(
        self, keys: list[Key], *, before: int, consistent: bool = True
    ) -> dict[tuple[str, int], list[Key]]:
        """The run keys each marker of ``keys`` names at or before ``before``, by the marker's key."""
        wanted = [key for key in keys if is_marker(key["job_id"]["S"])]
        found: dict[tuple[str, int], list[Key]] = {}
        for item in self._tables.batch_get(self.runs_table, wanted, consistent=consistent):
            job_id, _ = marked((item["job_id"]["S"], 0))
            times = sorted(int(t) for t in item.get("times", {}).get("NS", []))
            marker = (item["job_id"]["S"], int(item["scheduled_at"]["N"]))
            found[marker] = [it.run_key(job_id, t) for t in times if t <= before]
        return found

    def _close_markers(
        self, markers: dict[tuple[str, int], list[Key]], runs: dict[tuple[str, int], Run], now: int
    ) -> None:
        """Close each of ``markers`` (each with every run it names) whose runs have all ended or do
        not exist: its entry leaves the ``open`` index, and TTL removes it a day later."""
        done = [marker for marker, keys in markers.items() if all(_ended(runs.get(_key_of(key))) for key in keys)]

        def close(marker: tuple[str, int]) -> None:
            expr = c.Expression().remove("open_shard").set("expires_at = :ttl", ttl=n(now // 1000 + CLOSED_TTL_S))
            key = {"job_id": s(marker[0]), "scheduled_at": n(marker[1])}
            self._tables.update(self.runs_table, key, expr.request(c.MARKER_OPEN), returns="NONE", old_on_failure=False)

        self._tables.each(close, done)


def _key_of(key: Key) -> tuple[str, int]:
    return key["job_id"]["S"], int(key["scheduled_at"]["N"])


def _ended(run: Run | None) -> bool:
    return run is None or run.state.is_terminal
