"""One root exception, domain subclasses, and nothing about HTTP.

The API maps these to status codes in exactly one place (``punctual.api.errors``).
Every error carries a machine-readable ``code``, a message a user can act on, and
optional ``details`` that point at the offending field.
"""

from __future__ import annotations

from typing import Any


class PunctualError(Exception):
    """Root of every error Punctual raises on purpose."""

    code = "punctual_error"

    def __init__(self, message: str, *, field: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details


# -- bad input --------------------------------------------------------------------------------


class InvalidInput(PunctualError):
    """Input that can never be valid as sent (HTTP 400/422 class)."""

    code = "invalid_input"


class JobTooLarge(InvalidInput):
    """A job whose whole spec exceeds ``punctual.model.MAX_JOB_BYTES`` (HTTP 413)."""

    code = "job_too_large"


class InvalidSchedule(InvalidInput):
    """A cron expression that does not parse or names a value out of range."""

    code = "invalid_schedule"


class InvalidTimezone(InvalidInput):
    """A time zone name that is not in the IANA database."""

    code = "invalid_timezone"


class InvalidCursor(InvalidInput):
    """A pagination cursor that was not produced by this API (or was tampered with)."""

    code = "invalid_cursor"


class InvalidId(InvalidInput):
    """An id with the wrong shape; it cannot name anything."""

    code = "invalid_id"


class TooManyRuns(InvalidInput):
    """A request that would act on more runs than one call may (a replay beyond its bound)."""

    code = "too_many_runs"


class DependencyCycle(InvalidInput):
    """A ``depends_on`` that would make a job (indirectly) depend on itself."""

    code = "dependency_cycle"


class InvalidTransition(PunctualError):
    """A state change the lifecycle does not allow (e.g. resume a deleted job)."""

    code = "invalid_transition"


class ConfigError(PunctualError):
    """Configuration (environment, flags, context) that cannot work."""

    code = "config_error"


# -- not found / conflicts ------------------------------------------------------------------


class NotFound(PunctualError):
    code = "not_found"


class JobNotFound(NotFound):
    code = "job_not_found"


class RunNotFound(NotFound):
    code = "run_not_found"


class CalendarNotFound(NotFound):
    code = "calendar_not_found"


class Conflict(PunctualError):
    code = "conflict"


class CalendarCycle(Conflict):
    """A calendar's ``based_on`` would come back to it, or chain more calendars than allowed."""

    code = "calendar_cycle"


class CalendarInUse(Conflict):
    """Deleting a calendar that jobs (or other calendars, as their base) still name."""

    code = "calendar_in_use"


class JobAlreadyExists(Conflict):
    """A job with this id exists (the idempotent-create path resolves it)."""

    code = "job_already_exists"


class ConcurrentModification(Conflict):
    """The item changed since it was read (version mismatch); re-read and retry."""

    code = "concurrent_modification"


class HasDependents(Conflict):
    """Deleting a job that other jobs depend on (delete with force to leave them waiting)."""

    code = "has_dependents"
    FORCE = "force=true"  # how the message names forcing: the API's parameter (the CLI says --force)


class AttemptTimedOut(Conflict):
    """A callback for an attempt whose deadline passed (no heartbeat in time, or the job's deadline_s):
    the reaper retries or buries the run by its retry policy; the callback changes nothing."""

    code = "attempt_timed_out"


class AttemptSuperseded(Conflict):
    """A callback for an attempt that is no longer the run's: a newer attempt began, or the run was
    cancelled (its job deleted or replaced). Nothing was written."""

    code = "attempt_superseded"


class IdempotencyKeyReused(Conflict):
    """An Idempotency-Key was reused with a different request body."""

    code = "idempotency_key_reused"


class IdempotencyKeyInUse(Conflict):
    """Another request with this Idempotency-Key is still being carried out; retry after a pause."""

    code = "idempotency_key_in_use"

    def __init__(self, message: str, *, retry_after_s: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = retry_after_s


# -- protocol outcomes that callers handle ----------------------------------------------------


class LeaseLost(PunctualError):
    """The caller no longer holds the run lease (it expired and was taken over, or finished)."""

    code = "lease_lost"


class Throttled(PunctualError):
    """The storage service refused work for now (throttling); the same request can be retried."""

    code = "throttled"


# -- tenant limits (punctual.tenancy) ------------------------------------------------------------


class LimitExceeded(Conflict):
    """The owner is at one of its tenant limits (e.g. ``max_jobs``); nothing was written."""

    code = "limit_exceeded"


class TooManyRequests(PunctualError):
    """The owner sent more API requests than its ``api_requests_per_second``; retry after a pause."""

    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


# -- auth ---------------------------------------------------------------------------------------


class Unauthorized(PunctualError):
    code = "unauthorized"


class Forbidden(PunctualError):
    """The caller is known but may not use this route (the admin routes, for ordinary owners)."""

    code = "forbidden"


class InvalidCallbackToken(Unauthorized):
    """A callback without a token, or with one this deployment did not mint for this run (forged,
    malformed, or another run's)."""

    code = "invalid_callback_token"


class AttemptCompleted(Forbidden):
    """A genuine callback token whose attempt has its outcome already (a completion replayed, or a
    heartbeat after it): a token authorizes one completion, once."""

    code = "attempt_completed"
