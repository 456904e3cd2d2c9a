"""Targets: where a run is delivered (an HTTP endpoint, a Lambda function, an SQS queue, a state
machine, an event bus), and the checks that keep the worker from being turned against its own network.

:class:`Targets` is the dispatcher the worker calls; each kind lives in its own module
(``http``, ``aws``). Every target receives the run id (to deduplicate: delivery is at least once),
the attempt number and the scheduled time, and answers with a :class:`TargetResult`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from punctual.execution.targets.policy import TargetPolicy, TargetRefused, check_target
from punctual.execution.targets.types import (
    Invocation,
    TargetExecutor,
    TargetResult,
    failed,
    succeeded,
    timed_out,
    unbuildable,
)
from punctual.model import HttpTarget, Job, Run
from punctual.port import Keys

if TYPE_CHECKING:
    from punctual.execution.targets.aws import AwsTargets

__all__ = [
    "Invocation",
    "TargetExecutor",
    "TargetPolicy",
    "TargetRefused",
    "TargetResult",
    "Targets",
    "check_target",
    "failed",
    "succeeded",
    "timed_out",
    "unbuildable",
]

logger = logging.getLogger(__name__)


class Targets:
    """Dispatches a run to its job's target kind.

    ``policy`` bounds where HTTP targets may connect. ``aws`` executes the AWS kinds; it is built
    on first use (its boto3 clients are created lazily), so a worker that only calls HTTP targets
    never needs AWS credentials.
    """

    def __init__(
        self,
        policy: TargetPolicy | None = None,
        *,
        aws: AwsTargets | None = None,
        keys: Keys | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        self.policy = policy or TargetPolicy()
        self._aws = aws
        self.keys = keys  # opens secret headers and signs HTTP requests (the engine's keys)
        self.callback_base_url = callback_base_url  # the API's, for callback jobs (punctual.runs.tokens)

    def execute(self, job: Job, run: Run, attempt: int, deadline: float) -> TargetResult:
        """Execute one attempt. Never raises: a request that cannot be built fails for good
        (:func:`unbuildable`), any other unexpected error becomes a retryable failure (so a bug
        shows up in the run's attempts and ends in ``dead`` + alert, not in a crash loop).
        """
        if deadline <= time.monotonic():
            return timed_out(0)
        try:
            invocation = Invocation.of(job, run, attempt, self.keys, self.callback_base_url)
        except TargetRefused as exc:  # a callback job this worker cannot call back for
            return unbuildable(exc.message)
        except ValueError as exc:  # a secret sealed under another key: retrying cannot fix it
            return failed(f"a secret header of the job does not open: {exc}", retryable=False)
        try:
            if isinstance(job.target, HttpTarget):
                from punctual.execution.targets import http

                return http.send(job.target, invocation, self.policy, deadline)
            return self._aws_targets().send(job.target, invocation, deadline)
        except TargetRefused as exc:
            return unbuildable(exc.message)
        except UnicodeError as exc:  # a value the request's encoding cannot carry: the same on every attempt
            return unbuildable(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # see docstring: a target must never take the worker down
            logger.exception("target %s of job %s raised", job.target.type, job.id)
            return failed(f"{type(exc).__name__}: {exc}", retryable=True)

    def warm_up(self) -> None:
        """Do the one-time work of the HTTP target (imports, CA bundle) before the first run needs it."""
        from punctual.execution.targets import http

        http.warm_up()

    def _aws_targets(self) -> AwsTargets:
        if self._aws is None:
            from punctual.execution.targets.aws import AwsTargets

            self._aws = AwsTargets()
        return self._aws
