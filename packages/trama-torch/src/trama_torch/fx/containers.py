"""Where each call of a traced ``forward`` goes in the node tree: the scopes of containers.

A trace is flat: ``layers.0``, ``layers.1`` and ``heads.a`` are calls like ``fc``. The document
is a tree whose ids follow the module names (``root.layers.0``), and its rules say that a node's
parent is a composite node that exists and that references never cross a scope. So a
``ModuleList`` / ``ModuleDict`` (or any module whose items are called while it is not) becomes
a *container*: a ``Graph`` node (``root.layers``) whose children are the item calls, whose
inputs are the values of the enclosing scope that they read, and whose outputs are the values
that the enclosing scope reads back. Imported, it is a module holding the items under their
names, so the ``state_dict`` keys are the original's (``layers.0.weight``).

The container is one node of its scope, evaluated at one point. That is possible when nothing
outside it has to run between two of its items. Tensor functions that do (``x = layer(x) + x``
in a loop) are moved inside: every function node on a path from one item to another belongs to
the container (its *convex closure*). A module call of the enclosing scope, or an item of
another container, on such a path makes it impossible: ``for i: x = self.ff[i](self.attn[i](x))``
interleaves two lists. Then the containers involved are *flattened*: their items become
children of the enclosing scope under the catalog's naming convention, the attribute path with
``_`` for ``.`` (``root.attn_0``, ``root.ff_0``), and planning starts again. Export therefore
never fails for the shape of a ``forward``; what changes is only that those items' ``state_dict``
keys come back flattened too (``attn_0.weight``), which is what the document's names say.

Planning looks only at the fx graph's dependencies, never at values, so it runs before
anything is exported: a container's inputs must be known when its node is created.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch.fx as fx

from trama_torch.ordering import dependency_order

__all__ = ["Plan", "Scope", "plan_scopes"]


@dataclass
class Scope:
    """One scope of a traced module: the module's own node, or a container inside it.

    ``units`` is the scope's evaluation order: fx nodes evaluated here and nested containers,
    each after everything it reads."""

    #: container path below the traced module (``()`` for the module's own scope)
    path: tuple[str, ...]
    units: list[fx.Node | Scope] = field(default_factory=list)
    #: every fx node evaluated in this scope or in a container inside it
    nodes: set[fx.Node] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.path[-1]

    def reads(self) -> list[fx.Node]:
        """fx nodes outside this scope that its nodes read, in graph order: its input ports.

        ``get_attr`` values are not among them: every scope that reads a module attribute
        gets a ``constant`` node of its own (sharing one table entry)."""
        found: dict[fx.Node, None] = {}
        for node in self.nodes:
            for used in node.all_input_nodes:
                if used not in self.nodes and used.op != "get_attr":
                    found[used] = None
        return _in_graph_order(found)

    def exposed(self) -> list[fx.Node]:
        """fx nodes of this scope that something outside it reads, in graph order: its outputs."""
        found = {node: None for node in self.nodes if any(user not in self.nodes for user in node.users)}
        return _in_graph_order(found)


def _in_graph_order(nodes: Iterable[fx.Node]) -> list[fx.Node]:
    return sorted(nodes, key=_position)


def _position(node: fx.Node) -> int:
    position = node.meta.get("trama_position")
    assert isinstance(position, int)
    return position


@dataclass
class Plan:
    """The scope tree of a traced module, and each module call's child name in its scope."""

    root: Scope
    names: dict[fx.Node, str]
    #: containers whose items had to become children of the enclosing scope, dotted
    flattened: list[str]


class _Interleaved(Exception):
    """Planning found containers whose items interleave with other calls (see the module doc)."""

    def __init__(self, paths: list[tuple[str, ...]]) -> None:
        super().__init__(paths)
        self.paths = paths


def plan_scopes(nodes: Sequence[fx.Node], places: Mapping[fx.Node, tuple[str, ...]]) -> Plan:
    """Plan the scopes of a traced module.

    ``nodes`` are the fx nodes to evaluate (live module and function calls, in graph order);
    ``places`` gives each module call's path below the module, split (``("layers", "0")``): its
    container path and its name. Every other node starts in the module's own scope.
    """
    if nodes:
        for position, node in enumerate(nodes[0].graph.nodes):
            node.meta["trama_position"] = position
    parts = dict(places)
    flattened: list[str] = []
    while True:
        home = {node: parts[node][:-1] if node in parts else () for node in nodes}
        try:
            root = _plan((), list(nodes), home)
        except _Interleaved as clash:
            for path in clash.paths:
                _flatten(parts, path)
                flattened.append(".".join(path))
            continue
        return Plan(root, {node: place[-1] for node, place in parts.items()}, flattened)


def _flatten(parts: dict[fx.Node, tuple[str, ...]], path: tuple[str, ...]) -> None:
    """Merge the container ``path`` into the segment after it: ``attn.0`` becomes ``attn_0``."""
    depth = len(path)
    for node, place in parts.items():
        if place[:depth] == path and len(place) > depth:
            parts[node] = (*path[:-1], f"{path[-1]}_{place[depth]}", *place[depth + 1 :])


def _plan(path: tuple[str, ...], nodes: list[fx.Node], home: dict[fx.Node, tuple[str, ...]]) -> Scope:
    depth = len(path)
    members = set(nodes)
    groups: dict[str, list[fx.Node]] = {}
    for node in nodes:
        if len(home[node]) > depth:
            groups.setdefault(home[node][depth], []).append(node)
    owner: dict[fx.Node, str] = {}
    for segment, group in groups.items():
        for node in _between(group, members):
            clash = _clash(node, segment, owner, home, depth)
            if clash is not None:
                raise _Interleaved([(*path, name) for name in clash])
            owner[node] = segment
    scope = Scope(path, nodes=set(nodes))
    inner: dict[str, list[fx.Node]] = {}
    for node in nodes:
        if node in owner:
            if len(home[node]) == depth:  # a function between two items: it moves in
                home[node] = (*path, owner[node])
            inner.setdefault(owner[node], []).append(node)
    containers = {segment: _plan((*path, segment), members_of, home) for segment, members_of in inner.items()}
    scope.units = _ordered(nodes, owner, containers)
    return scope


def _between(group: list[fx.Node], members: set[fx.Node]) -> set[fx.Node]:
    """The group plus every node on a path from one of its nodes to another (within ``members``)."""
    after = _reach(group, members, lambda node: node.users)
    before = _reach(group, members, lambda node: node.all_input_nodes)
    return set(group) | (after & before)


def _reach(
    start: Iterable[fx.Node], members: set[fx.Node], step: Callable[[fx.Node], Iterable[fx.Node]]
) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = list(start)
    while stack:
        for following in step(stack.pop()):
            if following in members and following not in seen:
                seen.add(following)
                stack.append(following)
    return seen


def _clash(
    node: fx.Node, segment: str, owner: Mapping[fx.Node, str], home: Mapping[fx.Node, tuple[str, ...]], depth: int
) -> list[str] | None:
    """The containers to flatten when ``node``, which runs between two items of ``segment``,
    cannot move inside it: ``segment`` itself, and the container ``node`` belongs to."""
    if node in owner and owner[node] != segment:
        return [segment, owner[node]]
    if node.op == "call_module" and len(home[node]) == depth:
        return [segment]  # a call of the scope's own
    if node.op == "call_module" and home[node][depth] != segment:
        return [segment, home[node][depth]]
    return None


def _ordered(
    nodes: list[fx.Node], owner: Mapping[fx.Node, str], containers: Mapping[str, Scope]
) -> list[fx.Node | Scope]:
    """The scope's units in an order where each comes after what it reads, as close to the
    trace's order as that allows (each unit ranks by its first node)."""
    unit_of: dict[fx.Node, fx.Node | Scope] = {
        node: containers[owner[node]] if node in owner else node for node in nodes
    }
    order, stuck = dependency_order(nodes, unit_of, lambda node: node.all_input_nodes, _position)
    if stuck:
        raise _Interleaved([each.path for each in stuck if isinstance(each, Scope)])
    return order
