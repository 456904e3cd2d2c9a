"""The :class:`Engine`: a store, its queues and its keys, created from configuration; the
service clock an engine may measure (:class:`SkewSource`) and secrets at rest (:class:`Keys`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Protocol

from punctual.model import Run
from punctual.port.queue import Queue
from punctual.port.records import Finish
from punctual.port.store import Store


class SkewSource(Protocol):
    @property
    def skew_ms(self) -> int | None:
        """Service clock minus local clock, as last measured (None before the first response)."""
        ...


class Keys(ABC):
    """The engine's secrets: sealing job secrets at rest, each owner's request-signing secret, and the
    key of the runs' callback tokens.

    A sealed value is bound to its owner: opening it for another owner fails. The embedded engine
    keeps one random key in a file next to its database (owner-only permissions); the aws engine
    uses KMS (a symmetric key for sealing, an HMAC key for signing secrets), so no key material
    is ever in the job item or the deployment's code.
    """

    @abstractmethod
    def seal(self, owner: str, plaintext: str) -> str:
        """An opaque, printable token holding ``plaintext`` encrypted for ``owner``."""

    @abstractmethod
    def open(self, owner: str, token: str) -> str:
        """The plaintext of a token :meth:`seal` made for ``owner``. Raises :class:`ValueError`
        for a token that was not sealed for ``owner`` with this engine's key (or was altered)."""

    @abstractmethod
    def signing_secret(self, owner: str) -> str:
        """``owner``'s request-signing secret (``psk_`` + 43 url-safe characters): the same for
        every call, process and worker of one deployment, different for every owner."""

    @abstractmethod
    def callback_key(self) -> bytes:
        """The deployment's key of callback tokens (``punctual.runs.tokens``): 32 bytes, the same in
        every process of one deployment, derived from the engine's key material and never stored."""

    def at_hand(self, owner: str, tokens: Collection[str]) -> bool:
        """Whether opening ``tokens`` and the signing secret of ``owner`` need no I/O (an asyncio
        worker calls the keys on its loop only then, else in a thread). Local keys: always."""
        return True


class Engine(ABC):
    """A store and its two queues, created from configuration."""

    store: Store
    queue: Queue  # dispatch queue
    dead_letters: Queue  # where the dispatch queue moves poison messages
    keys: Keys  # secrets at rest and signing secrets

    @property
    def clock_skew(self) -> SkewSource | None:
        """The storage service's clock relative to ours, where the engine measures it (the aws
        engine, from response ``Date`` headers); None where storage shares our clock (embedded).
        The scheduler corrects its clock by it."""
        return None

    def close(self) -> None:  # noqa: B027 - engines without resources need not override it
        """Release connections; the engine is not used afterwards."""

    def finish_and_ack(self, finishes: Sequence[Finish]) -> list[Run | None]:
        """:meth:`Store.finish_runs`, then delete from :attr:`queue` the ``ack`` receipt of every
        finish that applied. Engines that can do both in one step override this (embedded: one
        transaction, so a crash never leaves a finished run with its message). Either way a run's
        message is deleted only after its finish is durable. Returns what ``finish_runs`` returns.
        """
        results = self.store.finish_runs(finishes)
        acks = [f.ack for f, run in zip(finishes, results, strict=True) if run is not None and f.ack is not None]
        if acks:
            self.queue.delete_many(acks)
        return results
