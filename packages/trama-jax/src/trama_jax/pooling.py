"""jax kernels of the catalog's pooling ops (:mod:`trama.catalog.pooling`): pools in one, two
and three dimensions, adaptive pools, resampling and padding.

Everything these kernels decide depends on shapes only, which are static under ``jax.jit``: the
windows, the divisors, the adaptive windows' membership matrices, and resampling's source
indices and weights are computed with numpy while tracing (:mod:`trama.catalog._pooling_geometry`,
the same code the numpy reference runs, torch's CPU index arithmetic repeated there), and become
constants of the program. Pools map onto XLA's ``reduce_window`` for any number of spatial
dimensions (opset 1's 2-d ``MaxPool2d``/``AvgPool2d`` in ``trama_jax.layers``, generalised);
an adaptive average contracts each spatial dimension with its membership matrix; resampling
gathers and weighs along one dimension at a time, the last first, as torch's kernels do.
Sums are computed in :func:`trama_jax._numerics.accumulation`'s dtype and rounded once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node
from trama.catalog import PAD_MODES, PoolWindows, adaptive_windows, check_settings
from trama.catalog._pooling_geometry import (
    adaptive_bounds,
    adaptive_taps,
    check_rank,
    pad_widths,
    pool_divisors,
    pool_fit,
    pool_windows,
    resampled_sizes,
    resampling_taps,
)
from trama_jax._numerics import HIGHEST, accumulation
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Parameters, Site, Tensors
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

Factory = Callable[..., JaxKernel]


def _ordered(site: Site, inputs: Inputs) -> jax.Array:
    """``x`` as floating-point numbers or integers (what a maximum takes)."""
    x = jnp.asarray(inputs["x"])
    if not (jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
        raise site.fail(f"x must hold floating-point numbers or integers, got dtype {x.dtype}")
    return x


def _lowest(dtype: Any) -> jax.Array:
    """The value a maximum's padding holds: −∞, or an integer dtype's minimum."""
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.array(-jnp.inf, dtype)
    return jnp.array(np.iinfo(dtype).min, dtype)


# --- Pools with fixed windows -------------------------------------------------------------------


def pooled(
    site: Site, windows: PoolWindows, x: jax.Array, init: jax.Array, op: Any, *, whole_kernel: bool = False
) -> jax.Array:
    """``op`` over every window of ``x`` padded with ``init``, for any number of spatial
    dimensions (in ceil mode the end is padded as far as the last window reaches)."""
    try:
        out, pads = pool_fit(windows, x.shape, whole_kernel=whole_kernel)
    except ValueError as error:
        raise site.fail(str(error)) from None
    lead = (1,) * (x.ndim - len(out))
    y: jax.Array = jax.lax.reduce_window(
        x,
        init,
        op,
        window_dimensions=(*lead, *windows.kernel),
        window_strides=(*lead, *windows.stride),
        padding=(*((0, 0),) * len(lead), *pads),
        window_dilation=(*lead, *windows.dilation),
    )
    return y[(Ellipsis, *(slice(0, o) for o in out))]


def _max_pool(dims: int) -> Factory:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
        windows, site = pool_windows(check_settings(node, parameters), dims), Site(node)

        def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
            x = _ordered(site, inputs)
            return {"y": pooled(site, windows, x, _lowest(x.dtype), jax.lax.max)}

        return JaxKernel(apply)

    factory.__doc__ = f"The largest element of each (dilated) window of a {dims}-d pool; padding never wins."
    return factory


def _avg_pool(dims: int) -> Factory:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
        settings, site = check_settings(node, parameters), Site(node)
        windows = pool_windows(settings, dims)
        count_include_pad = settings.flag("count_include_pad")
        divisor_override = settings.get("divisor_override")

        def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
            x = site.floating(inputs)
            acc = accumulation(x.dtype)
            total = pooled(site, windows, x.astype(acc), jnp.array(0, acc), jax.lax.add, whole_kernel=dims == 3)
            if divisor_override is not None:
                divisor = np.asarray(divisor_override, acc)
            else:
                divisor = pool_divisors(windows, x.shape[-dims:], total.shape[-dims:], count_include_pad).astype(acc)
            return {"y": (total / divisor).astype(x.dtype)}

        return JaxKernel(apply)

    factory.__doc__ = f"The sum of each window of a {dims}-d pool inside ``x``, over the catalog's divisor."
    return factory


for _dims, _names in ((1, ("MaxPool1d", "max_pool1d")), (2, ("max_pool2d",)), (3, ("MaxPool3d", "max_pool3d"))):
    implements(*_names)(_max_pool(_dims))
for _dims, _names in ((1, ("AvgPool1d", "avg_pool1d")), (2, ("avg_pool2d",)), (3, ("AvgPool3d", "avg_pool3d"))):
    implements(*_names)(_avg_pool(_dims))


# --- Adaptive pools ---------------------------------------------------------------------------


def adaptive_average(x: jax.Array, sizes: Sequence[int | None]) -> jax.Array:
    """The adaptive average over ``x``'s last ``len(sizes)`` dimensions: each contracted with its
    constant membership matrix (exact sums of every window), then divided by the windows' sizes."""
    dims = len(sizes)
    acc = accumulation(x.dtype)
    y = x.astype(acc)
    counts: np.ndarray = np.ones((), np.int64)
    for d, out in enumerate(sizes):
        axis = x.ndim - dims + d
        size = x.shape[axis]
        bins = size if out is None else out
        if size * bins > _DENSE_WINDOWS:  # the membership matrix would be a huge constant
            starts, ends = adaptive_bounds(size, bins)
            y = _gathered(y, axis, size, bins, summed=True)
            counts = np.multiply.outer(counts, ends - starts)
            continue
        member, count = adaptive_windows(size, out)
        moved = jnp.moveaxis(y, axis, -2)
        y = jnp.moveaxis(jnp.matmul(member.astype(acc), moved, precision=HIGHEST), -2, axis)
        counts = np.multiply.outer(counts, count)
    return (y / counts.astype(acc)).astype(x.dtype)


def adaptive_maximum(x: jax.Array, sizes: Sequence[int | None]) -> jax.Array:
    """The adaptive maximum over ``x``'s last ``len(sizes)`` dimensions, one at a time: every
    window gathered at once (:func:`~trama.catalog._pooling_geometry.adaptive_taps`), so the
    program has a few operations per dimension, not one per output."""
    dims = len(sizes)
    for d, out in enumerate(sizes):
        axis = x.ndim - dims + d
        size = x.shape[axis]
        x = _gathered(x, axis, size, size if out is None else out, summed=False)
    return x


#: The largest membership matrix (outputs × inputs of a dimension) an adaptive average
#: contracts with; beyond, it gathers its windows (a constant of ``out·size`` elements would make
#: XLA compile, and hold, a huge program).
_DENSE_WINDOWS = 2**22


def _gathered(x: jax.Array, axis: int, size: int, out: int, *, summed: bool) -> jax.Array:
    """Along ``axis`` (of ``size``), every adaptive window of ``out`` gathered into a new axis
    after it and reduced: the maximum (a repeated position changes nothing), or the sum with the
    repeats masked."""
    index, valid = adaptive_taps(size, out)
    width = index.shape[1]
    taken = jnp.take(x, index.reshape(-1), axis=axis)
    taken = taken.reshape(*x.shape[:axis], out, width, *x.shape[axis + 1 :])
    if not summed:
        return jnp.max(taken, axis=axis + 1)
    mask = valid.reshape(out, width, *(1,) * (x.ndim - axis - 1))
    return jnp.sum(jnp.where(mask, taken, jnp.zeros((), x.dtype)), axis=axis + 1)


def _adaptive(*, average: bool) -> Factory:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
        site = Site(node)
        output_size: tuple[int | None, ...] = check_settings(node, parameters)["output_size"]

        def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
            x = site.floating(inputs) if average else _ordered(site, inputs)
            try:
                check_rank(x.shape, len(output_size))
            except ValueError as error:
                raise site.fail(str(error)) from None
            return {"y": (adaptive_average if average else adaptive_maximum)(x, output_size)}

        return JaxKernel(apply)

    factory.__doc__ = f"An adaptive {'average' if average else 'maximum'} pool over windows fixed by the sizes."
    return factory


implements(
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
)(_adaptive(average=True))
implements("AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "adaptive_max_pool1d", "adaptive_max_pool2d")(
    _adaptive(average=False)
)


# --- Resampling -------------------------------------------------------------------------------


@implements("interpolate", "Upsample")
def interpolate(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Resampling of ``x``'s spatial dimensions: along each, the last first, the source elements
    are gathered (constant indices) and added, each times its weight, tap 0 first, in the
    accumulation dtype; the result is rounded once to ``x``'s dtype."""
    settings, site = check_settings(node, parameters), Site(node)
    mode = settings.text("mode")
    align_corners = bool(settings["align_corners"])

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        try:
            out, scales = resampled_sizes(x.shape, settings)
        except ValueError as error:
            raise site.fail(str(error)) from None
        if mode == "area":
            return {"y": adaptive_average(x, out)}
        acc = accumulation(x.dtype)
        y = x.astype(acc)
        for axis in reversed(range(2, x.ndim)):
            d = axis - 2
            taps, weights = resampling_taps(mode, x.shape[axis], out[d], align_corners, scales[d])
            if weights is None:
                y = jnp.take(y, taps[:, 0], axis=axis)
                continue
            shape = (-1,) + (1,) * (x.ndim - axis - 1)
            total = jnp.take(y, taps[:, 0], axis=axis) * weights[:, 0].astype(acc).reshape(shape)
            for j in range(1, taps.shape[1]):
                total = total + jnp.take(y, taps[:, j], axis=axis) * weights[:, j].astype(acc).reshape(shape)
            y = total
        return {"y": y.astype(x.dtype)}

    return JaxKernel(apply)


# --- Padding ------------------------------------------------------------------------------------


@implements("pad")
def pad(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Constant padding by ``jax.lax.pad`` (whose negative amounts crop, as the catalog's do);
    the other modes by ``jnp.pad``'s reflect, edge and wrap modes."""
    settings, site = check_settings(node, parameters), Site(node)
    amounts, mode, value = settings.integers("pad"), settings.text("mode"), settings["value"]

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        try:
            widths = pad_widths(amounts, mode, x.shape)
        except ValueError as error:
            raise site.fail(str(error)) from None
        if mode == "constant":
            fill = jnp.asarray(np.asarray(0 if value is None else value).astype(x.dtype))
            return {"y": jax.lax.pad(x, fill, [(before, after, 0) for before, after in widths])}
        return {"y": jnp.pad(x, widths, mode=PAD_MODES[mode])}

    return JaxKernel(apply)
