"""The KMS keys behind ``Engine.keys`` (punctual.engines.aws.keys): job secrets and signing secrets.

- ``secrets_key`` (symmetric, yearly rotation): seals secret header values (``kms:Encrypt`` by
  the API, ``kms:Decrypt`` by the workers), each bound to its owner by the encryption context.
- ``signing_key`` (HMAC_256): derives each owner's request-signing secret (``kms:GenerateMac``,
  by the API for ``GET /signing-secret``, by the workers to sign calls and by the reaper to sign
  the notifications it delivers). KMS cannot rotate HMAC keys
  (rotating would change every owner's secret; a new key and a dual-signature period would).

Each role gets exactly the actions its side needs, on exactly one key.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class Secrets(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description="Punctual: job secrets (secret headers of HTTP targets)",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,  # sealed secrets are unreadable without it
        )
        self.signing_key = kms.Key(
            self,
            "SigningKey",
            description="Punctual: owners' request-signing secrets (HMAC)",
            key_spec=kms.KeySpec.HMAC_256,
            key_usage=kms.KeyUsage.GENERATE_VERIFY_MAC,
            removal_policy=cdk.RemovalPolicy.RETAIN,  # every owner's secret derives from it
        )

    def grant_seal(self, role: iam.IRole) -> None:
        """The API: seal secrets, show owners their signing secret."""
        self._grant(role, self.secrets_key, "kms:Encrypt")
        self._grant(role, self.signing_key, "kms:GenerateMac")

    def grant_open(self, role: iam.IRole) -> None:
        """A worker: open secrets, sign requests."""
        self._grant(role, self.secrets_key, "kms:Decrypt")
        self._grant(role, self.signing_key, "kms:GenerateMac")

    def grant_sign(self, role: iam.IRole) -> None:
        """The reaper: sign the notifications it delivers (notify webhooks), as workers sign calls."""
        self._grant(role, self.signing_key, "kms:GenerateMac")

    @staticmethod
    def _grant(role: iam.IRole, key: kms.Key, action: str) -> None:
        role.add_to_principal_policy(iam.PolicyStatement(actions=[action], resources=[key.key_arn]))
