"""The JSON Schema (draft 2020-12) of the current format.

The schema states the shape of a document: fields, types, identifier patterns, value forms.
Rules that relate nodes to each other (scopes, order, bindings, the table being fully used) are
beyond JSON Schema and are checked by :mod:`trama.format._validation`; ``docs/format.md`` states both.
"""

from __future__ import annotations

import copy
from typing import Any

from trama.format._codec import MAX_FACT_DIM
from trama.format._dtypes import DTYPE_NAMES
from trama.format._names import MAX_ENTRY_SEGMENTS, MAX_NAME_LENGTH, MAX_NODE_DEPTH, SEGMENT
from trama.format._tensor import MAX_RANK
from trama.version import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION

__all__ = ["ENTRY_NAME_PATTERN", "NODE_ID_PATTERN", "json_schema"]

#: Node ids: at most MAX_NODE_DEPTH segments. Entry names: at most MAX_ENTRY_SEGMENTS.
NODE_ID_PATTERN = rf"^{SEGMENT}(\.{SEGMENT}){{0,{MAX_NODE_DEPTH - 1}}}$"
ENTRY_NAME_PATTERN = rf"^{SEGMENT}(\.{SEGMENT}){{0,{MAX_ENTRY_SEGMENTS - 1}}}$"
_NAME = rf"^{SEGMENT}$"
#: Op names and opset namespaces, as trama.format._names.OP_NAME (length bounded by maxLength).
_OP_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_VERSIONS = rf"^{FORMAT_MAJOR}\.({'|'.join(str(minor) for minor in range(FORMAT_MINOR + 1))})$"
_CHECKSUM = "^(xxh3-64:[0-9a-f]{16}|sha256:[0-9a-f]{64})$"

#: The members every node has, whether it is a calling node or not.
_NODE_MEMBERS: dict[str, Any] = {
    "id": {"type": "string", "pattern": NODE_ID_PATTERN},
    "parent": {"anyOf": [{"type": "null"}, {"type": "string", "pattern": NODE_ID_PATTERN}]},
    "op": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": _OP_NAME},
    "inputs": {"$ref": "#/$defs/refs"},
    "outputs": {"type": "array", "items": {"type": "string", "pattern": _NAME}, "uniqueItems": True},
    "metadata": {
        "type": ["object", "null"],
        "description": "Free-form, as the document's; null is the same as absent.",
    },
}

_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://trama.dev/schema/format-{FORMAT_VERSION}.json",
    "title": f"trama document, format {FORMAT_VERSION}",
    "description": "A hierarchical model graph in SSA form with its parameter table. See docs/format.md.",
    "type": "object",
    "required": ["format_version", "inputs", "outputs", "nodes", "parameters"],
    "additionalProperties": False,
    "properties": {
        # This version or an older minor of it: a newer minor may add fields that
        # additionalProperties would refuse. (Members new in a minor, like "calls" in 1.1 and an
        # entry's "checksum" in 1.2, are refused in older-minor documents by the decoder, not here.)
        "format_version": {"type": "string", "pattern": _VERSIONS},
        "metadata": {"$ref": "#/$defs/metadata"},
        "opsets": {
            "type": "object",
            "description": "Opset version each op namespace relies on ('trama' is the standard catalog).",
            "propertyNames": {"maxLength": MAX_NAME_LENGTH, "pattern": _OP_NAME},
            "additionalProperties": {"type": "integer", "minimum": 1},
        },
        "inputs": {"type": "array", "items": {"type": "string", "pattern": _NAME}},
        "input_facts": {"type": ["array", "null"], "items": {"$ref": "#/$defs/fact"}},
        "outputs": {"type": "array", "items": {"$ref": "#/$defs/ref"}},
        "output_facts": {"type": ["array", "null"], "items": {"$ref": "#/$defs/fact"}},
        "nodes": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        "parameters": {
            "type": "object",
            "propertyNames": {"pattern": ENTRY_NAME_PATTERN},
            "additionalProperties": {"$ref": "#/$defs/entry"},
        },
    },
    "$defs": {
        "metadata": {"type": "object", "description": "Free-form; see docs/format.md for the known keys."},
        "ref": {
            "type": "object",
            "required": ["node", "output"],
            "additionalProperties": False,
            "properties": {
                "node": {"type": "string", "anyOf": [{"const": "%input"}, {"pattern": NODE_ID_PATTERN}]},
                "output": {"type": "string", "pattern": _NAME},
            },
        },
        "refs": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": {"$ref": "#/$defs/ref"},
        },
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
        "node": {
            "type": "object",
            "description": "A calling node when it has 'calls', else a leaf or a composite.",
            "if": {"required": ["calls"]},
            "then": {"$ref": "#/$defs/calling_node"},
            "else": {"$ref": "#/$defs/block_node"},
        },
        "calling_node": {
            "type": "object",
            "description": "Computes what the node named by 'calls' computes, on its own inputs; its op and "
            "outputs repeat that node's, and it has no parameters, bindings or children of its own.",
            "required": ["id", "parent", "op", "calls", "inputs", "outputs"],
            "additionalProperties": False,
            "properties": {**_NODE_MEMBERS, "calls": {"type": "string", "pattern": NODE_ID_PATTERN}},
        },
        "block_node": {
            "type": "object",
            "description": "A leaf (output_bindings null) or a composite.",
            "required": ["id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings"],
            "additionalProperties": False,
            "properties": {
                **_NODE_MEMBERS,
                "parameters": {
                    "type": "object",
                    "propertyNames": {"pattern": _NAME},
                    "additionalProperties": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {"name": {"type": "string", "pattern": ENTRY_NAME_PATTERN}},
                    },
                },
                "output_bindings": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/refs"}]},
            },
        },
        "entry": {
            "type": "object",
            "required": ["value", "learnable"],
            "additionalProperties": False,
            "properties": {
                "value": {"$ref": "#/$defs/value"},
                "learnable": {"type": "boolean"},
                "checksum": {
                    "type": "string",
                    "pattern": _CHECKSUM,
                    "description": "New in 1.2, for an inline tensor value: the hash of '<dtype>[<d0>,<d1>,...]' "
                    "followed by the tensor's little-endian C-order bytes",
                },
            },
            "dependentSchemas": {"checksum": {"properties": {"value": {"$ref": "#/$defs/tensor"}}}},
        },
        "value": {
            "anyOf": [
                {"type": ["boolean", "integer", "number", "string", "null"]},
                {"$ref": "#/$defs/list"},
                {"$ref": "#/$defs/tensor"},
                {"$ref": "#/$defs/external_tensor"},
            ]
        },
        "list": {
            "type": "array",
            "items": {
                "anyOf": [{"type": ["boolean", "integer", "number", "string", "null"]}, {"$ref": "#/$defs/list"}]
            },
        },
        "shape": {"type": "array", "maxItems": MAX_RANK, "items": {"type": "integer", "minimum": 0}},
        "tensor": {
            "type": "object",
            "required": ["dtype", "shape", "data"],
            "additionalProperties": False,
            "properties": {
                "dtype": {"enum": list(DTYPE_NAMES)},
                "shape": {"$ref": "#/$defs/shape"},
                "data": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9+/]*={0,2}$",
                    "description": "base64 of little-endian C-order bytes",
                },
            },
        },
        "external_tensor": {
            "type": "object",
            "required": ["dtype", "shape", "external"],
            "additionalProperties": False,
            "properties": {
                "dtype": {"enum": list(DTYPE_NAMES)},
                "shape": {"$ref": "#/$defs/shape"},
                "external": {
                    "type": "object",
                    "required": ["path", "key", "checksum"],
                    "additionalProperties": False,
                    "properties": {
                        "path": {"type": "string", "minLength": 1},
                        "key": {"type": "string"},
                        "checksum": {"type": "string", "pattern": _CHECKSUM},
                    },
                },
            },
        },
    },
}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the current format (a fresh copy the caller may change)."""
    return copy.deepcopy(_SCHEMA)
