"""The order of one scope's units, and the containers (``ModuleList``, ``ModuleDict``) among them.

A scope is one module call of the captured tree. Its units are the aten ops it runs itself and
the calls of its submodules. A call whose module sits below a module that is not called
(``self.layers[0](x)``: ``layers`` is a ``ModuleList``) belongs to a *container*: a ``Graph`` node
named after that module (``root.layers``) holding the items as called (``root.layers.0``), so the
imported ``state_dict`` keys are the original's (``layers.0.weight``), as the fx exporter does
(:mod:`trama_torch.fx.containers`, whose rules this follows):

* the container is one unit of its scope, evaluated at one point: ops that run between two of
  its items (``x = layer(x) + x`` in a loop) move inside it;
* when another call of the scope, or an item of another container, runs between two items (two
  lists interleaved), the containers involved are *flattened*: their items become units of the
  scope, named with the catalog's convention (``attn_0``, ``ff_0``), and planning starts again.

Units are then ordered so that each comes after what it reads, as close to the program's own
order as that allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trama_torch.ordering import dependency_order

__all__ = ["Group", "Plan", "Unit", "plan_units"]


@dataclass(eq=False)
class Unit:
    """One unit of a scope: an op node or a submodule call (``item`` is either), at ``position``
    in the program's order, reading the units of ``reads``."""

    item: Any
    position: float
    #: for a call: its container path and its name (``("layers", "0")``); ``()`` for an op
    place: tuple[str, ...] = ()
    reads: set[Unit] = field(default_factory=set)
    users: set[Unit] = field(default_factory=set)

    @property
    def is_call(self) -> bool:
        return bool(self.place)


@dataclass(eq=False)
class Group:
    """A scope (``path == ()``) or a container in it, with its units in evaluation order."""

    path: tuple[str, ...]
    units: list[Unit | Group] = field(default_factory=list)
    members: set[Unit] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def position(self) -> float:
        return min(unit.position for unit in self.members)


@dataclass
class Plan:
    root: Group
    #: each call's name in its group (the last segment of its place)
    names: dict[Unit, str]
    #: containers whose items became units of the enclosing group, dotted
    flattened: list[str]


class _Interleaved(Exception):
    def __init__(self, paths: list[tuple[str, ...]]) -> None:
        super().__init__(paths)
        self.paths = paths


def plan_units(units: list[Unit]) -> Plan:
    """Plan one scope: ``units`` in program order, each call with its ``place``."""
    places = {unit: unit.place for unit in units if unit.is_call}
    flattened: list[str] = []
    while True:
        home = {unit: places[unit][:-1] if unit in places else () for unit in units}
        try:
            root = _plan((), list(units), home)
        except _Interleaved as clash:
            if not clash.paths:
                raise RuntimeError("the scope's units depend on each other in a cycle") from None
            for path in clash.paths:
                _flatten(places, path)
                flattened.append(".".join(path))
            continue
        return Plan(root, {unit: place[-1] for unit, place in places.items()}, flattened)


def _flatten(places: dict[Unit, tuple[str, ...]], path: tuple[str, ...]) -> None:
    depth = len(path)
    for unit, place in places.items():
        if place[:depth] == path and len(place) > depth:
            places[unit] = (*path[:-1], f"{path[-1]}_{place[depth]}", *place[depth + 1 :])


def _plan(path: tuple[str, ...], units: list[Unit], home: dict[Unit, tuple[str, ...]]) -> Group:
    depth = len(path)
    members = set(units)
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        if len(home[unit]) > depth:
            groups.setdefault(home[unit][depth], []).append(unit)
    owner: dict[Unit, str] = {}
    for segment, group in groups.items():
        for unit in _between(group, members):
            clash = _clash(unit, segment, owner, home, depth)
            if clash is not None:
                raise _Interleaved([(*path, name) for name in clash])
            owner[unit] = segment
    scope = Group(path, members=set(units))
    inner: dict[str, list[Unit]] = {}
    for unit in units:
        if unit in owner:
            if len(home[unit]) == depth:  # an op between two items: it moves in
                home[unit] = (*path, owner[unit])
            inner.setdefault(owner[unit], []).append(unit)
    containers = {segment: _plan((*path, segment), inside, home) for segment, inside in inner.items()}
    scope.units = _ordered(units, owner, containers)
    return scope


def _between(group: list[Unit], members: set[Unit]) -> set[Unit]:
    after = _reach(group, members, lambda unit: unit.users)
    before = _reach(group, members, lambda unit: unit.reads)
    return set(group) | (after & before)


def _reach(start: Iterable[Unit], members: set[Unit], step: Callable[[Unit], Iterable[Unit]]) -> set[Unit]:
    seen: set[Unit] = set()
    stack = list(start)
    while stack:
        for following in step(stack.pop()):
            if following in members and following not in seen:
                seen.add(following)
                stack.append(following)
    return seen


def _clash(
    unit: Unit, segment: str, owner: dict[Unit, str], home: dict[Unit, tuple[str, ...]], depth: int
) -> list[str] | None:
    if unit in owner and owner[unit] != segment:
        return [segment, owner[unit]]
    if unit.is_call and len(home[unit]) == depth:
        return [segment]
    if unit.is_call and home[unit][depth] != segment:
        return [segment, home[unit][depth]]
    return None


def _ordered(units: list[Unit], owner: dict[Unit, str], containers: dict[str, Group]) -> list[Unit | Group]:
    """The units (a container standing for all of its own) in an order where each comes after
    what it reads, as close to the program's order as that allows."""
    unit_of: dict[Unit, Unit | Group] = {unit: containers[owner[unit]] if unit in owner else unit for unit in units}
    order, stuck = dependency_order(units, unit_of, lambda unit: unit.reads, lambda unit: unit.position)
    if stuck:
        raise _Interleaved([each.path for each in stuck if isinstance(each, Group)])
    return order
