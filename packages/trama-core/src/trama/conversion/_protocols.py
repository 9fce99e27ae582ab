"""The two protocols a modeling library implements so that its modules export and import.

* :class:`ExportableOp` — an object that describes itself as a node (and, for a composite, its
  children) when handed an :class:`~trama.conversion._export.ExportContext`.
* :class:`ImportableOp` — a class that rebuilds an object from a node, its already-built
  children and its resolved parameters.

Neither protocol needs inheritance: any object with the right method qualifies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: op packs import this module when plugins are discovered
    from trama.conversion._export import ExportContext
    from trama.format._model import JSONValue, Node, Parameter, Ref

__all__ = ["ExportableOp", "ImportableOp", "NodeFragment", "Param"]


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter value with options, for a :class:`NodeFragment`'s ``parameters``.

    A bare value in ``parameters`` becomes a non-learnable entry of its own. Wrap it to say
    more: ``learnable=True`` for trained weights; ``key`` is the identity that decides sharing
    (two slots whose ``key`` is the same object get one entry — pass the framework's own
    parameter object when ``value`` is a fresh numpy copy of it); ``name`` picks the entry's
    name in the table, and two slots naming the same entry share it.
    """

    value: Any
    learnable: bool = False
    key: Any = None
    name: str | None = None


@dataclass(slots=True)
class NodeFragment:
    """What an exportable object returns: its own node, minus the id.

    ``inputs`` defaults to the references the parent passed in (``ctx.inputs``) and
    ``outputs`` to the names the parent asked for. ``parameters`` maps slot names to values
    (arrays, scalars, lists) or :class:`Param`. A composite sets ``output_bindings`` (refs to
    its children's outputs, as returned by ``ctx.child``, or to ``ctx.input(name)``).
    """

    op: str
    inputs: dict[str, Ref] | None = None
    outputs: list[str] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    output_bindings: dict[str, Ref] | None = None
    metadata: dict[str, JSONValue] | None = None


@runtime_checkable
class ExportableOp(Protocol):
    """An object that can describe itself as a trama node."""

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        """Return this object's node; export children first with ``ctx.child(...)``."""
        ...


@runtime_checkable
class ImportableOp(Protocol):
    """A class that can rebuild an instance from a node."""

    @classmethod
    def from_node(cls, node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Any:
        """Build an instance. ``children`` maps child names to built objects (document order;
        a child that is a call of another node is that node's very object, so one object may
        appear under two names); ``parameters`` maps slot names to table entries — slots that share an entry receive
        the very same :class:`~trama.Parameter` object, and ``numpy.asarray(p.value)`` the same
        array."""
        ...
