"""What changed between two models: :func:`diff`, its report, and the ``trama diff A B`` command.

A review of a model change reads like a review of a code change: which modules were added,
removed or renamed, which settings moved from what to what, which tensors changed shape, and
which weights a fine-tuning run touched and by how much. :func:`diff` compares two
:class:`~trama.Model` objects and returns a :class:`ModelDiff`, a frozen list of
:class:`Change` entries, each one line of the report.

**Matching the trees.** Nodes are matched from the top down: a node of ``A`` is the node of
``B`` with the same name under the matched parent (the same id, unless an ancestor was renamed).
Among the children of a matched pair that found no partner by name, a node of ``A`` and one of
``B`` are one node *renamed* when they have the same structure (op, ``class``, ports, settings,
tensor dtypes and shapes, children and wiring: for a composite the digest of
:mod:`trama.tools._repeats`) and the same place among their siblings: the same nearest
preceding sibling that kept its name, and the same rank among the candidates of that structure
there. A node left over in ``A`` and one left over in ``B`` with the same name and structure,
under parents that are not a matched pair, are one node *moved* when no other pair could be
and one of the two parents is on both sides (a module wrapped in a new one, or unwrapped; a
module of a removed block and one of an added block are a replacement, not a move). Only
modules and leaves with a learnable tensor move: a lone ``add`` is not worth calling moved. The
subtree of a renamed or moved node is matched by name under its new id. What is left is
*removed* (in ``A``) or *added* (in ``B``), reported once at the top of each subtree.

**Comparing matched nodes.** Op, ``class`` and other node metadata, the ``calls`` target, input
ports and what feeds them, outputs and output bindings (references are compared through the
matching, so a renamed producer is not a rewiring), each parameter slot (settings by value and
kind, as the format compares them: ``1`` is not ``1.0``), tensors by dtype and shape, then by
value, the ``learnable`` flag, and which slots share an entry. Tensor values are compared
without decoding where both files record comparable checksums; otherwise their bytes are
compared, and with ``values=True`` a tensor whose values changed reports the largest absolute
difference and how many of its values changed, which says whether a fine-tuning run touched a
layer and by how much. A tensor whose values are not at hand (its external weights file is
missing, as for the old side of a git diff) is compared by checksum, and the diff notes it.
Model inputs, outputs, their facts, symbols, opsets and the document metadata are compared too.

**Repeated blocks.** The same change in several sibling instances of one repeated block (the
decoder layers of a stack, found by :func:`~trama.tools._repeats.repeated_blocks`) is one
entry whose subtree names them all: ``root.model.layers.0–23.mlp.gate_proj`` for numbered
siblings (ranges joined by commas, in braces when there is more than one:
``layers.{0–3,7}``), ``{input_layernorm,post_attention_layernorm}`` for named ones, at every
level of nesting.

**Order.** Document-level changes first, then the changes of ``A``'s nodes in ``A``'s document
order, then ``B``'s additions in ``B``'s order. The result depends on nothing but the two
models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

import numpy as np
import xxhash

from trama.errors import TramaError, WeightsFileError
from trama.format._external import MissingWeightsFileError, check_reference, make_resolver
from trama.format._lazy import is_tensor
from trama.format._model import INPUT, Model, Node, Parameter, Ref, ValueFact, children_by_parent
from trama.format._sizes import SizeExpr
from trama.format._tensor import Base64Source, Tensor, checksum_hasher
from trama.tools import _cli_json
from trama.tools._repeats import _Signer, repeated_blocks
from trama.tools._ssa import describe_metadata_value, format_fact, format_value, shown

__all__ = [
    "CHANGE_KINDS",
    "DIFF_HELP",
    "Change",
    "ChangeKind",
    "ModelDiff",
    "diff",
    "diff_arguments",
    "load_for_diff",
    "render_diff",
    "run_diff",
]

ChangeKind = Literal[
    "added",
    "removed",
    "renamed",
    "moved",
    "op",
    "class",
    "call",
    "metadata",
    "ports",
    "setting",
    "tensor",
    "values",
    "learnable",
    "sharing",
    "model",
]

#: Every kind of change, in the order the summary line counts them (the ``ChangeKind`` order).
CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)

#: The mark a report line starts with, by kind (``~`` for the others).
_MARKS = {"added": "+", "removed": "-", "renamed": "→", "moved": "→", "values": "*"}

#: Values are compared this many elements at a time, so that the float64 copies stay small.
_CHUNK = 1 << 20
#: A metadata value in a report line is cut to this many characters.
_VALUE_WIDTH = 60


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the two models: one line of the report.

    ``subtree`` is the id of the node it concerns (``A``'s id; ``B``'s for an addition), or a
    pattern naming several repeated instances (``root.model.layers.0–1.mlp``), or ``None`` for
    the document itself (model inputs and outputs, symbols, opsets, metadata). ``nodes`` lists
    the ids the entry covers, one per instance. ``slot`` is the parameter slot, port, output or
    metadata key concerned, where there is one; ``old`` and ``new`` are the two sides as JSON
    values (a setting's value, a tensor's ``{"dtype", "shape"}``, a reference's text, a renamed
    or moved node's id, an added or removed node's ``{"op", "class", "nodes", "values"}``),
    ``None`` where a side has none. For tensor values, ``max_abs_diff`` is the largest
    absolute difference (``None`` when the values were not compared, or when it is not a
    finite number: a NaN on one side only) and ``changed_values`` how many elements differ
    (in all instances together).
    """

    kind: ChangeKind
    subtree: str | None
    text: str
    nodes: tuple[str, ...] = ()
    slot: str | None = None
    old: Any = None
    new: Any = None
    max_abs_diff: float | None = None
    changed_values: int | None = None

    @property
    def mark(self) -> str:
        """``+`` added, ``-`` removed, ``→`` renamed or moved, ``*`` values, ``~`` the rest."""
        return _MARKS.get(self.kind, "~")

    @property
    def line(self) -> str:
        """The report line: mark, subtree, two spaces, text."""
        return f"{self.mark} {self.subtree if self.subtree is not None else '(document)'}  {self.text}"

    def to_json(self) -> dict[str, Any]:
        """The change as ``ModelDiff.to_json`` lists it."""
        return {
            "kind": self.kind,
            "subtree": self.subtree,
            "nodes": list(self.nodes),
            "text": self.text,
            "slot": self.slot,
            "old": self.old,
            "new": self.new,
            "max_abs_diff": self.max_abs_diff,
            "changed_values": self.changed_values,
        }


@dataclass(frozen=True, slots=True)
class ModelDiff:
    """Everything :func:`diff` found: the changes in report order, and notes on what could not
    be compared fully (tensors compared by checksum only). ``a`` and ``b`` name the two sides
    in the report's header (file names, for the command line)."""

    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()
    a: str | None = None
    b: str | None = None
    a_format: str | None = None
    b_format: str | None = None

    @property
    def equal(self) -> bool:
        """Whether the two models are the same model (formats, names of table entries and
        encodings aside)."""
        return not self.changes

    def counts(self) -> dict[str, int]:
        """How many entries of each kind, for the kinds present, in :data:`CHANGE_KINDS` order."""
        found = {kind: 0 for kind in CHANGE_KINDS}
        for change in self.changes:
            found[change.kind] += 1
        return {kind: count for kind, count in found.items() if count}

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (``trama diff --json``; :data:`DIFF_HELP` has the shape)."""
        return {
            "equal": self.equal,
            "a": {"name": self.a, "format_version": self.a_format},
            "b": {"name": self.b, "format_version": self.b_format},
            "changes": [change.to_json() for change in self.changes],
            "counts": self.counts(),
            "notes": list(self.notes),
        }


DIFF_HELP = """\
Lines: + added, - removed, → renamed or moved, * tensor values changed,
~ anything else changed; each names the node (subtree) it concerns, the same
change in repeated sibling blocks once (root.model.layers.0–23.mlp.up_proj).
Exit status: 0 the models are the same, 1 they differ, 2 trouble (a file that
cannot be read, a wrong command line). With --git, 0 unless there is trouble.

--json prints one object; keys are sorted, changes keep the report's order:
  {"equal": BOOL,
   "a": {"name": NAME, "format_version": TEXT | null}, "b": {...},
   "changes": [{"kind": KIND, "subtree": ID | PATTERN | null,
                "nodes": [ID, ...], "text": TEXT,
                "slot": NAME | null, "old": VALUE | null, "new": VALUE | null,
                "max_abs_diff": NUMBER | null, "changed_values": INT | null}],
   "counts": {KIND: INT, ...},
   "notes": [TEXT, ...]}
KIND is one of added, removed, renamed, moved, op, class, call, metadata,
ports, setting, tensor, values, learnable, sharing, model. "subtree" is null
for the document itself; "nodes" are the instances an entry covers (A's ids,
B's for added). A tensor's old/new is {"dtype": NAME, "shape": [...]}, an
added (removed) node's new (old) {"op", "class", "nodes": INT, "values": INT}.

As a git diff driver (a .gitattributes line '*.trama.json diff=trama', then
'git config diff.trama.command "trama diff --git"'), git passes 7 arguments:
PATH OLD-FILE OLD-HEX OLD-MODE NEW-FILE NEW-HEX NEW-MODE."""


# --- the diff -----------------------------------------------------------------------------


def diff(a: Model, b: Model, *, values: bool = True, names: tuple[str | None, str | None] = (None, None)) -> ModelDiff:
    """The differences between ``a`` and ``b`` (see the module docstring), as a :class:`ModelDiff`.

    ``values``: for tensors whose values changed, compute the largest absolute difference and
    how many values changed (reading both tensors); without it changed tensors are only listed,
    found by checksum where the documents record comparable ones. ``names`` are what the
    report's header calls the two sides.
    """
    differ = _Differ(a, b, values=values)
    changes = differ.run()
    return ModelDiff(
        tuple(changes),
        tuple(differ.notes),
        names[0],
        names[1],
        a.source_format_version,
        b.source_format_version,
    )


@dataclass(slots=True)
class _Raw:
    """A change before repeated ones are merged: its node path as segments (each a tuple of
    sibling names once merged), where its ids come from (``a`` or ``b``), and what makes two of
    them the same change (``key``)."""

    kind: ChangeKind
    segments: tuple[tuple[str, ...], ...] | None
    space: str
    order: tuple[int, ...]
    key: tuple[Any, ...]
    describe: Callable[[str | None, bool], str]
    nodes: list[str] = field(default_factory=list)
    slot: str | None = None
    old: Any = None
    new: Any = None
    max_abs_diff: float | None = None
    changed_values: int | None = None
    measured: bool = False


class _Side:
    """One model, indexed."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.by_id: dict[str, Node] = {}
        for node in model.nodes:
            self.by_id.setdefault(node.id, node)
        self.order = {node_id: index for index, node_id in enumerate(self.by_id)}
        self.children = children_by_parent(self.by_id.values())
        self.uses: dict[str, list[tuple[str, str]]] = {}
        for node in self.by_id.values():
            for slot, key in node.parameters.items():
                self.uses.setdefault(key, []).append((node.id, slot))
        self._signer: _Signer | None = None
        self._groups: dict[str, int] | None = None

    def signature(self, node: Node) -> Any:
        """What must be equal for two nodes to be one node renamed or moved."""
        if node.is_composite:
            if self._signer is None:
                self._signer = _Signer(self.model)
            return ("composite", self._signer.digest(node.id))
        slots = []
        for slot, key in node.parameters.items():
            entry = self.model.parameters.get(key)
            slots.append((slot, None if entry is None else _kind_of(entry)))
        return ("leaf", node.op, _class_of(node), tuple(node.inputs), tuple(node.outputs), tuple(slots))

    def movable(self, node: Node) -> bool:
        """A module, or a leaf with a learnable tensor: worth calling moved."""
        if node.is_composite or _class_of(node) is not None:
            return True
        for key in node.parameters.values():
            entry = self.model.parameters.get(key)
            if entry is not None and entry.learnable and is_tensor(entry.value):
                return True
        return False

    def group(self, node_id: str) -> int | None:
        """The repeated block ``node_id`` is an instance of, as a number, or ``None``."""
        if self._groups is None:
            self._groups = {}
            for index, ids in enumerate(repeated_blocks(self.model)):
                for member in ids:
                    self._groups[member] = index
        return self._groups.get(node_id)

    def subtree(self, node_id: str) -> list[Node]:
        """``node_id`` and its descendants, parents first."""
        found: list[Node] = []
        stack = [self.by_id[node_id]]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(reversed(self.children.get(node.id, [])))
        return found

    def values_in(self, nodes: Iterable[Node]) -> int:
        """How many tensor elements the entries these nodes use hold, each entry once."""
        seen: set[str] = set()
        total = 0
        for node in nodes:
            for key in node.parameters.values():
                entry = self.model.parameters.get(key)
                if key not in seen and entry is not None and is_tensor(entry.value):
                    seen.add(key)
                    total += math.prod(entry.value.shape)
        return total


class _Differ:
    def __init__(self, a: Model, b: Model, *, values: bool) -> None:
        self.a = _Side(a)
        self.b = _Side(b)
        self.values = values
        self.match: dict[str, str] = {}  # A id -> B id
        self.back: dict[str, str] = {}  # B id -> A id
        self.renamed: dict[str, str] = {}
        self.moved: dict[str, str] = {}
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self._compared_entries: set[tuple[str, str]] = set()
        self._shared_reported: set[frozenset[tuple[str, str]]] = set()

    def run(self) -> list[Change]:
        for letter, side in (("A", self.a), ("B", self.b)):
            missing = sorted(
                {
                    entry.value.source.path
                    for entry in side.model.parameters.values()
                    if is_tensor(entry.value) and isinstance(entry.value.source, _ChecksumOnly)
                }
            )
            for path in missing:
                self._note(f"{letter}'s weights file {path} is not at hand: its tensors are compared by checksum only")
        self._match_trees()
        raws: list[_Raw] = []
        raws += self._document_changes()
        end = len(self.a.by_id)
        for node_id, node in self.a.by_id.items():
            other = self.match.get(node_id)
            if other is None:
                parent = node.parent
                if parent is None or parent in self.match:
                    raws.append(self._removed(node))
                continue
            raws += self._node_changes(node, self.b.by_id[other])
        for node_id, node in self.b.by_id.items():
            if node_id not in self.back and (node.parent is None or node.parent in self.back):
                raws.append(self._added(node, end))
        raws.sort(key=lambda raw: raw.order)
        return [self._finish(raw) for raw in _merge_repeats(raws, self.a, self.b)]

    # --- matching --------------------------------------------------------------------------

    def _pair(self, a_id: str, b_id: str) -> None:
        self.match[a_id] = b_id
        self.back[b_id] = a_id

    def _match_trees(self) -> None:
        self._match_below(None, None)
        # Moves: what is left, paired where exactly one candidate on each side fits.
        left_a = [n for n in self.a.by_id.values() if n.id not in self.match and self.a.movable(n)]
        left_b = [n for n in self.b.by_id.values() if n.id not in self.back and self.b.movable(n)]
        if not left_a or not left_b:
            return
        keys_a: dict[Any, list[Node]] = {}
        for node in left_a:
            keys_a.setdefault((node.name, self.a.signature(node)), []).append(node)
        keys_b: dict[Any, list[Node]] = {}
        for node in left_b:
            keys_b.setdefault((node.name, self.b.signature(node)), []).append(node)
        for node in sorted(left_a, key=lambda n: (n.id.count("."), self.a.order[n.id])):
            if node.id in self.match:
                continue
            key = (node.name, self.a.signature(node))
            mine, theirs = keys_a[key], keys_b.get(key, [])
            if len(mine) != 1 or len(theirs) != 1 or theirs[0].id in self.back:
                continue
            other = theirs[0]
            parent_a, parent_b = node.parent, other.parent
            if parent_a is not None and self.match.get(parent_a) == parent_b:
                continue  # same place: not a move (and the rename pass judged it)
            if parent_a not in self.match and parent_b not in self.back:
                continue  # from a removed module into an added one: a replacement, not a move
            self._pair(node.id, other.id)
            self.moved[node.id] = other.id
            self._match_below(node.id, other.id)

    def _match_below(self, top_a: str | None, top_b: str | None) -> None:
        """Match the children of the matched pair (``top_a``, ``top_b``), and below, by name,
        then the leftovers of each scope as renames."""
        queue: deque[tuple[str | None, str | None]] = deque([(top_a, top_b)])
        while queue:
            parent_a, parent_b = queue.popleft()
            kids_a = self.a.children.get(parent_a, [])
            kids_b = self.b.children.get(parent_b, [])
            by_name: dict[str, Node] = {}
            for kid in kids_b:
                by_name.setdefault(kid.name, kid)
            for kid in kids_a:
                other = by_name.get(kid.name)
                if other is not None and other.id not in self.back and kid.id not in self.match:
                    self._pair(kid.id, other.id)
                    queue.append((kid.id, other.id))
            for kid_a, kid_b in self._renames(kids_a, kids_b):
                self._pair(kid_a.id, kid_b.id)
                self.renamed[kid_a.id] = kid_b.id
                queue.append((kid_a.id, kid_b.id))

    def _renames(self, kids_a: list[Node], kids_b: list[Node]) -> Iterator[tuple[Node, Node]]:
        """Pairs of unmatched siblings that are one node renamed: same structure, same place."""
        left_a = _by_place(kids_a, self.match, self.a.signature)
        if not left_a:
            return
        left_b = _by_place(kids_b, self.back, self.b.signature, anchors=self.back)
        for place, nodes_a in left_a.items():
            nodes_b = left_b.get(place, [])
            if len(nodes_a) == len(nodes_b):
                yield from zip(nodes_a, nodes_b, strict=True)

    # --- node changes ----------------------------------------------------------------------

    def _raw(
        self,
        kind: ChangeKind,
        node_id: str | None,
        order: tuple[int, ...],
        key: tuple[Any, ...],
        describe: Callable[[str | None, bool], str],
        *,
        space: str = "a",
        slot: str | None = None,
        old: Any = None,
        new: Any = None,
        max_abs_diff: float | None = None,
        changed_values: int | None = None,
        measured: bool = False,
    ) -> _Raw:
        segments = None if node_id is None else tuple((part,) for part in node_id.split("."))
        return _Raw(
            kind,
            segments,
            space,
            order,
            (kind, slot, *key),
            describe,
            [node_id] if node_id is not None else [],
            slot,
            old,
            new,
            max_abs_diff,
            changed_values,
            measured,
        )

    def _removed(self, node: Node) -> _Raw:
        label, count, values = self._extent(self.a, node)
        text = f"removed {label}{_extent_text(count, values)}"
        return self._raw(
            "removed",
            node.id,
            (1, self.a.order[node.id], 0),
            (label, count, values),
            lambda _pattern, each: text + (" each" if each else ""),
            old=_node_json(node, count, values),
        )

    def _added(self, node: Node, end: int) -> _Raw:
        label, count, values = self._extent(self.b, node)
        text = f"added {label}{_extent_text(count, values)}"
        return self._raw(
            "added",
            node.id,
            (1, end + self.b.order[node.id], 0),
            (label, count, values),
            lambda _pattern, each: text + (" each" if each else ""),
            space="b",
            new=_node_json(node, count, values),
        )

    def _extent(self, side: _Side, node: Node) -> tuple[str, int, int]:
        """A removed or added subtree's label, nodes and tensor values, leaving out what moved
        out of it or into it (matched elsewhere)."""
        matched = self.match if side is self.a else self.back
        nodes = [each for each in side.subtree(node.id) if each.id not in matched]
        cls = _class_of(node)
        label = shown(cls.rpartition(".")[2]) if cls else shown(node.op)
        return label, len(nodes), side.values_in(nodes)

    def _node_changes(self, a: Node, b: Node) -> list[_Raw]:
        position = self.a.order[a.id]
        raws: list[_Raw] = []
        count = 0

        def add(
            kind: ChangeKind,
            key: tuple[Any, ...],
            text: str,
            *,
            slot: str | None = None,
            old: Any = None,
            new: Any = None,
            describe: Callable[[str | None, bool], str] | None = None,
            **extra: Any,
        ) -> None:
            nonlocal count
            count += 1
            raws.append(
                self._raw(
                    kind,
                    a.id,
                    (1, position, count),
                    key,
                    describe or (lambda _pattern, each: text + (" in each" if each else "")),
                    slot=slot,
                    old=old,
                    new=new,
                    **extra,
                )
            )

        if a.id in self.renamed:
            new_name = b.name

            def renamed(pattern: str | None, _each: bool) -> str:
                head = pattern.rpartition(".")[0] if pattern else ""
                return f"renamed to {head + '.' if head else ''}{shown(new_name)}"

            add("renamed", (a.name, new_name), "", old=a.id, new=b.id, describe=renamed)
        elif a.id in self.moved:
            add("moved", (b.id,), f"moved to {shown(b.id)}", old=a.id, new=b.id)
        if a.op != b.op:
            add("op", (a.op, b.op), f"op {shown(a.op)} → {shown(b.op)}", old=a.op, new=b.op)
        class_a, class_b = _class_of(a), _class_of(b)
        if class_a != class_b:
            add(
                "class",
                (class_a, class_b),
                f"class {_class_text(class_a, class_b)} → {_class_text(class_b, class_a)}",
                old=class_a,
                new=class_b,
            )
        meta_a = {k: v for k, v in (a.metadata or {}).items() if k != "class"}
        meta_b = {k: v for k, v in (b.metadata or {}).items() if k != "class"}
        for key in _union(meta_a, meta_b):
            old, new = meta_a.get(key, _ABSENT), meta_b.get(key, _ABSENT)
            if not _same_json(old, new):
                add(
                    "metadata",
                    (_canonical(old), _canonical(new)),
                    f"metadata {shown(key)}: {_meta_text(old)} → {_meta_text(new)}",
                    slot=key,
                    old=_json_or_none(old),
                    new=_json_or_none(new),
                )
        target = None if a.calls is None else self.match.get(a.calls, _UNMATCHED)
        if (a.calls is not None or b.calls is not None) and target != b.calls:
            old_call = "none" if a.calls is None else shown(a.calls)
            new_call = "none" if b.calls is None else shown(b.calls)
            add("call", (a.calls, b.calls), f"calls {old_call} → {new_call}", old=a.calls, new=b.calls)
        scope = a.parent
        for port in _union(a.inputs, b.inputs):
            ref_a, ref_b = a.inputs.get(port), b.inputs.get(port)
            if ref_a is not None and ref_b is not None and self._same_ref(ref_a, ref_b):
                continue
            old_text = None if ref_a is None else _ref_text(ref_a, scope)
            new_text = None if ref_b is None else _ref_text(ref_b, b.parent)
            if ref_a is None:
                text = f"input {shown(port)} added: {new_text}"
            elif ref_b is None:
                text = f"input {shown(port)} removed (was {old_text})"
            else:
                text = f"input {shown(port)}: {old_text} → {new_text}"
            add("ports", (old_text, new_text), text, slot=port, old=old_text, new=new_text)
        if a.outputs != b.outputs:
            add(
                "ports",
                ("outputs", tuple(a.outputs), tuple(b.outputs)),
                f"outputs {_list_text(a.outputs)} → {_list_text(b.outputs)}",
                old=list(a.outputs),
                new=list(b.outputs),
            )
        bindings_a, bindings_b = a.output_bindings or {}, b.output_bindings or {}
        for output in _union(bindings_a, bindings_b):
            ref_a, ref_b = bindings_a.get(output), bindings_b.get(output)
            if ref_a is None or ref_b is None:
                continue  # an output added or removed: the outputs line says so
            if self._same_ref(ref_a, ref_b):
                continue
            old_text, new_text = _ref_text(ref_a, a.parent), _ref_text(ref_b, b.parent)
            add(
                "ports",
                ("binding", old_text, new_text),
                f"output {shown(output)}: {old_text} → {new_text}",
                slot=output,
                old=old_text,
                new=new_text,
            )
        for slot in _union(a.parameters, b.parameters):
            for raw in self._slot_changes(a, b, slot):
                count += 1
                raw.order = (1, position, count)
                raws.append(raw)
        return raws

    def _same_ref(self, ref_a: Ref, ref_b: Ref) -> bool:
        if ref_a.output != ref_b.output:
            return False
        if ref_a.node == INPUT or ref_b.node == INPUT:
            return ref_a.node == ref_b.node
        return self.match.get(ref_a.node) == ref_b.node

    def _slot_changes(self, a: Node, b: Node, slot: str) -> list[_Raw]:
        key_a, key_b = a.parameters.get(slot), b.parameters.get(slot)
        entry_a = None if key_a is None else self.a.model.parameters.get(key_a)
        entry_b = None if key_b is None else self.b.model.parameters.get(key_b)
        raws: list[_Raw] = []

        def add(kind: ChangeKind, key: tuple[Any, ...], text: str, **extra: Any) -> None:
            each_text = extra.pop("describe", None)
            raws.append(
                self._raw(
                    kind,
                    a.id,
                    (0,),
                    key,
                    each_text or (lambda _pattern, each: text + (" in each" if each else "")),
                    slot=slot,
                    **extra,
                )
            )

        name = shown(slot)
        if entry_a is None or entry_b is None:
            if entry_a is entry_b:
                return raws
            present = entry_b if entry_a is None else entry_a
            assert present is not None
            kind: ChangeKind = "tensor" if is_tensor(present.value) else "setting"
            shown_value = format_value(present.value)
            if entry_a is None:
                text = f"{'tensor' if kind == 'tensor' else 'setting'} {name} added: {shown_value}"
                add(kind, ("added", _value_key(present.value)), text, new=_value_json(present.value))
            else:
                text = f"{'tensor' if kind == 'tensor' else 'setting'} {name} removed (was {shown_value})"
                add(kind, ("removed", _value_key(present.value)), text, old=_value_json(present.value))
            return raws
        value_a, value_b = entry_a.value, entry_b.value
        if is_tensor(value_a) and is_tensor(value_b):
            self._tensor_changes(slot, key_a or "", key_b or "", value_a, value_b, add)
        elif Parameter(value_a) != Parameter(value_b):
            old_text, new_text = format_value(value_a), format_value(value_b)
            add(
                "setting",
                (_value_key(value_a), _value_key(value_b)),
                f"setting {name}: {old_text} → {new_text}",
                old=_value_json(value_a),
                new=_value_json(value_b),
            )
        if entry_a.learnable != entry_b.learnable:
            add(
                "learnable",
                (entry_a.learnable, entry_b.learnable),
                f"{name} learnable: {_bool(entry_a.learnable)} → {_bool(entry_b.learnable)}",
                old=entry_a.learnable,
                new=entry_b.learnable,
            )
        self._sharing(a, slot, key_a or "", key_b or "", add)
        return raws

    def _tensor_changes(
        self, slot: str, key_a: str, key_b: str, value_a: Tensor, value_b: Tensor, add: Callable[..., None]
    ) -> None:
        """A slot's two tensors: dtype and shape, else values (``add`` records a change)."""
        name = shown(slot)
        if (key_a, key_b) in self._compared_entries:
            return  # a shared entry: compared at its first slot
        self._compared_entries.add((key_a, key_b))
        if value_a.dtype != value_b.dtype or tuple(value_a.shape) != tuple(value_b.shape):
            magnitude: tuple[float | None, int] | None = None
            if self.values and tuple(value_a.shape) == tuple(value_b.shape):
                arrays = self._arrays(value_a, value_b, key_a)
                if arrays is not None:
                    magnitude = _difference(*arrays, cast=True)
            old_type, new_type = format_value(value_a), format_value(value_b)
            text = f"tensor {name}: {old_type} → {new_type}"
            add(
                "tensor",
                (old_type, new_type),
                "",
                describe=lambda _pattern, each: text + (" in each" if each else ""),
                old=_tensor_json(value_a),
                new=_tensor_json(value_b),
                max_abs_diff=None if magnitude is None else magnitude[0],
                measured=magnitude is not None,
            )
            return
        same = self._same_values(value_a, value_b, key_a)
        if same is None or same[0]:
            return
        magnitude = same[1]
        add(
            "values",
            (format_value(value_a),),
            "",
            describe=lambda _pattern, _each: "",  # _values_text writes it, from the merged numbers
            old=_tensor_json(value_a),
            new=_tensor_json(value_b),
            max_abs_diff=None if magnitude is None else magnitude[0],
            changed_values=None if magnitude is None else magnitude[1],
            measured=magnitude is not None,
        )
        return

    def _sharing(self, a: Node, slot: str, key_a: str, key_b: str, add: Callable[..., None]) -> None:
        """Whether the slots sharing this slot's entry are the same slots (through the matching)."""
        uses_a = self.a.uses.get(key_a, [])
        uses_b = self.b.uses.get(key_b, [])
        if len(uses_a) < 2 and len(uses_b) < 2:
            return
        b_id = self.match[a.id]
        mapped_a = {(self.match[n], s) for n, s in uses_a if n in self.match} - {(b_id, slot)}
        mapped_b = {(n, s) for n, s in uses_b if n in self.back} - {(b_id, slot)}
        if mapped_a == mapped_b:
            return
        involved = frozenset(mapped_a | mapped_b | {(b_id, slot)})
        if involved in self._shared_reported:
            return
        self._shared_reported.add(involved)
        gained = sorted(mapped_b - mapped_a)
        lost = sorted(mapped_a - mapped_b)
        parts = []
        if gained:
            parts.append("now shared with " + ", ".join(f"{shown(n)}.{shown(s)}" for n, s in gained))
        if lost:
            parts.append("no longer shared with " + ", ".join(f"{shown(n)}.{shown(s)}" for n, s in lost))
        add(
            "sharing",
            (tuple(gained), tuple(lost)),
            f"{shown(slot)} " + "; ".join(parts),
            old=[f"{n}.{s}" for n, s in sorted(mapped_a)],
            new=[f"{n}.{s}" for n, s in sorted(mapped_b)],
        )

    # --- tensor values ---------------------------------------------------------------------

    def _same_values(self, x: Tensor, y: Tensor, entry: str) -> tuple[bool, tuple[float | None, int] | None] | None:
        """Whether two tensors of one dtype and shape hold the same values, and when they do
        not and ``values`` is on, the largest difference and how many values differ; ``None``
        when it cannot be told (noted)."""
        recorded_x, recorded_y = _recorded(x), _recorded(y)
        if recorded_x is not None and recorded_y is not None and recorded_x[:2] == recorded_y[:2]:
            if recorded_x[2] == recorded_y[2]:
                return True, None
            if not self.values:
                return False, None
            arrays = self._arrays(x, y, entry)
            return False, None if arrays is None else _difference(*arrays)
        arrays = self._arrays(x, y, entry, quiet=True)
        if arrays is not None:
            if _same_bytes(*arrays):
                return True, None
            return False, _difference(*arrays) if self.values else None
        # One side (at least) is a checksum only: hash the other side's bytes to match it.
        for known, other in ((x, y), (y, x)):
            recorded = _recorded(known)
            if recorded is None or recorded[0] != "raw":
                continue
            other_recorded = _recorded(other)
            if other_recorded is not None and other_recorded[:2] == recorded[:2]:
                return other_recorded[2] == recorded[2], None
            array = self._read(other, entry)
            if array is not None:
                return _raw_checksum(array, recorded[1]) == recorded[2], None
        self._note(f"the values of {entry} could not be compared: neither side's bytes nor checksums are at hand")
        return None

    def _arrays(self, x: Tensor, y: Tensor, entry: str, *, quiet: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        array_x = self._read(x, entry, quiet=quiet)
        if array_x is None:
            return None
        array_y = self._read(y, entry, quiet=quiet)
        return None if array_y is None else (array_x, array_y)

    def _read(self, tensor: Tensor, entry: str, *, quiet: bool = False) -> np.ndarray | None:
        source = tensor.source
        if isinstance(source, _ChecksumOnly):
            return None
        try:
            return tensor.read()
        except TramaError as exc:
            if not quiet and not isinstance(source, _ChecksumOnly):
                self._note(f"the values of {entry} could not be read ({' '.join(str(exc).split())})")
            return None

    def _note(self, text: str) -> None:
        if text not in self._noted:
            self._noted.add(text)
            self.notes.append(shown(text))

    # --- the document ----------------------------------------------------------------------

    def _document_changes(self) -> list[_Raw]:
        a, b = self.a.model, self.b.model
        raws: list[_Raw] = []

        def add(kind: ChangeKind, key: tuple[Any, ...], text: str, **extra: Any) -> None:
            raws.append(self._raw(kind, None, (0, len(raws)), key, lambda _pattern, _each: text, **extra))

        if a.inputs != b.inputs:
            add(
                "model",
                ("inputs",),
                f"model inputs {_list_text(a.inputs)} → {_list_text(b.inputs)}",
                slot="inputs",
                old=list(a.inputs),
                new=list(b.inputs),
            )
        outputs_a = [self._model_ref(ref) for ref in a.outputs]
        outputs_b = [_ref_text(ref, None) for ref in b.outputs]
        if outputs_a != outputs_b:
            add(
                "model",
                ("outputs",),
                f"model outputs {_list_text([_ref_text(r, None) for r in a.outputs])} → {_list_text(outputs_b)}",
                slot="outputs",
                old=[_ref_text(r, None) for r in a.outputs],
                new=outputs_b,
            )
        for what, names_a, names_b, facts_a, facts_b in (
            ("input", list(a.inputs), list(b.inputs), a.input_facts, b.input_facts),
            ("output", [_ref_text(r, None) for r in a.outputs], outputs_b, a.output_facts, b.output_facts),
        ):
            seen: set[str] = set()
            for index, name in enumerate(names_a):
                if name in seen or name not in names_b:
                    continue
                seen.add(name)
                fact_a = _fact_at(facts_a, index)
                fact_b = _fact_at(facts_b, names_b.index(name))
                if _fact_text(fact_a) != _fact_text(fact_b):
                    add(
                        "model",
                        (what, name),
                        f"{what} {shown(name)}: {_fact_text(fact_a)} → {_fact_text(fact_b)}",
                        slot=name,
                        old=_fact_json(fact_a),
                        new=_fact_json(fact_b),
                    )
        symbols_a, symbols_b = a.symbols or {}, b.symbols or {}
        for symbol in _union(symbols_a, symbols_b):
            range_a, range_b = symbols_a.get(symbol), symbols_b.get(symbol)
            if range_a != range_b:
                old_text = "any size" if range_a is None else range_a.describe()
                new_text = "any size" if range_b is None else range_b.describe()
                add(
                    "model",
                    ("symbol", symbol),
                    f"symbol {shown(symbol)}: {old_text} → {new_text}",
                    slot=symbol,
                    old=None if range_a is None else {"min": range_a.min, "max": range_a.max},
                    new=None if range_b is None else {"min": range_b.min, "max": range_b.max},
                )
        for namespace in _union(a.opsets, b.opsets):
            old_version, new_version = a.opsets.get(namespace), b.opsets.get(namespace)
            if old_version != new_version:
                add(
                    "model",
                    ("opset", namespace),
                    f"opset {shown(namespace)}: {_opt(old_version)} → {_opt(new_version)}",
                    slot=namespace,
                    old=old_version,
                    new=new_version,
                )
        for key in _union(a.metadata, b.metadata):
            old, new = a.metadata.get(key, _ABSENT), b.metadata.get(key, _ABSENT)
            if not _same_json(old, new):
                add(
                    "metadata",
                    (key,),
                    f"metadata {shown(key)}: {_meta_text(old)} → {_meta_text(new)}",
                    slot=key,
                    old=_json_or_none(old),
                    new=_json_or_none(new),
                )
        return raws

    def _model_ref(self, ref: Ref) -> str:
        """A model output of ``A`` as ``B`` would name it, through the matching."""
        if ref.node == INPUT:
            return _ref_text(ref, None)
        return _ref_text(Ref(self.match.get(ref.node, "\x00" + ref.node), ref.output), None)

    def _finish(self, raw: _Raw) -> Change:
        pattern = None if raw.segments is None else _pattern_text(raw.segments)
        each = len(raw.nodes) > 1
        return Change(
            raw.kind,
            pattern,
            _text(raw, pattern, each, measuring=self.values),
            tuple(raw.nodes),
            raw.slot,
            raw.old,
            raw.new,
            raw.max_abs_diff,
            raw.changed_values,
        )


def _text(raw: _Raw, pattern: str | None, each: bool, *, measuring: bool) -> str:
    """A change's line text; for tensors, from the numbers merged from every instance."""
    if raw.kind == "values":
        return _values_text(raw, each, measuring=measuring)
    text = raw.describe(pattern, each)
    if raw.kind == "tensor" and raw.measured:
        text += f" ({_magnitude_text(raw.max_abs_diff)} after the cast)"
    return text


# --- merging repeated changes ---------------------------------------------------------------


def _merge_repeats(raws: list[_Raw], a: _Side, b: _Side) -> list[_Raw]:
    """Merge the changes that are the same in several sibling instances of one repeated block,
    outermost level first (see the module docstring); the order stays the report's order."""
    depth = max((len(raw.segments) for raw in raws if raw.segments is not None), default=0)
    for level in range(depth):
        buckets: dict[tuple[Any, ...], list[_Raw]] = {}
        kept: list[_Raw] = []
        for raw in raws:
            segments = raw.segments
            if segments is None or len(segments) <= level:
                kept.append(raw)
                continue
            side = a if raw.space == "a" else b
            instance = ".".join(names[0] for names in segments[: level + 1])
            group = side.group(instance)
            if group is None:
                kept.append(raw)
                continue
            bucket_key = (raw.space, raw.key, segments[:level], segments[level + 1 :], group, len(segments))
            buckets.setdefault(bucket_key, []).append(raw)
        for members in buckets.values():
            if len(members) == 1:
                kept.append(members[0])
                continue
            kept.append(_merged(members, level, a if members[0].space == "a" else b))
        kept.sort(key=lambda raw: raw.order)
        raws = kept
    return raws


def _merged(members: list[_Raw], level: int, side: _Side) -> _Raw:
    first = members[0]
    assert first.segments is not None
    names: list[str] = []
    for raw in members:
        assert raw.segments is not None
        names.extend(name for name in raw.segments[level] if name not in names)
    prefix = ".".join(parts[0] for parts in first.segments[:level])

    def place(name: str) -> int:
        return side.order.get(f"{prefix}.{name}" if prefix else name, 0)

    names.sort(key=place)
    segments = (*first.segments[:level], tuple(names), *first.segments[level + 1 :])
    magnitudes = [raw.max_abs_diff for raw in members if raw.max_abs_diff is not None]
    counts = [raw.changed_values for raw in members if raw.changed_values is not None]
    measured = all(raw.measured for raw in members)
    return _Raw(
        first.kind,
        segments,
        first.space,
        min(raw.order for raw in members),
        first.key,
        first.describe,
        [node for raw in members for node in raw.nodes],
        first.slot,
        first.old if all(raw.old == first.old for raw in members) else None,
        first.new if all(raw.new == first.new for raw in members) else None,
        max(magnitudes) if measured and len(magnitudes) == len(members) else None,
        sum(counts) if measured and len(counts) == len(members) else None,
        measured,
    )


def _pattern_text(segments: tuple[tuple[str, ...], ...]) -> str:
    return ".".join(_names_text(names) for names in segments)


def _names_text(names: tuple[str, ...]) -> str:
    """One segment of a pattern: a name, a range of numbered siblings (``0–23``), or a list in
    braces (``{0–3,7}``, ``{q_proj,k_proj}``)."""
    if len(names) == 1:
        return shown(names[0])
    if all(name.isdigit() and name == str(int(name)) for name in names):
        numbers = sorted(int(name) for name in names)
        runs: list[list[int]] = []
        for number in numbers:
            if runs and number == runs[-1][1] + 1:
                runs[-1][1] = number
            else:
                runs.append([number, number])
        parts = [str(lo) if lo == hi else f"{lo}–{hi}" for lo, hi in runs]
        return parts[0] if len(parts) == 1 else "{" + ",".join(parts) + "}"
    return "{" + ",".join(shown(name) for name in names) + "}"


# --- small helpers ----------------------------------------------------------------------------


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()
_UNMATCHED = "\x00unmatched"


def _by_place(
    kids: list[Node],
    matched: dict[str, str],
    signature: Callable[[Node], Any],
    anchors: dict[str, str] | None = None,
) -> dict[tuple[str | None, Any], list[Node]]:
    """The unmatched nodes among ``kids`` by (nearest preceding matched sibling, structure);
    the sibling as an id of ``A`` (``anchors`` maps ``B``'s ids back)."""
    found: dict[tuple[str | None, Any], list[Node]] = {}
    anchor: str | None = None
    for kid in kids:
        if kid.id in matched:
            anchor = kid.id if anchors is None else anchors[kid.id]
            continue
        found.setdefault((anchor, signature(kid)), []).append(kid)
    return found


def _class_of(node: Node) -> str | None:
    cls = (node.metadata or {}).get("class")
    return cls if isinstance(cls, str) else None


def _class_text(cls: str | None, other: str | None) -> str:
    """A class as a change line shows it: its last segment, unless that is all the other side
    shares with it (then in full)."""
    if cls is None:
        return "none"
    short = cls.rpartition(".")[2]
    if other is not None and other.rpartition(".")[2] == short:
        return shown(cls)
    return shown(short)


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    """The keys of ``first`` in order, then those only ``second`` has."""
    keys = list(first)
    seen = set(keys)
    keys.extend(key for key in second if key not in seen)
    return keys


def _kind_of(entry: Parameter) -> Any:
    value = entry.value
    if is_tensor(value):
        return ("tensor", value.dtype, tuple(value.shape), entry.learnable)
    return ("value", _value_key(value), entry.learnable)


def _value_key(value: Any) -> Any:
    """A hashable form of a value that tells kinds apart (``1``, ``1.0``, ``True``)."""
    if is_tensor(value):
        return ("tensor", value.dtype, tuple(value.shape))
    if isinstance(value, SizeExpr):
        return ("size", value.text)
    if isinstance(value, (list, tuple)):
        return ("list", *(_value_key(item) for item in value))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, repr(value))


def _value_json(value: Any) -> Any:
    """A value as the JSON form holds it."""
    if is_tensor(value):
        return _tensor_json(value)
    if isinstance(value, SizeExpr):
        return {"size": value.text}
    if isinstance(value, (list, tuple)):
        return [_value_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _json_or_none(value: Any) -> Any:
    if value is _ABSENT:
        return None
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return repr(value)


def _tensor_json(tensor: Tensor) -> dict[str, Any]:
    return {"dtype": tensor.dtype, "shape": list(tensor.shape)}


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _opt(value: Any) -> str:
    return "none" if value is None else shown(str(value))


def _canonical(value: Any) -> str:
    if value is _ABSENT:
        return "\x00absent"
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _same_json(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return _canonical(a) == _canonical(b) and type(a) is type(b)


def _meta_text(value: Any) -> str:
    if value is _ABSENT:
        return "(none)"
    text = describe_metadata_value(value)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def _list_text(items: Sequence[str]) -> str:
    return "(" + ", ".join(shown(item) for item in items) + ")"


def _ref_text(ref: Ref, scope: str | None) -> str:
    """A reference as a change line shows it: ``%x`` for an input of the scope, else the
    producer's id relative to the scope (the changed node's parent) and the output
    (``layers.1.y``, ``mlp.down_proj.y``)."""
    if ref.node == INPUT:
        return f"%{shown(ref.output)}"
    node = ref.node
    if scope is not None and node.startswith(scope + "."):
        node = node[len(scope) + 1 :]
    return f"{shown(node)}.{shown(ref.output)}"


def _fact_at(facts: list[ValueFact | None] | None, index: int) -> ValueFact | None:
    if facts is None or index >= len(facts):
        return None
    return facts[index]


def _fact_text(fact: ValueFact | None) -> str:
    return format_fact(fact) or "unknown"


def _fact_json(fact: ValueFact | None) -> Any:
    if fact is None:
        return None
    return {"dtype": fact.dtype, "shape": None if fact.shape is None else list(fact.shape)}


def _node_json(node: Node, count: int, values: int) -> dict[str, Any]:
    return {"op": node.op, "class": _class_of(node), "nodes": count, "values": values}


def _extent_text(count: int, values: int) -> str:
    parts = []
    if count > 1:
        parts.append(f"{count:,} nodes")
    if values:
        parts.append(f"{values:,} values")
    return f" ({', '.join(parts)})" if parts else ""


def _magnitude_text(magnitude: float | None) -> str:
    return "max |Δ| not finite" if magnitude is None else f"max |Δ| {magnitude:.3g}"


def _values_text(raw: _Raw, each: bool, *, measuring: bool) -> str:
    """The text of a ``values`` change, from the (merged) numbers: ``(by checksum)`` when they
    could not be measured, nothing more when they were not to be (``values=False``)."""
    # A constant's slot is called ``value``: "value values changed" says nothing more.
    name = "" if raw.slot in (None, "value") else shown(raw.slot or "") + " "
    where = " in each" if each else ""
    if not raw.measured:
        return f"{name}values changed{where}" + (" (by checksum)" if measuring else "")
    count = raw.changed_values
    total = math.prod(raw.old["shape"]) * len(raw.nodes) if isinstance(raw.old, dict) else None
    share = "" if count is None or total is None else f"{count:,} of {total:,}; "
    return f"{name}values changed{where} ({share}{_magnitude_text(raw.max_abs_diff)})"


# --- values ----------------------------------------------------------------------------------


class _ChecksumOnly:
    """The source of an external tensor whose weights file is not at hand: its checksum is
    known, its values are not."""

    __slots__ = ("checksum", "location", "path")

    def __init__(self, checksum: str, location: str, path: str) -> None:
        self.checksum = checksum
        self.location = location
        self.path = path

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        raise WeightsFileError(
            f"the weights file {self.path!r} is not at hand: only the tensor's checksum is known",
            location=self.location,
        )

    def describe(self) -> str:
        return f"external {self.path} (not at hand)"


def _recorded(tensor: Tensor) -> tuple[str, str, str] | None:
    """The checksum a document recorded for ``tensor`` and still undecoded: ``("raw", algorithm,
    digest)`` for an external tensor (of its bytes), ``("inline", algorithm, digest)`` for an
    inline one (of its dtype, shape and bytes); ``None`` when none is at hand."""
    source = tensor.source
    checksum = getattr(source, "checksum", None)
    if not isinstance(checksum, str) or source is None:
        return None
    algorithm, colon, digest = checksum.partition(":")
    if not colon:
        algorithm, digest = "xxh3-64", checksum
    kind = "inline" if isinstance(source, Base64Source) else "raw"
    return kind, algorithm, digest.lower()


def _raw_checksum(array: np.ndarray, algorithm: str) -> str:
    """The digest of an array's bytes alone, as an external tensor's checksum is written."""
    hasher = hashlib.sha256() if algorithm == "sha256" else xxhash.xxh3_64()
    hasher.update(cast(Any, _bytes(array)))  # a buffer: no copy
    return str(hasher.hexdigest()).lower()


def _bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and bool(np.array_equal(_bytes(x), _bytes(y)))


def _difference(x: np.ndarray, y: np.ndarray, *, cast: bool = False) -> tuple[float | None, int]:
    """The largest absolute difference between two arrays of one shape (``None`` when it is not
    finite: a NaN or an infinity on one side only), and how many elements differ (bit for bit,
    or, for arrays of two dtypes, as numbers)."""
    flat_x, flat_y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    complex_values = np.iscomplexobj(flat_x) or np.iscomplexobj(flat_y)
    wide = np.complex128 if complex_values else np.float64
    largest = 0.0
    changed = 0
    for start in range(0, flat_x.size, _CHUNK):
        part_x, part_y = flat_x[start : start + _CHUNK], flat_y[start : start + _CHUNK]
        wide_x, wide_y = part_x.astype(wide), part_y.astype(wide)
        both_nan = np.isnan(wide_x) & np.isnan(wide_y)
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(wide_x - wide_y)
        equal_numbers = (wide_x == wide_y) | both_nan
        gap[equal_numbers] = 0.0
        gap[np.isnan(gap)] = np.inf
        if gap.size:
            largest = max(largest, float(gap.max()))
        if cast or part_x.dtype != part_y.dtype:
            changed += int(np.count_nonzero(~equal_numbers))
        else:
            changed += _bitwise_changed(part_x, part_y)
    return (largest if math.isfinite(largest) else None), changed


def _bitwise_changed(x: np.ndarray, y: np.ndarray) -> int:
    size = x.dtype.itemsize
    if size in (1, 2, 4, 8):
        view = np.dtype(f"u{size}")
        return int(np.count_nonzero(np.ascontiguousarray(x).view(view) != np.ascontiguousarray(y).view(view)))
    rows_x = np.ascontiguousarray(x).view(np.uint8).reshape(-1, size)
    rows_y = np.ascontiguousarray(y).view(np.uint8).reshape(-1, size)
    return int(np.count_nonzero((rows_x != rows_y).any(axis=1)))


# --- the report ------------------------------------------------------------------------------


def render_diff(result: ModelDiff) -> str:
    """The report as text, ending with a newline: a header naming the two sides, notes, one
    line per change, and a summary line."""
    a_name = shown(result.a) if result.a is not None else "A"
    b_name = shown(result.b) if result.b is not None else "B"
    if result.a_format != result.b_format and result.a_format and result.b_format:
        a_name += f" (format {result.a_format})"
        b_name += f" (format {result.b_format})"
    lines = [f"A: {a_name}, B: {b_name}"]
    lines += [f"note: {note}" for note in result.notes]
    lines += _folded_lines(result.changes)
    lines.append(_summary_line(result))
    return "\n".join(lines) + "\n"


#: Kinds of change that read as one edit of a node when they come together: a setting and the
#: shape of the tensor it sizes (``out_features`` and ``weight``), a learnable flag.
_FOLDED = frozenset({"setting", "tensor", "learnable"})


def _folded_lines(changes: Sequence[Change]) -> list[str]:
    """One line per change, but for the settings, tensor types and flags of one subtree, which
    are one line, in order (``out_features: 64 → 128; weight: f32[64, 32] → f32[128, 32]``).
    The JSON form keeps each change apart."""
    lines: list[str] = []
    group: list[Change] = []

    def flush() -> None:
        if not group:
            return
        if len(group) == 1:
            lines.append(group[0].line)
        else:
            each = all(change.text.endswith(_IN_EACH) for change in group)
            texts = [change.text.removesuffix(_IN_EACH) if each else change.text for change in group]
            first = group[0]
            subtree = first.subtree if first.subtree is not None else "(document)"
            lines.append(f"{first.mark} {subtree}  {'; '.join(texts)}{_IN_EACH if each else ''}")
        group.clear()

    for change in changes:
        if change.kind in _FOLDED and (not group or change.subtree == group[0].subtree):
            group.append(change)
            continue
        flush()
        if change.kind in _FOLDED:
            group.append(change)
        else:
            lines.append(change.line)
    flush()
    return lines


_IN_EACH = " in each"


_SUMMARY_WORDS = {
    "added": "added",
    "removed": "removed",
    "renamed": "renamed",
    "moved": "moved",
    "values": "with new values",
}


def _summary_line(result: ModelDiff) -> str:
    if result.equal:
        return "no differences"
    counts = result.counts()
    parts = [f"{counts[kind]} {_SUMMARY_WORDS[kind]}" for kind in _SUMMARY_WORDS if kind in counts]
    other = sum(count for kind, count in counts.items() if kind not in _SUMMARY_WORDS)
    if other:
        parts.append(f"{other} changed")
    total = len(result.changes)
    return f"{total} difference{'s' if total != 1 else ''}: {', '.join(parts)}"


# --- reading documents for a diff -------------------------------------------------------------


def load_for_diff(path: str | Path) -> Model:
    """:func:`trama.load` for a diff: the structure is read, tensors stay in their files until
    compared, and external weights files that are missing (the old side of a git diff, a
    temporary copy of the document alone) leave their tensors known by checksum only, which
    :func:`diff` notes."""
    from trama.format._serialization import load

    file = Path(path)
    try:
        return load(file, lazy_inline=True)
    except MissingWeightsFileError:
        pass
    return _load_without_missing_weights(file)


def _load_without_missing_weights(file: Path) -> Model:
    """The document at ``file`` read as :func:`trama.load` reads it, except that a weights file
    it names and that does not exist gives checksum-only tensors instead of an error."""
    from trama.format._jsontext import gc_paused, lift_text, parse_json
    from trama.format._memory import raising_out_of_memory
    from trama.format._serialization import _read_document
    from trama.format._stack import in_nested_room
    from trama.format._typed import decode_typed
    from trama.format._typed_nested import decode_nested
    from trama.format._validation import validate as validate_model

    data, _identity = _read_document(file)
    missing: list[str] = []
    inner = make_resolver(file.parent)

    def resolve(reference: Any, dtype: str, shape: tuple[int, ...], location: str) -> Any:
        check_reference(reference, f"{location}/external")
        path = reference["path"]
        if path not in missing:
            try:
                return inner(reference, dtype, shape, location)
            except MissingWeightsFileError:
                missing.append(path)
        return _ChecksumOnly(reference["checksum"], f"{location}/external", path)

    @raising_out_of_memory("read the document")
    @in_nested_room
    def decode() -> Model:
        from trama.format._codec import decode_document

        with gc_paused():
            lifted = lift_text(data, None, decode=False, hashers=checksum_hasher)
            typed = decode_typed(lifted, resolve)
            if typed is None:
                nested = decode_nested(lifted, resolve)
                typed = None if nested is None else (nested, True)
            if typed is None:
                parsed = parse_json(lifted)
                model, sound = decode_document(parsed.data, resolve_external=resolve, blobs=parsed.blobs), False
            else:
                model, sound = typed
            if not sound:
                try:
                    validate_model(model, None)
                except TramaError as error:
                    if model.source_places is not None:
                        for each in error.all_errors:
                            model.source_places.locate(each)
                    raise
        return model

    return decode()


# --- the command ------------------------------------------------------------------------------

EXIT_SAME = 0
EXIT_DIFFERENT = 1
EXIT_TROUBLE = 2


def diff_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``trama diff``."""
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="the two documents to compare, A then B (with --git, the 7 arguments git passes a diff driver)",
    )
    parser.add_argument("--json", action="store_true", help="print the differences as one JSON object (shape below)")
    parser.add_argument(
        "--no-values",
        dest="values",
        action="store_false",
        help="list the tensors whose values changed without reading both to measure by how much (checksums "
        "recorded in the documents are compared without reading the tensors at all)",
    )
    parser.add_argument(
        "--git",
        action="store_true",
        help="be git's diff driver: take PATH OLD-FILE OLD-HEX OLD-MODE NEW-FILE NEW-HEX NEW-MODE [NEW-PATH "
        "INFO], and exit 0 whether or not the documents differ (git stops at any other status)",
    )


def run_diff(args: argparse.Namespace) -> int:
    """``trama diff``: 0 when the documents are the same model, 1 when they differ, 2 on trouble
    (as ``diff`` and ``cmp``); with ``--git`` (or git's 7 or 9 arguments), 0 unless trouble."""
    files: list[str] = list(args.files)
    git = bool(args.git) or (len(files) in (7, 9) and _looks_like_git(files))
    if git:
        if len(files) == 1:  # git's form for an unmerged path
            print(f"{shown(files[0])}: unmerged, not compared")
            return EXIT_SAME
        if len(files) not in (7, 9):
            print(f"trama diff: --git takes the 7 (or 9) arguments git passes, got {len(files)}", file=sys.stderr)
            return EXIT_TROUBLE
        path, old_file, old_hex, _old_mode, new_file, new_hex, _new_mode = files[:7]
        new_path = files[7] if len(files) == 9 else path
        sides = [(old_file, f"a/{path}", _hex_text(old_hex)), (new_file, f"b/{new_path}", _hex_text(new_hex))]
    elif len(files) != 2:
        print(f"trama diff: give two documents, A and B (got {len(files)} arguments)", file=sys.stderr)
        return EXIT_TROUBLE
    else:
        sides = [(file, "<stdin>" if file == "-" else file, None) for file in files]
        if files.count("-") > 1:
            print("trama diff: - (standard input) can be given only once", file=sys.stderr)
            return EXIT_TROUBLE
    models: list[Model] = []
    for file, name, _version in sides:
        try:
            models.append(_read_side(file))
        except (TramaError, OSError) as exc:
            message = " ".join(str(exc).split())
            print(f"{shown(name)}: {shown(message)}", file=sys.stderr)
            return EXIT_TROUBLE
    labels = [name + (f" ({version})" if version else "") for _file, name, version in sides]
    result = diff(models[0], models[1], values=args.values, names=(labels[0], labels[1]))
    if args.json:
        sys.stdout.write(_cli_json.dumps(result.to_json()))
    else:
        sys.stdout.write(render_diff(result))
    if git:
        return EXIT_SAME
    return EXIT_SAME if result.equal else EXIT_DIFFERENT


def _read_side(file: str) -> Model:
    """One side of a diff: a document file, ``-`` for standard input, or ``/dev/null`` (git's
    side of a file added or deleted) for an empty model."""
    if file == "/dev/null":
        return Model(inputs=[], outputs=[], nodes=[], parameters={})
    if file == "-":
        from trama.tools.cli import _STDIN, _load

        return _load(_STDIN, lazy_inline=True)
    return load_for_diff(file)


def _looks_like_git(files: list[str]) -> bool:
    """Whether 7 or 9 arguments are git's: modes (or ``.``) in the 4th and 7th place."""

    def mode(text: str) -> bool:
        return text == "." or (len(text) == 6 and text.isdigit())

    return mode(files[3]) and mode(files[6])


def _hex_text(hex_text: str) -> str | None:
    if hex_text == ".":
        return "none"
    if set(hex_text) == {"0"}:
        return "working tree"
    return hex_text[:10]
