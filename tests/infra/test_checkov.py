"""Checkov on the synthesized templates: every failed check is fixed or accepted, with a reason, in
``infra/checkov/skips.yaml``; no accepted check is stale.

Checkov runs from its own virtual environment (``.venv-checkov``, made by ``make test`` from
``infra/checkov/requirements.txt``), once for both templates of the session.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.infra.synth import Synth

pytestmark = pytest.mark.infra

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHECKOV = PROJECT_ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS = PROJECT_ROOT / "infra" / "checkov" / "skips.yaml"


@dataclass(frozen=True)
class Finding:
    check_id: str
    resource: str  # "AWS::Lambda::Function.ApiHandlerFunction426EBE6D"
    template: str

    @property
    def logical_id(self) -> str:
        return self.resource.split(".", 1)[1]


@dataclass(frozen=True)
class Report:
    passed: int
    failed: list[Finding]


def _skips() -> dict[str, dict[str, Any]]:
    skips: dict[str, dict[str, Any]] = yaml.safe_load(SKIPS.read_text())
    return skips


def _accepted(finding: Finding, skips: dict[str, dict[str, Any]]) -> bool:
    entry = skips.get(finding.check_id)
    if entry is None:
        return False
    prefixes = entry.get("resources")
    return prefixes is None or any(finding.logical_id.startswith(p) for p in prefixes)


@pytest.fixture(scope="session")
def checkov(default_synth: Synth, options_synth: Synth) -> Report:
    if not CHECKOV.exists():
        pytest.fail(f"checkov is not installed at {CHECKOV}: run `make test` (or `make checkov`) to create it")
    templates = [default_synth.template_path, options_synth.template_path]
    command = [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--quiet", "--compact"]
    command += ["--skip-download"]  # offline: no policy or guideline downloads
    for template in templates:
        command += ["--file", str(template)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    # Exit status 1 means "some check failed": judged below against the skips.
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    output = json.loads(result.stdout)
    reports = output if isinstance(output, list) else [output]
    failed: list[Finding] = []
    passed = 0
    for report in reports:
        assert report["check_type"] == "cloudformation"
        assert report["summary"]["parsing_errors"] == 0
        passed += report["summary"]["passed"]
        failed += [
            Finding(c["check_id"], c["resource"], Path(c["file_path"]).name) for c in report["results"]["failed_checks"]
        ]
    assert passed > 100, "checkov ran no checks: is the template path right?"
    return Report(passed, failed)


def test_every_failed_check_is_accepted_with_a_reason(checkov: Report) -> None:
    skips = _skips()
    unexplained = sorted(
        f"{f.check_id} on {f.resource} ({f.template})" for f in checkov.failed if not _accepted(f, skips)
    )
    assert unexplained == []


def test_every_skip_has_a_one_line_reason_and_is_still_needed(checkov: Report) -> None:
    skips = _skips()
    for check_id, entry in skips.items():
        reason = entry["reason"]
        assert isinstance(reason, str) and len(reason) >= 40 and "\n" not in reason.strip(), check_id
        assert set(entry) <= {"reason", "resources"}, check_id
    stale = sorted(set(skips) - {f.check_id for f in checkov.failed})
    assert stale == [], "skipped checks that no longer fail: remove them from infra/checkov/skips.yaml"


def test_our_functions_all_have_reserved_concurrency_per_checkov(checkov: Report) -> None:
    # CKV_AWS_115 is fixed, not skipped: only CDK's own deploy-time handler may fail it.
    assert all(
        f.logical_id.startswith("CustomVpcRestrictDefaultSG") for f in checkov.failed if f.check_id == "CKV_AWS_115"
    )
