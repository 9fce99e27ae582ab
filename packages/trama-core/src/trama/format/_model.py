"""The in-memory form of a trama document.

A :class:`Model` mirrors the JSON document one to one (see ``docs/format.md``): model inputs and
outputs, a flat list of :class:`Node` in topological order whose dotted ids encode the tree, and
one table of :class:`Parameter` entries that node slots refer to by name. Sharing is identity:
two slots naming the same entry share one value, which is how tied weights survive a round trip.
A module used in two places is one node *called* from the other: a node whose ``calls`` names
it computes what it computes, on its own inputs (see :mod:`trama.format._calls`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from trama.format._lazy import is_tensor

if TYPE_CHECKING:
    from trama.format._sizes import SizeExpr, SymbolRange
    from trama.format._tensor import Tensor

__all__ = [
    "INPUT",
    "JSONValue",
    "Model",
    "Node",
    "Parameter",
    "ParameterValue",
    "Ref",
    "ValueFact",
    "children_by_parent",
    "parent_of",
]

#: The pseudo node id that names an input of the enclosing scope in a reference.
INPUT = "%input"

#: Free-form JSON data (metadata).
JSONValue: TypeAlias = Any

#: What a parameter entry may hold. Lists hold scalars or lists (e.g. ``kernel_size``).
#: A :class:`~trama.format.SizeExpr` is a size computed from the input symbols when the model runs.
ParameterValue: TypeAlias = "Tensor | SizeExpr | bool | int | float | str | list[Any] | None"


class Ref(NamedTuple):
    """A reference to one output of a node, or to an input of the enclosing scope.

    ``Ref(INPUT, "x")`` is the scope input ``x``: the parent's input port inside a composite,
    the model input at top level.
    """

    node: str
    output: str

    @property
    def is_input(self) -> bool:
        return self.node == INPUT

    def __str__(self) -> str:
        return f"{self.node}.{self.output}" if self.node != INPUT else f"%{self.output}"


@dataclass(slots=True)
class ValueFact:
    """Optional facts about a model input or output: dtype and shape.

    ``shape`` entries are ints or symbolic names (``"batch"``); ``None`` means unknown.
    """

    dtype: str | None = None
    shape: tuple[int | str, ...] | None = None


@dataclass(slots=True, eq=False, weakref_slot=True)
class Parameter:
    """One entry of the parameter table: a value and whether training may change it.

    Entries compare by value but are shared by identity; they accept weak references so that a
    framework importer can remember, for the length of one import, which of its own tensors an
    entry became (and tie two slots sharing it to one framework parameter).
    """

    value: ParameterValue
    learnable: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Parameter):
            return NotImplemented
        return self.learnable == other.learnable and _values_equal(self.value, other.value)

    __hash__ = None  # type: ignore[assignment]


def _values_equal(a: Any, b: Any) -> bool:
    """Equal as the format sees values: same kinds all the way down ([1] is not [True] or [1.0]),
    and -0.0 is not 0.0."""
    if is_tensor(a) or is_tensor(b):
        return is_tensor(a) and is_tensor(b) and a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


@dataclass(slots=True)
class Node:
    """One building block: a leaf op, or a composite whose children live under its id.

    ``parameters`` maps the op's slot names to keys of the model's parameter table.
    ``output_bindings`` is ``None`` for a leaf; for a composite it binds each declared output to
    a child's output or to one of the composite's own inputs.

    ``calls`` names another node (the *target*) when this node is a call of it: the same module
    used a second time, for example ``block(block(x))``. A calling node computes exactly what
    its target computes (same op, same parameter entries, for a composite target the same
    children and wiring) on its own ``inputs``. It has no parameters of its own (``parameters``
    stays empty), no ``output_bindings`` and no children; its ``op`` and ``outputs`` repeat the
    target's so that a reader sees what it computes without following the call. The field comes
    last, with a default, so that code written before calls existed builds nodes unchanged.
    """

    id: str
    op: str
    inputs: dict[str, Ref] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    output_bindings: dict[str, Ref] | None = None
    metadata: dict[str, JSONValue] | None = None
    calls: str | None = None

    @property
    def parent(self) -> str | None:
        """The dotted prefix of the id, or ``None`` at top level."""
        return parent_of(self.id)

    @property
    def name(self) -> str:
        """The last segment of the id: the name the parent knows this node by."""
        return self.id.rpartition(".")[2]

    @property
    def is_composite(self) -> bool:
        """Whether this node has children (a calling node never does, even when its target has)."""
        return self.output_bindings is not None

    @property
    def is_call(self) -> bool:
        """Whether this node is a call of another node (``calls`` is set)."""
        return self.calls is not None


def children_by_parent(nodes: Iterable[Node]) -> dict[str | None, list[Node]]:
    """Direct children of every scope (``None``: the top level), each in document order, in
    one pass (``Model.children`` rescans every node for each scope)."""
    children: dict[str | None, list[Node]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node)
    return children


def parent_of(node_id: str) -> str | None:
    """The parent id implied by a dotted id (``"a.b.c"`` -> ``"a.b"``), ``None`` at top level."""
    head, dot, _ = node_id.rpartition(".")
    return head if dot else None


@dataclass(slots=True)
class Model:
    """A whole document: wiring, parameter table and optional facts and metadata."""

    inputs: list[str]
    outputs: list[Ref]
    nodes: list[Node]
    parameters: dict[str, Parameter]
    #: Document metadata: ``producer``, ``framework`` and anything a producer wants to keep.
    metadata: dict[str, JSONValue] = field(default_factory=dict)
    #: Opset versions the document relies on, by namespace (``{"trama": 1}``).
    opsets: dict[str, int] = field(default_factory=dict)
    #: Facts about each model input and output, aligned with ``inputs`` / ``outputs``.
    input_facts: list[ValueFact | None] | None = None
    output_facts: list[ValueFact | None] | None = None
    #: The sizes each input symbol may take (``{"seq": SymbolRange(max=64)}``), where the
    #: exporter knows a bound; a symbol not listed may be any size.
    symbols: dict[str, SymbolRange] | None = None
    #: The ``format_version`` of the file this model was read from (``None`` if built in memory).
    source_format_version: str | None = None
    #: Where each node and entry was written in the nested (1.3) text this model was read from,
    #: to locate problems found later (:class:`trama.format._expand.Places`); ``None`` otherwise.
    source_places: Any = field(default=None, compare=False, repr=False)

    def node(self, node_id: str) -> Node:
        """The node with this id (raises ``KeyError`` if there is none)."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def children(self, node_id: str | None) -> Iterator[Node]:
        """Direct children of ``node_id`` (top-level nodes for ``None``), in document order."""
        return (node for node in self.nodes if node.parent == node_id)

    def parameter(self, node: Node, slot: str) -> Parameter:
        """The table entry a node's slot refers to."""
        return self.parameters[node.parameters[slot]]
