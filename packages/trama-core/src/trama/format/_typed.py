"""The fast way in: a document of the current format decoded straight into typed records.

Reading a large graph the careful way (:func:`~trama.format._jsontext.parse_json`, then
:func:`~trama.format._codec.decode_document`, then
:func:`~trama.format._validation.structural_errors`) builds every JSON object as a dict through
a Python hook that watches for repeated keys, walks those dicts to build the model, and walks the
model again to check it: about four times what the standard library's ``json.loads`` alone
takes. Here msgspec's compiled decoder parses the text and checks every field's JSON type in one
pass, into records shaped like the format's objects (:class:`_Document`, :class:`_Node`,
:class:`_Ref`); one Python loop then builds the nodes and checks the per-node rules as it goes.

**One source of truth.** This path only ever *accepts*. It answers ``None`` for anything it is
not certain the careful path would read to the same :class:`~trama.Model` (an older or newer
format version, any field the careful path would refuse, an escape it cannot account for), and
the careful path then reads the document from the start: every error message and location a
user sees comes from it. The per-node structural rules are proven here only for the passing
case; a document that breaks one is still read, and flagged unchecked, so that
:func:`~trama.format._validation.structural_errors` reports what is wrong. The differential
tests (``tests/test_typed_reader.py``) read fuzzed and real documents both ways.

**Repeated keys.** msgspec, like most parsers, keeps the last of two equal keys silently; the
format requires refusing them. In JSON text every member of an object has exactly one colon
outside strings, and nothing else outside strings is a colon. So the text has as many colons as
it has members plus the colons inside its strings. What was decoded is counted the same way:
the members of the typed records (a node's fields that were present, its wires, slots and
bindings) while the nodes are built, and the free-form parts (metadata, the parameter table,
facts, opsets, a call's target) by encoding them again, which gives every member that survived
once and every string with its colons as they were (msgspec writes a colon as itself). The
strings of the typed records (ids, names) are not counted, so a colon in one of them makes the
counts differ too. Every term counts something that is in the text, so the two counts are equal
exactly when no member was lost to a repeated key and no typed string holds a colon (a valid
document's names never do): provided no string spelled a colon as the escape ``\\u003a``, which
the text is searched for first (a document that has one is read the careful way). Counting the
records as they are built costs about a quarter of encoding them all again.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from trama.errors import TramaError
from trama.format._codec import NESTED_SINCE, ExternalResolver, _Decoder
from trama.format._jsontext import LiftedText
from trama.format._memory import allocations_may_fail, can_reserve
from trama.format._model import INPUT, Model, Node, Ref
from trama.format._names import NAME, is_op_name
from trama.format._validation import Declared, all_dotted, binding_errors, call_errors, symbol_errors, table_errors
from trama.version import FORMAT_MAJOR

__all__ = ["decode_typed"]


class _Ref(Struct, forbid_unknown_fields=True, gc=False):
    node: str
    output: str


class _Slot(Struct, forbid_unknown_fields=True, gc=False):
    name: str


class _Node(Struct, forbid_unknown_fields=True, gc=False):
    """A node object. Members the format lets a node leave out default to ``UNSET`` (never
    to a value), so that encoding the record again writes exactly the members the text had."""

    id: str
    parent: str | None
    op: str
    inputs: dict[str, _Ref]
    outputs: list[str]
    parameters: dict[str, _Slot] | UnsetType = UNSET
    output_bindings: dict[str, _Ref] | UnsetType | None = UNSET
    metadata: Any = UNSET
    calls: Any = UNSET


class _Document(Struct, forbid_unknown_fields=True, gc=False):
    """The top-level object. Free-form parts (metadata, the parameter table, facts) are left as
    plain JSON values, for the careful decoder's methods to read as they always do."""

    format_version: str
    inputs: list[str]
    outputs: list[_Ref]
    nodes: list[_Node]
    parameters: dict[str, Any]
    metadata: Any = UNSET
    opsets: Any = UNSET
    input_facts: Any = UNSET
    output_facts: Any = UNSET
    symbols: Any = UNSET


_DECODER = msgspec.json.Decoder(_Document)
_ENCODER = msgspec.json.Encoder()
#: The most memory decoding may take per byte of text, where an allocation may fail (see
#: :mod:`trama.format._memory`): a typical graph takes about 4, and the worst text measured
#: (empty lists nested in lists) 47.
MEMORY_PER_BYTE = 64
_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
#: A colon spelled as an escape: the text's colons would no longer count its members.
_ESCAPED_COLONS = (b"\\u003a", b"\\u003A")
_new_ref = tuple.__new__


def decode_typed(lifted: LiftedText, resolver: ExternalResolver | None) -> tuple[Model, bool] | None:
    """The model of a current-format document and whether its structure was proven sound, or
    ``None`` where the careful path must read it (see the module's notes).

    A ``False`` second item means only that some structural rule was not proven here:
    :func:`~trama.format._validation.structural_errors` then decides.
    """
    text = lifted.text
    if not isinstance(text, (bytes, bytearray)) or (
        b"\\u003" in text and any(escape in text for escape in _ESCAPED_COLONS)
    ):
        return None
    # msgspec crashes (SIGSEGV) where a string's allocation fails: it is given only a text whose
    # decoding can have all the memory it may take, and where no allocation may fail, one whose
    # largest string can be allocated.
    if not can_reserve(len(text) * (MEMORY_PER_BYTE if allocations_may_fail() else 1)):
        return None
    try:
        document = _DECODER.decode(text)
    except (msgspec.MsgspecError, RecursionError, ValueError):
        return None
    version = _VERSION.match(document.format_version)
    if version is None or int(version[1]) != FORMAT_MAJOR or (int(version[1]), int(version[2])) >= NESTED_SINCE:
        return None  # older formats are upgraded first, 1.3 and later are nested (trama.format._typed_nested)
    minor = int(version[2])
    decoder = _Decoder(
        resolver,
        True,
        lifted.blobs,
        None if minor >= 1 else document.format_version,
        None if minor >= 2 else document.format_version,
    )
    try:
        return _build(document, decoder, text.count(b":"))
    except (_Unread, TramaError):
        return None


def _build(document: _Document, decoder: _Decoder, colons: int) -> tuple[Model, bool]:
    """Build the model, checking as :class:`~trama.format._codec._Decoder` does and proving the
    per-node rules of :func:`~trama.format._validation.node_errors` on the way; ``colons``, the
    text's, must be the count of what was decoded (see the module's notes on repeated keys)."""
    buffer = bytearray()

    def _colons(value: Any) -> int:
        """The colons of a free-form value's JSON text: its members, and those in its strings.
        Encoded into one reused buffer: msgspec's ``encode`` crashes where growing its buffer
        fails, ``encode_into`` raises ``MemoryError``."""
        _ENCODER.encode_into(value, buffer)
        return buffer.count(b":")

    # The document's five required members, its outputs' two each, its free-form parts.
    members = 5 + 2 * len(document.outputs) + _colons(document.parameters)
    for part in (document.metadata, document.opsets, document.input_facts, document.output_facts, document.symbols):
        if part is not UNSET:
            members += 1 + _colons(part)
    inputs = document.inputs
    model_inputs = set(inputs)
    sound = len(model_inputs) == len(inputs) and all(NAME.match(name) for name in inputs)
    good_ops: set[str] = decoder.good_ops
    good_names: set[str] = set()
    calling: list[int] = []  # indexes of calling nodes, whose rules need every node declared
    nodes: list[Node] = []
    append = nodes.append
    records: list[Any] = document.nodes
    ids = [record.id for record in records]
    declared = Declared(nodes, ids)  # its nodes fill in as they are built
    index, parents = declared.index, declared.parents
    if len(index) != len(ids):
        sound = False  # a repeated id
    last_parent: str | None = None  # siblings come in runs: the scope of the last one is kept
    scope_inputs: Any = model_inputs
    for i, raw in enumerate(records):
        records[i] = None  # free each record once read: its memory serves the next nodes
        node_id = raw.id
        parent = raw.parent
        op = raw.op
        if op not in good_ops:
            if not is_op_name(op):
                raise _Unread
            good_ops.add(op)
        head, dot, _ = node_id.rpartition(".")
        if dot:
            if parent != head:
                raise _Unread
            if parent != last_parent:
                j = index.get(parent)
                if j is not None and j < i and nodes[j].output_bindings is not None:
                    scope_inputs = nodes[j].inputs
                    last_parent = parent
                else:
                    sound = False
                    last_parent = None
        elif parent is not None:
            raise _Unread
        else:
            scope_inputs = model_inputs
            last_parent = None
        parents[i] = parent

        node_inputs = {}
        raw_inputs = raw.inputs
        members += 5 + 3 * len(raw_inputs)  # id, parent, op, inputs, outputs; a wire's key, node, output
        for port, ref in raw_inputs.items():
            ref_node = ref.node
            output = ref.output
            node_inputs[port] = _new_ref(Ref, (ref_node, output))
            if port not in good_names:
                if NAME.match(port):
                    good_names.add(port)
                else:
                    sound = False
            if ref_node == INPUT:
                if output not in scope_inputs:
                    sound = False
            else:
                j = index.get(ref_node)
                if j is None or j >= i or parents[j] != parent or output not in nodes[j].outputs:
                    sound = False

        outputs = raw.outputs
        if not good_names.issuperset(outputs):
            for output in outputs:
                if NAME.match(output):
                    good_names.add(output)
                else:
                    sound = False
        if len(outputs) > 1 and len(set(outputs)) != len(outputs):
            sound = False

        metadata = raw.metadata
        if metadata is UNSET:
            metadata = None
        else:
            members += 1 + _colons(metadata)
            if metadata is not None:
                metadata = decoder.metadata(metadata, f"/nodes/{i}/metadata")
        calls = raw.calls
        slots = raw.parameters
        bindings = raw.output_bindings
        if slots is not UNSET:
            members += 1 + 2 * len(slots)  # a slot's key and name
        if bindings is not UNSET:
            members += 1 if bindings is None else 1 + 3 * len(bindings)
        if calls is not UNSET:
            members += 1 + _colons(calls)
        if calls is UNSET:
            if slots is UNSET or bindings is UNSET:
                raise _Unread
            parameters = {slot: entry.name for slot, entry in slots.items()} if slots else {}
            if bindings is not None:
                bindings = {name: _new_ref(Ref, (ref.node, ref.output)) for name, ref in bindings.items()}
            node = Node(node_id, op, node_inputs, outputs, parameters, bindings, metadata)
        else:
            if decoder.without_calls or type(calls) is not str or slots is not UNSET or bindings is not UNSET:
                raise _Unread
            node = Node(node_id, op, node_inputs, outputs, {}, None, metadata, calls)
            calling.append(i)
        append(node)

    if members != colons:
        raise _Unread  # a repeated key, or a colon in a name
    if not all_dotted(ids):
        # Ids too deep are refused by the careful decoder; other bad ids are validation errors.
        if any(node.id.count(".") >= 256 for node in nodes):
            raise _Unread
        sound = False

    raw_metadata = document.metadata
    raw_opsets = document.opsets
    raw_input_facts = document.input_facts
    raw_output_facts = document.output_facts
    raw_symbols = document.symbols
    outputs = [_new_ref(Ref, (ref.node, ref.output)) for ref in document.outputs]
    model = Model(
        inputs=inputs,
        outputs=outputs,
        nodes=nodes,
        parameters=decoder.parameters(document.parameters),
        metadata=decoder.metadata({} if raw_metadata is UNSET else raw_metadata, "/metadata"),
        opsets=decoder.opsets({} if raw_opsets is UNSET else raw_opsets),
        input_facts=decoder.facts(None if raw_input_facts is UNSET else raw_input_facts, len(inputs), "/input_facts"),
        output_facts=decoder.facts(
            None if raw_output_facts is UNSET else raw_output_facts, len(outputs), "/output_facts"
        ),
        symbols=None if raw_symbols is UNSET else decoder.symbols(raw_symbols),
        source_format_version=document.format_version,
    )
    if sound:
        problems: list[str] = []

        def fail(message: str, *_: object, **__: object) -> None:
            problems.append(message)

        binding_errors(declared, fail)
        if calling and call_errors(nodes, calling, declared.by_id()):
            problems.append("calls")
        table_errors(model, declared, model_inputs, fail)
        if model.symbols is not None:  # the one model-level rule the decoding does not prove
            symbol_errors(model, fail)
        sound = not problems
    return model, sound


class _Unread(Exception):
    """Raised inside :func:`_build` where the careful path must read the document."""
