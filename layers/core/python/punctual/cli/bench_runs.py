"""What the comparing benches' commands share (``punctual bench tenants``, ``priority``): a measured
run, a second one without the feature when asked, and the figures as one JSON object or in lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from punctual.runtime.process import collect_rarely

Figures = dict[str, Any]


def measured(
    bench: Callable[..., Figures],
    counts: tuple[int, ...],
    options: Mapping[str, Any],
    without: Mapping[str, Any] | None,
) -> list[Figures]:
    """``bench(*counts, **options)``'s figures, then, when ``without`` is given, those of a second run
    with those options too (the comparison without the feature); this process plays the scheduler's."""
    collect_rarely()  # the bench plays the scheduler process, which runs with these settings
    results = [bench(*counts, **options)]
    if without is not None:
        results.append(bench(*counts, **{**options, **without}))
    return results


def report(results: list[Figures], *, key: str, as_json: bool, header: str, line: Callable[[Figures], str]) -> None:
    """Print ``{key: results}`` as one JSON object, or ``header`` and a ``line`` per result."""
    if as_json:
        print(json.dumps({key: results}))
        return
    print(header)
    for result in results:
        print(f"  {line(result)}")
