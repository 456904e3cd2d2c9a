"""The aws engine's :class:`~punctual.port.Keys`: KMS, with no key material outside it.

- Sealing: ``kms:Encrypt`` with the symmetric key ``secrets_key_id`` and the encryption context
  ``{"punctual:owner": <owner>}``, so a token decrypts only for its owner (and CloudTrail shows
  whose secret was opened). A header value is at most 4 KiB, within KMS's 4,096-byte plaintext
  limit; no data key is needed.
- Opening: ``kms:Decrypt``, cached per token in the process (bounded LRU): a worker pays one
  Decrypt per job's secret per process, not per run.
- Signing secrets: ``kms:GenerateMac`` (HMAC_SHA_256) of the owner with the HMAC key
  ``signing_key_id``, cached per owner: the same secret in every process, never stored.
- The callback-token key: ``kms:GenerateMac`` of a fixed label with the same HMAC key, once per
  process (``punctual.runs.tokens``); the label cannot be an owner's message (``signing/`` vs ``callback/``).
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

from botocore.exceptions import ClientError

from punctual.errors import ConfigError
from punctual.port import Keys

TOKEN_PREFIX = "kms1:"  # noqa: S105 - a format tag, not a secret
CACHE_SIZE = 4096
_CONTEXT_KEY = "punctual:owner"


class KmsKeys(Keys):
    def __init__(self, kms: Any, secrets_key_id: str | None, signing_key_id: str | None) -> None:
        self._kms = kms
        self._secrets_key_id = secrets_key_id
        self._signing_key_id = signing_key_id
        self._opened: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._signing: dict[str, str] = {}
        self._callback: bytes | None = None
        self._lock = threading.Lock()

    def seal(self, owner: str, plaintext: str) -> str:
        key_id = _required(self._secrets_key_id, "secrets_key_id")
        blob = self._kms.encrypt(KeyId=key_id, Plaintext=plaintext.encode(), EncryptionContext={_CONTEXT_KEY: owner})[
            "CiphertextBlob"
        ]
        return TOKEN_PREFIX + base64.urlsafe_b64encode(blob).decode()

    def open(self, owner: str, token: str) -> str:
        with self._lock:
            cached = self._opened.get((owner, token))
            if cached is not None:
                self._opened.move_to_end((owner, token))
                return cached
        if not token.startswith(TOKEN_PREFIX):
            raise ValueError("not a sealed value of this engine")
        try:
            plaintext = self._kms.decrypt(
                CiphertextBlob=base64.urlsafe_b64decode(token[len(TOKEN_PREFIX) :]),
                EncryptionContext={_CONTEXT_KEY: owner},
            )["Plaintext"].decode()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidCiphertextException":
                raise ValueError("sealed value does not open for this owner with this key") from exc
            raise
        with self._lock:
            self._opened[(owner, token)] = plaintext
            while len(self._opened) > CACHE_SIZE:
                self._opened.popitem(last=False)
        return str(plaintext)

    def at_hand(self, owner: str, tokens: Collection[str]) -> bool:
        with self._lock:
            return owner in self._signing and all((owner, token) in self._opened for token in tokens)

    def signing_secret(self, owner: str) -> str:
        with self._lock:
            cached = self._signing.get(owner)
        if cached is not None:
            return cached
        key_id = _required(self._signing_key_id, "signing_key_id")
        mac = self._kms.generate_mac(
            KeyId=key_id, Message=f"punctual/signing/v1\x00{owner}".encode(), MacAlgorithm="HMAC_SHA_256"
        )["Mac"]
        secret = "psk_" + base64.urlsafe_b64encode(mac).decode().rstrip("=")
        with self._lock:
            if len(self._signing) >= CACHE_SIZE:
                self._signing.clear()
            self._signing[owner] = secret
        return secret

    def callback_key(self) -> bytes:
        key = self._callback
        if key is None:  # one GenerateMac per process; a race computes the same bytes twice
            key_id = _required(self._signing_key_id, "signing_key_id")
            key = self._kms.generate_mac(
                KeyId=key_id, Message=b"punctual/callback/v1\x00", MacAlgorithm="HMAC_SHA_256"
            )["Mac"]
            self._callback = key
        return bytes(key)


def _required(key_id: str | None, name: str) -> str:
    if not key_id:
        raise ConfigError(f"the aws engine needs PUNCTUAL_{name.upper()} (a KMS key; the CDK app sets it)")
    return key_id
