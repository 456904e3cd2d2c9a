"""What a callback job's run (``completion: callback``, issue 33) costs on AWS beyond a run whose target's
answer ends it: the capacity model's per-run counts (``punctual.capacity.counts``) are those of jobs
that answer, and callback jobs are opt-in, so the model's figures for a load stay as they are; this
prices the share of runs that are callbacks, per run.

A callback run's worker finish is its acceptance (the run item, 1 write unit; its ``open`` entry stays),
and its completion writes what a worker's finish writes (the run, its ``open`` entry removed, the stats
counter: the happy path's finish, already counted). In between, and for the completion itself, each
callback is one API Gateway request, one invocation of the callback authorizer (results never
cached) and one of the API, which reads the run (strongly consistent) and its job (head strongly
consistent, spec eventually: the worker's read) and writes the run once. While accepted, a run
older than a minute is read by the reaper's open-index pass once a minute, as every open run is.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual.capacity.constants import value

ACCEPT_WRITE_UNITS = 1.0  # the acceptance: the run item (under 1 KB), the open entry unchanged
HEARTBEAT_WRITE_UNITS = 1.0  # a heartbeat: the run item (its deadline, heartbeat time and note)
CALLBACK_READ_UNITS = 1.0 + 1.0 + 0.5  # the run (strong), the job's head (strong) and spec (eventual, < 4 KB)
REAPER_READ_UNITS_PER_MINUTE = 1.0  # an accepted run past its first minute: one batched strong read a pass
# Estimates (not measured): an authorizer invocation is one HMAC at 256 MB, an API invocation one
# callback at 1,024 MB, as the functions are deployed (infra.constants)
AUTHORIZER_GB_S = 0.256 * 0.010
API_GB_S = 1.024 * 0.050


@dataclass(frozen=True, slots=True)
class CallbackRun:
    """What one callback run adds to a run's happy path, for ``heartbeats`` heartbeats and
    ``accepted_minutes`` minutes accepted."""

    heartbeats: float
    accepted_minutes: float
    write_units: float
    read_units: float
    api_requests: float  # API Gateway REST requests; each is also one authorizer and one API invocation

    @property
    def usd(self) -> float:
        """The run's extra cost, at the sourced prices (``punctual.capacity.constants``)."""
        per_million = 1e-6
        lambda_s = self.api_requests * (AUTHORIZER_GB_S + API_GB_S) * value("lambda_gb_s_usd")
        return (
            self.write_units * value("ddb_wru_usd") * per_million
            + self.read_units * value("ddb_rru_usd") * per_million
            + self.api_requests * value("apigw_request_usd") * per_million
            + 2 * self.api_requests * value("lambda_request_usd") * per_million
            + lambda_s
        )


def callback_run(heartbeats: float, accepted_minutes: float = 0.0) -> CallbackRun:
    """The extra counts of one callback run with ``heartbeats`` heartbeats, accepted for ``accepted_minutes``."""
    callbacks = heartbeats + 1  # the heartbeats and the completion
    return CallbackRun(
        heartbeats=heartbeats,
        accepted_minutes=accepted_minutes,
        write_units=ACCEPT_WRITE_UNITS + heartbeats * HEARTBEAT_WRITE_UNITS,
        read_units=callbacks * CALLBACK_READ_UNITS + max(0.0, accepted_minutes - 1) * REAPER_READ_UNITS_PER_MINUTE,
        api_requests=callbacks,
    )
