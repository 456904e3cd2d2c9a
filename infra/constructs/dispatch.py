"""The dispatch queue and its dead-letter queue, built from ``punctual.resources.QUEUES``.

Retention and the redrive's maxReceiveCount come from the definitions unchanged (maxReceiveCount
is derived from the retry policy's bounds in ``punctual.resources``). A dead-letter queue must keep
messages at least as long as each queue that redrives into it: SQS keeps a message's original
enqueue time when it moves it, so a shorter retention would delete dead letters before the reaper
reads them; building such a pair raises. The visibility
timeout is the definition's, raised where a Lambda consumes the queue to
``VISIBILITY_PER_FUNCTION_TIMEOUT`` x that function's timeout (see ``infra.constants``): Lambda
refuses an event source on a queue that hides messages for less than the function may run.
Both queues use SQS-managed encryption (no key to manage, no KMS calls per message) and refuse
requests without TLS.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from punctual import resources


class Dispatch(Construct):
    """``queue`` (dispatch) and ``dead_letter_queue``; ``consumer_timeouts_s``: queue name -> timeout.

    With ``long_run`` also ``long_run_queue``: runs longer than a Lambda worker may take are
    dispatched there, and only the Fargate workers consume it (its messages redrive to the same
    dead-letter queue).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, consumer_timeouts_s: Mapping[str, int], long_run: bool = False
    ) -> None:
        super().__init__(scope, construct_id)
        self._consumer_timeouts_s = consumer_timeouts_s
        self.queues: dict[str, sqs.Queue] = {}
        self._definitions = {d.logical_name: d for d in (*resources.QUEUES, resources.LONG_RUN_QUEUE)}
        for definition in resources.QUEUES:  # dead-letter queues are defined before their sources
            self.queues[definition.logical_name] = self._build_queue(definition)
        if long_run:
            self.queues[resources.LONG_RUN_QUEUE.logical_name] = self._build_queue(resources.LONG_RUN_QUEUE)

    @property
    def long_run_queue(self) -> sqs.Queue | None:
        return self.queues.get(resources.LONG_RUN_QUEUE.logical_name)

    @property
    def queue(self) -> sqs.Queue:
        return self.queues[resources.DISPATCH_QUEUE.logical_name]

    @property
    def dead_letter_queue(self) -> sqs.Queue:
        return self.queues[resources.DEAD_LETTER_QUEUE.logical_name]

    def _build_queue(self, definition: resources.QueueDef) -> sqs.Queue:
        dead_letter = None
        if definition.dead_letter:
            check_dead_letter_retention(definition, self._definitions[definition.dead_letter])
            dead_letter = sqs.DeadLetterQueue(
                queue=self.queues[definition.dead_letter], max_receive_count=definition.max_receives or 1
            )
        return sqs.Queue(
            self,
            "".join(part.capitalize() for part in definition.logical_name.split("-")),
            visibility_timeout=cdk.Duration.seconds(self.visibility_timeout_s(definition)),
            retention_period=cdk.Duration.seconds(definition.retention_s),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=dead_letter,
        )

    def visibility_timeout_s(self, definition: resources.QueueDef) -> int:
        consumer_timeout = self._consumer_timeouts_s.get(definition.logical_name, 0)
        wanted = max(definition.visibility_timeout_s, constants.VISIBILITY_PER_FUNCTION_TIMEOUT * consumer_timeout)
        return min(wanted, constants.MAX_VISIBILITY_S)


def check_dead_letter_retention(source: resources.QueueDef, dead_letter: resources.QueueDef) -> None:
    """Raise ValueError when ``dead_letter`` keeps messages for less time than ``source`` does."""
    if dead_letter.retention_s < source.retention_s:
        raise ValueError(
            f"{dead_letter.logical_name} keeps messages {dead_letter.retention_s} s, less than its source "
            f"{source.logical_name} ({source.retention_s} s): moved messages keep their enqueue time and would expire"
        )
