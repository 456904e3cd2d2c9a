"""SNS topics: owner alerts (a run ended dead) and ops alarms (CloudWatch alarm actions).

Both are encrypted with one customer-managed KMS key and refuse publishing without TLS. The key is
customer-managed because CloudWatch alarms cannot publish to a topic encrypted with the
AWS-managed ``aws/sns`` key (its key policy cannot admit cloudwatch.amazonaws.com).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import InfraConfig

# Publishing to an encrypted topic: SNS asks KMS for a data key and decrypts it with the caller's rights.
_PUBLISH_KMS_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


class Alerts(Construct):
    """``owner_topic`` (PUNCTUAL_ALERT_TOPIC_ARN) and ``ops_topic`` (alarm actions, optional e-mail)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig) -> None:
        super().__init__(scope, construct_id)
        self.key = self._build_key()
        self.owner_topic = self._build_topic("OwnerAlerts", "Punctual owner alerts: runs that ended dead")
        self.ops_topic = self._build_topic("OpsAlarms", "Punctual operations alarms")
        if config.alarm_email:
            self.ops_topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))

    def grant_publish_owner_alerts(self, role: iam.IRole) -> None:
        """Let ``role`` publish owner alerts (the topic and exactly the key actions SNS needs)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.owner_topic.topic_arn])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(_PUBLISH_KMS_ACTIONS), resources=[self.key.key_arn])
        )

    def _build_key(self) -> kms.Key:
        key = kms.Key(
            self,
            "Key",
            description="Punctual SNS topics (owner alerts, ops alarms)",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=list(_PUBLISH_KMS_ACTIONS),
                resources=["*"],  # in a key policy, "*" is this key
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}},
            )
        )
        return key

    def _build_topic(self, construct_id: str, display_name: str) -> sns.Topic:
        return sns.Topic(self, construct_id, display_name=display_name, master_key=self.key, enforce_ssl=True)
