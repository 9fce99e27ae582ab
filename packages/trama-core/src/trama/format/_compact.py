"""The text of a model in format 1.3: the tree nested, settings where they are read, a repeated
block written once, the weights file named once (``docs/format.md`` describes the format).

Why this layout. A reviewer reads a document top-down and diffs it in code review, so:

* each node is one line, nested under its parent (``"nodes": [`` ends a composite's line, its
  children follow one a line, two spaces deeper, and ``], "out": {...}}`` closes it), and a
  change to one setting, one wire or one tensor is a one-line diff;
* a node's settings are written in it (``"params": {"in_features": 64, ...}``), so a value is
  read where it is used and not looked up in a table;
* sibling composites of the same structure (the layers of a stack) are a *block*: its body is
  written once under ``"blocks"``, each layer one line naming it with its own inputs and the
  checksums of its own tensors;
* references are short strings in the scope they are read in (``"q_proj"``, ``"rotary.cos"``,
  ``"%hidden_states"``), and an external tensor is its dtype, shape and checksum, the weights
  file being named once for the document;
* a size that depends on the inputs (:class:`~trama.format.SizeExpr`) is a plain setting,
  written ``{"size": text}`` wherever a plain value or a list item is (the JSON encoder's
  ``default`` writes it, so that other values pay nothing for it).

The in-memory :class:`~trama.Model` stays flat: :mod:`trama.format._expand` gives a 1.3 text
back as that model, and this module never changes what the model means (a 1.2 document
written here and read back is the same model: ids, entries, values).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Container, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from trama.format._external import safetensors_key
from trama.format._model import INPUT, Model, Node, Parameter, Ref, ValueFact
from trama.format._names import is_op_name
from trama.format._sizes import SizeExpr, SymbolRange
from trama.format._stack import nested_room

if TYPE_CHECKING:
    from trama.format._validation import StructureProof
from trama.format._tensor import Tensor

#: The op a composite has where the text leaves ``op`` out.
COMPOSITE_OP = "Graph"
#: The dtype a tensor has where the text leaves ``dtype`` out.
DEFAULT_DTYPE = "float32"
XXH3_PREFIX = "xxh3-64:"
#: The port a node's ``in`` feeds where it is one reference rather than an object.
SOLE_PORT = "x"
#: The output a composite's ``out`` binds where it is one reference rather than an object.
SOLE_OUTPUT = "y"

__all__ = [
    "COMPOSITE_OP",
    "DEFAULT_DTYPE",
    "SOLE_OUTPUT",
    "SOLE_PORT",
    "XXH3_PREFIX",
    "block_name",
    "encode_fact",
    "encode_symbols",
    "model_pieces_13",
    "reference_text",
    "short_checksum",
]


def _json_default(value: Any) -> Any:
    """What the encoder writes for a value JSON has no form for: a size is ``{"size": text}``."""
    if isinstance(value, SizeExpr):
        return {"size": value.text}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default).encode
_ONLY_Y = [SOLE_OUTPUT]
#: What each level of nesting indents a node's line by.
_INDENT = " "
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")

#: Encodes one tensor as the document writes it: ``(entry name, tensor) -> value``, the value
#: being a format-1.2 tensor object (``data`` or ``external``), as the writers make them.
TensorWriter = Callable[[str, Tensor], dict[str, Any]]
#: The checksum an inline tensor records: ``(entry name, tensor) -> "xxh3-64:..."``.
ChecksumWriter = Callable[[str, Tensor], str]


def reference_text(ref: Ref, outputs_of: Outputs, scope: str) -> str:
    """A reference as a 1.3 document writes it in the scope whose node ids start with
    ``scope``: ``%x`` for an input of the scope, ``name`` for the only output of a sibling,
    ``name.output`` otherwise."""
    if ref.node == INPUT:
        return f"%{ref.output}"
    local = ref.node[len(scope) :]
    outputs = outputs_of.get(ref.node)
    return local if outputs is not None and len(outputs) == 1 and outputs[0] == ref.output else f"{local}.{ref.output}"


def block_name(base: str, taken: set[str]) -> str:
    """A block's name: the last segment of its class (or op), made a plain name and unique."""
    name = _NOT_A_NAME.sub("_", base.rpartition(".")[2]) or "block"
    if name[0].isdigit():
        name = f"_{name}"
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate


class Outputs(Protocol):
    """The outputs of a node by id (``None`` for an id that names none)."""

    def get(self, node_id: str) -> list[str] | None: ...


class _OutputsOf:
    """Each node's outputs by id, read through a proof's index of the nodes (whose ids it
    proved unique) instead of a dictionary of their own."""

    __slots__ = ("index", "nodes")

    def __init__(self, index: dict[str, int], nodes: list[Node]) -> None:
        self.index = index
        self.nodes = nodes

    def get(self, node_id: str) -> list[str] | None:
        j = self.index.get(node_id)
        return None if j is None else self.nodes[j].outputs


class _Writer:
    """One model's 1.3 text: the forms of its nodes, its blocks, and the lines."""

    def __init__(
        self,
        model: Model,
        tensor: TensorWriter,
        checksum: ChecksumWriter,
        weights: str | None,
        proof: StructureProof | None = None,
    ) -> None:
        self.model = model
        #: Proves each node's rules as it is visited, if asked (and not already settled).
        self.proof = None if proof is None or proof.settled else proof
        self.tensor = tensor
        self.checksum = checksum
        self.weights = weights
        children: dict[str | None, list[Node]] = {}
        outputs_of: dict[str, list[str]] = {}
        by_index = self.proof is not None  # its index gives each node's outputs: no dict of them
        uses: dict[str, int] = {}
        for node in model.nodes:  # one pass, the parent read off the id (Node.parent, inlined)
            node_id = node.id
            head, dot, _ = node_id.rpartition(".")
            siblings = children.get(head if dot else None)
            if siblings is None:
                children[head if dot else None] = [node]
            else:
                siblings.append(node)
            if not by_index:
                outputs_of[node_id] = node.outputs
            if node.parameters:
                for used in node.parameters.values():
                    uses[used] = uses.get(used, 0) + 1
        self.children = children
        self.outputs_of: Outputs = (
            outputs_of if self.proof is None else _OutputsOf(self.proof.declared.index, model.nodes)
        )
        #: Entries written in their node: used by one slot, named ``<node id>.<slot>``, and a
        #: tensor or a setting that is not learnable. Every other entry is in the table.
        self.owned: set[str] = set()
        for node in model.nodes:
            if not node.parameters:
                continue
            for slot, entry_name in node.parameters.items():
                entry = model.parameters.get(entry_name)
                if (
                    entry is not None
                    and uses[entry_name] == 1
                    and entry_name == f"{node.id}.{slot}"
                    and (isinstance(entry.value, Tensor) or not entry.learnable)
                ):
                    self.owned.add(entry_name)
        self.fills: dict[str, Any] = {}  # entry -> what fills its tensor (checksum or data)
        self.blocks: dict[str, str] = {}  # structure digest -> block name, of the chosen ones
        self.defined: dict[str, list[str]] = {}  # block name -> the lines of its definition
        self.block_of: dict[str, str] = {}  # composite id -> digest, where it is a block instance

    # ----- what each node says -------------------------------------------------------------

    def form(self, node: Node, *, in_body: bool, module: str | None = None) -> dict[str, Any]:
        """A node's members but its children (``nodes``) and, in a block body, its tensors'
        data or checksums (each instance gives its own)."""
        scope = "" if node.parent is None else f"{node.parent}."
        form: dict[str, Any] = {"name": node.name}
        if node.op != COMPOSITE_OP or node.output_bindings is None:
            form["op"] = node.op
        if node.calls is not None:
            form["calls"] = node.calls
        if node.inputs:
            form["in"] = self.wires(node, scope)
        if node.output_bindings is None and node.outputs != ["y"]:
            form["out"] = list(node.outputs)
        if node.parameters:
            form["set"] = {slot: self.slot_value(name, in_body=in_body) for slot, name in node.parameters.items()}
        form.update(metadata_members(node.metadata, module))
        return form

    def wires(self, node: Node, scope: str) -> str | dict[str, str]:
        """A node's input wiring: the reference alone where its one port is ``x``."""
        if len(node.inputs) == 1 and SOLE_PORT in node.inputs:
            return reference_text(node.inputs[SOLE_PORT], self.outputs_of, scope)
        return {port: reference_text(ref, self.outputs_of, scope) for port, ref in node.inputs.items()}

    def bindings(self, node: Node) -> dict[str, str]:
        bindings = node.output_bindings
        assert bindings is not None
        scope = f"{node.id}."
        return {name: reference_text(bindings[name], self.outputs_of, scope) for name in node.outputs}

    def out_text(self, node: Node) -> str:
        """A composite's ``out``: the reference alone where its one output is ``y``."""
        bound = self.bindings(node)
        if list(bound) == [SOLE_OUTPUT]:
            return f'"{bound[SOLE_OUTPUT]}"'
        return _dumps(bound)

    def subtree(self, node_id: str) -> list[Node]:
        """The descendants of ``node_id``, parents before children."""
        found: list[Node] = []
        stack = list(reversed(self.children.get(node_id, [])))
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(reversed(self.children.get(node.id, [])))
        return found

    def slot_value(self, name: str, *, in_body: bool) -> Any:
        if name not in self.owned:
            return {"ref": name}
        entry = self.model.parameters[name]
        if not isinstance(entry.value, Tensor):
            return entry.value
        tensor = entry.value
        form = tensor_head(tensor)
        if not in_body:  # the values right after the shape: a reader hashes inline data as it reads it
            fill = self.fill(name)
            form.update(fill if isinstance(fill, dict) else {"checksum": fill})
        if not entry.learnable:
            form["learnable"] = False
        return form

    def fill(self, name: str) -> Any:
        """What an owned tensor's values are: a checksum string (the tensor is in the
        document's weights file under its entry's key), else the members that say where
        (``data`` and ``checksum``, or a 1.2 ``external`` reference)."""
        fill = self.fills.get(name)
        if fill is None:
            tensor = self.model.parameters[name].value
            assert isinstance(tensor, Tensor)
            encoded = self.tensor(name, tensor)
            external = encoded.get("external")
            if external is not None:
                if external.get("path") == self.weights and external.get("key") == safetensors_key(name):
                    fill = short_checksum(external["checksum"])
                else:
                    fill = {"external": external}
            else:
                fill = {"data": encoded["data"], "checksum": short_checksum(self.checksum(name, tensor))}
            self.fills[name] = fill
        return fill

    def table_value(self, name: str, entry: Parameter) -> Any:
        value = entry.value
        if isinstance(value, Tensor):
            form = tensor_head(value)
            fill = self.fill(name)
            form.update(fill if isinstance(fill, dict) else {"checksum": fill})
            if not entry.learnable:
                form["learnable"] = False
            return form
        if entry.learnable:
            return {"value": _plain(value), "learnable": True}
        return _plain(value)

    # ----- blocks ------------------------------------------------------------------------------

    def choose_blocks(self) -> None:
        """Composites of one structure written more than once become blocks: larger ones first,
        and a composite inside an instance other than a block's first is not written, so it
        does not count (the MLP of every layer of a stack is written once, in the layer)."""
        children = self.children
        outlines: dict[tuple[Any, ...], list[str]] = {}
        for node in self.model.nodes:
            if node.output_bindings is not None:
                outline = (
                    node.op,
                    str((node.metadata or {}).get("class")),
                    tuple(node.inputs),
                    tuple(node.outputs),
                    len(children.get(node.id, [])),
                )
                outlines.setdefault(outline, []).append(node.id)
        digests: dict[str, str | None] = {}
        sizes: dict[str, int] = {}
        order: list[str] = []
        for ids in outlines.values():
            if len(ids) > 1:  # only what something else could match is signed
                for node_id in ids:
                    self.digest(node_id, digests, sizes)
                    order.append(node_id)
        if len(order) > 1:
            position = {node.id: k for k, node in enumerate(self.model.nodes)}
            order.sort(key=position.__getitem__)
        by_digest: dict[str, list[str]] = {}
        for node_id in order:  # document order
            digest = digests[node_id]
            if digest is not None:
                by_digest.setdefault(digest, []).append(node_id)
        covered: set[str] = set()
        for digest, ids in sorted(by_digest.items(), key=lambda item: (-sizes[item[1][0]], item[1][0])):
            written = [node_id for node_id in ids if node_id not in covered]
            if len(written) < 2:
                continue
            self.blocks[digest] = ""
            for node_id in written:
                self.block_of[node_id] = digest
            for node_id in written[1:]:
                covered.update(member.id for member in self.subtree(node_id))

    @functools.cached_property
    def by_id(self) -> dict[str, Node]:
        """Every node by id (for the block search only: most models need none)."""
        return {node.id: node for node in self.model.nodes}

    def digest(self, node_id: str, digests: dict[str, str | None], sizes: dict[str, int]) -> str | None:
        """The structure of composite ``node_id`` (``None`` where its body holds a call, whose
        target would differ from one instance to the next): a digest of its form without its
        name and inputs' wiring, its children's forms and, for a child composite, its digest."""
        if node_id in digests:
            return digests[node_id]
        node = self.by_id[node_id]
        kids = self.children.get(node_id, [])
        described: list[Any] = []
        size = 1
        for kid in kids:
            if kid.calls is not None:
                digests[node_id] = None
                return None
            if kid.output_bindings is not None:
                inner = self.digest(kid.id, digests, sizes)
                if inner is None:
                    digests[node_id] = None
                    return None
                described.append([kid.name, inner, self.form(kid, in_body=True).get("in")])
                size += sizes[kid.id]
            else:
                described.append(self.form(kid, in_body=True))
                size += 1
        own = self.form(node, in_body=True)
        own.pop("name")
        own.pop("in", None)
        own["ports"] = list(node.inputs)
        own["out"] = self.bindings(node)
        own["nodes"] = described
        digest = hashlib.blake2b(_dumps(own).encode(), digest_size=16).hexdigest()
        digests[node_id] = digest
        sizes[node_id] = size
        return digest

    # ----- lines -------------------------------------------------------------------------------

    def child_lines(
        self, kids: list[Node], indent: str, instance: str | None, module: str | None, scope_inputs: Container[str]
    ) -> list[str]:
        """The lines of a scope's nodes, a comma after each but the last; ``instance`` is the id
        of the block instance whose body is being written (tensors left out), or ``None``;
        ``scope_inputs``: what ``%x`` may read in the scope (for the proof)."""
        lines: list[str] = []
        self.write_scope(kids, indent, instance, module, lines, scope_inputs)
        return lines

    def write_scope(
        self,
        kids: list[Node],
        indent: str,
        instance: str | None,
        module: str | None,
        lines: list[str],
        scope_inputs: Container[str],
    ) -> None:
        if not kids:
            return
        append = lines.append
        block_of = self.block_of
        in_body = instance is not None
        first = kids[0]
        scope = first.id[: len(first.id) - len(first.name)]
        cut = len(scope)
        parent = scope[:-1] or None
        outputs_of = self.outputs_of
        proof = self.proof
        if proof is not None:  # the proof's state, as locals for the loop
            index, parents, nodes = proof.declared.index, proof.declared.parents, proof.declared.nodes
            good_ops = proof.good_ops
            floor = -1 if parent is None else index.get(parent, len(nodes))  # a child comes after its parent
            reached = 0
        for kid in kids:
            if (  # the commonest line, written at once: a leaf of one input x, one output y, no more
                kid.output_bindings is None
                and not kid.parameters
                and kid.metadata is None
                and kid.calls is None
                and kid.outputs == _ONLY_Y
                and len(kid.inputs) == 1
                and SOLE_PORT in kid.inputs
            ):
                ref_node, output = kid.inputs[SOLE_PORT]
                if proof is not None:  # StructureProof.prove_node's rules, written out for this node
                    i = index.get(kid.id, -1)
                    op = kid.op
                    if op not in good_ops and is_op_name(op):
                        good_ops.add(op)
                    if i > floor and nodes[i] is kid and op in good_ops:
                        if ref_node == INPUT:
                            proven = output in scope_inputs
                        else:
                            j = index.get(ref_node, i)
                            proven = j < i and parents[j] == parent and output in nodes[j].outputs
                        if proven:
                            parents[i] = parent
                            reached += 1
                if ref_node == INPUT:
                    wire = f"%{output}"
                else:
                    outputs = outputs_of.get(ref_node)
                    one = outputs is not None and len(outputs) == 1 and outputs[0] == output
                    wire = ref_node[cut:] if one else f"{ref_node[cut:]}.{output}"
                append(f'{indent}{{"name":"{kid.id[cut:]}","op":"{kid.op}","in":"{wire}"}},')
                continue
            if proof is not None:
                proof.prove_node(kid, parent, scope_inputs)
            digest = block_of.get(kid.id)
            if digest is not None:
                defines = not self.blocks[digest]  # its subtree is written (and proven) as the block's body
                append(f"{indent}{self.instance_line(kid, digest, instance)},")
                if not defines and proof is not None:
                    self.prove_subtree(kid)
                continue
            head = _dumps(self.form(kid, in_body=in_body, module=module))[:-1]  # without its closing brace
            if kid.output_bindings is None:
                append(f"{indent}{head}}},")
                continue
            append(f'{indent}{head},"nodes":[')
            grandkids = self.children.get(kid.id, [])
            if grandkids:
                inner = module_of(kid.metadata, module)
                self.write_scope(grandkids, indent + _INDENT, instance, inner, lines, kid.inputs)
            append(f'{indent}],"out":{self.out_text(kid)}}},')
        lines[-1] = lines[-1][:-1]  # no comma after the last
        if proof is not None:
            proof.reached += reached

    def prove_subtree(self, top: Node) -> None:
        """Prove the nodes under ``top`` without writing them (an instance written as one line):
        each scope's nodes in their order, each before its own subtree."""
        assert self.proof is not None
        prove = self.proof.prove_node
        stack = [(kid, top) for kid in reversed(self.children.get(top.id, []))]
        while stack:
            node, parent = stack.pop()
            prove(node, parent.id, parent.inputs)
            stack.extend((kid, node) for kid in reversed(self.children.get(node.id, [])))

    def instance_line(self, node: Node, digest: str, instance: str | None) -> str:
        name = self.blocks[digest]
        if not name:
            name = self.define(node, digest)
        scope = "" if node.parent is None else f"{node.parent}."
        form: dict[str, Any] = {"name": node.name, "use": name}
        if node.inputs:
            form["in"] = self.wires(node, scope)
        if instance is None:
            tensors = [
                self.fill(entry)
                for member in [node, *self.subtree(node.id)]
                for entry in member.parameters.values()
                if entry in self.owned and isinstance(self.model.parameters[entry].value, Tensor)
            ]
            if tensors:
                form["tensors"] = tensors
        return _dumps(form)

    def define(self, node: Node, digest: str) -> str:
        """Write the body of the block ``node`` is the first instance of, and name it."""
        found = (node.metadata or {}).get("class")
        base = found if isinstance(found, str) else None
        name = block_name(base or node.op, set(self.defined))
        self.blocks[digest] = name
        self.defined[name] = []
        form = self.form(node, in_body=True)
        del form["name"]
        form.pop("in", None)
        head: dict[str, Any] = {"op": form.pop("op")} if "op" in form else {}
        head["in"] = list(node.inputs)
        head.update(form)
        lines = [f'{_dumps(head)[:-1]},"nodes":[']
        kids = self.children.get(node.id, [])
        lines.extend(self.child_lines(kids, _INDENT, node.id, module_of(node.metadata, None), node.inputs))
        lines.append(f'],"out":{self.out_text(node)}}}')
        self.defined[name] = lines
        return name


def model_pieces_13(
    model: Model,
    tensor: TensorWriter,
    checksum: ChecksumWriter,
    *,
    weights: str | None = None,
    proof: StructureProof | None = None,
) -> Iterator[str]:
    """The 1.3 text of a valid ``model``, in pieces; ``weights`` is the weights file an
    external tensor is in when ``tensor`` writes it there under its entry's key.

    With a ``proof`` (:class:`~trama.format._validation.StructureProof`), the model is proven
    valid as its nodes' lines are made, before the first piece is given: each node's rules as it
    is visited, the rest by ``proof.finish()``, which validates the model the careful way, and
    raises its first error, wherever a rule was not proven."""
    writer = _Writer(model, tensor, checksum, weights, proof)
    with nested_room():  # the structure is read and written a level at a time
        writer.choose_blocks()
        top_inputs = proof.model_inputs if proof is not None else set(model.inputs)
        body = writer.child_lines(writer.children.get(None, []), "", None, None, top_inputs)
    if proof is not None:
        for positions in (proof.calling, proof.composites, proof.slotted):
            positions.sort()  # visited depth first; the sections after the pass read them in order
        proof.finish()
    table = {
        name: writer.table_value(name, entry) for name, entry in model.parameters.items() if name not in writer.owned
    }
    yield '{"format_version":"1.3"'
    if model.metadata:
        yield f',\n"metadata":{_dumps(model.metadata)}'
    if model.opsets:
        yield f',\n"opsets":{_dumps(model.opsets)}'
    yield f',\n"inputs":{_dumps(list(model.inputs))}'
    if model.input_facts is not None:
        yield f',\n"input_facts":{_dumps([encode_fact(f) for f in model.input_facts])}'
    if model.symbols is not None:
        yield f',\n"symbols":{_dumps(encode_symbols(model.symbols))}'
    top_outputs = [reference_text(ref, writer.outputs_of, "") for ref in model.outputs]
    yield f',\n"outputs":{_dumps(top_outputs)}'
    if model.output_facts is not None:
        yield f',\n"output_facts":{_dumps([encode_fact(f) for f in model.output_facts])}'
    if weights is not None and any(isinstance(fill, str) for fill in writer.fills.values()):
        yield f',\n"weights":{_dumps(weights)}'
    if writer.defined:
        definitions = [_dumps(name) + ":" + "\n".join(lines) for name, lines in writer.defined.items()]
        yield ',\n"blocks":{\n' + ",\n".join(definitions) + "\n}"
    yield ',\n"nodes":[\n' + "\n".join(body) + "\n]" if body else ',\n"nodes":[]'
    if table:
        yield (
            ',\n"parameters":{\n'
            + ",\n".join(f"{_dumps(name)}:{_dumps(value)}" for name, value in table.items())
            + "\n}"
        )
    yield "}\n"


def tensor_head(tensor: Tensor) -> dict[str, Any]:
    """A tensor's dtype (left out for ``float32``) and shape."""
    if tensor.dtype == DEFAULT_DTYPE:
        return {"shape": list(tensor.shape)}
    return {"dtype": tensor.dtype, "shape": list(tensor.shape)}


def module_of(metadata: dict[str, Any] | None, enclosing: str | None) -> str | None:
    """The module a child's relative ``class`` continues: its own class's, or the enclosing one."""
    found = (metadata or {}).get("class")
    if isinstance(found, str) and "." in found:
        return found.rpartition(".")[0]
    return enclosing


def short_checksum(checksum: str) -> str:
    """An ``xxh3-64`` checksum is written as its 16 hexadecimal digits alone."""
    return checksum[len(XXH3_PREFIX) :] if checksum.startswith(XXH3_PREFIX) else checksum


def metadata_members(metadata: dict[str, Any] | None, module: str | None = None) -> dict[str, Any]:
    """A node's metadata as members: its ``class`` (when a string a reader takes back as it is:
    not empty, not starting with a dot) as ``class``, the rest as ``meta``; an explicit empty
    metadata stays ``"meta": {}``. A class of the enclosing class's ``module`` is written
    relative to it (``.BertSelfAttention``)."""
    if metadata is None:
        return {}
    members: dict[str, Any] = {}
    rest = metadata
    found = metadata.get("class")
    if isinstance(found, str) and found and not found.startswith("."):
        head, dot, tail = found.rpartition(".")
        members["class"] = f".{tail}" if dot and head == module and tail else found
        rest = {key: value for key, value in metadata.items() if key != "class"}
        if not rest:
            return members
    members["meta"] = rest
    return members


def encode_fact(fact: ValueFact | None) -> dict[str, Any] | None:
    """A fact as both forms of the format write it (``null`` for nothing known)."""
    if fact is None:
        return None
    out: dict[str, Any] = {}
    if fact.dtype is not None:
        out["dtype"] = fact.dtype
    if fact.shape is not None:
        out["shape"] = list(fact.shape)
    return out


def encode_symbols(symbols: Mapping[str, SymbolRange]) -> dict[str, dict[str, int]]:
    """The ranges of the input symbols as both forms of the format write them (``symbols``):
    each bound that is known, ``{"min": 1, "max": 64}``, ``{}`` for none."""
    encoded: dict[str, dict[str, int]] = {}
    for name, bounds in symbols.items():
        members: dict[str, int] = {}
        if bounds.min is not None:
            members["min"] = bounds.min
        if bounds.max is not None:
            members["max"] = bounds.max
        encoded[name] = members
    return encoded


def _plain(value: Any) -> Any:
    return [_plain(item) for item in value] if isinstance(value, tuple | list) else value
