"""The calendar records every engine keeps (``punctual.calendars``): one per (owner, name).

A part of :class:`~punctual.port.Store` (it inherits this, and through it the idempotency records of
``port.idempotency``: owner records too, and ``port/store.py`` is at its size limit). Versions are
compare-and-set: every write names the version it replaces, so two concurrent edits of one calendar
cannot both apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from punctual.model.calendars import Calendar
from punctual.port.idempotency import IdempotencyStore


class CalendarStore(IdempotencyStore, ABC):
    @abstractmethod
    def put_calendar(self, calendar: Calendar, expected_version: int | None) -> None:
        """Write ``calendar`` (at ``calendar.version``) where the stored one is at ``expected_version``
        (None: none is stored, or it was deleted). Raises :class:`ConcurrentModification` otherwise."""

    @abstractmethod
    def get_calendar(self, owner: str, name: str) -> Calendar | None:
        """``owner``'s calendar ``name``, read strongly consistent; None if there is none (or deleted)."""

    @abstractmethod
    def list_calendars(self, owner: str) -> list[Calendar]:
        """Every calendar of ``owner``, by name (at most ``model.calendars.MAX_CALENDARS``)."""

    @abstractmethod
    def delete_calendar(self, owner: str, name: str, expected_version: int) -> None:
        """Remove the calendar at ``expected_version``. Raises :class:`ConcurrentModification` when it
        is at another version or gone."""

    @abstractmethod
    def calendar_users(self, owner: str, name: str, limit: int) -> list[str]:
        """Ids of up to ``limit`` of ``owner``'s jobs (not deleted) that name calendar ``name``.

        The aws engine reads a global secondary index, eventually consistent: a job created within the
        last second may be missing from the answer (``punctual.calendars.service`` says what follows)."""
