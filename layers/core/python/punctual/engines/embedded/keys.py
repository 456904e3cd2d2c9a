"""The embedded engine's :class:`~punctual.port.Keys`: one random key in a local file.

``<data dir>/secrets.key`` holds 32 random bytes (created on first use, owner-only permissions).
Two keys are derived from it with HMAC-SHA256 under fixed labels: an AES-256-GCM key that seals
secrets (nonce 96 random bits; the owner is the associated data, so a token opens only for its
owner) and the master of the owners' signing secrets (HMAC of the owner). Losing the file makes
sealed secrets unreadable and changes every signing secret: back it up with the database.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from punctual.port import Keys

KEY_FILE = "secrets.key"
TOKEN_PREFIX = "lk1:"  # noqa: S105 - a format tag, not a secret
_NONCE_BYTES = 12
_SECRETS_KEPT = 10_000  # owners whose signing secret is kept derived


class LocalKeys(Keys):
    def __init__(self, path: Path) -> None:
        master = _load_or_create(path)
        self._aead = AESGCM(hmac.new(master, b"punctual/seal/v1", hashlib.sha256).digest())
        self._signing = hmac.new(master, b"punctual/signing/v1", hashlib.sha256).digest()
        self._callback = hmac.new(master, b"punctual/callback/v1", hashlib.sha256).digest()
        self._secrets: dict[str, str] = {}

    def seal(self, owner: str, plaintext: str) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), owner.encode())
        return TOKEN_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, owner: str, token: str) -> str:
        if not token.startswith(TOKEN_PREFIX):
            raise ValueError("not a sealed value of this engine")
        try:
            blob = base64.urlsafe_b64decode(token[len(TOKEN_PREFIX) :])
            return self._aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], owner.encode()).decode()
        except (InvalidTag, ValueError) as exc:
            raise ValueError("sealed value does not open for this owner with this key") from exc

    def signing_secret(self, owner: str) -> str:
        # Derived once per owner: every HTTP attempt is signed with it, and OpenSSL 3 makes each
        # HMAC cost a few microseconds of set-up. Bounded, since owners come and go.
        secret = self._secrets.get(owner)
        if secret is None:
            digest = hmac.new(self._signing, owner.encode(), hashlib.sha256).digest()
            secret = "psk_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")
            if len(self._secrets) >= _SECRETS_KEPT:
                self._secrets.clear()
            self._secrets[owner] = secret
        return secret

    def callback_key(self) -> bytes:
        return self._callback


def _load_or_create(path: Path) -> bytes:
    if path.exists():
        key = path.read_bytes()
        if len(key) == 32:
            return key
        raise ValueError(f"{path} is not a 32-byte key; restore it from a backup (or remove it to start over)")
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return _load_or_create(path)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key
