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

The model must be valid, as ``dump`` and ``dumps`` make sure first: a name that is not an
identifier (a quote, a control character) would be written unescaped. ``tests/test_writer.py``
compares the output with the layout's on real and generated models.
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
from trama.format._model import Model, Node, Ref
from trama.format._tensor import Tensor

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
) -> Iterator[str]:
    """The text of :func:`model_text` in pieces, in order: one per member of the document and
    per :data:`NODES_PER_PIECE` nodes, so that a writer can write each piece as it comes. A
    piece never splits a JSON string; the document's data (``encode_document``, which calls
    ``tensor`` and ``checksum``) is made before the first piece is given."""
    if not _LAYOUT_KNOWN or not any(node.calls is None for node in model.nodes):
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
            yield from _NodeWriter(layout).pieces(model.nodes)
        else:
            yield prefix + layout.text(value, 2)
    yield closing


def model_text(
    model: Model,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str] | None = None,
    *,
    width: Callable[[str], int] = len,
) -> str:
    """``format_json(encode_document(model, tensor, checksum), width=width)``, of a valid model.

    ``width`` is as for :func:`~trama.format._layout.format_json`; it must measure a text with
    no backslash by its length (as the width ``dump`` uses does: what it measures apart is the
    escaped ``\\u0000`` of its placeholders), since nodes' names are measured by their length.
    """
    return "".join(model_pieces(model, tensor, checksum, width=width))


#: What stands for the nodes in the document's data while their text is written apart.
_NODES: Final = object()


class _NodeWriter:
    """The text of the ``"nodes"`` array, written one item a line at indentation 2."""

    __slots__ = ("layout",)

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def pieces(self, nodes: list[Node]) -> Iterator[str]:
        """The array's text: ``[``, the nodes' texts and ``]``, in pieces of
        :data:`NODES_PER_PIECE` nodes."""
        opening, separator, closing = self.layout.array_lines(2)
        last = len(nodes) - 1
        for start in range(0, len(nodes), NODES_PER_PIECE):
            end = start + NODES_PER_PIECE
            text = separator.join(self.texts(nodes[start:end]))
            yield (opening if start == 0 else separator) + text + (closing if end > last else "")

    def texts(self, nodes: list[Node]) -> list[str]:
        """Each node's text, at indentation 4."""
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
        for node in nodes:
            if node.calls is not None:  # may fit on a line: the layout decides
                append(lay(encode_node(node), _NODE_INDENT))
                continue
            node_id = node.id
            inputs = node.inputs
            if len(inputs) == 1:
                [(port, (source, output))] = inputs.items()
                inputs_text = "".join((ref_a, port, ref_b, source, ref_c, output, ref_d))
                if len(inputs_text) > _MEMBER_ROOM:
                    inputs_text = self.refs(inputs, node, "inputs")
            else:
                inputs_text = self.refs(inputs, node, "inputs")
            outputs = node.outputs
            if len(outputs) == 1:
                outputs_text = name_a + outputs[0] + name_b
                if len(outputs_text) > _MEMBER_ROOM:
                    outputs_text = self.names(outputs)
            else:
                outputs_text = self.names(outputs)
            slots = node.parameters
            bindings = node.output_bindings
            metadata = node.metadata
            head, dot, _ = node_id.rpartition(".")
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
                        node.op,
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
