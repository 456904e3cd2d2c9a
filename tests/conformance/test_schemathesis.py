"""The API keeps to its OpenAPI document: schemathesis with every check, on both engines.

Runs ``schemathesis run <server>/openapi.json --checks all`` against the local server (the e2e
``stack``: embedded engine, and aws engine on a moto server), with a fixed seed and a bounded
budget (``EXAMPLES`` per operation and phase; ``MAX_TIME_S`` stops a run that hangs), and requires
0 failures. Every accepted deviation is next to this file with its reason: expected statuses in
``schemathesis.toml``, accepted failures in ``schemathesis-baseline.json``; the 422s that the
toml accepts for valid data must name a rule the document cannot state (our own check, in
``hooks.py``). On failure the assertion shows schemathesis's report, with a curl command per failure.

The aws engine is slower (moto serializes every request), so it runs fewer examples.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.conformance

CONFIG = Path(__file__).with_name("schemathesis.toml")
BASELINE = Path(__file__).with_name("schemathesis-baseline.json")  # accepted deviations, each with its reason
HOOKS = Path(__file__).with_name(
    "hooks.py"
)  # our own check: a 422 to valid data names a rule the document cannot state
SEED = 20261130
EXAMPLES = {"embedded": 30, "aws": 12}
MAX_TIME_S = {"embedded": 240, "aws": 300}  # a hard stop (subprocess timeout), far above the usual time


def test_the_api_conforms_to_its_document_with_every_check(stack: Stack, tmp_path: Path) -> None:
    client = stack.client()
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{stack.url}/openapi.json",
        "--checks",
        "all",
        "--baseline",
        str(BASELINE),
        "--seed",
        str(SEED),
        "--max-examples",
        str(EXAMPLES[stack.name]),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--header",
        f"Authorization: Bearer {client.key}",
        "--no-color",
        "--report-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=MAX_TIME_S[stack.name], check=False, env=env)
    report = done.stdout[-20_000:] + done.stderr[-2_000:]
    assert done.returncode == 0, report
    assert " passed" in report, report


@pytest.mark.unit
def test_the_baseline_entry_matches_what_schemathesis_reports_after_a_delete() -> None:
    """The accepted deviation is keyed as schemathesis keys it (a stale entry would hide nothing
    and an entry with a typo would let the soft delete fail the run at random)."""
    from schemathesis.baseline import Baseline
    from schemathesis.openapi.checks import UseAfterFree

    baseline = Baseline.load(BASELINE)
    after_delete = UseAfterFree(operation="DELETE /jobs/{job_id}", message="", free="", usage="")
    assert baseline.match(after_delete, "use_after_free") is not None
    elsewhere = UseAfterFree(operation="DELETE /alerts/{id}", message="", free="", usage="")
    assert baseline.match(elsewhere, "use_after_free") is None
    assert all(entry.extra.get("reason") for entry in baseline.entries)


@pytest.mark.unit
def test_our_check_accepts_a_422_only_for_a_rule_the_document_cannot_state() -> None:
    """hooks.py: which fields of a 422 to valid data are explained (issue 26 case 8 was not)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("conformance_hooks", HOOKS)
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    create = hooks.NOT_IN_THE_DOCUMENT["POST /jobs"]
    assert hooks._explained("schedule", "cron field 'minute' ...", create)
    assert hooks._explained("target.headers.X-Price", "not ASCII", create)
    assert hooks._explained("target", "a header is either plain or secret, not both: x", create)
    # the discriminator's refusal of a target without type, and a type mismatch, are not
    assert not hooks._explained("target", "Unable to extract tag using discriminator 'type'", create)
    assert not hooks._explained("max_backfill", "Input should be a valid integer", create)
    assert hooks._explained("cursor", "not a cursor", hooks.NOT_IN_THE_DOCUMENT["GET /jobs/{job_id}/runs"])
