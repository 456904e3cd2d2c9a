"""The store's part of keyed requests (``punctual.jobs.replay_keys``: ``POST /runs/replay`` with an
``Idempotency-Key``): one record per (owner, key) that remembers the request it was first used for,
who is carrying it out, and its answer once there is one; and the read a carried-over replay resumes
from (which of a job's runs in a window replay which originals).

Timeline of a record, with what each write requires (every write is conditional)::

    (absent, or expired) ─claim─> working(beat) ─settle(beat)─> answered
                                     │  ^
                                     └──┘ renew or take over (beat as read)

A part of :class:`~punctual.port.Store` (it inherits this through ``port.calendars.CalendarStore``:
``port/store.py`` is at its size limit).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """What a key names, for one owner, until ``expires_at``.

    ``fingerprint`` is a digest of the request the key was first used with (another request with
    the key is refused); ``at`` is when that request began (a replay's base instant, fixed for every
    retry); ``beat`` is when the request carrying it out last said it still works on it (0: nobody
    does); ``result`` is the answer, once the work is done (JSON text), else None."""

    owner: str
    key: str
    fingerprint: str
    at: int
    beat: int
    expires_at: int  # epoch ms; after it the record counts as absent (and a claim replaces it)
    result: str | None = None


class IdempotencyStore(ABC):
    @abstractmethod
    def get_idempotency_record(self, owner: str, key: str, now: int) -> IdempotencyRecord | None:
        """``owner``'s record of ``key``, read strongly consistent; None if there is none or it
        expired by ``now``."""

    @abstractmethod
    def claim_idempotency_record(self, record: IdempotencyRecord, now: int) -> IdempotencyRecord:
        """Store ``record`` unless an unexpired record of its (owner, key) exists at ``now``.

        Returns ``record`` itself if it was stored here; else the stored record (which the caller
        compares: another request's fingerprint, an answer, a beat)."""

    @abstractmethod
    def update_idempotency_record(self, owner: str, key: str, seen_beat: int, beat: int, result: str | None) -> bool:
        """Set the record's ``beat`` (and, when ``result`` is not None, its ``result``) iff it exists
        with no result and its beat is still ``seen_beat``: a renewal, a takeover, or the answer.
        True if written; False, nothing written, if another request moved it meanwhile."""

    @abstractmethod
    def replays_between(self, job_id: str, since: int, until: int) -> dict[int, str]:
        """The replays among ``job_id``'s runs scheduled in ``[since, until]``, read strongly
        consistent: ``{scheduled_at: replay_of}`` (where each is, and the original it replays)."""
