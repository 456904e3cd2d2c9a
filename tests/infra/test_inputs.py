"""What the app is built from: context parameters (``infra.config``), the dependency layer
(``infra.layer_build``) and the Lambda entry points the stack points at.

No synthesis here: fast checks of validation, of what goes into the layer, and that the code
deployed to Lambda imports only what the layers and the runtime provide.
"""

from __future__ import annotations

import ast
import json
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from infra import constants, layer_build
from infra.config import InfraConfig, InfraConfigError

pytestmark = pytest.mark.infra

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class FakeNode:
    def __init__(self, context: dict[str, object]) -> None:
        self.context = context

    def get_all_context(self, defaults: object = None) -> dict[str, object]:
        return self.context


def test_defaults_are_the_small_default() -> None:
    config = InfraConfig()
    # 1,000 runs/s (infra.sizing): 400 due-index WRU/s over 16 shards, a third of a partition each at most
    assert config.shards * 1000 / 3 >= 1_000 * 2
    assert config.scheduler_reserved_concurrency == 2 * config.scheduler_instances
    assert config.deletion_protection and config.retain_data
    assert not config.fargate_workers and not config.api_usage_plan
    assert config.target_arns == ()


def test_command_line_strings_are_converted() -> None:
    node = FakeNode({"shards": "64", "fargate_workers": "true", "@aws-cdk/core:flag": True, "cli-telemetry": False})
    config = InfraConfig.from_context(node)
    assert config.shards == 64
    assert config.fargate_workers is True


def test_the_app_exits_with_a_clear_message_on_invalid_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra import app

    # As from `npx cdk synth -c shards=0` (then `-c sharsd=4`): no stack gets built.
    monkeypatch.setattr(app, "cdk_json_context", lambda: {"shards": "0"})
    assert app.main() == 2
    assert "shards: Input should be greater than or equal to 1 (got '0')" in capsys.readouterr().err
    monkeypatch.setattr(app, "cdk_json_context", lambda: {"sharsd": "4"})
    assert app.main() == 2
    assert "unknown context parameter(s): sharsd" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given",
    [
        "arn:aws:lambda:us-east-1:123456789012:function:a, arn:aws:sqs:us-east-1:123456789012:q",
        '["arn:aws:lambda:us-east-1:123456789012:function:a", "arn:aws:sqs:us-east-1:123456789012:q"]',
        ["arn:aws:lambda:us-east-1:123456789012:function:a", "arn:aws:sqs:us-east-1:123456789012:q"],
    ],
)
def test_target_arns_accept_a_list_or_comma_separated_text(given: object) -> None:
    config = InfraConfig.from_values({"target_arns": given})
    assert config.target_arns == (
        "arn:aws:lambda:us-east-1:123456789012:function:a",
        "arn:aws:sqs:us-east-1:123456789012:q",
    )


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"shards": "0"}, "shards"),
        ({"shards": "many"}, "shards"),
        ({"worker_max_concurrency": 5000}, "worker_max_concurrency"),
        ({"worker_batch_size": 11}, "worker_batch_size"),
        ({"scheduler_instances": 20, "shards": 8}, "scheduler_instances (20) > shards (8)"),
        ({"retain_data": "false"}, "deletion_protection=false"),
        ({"target_arns": "arn:aws:s3:::bucket"}, "not a Lambda, Step Functions, SQS or EventBridge ARN"),
        ({"target_arns": "[not json"}, "target_arns"),
        ({"log_retention_days": 31}, "log_retention_days"),
        ({"alarm_email": "nobody"}, "alarm_email"),
        ({"shard": 64}, "unknown context parameter(s): shard"),
    ],
)
def test_invalid_context_is_a_clear_error(context: dict[str, object], message: str) -> None:
    with pytest.raises(InfraConfigError) as error:
        InfraConfig.from_context(FakeNode(context))
    assert message in str(error.value)


def test_layer_carries_every_runtime_dependency_but_boto3() -> None:
    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    requirements, no_deps = layer_build.layer_requirements()
    names = {layer_build._name(r) for r in requirements + no_deps}
    for requirement in declared:
        name = layer_build._name(requirement)
        assert (name in names) != (name in layer_build.PROVIDED_BY_RUNTIME), name
    assert "aws-xray-sdk" in names  # Powertools Tracer with active tracing
    assert any(r.startswith("python-dateutil") and "<3" in r for r in requirements)  # runtime botocore's range


def _imports(path: Path) -> set[str]:
    """Top-level modules ``path`` imports (absolute imports only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_lambda_code_imports_only_what_the_layers_and_the_runtime_provide() -> None:
    archive, _ = layer_build.dependency_layer_zip()
    with zipfile.ZipFile(archive) as zf:
        layer = {Path(name).parts[1].removesuffix(".py") for name in zf.namelist() if name.count("/") >= 1}
    provided = layer | {"boto3", "botocore", "punctual"} | set(sys.stdlib_module_names)
    sources = [*constants.CORE_LAYER_DIR.rglob("*.py"), *constants.FUNCTIONS_DIR.rglob("*.py")]
    missing = {
        f"{module} ({path.relative_to(PROJECT_ROOT)})" for path in sources for module in _imports(path) - provided
    }
    assert not missing, f"not in the Lambda layers or runtime: {sorted(missing)}"


@pytest.mark.parametrize("name", ["api", "scheduler", "worker", "reaper"])
def test_every_entry_point_defines_the_handler_the_stack_names(name: str) -> None:
    module, function = constants.HANDLER.split(".")
    source = constants.FUNCTIONS_DIR / name / f"{module}.py"
    tree = ast.parse(source.read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert function in defined, f"functions/{name}/{module}.py defines no top-level {function}(event, context)"


def test_deploy_guide_documents_every_context_parameter_with_its_default() -> None:
    rows = {}
    for line in (PROJECT_ROOT / "docs" / "deploy.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    for name, field in InfraConfig.model_fields.items():
        assert name in rows, f"docs/deploy.md lacks context parameter {name}"
        default = field.get_default(call_default_factory=True)
        if isinstance(default, dict):
            expected = f"`{json.dumps(default, separators=(',', ':'))}`"  # as given on the command line
        elif isinstance(default, bool):
            expected = f"`{str(default).lower()}`"
        elif default is None:
            expected = "none"
        elif default == ():
            expected = "`[]`"
        else:
            expected = f"`{default}`"
        assert rows[name] == expected, f"{name}: docs say {rows[name]}, the default is {expected}"
