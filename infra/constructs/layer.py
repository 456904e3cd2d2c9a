"""The two Lambda layers every function uses.

- ``dependencies``: third-party packages built for Lambda's platform (``infra.layer_build``),
  cached by content hash. It changes only when the dependencies do, so ordinary deploys do not
  upload it again.
- ``core``: the ``punctual`` package as it lies in the repository (``layers/core/python/punctual``),
  the layer layout itself, no build step, but only the modules the handlers import
  (``infra.import_graph.handler_closure``): the CLI, the benches and the local server stay out.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import constants, import_graph, layer_build


class Layers(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dependencies = self._build_dependencies()
        self.core = self._build_layer(
            "Core",
            lambda_.Code.from_asset(
                str(constants.CORE_LAYER_DIR), exclude=[*constants.ASSET_EXCLUDES, *not_shipped_in_core()]
            ),
            "Punctual core package (punctual)",
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.dependencies, self.core]

    def _build_dependencies(self) -> lambda_.LayerVersion:
        archive, fingerprint = layer_build.dependency_layer_zip()
        # The fingerprint names the content exactly: CDK need not hash the archive on every synth.
        code = lambda_.Code.from_asset(str(archive), asset_hash=fingerprint, asset_hash_type=cdk.AssetHashType.CUSTOM)
        return self._build_layer("Dependencies", code, "Punctual third-party dependencies (pydantic, powertools, ...)")

    def _build_layer(self, construct_id: str, code: lambda_.Code, description: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            construct_id,
            code=code,
            description=description,
            compatible_runtimes=[constants.RUNTIME],
            compatible_architectures=[constants.ARCHITECTURE],
        )


def not_shipped_in_core() -> list[str]:
    """Asset exclude patterns (relative to the layer directory) for modules no handler imports.

    A package none of whose modules ship is excluded whole, with any data files it holds.
    """
    shipped = import_graph.handler_closure()
    patterns = []
    for name, path in import_graph.package_modules().items():
        if name in shipped:
            continue
        target = path.parent if path.name == "__init__.py" else path
        patterns.append(target.relative_to(constants.CORE_LAYER_DIR).as_posix())
    return sorted(patterns)
