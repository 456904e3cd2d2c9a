"""Callback tokens: what authorizes the callbacks (heartbeat, completion) of exactly one attempt.

Each attempt of a ``completion: callback`` job carries two headers: ``X-Punctual-Callback-Url`` (the
API's base URL + ``/runs/{run id}``) and ``X-Punctual-Callback-Token``, which the target sends back
in the same header on ``POST <url>/heartbeat`` and ``POST <url>/complete``::

    token = "pct1." <attempt> "." <lease> "." <mac>
    lease = the first 16 hex digits of SHA-256(the worker id that leased the attempt)
    mac   = base64url, unpadded, of HMAC-SHA256(key, "punctual/callback/v1\\n<run id>\\n<attempt>\\n<lease>\\n")

``key`` is ``Keys.callback_key()``: the deployment's, derived from the engine's key material (a local
file; KMS GenerateMac on AWS). Nothing is written to mint a token and it is never stored or logged:
the worker mints it when it builds the attempt's request (the attempt and its worker are in the run
already: its lease), and :func:`verify` recomputes it. A token names one run (its MAC covers the run
id, so it never opens another run's routes) and one attempt of it; whether that attempt is still
the run's, open and within its deadline is the stored run's answer (``punctual.runs.callbacks``).
The API Gateway authorizer (``functions/callback_authorizer``) verifies it the same way, without
reading anything.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass

from punctual.errors import InvalidCallbackToken
from punctual.model import Run

URL_HEADER = "X-Punctual-Callback-Url"
TOKEN_HEADER = "X-Punctual-Callback-Token"  # noqa: S105 - a header's name, not a secret
PREFIX = "pct1"
_LABEL = b"punctual/callback/v1\n"
_LEASE_HEX = 16
_TOKEN = re.compile(r"^pct1\.([1-9][0-9]{0,5})\.([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$")
MAX_TOKEN_CHARS = 80  # what the header may carry at most (a token is 70 characters or fewer)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a verified token names: a run, one of its attempts, and the lease that began it."""

    run_id: str
    attempt: int
    lease: str  # lease_of(worker id)

    def leased_by(self, run: Run) -> bool:
        """Whether ``run``'s stored worker is the one that leased the token's attempt."""
        return run.worker_id is not None and hmac.compare_digest(lease_of(run.worker_id), self.lease)


def lease_of(worker_id: str) -> str:
    """The attempt's lease identity a token carries: a digest of the worker id (not the id itself:
    a target learns nothing of the worker's host)."""
    return hashlib.sha256(worker_id.encode()).hexdigest()[:_LEASE_HEX]


def mint(key: bytes, run_id: str, attempt: int, worker_id: str) -> str:
    """The token of attempt ``attempt`` of ``run_id``, leased by ``worker_id``."""
    lease = lease_of(worker_id)
    return f"{PREFIX}.{attempt}.{lease}.{_mac(key, run_id, attempt, lease)}"


def verify(key: bytes, run_id: str, token: str | None) -> Claim:
    """The claim of ``token`` for ``run_id``. Raises :class:`InvalidCallbackToken` (401) when it is
    missing, malformed, or not minted with ``key`` for this run (forged, or another run's)."""
    match = _TOKEN.match(token or "")
    if match is None:
        raise InvalidCallbackToken(
            f"send the attempt's {TOKEN_HEADER} header as received with the call (absent or malformed)",
            field=TOKEN_HEADER,
        )
    attempt, lease, presented = int(match.group(1)), match.group(2), match.group(3)
    if not hmac.compare_digest(_mac(key, run_id, attempt, lease), presented):
        raise InvalidCallbackToken(
            f"the {TOKEN_HEADER} was not issued for this run by this deployment", field=TOKEN_HEADER
        )
    return Claim(run_id, attempt, lease)


def callback_url(base_url: str, run_id: str) -> str:
    """The ``X-Punctual-Callback-Url`` of a run: the API's base URL + ``/runs/{run id}``."""
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def _mac(key: bytes, run_id: str, attempt: int, lease: str) -> str:
    digest = hmac.new(key, _LABEL + f"{run_id}\n{attempt}\n{lease}\n".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
