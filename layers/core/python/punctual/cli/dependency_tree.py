"""``punctual jobs graph ID``: a job's dependency graph (GET /jobs/{id}/graph) as a text tree.

The job on top; under it, what it depends on (each upstream's own upstreams below it), then
what depends on it (each dependent's dependents below it). A job reached twice (a diamond) is
printed once in full, then named with "(see above)".
"""

from __future__ import annotations

from typing import Any


def render(graph: dict[str, Any]) -> str:
    """The tree for a ``JobGraph`` response body."""
    nodes = {n["id"]: n for n in [graph["job"], *graph["upstream"], *graph["downstream"]]}
    ups: dict[str, list[tuple[str, str]]] = {}
    downs: dict[str, list[tuple[str, str]]] = {}
    for edge in graph["edges"]:
        ups.setdefault(edge["dependent"], []).append((edge["upstream"], edge["when"]))
        downs.setdefault(edge["upstream"], []).append((edge["dependent"], edge["when"]))
    root = graph["job"]["id"]
    lines = [_label(nodes[root])]
    sections = [
        ("depends on", _branch(root, ups, nodes, set(), "after")),
        ("depended on by", _branch(root, downs, nodes, set(), "when")),
    ]
    sections = [(title, body) for title, body in sections if body]
    for i, (title, body) in enumerate(sections):
        last = i == len(sections) - 1
        lines.append(("└─ " if last else "├─ ") + title)
        lines += [("   " if last else "│  ") + line for line in body]
    if graph.get("truncated"):
        lines.append("(truncated: the graph has more jobs than one response shows)")
    return "\n".join(lines)


def _branch(
    job_id: str, links: dict[str, list[tuple[str, str]]], nodes: dict[str, Any], seen: set[str], verb: str
) -> list[str]:
    lines: list[str] = []
    children = sorted(links.get(job_id, []))
    for i, (child, when) in enumerate(children):
        last = i == len(children) - 1
        node = nodes.get(child)
        label = _label(node) if node else f"{child} (not visible)"
        repeated = child in seen
        lines.append(("└─ " if last else "├─ ") + f"[{when}] " + label + (" (see above)" if repeated else ""))
        if node and not repeated:
            seen.add(child)
            lines += [("   " if last else "│  ") + line for line in _branch(child, links, nodes, seen, verb)]
    return lines


def _label(node: dict[str, Any]) -> str:
    run = node.get("last_run_state")
    last = f"last run {run} ({node.get('last_run_at')})" if run else "no runs yet"
    return f"{node['name']}  {node['id']}  {node['status']}  {last}"
