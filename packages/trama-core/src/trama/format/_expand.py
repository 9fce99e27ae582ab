"""Reading format 1.3: the nested text brought to the flat shape of the current model.

A 1.3 document (:mod:`trama.format._compact` writes it; ``docs/format.md`` describes it) is read
the careful way by expanding it, as parsed JSON, into the flat node list and parameter table
that :func:`~trama.format._codec.decode_document` reads for 1.2: each node gets its dotted id,
each short reference (``"q_proj"``, ``"rotary.cos"``, ``"%x"``) its node and output, each setting
an entry named ``<node id>.<slot>``, each block instance a copy of its block's body with its own
ids and tensors. So every rule the format had before 1.3 is checked by the code that always
checked it, and only what is new here (names, references, blocks, tensors) is checked here.

**Where an error is.** Everything reported here is located in the 1.3 text (``/nodes/0/nodes/3/in``,
``/blocks/LlamaDecoderLayer/nodes/2/set/weight``). Rules checked after the expansion report a
place in the flat form; :class:`Places` maps it back (:meth:`Places.locate`), node by node, and
names the block instance a body node was expanded for.

**Bounded.** A block may be used by another block, so a few lines of text could stand for
exponentially many nodes. An expansion that would make more nodes than
:data:`MAX_EXPANSION_FACTOR` per node object in the text, plus :data:`EXPANSION_ALLOWANCE`, is
refused before it allocates them; a block that uses itself, directly or not, is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trama.errors import SchemaError, TramaError, pointer_token
from trama.format._compact import COMPOSITE_OP, DEFAULT_DTYPE, SOLE_OUTPUT, SOLE_PORT, XXH3_PREFIX, module_of
from trama.format._external import safetensors_key
from trama.format._lazy import is_tensor
from trama.format._model import INPUT
from trama.format._names import NAME
from trama.format._stack import nested_room

__all__ = ["EXPANSION_ALLOWANCE", "MAX_EXPANSION_FACTOR", "Places", "expand_document"]

#: Nodes an expansion may make per node object written in the text, beyond the allowance.
MAX_EXPANSION_FACTOR = 64
#: Nodes any document may expand to, whatever its text.
EXPANSION_ALLOWANCE = 65_536

_TOP_KEYS = frozenset(
    {
        "format_version",
        "metadata",
        "opsets",
        "inputs",
        "input_facts",
        "symbols",
        "outputs",
        "output_facts",
        "weights",
        "blocks",
        "nodes",
        "parameters",
    }
)
_NODE_KEYS = frozenset({"name", "op", "in", "out", "set", "class", "meta", "nodes", "calls"})
_INSTANCE_KEYS = frozenset({"name", "use", "in", "tensors"})
_BLOCK_KEYS = frozenset({"op", "in", "out", "set", "class", "meta", "nodes"})
_TENSOR_KEYS = frozenset({"dtype", "shape", "data", "checksum", "external", "learnable"})
#: A member left out (where ``null`` is a value, and refused).
_ABSENT: Any = object()
_HEX16 = re.compile(r"[0-9a-fA-F]{16}\Z")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}.get(
        type(value), "an object"
    )


@dataclass
class Places:
    """Where each node and entry of the flat form was written in the 1.3 text."""

    #: For node ``k`` of the flat list: its pointer, and the instance it was expanded for.
    nodes: list[tuple[str, str | None]] = field(default_factory=list)
    #: For an entry written in a node: the pointer of its value.
    entries: dict[str, str] = field(default_factory=dict)
    #: The entries whose tensor is in the document's weights file (their reference is implied).
    in_weights: set[str] = field(default_factory=set)

    def relocate_tensors(self, parameters: dict[str, Any]) -> None:
        """Point each tensor read from the text (and its source, which reports problems found
        on first use) at where the 1.3 text gives it, not at the flat form's table."""
        for name, where in self.entries.items():
            entry = parameters.get(name)
            value = getattr(entry, "value", None)
            if not is_tensor(value):
                continue
            value.location = where
            source: Any = value.source
            if source is not None and hasattr(source, "location"):
                source.location = where
                if hasattr(source, "checksum_location"):  # inline: its checksum is the object's own member
                    source.checksum_location = f"{where}/checksum"

    def locate(self, error: TramaError) -> TramaError:
        """``error`` with its location in the 1.3 text (the same error, changed in place)."""
        location = error.location
        if not location or not location.startswith("/"):
            return error
        parts = location.split("/")
        if len(parts) >= 3 and parts[1] == "nodes" and parts[2].isdigit() and int(parts[2]) < len(self.nodes):
            pointer, instance = self.nodes[int(parts[2])]
            rest = parts[3:]
            renamed = {"inputs": "in", "parameters": "set", "outputs": "out", "output_bindings": "out"}
            if rest:
                rest = [renamed.get(rest[0], "meta" if rest[0] == "metadata" else rest[0]), *rest[1:]]
            error.location = "/".join([pointer, *rest]) if rest else pointer
            if instance is not None:
                error.message = f"{error.message} (in block instance {instance!r})"
        elif len(parts) >= 3 and parts[1] == "parameters":
            name = parts[2].replace("~1", "/").replace("~0", "~")
            where = self.entries.get(name)
            if where is not None:
                rest = parts[4:] if len(parts) > 3 and parts[3] == "value" else parts[3:]
                if name in self.in_weights and rest[:1] == ["external"]:
                    # its external reference is implied: the file is the document's "weights"
                    if rest[1:2] == ["path"]:
                        where, rest = "/weights", []
                    else:  # its checksum is the tensor's own member; its key, the entry's name
                        rest = ["checksum"] if rest[1:2] == ["checksum"] else []
                error.location = "/".join([where, *rest])
        return error


class _Scope:
    """The names declared so far in one scope, and how a reference reads in it."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.outputs: dict[str, list[str]] = {}

    def ref(self, text: Any, where: str) -> dict[str, str]:
        if type(text) is not str:
            raise SchemaError(
                f"a reference is a string ('%input', 'node' or 'node.output'), got {_kind(text)}", location=where
            )
        if text.startswith("%"):
            return {"node": INPUT, "output": text[1:]}
        name, dot, output = text.partition(".")
        if dot:
            return {"node": self.prefix + name, "output": output}
        outputs = self.outputs.get(name)
        if outputs is None:
            raise SchemaError(f"refers to {text!r}, which is no earlier node of this scope", location=where)
        if len(outputs) != 1:
            listed = ", ".join(outputs) or "none"
            raise SchemaError(
                f"{text!r} has {len(outputs)} outputs ({listed}): name one, as {text}.<output>", location=where
            )
        return {"node": self.prefix + name, "output": outputs[0]}


@dataclass
class _Instance:
    """The outermost block instance being expanded: its id and the tensors it gives, in order."""

    node_id: str
    block: str
    fills: list[Any]
    where: str
    used: int = 0


class _Expander:
    def __init__(self, raw: dict[str, Any], text_nodes: int, strict: bool) -> None:
        self.raw = raw
        self.strict = strict
        self.places = Places()
        self.nodes: list[dict[str, Any]] = []
        self.table: dict[str, Any] = {}
        weights = raw.get("weights")
        if weights is not None and type(weights) is not str:
            raise SchemaError(f"must be a string (the weights file), got {_kind(weights)}", location="/weights")
        self.weights: str | None = weights
        blocks = raw.get("blocks", {})
        if type(blocks) is not dict:
            raise SchemaError(f"must be an object of blocks, got {_kind(blocks)}", location="/blocks")
        for name, block in blocks.items():
            where = f"/blocks/{pointer_token(name)}"
            if not NAME.match(name):
                raise SchemaError(f"a block's name is a plain name (letters, digits, _), got {name!r}", location=where)
            if type(block) is not dict:
                raise SchemaError(f"a block is an object, got {_kind(block)}", location=where)
            self.no_unknown(block, _BLOCK_KEYS, where)
            for member in ("in", "nodes", "out"):
                if member not in block:
                    raise SchemaError(f"missing required field {member!r}", location=where)
            ports = block["in"]
            if type(ports) is not list or any(type(port) is not str for port in ports):
                raise SchemaError("must be an array of port names", location=f"{where}/in")
            _bindings(block.get("out"), f"{where}/out")
        self.blocks: dict[str, Any] = blocks
        self.active: list[str] = []
        self.used_blocks: set[str] = set()
        self.limit = MAX_EXPANSION_FACTOR * text_nodes + EXPANSION_ALLOWANCE

    def no_unknown(self, raw: dict[str, Any], allowed: frozenset[str], where: str) -> None:
        if self.strict:
            _no_unknown(raw, allowed, where)

    # ----- nodes -------------------------------------------------------------------------------

    def scope(self, raw_nodes: Any, where: str, prefix: str, instance: _Instance | None, module: str | None) -> _Scope:
        if type(raw_nodes) is not list:
            raise SchemaError(f"must be an array of nodes, got {_kind(raw_nodes)}", location=where)
        scope = _Scope(prefix)
        for k, raw in enumerate(raw_nodes):
            self.node(raw, f"{where}/{k}", scope, instance, module)
        return scope

    def node(self, raw: Any, where: str, scope: _Scope, instance: _Instance | None, module: str | None) -> None:
        if type(raw) is not dict:
            raise SchemaError(f"a node is an object, got {_kind(raw)}", location=where)
        name = raw.get("name")
        if name is None and "id" in raw:
            raise SchemaError(
                "a node of format 1.3 has a 'name' and sits in its parent's 'nodes'; this one has an 'id', "
                "as in the flat form of format 1.2: is its format_version right?",
                location=where,
            )
        if type(name) is not str or not NAME.match(name):
            raise SchemaError(
                f"a node's name is a plain name (letters, digits, _), got {name!r}", location=f"{where}/name"
            )
        if name in scope.outputs:
            raise SchemaError(f"a second node named {name!r} in this scope", location=f"{where}/name")
        if len(self.nodes) >= self.limit:
            raise SchemaError(
                f"the document expands to more than {self.limit} nodes ({MAX_EXPANSION_FACTOR} per node "
                f"written, plus {EXPANSION_ALLOWANCE}): its blocks multiply beyond what its text justifies",
                location=where,
            )
        node_id = scope.prefix + name
        if "use" in raw:
            self.instance(raw, where, scope, node_id, instance)
            return
        self.no_unknown(raw, _NODE_KEYS, where)
        inputs = self.wires(raw.get("in", _ABSENT), f"{where}/in", scope)
        composite = "nodes" in raw or type(raw.get("out")) is dict
        op = raw.get("op", COMPOSITE_OP if composite else None)
        if op is None:
            raise SchemaError("missing required field 'op'", location=where)
        flat: dict[str, Any] = {"id": node_id, "parent": scope.prefix[:-1] or None, "op": op}
        metadata = self.metadata(raw, where, module)
        calls = raw.get("calls")
        if calls is None and "calls" in raw:
            raise SchemaError("must be a string (a node id), got null", location=f"{where}/calls")
        index = len(self.nodes)
        self.nodes.append(flat)
        self.places.nodes.append((where, None if instance is None else instance.node_id))
        if calls is not None:
            if composite or "set" in raw:
                raise SchemaError("a calling node has no set, nodes or out object of its own", location=where)
            if type(calls) is not str:
                raise SchemaError(f"must be a string (a node id), got {_kind(calls)}", location=f"{where}/calls")
            flat["calls"] = calls if instance is None else f"{instance.node_id}.{calls}"
        flat["inputs"] = inputs
        if composite:
            bound = _bindings(raw.get("out"), f"{where}/out")
            flat["outputs"] = list(bound)
        else:
            flat["outputs"] = self.output_names(raw.get("out", ["y"]), f"{where}/out")
        scope.outputs[name] = flat["outputs"] if type(flat["outputs"]) is list else []
        if calls is None:
            flat["parameters"] = self.slots(raw.get("set", {}), f"{where}/set", node_id, instance)
            flat["output_bindings"] = None
        if metadata is not None:
            flat["metadata"] = metadata
        if composite:
            inner = self.scope(
                raw.get("nodes", []), f"{where}/nodes", f"{node_id}.", instance, module_of(metadata, module)
            )
            flat["output_bindings"] = _bind(inner, bound, f"{where}/out")
        assert self.nodes[index] is flat

    def instance(self, raw: dict[str, Any], where: str, scope: _Scope, node_id: str, outer: _Instance | None) -> None:
        self.no_unknown(raw, _INSTANCE_KEYS, where)
        use = raw["use"]
        if type(use) is not str or use not in self.blocks:
            raise SchemaError(f"uses {use!r}, which is no block of this document", location=f"{where}/use")
        if use in self.active:
            chain = " -> ".join([*self.active[self.active.index(use) :], use])
            raise SchemaError(f"block {use!r} uses itself ({chain})", location=f"{where}/use")
        block = self.blocks[use]
        block_where = f"/blocks/{pointer_token(use)}"
        inputs = self.wires(raw.get("in", _ABSENT), f"{where}/in", scope)
        ports = block.get("in", [])
        if list(inputs) != list(ports):
            raise SchemaError(
                f"feeds ports {list(inputs)}, but block {use!r} has ports {list(ports)} (in that order)",
                location=f"{where}/in",
            )
        instance = outer
        if outer is None:
            fills = raw.get("tensors", [])
            if type(fills) is not list:
                raise SchemaError(f"must be an array of tensors, got {_kind(fills)}", location=f"{where}/tensors")
            instance = _Instance(node_id, use, fills, f"{where}/tensors")
        elif "tensors" in raw:
            raise SchemaError(
                "an instance inside a block body gives no tensors: the outermost instance gives them all",
                location=f"{where}/tensors",
            )
        self.active.append(use)
        self.used_blocks.add(use)
        metadata = self.metadata(block, block_where, None)
        flat: dict[str, Any] = {"id": node_id, "parent": scope.prefix[:-1] or None, "op": block.get("op", COMPOSITE_OP)}
        flat["inputs"] = inputs
        bound = _bindings(block["out"], f"{block_where}/out")
        flat["outputs"] = list(bound)
        self.nodes.append(flat)
        self.places.nodes.append((where, None if outer is None else outer.node_id))
        scope.outputs[raw["name"]] = flat["outputs"]
        flat["parameters"] = self.slots(block.get("set", {}), f"{block_where}/set", node_id, instance)
        flat["output_bindings"] = None
        if metadata is not None:
            flat["metadata"] = metadata
        inner = self.scope(
            block.get("nodes", []), f"{block_where}/nodes", f"{node_id}.", instance, module_of(metadata, None)
        )
        flat["output_bindings"] = _bind(inner, bound, f"{block_where}/out")
        self.active.pop()
        if outer is None:
            assert instance is not None
            if instance.used != len(instance.fills):
                raise SchemaError(
                    f"gives {len(instance.fills)} tensors, but block {use!r} holds {instance.used}",
                    location=instance.where,
                )

    def wires(self, raw: Any, where: str, scope: _Scope) -> dict[str, dict[str, str]]:
        if raw is _ABSENT:
            return {}
        if type(raw) is str:
            return {SOLE_PORT: scope.ref(raw, where)}
        if type(raw) is not dict:
            raise SchemaError(f"must be a reference or an object of references, got {_kind(raw)}", location=where)
        return {port: scope.ref(ref, f"{where}/{pointer_token(port)}") for port, ref in raw.items()}

    def output_names(self, raw: Any, where: str) -> Any:
        if type(raw) is not list:
            raise SchemaError(f"must be an array of output names, got {_kind(raw)}", location=where)
        return raw

    def metadata(self, raw: dict[str, Any], where: str, module: str | None) -> dict[str, Any] | None:
        meta = raw.get("meta")
        if meta is not None and type(meta) is not dict:
            raise SchemaError(f"must be an object, got {_kind(meta)}", location=f"{where}/meta")
        found = raw.get("class")
        if found is None and "class" not in raw:
            return meta
        if type(found) is not str or not found:
            raise SchemaError(f"must be a class name, got {found!r}", location=f"{where}/class")
        if meta is not None and "class" in meta:
            raise SchemaError("the class is given twice: as 'class' and in 'meta'", location=f"{where}/meta/class")
        if found.startswith("."):
            if module is None:
                raise SchemaError(
                    f"{found!r} is relative, but no enclosing node has a class to continue", location=f"{where}/class"
                )
            found = module + found
        return {"class": found, **(meta or {})}

    # ----- values ------------------------------------------------------------------------------

    def slots(self, raw: Any, where: str, node_id: str, instance: _Instance | None) -> dict[str, dict[str, str]]:
        if type(raw) is not dict:
            raise SchemaError(f"must be an object: slot -> value, got {_kind(raw)}", location=where)
        slots: dict[str, dict[str, str]] = {}
        for slot, value in raw.items():
            here = f"{where}/{pointer_token(slot)}"
            if type(value) is dict and "ref" in value:
                if set(value) != {"ref"} or type(value["ref"]) is not str:
                    raise SchemaError('a reference to the table is {"ref": entry name}', location=here)
                slots[slot] = {"name": value["ref"]}
                continue
            name = f"{node_id}.{slot}"
            if name in self.table:
                raise SchemaError(f"entry {name!r} is both written here and in another place", location=here)
            self.places.entries[name] = here
            self.table[name] = self.entry(value, here, name, instance)
            slots[slot] = {"name": name}
        return slots

    def entry(self, value: Any, where: str, name: str, instance: _Instance | None) -> dict[str, Any]:
        """The 1.2 entry a 1.3 value stands for. An object with ``size`` is a size, a plain
        setting (the flat decoder reads it, and refuses one with other members there)."""
        if type(value) is not dict:
            return {"value": value, "learnable": False}
        if "size" in value:
            return {"value": value, "learnable": False}
        if "shape" in value:
            return self.tensor(value, where, name, instance)
        if set(value) == {"value", "learnable"}:
            return dict(value)
        raise SchemaError(
            'an object here is a tensor ({"shape": ...}), a reference to the table ({"ref": ...}), a size '
            f'({{"size": text}}) or {{"value": ..., "learnable": ...}}, got members {sorted(value)}',
            location=where,
        )

    def tensor(self, value: dict[str, Any], where: str, name: str, instance: _Instance | None) -> dict[str, Any]:
        self.no_unknown(value, _TENSOR_KEYS, where)
        learnable = value.get("learnable", True)
        tensor = {"dtype": value.get("dtype", DEFAULT_DTYPE), "shape": value["shape"]}
        sources = [key for key in ("data", "checksum", "external") if key in value]
        if not sources:
            if instance is None:
                raise SchemaError(
                    "a tensor outside a block body says where its values are: data, checksum or external",
                    location=where,
                )
            if instance.used >= len(instance.fills):
                raise SchemaError(
                    f"gives {len(instance.fills)} tensors, but block {instance.block!r} holds more",
                    location=instance.where,
                )
            fill = instance.fills[instance.used]
            fill_where = f"{instance.where}/{instance.used}"
            instance.used += 1
            self.places.entries[name] = fill_where  # this instance's tensor: where its values are given
            if type(fill) is str:
                value = {"checksum": fill}
            elif type(fill) is dict and set(fill) in ({"data"}, {"data", "checksum"}, {"external"}):
                value = fill
            else:
                raise SchemaError(
                    'a tensor of an instance is a checksum, {"data": ..., "checksum": ...} or {"external": ...}',
                    location=fill_where,
                )
            where = fill_where
        if "data" in value and "external" in value:
            raise SchemaError("a tensor's values are in its data or in an external file, not both", location=where)
        entry: dict[str, Any] = {"value": tensor, "learnable": learnable}
        if "data" in value:
            tensor["data"] = value["data"]
            if "checksum" in value:
                entry["checksum"] = _checksum(value["checksum"])
        elif "external" in value:
            if "checksum" in value:
                raise SchemaError("an external tensor's checksum is inside its external reference", location=where)
            tensor["external"] = value["external"]
        else:
            if self.weights is None:
                raise SchemaError(
                    "a tensor given by its checksum alone is in the document's weights file, "
                    "but the document names none ('weights')",
                    location=where,
                )
            self.places.in_weights.add(name)
            tensor["external"] = {
                "path": self.weights,
                "key": safetensors_key(name),
                "checksum": _checksum(value["checksum"]),
            }
        return entry

    def top_table(self, raw: Any) -> None:
        if raw is None:
            return
        if type(raw) is not dict:
            raise SchemaError(f"must be an object: entry -> value, got {_kind(raw)}", location="/parameters")
        for name, value in raw.items():
            here = f"/parameters/{pointer_token(name)}"
            if name in self.table:
                raise SchemaError(f"entry {name!r} is also written in its node", location=here)
            if type(value) is dict and "ref" in value:
                raise SchemaError("an entry of the table holds a value, not a reference", location=here)
            self.places.entries[name] = here
            self.table[name] = self.entry(value, here, name, None)


def _bindings(raw: Any, where: str) -> dict[str, Any]:
    """A composite's ``out``: output -> reference, or one reference (the output ``y``)."""
    if type(raw) is str:
        return {SOLE_OUTPUT: raw}
    if type(raw) is not dict:
        raise SchemaError(
            "a composite's out is a reference (its output y) or an object: output -> reference", location=where
        )
    return raw


def _bind(scope: _Scope, bound: dict[str, Any], where: str) -> dict[str, dict[str, str]]:
    if len(bound) == 1 and SOLE_OUTPUT in bound and type(bound[SOLE_OUTPUT]) is str:
        return {SOLE_OUTPUT: scope.ref(bound[SOLE_OUTPUT], where)}
    return {output: scope.ref(ref, f"{where}/{pointer_token(output)}") for output, ref in bound.items()}


def _checksum(value: Any) -> Any:
    """A checksum as 1.2 spells it: 16 hexadecimal digits alone are an ``xxh3-64`` checksum."""
    if type(value) is str and _HEX16.match(value):
        return XXH3_PREFIX + value
    return value


def _no_unknown(raw: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = set(raw) - allowed
    if unknown:
        raise SchemaError(f"unknown field(s) {sorted(unknown)} (allowed: {sorted(allowed)})", location=where)


def _count_nodes(raw: Any) -> int:
    """The node objects written in the text (blocks included), iteratively."""
    count = 0
    stack = [raw.get("nodes")]
    blocks = raw.get("blocks")
    if type(blocks) is dict:
        stack.extend(block.get("nodes") for block in blocks.values() if type(block) is dict)
    while stack:
        nodes = stack.pop()
        if type(nodes) is not list:
            continue
        count += len(nodes)
        stack.extend(node.get("nodes") for node in nodes if type(node) is dict)
    return count


def expand_document(raw: dict[str, Any], *, strict: bool = True) -> tuple[dict[str, Any], Places]:
    """A 1.3 document (parsed) as the current flat shape, and where each part was written.
    A newer minor (``strict`` false) may carry members this reader does not know: ignored."""
    with nested_room():  # a level of nesting costs the expansion a few frames
        return _expand_document(raw, strict=strict)


def _expand_document(raw: dict[str, Any], *, strict: bool) -> tuple[dict[str, Any], Places]:
    if strict:
        _no_unknown(raw, _TOP_KEYS, "")
    for key in ("inputs", "outputs", "nodes"):
        if key not in raw:
            raise SchemaError(f"missing required field {key!r}", location="/")
    expander = _Expander(raw, _count_nodes(raw), strict)
    top = expander.scope(raw["nodes"], "/nodes", "", None, None)
    outputs = raw["outputs"]
    if type(outputs) is not list:
        raise SchemaError(f"must be an array of references, got {_kind(outputs)}", location="/outputs")
    flat_outputs = [top.ref(ref, f"/outputs/{k}") for k, ref in enumerate(outputs)]
    expander.top_table(raw.get("parameters"))
    for name in expander.blocks:
        if name not in expander.used_blocks:
            raise SchemaError(f"block {name!r} is used by no node", location=f"/blocks/{pointer_token(name)}")
    flat: dict[str, Any] = {"format_version": raw["format_version"]}
    for key in ("metadata", "opsets", "inputs", "input_facts", "symbols"):
        if key in raw:
            flat[key] = raw[key]
    flat["outputs"] = flat_outputs
    if "output_facts" in raw:
        flat["output_facts"] = raw["output_facts"]
    flat["nodes"] = expander.nodes
    flat["parameters"] = expander.table
    return flat, expander.places
