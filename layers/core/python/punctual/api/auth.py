"""Who is calling: every request acts for exactly one owner (tenant).

The API reads the owner from the API Gateway request context, never from a header the client
controls, so the same code serves AWS and the local server:

- ``requestContext.authorizer.principalId``: a Lambda authorizer's principal. The local server
  acts as that authorizer: it maps ``Authorization: Bearer <key>`` to an owner (:class:`ApiKeys`)
  and puts the owner here. On AWS a custom authorizer (e.g. one that also returns a
  ``usageIdentifierKey`` for API-key usage plans) does the same.
- ``requestContext.authorizer.claims.sub``: a Cognito user pool authorizer.
- ``requestContext.identity.userArn`` (else ``caller``): IAM (SigV4) authorization, the default
  on AWS. An assumed-role session ARN is reduced to its role ARN, so every session of one role is
  one owner (session names change per session; the role is the stable identity).

No owner means 401, except on the public documentation paths.

The owner is the principal itself, so existing owners stay what they were, except for a
principal that is too long to be a key (over ``MAX_OWNER_LENGTH`` characters, e.g. an IAM user
under a long path) or that starts with ``DIGEST_PREFIX``: such a principal is keyed on
``DIGEST_PREFIX`` + the SHA-256 of the whole principal. Never a prefix of it: two principals
sharing their first 512 characters used to become one owner and see each other's jobs. Owners
that start with the prefix come only from digests, so the mapping stays one-to-one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from punctual.errors import ConfigError

DEFAULT_DEV_OWNER = "local"
KEY_FILE = "api-key"
MAX_OWNER_LENGTH = 512  # characters; at 4 bytes each, within DynamoDB's 2,048-byte partition key
DIGEST_PREFIX = "~sha256:"
_ASSUMED_ROLE = re.compile(r"^arn:(aws[a-zA-Z-]*):sts::(\d{12}):assumed-role/([^/]+)/[^/]+$")
_BEARER = re.compile(r"^Bearer\s+(\S+)\s*$", re.IGNORECASE)
_KEY = re.compile(r"^[A-Za-z0-9._~+/-]{16,256}$")
_OWNER = re.compile(r"^[A-Za-z0-9._:@/+=,-]{1,128}$")


def owner_from_event(event: Mapping[str, Any]) -> str | None:
    """The owner the request acts for, or None if the request carries no authenticated principal."""
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    claims = authorizer.get("claims") or {}
    identity = context.get("identity") or {}
    for candidate in (authorizer.get("principalId"), claims.get("sub")):
        if isinstance(candidate, str) and candidate:
            return owner_of(candidate)
    arn = identity.get("userArn") or identity.get("caller")
    if isinstance(arn, str) and arn:
        return owner_of(principal_of(arn))
    return None


def owner_of(principal: str) -> str:
    """The owner key of a principal: itself, or a digest of all of it when it cannot be a key as is."""
    if len(principal) <= MAX_OWNER_LENGTH and not principal.startswith(DIGEST_PREFIX):
        return principal
    return DIGEST_PREFIX + hashlib.sha256(principal.encode("utf-8", "surrogatepass")).hexdigest()


def principal_of(arn: str) -> str:
    """The stable identity behind an IAM caller ARN (assumed-role sessions become their role)."""
    match = _ASSUMED_ROLE.match(arn)
    if match:
        partition, account, role = match.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return arn


class ApiKeys:
    """Local bearer keys mapped to owners (the local server's stand-in for an authorizer).

    Configured as ``PUNCTUAL_API_KEYS="key1=owner1,key2=owner2"``; ``punctual dev`` adds its
    default key. Keys are compared in constant time.
    """

    def __init__(self, keys: Mapping[str, str] | None = None) -> None:
        self._keys: dict[str, str] = {}
        for key, owner in (keys or {}).items():
            self.add(key, owner)

    @classmethod
    def parse(cls, text: str | None) -> ApiKeys:
        """Parse ``key=owner`` pairs separated by commas. Raises :class:`ConfigError`."""
        keys = cls()
        for pair in (text or "").split(","):
            if not pair.strip():
                continue
            key, sep, owner = pair.strip().partition("=")
            if not sep:
                raise ConfigError("PUNCTUAL_API_KEYS: expected key=owner pairs separated by commas")
            keys.add(key.strip(), owner.strip())
        return keys

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiKeys:
        environ = os.environ if environ is None else environ
        return cls.parse(environ.get("PUNCTUAL_API_KEYS"))

    def add(self, key: str, owner: str) -> None:
        """Map ``key`` to ``owner``. Raises :class:`ConfigError` for a short key or an odd owner name."""
        if not _KEY.match(key):
            raise ConfigError("an API key must be 16-256 characters of letters, digits and ._~+/-")
        if not _OWNER.match(owner):
            raise ConfigError(f"owner {owner!r} must be 1-128 characters of letters, digits and ._:@/+=,-")
        self._keys[key] = owner

    def owner_for(self, authorization: str | None) -> str | None:
        """The owner for an ``Authorization: Bearer <key>`` header value, or None."""
        match = _BEARER.match(authorization or "")
        if not match:
            return None
        presented = match.group(1).encode()
        owner = None
        for key, candidate in self._keys.items():  # no early exit: timing does not reveal which key
            if hmac.compare_digest(key.encode(), presented):
                owner = candidate
        return owner

    def __len__(self) -> int:
        return len(self._keys)


def new_key() -> str:
    """A fresh random API key (256 bits, url-safe)."""
    return "pk_" + secrets.token_urlsafe(32)


def load_or_create_key(data_dir: Path) -> str:
    """The key stored in ``data_dir/api-key``, created (owner-only permissions) on first use.

    Keeping it across restarts means scripts and the ``punctual jobs`` commands keep working.
    """
    path = data_dir / KEY_FILE
    if path.exists():
        key = path.read_text().strip()
        if _KEY.match(key):
            return key
    data_dir.mkdir(parents=True, exist_ok=True)
    key = new_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key
