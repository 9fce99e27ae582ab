"""Lowerings of the pools (1-, 2- and 3-d, modules and functions), the adaptive pools,
resampling (``interpolate``, ``Upsample``) and ``pad``.

The catalog's windows are torch's, and ONNX's ``ceil_mode`` and ``count_include_pad`` do not say
quite the same thing at the edges (a last window that starts in the end padding is dropped; a
window the ceil mode adds past the padding does not count that extra room in the divisor). So
where the spatial sizes are known when lowering (the shape pass found them fixed), the output
size is the catalog's (:func:`trama.catalog.pool_output_size`) and the end padding is made
explicit to give it; the average's divisor, where it is not the window's size, is a constant.
With sizes that change from run to run, ``ceil_mode`` is refused and ONNX's own pools are used,
which agree with the catalog there. An input that is unbatched (``[C, *S]``) gets a batch
dimension for the pool and loses it after.

Adaptive pools and resampling read the source positions the catalog computes
(:mod:`trama.catalog._pooling_geometry`, torch's index arithmetic) as constants: an adaptive
average is a constant matrix product per dimension, an adaptive maximum a ``Gather`` of every
window and a ``ReduceMax``, a resampling a ``Gather`` of each tap times its weight, summed tap 0
first in the order the reference does (ONNX ``Resize`` rounds its source positions its own way,
which can pick a different element). They need the resampled dimensions' sizes fixed when
lowering, except an adaptive pool to 1 (a reduction over the whole dimension).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.catalog import PoolWindows, adaptive_windows, pool_output_size
from trama.catalog._pooling_geometry import adaptive_taps, pool_divisors, resampled_sizes, resampling_taps
from trama.format import Node, Parameter, numpy_dtype
from trama.format._sizes import has_sizes
from trama_onnx._common import batched, circular_pad, compute_dtype, is_float, unbatched
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []

#: Integer dtypes a maximum is computed in float64 for, exactly (onnxruntime's pools take floats).
_EXACT_IN_DOUBLE = ("int8", "int16", "int32", "uint8")


def _input(g: Emitter, inputs: Mapping[str, str]) -> tuple[str, str, str, int, tuple[int | str | None, ...]]:
    info = g.input_info("x")
    dtype = info.dtype or "float32"
    if not is_float(dtype):
        raise LoweringError(f"{g.node.op} takes a floating x, got {dtype}")
    work = compute_dtype(dtype)
    return g.cast(inputs["x"], work, dtype), dtype, work, info.rank, info.shape


def _ordered_input(g: Emitter, inputs: Mapping[str, str]) -> tuple[str, str, str, int, tuple[int | str | None, ...]]:
    """``x`` for a maximum: a float (16-bit ones in float32), or an integer computed in float64
    where every value of its dtype is exact there."""
    info = g.input_info("x")
    dtype = info.dtype or "float32"
    if is_float(dtype):
        work = compute_dtype(dtype)
    elif dtype in _EXACT_IN_DOUBLE:
        work = "float64"
    else:
        raise LoweringError(f"{g.node.op}: x of dtype {dtype} is not lowered (floats and integers up to 32 bits)")
    return g.cast(inputs["x"], work, dtype), dtype, work, info.rank, info.shape


def _lowest(dtype: str, work: str) -> np.ndarray:
    """What padding holds for a maximum (−∞, or an integer dtype's minimum), in ``work``."""
    value = -np.inf if is_float(dtype) else np.iinfo(numpy_dtype(dtype)).min
    return np.asarray(value, numpy_dtype(work))


def _spatial(g: Emitter, rank: int, dims: int) -> None:
    if rank not in (dims + 1, dims + 2):
        raise LoweringError(f"{g.node.op}: x has {rank} dimensions, expected {dims + 1} or {dims + 2}")


def _windows(node: Node, parameters: Mapping[str, Parameter], dims: int) -> tuple[PoolWindows, Any]:
    settings = catalog_settings(node, parameters)
    dilation = settings.integers("dilation") if "dilation" in settings else (1,) * dims
    windows = PoolWindows(
        settings.integers("kernel_size"),
        settings.integers("stride"),
        settings.integers("padding"),
        dilation,
        settings.flag("ceil_mode"),
    )
    return windows, settings


def _geometry(windows: PoolWindows, sizes: Sequence[int | str | None]) -> tuple[list[int], list[int]] | None:
    """The output sizes and the end padding that gives them, or ``None`` for sizes not fixed."""
    if not all(isinstance(size, int) for size in sizes):
        return None
    outs: list[int] = []
    ends: list[int] = []
    for d, size in enumerate(sizes):
        assert isinstance(size, int)
        k, s, p, dil = windows.kernel[d], windows.stride[d], windows.padding[d], windows.dilation[d]
        out = pool_output_size(size, k, s, p, dil, windows.ceil_mode)
        if out < 1:
            raise LoweringError(f"{size} positions leave no room for a window (output size {out})")
        span = dil * (k - 1) + 1
        outs.append(out)
        ends.append(max(0, (out - 1) * s + span - size - p))
    return outs, ends


def _fixed(sizes: Sequence[int | str | None]) -> list[int]:
    return [size for size in sizes if isinstance(size, int)]


def _max_pool(dims: int) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
        windows, _ = _windows(node, parameters, dims)

        def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
            x, dtype, work, rank, shape = _ordered_input(g, inputs)
            _spatial(g, rank, dims)
            x, added = batched(g, x, rank, dims)
            geometry = _geometry(windows, shape[-dims:])
            if geometry is None:
                if windows.ceil_mode:
                    raise LoweringError(f"{node.op} with ceil_mode needs spatial sizes fixed when lowering")
                ends = list(windows.padding)
            else:
                ends = geometry[1]
            pads = [*windows.padding, *ends]
            lowest = _lowest(dtype, work)
            if any(pad >= kernel for pad, kernel in zip(pads, [*windows.kernel, *windows.kernel], strict=True)):
                # onnxruntime takes no pad as wide as the window (ceil mode can ask for one): pad with −∞
                amounts = g.const(np.asarray([0, 0, *windows.padding, 0, 0, *ends], np.int64))
                x = g.op1("Pad", [x, amounts, g.const(np.asarray(-np.inf, numpy_dtype(work)))])
                pads = [0] * (2 * dims)
            y = g.op1(
                "MaxPool",
                [x],
                {
                    "kernel_shape": list(windows.kernel),
                    "strides": list(windows.stride),
                    "dilations": list(windows.dilation),
                    "pads": pads,
                },
            )
            if geometry is not None:
                empty = _empty_windows(windows, _fixed(shape[-dims:]), geometry[0])
                if empty.any():  # a window of padding alone: −∞ (onnxruntime gives the lowest finite float)
                    y = g.op1("Where", [g.const(empty), g.const(lowest), y])
            return {"y": g.cast(unbatched(g, y, added), dtype, work)}

        return Lowering(node, parameters, emit)

    return factory


def _empty_windows(windows: PoolWindows, sizes: list[int], outs: list[int]) -> np.ndarray:
    """``outs``: true where a window holds no element of ``x`` (padding alone)."""
    empty: np.ndarray = np.zeros((), bool)
    for d in range(len(sizes)):
        k, s, p, dil = windows.kernel[d], windows.stride[d], windows.padding[d], windows.dilation[d]
        positions = np.arange(outs[d])[:, np.newaxis] * s - p + np.arange(k)[np.newaxis, :] * dil
        empty = np.logical_or.outer(empty, ~((positions >= 0) & (positions < sizes[d])).any(axis=1))
    return empty


def _avg_pool(dims: int) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
        windows, settings = _windows(node, parameters, dims)
        include = settings.flag("count_include_pad")
        override = settings.optional_integer("divisor_override") if "divisor_override" in settings else None

        def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
            x, dtype, work, rank, shape = _input(g, inputs)
            _spatial(g, rank, dims)
            x, added = batched(g, x, rank, dims)
            area = int(np.prod(windows.kernel))
            geometry = _geometry(windows, shape[-dims:])
            attributes: dict[str, Any] = {"kernel_shape": list(windows.kernel), "strides": list(windows.stride)}
            if geometry is None:
                if windows.ceil_mode:
                    raise LoweringError(f"{node.op} with ceil_mode needs spatial sizes fixed when lowering")
                pads = [*windows.padding, *windows.padding]
                if override is None:
                    y = g.op1("AveragePool", [x], {**attributes, "pads": pads, "count_include_pad": int(include)})
                else:
                    y = g.op1("AveragePool", [x], {**attributes, "pads": pads, "count_include_pad": 1})
                    y = g.op1("Mul", [y, g.const(np.asarray(area / override), work)])
                return {"y": g.cast(unbatched(g, y, added), dtype, work)}
            outs, ends = geometry
            sizes = _fixed(shape[-dims:])
            amounts = [0, 0, *windows.padding, 0, 0, *ends]
            padded = g.op1("Pad", [x, g.const(np.asarray(amounts, np.int64))])
            sums = g.op1("AveragePool", [padded], attributes)
            sums = g.op1("Mul", [sums, g.const(np.asarray(float(area)), work)])
            if override is not None:
                divisor = np.full(outs, float(override))
            else:
                divisor = pool_divisors(windows, sizes, outs, include).astype(np.float64)
            y = g.op1("Div", [sums, g.const(divisor.astype(numpy_dtype(work)))])
            return {"y": g.cast(unbatched(g, y, added), dtype, work)}

        return Lowering(node, parameters, emit)

    return factory


for _dims, _names in (
    (1, ("MaxPool1d", "max_pool1d")),
    (2, ("MaxPool2d", "max_pool2d")),
    (3, ("MaxPool3d", "max_pool3d")),
):
    lowers(*_names)(_max_pool(_dims))
for _dims, _names in (
    (1, ("AvgPool1d", "avg_pool1d")),
    (2, ("AvgPool2d", "avg_pool2d")),
    (3, ("AvgPool3d", "avg_pool3d")),
):
    lowers(*_names)(_avg_pool(_dims))


# --- adaptive pools ---------------------------------------------------------------------------


def _along(g: Emitter, y: str, matrix: np.ndarray, where: int, rank: int) -> str:
    """``matrix`` ``[out, S]`` applied along dimension ``where`` of ``y`` (a matrix product)."""
    if where == rank - 2:  # [out, S] · y
        return g.op1("MatMul", [g.const(matrix), y])
    perm = list(range(rank))
    if where != rank - 1:
        perm[where], perm[rank - 1] = perm[rank - 1], perm[where]
        y = g.op1("Transpose", [y], {"perm": perm})
    y = g.op1("MatMul", [y, g.const(np.ascontiguousarray(matrix.T))])
    if where != rank - 1:
        y = g.op1("Transpose", [y], {"perm": perm})
    return y


def _adaptive_average(
    g: Emitter, x: str, work: str, rank: int, shape: Sequence[int | str | None], requested: Sequence[int | None]
) -> str:
    """The adaptive average of ``x`` (in ``work``) over its last ``len(requested)`` dimensions."""
    dims = len(requested)
    y = x
    for d, out in enumerate(requested):
        where = rank - dims + d
        size = shape[where]
        if out is None or (isinstance(size, int) and out == size):
            continue
        if out == 1:
            y = g.op1("ReduceMean", [y, g.const(np.asarray([where], np.int64))], {"keepdims": 1})
            continue
        if not isinstance(size, int):
            raise LoweringError(f"{g.node.op} to {out} positions needs the input's size along dimension {where} fixed")
        member, counts = adaptive_windows(size, out)
        y = _along(g, y, (member / counts[:, np.newaxis]).astype(numpy_dtype(work)), where, rank)
    return g.op1("Identity", [x]) if y == x else y


def _adaptive(dims: int, *, average: bool) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
        requested: tuple[int | None, ...] = tuple(catalog_settings(node, parameters)["output_size"])

        def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
            x, dtype, work, rank, shape = (_input if average else _ordered_input)(g, inputs)
            _spatial(g, rank, dims)
            if average:
                y = _adaptive_average(g, x, work, rank, shape, requested)
                return {"y": g.cast(y, dtype, work)}
            y = x
            for d, out in enumerate(requested):
                where = rank - dims + d
                size = shape[where]
                if out is None or (isinstance(size, int) and out == size):
                    continue
                if out == 1:
                    y = g.op1("ReduceMax", [y, g.const(np.asarray([where], np.int64))], {"keepdims": 1})
                    continue
                if not isinstance(size, int):
                    raise LoweringError(
                        f"{node.op} to {out} positions needs the input's size along dimension {where} fixed"
                    )
                index, _ = adaptive_taps(size, out)  # a repeated position changes no maximum
                taken = g.op1("Gather", [y, g.const(index)], {"axis": where})
                y = g.op1("ReduceMax", [taken, g.const(np.asarray([where + 1], np.int64))], {"keepdims": 0})
            if y == x:
                y = g.op1("Identity", [x])
            return {"y": g.cast(y, dtype, work)}

        return Lowering(node, parameters, emit)

    return factory


for _dims, _names in (
    (1, ("AdaptiveAvgPool1d", "adaptive_avg_pool1d")),
    (2, ("AdaptiveAvgPool2d", "adaptive_avg_pool2d")),
    (3, ("AdaptiveAvgPool3d", "adaptive_avg_pool3d")),
):
    lowers(*_names)(_adaptive(_dims, average=True))
for _dims, _names in (
    (1, ("AdaptiveMaxPool1d", "adaptive_max_pool1d")),
    (2, ("AdaptiveMaxPool2d", "adaptive_max_pool2d")),
):
    lowers(*_names)(_adaptive(_dims, average=False))


# --- resampling -------------------------------------------------------------------------------


@lowers("interpolate", "Upsample")
def interpolate(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Each spatial dimension resampled on its own, the last one first: a ``Gather`` of each tap
    (:func:`~trama.catalog._pooling_geometry.resampling_taps`) times its weight, summed tap 0
    first, in float32 (float64 for a float64 ``x``, torch's "opmath" type), rounded once; ``area``
    an adaptive average. The output sizes and every tap are constants, so ``x``'s spatial sizes
    must be fixed when lowering, and so must ``size``."""
    settings = catalog_settings(node, parameters)
    size_entry = parameters.get("size")
    if size_entry is not None and has_sizes(size_entry.value):
        raise LoweringError(f"{node.op}: a size computed from the inputs is not lowered", node_id=node.id)
    mode = settings.text("mode")
    align_corners = bool(settings["align_corners"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if not is_float(dtype):
            raise LoweringError(f"{node.op} takes a floating x, got {dtype}")
        shape = info.shape
        if not all(isinstance(size, int) for size in shape[2:]):
            raise LoweringError(f"{node.op} needs x's spatial sizes fixed when lowering, got {list(shape)}")
        try:
            out, scales = resampled_sizes([size if isinstance(size, int) else 1 for size in shape], settings)
        except ValueError as error:
            raise LoweringError(f"{node.op}: {error}") from None
        sizes = _fixed(shape[2:])
        rank = info.rank
        if mode == "area":
            work = compute_dtype(dtype)
            x = g.cast(inputs["x"], work, dtype)
            return {"y": g.cast(_adaptive_average(g, x, work, rank, shape, out), dtype, work)}
        work = "float64" if dtype == "float64" else "float32"
        real = numpy_dtype(work).type
        y = g.cast(inputs["x"], work, dtype)
        for axis in reversed(range(2, rank)):
            d = axis - 2
            taps, weights = resampling_taps(mode, sizes[d], out[d], align_corners, scales[d], real)
            if weights is None:
                y = g.op1("Gather", [y, g.const(np.ascontiguousarray(taps[:, 0]))], {"axis": axis})
                continue
            shape_of = (-1,) + (1,) * (rank - axis - 1)
            total: str | None = None
            for j in range(taps.shape[1]):
                taken = g.op1("Gather", [y, g.const(np.ascontiguousarray(taps[:, j]))], {"axis": axis})
                term = g.op1("Mul", [taken, g.const(np.ascontiguousarray(weights[:, j]).reshape(shape_of))])
                total = term if total is None else g.op1("Add", [total, term])
            assert total is not None
            y = total
        if y == inputs["x"]:
            y = g.op1("Identity", [y])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


# --- padding ----------------------------------------------------------------------------------

#: What ``Pad`` computes each dtype in on onnxruntime's CPU (exact: padding copies values).
_PAD_DTYPES = {"float16": "float32", "bfloat16": "float32", "int16": "int32"}


@lowers("pad")
def pad(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x``'s last ``len(pad) / 2`` dimensions padded: ONNX ``Pad`` (``constant``, negative
    amounts cropping; ``reflect``; ``replicate`` as ``edge``), ``circular`` as slices of ``x``
    joined to it. The amounts may be sizes computed from the inputs (``Pad``'s ``pads`` is a
    tensor), except in circular mode."""
    settings = catalog_settings(node, parameters)
    mode = settings.text("mode")
    value = settings["value"]
    entry = parameters.get("pad")
    symbolic = entry is not None and has_sizes(entry.value)
    amounts: tuple[int, ...] = settings.integers("pad")
    pairs = len(amounts) // 2
    if symbolic and mode == "circular":
        raise LoweringError("pad: circular padding by sizes computed from the inputs is not lowered", node_id=node.id)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        rank = info.rank
        if pairs > rank:
            raise LoweringError(f"pad has {pairs} pairs, more than x's {rank} dimensions")
        if mode != "constant" and rank not in (pairs + 1, pairs + 2):
            raise LoweringError(f"{mode} padding of {pairs} dimensions needs x of rank {pairs + 1} or {pairs + 2}")
        work = _PAD_DTYPES.get(dtype, dtype)
        x = g.cast(inputs["x"], work, dtype)
        axes = [rank - 1 - k for k in range(pairs)]  # pad lists the last dimension first
        if mode == "circular":
            x = circular_pad(g, x, [(amounts[2 * k], amounts[2 * k + 1]) for k in range(pairs)], axes)
            y = x if x != inputs["x"] else g.op1("Identity", [x])
            return {"y": g.cast(y, dtype, work)}
        order = [2 * k for k in range(pairs)] + [2 * k + 1 for k in range(pairs)]
        if symbolic:
            pads = g.op1("Gather", [g.int64s("pad"), g.const(np.asarray(order, np.int64))], {"axis": 0})
        else:
            pads = g.const(np.asarray([amounts[k] for k in order], np.int64))
        fill = None
        onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}[mode]
        if mode == "constant":
            with np.errstate(all="ignore"):
                fill = g.const(
                    np.asarray(0 if value is None else value).astype(numpy_dtype(dtype)).astype(numpy_dtype(work))
                )
        y = g.op1("Pad", [x, pads, fill, g.const(np.asarray(axes, np.int64))], {"mode": onnx_mode})
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)
