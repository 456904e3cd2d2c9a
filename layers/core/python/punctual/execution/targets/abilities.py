"""What the async worker asks of its targets, by ability: each a protocol that
:class:`~punctual.execution.targets.aio.AsyncTargets` meets and a test double may not (the worker
then does without: a task per call, no requests built or connections opened ahead)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from punctual.execution.targets.types import TargetResult
from punctual.execution.targets.wire_call import Volley
from punctual.model import Job, Run


class AsyncTargetExecutor(Protocol):
    """What the async worker needs from targets (:class:`AsyncTargets` or a test double)."""

    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        """Deliver ``run`` to ``job.target`` within ``timeout_s``; never raises."""
        ...

    def close(self) -> None:
        """Release connections (the worker's loop is ending)."""
        ...


Reply = Callable[[TargetResult | BaseException], None]  # an attempt's result, or what ended it


class Cancellable(Protocol):
    def cancel(self) -> object: ...


@runtime_checkable
class Calling(Protocol):
    """Targets that execute an attempt by callback (:meth:`AsyncTargets.call`): no task per call."""

    def call(self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply) -> Cancellable: ...


@runtime_checkable
class Arming(Protocol):
    """Targets that can make an instant's calls ahead of it and let them go at once (:meth:`AsyncTargets.arm`)."""

    def volley(self, opens_in_s: float) -> Volley: ...

    def arm(
        self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply, *, volley: Volley
    ) -> Cancellable | None: ...

    def release(self, volley: Volley) -> None: ...


@runtime_checkable
class Warming(Protocol):
    """Targets that can open the connections of prebuilt requests ahead of their instant."""

    def warm(self, attempts: Sequence[tuple[str, int]], instant: int = 0) -> int: ...


@runtime_checkable
class Prebuilding(Protocol):
    """Targets that can build an attempt's request ahead of its instant (:meth:`AsyncTargets.prebuild`)."""

    def prebuild(self, job: Job, run: Run, attempt: int) -> None: ...

    def forget(self, run: Run, attempt: int) -> None: ...
