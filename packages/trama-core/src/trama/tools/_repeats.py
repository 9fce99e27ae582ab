"""Structural signatures of composite nodes: which blocks of a model are the same block.

A transformer's decoder layers, a CNN's stages, the two norms of one layer: composites that
compute the same thing with their own tensors. :func:`block_signatures` gives each composite
asked for a digest of its *structure*, so that two composites have the same digest exactly when
they differ in nothing but their place in the model, the values of their tensors and the names
their own entries happen to have; :func:`repeated_blocks` groups the composites that share one.
``trama ssa`` prints such a block once; the format's writer can store it once.

What the structure of a composite ``B`` is, every name written relative to ``B``:

* ``B``'s op, its ``class`` metadata (the one metadata key that says what the block is), its
  input ports, outputs and output bindings, and its own parameter slots;
* for each descendant, in document order: its id relative to ``B`` (``self_attn.q_proj``), op,
  input ports and the references wired to them, outputs, output bindings, ``calls`` target,
  metadata, and each parameter slot: the entry's kind and value for a setting (``32``, ``[2,
  8, -1]``, ``"bool"``: kinds are told apart, ``1`` is not ``1.0`` or ``true``), its dtype and
  shape for a tensor (never its data), its ``learnable`` flag, and, for an entry that more
  than one slot of the model uses, which entry it is.

An entry that only one slot uses is private to that slot: its name is not part of the structure
(whatever a layer's entries are called, ``<node id>.<slot>`` as usual or otherwise). A shared
entry's name, and every other name (a reference, a ``calls`` target), is written relative to
``B`` when it lies under ``B`` (a weight tied between two nodes of one layer reads alike in
every layer), and as itself when it lies outside: two layers tied to one outside entry have the
same structure, two layers tied to different ones do not, and a layer that uses another layer's
weight differs from that layer. So a shared or tied entry never disappears into a block that is
printed or stored once. ``B``'s own id, the wiring of its inputs and its metadata other than
``class`` are not part of its structure: they are what differs from one instance to the next.

The digests are BLAKE2b (128 bits) of a canonical text: deterministic across runs, processes
and machines, and a pure function of the model and the ids asked for. Each node is described
once, relative to its parent, and a composite's digest is built from its children's digests (a
child's outside names are carried up and resolved at each level), so the work is linear in the
size of the subtrees signed, plus the outside names each level resolves; a block's digest spells
out the outside names it uses, which its parent's digest resolves in its own terms. :func:`repeated_blocks`
first compares what costs nothing to read (op, ``class``, ports, outputs, number of children)
and signs only the composites that something else could match, with their subtrees: a model
with no repeated block costs one pass over its nodes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from trama.format._lazy import is_tensor
from trama.format._model import INPUT, Model, Node, Ref, children_by_parent

__all__ = ["block_signatures", "repeated_blocks"]


def block_signatures(model: Model, node_ids: Iterable[str] | None = None) -> dict[str, str]:
    """The structural digest (32 hex digits) of each composite in ``node_ids`` (every composite
    of ``model`` when ``None``), by id; ids that are not composites of ``model`` are left out.

    Two composites have equal digests exactly when they have the same structure (see the module
    docstring). Works on any model the decoder produces: a slot naming a missing entry, a
    reference to a node that does not exist, are part of the structure like any other name.
    """
    signer = _Signer(model)
    return {node_id: signer.digest(node_id) for node_id in signer.composites(node_ids)}


def repeated_blocks(model: Model, node_ids: Iterable[str] | None = None) -> list[list[str]]:
    """The composites of ``node_ids`` (all when ``None``) that have the same structure as another
    one of them, as groups of ids: each group in document order, the groups in the order of
    their first member; a composite alone with its structure is in none. Only composites whose
    op, ``class``, ports, outputs and number of children match another's are signed."""
    signer = _Signer(model)
    buckets: dict[tuple[Any, ...], list[str]] = {}
    for node_id in signer.composites(node_ids):
        buckets.setdefault(signer.outline(node_id), []).append(node_id)
    groups: dict[str, list[str]] = {}
    for ids in buckets.values():
        if len(ids) > 1:
            for node_id in ids:
                groups.setdefault(signer.digest(node_id), []).append(node_id)
    order = {node.id: index for index, node in enumerate(model.nodes)}
    repeated = [sorted(ids, key=order.__getitem__) for ids in groups.values() if len(ids) > 1]
    return sorted(repeated, key=lambda ids: order[ids[0]])


class _Signer:
    """One model's composites, signed on demand, each at most once."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.by_id: dict[str, Node] = {}
        for node in model.nodes:
            self.by_id.setdefault(node.id, node)
        self.children = children_by_parent(model.nodes)
        self.uses = Counter(key for node in model.nodes for key in node.parameters.values())
        self.done: dict[str, tuple[str, list[str]]] = {}

    def composites(self, node_ids: Iterable[str] | None) -> list[str]:
        """The ids of ``node_ids`` (all when ``None``) that are composites, each once, in order."""
        ids = self.by_id if node_ids is None else dict.fromkeys(node_ids)
        return [node_id for node_id in ids if (node := self.by_id.get(node_id)) is not None and node.is_composite]

    def outline(self, node_id: str) -> tuple[Any, ...]:
        """What two composites of one structure have in common and costs nothing to read."""
        node = self.by_id[node_id]
        cls = (node.metadata or {}).get("class")
        count = len(self.children.get(node_id, ()))
        return (node.op, cls if isinstance(cls, str) else repr(cls), tuple(node.inputs), tuple(node.outputs), count)

    def digest(self, node_id: str) -> str:
        """The composite's digest: its structure with the outside names it uses spelled out."""
        signed = self.done.get(node_id)
        if signed is None:
            self._sign_subtree(self.by_id[node_id])
            signed = self.done[node_id]
        inner, outside = signed
        if not outside:
            return inner
        return _hash(repr((inner, tuple(outside))))

    def _sign_subtree(self, top: Node) -> None:
        """Sign ``top`` and every composite below it not signed yet, children first (no
        recursion: a document may nest deeper than Python's stack)."""
        stack: list[tuple[Node, bool]] = [(top, False)]
        on_path: set[str] = set()
        while stack:
            node, expanded = stack.pop()
            if node.id in self.done:
                continue
            if expanded:
                on_path.discard(node.id)
                self.done[node.id] = self._sign(node)
                continue
            on_path.add(node.id)
            stack.append((node, True))
            for child in self.children.get(node.id, ()):
                # A duplicated id could make a node its own descendant: skip what is on the path.
                if child.is_composite and child.id not in self.done and child.id not in on_path:
                    stack.append((child, False))

    def _sign(self, block: Node) -> tuple[str, list[str]]:
        """``block``'s digest and its outside names, its composite children already signed."""
        names = _Names(block.id)
        cls = (block.metadata or {}).get("class")
        head = (block.op, _plain(cls), tuple(block.inputs), tuple(block.outputs), _bindings(block, names))
        parts = [repr((head, self._slots(block, names)))]
        for child in self.children.get(block.id, ()):
            parts.append(repr(self._member(child, names)))
        return _hash("\n".join(parts)), names.outside

    def _member(self, node: Node, names: _Names) -> tuple[Any, ...]:
        """One child of a block, relative to the block; a composite child by its own digest,
        with its outside names resolved at this level."""
        ref = names.ref
        if node.is_composite:
            signed = self.done.get(node.id)
            # ``None`` only for a node that is its own descendant (duplicated ids).
            inner: Any = None if signed is None else (signed[0], tuple(names.name(name) for name in signed[1]))
        else:
            inner = None
        return (
            node.id[len(names.prefix) :] if node.id.startswith(names.prefix) else names.name(node.id),
            node.op,
            tuple((port, ref(source)) for port, source in node.inputs.items()),
            tuple(node.outputs),
            None if node.calls is None else names.name(node.calls),
            _metadata(node.metadata),
            self._slots(node, names) if node.parameters else (),
            inner if node.is_composite else _bindings(node, names),
        )

    def _slots(self, node: Node, names: _Names) -> tuple[Any, ...]:
        table = self.model.parameters
        slots = []
        for slot, key in node.parameters.items():
            entry = table.get(key)
            if entry is None:
                kind: Any = "missing"
            else:
                value = entry.value
                if is_tensor(value):
                    kind = ("tensor", value.dtype, tuple(value.shape), entry.learnable)
                else:
                    kind = ("value", _plain(value), entry.learnable)
            # An entry no other slot uses is private: its name says nothing about the structure.
            slots.append((slot, "private" if self.uses[key] == 1 else names.name(key), kind))
        return tuple(slots)


class _Names:
    """The names one block's description uses: those under the block relative to it, the others
    as numbered placeholders for the level above to resolve (``outside``, in first-use order)."""

    __slots__ = ("_index", "outside", "prefix")

    def __init__(self, block_id: str) -> None:
        self.prefix = block_id + "."
        self.outside: list[str] = []
        self._index: dict[str, int] = {}

    def name(self, name: str) -> tuple[str, Any]:
        if name.startswith(self.prefix):
            return ("in", name[len(self.prefix) :])
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self.outside)
            self.outside.append(name)
        return ("out", index)

    def ref(self, ref: Ref) -> tuple[Any, ...]:
        if ref.node == INPUT:
            return ("input", ref.output)
        return (*self.name(ref.node), ref.output)


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _bindings(node: Node, names: _Names) -> tuple[Any, ...] | None:
    if node.output_bindings is None:
        return None
    return tuple((output, names.ref(ref)) for output, ref in node.output_bindings.items())


def _plain(value: Any) -> Any:
    """A setting's value as the description holds it: ``repr`` tells ``1``, ``1.0``, ``True``
    and ``'1'`` apart, and ``-0.0`` from ``0.0``; a list and a tuple alike (a document has
    lists), anything else by its type and ``repr``."""
    if value is None or type(value) in (str, bool, int, float):
        return value
    if isinstance(value, (list, tuple)):
        return ("list", *(_plain(item) for item in value))
    return ("object", type(value).__qualname__, repr(value))


def _metadata(metadata: dict[str, Any] | None) -> str | None:
    """Node metadata as canonical JSON text (keys sorted), or ``None`` when there is none."""
    if not metadata:
        return None
    try:
        return json.dumps(metadata, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):  # keys that do not sort together (an in-memory model)
        return repr(sorted(metadata.items(), key=lambda item: repr(item[0])))
