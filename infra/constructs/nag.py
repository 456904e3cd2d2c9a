"""cdk-nag acknowledgements: one helper, so every acknowledgement names its rule, finding and reason.

cdk-nag 3 reports through CDK's validation API: synthesis fails while a finding is not
acknowledged, and an acknowledgement is ``Validations.of(scope).acknowledge(...)`` with the full
id ``AwsSolutions::AwsSolutions-<rule>[<finding>]`` (no prefix matching). It covers ``scope`` and
everything below it, so acknowledge on the narrowest construct that carries the finding.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

RULE_PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, *, finding: str | None = None) -> None:
    """Acknowledge the cdk-nag finding ``AwsSolutions-<rule>[<finding>]`` on ``scope``, with ``reason``.

    ``finding`` is the part in brackets for rules that report one finding per item (IAM5:
    ``Resource::*``, ``Action::kms:GenerateDataKey*``). Raises ValueError without a reason.
    """
    if len(reason.strip()) < 20:
        raise ValueError(f"acknowledging {rule} needs a specific reason, got {reason!r}")
    rule_id = f"{RULE_PACK}-{rule}" + (f"[{finding}]" if finding else "")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{RULE_PACK}::{rule_id}", reason=reason))
