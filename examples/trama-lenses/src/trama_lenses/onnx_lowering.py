"""The ONNX lowerings of the ``lenses.*`` leaves: what ``trama.registry("onnx")`` holds for them.

trama-onnx (``trama_onnx.lower``, the ``"onnxruntime"`` runtime) lowers a document node by node.
A leaf is lowered by its *lowering factory*, registered for the framework ``"onnx"`` like any
other implementation (:func:`trama_lenses.plugin.trama_op_implementations`), which returns a
:class:`trama_onnx.Lowering`; its ``emit(g, inputs)`` adds the node's ONNX nodes through the
:class:`trama_onnx.Emitter` ``g`` and returns the ONNX value of each output. ``lenses.System`` needs
none: trama-onnx lowers every composite from its wiring, as an ONNX local function.

Each lowering computes exactly what the op's spec (and the numpy element) computes, in the same
order of operations and the same precision: float64, int32 and int64 inputs in float64, anything
else (float32 above all) in float32, as numpy's ``np.result_type(dtype, np.float32)`` has it.

``emit`` runs once per ONNX function body (two identical ``lenses.System`` blocks share one), so
it bakes in only settings, dtypes and shapes: the focal length, the distance, the curvature and
the conic are constants; the aspheric coefficients, a tensor, reach the graph through
``g.tensor("coefficients")`` (an initializer, or an input of the function), never as a constant.

This module imports onnx (through trama_onnx): the plugin imports it only when a node is lowered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trama import Node, Parameter
from trama_onnx import Emitter, Lowering, LoweringError, ValueInfo

__all__ = ["compute_dtype", "lower_aspheric_surface", "lower_free_space", "lower_thin_lens"]

#: The input dtypes numpy computes in float64 (``np.result_type(dtype, np.float32)``); every
#: other one (float32, float16, bfloat16, bool, the 8- and 16-bit integers) is computed in float32.
_FLOAT64_FROM = frozenset({"float64", "int64", "int32"})


def compute_dtype(op: str, port: str, info: ValueInfo) -> str:
    """The dtype an element computes (and returns) for an input of ``info``'s dtype."""
    if info.dtype is None:
        raise LoweringError(f"{op}: the dtype of {port!r} is not known")
    return "float64" if info.dtype in _FLOAT64_FROM else "float32"


def _number(g: Emitter, slot: str) -> float:
    """A float slot's value (validation checked its type; a bool is refused here)."""
    value = g.setting(slot)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LoweringError(f"{g.node.op}: slot {slot!r} must hold a number, got {value!r}")
    return float(value)


def _ray_transfer(g: Emitter, rays: str, matrix: list[list[float]]) -> dict[str, str]:
    """``rays @ matrix.T`` for ``[N, 2]`` rays, in the rays' precision (as ``apply_matrix``)."""
    info = g.input_info("rays")
    width = info.shape[1] if info.rank == 2 else None  # an int, or a symbol's name, or None
    if info.rank != 2 or (isinstance(width, int) and width != 2):
        raise LoweringError(f"{g.node.op}: rays must have shape [N, 2] (height, angle), got {list(info.shape)}")
    dtype = compute_dtype(g.node.op, "rays", info)
    transposed = g.const(np.asarray(matrix).T, dtype)  # float64 entries, rounded to the rays' dtype
    return {"rays": g.op1("MatMul", [g.cast(rays, dtype, info.dtype), transposed])}


def lower_thin_lens(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``lenses.ThinLens``: ``rays @ M.T`` with ``M = [[1, 0], [-1/f, 1]]``, one ``MatMul``."""

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        f = _number(g, "focal_length")
        if f == 0 or not math.isfinite(f):
            raise LoweringError(f"{node.op}: focal_length must be finite and non-zero, got {f}")
        return _ray_transfer(g, inputs["rays"], [[1.0, 0.0], [-1.0 / f, 1.0]])

    return Lowering(node, parameters, emit)


def lower_free_space(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``lenses.FreeSpace``: ``rays @ M.T`` with ``M = [[1, d], [0, 1]]``, one ``MatMul``."""

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        d = _number(g, "distance")
        if not math.isfinite(d):
            raise LoweringError(f"{node.op}: distance must be finite, got {d}")
        return _ray_transfer(g, inputs["rays"], [[1.0, d], [0.0, 1.0]])

    return Lowering(node, parameters, emit)


def lower_aspheric_surface(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``lenses.AsphericSurface``: ``c r² / (1 + sqrt(1 − (1+k) c² r²)) + Σ a_i r^(2i+4)``.

    ``Sqrt`` of a negative number is NaN in ONNX as in numpy, so the sag is NaN where the conic is
    undefined. The polynomial is Horner's rule in ``r²``, unrolled over the ``m`` coefficients (a
    shape, so it may be baked in), each ``a_i`` read from the tensor by ``Gather``; with ``m = 0``
    there is no polynomial at all.
    """

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        c, k = _number(g, "curvature"), _number(g, "conic")
        held = g.tensor_info("coefficients")
        if held.dtype != "float32" or held.rank != 1:
            raise LoweringError(
                f"{node.op}: coefficients must be a float32 vector [m], got {held.dtype} {list(held.shape)}"
            )
        info = g.input_info("r")
        dtype = compute_dtype(node.op, "r", info)
        r = g.cast(inputs["r"], dtype, info.dtype)
        r2 = g.op1("Mul", [r, r])
        one = g.const(1.0, dtype)
        # As numpy evaluates it: (1 + k)·c·c in float64, then one rounding to the rays' dtype.
        root = g.op1("Sqrt", [g.op1("Sub", [one, g.op1("Mul", [g.const((1.0 + k) * c * c, dtype), r2])])])
        sag = g.op1("Div", [g.op1("Mul", [g.const(c, dtype), r2]), g.op1("Add", [one, root])])
        (m,) = held.shape
        assert isinstance(m, int)  # a tensor's shape is fixed
        if m:
            coefficients = g.cast(g.tensor("coefficients"), dtype, "float32")
            polynomial = g.op1("Gather", [coefficients, g.const(m - 1)])  # a 0-d a_{m-1}
            for i in reversed(range(m - 1)):
                a_i = g.op1("Gather", [coefficients, g.const(i)])
                polynomial = g.op1("Add", [g.op1("Mul", [polynomial, r2]), a_i])
            sag = g.op1("Add", [sag, g.op1("Mul", [g.op1("Mul", [polynomial, r2]), r2])])
        return {"sag": sag}

    return Lowering(node, parameters, emit)
