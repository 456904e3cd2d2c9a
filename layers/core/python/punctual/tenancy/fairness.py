"""Weighted round-robin across owners: the embedded queue's hand-out order.

Each owner with visible messages gets a turn of ``weight`` messages (default 1), owners in a
fixed order, and the position is remembered between receives. One owner's backlog therefore
delays another owner's due message by at most one turn of each other owner: with owners A (10,000
visible) and B (50 visible), receives alternate A, B, A, B ... until B is drained.

On AWS the same property comes from SQS fair queues (``MessageGroupId`` = owner), which
deprioritize a group holding more than its share of in-flight messages.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


class RoundRobin:
    """The hand-out position: which owner's turn it is, and how much of its turn is used. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: str | None = None
        self._used = 0

    def pick(
        self,
        groups: Sequence[str],
        want: int,
        fetch: Callable[[str, int], list[T]],
        weights: Mapping[str, int] | None = None,
    ) -> list[T]:
        """Up to ``want`` items, taken turn by turn from ``groups`` (sorted, distinct).

        ``fetch(group, n)`` returns up to ``n`` of that group's next items (fewer or none when it
        has no more); a group that returns fewer than asked is not asked again in this pick.

        The turns are planned first and each group is fetched once per round (one query for a
        whole turn sequence, not one per turn: with a single owner and weight 1, a receive of 250
        would otherwise cost 250 queries); the items come back interleaved in turn order.
        """
        weights = weights or {}
        ordered = sorted(groups)
        if not ordered or want < 1:
            return []
        with self._lock:
            picked: list[T] = []
            exhausted: set[str] = set()
            while len(picked) < want and len(exhausted) < len(ordered):
                live = [g for g in ordered if g not in exhausted]
                turns = self._plan(live, want - len(picked), weights)
                asked: dict[str, int] = {}
                for group, n in turns:
                    asked[group] = asked.get(group, 0) + n
                fetched = {group: fetch(group, n) for group, n in asked.items()}
                for group, n in asked.items():
                    if len(fetched[group]) < n:
                        exhausted.add(group)
                cursor = dict.fromkeys(asked, 0)
                for group, n in turns:  # interleave in turn order
                    at = cursor[group]
                    picked.extend(fetched[group][at : at + n])
                    cursor[group] = at + n
            return picked

    def _plan(self, ordered: Sequence[str], want: int, weights: Mapping[str, int]) -> list[tuple[str, int]]:
        """The turns that hand out ``want`` items from ``ordered`` if every group has enough, as
        (group, count) in order; moves the position past them."""
        if len(ordered) == 1:  # one owner (the usual case): its turns follow each other, one fetch
            return [(ordered[0], self._advance_alone(ordered[0], want, weights))]
        index = self._start(ordered, weights)
        turns: list[tuple[str, int]] = []
        left = want
        while left > 0:
            group = ordered[index % len(ordered)]
            weight = max(1, weights.get(group, 1))
            if group != self._current or self._used >= weight:
                self._current, self._used = group, 0  # a new turn
            n = min(weight - self._used, left)
            if turns and turns[-1][0] == group:
                turns[-1] = (group, turns[-1][1] + n)
            else:
                turns.append((group, n))
            self._used += n
            left -= n
            if self._used >= weight:
                index += 1
        return turns

    def _advance_alone(self, group: str, want: int, weights: Mapping[str, int]) -> int:
        """:meth:`_plan` of one group in closed form (the loop would take one step per turn):
        ``want`` items, and the position left where the loop would leave it."""
        weight = max(1, weights.get(group, 1))
        used = self._used if group == self._current and self._used < weight else 0
        self._current, self._used = group, (used + want - 1) % weight + 1
        return want

    def _start(self, ordered: Sequence[str], weights: Mapping[str, int]) -> int:
        """Where the next pick begins: the current group if its turn is not used up, else the next one."""
        current = self._current
        if current is None:
            return 0
        after = next((i for i, g in enumerate(ordered) if g >= current), len(ordered))
        if after < len(ordered) and ordered[after] == current and self._used < max(1, weights.get(current, 1)):
            return after
        return after + 1 if after < len(ordered) and ordered[after] == current else after
