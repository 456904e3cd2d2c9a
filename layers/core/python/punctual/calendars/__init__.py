"""Calendars: an owner's business days, shared by any number of its jobs (``calendar: {name, mode}``).

What this package owns:

- ``days``: a calendar with its ``based_on`` chain resolved into :class:`~.days.BusinessDays`: which
  dates are business days, which business day a date moves to, and why a date is excluded.
- ``cache``: the scheduler's short-lived cache of resolved calendars. A claim reads the calendars of
  the jobs it claims through it: an edit of a calendar costs no write per job, whatever the number of
  jobs that use it, and is applied by every claim that starts ``CACHE_TTL_MS`` after it.
- ``service``: what owners do with calendars (``PUT/GET/DELETE /calendars/{name}``, ``GET /calendars``,
  ``punctual calendars set|get|list``), with the checks of a ``based_on`` chain (its calendars exist,
  at most ``MAX_BASE_DEPTH`` of them, no cycle) and the refusal to delete a calendar in use.

Where a job's times meet its calendar is ``punctual.scheduling.timeline``. The records live in the
store (``Store.put_calendar`` ..., on both engines).
"""
