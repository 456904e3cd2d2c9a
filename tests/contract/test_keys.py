"""Port contract: ``Engine.keys`` (issue 10, item 7), on both engines.

Sealed secrets open only for their owner and only unaltered; signing secrets are stable per owner
and differ between owners. Embedded: a local key file; aws: KMS on moto.
"""

from __future__ import annotations

import pytest

from punctual.port import Engine

pytestmark = pytest.mark.contract


def test_a_sealed_secret_opens_for_its_owner_only(engine: Engine) -> None:
    token = engine.keys.seal("alice", "Bearer s3cr3t-token")
    assert "s3cr3t" not in token and token.isprintable()
    assert engine.keys.open("alice", token) == "Bearer s3cr3t-token"
    with pytest.raises(ValueError):
        engine.keys.open("bob", token)
    altered = token[:-6] + ("AAAA" if not token.endswith("AAAA") else "BBBB") + token[-2:]
    with pytest.raises(ValueError):
        engine.keys.open("alice", altered)
    with pytest.raises(ValueError):
        engine.keys.open("alice", "plain text")


def test_sealing_twice_gives_different_tokens_that_both_open(engine: Engine) -> None:
    first, second = engine.keys.seal("alice", "x"), engine.keys.seal("alice", "x")
    assert first != second
    assert engine.keys.open("alice", first) == engine.keys.open("alice", second) == "x"


def test_signing_secrets_are_stable_per_owner_and_differ_between_owners(engine: Engine) -> None:
    alice = engine.keys.signing_secret("alice")
    assert alice == engine.keys.signing_secret("alice")
    assert alice != engine.keys.signing_secret("bob")
    assert alice.startswith("psk_") and len(alice) == 47


def test_keys_say_when_opening_needs_no_io(engine: Engine, engine_kind: str) -> None:
    """An asyncio worker opens secrets on its loop only when no KMS call is needed."""
    token = engine.keys.seal("alice", "x")
    assert engine.keys.at_hand("alice", [token]) is (engine_kind == "embedded")
    engine.keys.open("alice", token)
    engine.keys.signing_secret("alice")
    assert engine.keys.at_hand("alice", [token])
