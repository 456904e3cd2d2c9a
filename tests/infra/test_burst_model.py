"""punctual burst-model: the burst simulation reads its settings from the synthesized template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config import InfraConfig
from punctual.capacity.fleet import instance_claim_rate
from punctual.capacity.simulate import simulate
from punctual.capacity.synth import read_template
from punctual.cli import main
from punctual.errors import ConfigError
from tests.infra.synth import OPTIONS_CONTEXT, Synth

pytestmark = pytest.mark.infra


def test_the_default_stack_is_read_as_synthesized(default_synth: Synth) -> None:
    d = read_template(default_synth.template_path)
    config = InfraConfig()
    assert (d.shards, d.lookahead_ms, d.scheduler_instances) == (
        config.shards,
        config.lookahead_ms,
        config.scheduler_instances,
    )
    assert (d.batch_size, d.max_concurrency) == (config.worker_batch_size, config.worker_reservation)
    assert (d.min_pollers, d.open_index, d.fargate_tasks) == (0, True, 0)
    assert (d.reserved_concurrency, d.worker_concurrency) == (config.worker_reservation, config.worker_reservation)


def test_the_options_stack_brings_warm_throughput_and_no_open_index(options_synth: Synth) -> None:
    d = read_template(options_synth.template_path)
    assert d.warm_writes == json.loads(OPTIONS_CONTEXT["warm_write_units"])
    assert d.open_index is False
    # at the burst: the tasks the schedule raises the service to before the hour (fargate_prewarm_count)
    assert d.fargate_tasks == InfraConfig.from_values(OPTIONS_CONTEXT).fargate_prewarm_count
    assert d.lambda_workers is True  # Lambda workers too: the burst model runs them
    first = d.burst(2_000, steady=False)
    assert first.due_write_throughput == 12_000 and first.runs_writes_per_run == 3


def test_more_time_to_warm_up_means_less_lateness(options_synth: Synth) -> None:
    d = read_template(options_synth.template_path)
    first, steady = (simulate(d.burst(20_000, steady=s)) for s in (False, True))
    assert first.started == steady.started == 20_000
    # 7 instances of 512 MB over 16 shards: the busiest owns 3 and claims (0.29 vCPU - 3 polls a second) /
    # 4.9 ms = 57/s, so the fleet claims 57 x 16 / 3 = 305 runs/s: 20,000 runs take longer than the lookahead
    per_instance = instance_claim_rate(3, 512)
    assert first.claim_rate == steady.claim_rate == pytest.approx(per_instance * 16 / 3, abs=0.1)
    assert first.claimed_late > 0
    # a burst the fleet claims in time (8,000 runs in 26 s of the 35 s lookahead): the workers decide, and
    # warm pollers and environments start it sooner than the first burst's cold ones
    first, steady = (simulate(d.burst(8_000, steady=s)) for s in (False, True))
    assert first.claimed_late == steady.claimed_late == 0
    assert steady.lateness_ms["p99"] < first.lateness_ms["p99"]


def test_the_small_default_takes_its_own_burst_and_not_the_missions(default_synth: Synth) -> None:
    d = read_template(default_synth.template_path)
    # its load (1,000 runs/s): one instance claims 49/s, all 1,000 within the 35 s lookahead
    own = simulate(d.burst(1_000, steady=True))
    assert own.claimed_late == 0 and own.lateness_ms["p99"] <= 1_000
    # the mission's 20,000 runs/s: claimed late (one 512 MB instance polling 16 shards claims 49 runs/s)
    # and held to 176 concurrent workers, tens of seconds late
    mission = simulate(d.burst(20_000, steady=True))
    assert mission.claim_rate == pytest.approx(48.6, abs=0.1) and mission.lateness_ms["p99"] > 30_000


def test_cli_prints_the_curve(default_synth: Synth, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["burst-model", "--cdk-out", str(default_synth.outdir), "--runs-per-second", "2000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deployment"]["shards"] == 16 and out["deployment"]["shards_per_instance"] == 16
    for name in ("first_burst", "steady"):
        assert [p["percent"] for p in out[name]["curve"]][-1] == 100.0
        assert out[name]["runs"] == 2_000


def test_a_template_that_is_not_punctual_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "Other.template.json"
    other.write_text(json.dumps({"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {}}}}))
    with pytest.raises(ConfigError, match="not a Punctual stack"):
        read_template(other)
    assert main(["burst-model", "--cdk-out", str(tmp_path / "missing.json")]) == 2
    assert "synthesize the stack first (make synth" in capsys.readouterr().err  # issue 31: not a bare ENOENT
    (tmp_path / "broken.template.json").write_text("{")
    assert main(["burst-model", "--cdk-out", str(tmp_path / "broken.template.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
