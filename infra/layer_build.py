"""The third-party dependency layer, built for Lambda's platform without Docker, and cached.

What goes in: the project's runtime dependencies (``[project].dependencies`` in pyproject.toml,
so the layer cannot drift from what the code declares), minus what the Lambda runtime already
provides, plus what Powertools' Tracer needs. Each top-level requirement is pinned to the version
installed in the interpreter running the CDK app (the one the tests ran with) when there is one.

How: ``pip install --platform manylinux2014_aarch64 --only-binary=:all: --python-version 3.14
--implementation cp --target <dir>/python``: pip picks the Linux/ARM wheels (pydantic-core is
compiled) on any host, no Docker needed. The result is zipped once (``python/...`` inside, the
layer layout) and cached under a directory named by a hash of everything that goes into the
build, so only the first synth after a dependency change pays for it (a few seconds from PyPI).
Later synths stage that one zip file (CDK uploads a .zip asset as it is), which is much faster
than staging the ~3,000 files of the unpacked layer on every synth.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from infra import constants

# Bump to force a rebuild of every cached layer (when the build recipe below changes).
BUILD_RECIPE = 2
# boto3/botocore are in the Lambda runtime; a copy in the layer would add ~80 MB and shadow them.
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore", "s3transfer"})
# Powertools' Tracer imports the X-Ray SDK when tracing is active. Installed without its
# dependencies, because it declares botocore (already in the runtime).
WITHOUT_DEPENDENCIES = ("aws-xray-sdk", "wrapt")
# Layers come before the runtime on sys.path, so the runtime's botocore imports dateutil from
# the layer: keep it within botocore's range (croniter accepts any 2.x).
CONSTRAINTS = ("python-dateutil>=2.8.2,<3",)
CACHE_ENV = "PUNCTUAL_LAYER_CACHE"  # overrides the cache directory
DEFAULT_CACHE = constants.PROJECT_ROOT / "cdk.out" / ".layer-cache"
LAYER_ZIP = "layer.zip"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same packages give the same bytes
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class LayerBuildError(RuntimeError):
    """pip could not build the dependency layer (PyPI unreachable, no wheel for the platform)."""


def dependency_layer_zip(cache_root: Path | None = None) -> tuple[Path, str]:
    """The zip file of the dependency layer (``python/<packages>``), and its content hash.

    Builds it on first use (atomically: a concurrent synth never sees a half-built layer).
    Raises :class:`LayerBuildError` if pip fails.
    """
    requirements, no_deps = layer_requirements()
    fingerprint = _fingerprint(requirements, no_deps)
    root = cache_root or Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    target = root / f"deps-{fingerprint[:24]}"
    if not (target / LAYER_ZIP).is_file():
        _build(target, requirements, no_deps)
    return target / LAYER_ZIP, fingerprint


def layer_requirements(pyproject: Path = constants.PYPROJECT) -> tuple[list[str], list[str]]:
    """(requirements installed with their dependencies, requirements installed without)."""
    declared = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    wanted = [_pinned(r) for r in declared if _name(r) not in PROVIDED_BY_RUNTIME]
    return [*wanted, *CONSTRAINTS], [_pinned(r) for r in WITHOUT_DEPENDENCIES]


def _build(target: Path, requirements: list[str], no_deps: list[str]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        _pip(staging / "python", requirements)
        _pip(staging / "python", no_deps, "--no-deps")
        # Console scripts carry the build host's interpreter path: useless on Lambda.
        shutil.rmtree(staging / "python" / "bin", ignore_errors=True)
        _zip(staging / "python", staging / LAYER_ZIP)
        shutil.rmtree(staging / "python")
        try:
            staging.rename(target)
        except OSError:
            if not (target / LAYER_ZIP).is_file():  # not a concurrent build that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _pip(into: Path, requirements: list[str], *extra: str) -> None:
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--platform", constants.LAYER_PLATFORM, "--only-binary=:all:", "--implementation", "cp",
        "--python-version", constants.LAYER_PYTHON_VERSION, "--target", str(into), *extra, *requirements,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - fixed argv
    if result.returncode != 0:
        raise LayerBuildError(
            f"building the Lambda dependency layer failed (pip exit {result.returncode}; PyPI must be "
            f"reachable):\n$ {' '.join(command)}\n{result.stderr[-2000:]}"
        )


def _zip(directory: Path, archive: Path) -> None:
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(path.relative_to(directory.parent)), date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())


def _fingerprint(requirements: list[str], no_deps: list[str]) -> str:
    recipe = {
        "recipe": BUILD_RECIPE,
        "python": constants.LAYER_PYTHON_VERSION,
        "platform": constants.LAYER_PLATFORM,
        "requirements": requirements,
        "no_deps": no_deps,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if not match:
        raise LayerBuildError(f"cannot read the package name of requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _pinned(requirement: str) -> str:
    """``name==<installed version>`` when the package is installed here, else the requirement as given."""
    name = _name(requirement)
    if "[" in requirement or ";" in requirement:  # extras or markers: leave to pip as declared
        return requirement
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return requirement
