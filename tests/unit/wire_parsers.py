"""The ``wire`` client's two HTTP/1.1 answer parsers, for tests that run against both (issue 28).

``wire_parser`` (autouse where a test module imports it) runs each test once with the hand-written
parser (:mod:`punctual.execution.targets.wire_parse`) and once with llhttp's
(:mod:`punctual.execution.targets.wire_llhttp`), by swapping the class the pool connects with.
"""

from __future__ import annotations

from typing import Any

import pytest

from punctual.execution.targets import wire, wire_llhttp, wire_parse

PARSERS: dict[str, Any] = {"house": wire_parse.Connection, "httptools": wire_llhttp.Connection}


@pytest.fixture(autouse=True, params=sorted(PARSERS))
def wire_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The ``Connection`` class of this run of the test, also the one ``WirePool`` connects with."""
    chosen = PARSERS[request.param]
    monkeypatch.setattr(wire, "Connection", chosen)
    return chosen
