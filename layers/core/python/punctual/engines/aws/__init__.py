"""The ``aws`` engine: DynamoDB (:class:`DynamoStore`) and SQS (:class:`SqsQueue`) behind the port.

Production runs it against the tables and queues the CDK app deploys; ``punctual dev --engine aws``
and the tests run it against any endpoint boto3 is pointed at (``AWS_ENDPOINT_URL``), creating the
resources first with :func:`ensure_resources`.
"""

from __future__ import annotations

import boto3
from botocore.exceptions import ClientError

from punctual.clock import Clock, SystemClock
from punctual.config import Settings
from punctual.engines.aws.bootstrap import MISSING_QUEUE, ensure_resources
from punctual.engines.aws.clients import AwsClients, ServiceClock
from punctual.engines.aws.keys import KmsKeys
from punctual.engines.aws.queue import DispatchFailed, SqsQueue
from punctual.engines.aws.store import DynamoStore
from punctual.errors import ConfigError
from punctual.port import Engine
from punctual.resources import DEAD_LETTER_QUEUE, DISPATCH_QUEUE, physical_name

__all__ = [
    "AwsClients",
    "AwsEngine",
    "DispatchFailed",
    "DynamoStore",
    "ServiceClock",
    "SqsQueue",
    "ensure_resources",
    "keys_of",
]


class AwsEngine(Engine):
    """A :class:`DynamoStore` plus the dispatch queue and its dead-letter queue.

    Table names come from ``settings.table_name``; queue URLs from settings, else they are looked up
    by name (``<prefix>-dispatch``, ``<prefix>-dispatch-dlq``). ``serialize=True`` runs DynamoDB calls
    one at a time (for race tests against moto, which is not thread-safe).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        session: boto3.session.Session | None = None,
        serialize: bool = False,
        clients: AwsClients | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.clients = clients or AwsClients(session, region=settings.region, serialize=serialize)
        self.service_clock: ServiceClock = self.clients.service_clock
        self.store: DynamoStore = DynamoStore(
            self.clients.dynamodb,
            jobs_table=settings.table_name("jobs"),
            runs_table=settings.table_name("runs"),
            leases_table=settings.table_name("leases"),
            shards=settings.shards,
            open_shards=settings.open_shards,
            open_index=settings.open_index,
            stats_counters=settings.stats_counters,
            sweep_pages=settings.sweep_pages,
            retention_days=settings.retention_days,
        )
        dispatch_url = settings.dispatch_queue_url or self._queue_url(DISPATCH_QUEUE.logical_name, "dispatch_queue_url")
        dead_letter_url = settings.dead_letter_queue_url or self._queue_url(
            DEAD_LETTER_QUEUE.logical_name, "dead_letter_queue_url"
        )
        self.queue: SqsQueue = SqsQueue(self.clients.sqs, dispatch_url, long_run_url=settings.long_run_queue_url)
        self.dead_letters: SqsQueue = SqsQueue(self.clients.sqs, dead_letter_url)
        self.keys: KmsKeys = keys_of(settings, self.clients)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        session: boto3.session.Session | None = None,
        serialize: bool = False,
        bootstrap: bool = False,
    ) -> AwsEngine:
        """Open the engine; ``bootstrap=True`` first creates missing tables and queues."""
        clients = AwsClients(session, region=settings.region, serialize=serialize)
        if bootstrap:
            settings = ensure_resources(settings, clients=clients)
        return cls(settings, clock=clock, clients=clients)

    @property
    def clock_skew(self) -> ServiceClock:
        return self.service_clock

    def close(self) -> None:
        self.store.close()
        self.queue.close()
        self.dead_letters.close()
        self.clients.close()

    def _queue_url(self, logical_name: str, setting: str) -> str:
        """Look a queue URL up by its conventional name when configuration does not give it."""
        name = physical_name(self.settings.name_prefix, logical_name)
        try:
            url: str = self.clients.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in MISSING_QUEUE:
                raise
            raise ConfigError(
                f"queue {name} does not exist: set PUNCTUAL_{setting.upper()} or create the resources "
                "first (punctual dev --engine aws does)"
            ) from exc
        return url


def keys_of(settings: Settings, clients: AwsClients) -> KmsKeys:
    """The engine's keys alone (the callback authorizer needs nothing else). Unset ids (a local stack
    configured by prefix only) name the keys by the aliases ``bootstrap.ensure_resources`` gives them;
    the CDK app always sets the ARNs."""
    return KmsKeys(
        clients.client("kms"),
        settings.secrets_key_id or "alias/" + physical_name(settings.name_prefix, "secrets"),
        settings.signing_key_id or "alias/" + physical_name(settings.name_prefix, "signing"),
    )
