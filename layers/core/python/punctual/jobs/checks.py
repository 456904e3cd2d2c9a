"""Checks the job service makes before it writes anything: job size, timeout, Idempotency-Key,
page limit. Each raises a domain error (4xx at the API) and has no side effects."""

from __future__ import annotations

import re

from punctual import ids
from punctual.errors import InvalidInput, JobTooLarge
from punctual.model import MAX_JOB_BYTES, JobSpec

MAX_PAGE = 100
MAX_IDEMPOTENCY_KEY = 255
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]+$"  # printable ASCII, no spaces: safe in any header (and in the document)
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def check_size(spec: JobSpec) -> None:
    """Refuse a spec over ``MAX_JOB_BYTES`` (what keeps a claim's write units bounded). Raises :class:`JobTooLarge`."""
    size = spec.size_bytes()
    if size > MAX_JOB_BYTES:
        raise JobTooLarge(
            f"the job is {size} bytes as JSON; the limit for a whole job (payload, target and headers "
            f"included) is {MAX_JOB_BYTES}",
            field="body",
        )


def job_id_for(owner: str, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return ids.new_job_id()
    check_idempotency_key(idempotency_key)
    return ids.job_id_for_idempotency_key(owner, idempotency_key)


def check_idempotency_key(idempotency_key: str) -> None:
    """Refuse a key that is not 1-255 printable ASCII characters. Raises :class:`InvalidInput`."""
    if not (0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY and _IDEMPOTENCY_KEY.fullmatch(idempotency_key)):
        raise InvalidInput(
            f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces",
            field="Idempotency-Key",
        )


def check_timeout(timeout_s: int | None, max_timeout_s: int) -> None:
    """Refuse a ``timeout_s`` this deployment cannot serve (Settings.max_timeout_s): its runs would be
    killed on every attempt and end dead. Raises :class:`InvalidInput` (422)."""
    if timeout_s is not None and timeout_s > max_timeout_s:
        raise InvalidInput(
            f"timeout_s {timeout_s} is longer than this deployment can run ({max_timeout_s} s): runs longer "
            "than a Lambda worker may take need the Fargate workers (deploy with -c fargate_workers=true)",
            field="timeout_s",
        )


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}", field="limit")
