"""One place assembles the runtime: every component, from ``Settings`` and an engine.

The CLI (``punctual worker | scheduler | reaper | api | dev``), the Fargate task (which runs
``punctual worker``) and every Lambda handler build their components here, so that what a
component gets cannot drift between the places that run it (it did: the Fargate worker once had
no SNS alerter, so owner alerts there were only logged). A caller passes only what differs by
place: metrics sinks, the scheduler's instance, a worker's tuning, flags that add to the target
policy.

Nothing here does I/O until a component runs, except :meth:`Runtime.open` (which opens the
engine) and the alerter (which makes an SNS client when a topic is configured).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from punctual.api.caller import Services
from punctual.clock import Clock, SkewCorrectedClock, SystemClock
from punctual.config import Settings
from punctual.dependencies.release import ReleaseOptions
from punctual.engines import open_engine
from punctual.execution.loop import Tuning
from punctual.execution.notify import Notifier
from punctual.execution.options import ExecutionOptions
from punctual.execution.sqs_events import LambdaWorker
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.worker import Worker
from punctual.metrics import Metrics
from punctual.port import Engine
from punctual.reaping.reaper import Reaper, ReapOptions
from punctual.resources import DISPATCH_QUEUE
from punctual.runs.alerts import Alerter, alerter_for
from punctual.scheduling.scheduler import Scheduler, SchedulerOptions, options_from_settings
from punctual.tenancy.admission import Gate, gate_for


def _sns_client() -> Any:
    import boto3

    return boto3.client("sns")


@dataclass
class Runtime:
    """The settings, the engine and the clock every component of one process shares."""

    settings: Settings
    engine: Engine
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def open(cls, settings: Settings, *, clock: Clock | None = None, **engine_options: Any) -> Runtime:
        """Open the engine ``settings`` names (see ``punctual.engines.open_engine``)."""
        clock = clock or SystemClock()
        return cls(settings, open_engine(settings, clock=clock, **engine_options), clock)

    @cached_property
    def alerter(self) -> Alerter:
        """SNS when ``PUNCTUAL_ALERT_TOPIC_ARN`` is set (AWS, Fargate), else the log (locally)."""
        return alerter_for(self.settings.alert_topic_arn, _sns_client)

    @cached_property
    def gate(self) -> Gate:
        """The owners' tenant limits in the workers' lease path (``punctual.tenancy.admission``)."""
        return gate_for(self.engine.store, self.settings, self.clock)

    def target_policy(self, *, allow_loopback: bool = False, allow_private: bool = False) -> TargetPolicy:
        """The settings' target policy; the flags can only widen it (``punctual worker --allow-*``)."""
        base = TargetPolicy.of(self.settings)
        return TargetPolicy(
            allow_private=base.allow_private or allow_private, allow_loopback=base.allow_loopback or allow_loopback
        )

    def execution_options(self, *, visibility_s: int | None = None, prelease: bool = True) -> ExecutionOptions:
        """``visibility_s``: what the messages are received with (default: the deployed queue's).

        ``prelease``: lease runs ahead of their instant (``Settings.prelease_s``); the Lambda worker
        does not (it would only pay the extra reads: its wait is billed either way).
        """
        visibility = visibility_s or self.settings.dispatch_visibility_s or DISPATCH_QUEUE.visibility_timeout_s
        early_s = self.settings.prelease_s
        return ExecutionOptions(
            # messages arrive up to early_s + 1 s early (whole-second delays): wait for them, not hide them
            max_early_ms=1_500 + early_s * 1_000,
            prelease_s=early_s if prelease else 0,
            lease_margin_s=self.settings.lease_margin_s,
            visibility_s=visibility,
            callback_base_url=self.settings.callback_base_url,
            release=ReleaseOptions(
                retention_s=self.settings.retention_s, long_run_after_s=self.settings.long_run_after_s
            ),  # runs released for dependents
        )

    def services(self) -> Services:
        """What the API's routes use (the Lambda handler, ``punctual api``, ``punctual dev``)."""
        return Services.of(self.engine, self.settings, self.clock, alerter=self.alerter)

    def scheduler(
        self,
        *,
        metrics: Metrics,
        instance: int = 0,
        instances: int = 1,
        owner: str | None = None,
        options: SchedulerOptions | None = None,
    ) -> Scheduler:
        """Scheduler instance ``instance`` of ``instances``, its clock corrected by the engine's skew."""
        return Scheduler(
            self.engine,
            self.clock,
            metrics=metrics,
            options=options or options_from_settings(self.settings),
            instance=instance,
            instances=instances,
            owner=owner,
            skew=self.engine.clock_skew,
        )

    def worker(
        self,
        *,
        tuning: Tuning | None = None,
        policy: TargetPolicy | None = None,
        visibility_s: int | None = None,
        worker_id: str | None = None,
        metrics: Metrics | None = None,
    ) -> Worker:
        """The long-running async worker (``punctual worker``, the Fargate task, ``punctual dev``),
        on the clock corrected by the engine's measured skew (:meth:`corrected_clock`)."""
        return Worker(
            self.engine,
            self.corrected_clock(),
            policy=policy or self.target_policy(),
            options=self.execution_options(visibility_s=visibility_s),
            tuning=tuning,
            alerter=self.alerter,
            worker_id=worker_id,
            metrics=metrics,
            gate=self.gate,
        )

    def lambda_worker(self, *, metrics: Metrics | None = None) -> LambdaWorker:
        """The worker Lambda's batch executor (records arrive with the deployed queue's visibility)."""
        return LambdaWorker(
            self.engine,
            self.corrected_clock(),
            self.target_policy(),
            self.execution_options(prelease=False),
            self.alerter,
            metrics=metrics,
            gate=self.gate,
        )

    def reaper(self, *, interval_s: float = 60.0, drain_dead_letters: bool = True) -> Reaper:
        """The reaper; ``drain_dead_letters=False`` where the dead-letter queue has its own event source."""
        options = ReapOptions(
            retention_s=self.settings.retention_s,
            drain_dead_letters=drain_dead_letters,
            long_run_after_s=self.settings.long_run_after_s,  # resends of long runs go to their queue
        )
        notifier = Notifier(self.engine.keys, self.target_policy())  # notify webhooks: the workers' target policy
        return Reaper(
            self.engine,
            self.corrected_clock(),
            alerter=self.alerter,
            options=options,
            interval_s=interval_s,
            notifier=notifier,
        )

    def corrected_clock(self) -> Clock:
        """The clock every component decides *when* by: this process's clock corrected by the skew
        the engine measures against the service (AWS response ``Date`` headers; none locally)."""
        return SkewCorrectedClock(self.clock, self.engine.clock_skew)

    def close(self) -> None:
        self.engine.close()
