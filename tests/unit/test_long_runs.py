"""Long runs (issue 15 item 1): a run longer than a Lambda worker may take is dispatched to the
long-run queue wherever it is dispatched (claim, trigger, reaper), and the API refuses a
``timeout_s`` the deployment cannot serve."""

from __future__ import annotations

import pytest

from punctual.errors import InvalidInput
from punctual.jobs.checks import check_timeout
from punctual.scheduling.planning import PlanOptions, is_long_run, plan
from tests.unit.test_planning import T0, due_job

pytestmark = pytest.mark.unit

LAMBDA_MAX_S = 870  # a 900 s worker minus the 30 s lease margin


@pytest.mark.parametrize(
    ("timeout_s", "after_s", "long"),
    [(871, LAMBDA_MAX_S, True), (870, LAMBDA_MAX_S, False), (43_200, None, False), (None, LAMBDA_MAX_S, False)],
)
def test_only_runs_longer_than_a_lambda_worker_are_long(timeout_s: int | None, after_s: int | None, long: bool) -> None:
    # None: no long-run queue deployed, or an engine that does not route (one queue)
    assert is_long_run(timeout_s, after_s) is long


def test_the_claim_dispatches_a_long_job_as_a_long_run() -> None:
    options = PlanOptions(long_run_after_s=LAMBDA_MAX_S)
    [long] = plan(due_job(timeout_s=3_600), T0, options).dispatches
    [short] = plan(due_job(timeout_s=60), T0, options).dispatches
    assert (long.long_run, short.long_run) == (True, False)


def test_a_timeout_the_deployment_cannot_serve_is_refused_with_the_way_out() -> None:
    check_timeout(LAMBDA_MAX_S, LAMBDA_MAX_S)
    check_timeout(None, LAMBDA_MAX_S)
    with pytest.raises(InvalidInput, match=r"fargate_workers=true") as refused:
        check_timeout(LAMBDA_MAX_S + 1, LAMBDA_MAX_S)
    assert refused.value.field == "timeout_s"
