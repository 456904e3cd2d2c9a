"""The domain: what a user submits (JobSpec), what is stored (Job, Run), and their lifecycles.

Times inside the domain are integer epoch milliseconds (UTC); the API turns them into ISO 8601.
Bounds on every field are part of the contract and documented in ``docs/decisions/0004``.

A kernel split by subject: ``bounds`` (field limits), ``times`` (RFC 3339 at the edges),
``states`` (statuses, run states, transitions, policy enums), ``targets`` (where runs go),
``jobs`` (JobSpec, Job), ``runs`` (Run, Attempt), ``callbacks`` (async completion) and
``outcomes`` (notify, notifications, alert kinds). Import the names from ``punctual.model``: this
module re-exports them all, so callers need not know which file holds which.
"""

from __future__ import annotations

from punctual.model.bounds import (
    MAX_ATTEMPTS_KEPT,
    MAX_BACKFILL,
    MAX_ERROR_CHARS,
    MAX_EXCERPT_CHARS,
    MAX_HEADERS,
    MAX_JITTER_S,
    MAX_JOB_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_RETRIES,
    MAX_SECRET_CHARS,
    MAX_TIMEOUT_S,
    MAX_UPSTREAMS,
    REDACTED,
    truncate,
)
from punctual.model.callbacks import (
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    MAX_HEARTBEAT_TIMEOUT_S,
    MAX_PROGRESS_CHARS,
    MIN_HEARTBEAT_TIMEOUT_S,
    Completion,
)
from punctual.model.jobs import WHOLE, DependsOn, Job, JobId, JobName, JobSpec, RetryPolicy
from punctual.model.limits import DEFAULT_PRIORITY, JobLimit, resolve_key
from punctual.model.outcomes import (
    MAX_DEADLINE_S,
    MAX_PAUSE_AFTER_FAILURES,
    MIN_DEADLINE_S,
    AlertKind,
    DeadlineSeconds,
    Notification,
    NotificationState,
    NotificationTry,
    Notify,
    NotifyEvent,
)
from punctual.model.runs import Attempt, Run, copy_run
from punctual.model.states import (
    JOB_TRANSITIONS,
    OPEN_STATES,
    RUN_TRANSITIONS,
    TERMINAL_STATES,
    AttemptOutcome,
    Catchup,
    DependencyWhen,
    JobStatus,
    Overlap,
    RunState,
    Trigger,
    Withdrawal,
)
from punctual.model.targets import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    Signatures,
    SqsTarget,
    StepFunctionsTarget,
    Target,
)
from punctual.model.times import AwareRfc3339, Rfc3339

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT_S",
    "DEFAULT_PRIORITY",
    "JOB_TRANSITIONS",
    "MAX_ATTEMPTS_KEPT",
    "MAX_BACKFILL",
    "MAX_DEADLINE_S",
    "MAX_ERROR_CHARS",
    "MAX_EXCERPT_CHARS",
    "MAX_HEADERS",
    "MAX_HEARTBEAT_TIMEOUT_S",
    "MAX_JITTER_S",
    "MAX_JOB_BYTES",
    "MAX_PAUSE_AFTER_FAILURES",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PROGRESS_CHARS",
    "MAX_RETRIES",
    "MAX_SECRET_CHARS",
    "MAX_TIMEOUT_S",
    "MAX_UPSTREAMS",
    "MIN_DEADLINE_S",
    "MIN_HEARTBEAT_TIMEOUT_S",
    "OPEN_STATES",
    "REDACTED",
    "RUN_TRANSITIONS",
    "TERMINAL_STATES",
    "WHOLE",
    "AlertKind",
    "Attempt",
    "AttemptOutcome",
    "AwareRfc3339",
    "Catchup",
    "Completion",
    "DeadlineSeconds",
    "DependencyWhen",
    "DependsOn",
    "EventBridgeTarget",
    "HttpTarget",
    "Job",
    "JobId",
    "JobLimit",
    "JobName",
    "JobSpec",
    "JobStatus",
    "LambdaTarget",
    "Notification",
    "NotificationState",
    "NotificationTry",
    "Notify",
    "NotifyEvent",
    "Overlap",
    "RetryPolicy",
    "Rfc3339",
    "Run",
    "RunState",
    "Signatures",
    "SqsTarget",
    "StepFunctionsTarget",
    "Target",
    "Trigger",
    "Withdrawal",
    "copy_run",
    "resolve_key",
    "truncate",
]
