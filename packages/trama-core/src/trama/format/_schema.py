"""The JSON Schemas (draft 2020-12) of the format: the current, nested one (1.3) and the flat
one (1.0 to 1.2), which trama still reads and can still write.

A schema states the shape of a document: fields, types, identifier patterns, value forms, and
in 1.3 which of the three kinds a node object is (a leaf or a calling node, a composite, a block
instance). Rules that relate nodes to each other (scopes, order, bindings, what a reference
names, the table being fully used, a block instance's tensors matching its block, how deep the
tree nests) are beyond JSON Schema and are checked by :mod:`trama.format._expand` and
:mod:`trama.format._validation`; ``docs/format.md`` states both.
"""

from __future__ import annotations

import copy
from typing import Any

from trama.format._codec import FLAT_VERSION, MAX_FACT_DIM, NESTED_SINCE
from trama.format._dtypes import DTYPE_NAMES
from trama.format._names import MAX_ENTRY_SEGMENTS, MAX_NAME_LENGTH, MAX_NODE_DEPTH, SEGMENT
from trama.format._sizes import MAX_SIZE_TEXT
from trama.format._tensor import MAX_RANK
from trama.version import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION

__all__ = ["ENTRY_NAME_PATTERN", "NODE_ID_PATTERN", "json_schema", "nested_version"]

#: Node ids: at most MAX_NODE_DEPTH segments. Entry names: at most MAX_ENTRY_SEGMENTS.
NODE_ID_PATTERN = rf"^{SEGMENT}(\.{SEGMENT}){{0,{MAX_NODE_DEPTH - 1}}}$"
ENTRY_NAME_PATTERN = rf"^{SEGMENT}(\.{SEGMENT}){{0,{MAX_ENTRY_SEGMENTS - 1}}}$"
_NAME = rf"^{SEGMENT}$"
#: Op names and opset namespaces, as trama.format._names.OP_NAME (length bounded by maxLength).
_OP_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_XXH3 = "xxh3-64:[0-9a-f]{16}"
_SHA256 = "sha256:[0-9a-f]{64}"
_CHECKSUM = f"^({_XXH3}|{_SHA256})$"
#: A checksum as 1.3 writes it beside a tensor: 16 hexadecimal digits alone are an xxh3-64 one.
_SHORT_CHECKSUM = f"^([0-9a-f]{{16}}|{_XXH3}|{_SHA256})$"
#: A reference in 1.3: ``%x`` (an input of the scope), ``a`` (the only output of the earlier
#: sibling a) or ``a.o`` (output o of sibling a).
_REFERENCE = rf"^(%{SEGMENT}|{SEGMENT}(\.{SEGMENT})?)$"
#: The last minor of the flat shape.
_LAST_FLAT_MINOR = NESTED_SINCE[1] - 1


def _versions(first: int, last: int) -> str:
    return rf"^{FORMAT_MAJOR}\.({'|'.join(str(minor) for minor in range(first, last + 1))})$"


# ----- pieces both schemas use -------------------------------------------------------------

_OP: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": _OP_NAME}
_OUTPUT_NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string", "pattern": _NAME}, "uniqueItems": True}
_NODE_METADATA: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "Free-form, as the document's; null is the same as absent.",
}
_SCALAR: dict[str, Any] = {"type": ["boolean", "integer", "number", "string", "null"]}
_DTYPE: dict[str, Any] = {"enum": list(DTYPE_NAMES)}
_DATA: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z0-9+/]*={0,2}$",
    "description": "base64 of little-endian C-order bytes",
}
_EXTERNAL: dict[str, Any] = {
    "type": "object",
    "required": ["path", "key", "checksum"],
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "key": {"type": "string"},
        "checksum": {"type": "string", "pattern": _CHECKSUM},
    },
}

#: The document's members that are the same in both shapes.
_COMMON_MEMBERS: dict[str, Any] = {
    "metadata": {"$ref": "#/$defs/metadata"},
    "opsets": {
        "type": "object",
        "description": "Opset version each op namespace relies on ('trama' is the standard catalog).",
        "propertyNames": {"maxLength": MAX_NAME_LENGTH, "pattern": _OP_NAME},
        "additionalProperties": {"type": "integer", "minimum": 1},
    },
    "inputs": {"type": "array", "items": {"type": "string", "pattern": _NAME}},
    "input_facts": {"type": ["array", "null"], "items": {"$ref": "#/$defs/fact"}},
    "symbols": {
        "type": "object",
        "description": "The sizes each symbol of the input facts' shapes may take, bounds included "
        "(docs/format.md, section 5.6).",
        "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "not": {"enum": ["min", "max"]}},
        "additionalProperties": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "min": {"type": "integer", "minimum": 0, "maximum": MAX_FACT_DIM},
                "max": {"type": "integer", "minimum": 0, "maximum": MAX_FACT_DIM},
            },
        },
    },
    "output_facts": {"type": ["array", "null"], "items": {"$ref": "#/$defs/fact"}},
}

#: Definitions both schemas hold: the free-form metadata, a value fact, and a parameter value
#: in the forms of 1.2 (which a 1.3 ``{"value": ..., "learnable": ...}`` setting holds too).
_COMMON_DEFS: dict[str, Any] = {
    "metadata": {"type": "object", "description": "Free-form; see docs/format.md for the known keys."},
    "fact": {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "dtype": {"enum": [*DTYPE_NAMES, None]},
            "shape": {
                "type": ["array", "null"],
                "maxItems": MAX_RANK,
                "items": {
                    "anyOf": [
                        {"type": "integer", "minimum": 0, "maximum": MAX_FACT_DIM},
                        {"type": "string", "minLength": 1},
                    ]
                },
            },
        },
    },
    "value": {
        "anyOf": [
            _SCALAR,
            {"$ref": "#/$defs/list"},
            {"$ref": "#/$defs/tensor"},
            {"$ref": "#/$defs/external_tensor"},
            {"$ref": "#/$defs/size"},
        ]
    },
    # An item that is an object with "size" is a size (a reader tells it by that member, as it
    # tells a node's kind by its members); any other item is a scalar or a list.
    "list": {
        "type": "array",
        "items": {
            "if": {"type": "object", "required": ["size"]},
            "then": {"$ref": "#/$defs/size"},
            "else": {"anyOf": [_SCALAR, {"$ref": "#/$defs/list"}]},
        },
    },
    "size": {
        "type": "object",
        "description": "A size computed from the input symbols when the model runs: an expression over the "
        "symbols of the input facts' shapes (docs/format.md, section 5.6).",
        "required": ["size"],
        "additionalProperties": False,
        "properties": {"size": {"type": "string", "minLength": 1, "maxLength": MAX_SIZE_TEXT}},
    },
    "shape": {"type": "array", "maxItems": MAX_RANK, "items": {"type": "integer", "minimum": 0}},
    "tensor": {
        "type": "object",
        "required": ["dtype", "shape", "data"],
        "additionalProperties": False,
        "properties": {"dtype": _DTYPE, "shape": {"$ref": "#/$defs/shape"}, "data": _DATA},
    },
    "external_tensor": {
        "type": "object",
        "required": ["dtype", "shape", "external"],
        "additionalProperties": False,
        "properties": {"dtype": _DTYPE, "shape": {"$ref": "#/$defs/shape"}, "external": _EXTERNAL},
    },
}


def _object(required: list[str], properties: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """An object with these members and no others."""
    head: dict[str, Any] = {"type": "object"}
    if description is not None:
        head["description"] = description
    return {**head, "required": required, "additionalProperties": False, "properties": properties}


# ----- the flat shape: 1.0 to 1.2 ----------------------------------------------------------

#: The members every node has, whether it is a calling node or not.
_NODE_MEMBERS: dict[str, Any] = {
    "id": {"type": "string", "pattern": NODE_ID_PATTERN},
    "parent": {"anyOf": [{"type": "null"}, {"type": "string", "pattern": NODE_ID_PATTERN}]},
    "op": _OP,
    "inputs": {"$ref": "#/$defs/refs"},
    "outputs": _OUTPUT_NAMES,
    "metadata": _NODE_METADATA,
}

_FLAT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://trama.dev/schema/format-{FLAT_VERSION}.json",
    "title": f"trama document, format {FLAT_VERSION}",
    "description": "A hierarchical model graph in SSA form with its parameter table. See docs/format.md.",
    "type": "object",
    "required": ["format_version", "inputs", "outputs", "nodes", "parameters"],
    "additionalProperties": False,
    "properties": {
        # This version or an older minor of it. (Members new in a minor, like "calls" in 1.1 and
        # an entry's "checksum" in 1.2, are refused in older-minor documents by the decoder, not
        # here.) 1.3 documents have their own schema: the nested one below.
        "format_version": {"type": "string", "pattern": _versions(0, _LAST_FLAT_MINOR)},
        "metadata": _COMMON_MEMBERS["metadata"],
        "opsets": _COMMON_MEMBERS["opsets"],
        "inputs": _COMMON_MEMBERS["inputs"],
        "input_facts": _COMMON_MEMBERS["input_facts"],
        "symbols": _COMMON_MEMBERS["symbols"],
        "outputs": {"type": "array", "items": {"$ref": "#/$defs/ref"}},
        "output_facts": _COMMON_MEMBERS["output_facts"],
        "nodes": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        "parameters": {
            "type": "object",
            "propertyNames": {"pattern": ENTRY_NAME_PATTERN},
            "additionalProperties": {"$ref": "#/$defs/entry"},
        },
    },
    "$defs": {
        "metadata": _COMMON_DEFS["metadata"],
        "ref": _object(
            ["node", "output"],
            {
                "node": {"type": "string", "anyOf": [{"const": "%input"}, {"pattern": NODE_ID_PATTERN}]},
                "output": {"type": "string", "pattern": _NAME},
            },
        ),
        "refs": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": {"$ref": "#/$defs/ref"},
        },
        "fact": _COMMON_DEFS["fact"],
        "node": {
            "type": "object",
            "description": "A calling node when it has 'calls', else a leaf or a composite.",
            "if": {"required": ["calls"]},
            "then": {"$ref": "#/$defs/calling_node"},
            "else": {"$ref": "#/$defs/block_node"},
        },
        "calling_node": _object(
            ["id", "parent", "op", "calls", "inputs", "outputs"],
            {**_NODE_MEMBERS, "calls": {"type": "string", "pattern": NODE_ID_PATTERN}},
            "Computes what the node named by 'calls' computes, on its own inputs; its op and "
            "outputs repeat that node's, and it has no parameters, bindings or children of its own.",
        ),
        "block_node": _object(
            ["id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings"],
            {
                **_NODE_MEMBERS,
                "parameters": {
                    "type": "object",
                    "propertyNames": {"pattern": _NAME},
                    "additionalProperties": _object(
                        ["name"], {"name": {"type": "string", "pattern": ENTRY_NAME_PATTERN}}
                    ),
                },
                "output_bindings": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/refs"}]},
            },
            "A leaf (output_bindings null) or a composite.",
        ),
        "entry": {
            **_object(
                ["value", "learnable"],
                {
                    "value": {"$ref": "#/$defs/value"},
                    "learnable": {"type": "boolean"},
                    "checksum": {
                        "type": "string",
                        "pattern": _CHECKSUM,
                        "description": "New in 1.2, for an inline tensor value: the hash of "
                        "'<dtype>[<d0>,<d1>,...]' followed by the tensor's little-endian C-order bytes",
                    },
                },
            ),
            "dependentSchemas": {"checksum": {"properties": {"value": {"$ref": "#/$defs/tensor"}}}},
        },
        **{key: _COMMON_DEFS[key] for key in ("value", "list", "size", "shape", "tensor", "external_tensor")},
    },
}


# ----- the nested shape: 1.3 ---------------------------------------------------------------

#: Where a node is written: at the top of the document (or in a composite there), or in a
#: block's body, where a tensor may leave its values to each instance and an instance gives no
#: tensors of its own (the outermost instance gives them all).
_TOP, _IN_BLOCK = "", "_in_block"


def _def(name: str, where: str = _TOP) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}{where}"}


_SHORT_CHECKSUM_MEMBER: dict[str, Any] = {"type": "string", "pattern": _SHORT_CHECKSUM}
#: What an external tensor (a 1.2 reference) may have: its checksum is in the reference.
_EXTERNAL_TENSOR_KEYS = ["dtype", "shape", "learnable", "external"]


def _own_tensor(where: str) -> dict[str, Any]:
    """A tensor written where it is used (in a node's set, or in the parameters): ``dtype``
    (float32 when left out), ``shape``, ``learnable`` (true when left out), and where its values
    are: ``data`` (base64, with its checksum), its ``checksum`` alone (it is in the document's
    weights file, under its entry's name) or an ``external`` reference of format 1.2. Only in a
    block body may a tensor say none of them: each instance gives its values (``tensors``)."""
    tensor: dict[str, Any] = {
        **_object(
            ["shape"],
            {
                "dtype": _DTYPE,
                "shape": _def("shape"),
                "learnable": {"type": "boolean"},
                "data": _DATA,
                "checksum": _SHORT_CHECKSUM_MEMBER,
                "external": _EXTERNAL,
            },
            "A tensor: inline ('data', with its 'checksum'), in the document's weights file ('checksum' "
            "alone) or in a file of its own ('external')"
            + (", or, in a block body, given by each instance ('tensors')." if where else "."),
        ),
        "dependentSchemas": {"external": {"propertyNames": {"enum": _EXTERNAL_TENSOR_KEYS}}},
    }
    if where == _TOP:  # with neither data nor external, the tensor is its checksum's
        tensor["if"] = {"not": {"anyOf": [{"required": ["data"]}, {"required": ["external"]}]}}
        tensor["then"] = {"required": ["checksum"]}
    return tensor


#: The members of a node object that every kind but a block instance has.
_NESTED_NODE_MEMBERS: dict[str, Any] = {
    "name": {"type": "string", "pattern": _NAME},
    "op": _OP,
    "in": _def("in"),
    "class": {
        "type": "string",
        "minLength": 1,
        "description": "metadata['class']; '.Name' is in the module of the nearest enclosing node's "
        "class (in a block body: the block's class).",
    },
    "meta": _NODE_METADATA,
}


def _scoped_defs(where: str) -> dict[str, Any]:
    """The definitions of the node objects and settings written at ``where``: at the top
    (``nodes`` and what nests in them) or in a block body (``nodes_in_block``...)."""
    instance = {"name": _NESTED_NODE_MEMBERS["name"], "use": {"type": "string", "pattern": _NAME}, "in": _def("in")}
    if where == _TOP:
        instance["tensors"] = {
            "type": "array",
            "description": "The values of every tensor the expanded instance holds that its block leaves "
            "open, in order: its own set first, then its descendants', depth-first in document order.",
            "items": _def("instance_tensor"),
        }
    return {
        f"nodes{where}": {"type": "array", "items": _def("node", where)},
        f"node{where}": {
            "type": "object",
            "description": "A block instance when it has 'use'; else a composite when it has 'nodes' or "
            "an object 'out'; else a calling node when it has 'calls'; else a leaf.",
            "if": {"required": ["use"]},
            "then": _def("instance", where),
            "else": {
                "if": {
                    "anyOf": [{"required": ["nodes"]}, {"required": ["out"], "properties": {"out": {"type": "object"}}}]
                },
                "then": _def("composite", where),
                "else": {"if": {"required": ["calls"]}, "then": _def("calling_node"), "else": _def("leaf", where)},
            },
        },
        f"leaf{where}": _object(
            ["name", "op"],
            {**_NESTED_NODE_MEMBERS, "out": _OUTPUT_NAMES, "set": _def("set", where)},
            "A node that computes its op: its outputs are named in 'out' (['y'] when left out).",
        ),
        f"composite{where}": _object(
            ["name", "out"],
            {**_NESTED_NODE_MEMBERS, "out": _def("bindings"), "set": _def("set", where), "nodes": _def("nodes", where)},
            "A node made of its children ('nodes', a scope of its own); 'out' binds each output to a "
            "reference in that scope (one reference: the output 'y'); its op is 'Graph' when left out.",
        ),
        f"instance{where}": _object(
            ["name", "use"],
            instance,
            "A composite whose op, set, class, meta, nodes and out are those of the block named by "
            "'use'; its 'in' feeds the block's ports, in their order.",
        ),
        f"set{where}": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": _def("setting", where),
        },
        f"setting{where}": {
            "description": "The value of a slot: the entry named '<node id>.<slot>', or a reference to "
            "an entry of the document's parameters.",
            # (the forms an object takes in the order they are tried: a table reference, the most
            # frequent in a document and the quickest to check, first)
            "anyOf": [
                _SCALAR,
                _def("list"),
                _def("entry_ref"),
                _def("own_tensor", where),
                _def("entry"),
                _def("size"),
            ],
        },
        f"own_tensor{where}": _own_tensor(where),
    }


_NESTED_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://trama.dev/schema/format-{FORMAT_VERSION}.json",
    "title": f"trama document, format {FORMAT_VERSION}",
    "description": "A hierarchical model graph in SSA form, nodes nested under their parents, settings and "
    "tensors written in the nodes that use them, repeated structures written once as blocks. "
    "See docs/format.md.",
    "type": "object",
    "required": ["format_version", "inputs", "outputs", "nodes"],
    "additionalProperties": False,
    "properties": {
        # This version or an older nested minor of it: a newer minor may add fields that
        # additionalProperties would refuse.
        "format_version": {"type": "string", "pattern": _versions(NESTED_SINCE[1], FORMAT_MINOR)},
        **{key: _COMMON_MEMBERS[key] for key in ("metadata", "opsets", "inputs", "input_facts", "symbols")},
        "outputs": {"type": "array", "items": _def("ref")},
        "output_facts": _COMMON_MEMBERS["output_facts"],
        "weights": {
            "type": "string",
            "minLength": 1,
            "description": "The safetensors file of the tensors given by their checksum alone (each under "
            "its entry's name), a path relative to the document's folder.",
        },
        "blocks": {"type": "object", "propertyNames": {"pattern": _NAME}, "additionalProperties": _def("block")},
        "nodes": _def("nodes"),
        "parameters": {
            "type": "object",
            "description": "The entries no single slot of a node holds: shared, tied or learnable settings.",
            "propertyNames": {"pattern": ENTRY_NAME_PATTERN},
            "additionalProperties": _def("table_value"),
        },
    },
    "$defs": {
        "metadata": _COMMON_DEFS["metadata"],
        "ref": {
            "type": "string",
            "pattern": _REFERENCE,
            "description": "'%x': input x of the scope; 'a': the only output of the earlier sibling a; "
            "'a.o': output o of sibling a.",
        },
        "refs": {"type": "object", "propertyNames": {"pattern": _NAME}, "additionalProperties": _def("ref")},
        "in": {
            "description": "Port -> reference, or one reference: the port 'x'.",
            "anyOf": [_def("ref"), _def("refs")],
        },
        "bindings": {
            "description": "A composite's outputs: output -> reference in its scope, or one reference: the output 'y'.",
            "anyOf": [_def("ref"), _def("refs")],
        },
        "fact": _COMMON_DEFS["fact"],
        "block": _object(
            ["in", "nodes", "out"],
            {
                "op": _OP,
                "in": {**_OUTPUT_NAMES, "description": "The block's ports, in order."},
                "class": _NESTED_NODE_MEMBERS["class"],
                "meta": _NESTED_NODE_MEMBERS["meta"],
                "set": _def("set", _IN_BLOCK),
                "nodes": _def("nodes", _IN_BLOCK),
                "out": _def("bindings"),
            },
            "A composite written once, expanded in every node that uses it.",
        ),
        **_scoped_defs(_TOP),
        **_scoped_defs(_IN_BLOCK),
        "calling_node": _object(
            ["name", "op", "calls"],
            {
                **_NESTED_NODE_MEMBERS,
                "calls": {
                    "type": "string",
                    "pattern": NODE_ID_PATTERN,
                    "description": "The full id of the node called (in a block body: relative to the instance).",
                },
                "out": _OUTPUT_NAMES,
            },
            "Computes what the node named by 'calls' computes, on its own inputs; its op and outputs "
            "repeat that node's, and it has no settings or children of its own.",
        ),
        "table_value": {
            "description": "An entry of the document's parameters.",
            "anyOf": [_SCALAR, _def("list"), _def("own_tensor"), _def("entry"), _def("size")],
        },
        "instance_tensor": {
            "description": "The values of a tensor its block leaves open: its checksum (it is in the "
            "document's weights file), its data (base64, with its checksum) or an external reference.",
            "anyOf": [
                _SHORT_CHECKSUM_MEMBER,
                _object(["data"], {"data": _DATA, "checksum": _SHORT_CHECKSUM_MEMBER}),
                _object(["external"], {"external": _EXTERNAL}),
            ],
        },
        "entry": _object(
            ["value", "learnable"],
            {"value": _def("value"), "learnable": {"type": "boolean"}},
            "An entry spelled out: its value in any form of format 1.2.",
        ),
        "entry_ref": _object(
            ["ref"],
            {"ref": {"type": "string", "pattern": ENTRY_NAME_PATTERN}},
            "The slot holds this entry of the document's parameters (shared or tied values).",
        ),
        **{key: _COMMON_DEFS[key] for key in ("value", "list", "size", "shape", "tensor", "external_tensor")},
    },
}


def nested_version(format_version: object) -> bool:
    """Whether ``format_version`` names a nested format (1.3 or a later minor of major 1),
    whose documents the nested schema is for; any other (1.0 to 1.2, another major, or no
    version at all) is judged by the flat schema."""
    if type(format_version) is not str:
        return False
    major, dot, minor = format_version.partition(".")
    if not (dot and major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()):
        return False
    return int(major) == FORMAT_MAJOR and int(minor) >= NESTED_SINCE[1]


def json_schema(format_version: str = FORMAT_VERSION) -> dict[str, Any]:
    """The JSON Schema of format ``format_version`` (a fresh copy the caller may change): by
    default the current format's, nested (1.3); ``"1.2"`` (or ``"1.0"``, ``"1.1"``) gives the
    flat form's, for the documents of 1.0 to 1.2."""
    nested = [f"{FORMAT_MAJOR}.{minor}" for minor in range(NESTED_SINCE[1], FORMAT_MINOR + 1)]
    flat = [f"{FORMAT_MAJOR}.{minor}" for minor in range(_LAST_FLAT_MINOR + 1)]
    if format_version in nested:
        return copy.deepcopy(_NESTED_SCHEMA)
    if format_version in flat:
        return copy.deepcopy(_FLAT_SCHEMA)
    raise ValueError(f"format_version must be one of {flat + nested}, got {format_version!r}")
