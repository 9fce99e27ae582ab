"""The shape rules of :mod:`trama.catalog.pooling` that every framework's kernels share: pool
windows in any number of spatial dimensions, adaptive windows, resampling's source indices and
weights, and padding amounts.

As in :mod:`trama.catalog._geometry` (whose 2-d :class:`~trama.catalog.PoolWindows` these
functions take, with tuples of any length), everything here depends on shapes only, so it runs
while a kernel is called (a JAX kernel calls it while tracing, where shapes are static); a shape
that does not fit raises ``ValueError`` about the input alone, which kernels re-raise naming the
node.

Resampling's indices and weights are computed here, once, in float32 numpy arithmetic that
repeats torch's CPU kernels operation by operation (``ATen/native/UpSample.h``): which input
element an output reads is decided by a floor of a rounded product, and two frameworks that
round differently would read different elements. Kernels then only gather and weigh.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trama.catalog._geometry import PoolWindows, pool_output_size
from trama.catalog._reader import Settings

__all__ = [
    "RESAMPLING_RANKS",
    "adaptive_bounds",
    "adaptive_taps",
    "check_rank",
    "pad_widths",
    "pool_divisors",
    "pool_fit",
    "pool_windows",
    "resampled_sizes",
    "resampling_ratio",
    "resampling_taps",
]

_F32 = np.float32
Int64s = npt.NDArray[np.int64]
Reals = npt.NDArray[np.floating[Any]]


def check_rank(shape: Sequence[int], dims: int, *, unbatched: bool = True) -> None:
    """``x`` must be ``[N, C, *S]`` (or ``[C, *S]`` where ``unbatched``) with ``dims`` spatial
    dimensions, none of them empty."""
    ranks = (dims + 1, dims + 2) if unbatched else (dims + 2,)
    if len(shape) not in ranks:
        layouts = " or ".join(f"{rank}" for rank in ranks)
        raise ValueError(f"x should have {layouts} dimensions, got shape {list(shape)}")
    if any(size == 0 for size in shape[-dims:]):
        raise ValueError(f"x has an empty spatial dimension: shape {list(shape)}")


# --- Pools with fixed windows -----------------------------------------------------------------


def pool_windows(settings: Settings, dims: int) -> PoolWindows:
    """The windows a checked pool's settings describe (average pools have no dilation: 1)."""
    dilation = settings.integers("dilation") if "dilation" in settings else (1,) * dims
    return PoolWindows(
        settings.integers("kernel_size"),
        settings.integers("stride"),  # the checker has made null the kernel size
        settings.integers("padding"),
        dilation,
        settings.flag("ceil_mode"),
    )


def pool_fit(
    windows: PoolWindows, shape: Sequence[int], *, whole_kernel: bool = False
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """For ``x`` of ``shape`` (``[N, C, *S]`` or ``[C, *S]``): the output's spatial sizes and how
    much to pad each spatial dimension before and after. The end is padded as far as the last
    window reaches (in ceil mode it may pass the catalog's padding), with the value the pool
    ignores; this is :meth:`PoolWindows.fit` for any number of spatial dimensions.
    ``whole_kernel``: every spatial size must be at least the kernel's, padding aside (torch's
    3-d average pool checks that)."""
    dims = len(windows.kernel)
    check_rank(shape, dims)
    sizes = tuple(shape[-dims:])
    if whole_kernel and any(size < k for size, k in zip(sizes, windows.kernel, strict=True)):
        raise ValueError(f"x of shape {list(shape)} is smaller than the kernel {list(windows.kernel)}")
    geometry = zip(sizes, windows.kernel, windows.stride, windows.padding, windows.dilation, strict=True)
    out = tuple(pool_output_size(*g, windows.ceil_mode) for g in geometry)
    if min(out) <= 0:
        raise ValueError(f"x of shape {list(shape)} is too small for the window: output size {list(out)}")
    ends = (
        max((o - 1) * s + span - size - p, 0)
        for o, s, span, size, p in zip(out, windows.stride, windows.spans, sizes, windows.padding, strict=True)
    )
    return out, tuple(zip(windows.padding, ends, strict=True))


def pool_divisors(
    windows: PoolWindows, sizes: Sequence[int], out: Sequence[int], count_include_pad: bool
) -> npt.NDArray[np.int64]:
    """An average pool's divisor of each output, of shape ``out``: the product over the spatial
    dimensions of the window clipped to the end padding (``e − s``) with ``count_include_pad``,
    else of the number of its positions inside ``x`` (:meth:`PoolWindows.divisors`, N-d)."""
    divisors: npt.NDArray[np.int64] = np.ones((), np.int64)
    for d, size in enumerate(sizes):
        start = np.arange(out[d], dtype=np.int64) * windows.stride[d] - windows.padding[d]
        end = np.minimum(start + windows.kernel[d], size + windows.padding[d])
        count = end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0)
        divisors = np.multiply.outer(divisors, count)
    return divisors


# --- Adaptive pools ---------------------------------------------------------------------------


def adaptive_bounds(size: int, out: int) -> tuple[Int64s, Int64s]:
    """The adaptive windows along a dimension of ``size`` with ``out`` outputs: output i covers
    ``start[i] … end[i] − 1`` with ``start = ⌊i·S/O⌋`` and ``end = ⌈(i + 1)·S/O⌉`` (the rows of
    :func:`trama.catalog.adaptive_windows`' membership matrix, as bounds)."""
    index = np.arange(out, dtype=np.int64)
    return index * size // out, -(-(index + 1) * size // out)


def adaptive_taps(size: int, out: int) -> tuple[Int64s, npt.NDArray[np.bool_]]:
    """The adaptive windows along a dimension of ``size`` with ``out`` outputs as one gather:
    ``index[i, j]`` is window i's j-th position, ``valid[i, j]`` whether window i has that many
    (a shorter window repeats its last position). Windows are at most ``⌈S/O⌉ + 1`` long, so
    the gather holds at most ``S + 2·O`` positions: a kernel pools every window with a few
    array operations, whatever ``out`` is, instead of one operation per window (JAX would
    build, and XLA compile, one per output). Repeating a position leaves a maximum unchanged;
    a sum masks the repeats with ``valid``."""
    starts, ends = adaptive_bounds(size, out)
    width = int((ends - starts).max(initial=1))
    index = starts[:, np.newaxis] + np.arange(width, dtype=np.int64)
    valid: npt.NDArray[np.bool_] = index < ends[:, np.newaxis]
    return np.minimum(index, ends[:, np.newaxis] - 1), valid


# --- Resampling -------------------------------------------------------------------------------

#: The modes of ``interpolate`` by the number of spatial dimensions they need (``None``: any).
RESAMPLING_RANKS: dict[str, int | None] = {
    "nearest": None,
    "nearest-exact": None,
    "area": None,
    "linear": 1,
    "bilinear": 2,
    "bicubic": 2,
    "trilinear": 3,
}


def _per_dimension(value: Any, dims: int, name: str) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        if len(value) != dims:
            raise ValueError(f"{name} has {len(value)} entries, but x has {dims} spatial dimensions")
        return value
    return (value,) * dims


def resampled_sizes(shape: Sequence[int], settings: Settings) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    """For ``x`` of ``shape`` and a checked ``interpolate``: the output's spatial sizes and the
    scale each dimension's ratio comes from (``None``: ``S / S′``)."""
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"x should be [N, C, *S] with 1 to 3 spatial dimensions, got shape {list(shape)}")
    dims = len(shape) - 2
    mode = settings.text("mode")
    needed = RESAMPLING_RANKS[mode]
    if needed is not None and needed != dims:
        raise ValueError(f'mode "{mode}" needs {needed} spatial dimensions, x of shape {list(shape)} has {dims}')
    sizes = tuple(shape[2:])
    if settings["size"] is not None:
        out = tuple(int(s) for s in _per_dimension(settings["size"], dims, "size"))
        return out, (None,) * dims
    scales = tuple(float(s) for s in _per_dimension(settings["scale_factor"], dims, "scale_factor"))
    out = tuple(math.floor(size * scale) for size, scale in zip(sizes, scales, strict=True))
    if min(out, default=1) <= 0:
        raise ValueError(f"scale_factor {list(scales)} leaves no element of x of shape {list(shape)}")
    if settings["recompute_scale_factor"] or mode == "area":
        return out, (None,) * dims
    return out, scales


def resampling_ratio(size: int, out: int, align_corners: bool, scale: float | None, real: type = _F32) -> Any:
    """torch's ``area_pixel_compute_scale`` in the float type ``real``: the step between source
    positions."""
    if align_corners:
        return real(size - 1) / real(out - 1) if out > 1 else real(0)
    return real(1.0 / scale) if scale is not None and scale > 0 else real(size) / real(out)


def _source(ratio: Any, out: int, align_corners: bool, real: type, *, clamp: bool) -> Reals:
    index: Reals = np.arange(out).astype(real)
    if align_corners:
        return ratio * index  # type: ignore[no-any-return]
    position: Reals = ratio * (index + real(0.5)) - real(0.5)
    return np.maximum(position, real(0)) if clamp else position


def _floored(position: Reals, size: int, real: type) -> tuple[Int64s, Reals]:
    """torch's ``guard_index_and_lambda``: the index below (at most the last) and the fraction."""
    index = np.minimum(np.floor(position).astype(np.int64), size - 1)
    fraction = np.minimum(np.maximum(position - index.astype(real), real(0)), real(1))
    return index, fraction


def _cubic_near(u: Reals, a: Any) -> Reals:
    return ((a + 2) * u - (a + 3)) * u * u + 1  # type: ignore[no-any-return]


def _cubic_far(u: Reals, a: Any) -> Reals:
    return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a  # type: ignore[no-any-return]


def resampling_taps(
    mode: str, size: int, out: int, align_corners: bool, scale: float | None, real: type = _F32
) -> tuple[Int64s, Reals | None]:
    """The source indices ``[out, taps]`` along one dimension and their weights (``None`` for
    the nearest modes, which copy), as ``docs/ops.md`` states them for ``interpolate``; ``area``
    is an adaptive pool and has none. ``real`` is the float type of the arithmetic: torch's
    "opmath" type of ``x``'s dtype (float64 for float64, else float32); the nearest modes always
    compute in float32, as torch does."""
    if mode in ("nearest", "nearest-exact"):
        index = np.arange(out, dtype=np.int64)
        if mode == "nearest" and out == size:
            return index[:, np.newaxis], None
        if mode == "nearest" and out == 2 * size:
            return (index >> 1)[:, np.newaxis], None
        ratio = resampling_ratio(size, out, False, scale)
        if mode == "nearest":
            source = np.floor(index.astype(_F32) * ratio)
        else:  # the product in double, rounded to float for floorf
            source = np.floor(((index + 0.5) * np.float64(ratio)).astype(_F32))
        return np.minimum(source.astype(np.int64), size - 1)[:, np.newaxis], None
    ratio = resampling_ratio(size, out, align_corners, scale, real)
    if mode == "bicubic":
        lower, t = _floored(_source(ratio, out, align_corners, real, clamp=False), size, real)
        a = real(-0.75)
        one = real(1)
        weights = np.stack(
            [_cubic_far(t + one, a), _cubic_near(t, a), _cubic_near(one - t, a), _cubic_far((one - t) + one, a)],
            axis=1,
        )
        taps = np.clip(lower[:, np.newaxis] + np.arange(-1, 3), 0, size - 1)
        return taps, weights.astype(real)
    if out == size:  # torch copies, with the weights 1 and 0
        index = np.arange(out, dtype=np.int64)
        ones: Reals = np.ones(out, real)
        zeros: Reals = np.zeros(out, real)
        return np.stack([index, index], axis=1), np.stack([ones, zeros], axis=1)
    low, fraction = _floored(_source(ratio, out, align_corners, real, clamp=True), size, real)
    high = low + (low < size - 1)
    return np.stack([low, high], axis=1), np.stack([real(1) - fraction, fraction], axis=1)


# --- Padding ----------------------------------------------------------------------------------


def pad_widths(pad: Sequence[int], mode: str, shape: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``pad``'s ``(before, after)`` amounts for every dimension of ``x`` of ``shape``, first to
    last (``pad`` lists the last dimension first), after torch's checks of the rank and, for the
    non-constant modes, of each amount against its dimension."""
    m = len(pad) // 2
    if m > len(shape):
        raise ValueError(f"pad {list(pad)} has {m} pairs, more than x's {len(shape)} dimensions (shape {list(shape)})")
    if mode != "constant" and len(shape) not in (m + 1, m + 2):
        raise ValueError(f"{mode} padding of {m} dimensions needs x of rank {m + 1} or {m + 2}, got {list(shape)}")
    widths = [(0, 0)] * (len(shape) - m)
    widths += [(pad[2 * k], pad[2 * k + 1]) for k in reversed(range(m))]
    for size, (before, after) in zip(shape, widths, strict=True):
        widest = max(before, after)
        if mode == "constant" and size + before + after < 0:
            raise ValueError(f"pad {list(pad)} removes more than all of x of shape {list(shape)}")
        if mode == "reflect" and widest >= size:
            raise ValueError(f"reflect padding of {widest} needs more than that many elements, got {size}")
        if mode == "replicate" and widest and size == 0:
            raise ValueError(f"replicate padding needs a non-empty dimension, x has shape {list(shape)}")
        if mode == "circular" and widest > size:
            raise ValueError(f"circular padding of {widest} needs at least that many elements, got {size}")
    return tuple(widths)
