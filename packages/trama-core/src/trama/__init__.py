"""trama: a JSON format and library for hierarchical model graphs.

The quick start::

    import trama
    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)
    trama.dump(model, "my_model.trama.json")
    model = trama.load("my_model.trama.json")
    instance = trama.import_model(model, registry=registry)
"""

from trama.conversion import (
    Children,
    ExportableOp,
    ExportContext,
    ImportableOp,
    NodeFragment,
    Param,
    export_model,
    import_model,
)
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
    WriteError,
)
from trama.execution import FrozenState, Runnable, Runtime, State, runtime_for_name, runtimes
from trama.extension import registry
from trama.format import (
    INPUT,
    Model,
    Node,
    OpRegistry,
    OpSpec,
    Parameter,
    ParameterSchema,
    ParameterValue,
    Ref,
    Tensor,
    ValueFact,
    collect_errors,
    dump,
    dumps,
    json_schema,
    load,
    loads,
    validate,
    weights_path,
)
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
    "WriteError",
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
