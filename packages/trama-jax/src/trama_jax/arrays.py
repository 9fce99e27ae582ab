"""jax kernels of the catalog's arrays ops (:mod:`trama.catalog.arrays`): expanding, gathering,
scans, triangles, rolling, repeating, ``einsum``, the opset-2 reductions and tensor creation.

They follow :mod:`trama_jax.functions`: torch's rules where JAX differs, every check of shapes
and dtypes done while tracing, and 64-bit results computed in their 32-bit counterparts outside
x64 mode (an integer ``cumsum``, ``prod``, ``argmin`` or ``arange`` gives int32, a documented
exception). What depends on values cannot be checked under ``jax.jit`` and is not: a
``gather`` or ``index_select`` position out of range gives what XLA gives (torch raises).

The creation ops depend on their settings alone (and a ``_like`` op on the shape and dtype of
``x``), so their values are computed once, at build time, by the core's rules
(:func:`trama.catalog._arrays_checks.arange_values`), which numpy shares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
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
from trama.catalog._indexing import clamped_slice
from trama.format import numpy_dtype
from trama_jax._numerics import HIGHEST, accumulation
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Site
from trama_jax.functions import _is_floating, _nonempty, _numbered, _reduction, _unary, _wrap_dims, jax_dtype, wrap_dim
from trama_jax.kernel import JaxKernel

__all__: list[str] = []

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_UINT8 = np.dtype(np.uint8)
_FLOAT32 = np.dtype(np.float32)


# --- Shapes ---------------------------------------------------------------------------------


@implements("expand")
def expand(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` broadcast to ``size`` (−1 keeps a dimension, new leading dimensions allowed)."""
    size = check_settings(node, parameters).integers("size")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        try:
            return jnp.broadcast_to(x, expanded_shape(tuple(x.shape), size))
        except ValueError as error:
            raise site.fail(str(error)) from None

    return _unary(node, compute)


def _index(value: Any, site: Site) -> jax.Array:
    """An index tensor: integers (int64 arrives as int32 outside x64 mode)."""
    index = jnp.asarray(value)
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise site.fail(f"index must hold integers, got dtype {index.dtype}")
    return index


@implements("gather")
def gather(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``torch.gather``: ``take_along_axis`` on ``x`` cut to the index's sizes in the other
    dimensions (torch lets the index be smaller there; JAX would broadcast)."""
    site, dim = Site(node), check_settings(node, parameters).integer("dim")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x, index = jnp.asarray(inputs["x"]), _index(inputs["index"], site)
        axis = wrap_dim(dim, x.ndim, site)
        if index.ndim != x.ndim:
            raise site.fail(f"index has {index.ndim} dimensions, x has {x.ndim}")
        if x.ndim == 0:
            return {"y": x}
        if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape, strict=True)) if k != axis):
            raise site.fail(f"index of shape {list(index.shape)} is larger than x {list(x.shape)}")
        cut = x[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(index.shape))]
        return {"y": jnp.take_along_axis(cut, index, axis=axis, mode="clip")}

    return JaxKernel(apply)


@implements("index_select")
def index_select(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The slices of ``x`` at ``index`` along ``dim`` (a 0-d index acts as a 1-element one)."""
    site, dim = Site(node), check_settings(node, parameters).integer("dim")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x, index = jnp.asarray(inputs["x"]), _index(inputs["index"], site)
        if index.ndim > 1:
            raise site.fail(f"index must be 1-D or 0-d, got {index.ndim} dimensions")
        axis = wrap_dim(dim, x.ndim, site)
        if x.ndim == 0:
            return {"y": x}
        return {"y": jnp.take(x, index.reshape(-1), axis=axis, mode="clip")}

    return JaxKernel(apply)


def _scan(node: Node, parameters: Mapping[str, Parameter], scan: Callable[..., jax.Array]) -> JaxKernel:
    """``cumsum``/``cumprod`` along ``dim``: floats in their accumulation dtype, the rest as
    int64 (int32 outside x64 mode)."""
    dim = check_settings(node, parameters).integer("dim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        axis = wrap_dim(dim, x.ndim, site)
        flat = x.reshape(1) if x.ndim == 0 else x
        axis = 0 if x.ndim == 0 else axis
        if _is_floating(x.dtype):
            result = scan(flat.astype(accumulation(x.dtype)), axis=axis).astype(x.dtype)
        else:
            result = scan(flat.astype(jax_dtype(_INT64)), axis=axis)
        return result.reshape(x.shape)

    return _unary(node, compute)


@implements("cumsum")
def cumsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The running sum along ``dim``."""
    return _scan(node, parameters, jnp.cumsum)


@implements("cumprod")
def cumprod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The running product along ``dim``."""
    return _scan(node, parameters, jnp.cumprod)


def _triangle(node: Node, parameters: Mapping[str, Parameter], upper: bool) -> JaxKernel:
    diagonal = check_settings(node, parameters).integer("diagonal")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if x.ndim < 2:
            raise site.fail(f"x must have at least 2 dimensions, got {x.ndim}")
        rows, cols = x.shape[-2:]
        offsets = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        keep = offsets >= diagonal if upper else offsets <= diagonal
        return jnp.where(keep, x, jnp.zeros((), x.dtype))

    return _unary(node, compute)


@implements("triu")
def triu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Elements with ``j − i ≥ diagonal`` kept, the others 0."""
    return _triangle(node, parameters, upper=True)


@implements("tril")
def tril(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Elements with ``j − i ≤ diagonal`` kept, the others 0."""
    return _triangle(node, parameters, upper=False)


@implements("roll")
def roll(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``jnp.roll``, whose rule is torch's; ``dims`` null rolls the flattened tensor."""
    settings = check_settings(node, parameters)
    shifts, dims = settings.integers("shifts"), settings["dims"]

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if dims is None:
            return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
        if x.ndim == 0:
            raise site.fail("a 0-d x has no dimension to roll (dims must be null, as torch requires)")
        return jnp.roll(x, shifts, axis=tuple(wrap_dim(d, x.ndim, site) for d in dims))

    return _unary(node, compute)


@implements("flip")
def flip(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` reversed along ``dims`` (naming one twice is an error, as in torch)."""
    dims = check_settings(node, parameters).integers("dims")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        axes = _wrap_dims(dims, x.ndim, site)
        return x if x.ndim == 0 or not axes else jnp.flip(x, axis=axes)

    return _unary(node, compute)


@implements("slice_scatter")
def slice_scatter(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` whose slice along ``dim`` is ``src`` (same dtype, the slice's shape)."""
    site, settings = Site(node), check_settings(node, parameters)

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x, src = jnp.asarray(inputs["x"]), jnp.asarray(inputs["src"])
        if src.dtype != x.dtype:
            raise site.fail(f"src has dtype {src.dtype}, x has {x.dtype}; they must be the same")
        try:
            dim, part = scattered_slice(tuple(x.shape), tuple(src.shape), settings)
        except ValueError as error:
            raise site.fail(str(error)) from None
        part = clamped_slice(part, x.shape[dim])  # no bound beyond the dimension reaches XLA
        return {"y": x.at[(slice(None),) * dim + (part,)].set(src)}

    return JaxKernel(apply)


@implements("contiguous")
def contiguous(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` itself: JAX arrays have no layout a program can see."""
    check_settings(node, parameters)
    return _unary(node, lambda x, site: x)


def _tiled(x: jax.Array, repeats: tuple[int, ...]) -> jax.Array:
    """``x`` with leading size-1 dimensions up to ``len(repeats)``, tiled by ``repeats``."""
    x = x.reshape((1,) * (len(repeats) - x.ndim) + tuple(x.shape))
    return jnp.tile(x, repeats) if repeats else x


@implements("repeat")
def repeat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``Tensor.repeat``: ``repeats`` has at least as many entries as ``x`` has dimensions."""
    repeats = check_settings(node, parameters).integers("repeats")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if len(repeats) < x.ndim:
            raise site.fail(f"repeats {list(repeats)} has fewer entries than x has dimensions ({x.ndim})")
        return _tiled(x, repeats)

    return _unary(node, compute)


@implements("tile")
def tile(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``torch.tile``: ``dims`` padded with leading 1s to the rank of ``x``."""
    dims = check_settings(node, parameters).integers("dims")
    return _unary(node, lambda x, site: _tiled(x, (1,) * (x.ndim - len(dims)) + dims))


@implements("repeat_interleave")
def repeat_interleave(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``jnp.repeat`` with the counts known at build time and the length they make given, so
    that the result's shape is static under ``jax.jit``."""
    settings = check_settings(node, parameters)
    counts, dim = settings.integers("repeats"), settings.optional_integer("dim")
    repeats = np.asarray(counts, dtype=np.int64)

    def compute(x: jax.Array, site: Site) -> jax.Array:
        try:
            axis, length = interleaved(tuple(x.shape), dim, counts)
        except ValueError as error:
            raise site.fail(str(error)) from None
        if axis is None:
            x, axis = x.reshape(-1), 0
        return jnp.repeat(x, repeats, axis=axis, total_repeat_length=length)

    return _unary(node, compute)


@implements("einsum")
def einsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``jnp.einsum`` of the explicit equation at the highest precision, 16-bit floats
    accumulated in float32 and rounded once."""
    site, equation = Site(node), check_settings(node, parameters).text("equation")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        arrays = _numbered(inputs, site)
        dtypes = {np.dtype(array.dtype) for array in arrays}
        if len(dtypes) != 1:
            raise site.fail(f"operands of dtypes {sorted(map(str, dtypes))} (torch requires one dtype)")
        (dtype,) = dtypes
        if dtype == _BOOL:
            raise site.fail("einsum of bools is not defined (torch refuses it too)")
        try:
            einsum_shapes(equation, [tuple(array.shape) for array in arrays])
        except ValueError as error:
            raise site.fail(str(error)) from None
        result = jnp.einsum(equation, *arrays, precision=HIGHEST, preferred_element_type=accumulation(dtype))
        return {"y": result.astype(dtype)}

    return JaxKernel(apply)


# --- Reductions -----------------------------------------------------------------------------


@implements("min")
def min_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The smallest element over ``dim`` (``torch.amin``): NaN wins, an empty dimension is an error."""

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        _nonempty(x, axes, site)
        return jnp.min(x, axis=axes, keepdims=keepdim)

    return _reduction(node, parameters, reduce)


def _single(
    node: Node, parameters: Mapping[str, Parameter], reduce: Callable[[jax.Array, int | None, bool, Site], jax.Array]
) -> JaxKernel:
    """A reduction over one dimension, or all (``dim`` null), with ``keepdim``."""
    settings = check_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        axis = None if dim is None else wrap_dim(dim, x.ndim, site)
        return reduce(x, None if x.ndim == 0 else axis, keepdim, site)

    return _unary(node, compute)


@implements("argmin")
def argmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The index of the smallest element: the first on ties, the first NaN if any; int64
    (int32 outside x64 mode)."""

    def reduce(x: jax.Array, axis: int | None, keepdim: bool, site: Site) -> jax.Array:
        _nonempty(x, None, site)
        index_dtype = jax_dtype(_INT64)
        if axis is None:
            index = jnp.argmin(x.reshape(-1)).astype(index_dtype)
            return index.reshape((1,) * x.ndim) if keepdim else index
        return jnp.argmin(x, axis=axis, keepdims=keepdim).astype(index_dtype)

    return _single(node, parameters, reduce)


@implements("topk")
def topk(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The first ``k`` of ``jnp.argsort(..., stable=True)`` along ``dim``: the catalog's tie rule
    (the lower position first, descending too) and torch's order (NaN the largest).
    ``jax.lax.top_k`` is not used: it searches the last dimension only, largest only. Indices
    are int64 (int32 outside x64 mode)."""
    site, settings = Site(node), check_settings(node, parameters)
    k, dim, largest = settings.integer("k"), settings.integer("dim"), settings.flag("largest")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        if x.dtype == _BOOL:
            raise site.fail("topk of bools is not defined (torch refuses it too)")
        try:
            axis = top_k_axis(tuple(x.shape), dim, k)
        except ValueError as error:
            raise site.fail(str(error)) from None
        index_dtype = jax_dtype(_INT64)
        if x.ndim == 0:
            return {"values": x, "indices": jnp.asarray(0, dtype=index_dtype)}
        order = jnp.argsort(x, axis=axis, stable=True, descending=largest)
        indices = jax.lax.slice_in_dim(order, 0, k, axis=axis).astype(index_dtype)
        return {"values": jnp.take_along_axis(x, indices, axis=axis), "indices": indices}

    return JaxKernel(apply)


@implements("prod")
def prod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The product over ``dim`` (or every element); bools and integers as int64 (int32 outside
    x64 mode)."""

    def reduce(x: jax.Array, axis: int | None, keepdim: bool, site: Site) -> jax.Array:
        if _is_floating(x.dtype):
            return jnp.prod(x.astype(accumulation(x.dtype)), axis=axis, keepdims=keepdim).astype(x.dtype)
        return jnp.prod(x.astype(jax_dtype(_INT64)), axis=axis, keepdims=keepdim)

    return _single(node, parameters, reduce)


def _variance(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, correction: float, site: Site) -> jax.Array:
    """Two-pass variance in the accumulation dtype: squared deviations over ``max(0, N − c)``."""
    if not _is_floating(x.dtype):
        raise site.fail(f"x must have a floating dtype, got {x.dtype}")
    wide = x.astype(accumulation(x.dtype))
    count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
    mean = jnp.sum(wide, axis=axes, keepdims=True) / count
    squares = jnp.sum(jnp.square(wide - mean), axis=axes, keepdims=keepdim)
    return squares / jnp.asarray(max(0.0, count - correction), wide.dtype)


@implements("var")
def var(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The variance over ``dim`` with ``correction``."""
    correction = check_settings(node, parameters).number("correction")

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        return _variance(x, axes, keepdim, correction, site).astype(x.dtype)

    return _reduction(node, parameters, reduce)


@implements("std")
def std(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The square root of ``var``."""
    correction = check_settings(node, parameters).number("correction")

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        return jnp.sqrt(_variance(x, axes, keepdim, correction, site)).astype(x.dtype)

    return _reduction(node, parameters, reduce)


def _logical(node: Node, parameters: Mapping[str, Parameter], function: Callable[..., jax.Array]) -> JaxKernel:
    """``any``/``all``: bool, or uint8 for a uint8 ``x`` (torch's exception)."""

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        result = function(x != 0, axis=axes, keepdims=keepdim)
        return result.astype(_UINT8) if x.dtype == _UINT8 else result

    return _reduction(node, parameters, reduce)


@implements("any")
def any_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Whether any element over ``dim`` is nonzero."""
    return _logical(node, parameters, jnp.any)


@implements("all")
def all_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Whether every element over ``dim`` is nonzero."""
    return _logical(node, parameters, jnp.all)


@implements("linalg_vector_norm")
def linalg_vector_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The vector norm in the accumulation dtype, rounded to ``x``'s dtype."""
    settings = check_settings(node, parameters)
    dims, order, keepdim = settings["dim"], settings.number("ord"), settings.flag("keepdim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if not _is_floating(x.dtype):
            raise site.fail(f"x must have a floating dtype, got {x.dtype}")
        axes = None if dims is None or x.ndim == 0 else _wrap_dims(dims, x.ndim, site)
        size = jnp.abs(x.astype(accumulation(x.dtype)))
        if order == float("inf"):
            total = jnp.max(size, axis=axes, keepdims=True, initial=0.0)
        elif order == float("-inf"):
            total = jnp.min(size, axis=axes, keepdims=True, initial=jnp.inf)
        elif order == 0:
            total = jnp.sum(size != 0, axis=axes, keepdims=True).astype(size.dtype)
        else:
            total = jnp.sum(size**order, axis=axes, keepdims=True) ** (1.0 / order)
        if not keepdim:
            total = jnp.squeeze(total, axis=axes) if axes is not None else total.reshape(())
        return total.astype(x.dtype)

    return _unary(node, compute)


@implements("logsumexp")
def logsumexp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``log Σ exp(x)`` shifted by the (finite) maximum, in the accumulation dtype; bools and
    integers give float32."""
    settings = check_settings(node, parameters)
    dims, keepdim = settings.integers("dim"), settings.flag("keepdim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        axes = _wrap_dims(dims, x.ndim, site)
        dtype = x.dtype if _is_floating(x.dtype) else _FLOAT32
        wide = x.astype(accumulation(dtype))
        if x.ndim == 0:
            return wide.astype(dtype)
        peak = jnp.max(wide, axis=axes, keepdims=True, initial=-jnp.inf)
        shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(peak), peak, 0.0))
        total = jnp.log(jnp.sum(jnp.exp(wide - shift), axis=axes, keepdims=True)) + shift
        return (total if keepdim else jnp.squeeze(total, axis=axes)).astype(dtype)

    return _unary(node, compute)


# --- Creation -------------------------------------------------------------------------------


def _constant(value: np.ndarray) -> JaxKernel:
    """A kernel whose result is ``value``, in the dtype JAX computes it in."""
    result = np.asarray(value, dtype=jax_dtype(value.dtype))
    return JaxKernel(lambda held, inputs: {"y": jnp.asarray(result)})


@implements("arange")
def arange(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``start + i·step``, computed at build by the core's rule (numpy shares it)."""
    s = check_settings(node, parameters)
    return _constant(arange_values(s["start"], s["end"], s["step"], s.text("result_dtype")))


def _fill(node: Node, parameters: Mapping[str, Parameter], fill: int | float | bool | None) -> JaxKernel:
    settings = check_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    return _constant(filled(settings.integers("size"), value, numpy_dtype(settings.text("result_dtype"))))


@implements("full")
def full(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """A tensor of ``size`` filled with ``fill_value`` (dtype decided by the core's check)."""
    return _fill(node, parameters, None)


@implements("zeros")
def zeros(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """A tensor of ``size`` filled with 0."""
    return _fill(node, parameters, 0)


@implements("ones")
def ones(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """A tensor of ``size`` filled with 1."""
    return _fill(node, parameters, 1)


def _like(node: Node, parameters: Mapping[str, Parameter], fill: int | float | bool | None) -> JaxKernel:
    settings = check_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    dtype_name = settings["result_dtype"]

    def compute(x: jax.Array, site: Site) -> jax.Array:
        dtype = np.dtype(x.dtype) if dtype_name is None else numpy_dtype(dtype_name)
        one = filled((), value, dtype)
        return jnp.full(x.shape, one, dtype=jax_dtype(dtype))

    return _unary(node, compute)


@implements("full_like")
def full_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The shape of ``x`` filled with ``fill_value``, of ``dtype`` or that of ``x``."""
    return _like(node, parameters, None)


@implements("zeros_like")
def zeros_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The shape of ``x`` filled with 0."""
    return _like(node, parameters, 0)


@implements("ones_like")
def ones_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The shape of ``x`` filled with 1."""
    return _like(node, parameters, 1)
