"""cdk-nag (AwsSolutions) finds nothing unacknowledged, every acknowledgement says why, cfn-lint
accepts the templates, and the real CLI path ``npx cdk synth`` works offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.synth import Synth

pytestmark = pytest.mark.infra

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CDK_CLI = PROJECT_ROOT / "node_modules" / ".bin" / "cdk"


def _plugin_report(synth: Synth) -> dict[str, object]:
    assert synth.report is not None, "no validation-report.json: the cdk-nag plugin did not run"
    (report,) = synth.report["pluginReports"]
    assert report["pluginName"] == "AwsSolutions"
    return report


def test_cdk_nag_reports_no_unacknowledged_findings(any_synth: Synth) -> None:
    report = _plugin_report(any_synth)
    findings = [
        f"{v['ruleName']} at {c['constructPath']}" for v in report["violations"] for c in v["violatingConstructs"]
    ]
    assert findings == []
    assert any_synth.error is None
    assert report["conclusion"] == "success"


def test_every_acknowledgement_is_narrow_and_has_a_reason(any_synth: Synth) -> None:
    suppressed = _plugin_report(any_synth)["suppressedViolations"]
    assert suppressed, "expected the documented acknowledgements (X-Ray, WAF, ...)"
    for violation in suppressed:
        assert len(violation["reason"].strip()) >= 20, violation["ruleName"]
        # Acknowledged on the construct that carries the finding, never on the whole stack.
        assert "/" in violation["acknowledgedAt"], violation
    rules = {v["ruleName"].split("[")[0] for v in suppressed}
    assert rules <= {
        "AwsSolutions-IAM5",  # X-Ray, ecr:GetAuthorizationToken, operator-chosen target ARN patterns
        "AwsSolutions-IAM4",  # API Gateway's account logging role
        "AwsSolutions-APIG2",  # no request validator: proxy methods have no models, the API validates
        "AwsSolutions-APIG3",  # WAF
        "AwsSolutions-COG4",  # IAM, not Cognito, authorization
        "AwsSolutions-ECS2",  # Fargate environment holds names, no secrets
    }


def test_cfn_lint_accepts_the_template(any_synth: Synth) -> None:
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005 (redundant DependsOn) is how CDK writes dependencies: the one expected warning.
    result = subprocess.run(
        [str(cfn_lint), "-i", "W3005", "--", str(any_synth.template_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(
    not CDK_CLI.exists() or shutil.which("node") is None,
    reason="the CDK CLI is not installed: run `npm ci` (the Makefile does before the tests)",
)
def test_cdk_cli_synthesizes_offline_without_credentials(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("CDK_")}
    env.update(
        {
            # No credentials, no profile, no instance metadata: the CLI must not reach AWS.
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_REGION": "us-east-1",
            "CDK_DISABLE_VERSION_CHECK": "1",
            "CDK_DISABLE_CLI_TELEMETRY": "true",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
    )
    result = subprocess.run(
        [str(CDK_CLI), "synth", "--no-notices", "--quiet", "--output", str(tmp_path / "cdk.out")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "cdk.out" / "Punctual.template.json").is_file()
    assert (tmp_path / "cdk.out" / "validation-report.json").is_file()
