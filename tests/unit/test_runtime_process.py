"""punctual.runtime.process: the collector settings of the processes that move runs."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from punctual.runtime.process import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD, collect_rarely

pytestmark = pytest.mark.unit


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_collect_rarely_freezes_start_up_and_raises_the_thresholds() -> None:
    gc.unfreeze()
    collect_rarely()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    assert gc.get_freeze_count() > 10_000  # the imported modules and classes


@pytest.mark.usefixtures("restored_collector")
def test_cyclic_garbage_is_still_collected() -> None:
    collect_rarely()

    class Node:
        def __init__(self) -> None:
            self.me = self

    probe = weakref.ref(Node())
    kept = [[] for _ in range(YOUNG_THRESHOLD * 2)]  # enough live allocations for a young collection
    assert probe() is None
    assert len(kept) == YOUNG_THRESHOLD * 2
