"""What a target is told (:class:`Invocation`) and what it answers (:class:`TargetResult`).

Shared by the dispatcher (``punctual.execution.targets``), each target kind (``http``, ``aws``)
and the worker; it imports nothing of theirs, so the kinds never import their own package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from punctual.execution.targets.request_rules import TargetRefused
from punctual.model import Completion, HttpTarget, Job, Run
from punctual.port import Keys
from punctual.runs import tokens


@dataclass(frozen=True, slots=True)
class TargetResult:
    """A target's answer to one attempt.

    ``retryable`` matters only when ``ok`` is False: whether sending the same run again may
    succeed (see ``punctual.runs.retry``). ``timed_out`` marks a target cut at the job's ``timeout_s``.
    ``excerpt`` and ``error`` are bounded by the worker before they are stored.
    """

    ok: bool
    status_code: int | None = None
    excerpt: str | None = None
    error: str | None = None
    retryable: bool = True
    timed_out: bool = False


def succeeded(status_code: int | None = None, excerpt: str | None = None) -> TargetResult:
    return TargetResult(ok=True, status_code=status_code, excerpt=excerpt)


def failed(error: str, *, retryable: bool, status_code: int | None = None, excerpt: str | None = None) -> TargetResult:
    return TargetResult(ok=False, status_code=status_code, excerpt=excerpt, error=error, retryable=retryable)


def unbuildable(reason: str) -> TargetResult:
    """An attempt whose request cannot be built from the job (``request_rules`` refuses its URL or a
    header, for a job stored before that rule existed): retrying cannot fix it, so not retryable."""
    return failed(f"the request cannot be built: {reason}", retryable=False)


def timed_out(timeout_s: float) -> TargetResult:
    return TargetResult(ok=False, error=f"target did not answer within {timeout_s:g} s", timed_out=True)


@dataclass(frozen=True, slots=True)
class Invocation:
    """What every target is told about the run it executes.

    ``secret_headers`` (opened), ``signing_secret`` (the owner's) and ``callback`` (a callback job's
    URL and its attempt's token: ``punctual.runs.tokens``) exist only here, for the request being
    built: they are left out of the repr, so a log line can never show them.
    """

    run_id: str
    job_id: str
    scheduled_at: int  # epoch ms
    attempt: int
    payload: Any
    secret_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    callback: tuple[str, str] | None = field(default=None, repr=False)  # (callback URL, token)

    @classmethod
    def of(
        cls, job: Job, run: Run, attempt: int, keys: Keys | None = None, callback_base_url: str | None = None
    ) -> Invocation:
        """The invocation of ``run``; with ``keys``, its secret headers opened and the owner's
        signing secret (raises ValueError for a secret that does not open), and for a callback job
        its callback URL and token (raises :class:`TargetRefused` where this worker cannot give
        them: no ``callback_base_url``, no keys, or a run it did not lease)."""
        callback = _callback(job, run, attempt, keys, callback_base_url)
        if keys is None:
            return cls(run.run_id, job.id, run.scheduled_at, attempt, job.payload, callback=callback)
        target = job.target
        if not isinstance(target, HttpTarget):
            return cls(run.run_id, job.id, run.scheduled_at, attempt, job.payload)
        sealed = target.secret_headers
        opened = {name: keys.open(job.owner, token) for name, token in sealed.items()} if sealed else {}
        secret = keys.signing_secret(job.owner)
        return cls(run.run_id, job.id, run.scheduled_at, attempt, job.payload, opened, secret, callback)


def _callback(job: Job, run: Run, attempt: int, keys: Keys | None, base_url: str | None) -> tuple[str, str] | None:
    """A callback job's (URL, token) for this attempt; None for every other job."""
    if job.completion is not Completion.CALLBACK:
        return None
    if base_url is None or keys is None or run.worker_id is None:
        raise TargetRefused(
            "completion callback needs the API's base URL (PUNCTUAL_CALLBACK_BASE_URL) and keys on the worker",
            field="completion",
        )
    token = tokens.mint(keys.callback_key(), run.run_id, attempt, run.worker_id)
    return tokens.callback_url(base_url, run.run_id), token


class TargetExecutor(Protocol):
    """What the worker needs from targets (``Targets`` or a test double)."""

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        """Deliver ``run`` to ``job.target``; ``deadline`` is a ``time.monotonic()`` instant."""
        ...
