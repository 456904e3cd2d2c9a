"""Owner alerts: a run ended ``dead`` (or ``failed``) and its owner must hear about it, once.

The alert *record* in the store (:meth:`Store.record_alert`, once per run) is the source of truth
and is visible through ``GET /alerts``; the :class:`Alerter` only notifies. A notification is sent
only by the caller whose record was new, so every dead run notifies its owner at most once even when
the worker, the reaper and the dead-letter handler race on it. If the notification itself fails
after the record was written, it is logged and not repeated (the record still shows it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from punctual.clock import iso
from punctual.port import Alert, Store

logger = logging.getLogger(__name__)

SNS_SUBJECT_MAX = 100  # SNS rejects longer subjects


class Alerter(Protocol):
    """Delivers an alert to its owner. Raising is allowed; callers log and go on."""

    def publish(self, alert: Alert) -> None: ...


class LogAlerter:
    """Local mode: one log line per alert (the record itself is in the store, visible via the API/CLI)."""

    def publish(self, alert: Alert) -> None:
        logger.warning(
            "owner alert for %s: run %s of job %s: %s", alert.owner, alert.run_id, alert.job_id, alert.reason
        )


class SnsAlerter:
    """Publishes each alert as JSON to an SNS topic, with an ``owner`` attribute for subscription filters.

    ``client`` is a boto3 SNS client (injected: built once at the edge).
    """

    def __init__(self, topic_arn: str, client: Any) -> None:
        self.topic_arn = topic_arn
        self._client = client

    def publish(self, alert: Alert) -> None:
        self._client.publish(
            TopicArn=self.topic_arn,
            Subject=f"Punctual: run {alert.run_id} needs attention"[:SNS_SUBJECT_MAX],
            Message=json.dumps(alert_document(alert), separators=(",", ":")),
            MessageAttributes={"owner": {"DataType": "String", "StringValue": alert.owner}},
        )


def alerter_for(topic_arn: str | None, sns_client: Callable[[], Any]) -> Alerter:
    """The SNS alerter when a topic is configured (AWS), else the log alerter (local mode).

    ``sns_client`` makes the boto3 SNS client, called only when a topic is configured.
    """
    return SnsAlerter(topic_arn, sns_client()) if topic_arn else LogAlerter()


def alert_document(alert: Alert) -> dict[str, Any]:
    """The JSON shape of an alert (SNS message and ``GET /alerts`` item alike)."""
    return {
        "owner": alert.owner,
        "run_id": alert.run_id,
        "job_id": alert.job_id,
        "created_at": iso(alert.created_at),
        "reason": alert.reason,
    }


def alert_once(store: Store, alerter: Alerter, alert: Alert) -> bool:
    """Record ``alert`` and notify its owner iff this run had no alert yet. Returns True if new.

    Storage errors propagate (the caller's message is then redelivered and this is tried again);
    a failing notification is logged, never raised: the record already stands.
    """
    if not store.record_alert(alert):
        return False
    try:
        alerter.publish(alert)
    except Exception:  # a notification channel outage must not undo or repeat the record
        logger.exception("could not notify %s about run %s (the alert is recorded)", alert.owner, alert.run_id)
    return True
