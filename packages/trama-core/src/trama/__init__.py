"""trama: a JSON format and library for hierarchical model graphs.

The quick start::

    import trama
    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)
    trama.dump(model, "my_model.trama.json")
    model = trama.load("my_model.trama.json")
    instance = trama.import_model(model, registry=registry)
"""

from trama.errors import (
    ExecutionError,
    ExportError,
    FormatVersionError,
    ImportModelError,
    JSONError,
    RegistryError,
    RuntimeNotFoundError,
    SchemaError,
    TensorDataError,
    TramaError,
    ValidationError,
    WeightsFileError,
)
from trama.export import ExportContext, export_model
from trama.importer import Children, import_model
from trama.model import INPUT, Model, Node, Parameter, ParameterValue, Ref, ValueFact
from trama.opregistry import OpRegistry, OpSpec, ParameterSchema
from trama.plugins import registry
from trama.protocols import ExportableOp, ImportableOp, NodeFragment, Param
from trama.runtime import FrozenState, Runnable, Runtime, State, runtime_for_name, runtimes
from trama.schema import json_schema
from trama.serialization import dump, dumps, load, loads, weights_path
from trama.tensor import Tensor
from trama.validation import collect_errors, validate
from trama.version import FORMAT_VERSION, __version__

__all__ = [
    "FORMAT_VERSION",
    "INPUT",
    "Children",
    "ExecutionError",
    "ExportContext",
    "ExportError",
    "ExportableOp",
    "FormatVersionError",
    "FrozenState",
    "ImportModelError",
    "ImportableOp",
    "JSONError",
    "Model",
    "Node",
    "NodeFragment",
    "OpRegistry",
    "OpSpec",
    "Param",
    "Parameter",
    "ParameterSchema",
    "ParameterValue",
    "Ref",
    "RegistryError",
    "Runnable",
    "Runtime",
    "RuntimeNotFoundError",
    "SchemaError",
    "State",
    "Tensor",
    "TensorDataError",
    "TramaError",
    "ValidationError",
    "ValueFact",
    "WeightsFileError",
    "__version__",
    "collect_errors",
    "dump",
    "dumps",
    "export_model",
    "import_model",
    "json_schema",
    "load",
    "loads",
    "registry",
    "runtime_for_name",
    "runtimes",
    "validate",
    "weights_path",
]
