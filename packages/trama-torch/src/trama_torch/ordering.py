"""The order in which a scope's units become nodes: each after what it reads, and otherwise as
close to the program's own order as that allows.

Both exporters need it: the torch.fx path orders a trace's nodes (:mod:`trama_torch.fx.containers`)
and the torch.export capture orders its units (:mod:`trama_torch.capture.plan`). In both, several
items may stand for one unit (the calls of a ``ModuleList``'s items are one container node), so
items are grouped by ``unit_of`` first and the units are what gets ordered.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = ["dependency_order"]

Item = TypeVar("Item")
Unit = TypeVar("Unit")


def dependency_order(
    items: Sequence[Item],
    unit_of: Mapping[Item, Unit],
    reads: Callable[[Item], Iterable[Item]],
    position: Callable[[Item], float],
) -> tuple[list[Unit], list[Unit]]:
    """The units of ``items``, each after the units its items read (``reads``), ties broken by
    the earliest ``position`` of a unit's items; and the units that never became ready, because
    two of them read each other (the caller decides what that means: interleaved containers)."""
    rank: dict[int, float] = {}
    for item in items:
        key = id(unit_of[item])
        rank[key] = min(rank.get(key, position(item)), position(item))
    needs: dict[int, set[int]] = {}
    by_key: dict[int, Unit] = {}
    for item in items:
        unit = unit_of[item]
        by_key[id(unit)] = unit
        needs.setdefault(id(unit), set())
        for used in reads(item):
            if used in unit_of and unit_of[used] is not unit:
                needs[id(unit)].add(id(unit_of[used]))
    users: dict[int, set[int]] = {key: set() for key in needs}
    for key, needed in needs.items():
        for other in needed:
            users[other].add(key)
    waiting = {key: len(needed) for key, needed in needs.items()}
    ready = [(rank[key], key) for key, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[Unit] = []
    while ready:
        _, key = heapq.heappop(ready)
        order.append(by_key[key])
        for user in users[key]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (rank[user], user))
    stuck = [unit for key, unit in by_key.items() if waiting[key] > 0]
    return order, stuck
