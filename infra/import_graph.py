"""The import graph of the ``punctual`` package: the lint tier's cycle check and the Lambda layer's contents.

Every ``import`` counts, at module level or inside a function (a lazy import is still an arrow:
it only hides a cycle until the day the call order changes). Imports under ``if TYPE_CHECKING:``
do not, because they never run. Importing ``a.b.c`` also imports the packages ``a.b`` and ``a``,
but that is Python's doing, not an arrow of ours: an arrow goes to the module named.

``python -m infra.import_graph`` fails (exit 1) when
- two or more modules import each other, directly or through others (a cycle),
- a kernel imports a capability package (the kernels are the top-level modules of ``punctual``
  and the packages of :data:`KERNEL_PACKAGES`; every other package is a capability, and the
  capabilities build on the kernels, never the other way round), or
- a module of ``punctual`` imports ``functions`` or ``infra`` (the package is the bottom layer).

:func:`handler_closure` is what the core Lambda layer ships: the modules the handlers in
``functions/`` import, and everything those import, and nothing else (no CLI, benches or
local server).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOT = PROJECT_ROOT / "layers" / "core" / "python"  # holds punctual/
FUNCTIONS_DIR = PROJECT_ROOT / "functions"
PACKAGE = "punctual"
FORBIDDEN = ("functions", "infra")  # what the package may never import
# The kernel packages; with them, every top-level module of the package is a kernel (model, port,
# rules, ids, clock, errors, config, numbers, metrics, resources). Every other package is a capability.
KERNEL_PACKAGES = ("model", "port")

Graph = dict[str, set[str]]


def package_modules(root: Path = PACKAGE_ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package is its ``__init__``)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def module_graph(root: Path = PACKAGE_ROOT, package: str = PACKAGE) -> Graph:
    """Module → the modules it imports (any depth of the file, TYPE_CHECKING blocks excepted).

    Targets outside the package are kept when they are one of :data:`FORBIDDEN`, dropped otherwise.
    """
    modules = package_modules(root, package)
    graph: Graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets = {_resolve(imported, modules) for imported in imported_names(path, name, is_package)}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def imported_names(path: Path, module: str, is_package: bool) -> Iterator[str]:
    """Dotted names ``path`` imports; ``from a import b`` yields ``a.b`` (a module, or a name in ``a``:
    :func:`_resolve` then finds ``a``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module if is_package else module.rpartition(".")[0]
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from a import b``: an arrow to the module ``a.b`` if there is one, else to ``a``
            yield from (base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names)


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: the graph may be deep
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def forbidden_imports(graph: Graph) -> list[tuple[str, str]]:
    """(module, target) pairs where the package imports :data:`FORBIDDEN` code."""
    return [
        (name, target)
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if target.split(".")[0] in FORBIDDEN
    ]


def is_kernel(module: str, modules: dict[str, Path]) -> bool:
    """``module`` (a module of the package) is a kernel: the package itself, a top-level module, or a
    module of a :data:`KERNEL_PACKAGES` package."""
    parts = module.split(".")
    if len(parts) == 1:
        return True
    if parts[1] in KERNEL_PACKAGES:
        return True
    return len(parts) == 2 and modules[module].name != "__init__.py"


def upward_imports(graph: Graph, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(kernel, target) pairs where a kernel imports a module of a capability package (lazily or not)."""
    return [
        (name, target)
        for name, targets in sorted(graph.items())
        if is_kernel(name, modules)
        for target in sorted(targets)
        if target in modules and not is_kernel(target, modules)
    ]


def closure(graph: Graph, starts: Iterable[str]) -> set[str]:
    """``starts`` and every module they reach, with the packages that contain each (Python imports those)."""
    seen: set[str] = set()
    pending = list(starts)
    while pending:
        name = pending.pop()
        if name in seen or name not in graph:
            continue
        seen.add(name)
        pending.extend(graph[name])
        parts = name.split(".")
        pending.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    return seen


def handler_closure(functions_dir: Path = FUNCTIONS_DIR, root: Path = PACKAGE_ROOT) -> set[str]:
    """The package modules that the Lambda handlers need: what the core layer ships."""
    modules = package_modules(root)
    graph = module_graph(root)
    starts = {
        _resolve(name, modules)
        for handler in sorted(functions_dir.glob("*/handler.py"))
        for name in imported_names(handler, "handler", is_package=False)
    }
    return closure(graph, {s for s in starts if s})


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(dotted: str, modules: dict[str, Path]) -> str:
    """The module ``dotted`` names, or its longest module prefix (``a.b.name`` → ``a.b``)."""
    parts = dotted.split(".")
    if parts[0] in FORBIDDEN:
        return dotted
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return ""


def main() -> int:
    graph = module_graph()
    modules = package_modules()
    problems = [f"import cycle: {' <-> '.join(component)}" for component in cycles(graph)]
    problems += [
        f"{name} imports {target}: a kernel imports no capability package"
        for name, target in upward_imports(graph, modules)
    ]
    problems += [
        f"{name} imports {target}: the package may not import {FORBIDDEN}" for name, target in forbidden_imports(graph)
    ]

    def summary() -> str:
        kernels = sum(is_kernel(name, modules) for name in graph)
        return (
            f"import graph: {len(graph)} modules ({kernels} kernels), no cycles, no kernel importing a capability;"
            f" the Lambda layer ships {len(handler_closure())} of them"
        )

    return report(problems, summary)


def report(problems: list[str], summary: Callable[[], str]) -> int:
    """A lint check's ending: each problem on stderr and exit status 1, or ``summary()`` on stdout and 0."""
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
