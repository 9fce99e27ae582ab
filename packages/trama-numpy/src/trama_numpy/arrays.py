"""numpy kernels of the catalog's arrays ops (:mod:`trama.catalog.arrays`): expanding, gathering,
scans, triangles, rolling, repeating, ``einsum``, the opset-2 reductions and tensor creation.

They follow :mod:`trama_numpy.functions`: torch's rules where numpy differs (a 0-d tensor accepts
the dimensions 0 and −1; ``gather`` and ``index_select`` refuse negative positions, which numpy
would wrap; bool and integer scans and products are int64), and floating results computed in
float64 and rounded once to their dtype. Settings come checked from the core
(:func:`trama.catalog.check_settings`), which also writes ``einsum``'s equation in explicit form
and decides a created tensor's dtype; inputs that do not fit raise ``TypeError``, ``ValueError``
or ``IndexError`` naming the op and the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from trama import Node, Parameter
from trama.catalog import check_settings
from trama.catalog._arrays_checks import (
    arange_values,
    einsum_shapes,
    expanded_shape,
    filled,
    interleaved,
    scattered_slice,
    top_k_axis,
)
from trama.extension import Kernel
from trama.format import numpy_dtype
from trama_numpy._registry import implements
from trama_numpy.functions import (
    _BOOL,
    _FLOAT32,
    _FLOAT64,
    _INT64,
    Array,
    _is_floating,
    _numbered_inputs,
    _output,
    _reduction,
    _rounded,
    _where,
    _wrap_dim,
    _wrap_dims,
)

__all__: list[str] = []

_UINT8 = np.dtype(np.uint8)
_Inputs = Mapping[str, Any]


def _unary(node: Node, compute: Callable[[Array], Array]) -> Kernel:
    """A kernel applying ``compute`` to the array on ``x``."""

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        return {"y": _output(compute(np.asarray(inputs["x"])))}

    return kernel


# --- Shapes ---------------------------------------------------------------------------------


@implements("expand")
def expand(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` broadcast to ``size`` (a read-only view: values are immutable)."""
    where, size = _where(node), check_settings(node, parameters).integers("size")

    def compute(x: Array) -> Array:
        try:
            return np.broadcast_to(x, expanded_shape(x.shape, size))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    return _unary(node, compute)


def _positions(index: Any, extent: int, where: str, *, dtypes: tuple[np.dtype[Any], ...]) -> Array:
    """An index tensor whose positions lie in ``0 … extent − 1`` (torch raises otherwise)."""
    array = np.asarray(index)
    if array.dtype not in dtypes:
        allowed = " or ".join(str(dtype) for dtype in dtypes)
        raise TypeError(f"{where}: index must be {allowed}, got dtype {array.dtype}")
    if array.size and (array.min() < 0 or array.max() >= extent):
        raise IndexError(f"{where}: index holds positions outside 0 … {extent - 1}")
    return array


@implements("gather")
def gather(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``torch.gather``: ``take_along_axis`` on ``x`` cut to the index's sizes in the other
    dimensions (torch lets the index be smaller there, numpy would broadcast)."""
    where, dim = _where(node), check_settings(node, parameters).integer("dim")

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        index = np.asarray(inputs["index"])
        axis = _wrap_dim(dim, x.ndim, where)
        if index.ndim != x.ndim:
            raise ValueError(f"{where}: index has {index.ndim} dimensions, x has {x.ndim}")
        if x.ndim == 0:
            _positions(index, 1, where, dtypes=(_INT64,))
            return {"y": x.copy()}
        if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape, strict=True)) if k != axis):
            raise ValueError(f"{where}: index of shape {list(index.shape)} is larger than x {list(x.shape)}")
        index = _positions(index, x.shape[axis], where, dtypes=(_INT64,))
        cut = x[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(index.shape))]
        return {"y": np.take_along_axis(cut, index, axis=axis)}

    return kernel


@implements("index_select")
def index_select(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The slices of ``x`` at ``index`` along ``dim`` (a 0-d index acts as a 1-element one)."""
    where, dim = _where(node), check_settings(node, parameters).integer("dim")

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        index = np.asarray(inputs["index"])
        if index.ndim > 1:
            raise ValueError(f"{where}: index must be 1-D or 0-d, got {index.ndim} dimensions")
        axis = _wrap_dim(dim, x.ndim, where)
        extent = x.shape[axis] if x.ndim else 1
        positions = _positions(index.reshape(-1), extent, where, dtypes=(np.dtype(np.int32), _INT64))
        if x.ndim == 0:
            return {"y": x.copy()}
        return {"y": np.take(x, positions, axis=axis)}

    return kernel


def _scan(node: Node, parameters: Mapping[str, Parameter], scan: Callable[..., Array]) -> Kernel:
    """``cumsum``/``cumprod`` along ``dim``: floats in float64 rounded once, the rest as int64."""
    where, dim = _where(node), check_settings(node, parameters).integer("dim")

    def compute(x: Array) -> Array:
        axis = _wrap_dim(dim, x.ndim, where)
        if x.ndim == 0:
            x, axis = x.reshape(1), 0
            reshape: tuple[int, ...] | None = ()
        else:
            reshape = None
        if _is_floating(x.dtype):
            with np.errstate(all="ignore"):
                result = _rounded(scan(x.astype(_FLOAT64), axis=axis), x.dtype)
        else:
            with np.errstate(all="ignore"):
                result = _output(scan(x.astype(_INT64), axis=axis))
        return result if reshape is None else result.reshape(reshape)

    return _unary(node, compute)


@implements("cumsum")
def cumsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The running sum along ``dim``; bools and integers as int64."""
    return _scan(node, parameters, np.cumsum)


@implements("cumprod")
def cumprod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The running product along ``dim``; bools and integers as int64 (wrapping, as in torch)."""
    return _scan(node, parameters, np.cumprod)


def _triangle(node: Node, parameters: Mapping[str, Parameter], upper: bool) -> Kernel:
    where, diagonal = _where(node), check_settings(node, parameters).integer("diagonal")

    def compute(x: Array) -> Array:
        if x.ndim < 2:
            raise ValueError(f"{where}: x must have at least 2 dimensions, got {x.ndim}")
        rows, cols = x.shape[-2:]
        offsets = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        keep = offsets >= diagonal if upper else offsets <= diagonal
        return np.where(keep, x, np.zeros((), dtype=x.dtype))

    return _unary(node, compute)


@implements("triu")
def triu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Elements with ``j − i ≥ diagonal`` kept, the others 0."""
    return _triangle(node, parameters, upper=True)


@implements("tril")
def tril(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Elements with ``j − i ≤ diagonal`` kept, the others 0."""
    return _triangle(node, parameters, upper=False)


@implements("roll")
def roll(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``numpy.roll``, whose rule is torch's; ``dims`` null rolls the flattened tensor."""
    where = _where(node)
    settings = check_settings(node, parameters)
    shifts, dims = settings.integers("shifts"), settings["dims"]

    def compute(x: Array) -> Array:
        if dims is None:
            return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
        if x.ndim == 0:
            raise IndexError(f"{where}: a 0-d x has no dimension to roll (dims must be null, as torch requires)")
        return np.roll(x, shifts, axis=[_wrap_dim(d, x.ndim, where) for d in dims])

    return _unary(node, compute)


@implements("flip")
def flip(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` reversed along ``dims`` (naming one twice is an error, as in torch)."""
    where, dims = _where(node), check_settings(node, parameters).integers("dims")

    def compute(x: Array) -> Array:
        axes = _wrap_dims(dims, x.ndim, where)
        return x.copy() if x.ndim == 0 or not axes else np.flip(x, axis=axes)

    return _unary(node, compute)


@implements("slice_scatter")
def slice_scatter(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """A copy of ``x`` whose slice along ``dim`` is ``src`` (same dtype, the slice's shape)."""
    where, settings = _where(node), check_settings(node, parameters)

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        x, src = np.asarray(inputs["x"]), np.asarray(inputs["src"])
        if src.dtype != x.dtype:
            raise TypeError(f"{where}: src has dtype {src.dtype}, x has {x.dtype}; they must be the same")
        try:
            dim, part = scattered_slice(x.shape, src.shape, settings)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        y = x.copy()
        y[(slice(None),) * dim + (part,)] = src
        return {"y": y}

    return kernel


@implements("contiguous")
def contiguous(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` itself: numpy arrays here are never written into, so no copy is needed."""
    check_settings(node, parameters)
    return _unary(node, lambda x: x)


def _tiled(x: Array, repeats: tuple[int, ...]) -> Array:
    """``x`` with leading size-1 dimensions up to ``len(repeats)``, tiled by ``repeats``."""
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    return np.tile(x, repeats) if repeats else x.copy()


@implements("repeat")
def repeat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``Tensor.repeat``: ``repeats`` has at least as many entries as ``x`` has dimensions."""
    where, repeats = _where(node), check_settings(node, parameters).integers("repeats")

    def compute(x: Array) -> Array:
        if len(repeats) < x.ndim:
            raise ValueError(f"{where}: repeats {list(repeats)} has fewer entries than x has dimensions ({x.ndim})")
        return _tiled(x, repeats)

    return _unary(node, compute)


@implements("tile")
def tile(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``torch.tile``: ``dims`` padded with leading 1s to the rank of ``x``."""
    dims = check_settings(node, parameters).integers("dims")

    def compute(x: Array) -> Array:
        return _tiled(x, (1,) * (x.ndim - len(dims)) + dims)

    return _unary(node, compute)


@implements("repeat_interleave")
def repeat_interleave(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``numpy.repeat``, which is ``torch.repeat_interleave`` (a ``dim`` of null flattens ``x``
    first); the counts and their fit to ``x`` are the core's (:func:`interleaved`)."""
    where, settings = _where(node), check_settings(node, parameters)
    counts, dim = settings.integers("repeats"), settings.optional_integer("dim")

    def compute(x: Array) -> Array:
        try:
            axis, _ = interleaved(x.shape, dim, counts)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if axis is None:
            x, axis = x.reshape(-1), 0
        return np.repeat(x, np.asarray(counts, dtype=_INT64), axis=axis)

    return _unary(node, compute)


@implements("einsum")
def einsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``numpy.einsum`` of the explicit equation; floats summed in float64 and rounded once."""
    where, equation = _where(node), check_settings(node, parameters).text("equation")

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        arrays = [np.asarray(value) for value in _numbered_inputs(inputs, "x", where)]
        dtypes = {array.dtype for array in arrays}
        if len(dtypes) != 1:
            raise TypeError(f"{where}: operands of dtypes {sorted(map(str, dtypes))} (torch requires one dtype)")
        (dtype,) = dtypes
        if dtype == _BOOL:
            raise TypeError(f"{where}: einsum of bools is not defined (torch refuses it too)")
        try:
            einsum_shapes(equation, [array.shape for array in arrays])
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        work = _FLOAT64 if _is_floating(dtype) else dtype
        with np.errstate(all="ignore"):
            result = np.einsum(equation, *(array.astype(work, copy=False) for array in arrays))
        return {"y": _rounded(result, dtype)}

    return kernel


# --- Reductions -----------------------------------------------------------------------------


def _nonempty(x: Array, axes: tuple[int, ...] | None, where: str) -> None:
    sizes = x.shape if axes is None else [x.shape[a] for a in axes]
    if 0 in sizes:
        raise ValueError(f"{where}: cannot reduce an empty dimension of a tensor of shape {list(x.shape)}")


@implements("min")
def min_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The smallest element over ``dim`` (``torch.amin``): NaN wins, an empty dimension is an error."""
    where = _where(node)

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        _nonempty(x, axes, where)
        values = x.astype(_FLOAT64, copy=False) if _is_floating(x.dtype) else x
        return _rounded(np.min(values, axis=axes, keepdims=keepdim), x.dtype)

    return _reduction(node, parameters, reduce)


def _single(
    node: Node, parameters: Mapping[str, Parameter], reduce: Callable[[Array, int | None, bool], Array]
) -> Kernel:
    """A reduction over one dimension, or all (``dim`` null), with ``keepdim``."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def compute(x: Array) -> Array:
        axis = None if dim is None else _wrap_dim(dim, x.ndim, where)
        return reduce(x, None if x.ndim == 0 else axis, keepdim)

    return _unary(node, compute)


@implements("argmin")
def argmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The int64 index of the smallest element: the first on ties, the first NaN if any (numpy's
    ``argmin`` rules, which are torch's)."""
    where = _where(node)

    def reduce(x: Array, axis: int | None, keepdim: bool) -> Array:
        if x.size == 0:
            raise ValueError(f"{where}: argmin of an empty tensor")
        values = x.astype(_FLOAT64, copy=False) if _is_floating(x.dtype) else x
        if axis is None:
            return _argmin_all(values, keepdim)
        return _output(np.argmin(values, axis=axis, keepdims=keepdim)).astype(_INT64)

    return _single(node, parameters, reduce)


def _argmin_all(values: Array, keepdim: bool) -> Array:
    """The index into the flattened tensor, 0-d, or (``keepdim``) shaped ``[1, …, 1]``."""
    index = np.asarray(np.argmin(values), dtype=_INT64)
    return index.reshape((1,) * values.ndim) if keepdim else index


@implements("topk")
def topk(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The first ``k`` of a stable sort along ``dim``, the catalog's tie rule (the lower position
    first) and torch's order (NaN the largest): ascending, numpy's stable ``argsort`` (NaN last);
    descending, the same sort of ``x`` reversed along ``dim``, read backwards, which keeps equal
    elements in their order. Floats are ordered as float64 (exact for every float dtype, NaN
    kept), so ``bfloat16`` sorts as the others."""
    where, settings = _where(node), check_settings(node, parameters)
    k, dim, largest = settings.integer("k"), settings.integer("dim"), settings.flag("largest")

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype == _BOOL:
            raise TypeError(f"{where}: topk of bools is not defined (torch refuses it too)")
        try:
            axis = top_k_axis(x.shape, dim, k)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if x.ndim == 0:
            return {"values": x.copy(), "indices": np.asarray(0, dtype=_INT64)}
        keys = x.astype(_FLOAT64) if _is_floating(x.dtype) else x
        if largest:
            size = x.shape[axis]
            backwards = np.argsort(np.flip(keys, axis), axis=axis, kind="stable")
            order = size - 1 - np.flip(backwards, axis)
        else:
            order = np.argsort(keys, axis=axis, kind="stable")
        indices = np.take(order, np.arange(k), axis=axis).astype(_INT64)
        return {"values": np.take_along_axis(x, indices, axis=axis), "indices": indices}

    return kernel


@implements("prod")
def prod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The product over ``dim`` (or every element): floats in float64 rounded once, bools and
    integers as int64, wrapping on overflow as torch's int64 product does."""

    def reduce(x: Array, axis: int | None, keepdim: bool) -> Array:
        if _is_floating(x.dtype):
            with np.errstate(all="ignore"):
                return _rounded(np.prod(x, axis=axis, dtype=_FLOAT64, keepdims=keepdim), x.dtype)
        with np.errstate(all="ignore"):
            return _output(np.prod(x, axis=axis, dtype=_INT64, keepdims=keepdim))

    return _single(node, parameters, reduce)


def _variance(x: Array, axes: tuple[int, ...] | None, keepdim: bool, correction: float, where: str) -> Array:
    """Two-pass variance in float64: squared deviations from the mean over ``max(0, N − c)``."""
    if not _is_floating(x.dtype):
        raise TypeError(f"{where}: x must have a floating dtype, got {x.dtype}")
    wide = x.astype(_FLOAT64)
    count = wide.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(all="ignore"):
        mean = np.sum(wide, axis=axes, keepdims=True) / count
        squares = np.sum((wide - mean) ** 2, axis=axes, keepdims=keepdim)
        return np.asarray(squares / max(0.0, count - correction))


@implements("var")
def var(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The variance over ``dim`` with ``correction``, float64 two-pass, rounded once."""
    where, correction = _where(node), check_settings(node, parameters).number("correction")

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        return _rounded(_variance(x, axes, keepdim, correction, where), x.dtype)

    return _reduction(node, parameters, reduce)


@implements("std")
def std(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The square root of ``var``, in float64, rounded once."""
    where, correction = _where(node), check_settings(node, parameters).number("correction")

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        return _rounded(np.sqrt(_variance(x, axes, keepdim, correction, where)), x.dtype)

    return _reduction(node, parameters, reduce)


def _logical(node: Node, parameters: Mapping[str, Parameter], function: Callable[..., Array]) -> Kernel:
    """``any``/``all``: bool, or uint8 for a uint8 ``x`` (torch's exception)."""

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        result = _output(function(x != 0, axis=axes, keepdims=keepdim))
        return result.astype(_UINT8) if x.dtype == _UINT8 else result

    return _reduction(node, parameters, reduce)


@implements("any")
def any_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Whether any element over ``dim`` is nonzero."""
    return _logical(node, parameters, np.any)


@implements("all")
def all_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Whether every element over ``dim`` is nonzero."""
    return _logical(node, parameters, np.all)


@implements("linalg_vector_norm")
def linalg_vector_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The vector norm in float64, rounded once to ``x``'s dtype."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dims, order, keepdim = settings["dim"], settings.number("ord"), settings.flag("keepdim")

    def compute(x: Array) -> Array:
        if not _is_floating(x.dtype):
            raise TypeError(f"{where}: x must have a floating dtype, got {x.dtype}")
        axes = None if dims is None else _wrap_dims(dims, x.ndim, where) if x.ndim else None
        size = np.abs(x.astype(_FLOAT64))
        with np.errstate(all="ignore"):
            if order == np.inf:
                total = np.max(size, axis=axes, keepdims=True, initial=0.0)
            elif order == -np.inf:
                total = np.min(size, axis=axes, keepdims=True, initial=np.inf)
            elif order == 0:
                total = np.sum(size != 0, axis=axes, keepdims=True).astype(_FLOAT64)
            else:
                total = np.sum(size**order, axis=axes, keepdims=True) ** (1.0 / order)
        if not keepdim:
            total = np.squeeze(total, axis=axes) if axes is not None else total.reshape(())
        return _rounded(total, x.dtype)

    return _unary(node, compute)


@implements("logsumexp")
def logsumexp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``log Σ exp(x)`` in float64, shifted by the (finite) maximum; integers give float32."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dims, keepdim = settings.integers("dim"), settings.flag("keepdim")

    def compute(x: Array) -> Array:
        axes = _wrap_dims(dims, x.ndim, where)
        dtype = x.dtype if _is_floating(x.dtype) else _FLOAT32
        wide = x.astype(_FLOAT64)
        if x.ndim == 0:
            return _rounded(wide, dtype)
        with np.errstate(all="ignore"):
            peak = np.max(wide, axis=axes, keepdims=True, initial=-np.inf)
            shift = np.where(np.isfinite(peak), peak, 0.0)
            total = np.log(np.sum(np.exp(wide - shift), axis=axes, keepdims=True)) + shift
        return _rounded(total if keepdim else np.squeeze(total, axis=axes), dtype)

    return _unary(node, compute)


# --- Creation -------------------------------------------------------------------------------


def _constant(value: Array) -> Kernel:
    value.flags.writeable = False

    def kernel(inputs: _Inputs) -> Mapping[str, Any]:
        return {"y": value}

    return kernel


@implements("arange")
def arange(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``start + i·step`` in float64 (exact for integers), rounded once; computed at build."""
    s = check_settings(node, parameters)
    return _constant(arange_values(s["start"], s["end"], s["step"], s.text("result_dtype")))


def _fill(node: Node, parameters: Mapping[str, Parameter], fill: int | float | bool | None) -> Kernel:
    settings = check_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    return _constant(filled(settings.integers("size"), value, numpy_dtype(settings.text("result_dtype"))))


@implements("full")
def full(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """A tensor of ``size`` filled with ``fill_value`` (dtype decided by the core's check)."""
    return _fill(node, parameters, None)


@implements("zeros")
def zeros(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """A tensor of ``size`` filled with 0."""
    return _fill(node, parameters, 0)


@implements("ones")
def ones(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """A tensor of ``size`` filled with 1."""
    return _fill(node, parameters, 1)


def _like(node: Node, parameters: Mapping[str, Parameter], fill: int | float | bool | None) -> Kernel:
    settings = check_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    dtype_name = settings["result_dtype"]

    def compute(x: Array) -> Array:
        dtype = x.dtype if dtype_name is None else numpy_dtype(dtype_name)
        return filled(x.shape, value, dtype)

    return _unary(node, compute)


@implements("full_like")
def full_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The shape of ``x`` filled with ``fill_value``, of ``dtype`` or that of ``x``."""
    return _like(node, parameters, None)


@implements("zeros_like")
def zeros_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The shape of ``x`` filled with 0."""
    return _like(node, parameters, 0)


@implements("ones_like")
def ones_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The shape of ``x`` filled with 1."""
    return _like(node, parameters, 1)
