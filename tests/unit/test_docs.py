"""The docs a newcomer reads stay short, linked and true to the code (issue 28, item 5).

- The README stays under 200 lines and still starts with ``make run`` and ``make test``.
- Every relative link of the README and the docs leads to a file that exists, and every ``#anchor``
  to a heading of that file (GitHub's rule: lower case, punctuation dropped, spaces as hyphens).
- Every decision record has its header and its three sections and is listed in the index with the
  same title and status, numbered without gaps.
- The architecture page names the module that decides whether a run may start, and every
  ``punctual.`` module it names exists (so a rename shows here, not in a reader's confusion).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DECISIONS = DOCS / "decisions"
PACKAGE = ROOT / "layers" / "core" / "python"
README_MAX_LINES = 200

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
RECORD = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted(DOCS.rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes of ``path``'s headings (code blocks skipped)."""
    found: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines: move history to docs/"
    body = [line for line in lines if line.strip() and not line.startswith("# ")]
    assert body[0].startswith("```")
    assert body[1].startswith("make run")
    assert body[2].startswith("make test")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: broken links {broken}"


def records() -> list[Path]:
    return sorted(p for p in DECISIONS.glob("*.md") if p.name != "README.md")


def test_every_decision_record_has_its_header_and_sections() -> None:
    numbers = []
    for path in records():
        match = RECORD.match(path.name)
        assert match, f"{path.name}: name it NNNN-short-title.md"
        text = path.read_text()
        assert text.startswith(f"# {match.group(1)}. "), f"{path.name}: title must start with its number"
        for field in ("- Date: ", "- Issue: ", "- Status: "):
            assert re.search(rf"^{re.escape(field)}\S", text, re.M), f"{path.name}: missing {field.strip()}"
        positions = [text.find(section) for section in ("\n## Context\n", "\n## Decision\n", "\n## Consequences\n")]
        assert -1 not in positions and positions == sorted(positions), f"{path.name}: Context, Decision, Consequences"
        numbers.append(int(match.group(1)))
    assert numbers == list(range(1, len(numbers) + 1)), "records are numbered 0001, 0002, ... without gaps"


def test_the_index_lists_every_record_with_its_title_and_status() -> None:
    index = (DECISIONS / "README.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| \[\d{4}\]\(([^)]+)\) \|.*$", index, re.M)}
    assert set(rows) == {path.name for path in records()}
    for path in records():
        text = path.read_text()
        title = text.splitlines()[0].split(". ", 1)[1]
        status = re.search(r"^- Status: (.+)$", text, re.M)
        assert status is not None
        row = rows[path.name]
        escaped = title.replace("|", r"\|")
        assert f"| {escaped} |" in row, f"{path.name}: title differs in the index"
        assert row.endswith(f"| {status.group(1)} |"), f"{path.name}: status differs in the index"


def module_exists(dotted: str) -> bool:
    """``punctual.a.b`` (a module or package) or ``punctual.a.b.name[.attr]``: a name the module
    defines or imports at its top level (a word in a comment does not count: a moved function would
    still be found there)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        if source.exists():
            rest = parts[cut:]
            return not rest or rest[0] in top_level_names(source)
    return False


def top_level_names(source: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def test_the_architecture_page_names_the_lease_decision_and_real_modules() -> None:
    text = (DOCS / "architecture.md").read_text()
    assert "decided in one place: `punctual.execution.batch.prepare`" in text
    named = set(re.findall(r"`(punctual(?:\.[A-Za-z_]\w*)+)", text))
    missing = sorted(name for name in named if not module_exists(name))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_readme_links_its_own_docs_and_its_quick_starts_do_not_collide() -> None:
    # issue 31: a clone has no ../shared/DESIGN.md; the CLI and the curl quick start made the same job
    # twice; a second owner and the admin routes were nowhere explained
    text = (ROOT / "README.md").read_text()
    assert "../shared" not in text and "](docs/architecture.md)" in text
    created = re.findall(r'--name (\S+)|"name": "([^"]+)"', text)
    names = [cli or http for cli, http in created]
    assert len(names) >= 4 and len(names) == len(set(names)), names
    assert "PUNCTUAL_API_KEYS=" in text and "PUNCTUAL_ADMIN_PRINCIPALS=" in text and "/admin/tenants" in text
