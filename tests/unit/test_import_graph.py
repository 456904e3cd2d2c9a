"""The import-graph check (``python -m infra.import_graph``, run by ``make lint``) and the layer's contents."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra import import_graph as ig

pytestmark = pytest.mark.unit


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "punctual" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_lazy_import_inside_a_function_still_closes_a_cycle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from punctual import b\n",
            "b.py": "def late():\n    from punctual.a import thing\n    return thing\n",
        },
    )
    assert ig.cycles(ig.module_graph(root)) == [["punctual.a", "punctual.b"]]


def test_type_checking_imports_and_parent_packages_are_not_arrows(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "from punctual.sub import leaf\n",
            "sub/__init__.py": "",
            "sub/leaf.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from punctual import other\n",
            "other.py": "from punctual.sub import leaf\n",
        },
    )
    graph = ig.module_graph(root)
    assert graph["punctual.sub.leaf"] == set()  # neither the TYPE_CHECKING import nor punctual/__init__
    assert graph["punctual"] == {"punctual.sub.leaf"}
    assert ig.cycles(graph) == []


def test_relative_imports_resolve_to_modules(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "", "pkg/__init__.py": "from . import x\n", "pkg/x.py": "from .y import z\n", "pkg/y.py": ""},
    )
    graph = ig.module_graph(root)
    assert graph["punctual.pkg"] == {"punctual.pkg.x"}
    assert graph["punctual.pkg.x"] == {"punctual.pkg.y"}


def test_the_package_may_not_import_functions_or_infra(tmp_path: Path) -> None:
    root = _package(tmp_path, {"__init__.py": "", "a.py": "def f():\n    import infra.stack\n"})
    assert ig.forbidden_imports(ig.module_graph(root)) == [("punctual.a", "infra.stack")]


def test_a_kernel_may_not_import_a_capability_package_even_lazily(tmp_path: Path) -> None:
    # Given top-level modules and a kernel package (the kernels) beside a capability package
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "rules.py": "from punctual import errors\nfrom punctual.model import jobs\n",
            "model/__init__.py": "from punctual.model.jobs import Job\n",
            "model/jobs.py": "def check(text):\n    from punctual.scheduling.cron import ok\n    return ok(text)\n",
            "port/__init__.py": "from punctual.scheduling import stats\n",
            "scheduling/__init__.py": "",
            "scheduling/cron.py": "from punctual.model import jobs\nfrom punctual import errors\n",
            "scheduling/stats.py": "",
        },
    )
    modules = ig.package_modules(root)
    kernels = {name for name in modules if ig.is_kernel(name, modules)}
    assert kernels == {
        "punctual",
        "punctual.errors",
        "punctual.rules",
        "punctual.model",
        "punctual.model.jobs",
        "punctual.port",
    }
    # Then the kernels' arrows up are refused, the lazy one included; a capability may import a kernel
    assert ig.upward_imports(ig.module_graph(root), modules) == [
        ("punctual.model.jobs", "punctual.scheduling.cron"),
        ("punctual.port", "punctual.scheduling.stats"),
    ]


def test_the_real_package_has_no_cycles_and_imports_nothing_above_it() -> None:
    graph = ig.module_graph()
    assert ig.cycles(graph) == []
    assert ig.forbidden_imports(graph) == []
    assert ig.upward_imports(graph, ig.package_modules()) == []


def test_the_layer_ships_what_the_handlers_import_and_not_the_cli_benches_or_local_server() -> None:
    shipped = ig.handler_closure()
    assert {"punctual.api.app", "punctual.execution.sqs_events", "punctual.reaping.reaper"} <= shipped
    assert "punctual.execution.targets.aws" in shipped  # imported lazily by the dispatcher, still shipped
    assert not {m for m in shipped if m.split(".")[1:2] in (["cli"], ["bench"], ["local"])}


def test_every_handler_imports_from_a_copy_that_holds_only_the_shipped_modules(tmp_path: Path) -> None:
    # Given a directory holding only what the core layer ships
    modules = ig.package_modules()
    shipped = ig.handler_closure()
    for name in shipped:
        source = modules[name]
        target = tmp_path / source.relative_to(ig.PACKAGE_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    # When every shipped module and every handler is imported from it (first on sys.path)
    script = textwrap.dedent(
        f"""
        import importlib, importlib.util, sys
        sys.path.insert(0, {str(tmp_path)!r})
        for name in {sorted(shipped)!r}:
            module = importlib.import_module(name)
            assert module.__file__.startswith({str(tmp_path)!r}), module.__file__
        for handler in {sorted(str(p) for p in ig.FUNCTIONS_DIR.glob("*/handler.py"))!r}:
            spec = importlib.util.spec_from_file_location("handler", handler)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        """
    )
    # Then nothing is missing
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
