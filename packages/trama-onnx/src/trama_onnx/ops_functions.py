"""Lowerings of the tensor functions that join and pick extremes: ``stack``, ``max`` (the
reduction, ``torch.amax``) and ``argmax``.

onnxruntime's ``ReduceMax`` and ``ArgMax`` skip NaN (or see it depending on where it lies), where
the catalog has a NaN win, as in torch: both are corrected with ``IsNaN``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trama.format import Node, Parameter
from trama_onnx._common import Operand, axis, compute_dtype, const_like, is_float, promoted
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []


def _ints(g: Emitter, values: list[int]) -> str:
    return g.const(np.asarray(values, np.int64))


@lowers("stack")
def stack(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The inputs ``x0``, ``x1``, … in numeric order, promoted to one dtype, each given a new
    dimension at ``dim`` and joined along it."""
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        ports = sorted((port for port in inputs if port[1:].isdigit()), key=lambda port: int(port[1:]))
        operands = []
        for port in ports:
            info = g.input_info(port)
            if info.dtype is None:
                raise LoweringError(f"stack: input {port!r} holds no tensor")
            operands.append(Operand(inputs[port], info.dtype, info.rank))
        if len({each.rank for each in operands}) != 1:
            raise LoweringError("stack: the inputs have different numbers of dimensions")
        result = promoted(*operands)
        rank = operands[0].rank
        if not -(rank + 1) <= dim <= rank:
            raise LoweringError(f"stack: dim {dim} is out of range for stacking tensors of {rank} dimensions")
        where = _ints(g, [dim % (rank + 1)])
        values = [g.op1("Unsqueeze", [g.cast(each.value or "", result, each.dtype), where]) for each in operands]
        if len(values) == 1:
            return {"y": values[0]}
        return {"y": g.op1("Concat", values, {"axis": dim % (rank + 1)})}

    return Lowering(node, parameters, emit)


def _x(g: Emitter) -> tuple[str, int, tuple[Any, ...]]:
    info = g.input_info("x")
    if info.dtype is None:
        raise LoweringError(f"{g.node.op}: x holds no tensor", node_id=g.node_id)
    return info.dtype, info.rank, info.shape


@lowers("max")
def maximum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ReduceMax`` over ``dim`` (null: all) with ``keepdim``, exact in every dtype (16-bit floats
    and narrow integers are compared widened). onnxruntime's ``ReduceMax`` may skip a NaN, so a NaN
    in the reduced elements is put back with ``IsNaN``."""
    settings = catalog_settings(node, parameters)
    dims = settings["dim"]
    keepdim = settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype, rank, shape = _x(g)
        work = compute_dtype(dtype)
        x = g.cast(inputs["x"], work, dtype)
        if rank == 0:
            for d in dims or ():
                axis(d, 0)
            return {"y": g.cast(g.op1("Identity", [x]), dtype, work)}
        axes = None if dims is None else sorted({axis(d, rank) for d in dims})
        if len(axes or ()) != len(dims or ()):
            raise LoweringError(f"max: dims {list(dims)} name a dimension twice")
        if any(shape[a] == 0 for a in (axes if axes is not None else range(rank))):
            raise LoweringError("max of an empty dimension has no value (torch raises)")
        attributes = {"keepdims": int(keepdim)}
        extra = [] if axes is None else [_ints(g, axes)]
        y = g.op1("ReduceMax", [x, *extra], attributes)
        if is_float(work):
            nan = g.cast(g.op1("IsNaN", [x]), work, "bool")
            any_nan = g.cast(g.op1("ReduceMax", [nan, *extra], attributes), "bool", work)
            y = g.op1("Where", [any_nan, const_like(g, np.nan, work), y])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("argmax")
def argmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ArgMax`` (the first index on ties) along ``dim``, or over the flattened ``x`` (``dim``
    null: a 0-d index, shaped ``[1, …, 1]`` with ``keepdim`` as the reference gives). A NaN counts
    as the largest: where the line holds one, the index of the first NaN (onnxruntime's ``ArgMax``
    does not see NaN as the largest)."""
    settings = catalog_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype, rank, shape = _x(g)
        if any(size == 0 for size in shape):
            raise LoweringError("argmax of an empty tensor has no value (torch raises)")
        if dim is not None:
            where = axis(dim, rank)
            if rank == 0:
                return {"y": g.const(np.zeros((), np.int64))}
        work = compute_dtype(dtype)
        x = g.cast(inputs["x"], work, dtype)
        if dim is None:
            x = g.op1("Reshape", [x, _ints(g, [-1])])
            where, keep = 0, False
        else:
            keep = keepdim
        attributes = {"axis": where, "keepdims": int(keep)}
        y = g.op1("ArgMax", [x], attributes)
        if is_float(work):
            nan = g.cast(g.op1("IsNaN", [x]), "int32", "bool")
            first_nan = g.op1("ArgMax", [nan], attributes)
            any_nan = g.cast(g.op1("ReduceMax", [nan, _ints(g, [where])], {"keepdims": int(keep)}), "bool", "int32")
            y = g.op1("Where", [any_nan, first_nan, y])
        if dim is None and keepdim and rank > 0:
            y = g.op1("Reshape", [y, _ints(g, [1] * rank)])
        return {"y": y}

    return Lowering(node, parameters, emit)
