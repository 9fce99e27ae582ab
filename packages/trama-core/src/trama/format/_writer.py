"""The text of a model's document, written from the model: byte for byte what
``format_json(encode_document(model, ...))`` writes, in a fraction of its time on large graphs.

Why: building a document's data (a dict per node, per wire, per slot) and then laying it out,
which looks at every container to decide whether it fits on a line, took about 0.8 s for a
100,000-node graph, several times trama 0.2.0's whole dump. Most of a document is its nodes, and
the layout of a node is known before anything is measured:

* a node that is not a call never fits on a line (the keys of its seven members alone are
  wider), so it is written one member a line, at the indentation a node always has in a
  document written one member a line: the document at 0, its ``"nodes"`` at 2, each node at 4;
* its members are names, ``null``, and small containers of names (wires, outputs, slots), and
  every name of a valid model is a plain ASCII identifier (:mod:`trama.format._names`): its
  JSON text is itself in quotes, and the width of a text made of names is its length.

So such a node's text is one join of its names with fixed pieces, and a member's one-line text
a join of its names with fixed pieces too. The pieces are the layout's own (the prefixes and
templates of :class:`~trama.format._layout.ObjectShape`, :meth:`Layout.array_lines`, the
separators) and so are the limits a member is measured against (:data:`LINE_WIDTH`,
:data:`MAX_ONE_LINE_ITEMS`): the layout is described once, in :mod:`trama.format._layout`.
Everything else goes through the layout itself: a node's metadata, a member that is neither one
line nor one line per item, every calling node, and the rest of the document (its parameter
table included, with the ``width`` the writer gives).

A name that is not an identifier (a quote, a control character) would be written unescaped, so
every node's names are proven plain before its text is made: the model is valid, or is being
proven valid as it is written. ``dump`` and ``dumps`` do the latter, with a
:class:`~trama.format._validation.StructureProof`: validating a 100,000-node graph in a pass of
its own cost about as much as writing its text, and most of what the rules look at (ids, names,
wires) the writer reads anyway. So :meth:`_NodeWriter.texts` proves each node's rules (those of
:func:`~trama.format._validation.node_errors`) before writing it, most nodes of a large graph in
a few tests, and the other sections of the rules run once every node is declared, before the
parameter table is written. The proof only ever accepts: wherever it is not sure, ``validate``
runs and raises the model's error, before the node is written. ``tests/test_writer.py`` compares
the output with the layout's on real and generated models; ``tests/test_dump_proof.py`` holds
the proof to ``validate``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from trama.format._codec import encode_document, encode_node
from trama.format._layout import (
    ITEM_SEPARATOR,
    KEY_SEPARATOR,
    LINE_WIDTH,
    MAX_ONE_LINE_ITEMS,
    Layout,
    ObjectShape,
    format_json,
    interleave,
)
from trama.format._model import INPUT, Model, Node, Ref
from trama.format._names import NAME, is_op_name
from trama.format._tensor import Tensor
from trama.format._validation import StructureProof

__all__ = ["NODES_PER_PIECE", "model_pieces", "model_text"]

#: The members of a node that is not a call, in the order ``encode_node`` writes them; a node
#: with metadata has :data:`METADATA` last.
MEMBERS: Final = ("id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings")
METADATA: Final = "metadata"
#: The keys of a reference (``{"node": ..., "output": ...}``) and of a slot (``{"name": ...}``).
REF_KEYS: Final = ("node", "output")
SLOT_KEYS: Final = ("name",)

#: Where a node's text starts (the document at 0, its "nodes" at 2), its members', and those of
#: the items of a member written one item a line.
_NODE_INDENT: Final = 4
_MEMBER_INDENT: Final = _NODE_INDENT + 2
_ITEM_INDENT: Final = _MEMBER_INDENT + 2
#: The widest one-line text a member may have, and an item of a member written one item a line.
_MEMBER_ROOM: Final = LINE_WIDTH - _MEMBER_INDENT
_ITEM_ROOM: Final = LINE_WIDTH - _ITEM_INDENT
#: The JSON text of a plain name is the name in quotes.
_QUOTE: Final = '"'
_NAME: Final = _QUOTE + "%s" + _QUOTE


def _quoted(shape: ObjectShape) -> str:
    """The one-line text of a dict of these keys whose values are plain names, as a ``%``
    template of the names (the keys here hold no ``%``)."""
    return shape.template % ((_NAME,) * len(shape.prefixes))


#: One-line texts as ``%`` templates of names: a reference and a slot.
_REF: Final = _quoted(ObjectShape(REF_KEYS))
_SLOT: Final = _quoted(ObjectShape(SLOT_KEYS))
#: A dict of one reference, and a list of one name, as the pieces around their names.
_ONE_REF: Final = tuple(("{" + _NAME + KEY_SEPARATOR + _REF + "}").split("%s"))
_ONE_NAME: Final = tuple(("[" + _NAME + "]").split("%s"))


def _node_pieces() -> tuple[tuple[str, ...], str, str]:
    """The text of a node around its members' texts, from the layout's prefixes for a dict of
    :data:`MEMBERS` written one item a line at :data:`_NODE_INDENT`.

    Returns ``(prefixes, metadata, closing)``: ``prefixes`` has what precedes the id, the parent
    (and what follows it up to the op) for a node with a parent and for a top-level node, the
    op, inputs, outputs, parameters and output bindings, with the quotes around the id, the
    parent and the op folded in; ``metadata`` precedes the metadata of a node that has some."""
    prefixes, closing = ObjectShape(MEMBERS).written(_NODE_INDENT)
    with_metadata, _ = ObjectShape((*MEMBERS, METADATA)).written(_NODE_INDENT)
    assert with_metadata[: len(MEMBERS)] == prefixes
    id_, parent, op, inputs, outputs, parameters, bindings = prefixes
    return (
        (
            id_ + _QUOTE,
            _QUOTE + parent + _QUOTE,  # then the parent's id
            _QUOTE + op + _QUOTE,
            _QUOTE + parent + "null" + op + _QUOTE,  # a top-level node's: then the op
            _QUOTE + inputs,
            outputs,
            parameters,
            bindings,
        ),
        with_metadata[len(MEMBERS)],
        closing,
    )


_PIECES, _METADATA_PREFIX, _CLOSING = _node_pieces()


def _layout_known() -> bool:
    """Whether the layout's limits give nodes the layout this writer writes: no node that is
    not a call fits on one line at its indentation (the narrowest one, one-character id and op,
    no parent, empty containers, is too wide), so every such node is written one member a line;
    and a reference or a slot has few enough members for one line. The limits decide it, so it
    is checked here, and where it does not hold the layout writes everything."""
    narrowest = ObjectShape(MEMBERS).template % ('"a"', "null", '"A"', "{}", "[]", "{}", "null")
    never_fits = len(narrowest) + _NODE_INDENT > LINE_WIDTH or len(MEMBERS) > MAX_ONE_LINE_ITEMS
    return never_fits and max(len(REF_KEYS), len(SLOT_KEYS)) <= MAX_ONE_LINE_ITEMS


_LAYOUT_KNOWN: Final = _layout_known()


#: How many nodes' text makes one piece of :func:`model_pieces`: pieces of about a megabyte, so
#: that a large document is never whole in memory (each piece's memory is reused for the next).
NODES_PER_PIECE: Final = 4096


def model_pieces(
    model: Model,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str] | None = None,
    *,
    width: Callable[[str], int] = len,
    proof: StructureProof | None = None,
) -> Iterator[str]:
    """The text of :func:`model_text` in pieces, in order: one per member of the document and
    per :data:`NODES_PER_PIECE` nodes, so that a writer can write each piece as it comes. A
    piece never splits a JSON string; the document's data (``encode_document``, which calls
    ``tensor`` and ``checksum``) is made before the first piece is given.

    With a ``proof`` (:class:`~trama.format._validation.StructureProof`), the model is proven
    valid as its text is made: each node's rules before its text, the rest (``finish``) right
    after the nodes, before the parameter table and its tensors. What comes before that is the
    layout's text of the model's own members, which the proof checked first, and the proven
    nodes. Where the layout writes every node, the model is validated the careful way first."""
    if not _LAYOUT_KNOWN or not any(node.calls is None for node in model.nodes):
        if proof is not None:
            proof.finish()  # no node was proven here: it validates
        yield format_json(encode_document(model, tensor, checksum), width=width)
        return
    layout = Layout(width)
    data = encode_document(model, tensor, checksum, nodes=_NODES)
    # A node that is not a call is too wide for a line, so are "nodes" and the document: both
    # are written one item a line, the document's other members by the layout.
    prefixes, closing = layout.shape(tuple(data)).written(0)
    for prefix, value in zip(prefixes, data.values(), strict=True):
        if value is _NODES:
            yield prefix
            yield from _NodeWriter(layout, proof).pieces(model.nodes)
            if proof is not None:
                proof.finish()  # every node is declared: the rest, before the table is written
        else:
            yield prefix + layout.text(value, 2)
    yield closing


def model_text(
    model: Model,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str] | None = None,
    *,
    width: Callable[[str], int] = len,
    proof: StructureProof | None = None,
) -> str:
    """``format_json(encode_document(model, tensor, checksum), width=width)``, of a valid model
    (or one being proven valid by ``proof``, as for :func:`model_pieces`).

    ``width`` is as for :func:`~trama.format._layout.format_json`; it must measure a text with
    no backslash by its length (as the width ``dump`` uses does: what it measures apart is the
    escaped ``\\u0000`` of its placeholders), since nodes' names are measured by their length.
    """
    return "".join(model_pieces(model, tensor, checksum, width=width, proof=proof))


#: What stands for the nodes in the document's data while their text is written apart.
_NODES: Final = object()


class _Unproven(Exception):
    """Raised inside :meth:`_NodeWriter.texts` where a node's rules are not proven."""


class _NodeWriter:
    """The text of the ``"nodes"`` array, written one item a line at indentation 2, proving
    the nodes' structural rules as it goes when given a :class:`StructureProof`."""

    __slots__ = ("layout", "proof")

    def __init__(self, layout: Layout, proof: StructureProof | None) -> None:
        self.layout = layout
        self.proof = proof

    def pieces(self, nodes: list[Node]) -> Iterator[str]:
        """The array's text: ``[``, the nodes' texts and ``]``, in pieces of
        :data:`NODES_PER_PIECE` nodes."""
        opening, separator, closing = self.layout.array_lines(2)
        last = len(nodes) - 1
        for start in range(0, len(nodes), NODES_PER_PIECE):
            end = start + NODES_PER_PIECE
            text = separator.join(self.texts(nodes[start:end], start))
            yield (opening if start == 0 else separator) + text + (closing if end > last else "")

    def texts(self, nodes: list[Node], start: int) -> list[str]:
        """Each node's text, at indentation 4; ``nodes`` are the model's from position ``start``.

        With a proof not yet settled, each node is proven before its text is made:

        * most nodes of a large graph in a few tests of what the text needs anyway: a sibling of
          the node before (so its parent was proven with the first of them), of one input that
          is an output of the node before (in the same scope, since every proven node leaves
          ``scope_head`` at its own id's head) or an input of the scope, of one output, and no
          call, slot or binding, whose names were all seen valid before;
        * any other node by :func:`~trama.format._validation.node_errors`' rules written out
          again, the passing case only (that function is their definition: a rule changed there
          is changed here, and ``tests/test_dump_proof.py`` holds the two together), and by
          what this writer writes unescaped that is proven only after the pass: a slot names
          an entry of the table (whose names were proven dotted), a binding a node or ``%input``
          and a plain output name.

        Where a node is not proven, :meth:`StructureProof.settle` raises the model's error
        before the node is written (or finds nothing wrong: then the rest is written
        unproven). An inline test per node, rather than a call of a function shared with
        ``node_errors``: a call per node would cost about what the separate pass cost."""
        texts: list[str] = []
        append = texts.append
        (
            id_prefix,
            parent_prefix,
            op_prefix,
            top_prefix,
            inputs_prefix,
            outputs_prefix,
            slots_prefix,
            bindings_prefix,
        ) = _PIECES
        ref_a, ref_b, ref_c, ref_d = _ONE_REF
        name_a, name_b = _ONE_NAME
        lay = self.layout.text
        proof = self.proof
        proving = proof is not None and not proof.settled
        if proving:  # the proof's state, in locals for the loop
            assert proof is not None
            declared = proof.declared
            index, parents, every = declared.index, declared.parents, declared.nodes
            good_names, good_ops, table = proof.good_names, proof.good_ops, proof.table
            calling, composites, slotted = proof.calling, proof.composites, proof.slotted
            model_inputs, match_name = proof.model_inputs, NAME.match
            last_parent, scope_inputs = proof.last_parent, proof.scope_inputs
            scope_head = last_parent or ""  # the id head of the nodes of the current scope
            last_id, last_outputs = proof.last_node
        for i, node in enumerate(nodes, start):
            node_id = node.id
            op = node.op
            inputs = node.inputs
            outputs = node.outputs
            calls = node.calls
            slots = node.parameters
            bindings = node.output_bindings
            head, dot, _ = node_id.rpartition(".")
            single = len(inputs) == 1
            if single:
                [(port, (source, output))] = inputs.items()
            if proving:
                # The common node, proven in a few tests: a sibling of the node before (whose
                # scope was proven), one input from the node before or the scope, one output.
                if not (
                    single
                    and head == scope_head
                    and op in good_ops
                    and port in good_names
                    and ((source == last_id and output in last_outputs) or (source == INPUT and output in scope_inputs))
                    and len(outputs) == 1
                    and outputs[0] in good_names
                    and calls is None
                    and not slots
                    and bindings is None
                ):
                    # The rest: node_errors' rules, in its order, the passing case only.
                    proven = False
                    try:
                        if op not in good_ops:
                            if not is_op_name(op):
                                raise _Unproven
                            good_ops.add(op)
                        if not dot:
                            last_parent = None
                            scope_inputs = model_inputs
                        elif head != last_parent:  # a parent declared before, a composite
                            j = index.get(head, i)
                            if j >= i or every[j].output_bindings is None:
                                raise _Unproven
                            last_parent = head
                            scope_inputs = every[j].inputs
                        scope_head = head
                        for name, (ref_node, ref_output) in inputs.items():
                            if name not in good_names:
                                if not match_name(name):
                                    raise _Unproven
                                good_names.add(name)
                            if ref_node == INPUT:
                                if ref_output not in scope_inputs:
                                    raise _Unproven
                            else:  # an output of a node declared before, in the same scope
                                j = index.get(ref_node, i)
                                if j >= i or parents[j] != last_parent or ref_output not in every[j].outputs:
                                    raise _Unproven
                        if not good_names.issuperset(outputs):
                            for name in outputs:
                                if not match_name(name):
                                    raise _Unproven
                                good_names.add(name)
                        if len(outputs) > 1 and len(set(outputs)) != len(outputs):
                            raise _Unproven
                        if calls is not None:
                            calling.append(i)
                        if slots:
                            slotted.append(i)
                        if bindings is not None:
                            composites.append(i)
                        if calls is None:  # written unescaped, proven only at the end: plain names
                            if slots and not all(map(table.__contains__, slots.values())):
                                raise _Unproven
                            for ref_node, ref_output in bindings.values() if bindings else ():
                                if ref_node != INPUT and ref_node not in index:
                                    raise _Unproven
                                if ref_output not in good_names:
                                    if not match_name(ref_output):
                                        raise _Unproven
                                    good_names.add(ref_output)
                        proven = True
                    except _Unproven:
                        pass
                    if not proven:
                        assert proof is not None
                        proof.settle()  # raises the model's error (outside the handler: no chain)
                        proving = False
                parents[i] = last_parent
                last_id, last_outputs = node_id, outputs
            if calls is not None:  # may fit on a line: the layout decides
                append(lay(encode_node(node), _NODE_INDENT))
                continue
            if single:
                inputs_text = "".join((ref_a, port, ref_b, source, ref_c, output, ref_d))
                if len(inputs_text) > _MEMBER_ROOM:
                    inputs_text = self.refs(inputs, node, "inputs")
            else:
                inputs_text = self.refs(inputs, node, "inputs")
            if len(outputs) == 1:
                outputs_text = name_a + outputs[0] + name_b
                if len(outputs_text) > _MEMBER_ROOM:
                    outputs_text = self.names(outputs)
            else:
                outputs_text = self.names(outputs)
            metadata = node.metadata
            if dot:
                before_head, after_head = parent_prefix, op_prefix
            else:  # head is ""
                before_head, after_head = top_prefix, ""
            append(
                "".join(
                    (
                        id_prefix,
                        node_id,
                        before_head,
                        head,
                        after_head,
                        op,
                        inputs_prefix,
                        inputs_text,
                        outputs_prefix,
                        outputs_text,
                        slots_prefix,
                        self.slots(slots, node) if slots else "{}",
                        bindings_prefix,
                        "null" if bindings is None else self.refs(bindings, node, "output_bindings"),
                        _CLOSING if metadata is None else _METADATA_PREFIX + lay(metadata, _MEMBER_INDENT) + _CLOSING,
                    )
                )
            )
        if proving:
            assert proof is not None
            proof.last_parent, proof.scope_inputs = last_parent, scope_inputs
            proof.last_node = last_id, last_outputs
            proof.reached = start + len(nodes)
        return texts

    def refs(self, refs: Mapping[str, Ref], node: Node, member: str) -> str:
        """A node's inputs or output bindings."""
        if not refs:
            return "{}"
        return self.items(tuple(refs), [_REF % ref for ref in refs.values()], node, member)

    def slots(self, slots: Mapping[str, str], node: Node) -> str:
        """A node's parameter slots (not empty)."""
        return self.items(tuple(slots), [_SLOT % name for name in slots.values()], node, "parameters")

    def items(self, keys: tuple[str, ...], texts: list[str], node: Node, member: str) -> str:
        """A member that is a dict of these keys and whose items' one-line texts are ``texts``:
        on one line if it fits, else one item a line if each item fits on its line (a
        reference or a slot has few enough members for one line, see :func:`_layout_known`),
        else as the layout writes it."""
        shape = self.layout.shape(keys)
        if len(keys) <= MAX_ONE_LINE_ITEMS and shape.fixed + sum(map(len, texts)) <= _MEMBER_ROOM:
            return shape.template % tuple(texts)
        if max(map(len, texts)) <= _ITEM_ROOM:
            prefixes, closing = shape.written(_MEMBER_INDENT)
            return interleave(prefixes, texts, closing)
        return self.layout.text(encode_node(node)[member], _MEMBER_INDENT)

    def names(self, names: list[str]) -> str:
        """A node's outputs: a list of names, on one line if it fits, else one a line (a
        string is never broken)."""
        if not names:
            return "[]"
        texts = [_NAME % name for name in names]
        one_line = "[" + ITEM_SEPARATOR.join(texts) + "]"
        if len(names) <= MAX_ONE_LINE_ITEMS and len(one_line) <= _MEMBER_ROOM:
            return one_line
        opening, separator, closing = self.layout.array_lines(_MEMBER_INDENT)
        return opening + separator.join(texts) + closing
