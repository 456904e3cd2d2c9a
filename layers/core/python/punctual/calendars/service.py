"""What owners do with calendars: put, read, list and delete them, and name them from jobs. No HTTP,
no boto3 (the API and the CLI call this).

Rules this module owns:
- A calendar belongs to one owner; another owner's is not found (404), as for jobs.
- ``based_on`` names another calendar of the owner's that exists (else 404 naming ``based_on``); the
  chain is at most ``MAX_BASE_DEPTH`` calendars long and never comes back to the calendar being put
  (else 409 ``calendar_cycle``: the calendars as stored refuse it, as a state refuses a transition).
  Two concurrent PUTs that would only together close a cycle may both pass; the claim reads such a
  chain once around (``calendars.days.resolve``), so it still has one meaning.
- A PUT replaces the calendar whole, compare-and-set on its version (a lost race reads it again).
  An edit writes one item, never the jobs that use it: the scheduler reads calendars through a cache
  of ``CACHE_TTL_MS`` (``calendars.cache``), so the edit decides every claim that starts that long
  after it, and never a run already claimed.
- A calendar that jobs (not deleted) or other calendars (as their base) still name cannot be deleted:
  409 ``calendar_in_use`` naming up to ``MAX_NAMED`` of them. On AWS the jobs are read from an index
  that lags writes by about a second; a job created in that second with a calendar deleted in it has
  every time skipped, each skip recorded with the note "calendar X does not exist" until the job names
  another calendar.
- A job may name only a calendar that exists (404 naming ``calendar.name``, as for a ``depends_on``
  job that does not exist).
"""

from __future__ import annotations

from punctual.calendars.cache import read_business_days
from punctual.calendars.days import BusinessDays
from punctual.errors import CalendarCycle, CalendarInUse, CalendarNotFound, ConcurrentModification, LimitExceeded
from punctual.model.calendars import MAX_BASE_DEPTH, MAX_CALENDARS, Calendar, CalendarSpec
from punctual.model.timing import JobCalendar
from punctual.port import Store

MAX_NAMED = 10  # users a refused delete names
WRITE_ATTEMPTS = 3


def put_calendar(store: Store, owner: str, name: str, spec: CalendarSpec, now: int) -> tuple[Calendar, bool]:
    """Create or replace ``owner``'s calendar ``name``; returns it and whether it is new.

    Raises :class:`CalendarNotFound` (``based_on`` names none), :class:`CalendarCycle` (too deep, a
    cycle), :class:`LimitExceeded`
    (a new calendar past ``MAX_CALENDARS``) and :class:`ConcurrentModification` (lost every race).
    """
    _check_base(store, owner, name, spec.based_on)
    for attempt in range(WRITE_ATTEMPTS):
        stored = store.get_calendar(owner, name)
        if stored is None and len(store.list_calendars(owner)) >= MAX_CALENDARS:
            raise LimitExceeded(f"this owner has {MAX_CALENDARS} calendars; delete one first", field="name")
        calendar = Calendar(
            **spec.model_dump(),
            owner=owner,
            name=name,
            version=1 if stored is None else stored.version + 1,
            created_at=now if stored is None else stored.created_at,
            updated_at=now,
        )
        try:
            store.put_calendar(calendar, None if stored is None else stored.version)
            return calendar, stored is None
        except ConcurrentModification:
            if attempt == WRITE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def get_calendar(store: Store, owner: str, name: str) -> Calendar:
    """Raises :class:`CalendarNotFound` (absent, or another owner's: the same answer)."""
    found = store.get_calendar(owner, name)
    if found is None:
        raise CalendarNotFound(f"no calendar {name}", field="name")
    return found


def list_calendars(store: Store, owner: str) -> list[Calendar]:
    return store.list_calendars(owner)


def delete_calendar(store: Store, owner: str, name: str) -> None:
    """Delete a calendar nobody names. Raises :class:`CalendarNotFound`, :class:`CalendarInUse` and
    :class:`ConcurrentModification` (it changed between the check and the delete: read it again)."""
    calendar = get_calendar(store, owner, name)
    jobs = store.calendar_users(owner, name, MAX_NAMED)
    bases = [c.name for c in store.list_calendars(owner) if c.based_on == name][:MAX_NAMED]
    if jobs or bases:
        named = [*(f"job {j}" for j in jobs), *(f"calendar {b}" for b in bases)]
        more = " (and maybe more)" if len(jobs) == MAX_NAMED else ""
        raise CalendarInUse(
            f"calendar {name} is in use by {', '.join(named)}{more}; change them first",
            field="name",
            details=[{"field": "calendar.name", "message": j} for j in jobs]
            + [{"field": "based_on", "message": b} for b in bases],
        )
    store.delete_calendar(owner, name, calendar.version)


def job_calendar_days(store: Store, owner: str, calendar: JobCalendar | None) -> BusinessDays | None:
    """The business days a job's ``calendar`` names (None: it names none). Raises :class:`CalendarNotFound`
    (field ``calendar.name``) if the owner has no such calendar."""
    if calendar is None:
        return None
    days = read_business_days(store, owner, calendar.name)
    if days.missing == calendar.name:
        raise CalendarNotFound(f"no calendar {calendar.name}; create it first (PUT /calendars/{calendar.name})",
                               field="calendar.name")  # fmt: skip
    return days


def _check_base(store: Store, owner: str, name: str, base: str | None) -> None:
    chain = [name]
    while base is not None:
        if base in chain:
            raise CalendarCycle(f"based_on makes a cycle: {' -> '.join([*chain, base])}", field="based_on")
        if len(chain) >= MAX_BASE_DEPTH:
            raise CalendarCycle(f"based_on chains at most {MAX_BASE_DEPTH} calendars", field="based_on")
        found = store.get_calendar(owner, base)
        if found is None:
            raise CalendarNotFound(f"no calendar {base} to base this one on", field="based_on")
        chain.append(base)
        base = found.based_on
