"""The package's metadata builds without warnings on current setuptools (issue 31: `make run`
printed the `project.license` deprecation three times): the license is an SPDX expression with its
file, and the build asks for a setuptools that reads them (PEP 639: setuptools 77)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_license_is_an_spdx_expression_with_its_file() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"  # a string: the TOML table form is deprecated
    assert all((ROOT / name).is_file() for name in project["license-files"])
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    requires = " ".join(pyproject["build-system"]["requires"])
    found = re.search(r"setuptools>=(\d+)", requires)
    assert found and int(found.group(1)) >= 77, requires
