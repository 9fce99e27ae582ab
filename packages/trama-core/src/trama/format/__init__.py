"""The format layer: what a ``.trama.json`` document is, and reading, writing and checking it.

Nothing here knows about plugins, frameworks or running a model: a document, its tensors and
the specs its ops are checked against (:class:`OpSpec`, :class:`OpRegistry`) are plain data.
Layers above: extension, catalog, conversion, execution, tools (``docs/architecture.md``).
"""

from __future__ import annotations

from trama.format._dtypes import DTYPE_NAMES, SAFETENSORS_DTYPES, dtype_name, numpy_dtype
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
from trama.format._problems import Problem, document_problems, schema_violations
from trama.format._schema import json_schema
from trama.format._serialization import atomic_file, dump, dumps, load, loads, weights_path
from trama.format._specs import PARAMETER_TYPES, Exporter, OpRegistry, OpSpec, ParameterSchema, value_type
from trama.format._tensor import Base64Source, Tensor, TensorSource, base64_length, encode_base64
from trama.format._validation import DOTTED_ID, NAME, collect_errors, registry_errors, structural_errors, validate

__all__ = [
    "DOTTED_ID",
    "DTYPE_NAMES",
    "INPUT",
    "NAME",
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
