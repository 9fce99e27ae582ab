"""The fast way in for format 1.3: the nested text decoded straight into the flat model.

The careful way (:func:`~trama.format._jsontext.parse_json`, then
:func:`~trama.format._expand.expand_document` into the flat shape, then
:func:`~trama.format._codec.decode_document`, then validation) builds each node three times
over. Here msgspec's compiled decoder reads the text into records shaped like 1.3's node
objects, checking every member's JSON type, and one walk builds the nodes; the model is then
validated by :func:`~trama.format._validation.structural_errors`, the rules' one authority.

**One source of truth.** As :mod:`trama.format._typed`, this path only ever accepts: it answers
``None`` for anything it is not certain the careful path reads to the same model (blocks and
calling nodes, which the careful path expands; a value that is an object, a tensor or a table
reference, goes to the careful decoder's own methods through the expansion's, so that every
value is read one way), and for every document that breaks a rule, so that the careful path
reports what is wrong, located in the text. Repeated keys are caught the way
:mod:`trama.format._typed` explains: the text's colons against the members decoded.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from trama.errors import TramaError, pointer_token
from trama.format._codec import ExternalResolver, _Decoder
from trama.format._compact import COMPOSITE_OP, SOLE_OUTPUT, SOLE_PORT, module_of
from trama.format._expand import _Expander
from trama.format._jsontext import LiftedText
from trama.format._memory import allocations_may_fail, can_reserve
from trama.format._model import INPUT, Model, Node, Ref
from trama.format._names import MAX_NODE_DEPTH, NAME, is_op_name
from trama.format._stack import nested_room
from trama.format._typed import _ESCAPED_COLONS, MEMORY_PER_BYTE, _Unread
from trama.format._validation import Declared, binding_errors, model_level_errors, table_errors

__all__ = ["decode_nested"]


class _Node(Struct, forbid_unknown_fields=True, gc=False, rename={"wires": "in", "values": "set", "kind": "class"}):
    """A 1.3 node object. What the text leaves out stays ``UNSET``."""

    name: str
    op: str | UnsetType = UNSET
    wires: str | dict[str, str] | UnsetType = UNSET
    out: str | list[str] | dict[str, str] | UnsetType = UNSET
    values: dict[str, Any] | UnsetType = UNSET
    kind: str | UnsetType = UNSET
    meta: Any = UNSET
    nodes: list[_Node] | UnsetType = UNSET
    calls: Any = UNSET
    use: Any = UNSET
    tensors: Any = UNSET


class _Document(Struct, forbid_unknown_fields=True, gc=False):
    format_version: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[_Node]
    metadata: Any = UNSET
    opsets: Any = UNSET
    input_facts: Any = UNSET
    symbols: Any = UNSET
    output_facts: Any = UNSET
    weights: Any = UNSET
    blocks: Any = UNSET
    parameters: Any = UNSET


_DECODER = msgspec.json.Decoder(_Document)
#: What a 1.3 document's text starts with, give or take its spaces: others are not decoded here.
_NESTED_VERSION = re.compile(rb'"format_version"[ \t\r\n]*:[ \t\r\n]*"1\.3"')
_ENCODER = msgspec.json.Encoder()
_new_ref = tuple.__new__


def decode_nested(lifted: LiftedText, resolver: ExternalResolver | None) -> Model | None:
    """The model of a valid 1.3 document without blocks or calls, or ``None`` where the careful
    path must read it."""
    text = lifted.text
    if not isinstance(text, (bytes, bytearray)) or _NESTED_VERSION.search(text, 0, 256) is None:
        return None
    if b"\\u003" in text and any(escape in text for escape in _ESCAPED_COLONS):
        return None
    if not can_reserve(len(text) * (MEMORY_PER_BYTE if allocations_may_fail() else 1)):
        return None  # msgspec crashes where a string's allocation fails (see trama.format._typed)
    with nested_room():  # msgspec and the build take a few frames per level of nesting
        try:
            document = _DECODER.decode(text)
        except (msgspec.MsgspecError, RecursionError, ValueError):
            return None
        if document.format_version != "1.3" or document.blocks is not UNSET:
            return None
        try:
            builder = _Builder(document, lifted, resolver)
            model = builder.model(text.count(b":"))
        except (_Unread, TramaError):
            return None
    if not _sound(model, builder.parents):
        return None
    model.source_places.relocate_tensors(model.parameters)
    return model


def _sound(model: Model, parents: list[str | None]) -> bool:
    """The rules the build did not prove: the model's own members, each composite's bindings
    and the parameter table (:mod:`trama.format._validation`'s sections, as they are)."""
    problems: list[object] = []

    def fail(*problem: object, **_: object) -> None:
        problems.append(problem)

    model_inputs = model_level_errors(model, fail)
    nodes = model.nodes
    declared = Declared(nodes, [node.id for node in nodes])
    declared.parents[:] = parents  # as the build made them
    binding_errors(declared, fail)
    table_errors(model, declared, model_inputs, fail)
    return not problems


class _Builder:
    def __init__(self, document: _Document, lifted: LiftedText, resolver: ExternalResolver | None) -> None:
        self.document = document
        self.decoder = _Decoder(resolver, True, lifted.blobs)
        self.expander = _Expander({"weights": None if document.weights is UNSET else document.weights}, 0, True)
        self.nodes: list[Node] = []
        self.buffer = bytearray()
        self.members = 0
        self.good_names: set[str] = set()
        self.good_ops: set[str] = set()
        self.parents: list[str | None] = []  # each node's parent id, as it is built

    def colons(self, value: Any) -> int:
        _ENCODER.encode_into(value, self.buffer)
        return self.buffer.count(b":")

    def model(self, colons: int) -> Model:
        document = self.document
        self.members = 4 + (0 if document.weights is UNSET else 1 + self.colons(document.weights))
        for part in (document.metadata, document.opsets, document.input_facts, document.symbols, document.output_facts):
            if part is not UNSET:
                self.members += 1 + self.colons(part)
        model_inputs = set(document.inputs)
        outputs_of = self.scope(document.nodes, "", None, model_inputs, 0, "/nodes")
        outputs = [self.ref(text, "", outputs_of, ()) for text in document.outputs]
        table = self.expander.table
        if document.parameters is not UNSET:
            self.members += 1 + self.colons(document.parameters)
            self.expander.top_table(document.parameters)
        if self.members != colons:
            raise _Unread  # a repeated key, or a colon in a name
        decoder = self.decoder
        return Model(
            inputs=document.inputs,
            outputs=outputs,
            nodes=self.nodes,
            parameters=decoder.parameters(table),
            metadata=decoder.metadata({} if document.metadata is UNSET else document.metadata, "/metadata"),
            opsets=decoder.opsets({} if document.opsets is UNSET else document.opsets),
            input_facts=decoder.facts(
                None if document.input_facts is UNSET else document.input_facts, len(document.inputs), "/input_facts"
            ),
            output_facts=decoder.facts(
                None if document.output_facts is UNSET else document.output_facts, len(outputs), "/output_facts"
            ),
            symbols=None if document.symbols is UNSET else decoder.symbols(document.symbols),
            source_format_version="1.3",
            source_places=self.expander.places,
        )

    def ref(self, text: str, prefix: str, outputs_of: dict[str, list[str]], inputs: Any) -> Ref:
        """The reference ``text`` reads in a scope whose earlier nodes' outputs are
        ``outputs_of`` and whose inputs are ``inputs``; one that would not resolve to a value
        made before it in the scope is left to the careful path (which says why)."""
        if text[0:1] == "%":
            if text[1:] not in inputs:
                raise _Unread
            return _new_ref(Ref, (INPUT, text[1:]))
        name, dot, output = text.partition(".")
        outputs = outputs_of.get(name)
        if outputs is None:
            raise _Unread
        if dot:
            if output not in outputs:
                raise _Unread
            return _new_ref(Ref, (prefix + name, output))
        if len(outputs) != 1:
            raise _Unread
        return _new_ref(Ref, (prefix + name, outputs[0]))

    def scope(
        self, records: list[_Node], prefix: str, module: str | None, scope_inputs: Any, depth: int, where: str
    ) -> dict[str, list[str]]:
        """Build the nodes of one scope (and, depth first, their children); the outputs of each.
        Each node's rules of :func:`~trama.format._validation.node_errors` are proven as it is
        built (a unique id, an op name, names, references to values made before it in its
        scope): by construction, or checked; what does not hold is left to the careful path."""
        if depth >= MAX_NODE_DEPTH:
            raise _Unread
        outputs_of: dict[str, list[str]] = {}
        append = self.nodes.append
        ref = self.ref
        expander = self.expander
        good_names = self.good_names
        good_ops = self.good_ops
        places = expander.places
        located = places.nodes.append
        add_parent = self.parents.append
        parent = prefix[:-1] or None
        for k, raw in enumerate(records):
            records[k] = None  # type: ignore[call-overload]  # free each record once read
            if raw.use is not UNSET or raw.calls is not UNSET or raw.tensors is not UNSET:
                raise _Unread  # blocks and calls: the careful path expands them
            name = raw.name
            if name in outputs_of:
                raise _Unread
            if name not in good_names:
                if not NAME.match(name):
                    raise _Unread
                good_names.add(name)
            node_id = prefix + name
            members = 1
            wires = raw.wires
            if isinstance(wires, str):
                members += 1
                inputs: dict[str, Ref] = {SOLE_PORT: ref(wires, prefix, outputs_of, scope_inputs)}
            elif isinstance(wires, UnsetType):
                inputs = {}
            else:
                members += 1 + len(wires)
                inputs = {port: ref(text, prefix, outputs_of, scope_inputs) for port, text in wires.items()}
                if not good_names.issuperset(inputs):
                    if not all(NAME.match(port) for port in inputs):
                        raise _Unread
                    good_names.update(inputs)
            out = raw.out
            nodes = raw.nodes
            composite = nodes is not UNSET or type(out) is dict
            op = raw.op
            if isinstance(op, UnsetType):
                if not composite:
                    raise _Unread
                op = COMPOSITE_OP
            else:
                members += 1
                if op not in good_ops:
                    if not is_op_name(op):
                        raise _Unread
                    good_ops.add(op)
            if isinstance(out, str):
                if not composite:
                    raise _Unread
                out = {SOLE_OUTPUT: out}
                outputs = [SOLE_OUTPUT]
                members -= 1  # one member in the text, counted as one binding below
            if isinstance(out, dict):
                outputs = list(out)
            elif not composite and isinstance(out, list):
                outputs = out
            elif not composite:
                outputs = ["y"]
            else:
                raise _Unread
            if out is not UNSET:
                members += 1 + (len(out) if type(out) is dict else 0)
                if not good_names.issuperset(outputs):
                    if not all(NAME.match(output) for output in outputs):
                        raise _Unread
                    good_names.update(outputs)
                if len(outputs) > 1 and len(set(outputs)) != len(outputs):
                    raise _Unread
            parameters: dict[str, str] = {}
            values = raw.values
            if not isinstance(values, UnsetType):
                members += 1 + self.colons(values)
                for slot, value in values.items():
                    if type(value) is dict and "ref" in value:
                        if set(value) != {"ref"} or type(value["ref"]) is not str:
                            raise _Unread
                        parameters[slot] = value["ref"]
                        continue
                    entry = f"{node_id}.{slot}"
                    if entry in expander.table:
                        raise _Unread
                    here = f"{where}/{k}/set/{pointer_token(slot)}"
                    places.entries[entry] = here
                    expander.table[entry] = expander.entry(value, here, entry, None)
                    parameters[slot] = entry
            metadata = raw.meta
            if metadata is UNSET:
                metadata = None
            else:
                members += 1 + self.colons(metadata)
                if metadata is not None:
                    if type(metadata) is not dict:
                        raise _Unread
                    metadata = self.decoder.metadata(metadata, "")
            kind = raw.kind
            if kind is not UNSET:
                members += 1
                if not kind or ":" in kind:
                    raise _Unread
                if kind[0] == ".":
                    if module is None:
                        raise _Unread
                    kind = module + kind
                metadata = {"class": kind, **(metadata or {})}
            node = Node(node_id, op, inputs, outputs, parameters, None, metadata)
            append(node)
            add_parent(parent)
            located((f"{where}/{k}", None))
            outputs_of[name] = outputs
            if composite:
                members += 1 if nodes is not UNSET else 0
                children = [] if isinstance(nodes, UnsetType) else nodes
                inner = self.scope(
                    children, f"{node_id}.", module_of(metadata, module), inputs, depth + 1, f"{where}/{k}/nodes"
                )
                scope = f"{node_id}."
                assert isinstance(out, dict)
                node.output_bindings = {output: ref(text, scope, inner, inputs) for output, text in out.items()}
            self.members += members
        return outputs_of
