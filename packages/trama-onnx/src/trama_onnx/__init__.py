"""trama-onnx: lower trama documents to ONNX, hierarchy kept, and run them on onnxruntime.

:func:`lower` turns a :class:`trama.Model` into an ``onnx.ModelProto`` whose composites are ONNX
local functions (one per distinct structure, every instance a call of it) and whose node names
are trama's node ids; :class:`OnnxRuntime` is the ``"onnxruntime"`` runtime
(``trama.runtime_for_name("onnxruntime")``), which runs the lowered model on onnxruntime.

Each op is lowered by a *lowering factory* registered for the framework ``"onnx"``
(``trama.registry("onnx")``): this package's ``ops_*`` modules for the standard catalog, and any
op pack's own through the same ``trama_op_implementations`` hook (see :mod:`trama_onnx.lowering`).

Plugin discovery imports this package (the plugin module's parent) in every program that uses
trama, so it imports nothing at the top: each public name, onnx with it, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.extension import lazy_exports

if TYPE_CHECKING:
    from trama_onnx.lowering import (
        DEFAULT_OPSET,
        FUNCTION_DOMAIN,
        ONNX_DTYPES,
        Emitter,
        Lowering,
        LoweringError,
        ValueInfo,
        catalog_settings,
        lower,
    )
    from trama_onnx.runtime import OnnxRuntime

__all__ = [
    "DEFAULT_OPSET",
    "FUNCTION_DOMAIN",
    "ONNX_DTYPES",
    "Emitter",
    "Lowering",
    "LoweringError",
    "OnnxRuntime",
    "ValueInfo",
    "__version__",
    "catalog_settings",
    "lower",
]

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(
        (
            "DEFAULT_OPSET",
            "FUNCTION_DOMAIN",
            "ONNX_DTYPES",
            "Emitter",
            "Lowering",
            "LoweringError",
            "ValueInfo",
            "catalog_settings",
        ),
        "lowering",
    ),
    "lower": "lowering",
    "OnnxRuntime": "runtime",
}

_exports = lazy_exports(__name__, _HOMES)


def __getattr__(name: str) -> object:
    if name == "__version__":
        from importlib.metadata import version

        return version("trama-onnx")
    return _exports(name)
