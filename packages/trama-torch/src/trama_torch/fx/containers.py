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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch.fx as fx

from trama_torch.ordering import plan_containers

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


class _FxNodes:
    """How the planner reads fx nodes."""

    @staticmethod
    def reads(node: fx.Node) -> Iterable[fx.Node]:
        return node.all_input_nodes

    @staticmethod
    def users(node: fx.Node) -> Iterable[fx.Node]:
        return node.users

    @staticmethod
    def is_call(node: fx.Node) -> bool:
        return node.op == "call_module"

    @staticmethod
    def position(node: fx.Node) -> float:
        return _position(node)


def plan_scopes(nodes: Sequence[fx.Node], places: Mapping[fx.Node, tuple[str, ...]]) -> Plan:
    """Plan the scopes of a traced module (:func:`trama_torch.ordering.plan_containers`).

    ``nodes`` are the fx nodes to evaluate (live module and function calls, in graph order);
    ``places`` gives each module call's path below the module, split (``("layers", "0")``): its
    container path and its name. Every other node starts in the module's own scope.
    """
    if nodes:
        for position, node in enumerate(nodes[0].graph.nodes):
            node.meta["trama_position"] = position
    root, names, flattened = plan_containers(
        nodes, places, _FxNodes(), lambda path, members: Scope(path, nodes=members)
    )
    return Plan(root, names, flattened)
