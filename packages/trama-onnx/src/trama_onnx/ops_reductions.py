"""Lowerings of the catalog's reductions and selections beyond ``sum`` and ``mean``: ``min``,
``argmin``, ``prod``, ``var``, ``std``, ``any``, ``all``, ``linalg_vector_norm``, ``logsumexp`` and
``topk``.

The numpy reference computes floats in float64 and rounds once; these compute in float32 (16-bit
floats too, rounded once at the end). onnxruntime's ``ReduceMin``, ``ArgMin`` and ``TopK`` do not
order NaN as torch does, so NaN is handled explicitly where it matters (see each op).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.format import Node, Parameter, numpy_dtype
from trama.format._sizes import has_sizes
from trama_onnx._common import axis, compute_dtype, is_float
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []


def _ints(g: Emitter, values: Sequence[int]) -> str:
    return g.const(np.asarray(list(values), np.int64))


def _axes(dims: Any, rank: int) -> list[int] | None:
    """The reduced dimensions, sorted (``None``: every one); a 0-d ``x`` accepts 0 and −1 and
    reduces to itself (``[]``)."""
    if dims is None:
        return None
    listed = [dims] if isinstance(dims, int) else list(dims)
    axes = [axis(d, rank) for d in listed]
    if len(set(axes)) != len(axes):
        raise LoweringError(f"dim {listed} names a dimension twice")
    return [] if rank == 0 else sorted(axes)


def _reduce(g: Emitter, kind: str, x: str, axes: list[int] | None, keepdim: bool) -> str:
    """``kind`` (``ReduceSum``, ``ReduceMax``, …) over ``axes`` (``None``: all)."""
    attributes = {"keepdims": int(keepdim)}
    if axes is None:
        return g.op1(kind, [x], attributes)
    if not axes:
        return g.op1("Identity", [x])
    return g.op1(kind, [x, _ints(g, axes)], attributes)


def _count(g: Emitter, x: str, axes: list[int] | None, dtype: str) -> str:
    """How many elements each reduction takes, a 0-d value of ``dtype``."""
    shape = g.shape(x)
    if axes is not None:
        shape = g.op1("Gather", [shape, _ints(g, axes)], {"axis": 0})
    count = g.op1("ReduceProd", [shape], {"keepdims": 0})
    return g.cast(count, dtype, "int64")


def _floating(g: Emitter, op: str) -> tuple[str, str]:
    dtype = g.input_info("x").dtype or "float32"
    if not is_float(dtype):
        raise LoweringError(f"{op} takes a floating x, got {dtype}")
    return dtype, compute_dtype(dtype)


def _nan(g: Emitter, work: str) -> str:
    return g.const(np.asarray(np.nan, numpy_dtype(work)))


def _numbers(node: Node, parameters: Mapping[str, Parameter], *slots: str) -> None:
    """Refuse a size computed from the inputs in ``slots``, which the lowering bakes in as numbers."""
    for slot in slots:
        entry = parameters.get(slot)
        if entry is not None and has_sizes(entry.value):
            raise LoweringError(
                f"{node.op}: slot {slot!r} depends on the input sizes, which this lowering takes only as numbers",
                node_id=node.id,
            )


def _reduction(node: Node, parameters: Mapping[str, Parameter]) -> tuple[Any, bool]:
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    return settings["dim"], settings.flag("keepdim")


# --- min and argmin -----------------------------------------------------------------------------


@lowers("min")
def min_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ReduceMin`` (``torch.amin``); onnxruntime's drops NaN, which torch's returns: a reduction
    holding a NaN is NaN by an explicit ``IsNaN`` count."""
    dims, keepdim = _reduction(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if dtype == "bool":
            raise LoweringError("min of bools is not lowered")
        work = compute_dtype(dtype)
        x = g.cast(inputs["x"], work, dtype)
        axes = _axes(dims, info.rank)
        y = _reduce(g, "ReduceMin", x, axes, keepdim)
        if is_float(dtype) and axes != []:
            nans = _reduce(g, "ReduceMax", g.cast(g.op1("IsNaN", [x]), work, "bool"), axes, keepdim)
            y = g.op1("Where", [g.cast(nans, "bool", work), _nan(g, work), y])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("argmin")
def argmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ArgMin`` (the first index on ties); where a slice holds NaN, the first NaN (torch's rule,
    which onnxruntime's ``ArgMin`` does not follow), found by an ``ArgMax`` of ``IsNaN``.
    ``dim`` null searches the flattened ``x``."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if dtype == "bool":
            raise LoweringError("argmin of bools is not lowered")
        work = compute_dtype(dtype)
        x = g.cast(inputs["x"], work, dtype)
        if dim is not None:
            axis(dim, info.rank)
        if info.rank == 0:
            return {"y": g.const(np.asarray(0, np.int64))}
        if dim is None:
            x, where, keep = g.op1("Reshape", [x, _ints(g, [-1])]), 0, 0
        else:
            where, keep = axis(dim, info.rank), int(keepdim)
        y = g.op1("ArgMin", [x], {"axis": where, "keepdims": keep, "select_last_index": 0})
        if is_float(dtype):
            nan = g.cast(g.op1("IsNaN", [x]), "float32", "bool")
            first = g.op1("ArgMax", [nan], {"axis": where, "keepdims": keep, "select_last_index": 0})
            found = g.op1("ReduceMax", [nan, _ints(g, [where])], {"keepdims": keep})
            y = g.op1("Where", [g.cast(found, "bool", "float32"), first, y])
        if dim is None and keepdim:
            y = g.op1("Reshape", [y, _ints(g, [1] * info.rank)])
        return {"y": y}

    return Lowering(node, parameters, emit)


# --- products, moments, logic -------------------------------------------------------------------


@lowers("prod")
def prod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ReduceProd`` over ``dim`` (or all): floats in their dtype (16-bit ones in float32), bools
    and integers as int64 (wrapping as torch's product does)."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        result, work = (dtype, compute_dtype(dtype)) if is_float(dtype) else ("int64", "int64")
        x = g.cast(inputs["x"], work, dtype)
        axes = _axes(dim, info.rank)
        return {"y": g.cast(_reduce(g, "ReduceProd", x, axes, keepdim), result, work)}

    return Lowering(node, parameters, emit)


def _variance(node: Node, parameters: Mapping[str, Parameter], root: bool) -> Lowering:
    """Two-pass: the squared deviations from the mean summed, over ``max(0, N − correction)``."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dims, keepdim, correction = settings["dim"], settings.flag("keepdim"), settings.number("correction")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype, work = _floating(g, node.op)
        info = g.input_info("x")
        x = g.cast(inputs["x"], work, dtype)
        axes = _axes(dims, info.rank)
        if axes == []:
            axes = None  # a 0-d x: one element
        mean = _reduce(g, "ReduceMean", x, axes, True)
        deviation = g.op1("Sub", [x, mean])
        squares = _reduce(g, "ReduceSum", g.op1("Mul", [deviation, deviation]), axes, keepdim)
        count = _count(g, x, axes, work)
        zero = g.const(np.asarray(0, numpy_dtype(work)))
        divisor = g.op1("Max", [g.op1("Sub", [count, g.const(np.asarray(correction, numpy_dtype(work)))]), zero])
        y = g.op1("Div", [squares, divisor])
        if root:
            y = g.op1("Sqrt", [y])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("var")
def var(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _variance(node, parameters, root=False)


@lowers("std")
def std(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _variance(node, parameters, root=True)


def _logical(node: Node, parameters: Mapping[str, Parameter], every: bool) -> Lowering:
    """A count of the nonzero (``any``) or zero (``all``) elements, compared with 0 (an empty
    reduction is false, true); bool, or uint8 for a uint8 ``x`` (torch's exception)."""
    dims, keepdim = _reduction(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        truth = g.cast(inputs["x"], "bool", dtype)  # nonzero (NaN too) is true
        if every:
            truth = g.op1("Not", [truth])
        counted = _reduce(g, "ReduceSum", g.cast(truth, "int64", "bool"), _axes(dims, info.rank), keepdim)
        zero = g.const(np.asarray(0, np.int64))
        y = g.op1("Equal" if every else "Greater", [counted, zero])
        return {"y": g.cast(y, "uint8", "bool") if dtype == "uint8" else y}

    return Lowering(node, parameters, emit)


@lowers("any")
def any_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _logical(node, parameters, every=False)


@lowers("all")
def all_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _logical(node, parameters, every=True)


# --- norms and log-sum-exp ----------------------------------------------------------------------


@lowers("linalg_vector_norm")
def linalg_vector_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``(Σ |x|^ord)^(1/ord)``; ``inf`` the largest ``|x|`` (0 for none), ``-inf`` the smallest
    (∞ for none), ``0`` the count of nonzeros."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dims, order, keepdim = settings["dim"], settings.number("ord"), settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype, work = _floating(g, node.op)
        info = g.input_info("x")
        size = g.op1("Abs", [g.cast(inputs["x"], work, dtype)])
        axes = _axes(dims, info.rank)
        if axes == []:
            axes = None
        if order in (np.inf, -np.inf):
            kind = "ReduceMax" if order > 0 else "ReduceMin"
            total = _reduce(g, kind, size, axes, keepdim)
            # onnxruntime's reduction of no element is not the norm's identity: 0 for inf, ∞ for −inf
            empty = g.op1("Equal", [_count(g, size, axes, "int64"), g.const(np.asarray(0, np.int64))])
            identity = g.const(np.asarray(0.0 if order > 0 else np.inf, numpy_dtype(work)))
            total = g.op1("Where", [empty, identity, total])
        elif order == 0:
            nonzero = g.cast(g.cast(size, "bool", work), work, "bool")
            total = _reduce(g, "ReduceSum", nonzero, axes, keepdim)
        elif order == 1:
            total = _reduce(g, "ReduceSum", size, axes, keepdim)
        elif order == 2:
            total = g.op1("Sqrt", [_reduce(g, "ReduceSumSquare", size, axes, keepdim)])
        else:
            power = g.op1("Pow", [size, g.const(np.asarray(order, numpy_dtype(work)))])
            total = _reduce(g, "ReduceSum", power, axes, keepdim)
            total = g.op1("Pow", [total, g.const(np.asarray(1.0 / order, numpy_dtype(work)))])
        return {"y": g.cast(total, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("logsumexp")
def logsumexp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``log Σ exp(x − m) + m``, ``m`` the maximum where it is finite (0 otherwise); integers and
    bools give float32."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dims, keepdim = settings.integers("dim"), settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        result = dtype if is_float(dtype) else "float32"
        work = compute_dtype(result)
        x = g.cast(inputs["x"], work, dtype)
        axes = _axes(dims, info.rank)
        if not axes:
            return {"y": g.cast(g.op1("Identity", [x]), result, work)}
        peak = _reduce(g, "ReduceMax", x, axes, True)
        finite = g.op1("Not", [g.op1("Or", [g.op1("IsInf", [peak]), g.op1("IsNaN", [peak])])])
        shift = g.op1("Where", [finite, peak, g.const(np.asarray(0, numpy_dtype(work)))])
        total = _reduce(g, "ReduceSum", g.op1("Exp", [g.op1("Sub", [x, shift])]), axes, keepdim)
        if not keepdim:
            shift = g.op1("Squeeze", [shift, _ints(g, axes)])
        y = g.op1("Add", [g.op1("Log", [total]), shift])
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


# --- selection ----------------------------------------------------------------------------------


@lowers("topk")
def topk(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``TopK`` (sorted; equal keys keep the lower index first, the catalog's tie rule and ONNX's)
    on keys that order as torch does: floats as float64 with NaN made +∞ and +∞ made the largest
    finite float64 (onnxruntime does not order NaN), so NaN is the largest; the values are
    gathered from ``x`` at the indices found."""
    _numbers(node, parameters, "dim")
    settings = catalog_settings(node, parameters)
    dim, largest = settings.integer("dim"), settings.flag("largest")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if dtype == "bool":
            raise LoweringError("topk of bools is not defined (torch refuses it too)")
        x = inputs["x"]
        where = axis(dim, info.rank)
        if info.rank == 0:
            return {"values": g.op1("Identity", [x]), "indices": g.const(np.asarray(0, np.int64))}
        if is_float(dtype):
            keys = g.cast(x, "float64", dtype)
            huge = g.const(np.asarray(np.finfo(np.float64).max))
            infinite = g.op1("IsInf", [keys], {"detect_negative": 0})
            keys = g.op1("Where", [infinite, huge, keys])
            keys = g.op1("Where", [g.op1("IsNaN", [keys]), g.const(np.asarray(np.inf)), keys])
        else:
            keys = g.cast(x, "int64", dtype)
        k = g.op1("Reshape", [g.int64s("k"), _ints(g, [1])])
        _, indices = g.op("TopK", [keys, k], {"axis": where, "largest": int(largest), "sorted": 1}, outputs=2)
        values = g.op1("GatherElements", [x, indices], {"axis": where})
        return {"values": values, "indices": indices}

    return Lowering(node, parameters, emit)
