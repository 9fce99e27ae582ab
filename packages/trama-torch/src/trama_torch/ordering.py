"""A module's scope tree and the order in which its units become nodes: containers
(``ModuleList``, ``ModuleDict``) as units of their scope, each unit after what it reads, and
otherwise as close to the program's own order as that allows.

Both exporters need it: the torch.fx path orders a trace's nodes (:mod:`trama_torch.fx.containers`)
and the torch.export capture orders its units (:mod:`trama_torch.capture.plan`). In both, several
items may stand for one unit (the calls of a ``ModuleList``'s items are one container node), so
items are grouped by ``unit_of`` first and the units are what gets ordered.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["Container", "Items", "dependency_order", "plan_containers"]

Item = TypeVar("Item")
Unit = TypeVar("Unit")


def dependency_order(
    items: Sequence[Item],
    unit_of: Mapping[Item, Unit],
    reads: Callable[[Item], Iterable[Item]],
    position: Callable[[Item], float],
) -> tuple[list[Unit], list[Unit]]:
    """The units of ``items``, each after the units its items read (``reads``), ties broken by
    the earliest ``position`` of a unit's items, then by the order the units first appear in
    ``items`` (never by an object's address, which differs from one process to the next: two
    calls that compute nothing, such as ``Identity``, share a position); and the units that
    never became ready, because two of them read each other (the caller decides what that
    means: interleaved containers)."""
    rank: dict[int, tuple[float, int]] = {}
    first: dict[int, int] = {}
    for item in items:
        key = id(unit_of[item])
        seen = first.setdefault(key, len(first))
        here = position(item)
        rank[key] = (min(rank[key][0], here), seen) if key in rank else (here, seen)
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


class Items(Protocol[Item]):
    """How the planner reads the items of a scope (fx nodes, or capture's units)."""

    def reads(self, item: Item) -> Iterable[Item]: ...

    def users(self, item: Item) -> Iterable[Item]: ...

    def is_call(self, item: Item) -> bool: ...

    def position(self, item: Item) -> float: ...


class Container(Protocol):
    """What the planner builds for a scope or a container: a path and its units in order."""

    path: tuple[str, ...]
    units: list[Any]


Made = TypeVar("Made", bound=Container)


class _Interleaved(Exception):
    """Planning found containers whose items interleave with other calls (see the module doc)."""

    def __init__(self, paths: list[tuple[str, ...]]) -> None:
        super().__init__(paths)
        self.paths = paths


def plan_containers(
    items: Sequence[Item],
    places: Mapping[Item, tuple[str, ...]],
    access: Items[Item],
    make: Callable[[tuple[str, ...], set[Item]], Made],
) -> tuple[Made, dict[Item, str], list[str]]:
    """The scope tree of one module's items: its root (``make((), items)``), each call's name
    in its container, and the containers that had to be flattened, dotted.

    ``places`` gives each module call's path below the module, split (``("layers", "0")``): its
    container path and its name; every other item starts in the module's own scope. A container
    (a ``ModuleList``'s calls) is one unit of its scope, evaluated at one point: items that run
    between two of its calls move inside it. When another call of the scope, or an item of
    another container, runs between two of its calls, the containers involved are flattened
    (``attn.0`` becomes ``attn_0``, a call of the scope's own) and planning starts again.
    """
    parts = dict(places)
    flattened: list[str] = []
    while True:
        home = {item: parts[item][:-1] if item in parts else () for item in items}
        try:
            root = _plan((), list(items), home, access, make)
        except _Interleaved as clash:
            if not clash.paths:
                raise RuntimeError("the scope's items depend on each other in a cycle") from None
            for path in clash.paths:
                _flatten(parts, path)
                flattened.append(".".join(path))
            continue
        return root, {item: place[-1] for item, place in parts.items()}, flattened


def _flatten(parts: dict[Item, tuple[str, ...]], path: tuple[str, ...]) -> None:
    """Merge the container ``path`` into the segment after it: ``attn.0`` becomes ``attn_0``."""
    depth = len(path)
    for item, place in parts.items():
        if place[:depth] == path and len(place) > depth:
            parts[item] = (*path[:-1], f"{path[-1]}_{place[depth]}", *place[depth + 1 :])


def _plan(
    path: tuple[str, ...],
    items: list[Item],
    home: dict[Item, tuple[str, ...]],
    access: Items[Item],
    make: Callable[[tuple[str, ...], set[Item]], Made],
) -> Made:
    depth = len(path)
    members = set(items)
    groups: dict[str, list[Item]] = {}
    for item in items:
        if len(home[item]) > depth:
            groups.setdefault(home[item][depth], []).append(item)
    owner: dict[Item, str] = {}
    for segment, group in groups.items():
        for item in _between(group, members, access):
            clash = _clash(item, segment, owner, home, depth, access)
            if clash is not None:
                raise _Interleaved([(*path, name) for name in clash])
            owner[item] = segment
    scope = make(path, members)
    inner: dict[str, list[Item]] = {}
    for item in items:
        if item in owner:
            if len(home[item]) == depth:  # an op between two calls of a container: it moves in
                home[item] = (*path, owner[item])
            inner.setdefault(owner[item], []).append(item)
    containers = {segment: _plan((*path, segment), inside, home, access, make) for segment, inside in inner.items()}
    unit_of: dict[Item, Any] = {item: containers[owner[item]] if item in owner else item for item in items}
    order, stuck = dependency_order(items, unit_of, access.reads, access.position)
    if stuck:
        made = {id(container) for container in containers.values()}
        raise _Interleaved([each.path for each in stuck if id(each) in made])
    scope.units = order
    return scope


def _between(group: list[Item], members: set[Item], access: Items[Item]) -> set[Item]:
    """The group plus every item on a path from one of its items to another (within ``members``)."""
    after = _reach(group, members, access.users)
    before = _reach(group, members, access.reads)
    return set(group) | (after & before)


def _reach(start: Iterable[Item], members: set[Item], step: Callable[[Item], Iterable[Item]]) -> set[Item]:
    seen: set[Item] = set()
    stack = list(start)
    while stack:
        for following in step(stack.pop()):
            if following in members and following not in seen:
                seen.add(following)
                stack.append(following)
    return seen


def _clash(
    item: Item,
    segment: str,
    owner: Mapping[Item, str],
    home: Mapping[Item, tuple[str, ...]],
    depth: int,
    access: Items[Item],
) -> list[str] | None:
    """The containers to flatten when ``item``, which runs between two calls of ``segment``,
    cannot move inside it: ``segment`` itself, and the container ``item`` belongs to."""
    if item in owner and owner[item] != segment:
        return [segment, owner[item]]
    if access.is_call(item) and len(home[item]) == depth:
        return [segment]  # a call of the scope's own
    if access.is_call(item) and home[item][depth] != segment:
        return [segment, home[item][depth]]
    return None
