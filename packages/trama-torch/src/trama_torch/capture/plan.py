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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trama_torch.ordering import plan_containers

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


class _Units:
    """How the planner reads units."""

    @staticmethod
    def reads(unit: Unit) -> Iterable[Unit]:
        return unit.reads

    @staticmethod
    def users(unit: Unit) -> Iterable[Unit]:
        return unit.users

    @staticmethod
    def is_call(unit: Unit) -> bool:
        return unit.is_call

    @staticmethod
    def position(unit: Unit) -> float:
        return unit.position


def plan_units(units: list[Unit]) -> Plan:
    """Plan one scope: ``units`` in program order, each call with its ``place``
    (:func:`trama_torch.ordering.plan_containers`, the rules of the fx exporter's containers)."""
    places = {unit: unit.place for unit in units if unit.is_call}
    root, names, flattened = plan_containers(
        units, places, _Units(), lambda path, members: Group(path, members=members)
    )
    return Plan(root, names, flattened)
