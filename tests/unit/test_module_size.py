"""Modules stay small enough to read in one sitting (issue 16, docs/decisions/0096; issue 28 made it
400 lines and a lint check): the check ``make lint`` runs (``infra.module_size``)."""

from __future__ import annotations

import pytest

from infra import module_size as ms

pytestmark = pytest.mark.unit


def test_no_module_exceeds_the_limit_but_the_documented_exceptions() -> None:
    assert ms.MAX_LINES == 400
    too_large = ms.oversized(ms.sizes())
    assert not too_large, f"split these modules by responsibility (at most {ms.MAX_LINES} lines): {too_large}"


def test_every_exception_has_a_reason_and_is_still_over_the_limit() -> None:
    assert all(reason.strip() for reason in ms.EXCEPTIONS.values())
    stale = ms.stale_exceptions(ms.sizes())
    assert not stale, f"no longer over {ms.MAX_LINES} lines: remove them from EXCEPTIONS: {stale}"


def test_the_package_the_cdk_app_and_the_handlers_count() -> None:
    counted = ms.sizes()
    assert {"punctual.jobs.service", "infra.import_graph", "functions.api.handler"} <= set(counted)
    assert not any(name.startswith("tests.") for name in counted)


def test_a_module_over_the_limit_fails_unless_excepted_and_an_exception_within_it_is_stale() -> None:
    counted = {"punctual.big": ms.MAX_LINES + 1, "punctual.small": ms.MAX_LINES, "punctual.excused": 900}
    excused = {"punctual.excused": "being split", "punctual.small": "was large once", "punctual.gone": "deleted"}
    assert ms.oversized(counted, excused) == {"punctual.big": ms.MAX_LINES + 1}
    assert ms.stale_exceptions(counted, excused) == ["punctual.gone", "punctual.small"]
