"""numpy kernels of the catalog's pooling ops (:mod:`trama.catalog.pooling`): pools in one, two
and three dimensions, adaptive pools, resampling and padding.

These are the reference the other frameworks are tested against, so each kernel follows the
catalog's formula as literally as vectorised numpy allows and computes in its input's dtype; a
float16 or bfloat16 input is computed in float32 and rounded once (the catalog's half-precision
rule, :mod:`trama_numpy._precision`), which a maximum, exact in any dtype, does not need.
The kernels are written once for any number of spatial dimensions: a pool is a strided window
view of the padded input (opset 1's 2-d ``MaxPool2d``/``AvgPool2d`` in ``trama_numpy.layers``,
generalised), an adaptive average contracts each spatial dimension with a 0/1 membership matrix
(``AdaptiveAvgPool2d``'s two matrix products, one per dimension), and resampling gathers along
each dimension the source elements :mod:`trama.catalog._pooling_geometry` computed, torch's CPU
index arithmetic repeated there, and sums them with their weights in the order torch does.

Settings come checked from the core (:func:`trama.catalog.check_settings`); an input that does not
fit raises ``ValueError`` or ``TypeError`` naming the op and the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from trama import Node, Parameter
from trama.catalog import PAD_MODES, PoolWindows, Settings, adaptive_windows, check_settings
from trama.catalog._pooling_geometry import (
    adaptive_taps,
    check_rank,
    pad_widths,
    pool_divisors,
    pool_fit,
    pool_windows,
    resampled_sizes,
    resampling_taps,
)
from trama.extension import Kernel
from trama_numpy._precision import compute_dtype, is_floating, rounded, widened
from trama_numpy._registry import implements

__all__: list[str] = []

Array = npt.NDArray[Any]


class _Kernel:
    """Base of this module's kernels: knows its node, to name it when an input does not fit."""

    __slots__ = ("where",)

    def __init__(self, node: Node) -> None:
        self.where = f"{node.op} (node {node.id!r})"

    def floating(self, inputs: Mapping[str, Any]) -> Array:
        """``x`` as an array of floating-point numbers, bfloat16 included (torch refuses integers
        here)."""
        array = np.asarray(inputs["x"])
        if not is_floating(array.dtype):
            raise TypeError(f"{self.where}: x must be a floating-point array, got dtype {array.dtype}")
        return array

    def ordered(self, inputs: Mapping[str, Any]) -> Array:
        """``x`` as an array of floating-point numbers or integers (what a maximum takes)."""
        array = np.asarray(inputs["x"])
        if array.dtype.kind not in "iu" and not is_floating(array.dtype):
            raise TypeError(f"{self.where}: x must be a floating-point or integer array, got dtype {array.dtype}")
        return array

    def fail(self, error: ValueError) -> ValueError:
        return ValueError(f"{self.where}: {error}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for {self.where}>"


def _lowest(dtype: np.dtype[Any]) -> Any:
    """The value a maximum's padding holds: −∞, or an integer dtype's minimum."""
    return -np.inf if is_floating(dtype) else np.iinfo(dtype).min


# --- Pools with fixed windows -------------------------------------------------------------------


def pool_view(
    x: Array, windows: PoolWindows, fill: Any, *, whole_kernel: bool = False
) -> tuple[Array, tuple[int, ...]]:
    """Every window of ``x`` padded with ``fill``, ``[*, *out, *kernel]``, and the output's
    spatial size: a strided view (no copy but the padding). In ceil mode the last window may
    reach past the catalog's padding; the input is padded as far as the windows reach."""
    dims = len(windows.kernel)
    out, pads = pool_fit(windows, x.shape, whole_kernel=whole_kernel)
    padded = np.pad(x, [(0, 0)] * (x.ndim - dims) + list(pads), constant_values=fill)
    view = sliding_window_view(padded, windows.spans, axis=tuple(range(x.ndim - dims, x.ndim)))
    steps: tuple[Any, ...] = (
        Ellipsis,
        *(slice(None, None, s) for s in windows.stride),
        *(slice(None, None, d) for d in windows.dilation),
    )
    view = view[steps]
    kept: tuple[Any, ...] = (Ellipsis, *(slice(0, o) for o in out), *(slice(None),) * dims)
    return view[kept], out


class _MaxPool(_Kernel):
    __slots__ = ("windows",)

    def __init__(self, node: Node, settings: Settings, dims: int) -> None:
        super().__init__(node)
        self.windows = pool_windows(settings, dims)

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.ordered(inputs)
        try:
            view, _ = pool_view(x, self.windows, _lowest(x.dtype))
        except ValueError as error:
            raise self.fail(error) from None
        dims = len(self.windows.kernel)
        return {"y": view.max(axis=tuple(range(-dims, 0)))}


class _AvgPool(_Kernel):
    __slots__ = ("count_include_pad", "divisor_override", "windows")

    def __init__(self, node: Node, settings: Settings, dims: int) -> None:
        super().__init__(node)
        self.windows = pool_windows(settings, dims)
        self.count_include_pad = settings.flag("count_include_pad")
        self.divisor_override = settings.get("divisor_override")

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        work = widened(x)
        dims = len(self.windows.kernel)
        try:
            view, out = pool_view(work, self.windows, 0, whole_kernel=dims == 3)
        except ValueError as error:
            raise self.fail(error) from None
        total = view.sum(axis=tuple(range(-dims, 0)))
        if self.divisor_override is not None:
            divisor: Array = np.asarray(self.divisor_override, work.dtype)
        else:
            divisor = pool_divisors(self.windows, x.shape[-dims:], out, self.count_include_pad).astype(work.dtype)
        return {"y": rounded(total / divisor, x.dtype)}


def _pool(kind: type[_MaxPool | _AvgPool], dims: int) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        return kind(node, check_settings(node, parameters), dims)

    factory.__doc__ = f"A {dims}-d {'maximum' if kind is _MaxPool else 'average'} pool (see the module docstring)."
    return factory


for _dims, _names in ((1, ("MaxPool1d", "max_pool1d")), (2, ("max_pool2d",)), (3, ("MaxPool3d", "max_pool3d"))):
    implements(*_names)(_pool(_MaxPool, _dims))
for _dims, _names in ((1, ("AvgPool1d", "avg_pool1d")), (2, ("avg_pool2d",)), (3, ("AvgPool3d", "avg_pool3d"))):
    implements(*_names)(_pool(_AvgPool, _dims))


# --- Adaptive pools ---------------------------------------------------------------------------


def adaptive_average(x: Array, sizes: Sequence[int | None]) -> Array:
    """The adaptive average of ``x`` over its last ``len(sizes)`` dimensions: each dimension is
    contracted with its membership matrix (sums of every window, overlapping ones included),
    then divided by the windows' sizes, torch's sum-then-divide order; in float32 for a 16-bit
    ``x``, rounded once."""
    dims = len(sizes)
    counts: npt.NDArray[np.int64] = np.ones((), np.int64)
    work = widened(x)
    for d, out in enumerate(sizes):
        axis = x.ndim - dims + d
        member, count = adaptive_windows(work.shape[axis], out)
        work = np.moveaxis(np.matmul(member.astype(work.dtype), np.moveaxis(work, axis, -2)), -2, axis)
        counts = np.multiply.outer(counts, count)
    return rounded(work / counts.astype(work.dtype), x.dtype)


def adaptive_maximum(x: Array, sizes: Sequence[int | None]) -> Array:
    """The adaptive maximum of ``x`` over its last ``len(sizes)`` dimensions, one dimension at a
    time (a maximum over a box is the maximum of its rows' maxima)."""
    dims = len(sizes)
    for d, out in enumerate(sizes):
        axis = x.ndim - dims + d
        size = x.shape[axis]
        bins = size if out is None else out
        index, _ = adaptive_taps(size, bins)  # every window at once; a repeated position changes no maximum
        taken = np.take(x, index.reshape(-1), axis=axis)
        x = taken.reshape(*x.shape[:axis], bins, index.shape[1], *x.shape[axis + 1 :]).max(axis=axis + 1)
    return x


class _Adaptive(_Kernel):
    __slots__ = ("average", "output_size")

    def __init__(self, node: Node, settings: Settings, *, average: bool) -> None:
        super().__init__(node)
        self.output_size: tuple[int | None, ...] = settings["output_size"]
        self.average = average

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs) if self.average else self.ordered(inputs)
        try:
            check_rank(x.shape, len(self.output_size))
        except ValueError as error:
            raise self.fail(error) from None
        pooled = adaptive_average if self.average else adaptive_maximum
        return {"y": pooled(x, self.output_size)}


def _adaptive(*, average: bool) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        return _Adaptive(node, check_settings(node, parameters), average=average)

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


class _Resample(_Kernel):
    """``interpolate`` and ``Upsample``: each spatial dimension resampled on its own, the last one
    first (torch's innermost loop), by gathering the source elements and adding them, each times
    its weight, tap 0 first, in the opmath type; the result is rounded once to ``x``'s dtype."""

    __slots__ = ("settings",)

    def __init__(self, node: Node, settings: Settings) -> None:
        super().__init__(node)
        self.settings = settings

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        settings = self.settings
        try:
            out, scales = resampled_sizes(x.shape, settings)
        except ValueError as error:
            raise self.fail(error) from None
        mode = settings.text("mode")
        if mode == "area":
            return {"y": adaptive_average(x, out)}
        real = compute_dtype(x.dtype).type  # torch's CPU "opmath" type: float64 for float64, else float32
        y: Array = x.astype(real, copy=False)
        for axis in reversed(range(2, x.ndim)):
            d = axis - 2
            taps, weights = resampling_taps(
                mode, x.shape[axis], out[d], bool(settings["align_corners"]), scales[d], real
            )
            if weights is None:
                y = np.take(y, taps[:, 0], axis=axis)
                continue
            shape = (-1,) + (1,) * (x.ndim - axis - 1)
            total = np.take(y, taps[:, 0], axis=axis) * weights[:, 0].reshape(shape)
            for j in range(1, taps.shape[1]):
                total += np.take(y, taps[:, j], axis=axis) * weights[:, j].reshape(shape)
            y = total
        return {"y": y.astype(x.dtype, copy=False)}


@implements("interpolate", "Upsample")
def interpolate(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Resampling of ``x``'s spatial dimensions (see :class:`_Resample`)."""
    return _Resample(node, check_settings(node, parameters))


# --- Padding ------------------------------------------------------------------------------------


class _Pad(_Kernel):
    __slots__ = ("mode", "pad", "value")

    def __init__(self, node: Node, settings: Settings) -> None:
        super().__init__(node)
        self.pad = settings.integers("pad")
        self.mode = settings.text("mode")
        self.value = settings["value"]

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        try:
            widths = pad_widths(self.pad, self.mode, x.shape)
        except ValueError as error:
            raise self.fail(error) from None
        grown = [(max(before, 0), max(after, 0)) for before, after in widths]
        if self.mode == "constant":
            fill = np.asarray(0 if self.value is None else self.value).astype(x.dtype)
            y = np.pad(x, grown, mode="constant", constant_values=fill)
            crop = tuple(
                slice(max(-before, 0), size - max(-after, 0))
                for (before, after), size in zip(widths, y.shape, strict=True)
            )
            return {"y": y[crop]}
        return {"y": np.pad(x, grown, mode=PAD_MODES[self.mode])}


@implements("pad")
def pad(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Constant, reflecting, replicating or circular padding of ``x``'s last dimensions."""
    return _Pad(node, check_settings(node, parameters))
