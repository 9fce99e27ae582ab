"""trama: a JSON format and library for hierarchical model graphs.

The quick start::

    import trama
    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)
    trama.dump(model, "my_model.trama.json")
    model = trama.load("my_model.trama.json")
    instance = trama.import_model(model, registry=registry)

Importing trama is cheap: each name below is imported from its layer when first read (PEP 562,
:mod:`trama.format._lazy`), so ``import trama; trama.registry("numpy")`` imports neither numpy
nor any framework, and numpy loads with the first tensor, document read or kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from trama.format._lazy import lazy_face
from trama.version import FORMAT_VERSION

if TYPE_CHECKING:
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
        SizeExpr,
        SymbolRange,
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
    from trama.tools import ModelDiff, diff, render_diff
    from trama.version import __version__

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
    "ModelDiff",
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
    "SizeExpr",
    "State",
    "SymbolRange",
    "Tensor",
    "TensorDataError",
    "TramaError",
    "ValidationError",
    "ValueFact",
    "WeightsFileError",
    "WriteError",
    "__version__",
    "collect_errors",
    "diff",
    "dump",
    "dumps",
    "export_model",
    "import_model",
    "json_schema",
    "load",
    "loads",
    "registry",
    "render_diff",
    "runtime_for_name",
    "runtimes",
    "validate",
    "weights_path",
]

#: The layer (subpackage) whose face exports each name that is imported on first use.
_HOMES = {
    **dict.fromkeys(
        (
            "Children",
            "ExportableOp",
            "ExportContext",
            "ImportableOp",
            "NodeFragment",
            "Param",
            "export_model",
            "import_model",
        ),
        "conversion",
    ),
    **dict.fromkeys(("FrozenState", "Runnable", "Runtime", "State", "runtime_for_name", "runtimes"), "execution"),
    "registry": "extension",
    **dict.fromkeys(
        (
            "INPUT",
            "Model",
            "Node",
            "OpRegistry",
            "OpSpec",
            "Parameter",
            "ParameterSchema",
            "ParameterValue",
            "Ref",
            "SizeExpr",
            "SymbolRange",
            "Tensor",
            "ValueFact",
            "collect_errors",
            "dump",
            "dumps",
            "json_schema",
            "load",
            "loads",
            "validate",
            "weights_path",
        ),
        "format",
    ),
    **dict.fromkeys(("ModelDiff", "diff", "render_diff"), "tools"),
    "__version__": "version",
}

if not TYPE_CHECKING:  # mypy reads the imports above; at run time, each name on first use
    __getattr__, __dir__ = lazy_face(
        __name__,
        _HOMES,
        submodules=("catalog", "conversion", "errors", "execution", "extension", "format", "tools", "version"),
    )
