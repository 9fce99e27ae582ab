"""The format layer: what a ``.trama.json`` document is, and reading, writing and checking it.

Nothing here knows about plugins, frameworks or running a model: a document, its tensors and
the specs its ops are checked against (:class:`OpSpec`, :class:`OpRegistry`) are plain data.
Layers above: extension, catalog, conversion, execution, tools (``docs/architecture.md``).

The specs, the names and the model are plain Python and imported at once. Every other name is
imported from its module when first read (:mod:`trama.format._lazy`): tensors, reading and
writing import numpy and the problem listing jsonschema, which plugin discovery must not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.format._lazy import lazy_face

# Plain Python, which discovery needs anyway: imported here.
from trama.format._model import (
    INPUT,
    JSONValue,
    Model,
    Node,
    Parameter,
    ParameterValue,
    Ref,
    ValueFact,
    children_by_parent,
    parent_of,
)
from trama.format._names import DOTTED_ID, NAME
from trama.format._sizes import SizeExpr, SymbolRange
from trama.format._specs import NO_DEFAULT, PARAMETER_TYPES, Exporter, OpRegistry, OpSpec, ParameterSchema, value_type

if TYPE_CHECKING:
    from trama.format._dtypes import DTYPE_NAMES, SAFETENSORS_DTYPES, dtype_name, numpy_dtype
    from trama.format._problems import Problem, document_problems, schema_violations
    from trama.format._schema import json_schema
    from trama.format._serialization import atomic_file, dump, dumps, load, loads, weights_path
    from trama.format._tensor import Base64Source, Tensor, TensorSource, base64_length, encode_base64
    from trama.format._validation import collect_errors, registry_errors, structural_errors, validate

__all__ = [
    "DOTTED_ID",
    "DTYPE_NAMES",
    "INPUT",
    "NAME",
    "NO_DEFAULT",
    "PARAMETER_TYPES",
    "SAFETENSORS_DTYPES",
    "Base64Source",
    "Exporter",
    "JSONValue",
    "Model",
    "Node",
    "OpRegistry",
    "OpSpec",
    "Parameter",
    "ParameterSchema",
    "ParameterValue",
    "Problem",
    "Ref",
    "SizeExpr",
    "SymbolRange",
    "Tensor",
    "TensorSource",
    "ValueFact",
    "atomic_file",
    "base64_length",
    "children_by_parent",
    "collect_errors",
    "document_problems",
    "dtype_name",
    "dump",
    "dumps",
    "encode_base64",
    "json_schema",
    "load",
    "loads",
    "numpy_dtype",
    "parent_of",
    "registry_errors",
    "schema_violations",
    "structural_errors",
    "validate",
    "value_type",
    "weights_path",
]

#: The module (within this package) of each public name imported on first use.
_HOMES = {
    **dict.fromkeys(("DTYPE_NAMES", "SAFETENSORS_DTYPES", "dtype_name", "numpy_dtype"), "_dtypes"),
    **dict.fromkeys(("Problem", "document_problems", "schema_violations"), "_problems"),
    "json_schema": "_schema",
    **dict.fromkeys(("atomic_file", "dump", "dumps", "load", "loads", "weights_path"), "_serialization"),
    **dict.fromkeys(("Base64Source", "Tensor", "TensorSource", "base64_length", "encode_base64"), "_tensor"),
    **dict.fromkeys(("collect_errors", "registry_errors", "structural_errors", "validate"), "_validation"),
}

if not TYPE_CHECKING:  # mypy reads the imports above; at run time, each name on first use
    __getattr__, __dir__ = lazy_face(__name__, _HOMES)
