"""Every string constant of the package's and handlers' source is Unicode a newer Python can load.

A lone surrogate written as an escape in an ordinary string (a docstring that quoted ``"\\ud800"``
without doubling the backslash) compiles on Python 3.11, but 3.13 and later refuse to import the
module (UnicodeEncodeError): that was ``punctual.api.edges``, i.e. the API Lambda on the
python3.14 runtime the CDK app deploys. The test reads every constant the compiler makes.
"""

from __future__ import annotations

from pathlib import Path
from types import CodeType

import pytest

from infra import import_graph as ig

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> list[Path]:
    return [*ig.package_modules().values(), *sorted((ROOT / "functions").glob("*/*.py"))]


def _strings(code: CodeType) -> list[str]:
    found: list[str] = []
    for constant in code.co_consts:
        if isinstance(constant, str):
            found.append(constant)
        elif isinstance(constant, CodeType):
            found.extend(_strings(constant))
        elif isinstance(constant, tuple | frozenset):
            found.extend(item for item in constant if isinstance(item, str))
    return found


def test_no_string_constant_holds_a_lone_surrogate() -> None:
    sources = _sources()
    assert len(sources) > 100  # the package and the four handlers were found
    bad = []
    for path in sources:
        for text in _strings(compile(path.read_text(), str(path), "exec")):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                bad.append(f"{path.relative_to(ROOT)}: {text[:60]!r}")
    assert not bad, f"escape the backslash (\\\\ud800) or use a raw string: {bad}"
