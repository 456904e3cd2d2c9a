"""punctual capacity's deploy line names only context parameters the CDK app accepts, with valid values."""

from __future__ import annotations

import pytest

from infra.config import InfraConfig
from punctual.capacity import Load, plan_capacity

pytestmark = pytest.mark.infra


@pytest.mark.parametrize(
    "load",
    [
        Load(jobs=10_000, peak_runs_per_second=50),
        Load(jobs=10_000_000, peak_runs_per_second=20_000),
        Load(jobs=10_000_000, peak_runs_per_second=20_000, open_index=False),
        Load(jobs=10_000_000, peak_runs_per_second=20_000, worker="fargate"),
    ],
    ids=["small", "mission", "no-open-index", "fargate"],
)
def test_the_deploy_context_is_valid(load: Load) -> None:
    context = plan_capacity(load).context
    config = InfraConfig.from_values(context)  # every name known, every value valid
    assert config.shards == context["shards"] and config.scheduler_instances == context["scheduler_instances"]
    assert config.open_index is context.get("open_index", True)
    assert config.stats_counters is context.get("stats_counters", True)
    assert config.warm_throughput is context.get("warm_throughput", False)
    if config.warm_throughput:
        assert config.warm_write_units == context["warm_write_units"]
    assert config.lambda_concurrency_quota == context.get("lambda_concurrency_quota", 1_000)
