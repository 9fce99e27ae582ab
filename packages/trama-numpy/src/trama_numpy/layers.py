"""numpy kernels for the catalog's fixed layers: dense and bilinear maps, convolutions, pooling,
normalization, embedding, dropout and shape helpers (``docs/ops.md``, section *Layers*).

These are the reference the other frameworks are tested against, so each kernel follows the
catalog's formula as literally as vectorised numpy allows, and computes in the dtype of its input
(float32 in, float32 out), as torch does; parameters of another dtype are cast to it. A float16 or
bfloat16 input is computed in float32 and the result rounded once to its dtype, the catalog's
half-precision rule (:mod:`trama_numpy._precision`): products and sums accumulate in float32, and
a normalization's ``eps`` is added in float32, where ``1e-12`` is not lost as it is in float16.

Every factory builds from its node's settings as the core checked them
(:func:`trama.catalog.check_settings`: defaults applied, a bad setting or a weight whose shape
disagrees with ``in_features`` refused with :class:`trama.RegistryError` naming the node, the same
error in every framework). A kernel raises ``ValueError`` or ``TypeError`` for an input that does
not fit it (wrong rank, channel count or dtype), naming the op and the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from trama import Node, Parameter
from trama.catalog import (
    PAD_MODES,
    PoolWindows,
    Settings,
    adaptive_windows,
    channels_first,
    check_pad_room,
    check_settings,
    flattened_shape,
)
from trama.extension import Kernel
from trama_numpy._precision import compute_dtype, epsilon, is_floating, parameter_like, rounded, widened
from trama_numpy._registry import implements, optional_array, required_array

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm1d",
    "batch_norm2d",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "dropout",
    "embedding",
    "flatten",
    "group_norm",
    "identity",
    "layer_norm",
    "linear",
    "max_pool2d",
    "rms_norm",
]

Array = npt.NDArray[Any]

# --- What every kernel shares -----------------------------------------------------------------


class _Kernel:
    """Base of this module's kernels: knows its node, to name it when an input does not fit."""

    __slots__ = ("where",)

    def __init__(self, node: Node) -> None:
        self.where = f"{node.op} (node {node.id!r})"

    def floating(self, inputs: Mapping[str, Any], port: str = "x") -> Array:
        """The value on ``port`` as an array, which must hold floating-point numbers (torch refuses
        integer inputs to these layers; numpy would silently compute in integers). bfloat16 is
        floating too, though numpy's kind for it is not ``"f"``."""
        array = np.asarray(inputs[port])
        if not is_floating(array.dtype):
            raise TypeError(f"{self.where}: {port} must be a floating-point array, got dtype {array.dtype}")
        return array

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.where}: {message}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for {self.where}>"


def _like(parameter: Array, x: Array) -> Array:
    """A parameter as the kernel computes with it for the input ``x``: in ``x``'s dtype, widened
    to float32 when that is a 16-bit one (no copy when it already is)."""
    return parameter_like(parameter, x.dtype)


# --- Dense maps -----------------------------------------------------------------------------


class _Linear(_Kernel):
    __slots__ = ("bias", "in_features", "weight_t")

    def __init__(self, node: Node, weight: Array, bias: Array | None) -> None:
        super().__init__(node)
        self.in_features = weight.shape[1]
        # A transposed view, not a copy: BLAS takes the transpose as a flag, and on the machines we
        # measured the view ran faster than a contiguous [in, out] copy (185 vs 201 us at 512x512).
        self.weight_t = weight.T
        self.bias = bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise self.fail(f"x has shape {list(x.shape)}, whose last dimension should be {self.in_features}")
        y = widened(x) @ _like(self.weight_t, x)
        if self.bias is not None:
            y += _like(self.bias, x)
        return {"y": rounded(y, x.dtype)}


@implements("Linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = x · weightᵀ + bias`` over the last dimension."""
    check_settings(node, parameters)
    return _Linear(node, required_array(parameters, "weight"), optional_array(parameters, "bias"))


class _Bilinear(_Kernel):
    __slots__ = ("bias", "weight")

    def __init__(self, node: Node, weight: Array, bias: Array | None) -> None:
        super().__init__(node)
        self.weight = weight
        self.bias = bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x1, x2 = self.floating(inputs, "input1"), self.floating(inputs, "input2")
        _, in1, in2 = self.weight.shape
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != in1 or x2.shape[-1] != in2:
            raise self.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} should end in {in1} and {in2}")
        if x1.shape[:-1] != x2.shape[:-1]:
            raise self.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} differ in their leading dimensions")
        weight = _like(self.weight, x1)
        # Two contractions instead of one three-operand einsum: input1 with the weight first (a
        # GEMM, [*, out, in2]), then that with input2 along in2.
        partial = np.tensordot(widened(x1), weight, axes=([-1], [1]))
        y = np.einsum("...oj,...j->...o", partial, widened(x2))
        if self.bias is not None:
            y += _like(self.bias, x1)
        return {"y": rounded(y, x1.dtype)}


@implements("Bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``."""
    check_settings(node, parameters)
    return _Bilinear(node, required_array(parameters, "weight"), optional_array(parameters, "bias"))


# --- Convolutions ---------------------------------------------------------------------------


def _gemm_weight(weight: Array, groups: int) -> Array:
    """A convolution weight ``[O, C_g, *K]`` as one matrix per group, ``[G, C_g·∏K, O_g]``:
    the right-hand side of the im2col product in :func:`_correlate`."""
    out = weight.shape[0]
    per_group = weight.reshape(groups, out // groups, -1)  # [G, O_g, C_g·∏K]
    return np.ascontiguousarray(per_group.transpose(0, 2, 1))


def _correlate(
    padded: Array,
    weight: Array,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Array:
    """Grouped cross-correlation of an already padded, batched ``[N, C, *P]`` input with a
    weight in :func:`_gemm_weight`'s form; returns ``[N, O, *out]``.

    This is im2col: every output position's receptive field is laid out as one row, so that the
    whole convolution becomes a single batched matrix product (one GEMM per group) and no Python
    code runs per output pixel. ``sliding_window_view`` gives every window of the padded input as
    a strided *view*, ``[N, C, *(P − span + 1), *span]`` with ``span = dilation·(k − 1) + 1``;
    slicing its window axes with step ``dilation`` keeps the kernel taps and slicing its
    position axes with step ``stride`` keeps the output positions, still without copying. The
    only copy is the final reshape into rows ``[G, N·∏out, C_g·∏K]``, whose column order (channel,
    then kernel position, C order) is the order of ``weight.reshape(O, -1)``'s columns, so the
    product is exactly the catalog's ``Σ_c Σ_k p[n, g·C_g + c, q·stride + k·dilation] ·
    weight[o, c, k]``.
    """
    dims = len(kernel)
    n, channels = padded.shape[:2]
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    sizes = padded.shape[2:]
    if any(size < span for size, span in zip(sizes, spans, strict=True)):
        raise ValueError(
            f"the padded input's spatial size {list(sizes)} is smaller than the kernel's extent {list(spans)}"
        )
    windows = sliding_window_view(padded, spans, axis=tuple(range(2, 2 + dims)))
    every = slice(None)
    taps = (every, every, *(slice(None, None, s) for s in stride), *(slice(None, None, d) for d in dilation))
    windows = windows[taps]  # [N, C, *out, *K]
    out = windows.shape[2 : 2 + dims]
    per_group = channels // groups
    # [N, G, C_g, *out, *K] -> [G, N, *out, C_g, *K]: rows are (sample, position), columns (c, k).
    split = windows.reshape(n, groups, per_group, *out, *kernel)
    order = (1, 0, *range(3, 3 + dims), 2, *range(3 + dims, 3 + 2 * dims))
    rows = split.transpose(order).reshape(groups, n * math.prod(out), per_group * math.prod(kernel))
    product = rows @ weight  # [G, N·∏out, O_g]
    out_per_group = weight.shape[2]
    # [G, N, *out, O_g] -> [N, G, O_g, *out] -> [N, O, *out]
    y = product.reshape(groups, n, *out, out_per_group).transpose(1, 0, 2 + dims, *range(2, 2 + dims))
    return y.reshape(n, groups * out_per_group, *out)


class _Conv(_Kernel):
    __slots__ = ("bias", "dilation", "groups", "in_channels", "kernel", "mode", "pads", "stride", "weight")

    def __init__(
        self,
        node: Node,
        *,
        weight: Array,
        bias: Array | None,
        kernel: tuple[int, ...],
        stride: tuple[int, ...],
        pads: tuple[tuple[int, int], ...],
        dilation: tuple[int, ...],
        groups: int,
        mode: str,
    ) -> None:
        super().__init__(node)
        self.in_channels = weight.shape[1] * groups
        self.weight = _gemm_weight(weight, groups)
        self.bias = bias
        self.kernel, self.stride, self.pads, self.dilation = kernel, stride, pads, dilation
        self.groups = groups
        self.mode = mode

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        dims = len(self.kernel)
        batched = _batched(self, x, dims, self.in_channels)
        padded = self._pad(widened(batched))
        try:
            y = _correlate(padded, _like(self.weight, x), self.kernel, self.stride, self.dilation, self.groups)
        except ValueError as exc:
            raise self.fail(str(exc)) from None
        if self.bias is not None:
            y += _like(self.bias, x).reshape(-1, *([1] * dims))
        return {"y": rounded(y if batched is x else y[0], x.dtype)}

    def _pad(self, x: Array) -> Array:
        if not any(before or after for before, after in self.pads):
            return x
        try:
            check_pad_room(self.mode, self.pads, x.shape[2:])
        except ValueError as error:
            raise self.fail(str(error)) from None
        return np.pad(x, ((0, 0), (0, 0), *self.pads), mode=PAD_MODES[self.mode])


def _batched(kernel: _Kernel, x: Array, dims: int, channels: int) -> Array:
    """``x`` with its batch dimension: an unbatched ``[C, *S]`` input gains a leading 1."""
    try:
        batched = channels_first(x.shape, dims, channels)
    except ValueError as error:
        raise kernel.fail(str(error)) from None
    return x if batched else x[np.newaxis]


def _conv(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: int) -> Kernel:
    """Conv1d and Conv2d: grouped, dilated, strided cross-correlation of a padded input."""
    settings = check_settings(node, parameters)
    return _Conv(
        node,
        weight=required_array(parameters, "weight"),
        bias=optional_array(parameters, "bias"),
        kernel=settings.integers("kernel_size"),
        stride=settings.integers("stride"),
        pads=settings["pads"],
        dilation=settings.integers("dilation"),
        groups=settings.integer("groups"),
        mode=settings.text("padding_mode"),
    )


@implements("Conv1d")
def conv1d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last dimension of ``[N, C, L]`` or ``[C, L]``."""
    return _conv(node, children=children, parameters=parameters, dims=1)


@implements("Conv2d")
def conv2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last two dimensions of ``[N, C, H, W]`` or ``[C, H, W]``."""
    return _conv(node, children=children, parameters=parameters, dims=2)


class _ConvTranspose(_Kernel):
    """The transposed convolution computed as an ordinary one, so that it shares im2col.

    Spreading each input element over a window of ``y`` (the catalog's definition) is the same
    as a stride-1 correlation of a *dilated* input with the spatially flipped kernel: insert
    ``stride − 1`` zeros between neighbouring input elements, pad each dimension by
    ``dilation·(k − 1) − padding`` at the start and that plus ``output_padding`` at the end (a
    negative amount crops), and correlate with ``weight`` flipped and its channel axes swapped
    within each group, keeping ``dilation``. Substituting ``a ↦ k − 1 − a`` shows that output
    ``i`` then collects exactly the terms with ``h·stride + a·dilation − padding = i``. The
    inserted zeros cost ``stride²`` times the arithmetic of a scatter, which a reference can
    afford for the sake of one well-tested code path.
    """

    __slots__ = ("bias", "dilation", "groups", "highs", "in_channels", "kernel", "lows", "stride", "weight")

    def __init__(
        self,
        node: Node,
        *,
        weight: Array,
        bias: Array | None,
        stride: tuple[int, ...],
        padding: tuple[int, ...],
        output_padding: tuple[int, ...],
        dilation: tuple[int, ...],
        groups: int,
    ) -> None:
        super().__init__(node)
        in_channels, out_per_group, *kernel = weight.shape
        per_group = in_channels // groups
        # [C_in, O_g, *K] = [G, C_g, O_g, *K] -> [G, O_g, C_g, *K], flipped -> [O, C_g, *K]
        swapped = weight.reshape(groups, per_group, out_per_group, *kernel).swapaxes(1, 2)
        flipped = np.flip(swapped, axis=tuple(range(3, 3 + len(kernel))))
        self.weight = _gemm_weight(flipped.reshape(groups * out_per_group, per_group, *kernel), groups)
        self.bias = bias
        self.in_channels = in_channels
        self.kernel = tuple(kernel)
        self.stride, self.dilation, self.groups = stride, dilation, groups
        self.lows = tuple(d * (k - 1) - p for k, d, p in zip(kernel, dilation, padding, strict=True))
        self.highs = tuple(low + extra for low, extra in zip(self.lows, output_padding, strict=True))

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        dims = len(self.kernel)
        batched = _batched(self, x, dims, self.in_channels)
        n, channels, *sizes = batched.shape
        every = slice(None)
        work = widened(batched)
        spread = np.zeros(
            (n, channels, *((s - 1) * t + 1 for s, t in zip(sizes, self.stride, strict=True))), work.dtype
        )
        spread[(every, every, *(slice(None, None, t) for t in self.stride))] = work
        # Pad by the positive amounts, then crop by the negative ones.
        pads = tuple((max(low, 0), max(high, 0)) for low, high in zip(self.lows, self.highs, strict=True))
        padded = np.pad(spread, ((0, 0), (0, 0), *pads))
        crop = tuple(
            slice(max(-low, 0), max(size - max(-high, 0), 0))
            for low, high, size in zip(self.lows, self.highs, padded.shape[2:], strict=True)
        )
        padded = padded[(every, every, *crop)]
        try:
            y = _correlate(padded, _like(self.weight, x), self.kernel, (1,) * dims, self.dilation, self.groups)
        except ValueError:
            raise self.fail(f"the output size for x of shape {list(x.shape)} is not positive") from None
        if self.bias is not None:
            y += _like(self.bias, x).reshape(-1, *([1] * dims))
        return {"y": rounded(y if batched is x else y[0], x.dtype)}


@implements("ConvTranspose1d", "ConvTranspose2d")
def conv_transpose2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The transpose of Conv1d or Conv2d (see :class:`_ConvTranspose` for how it is computed;
    the settings' lengths give the spatial dimensions)."""
    settings = check_settings(node, parameters)
    return _ConvTranspose(
        node,
        weight=required_array(parameters, "weight"),
        bias=optional_array(parameters, "bias"),
        stride=settings.integers("stride"),
        padding=settings.integers("padding"),
        output_padding=settings.integers("output_padding"),
        dilation=settings.integers("dilation"),
        groups=settings.integer("groups"),
    )


# --- Pooling --------------------------------------------------------------------------------


class _Pool(_Kernel):
    """Windows of a 2-d pool, as a strided view of the padded input (as in :func:`_correlate`)."""

    __slots__ = ("geometry",)

    def __init__(self, node: Node, settings: Settings) -> None:
        super().__init__(node)
        self.geometry = PoolWindows.of(settings)

    def windows(self, x: Array, fill: Any) -> tuple[Array, tuple[int, ...]]:
        """Every window, ``[*, out_h, out_w, kernel_h, kernel_w]``, of ``x`` padded with ``fill``,
        and the output size. In ceil mode the last window may reach past the end padding; the
        input is padded (with ``fill``) as far as the windows reach."""
        geometry = self.geometry
        try:
            out, pads = geometry.fit(x.shape)
        except ValueError as error:
            raise self.fail(str(error)) from None
        padded = np.pad(x, [(0, 0)] * (x.ndim - 2) + list(pads), constant_values=fill)
        view = sliding_window_view(padded, geometry.spans, axis=(-2, -1))
        stride, dilation = geometry.stride, geometry.dilation
        view = view[..., :: stride[0], :: stride[1], :: dilation[0], :: dilation[1]]
        return view[..., : out[0], : out[1], :, :], out


class _MaxPool(_Pool):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        if is_floating(x.dtype):
            fill: Any = -np.inf  # padding never wins (a NaN in the window still does, as in torch)
        elif x.dtype.kind in "iu":
            fill = np.iinfo(x.dtype).min
        else:
            raise TypeError(f"{self.where}: x must be a floating-point or integer array, got dtype {x.dtype}")
        windows, _ = self.windows(x, fill)
        return {"y": windows.max(axis=(-2, -1))}


@implements("MaxPool2d")
def max_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The largest element of each (dilated) window; padding acts as −∞."""
    return _MaxPool(node, check_settings(node, parameters))


class _AvgPool(_Pool):
    __slots__ = ("count_include_pad", "divisor_override")

    def __init__(self, node: Node, settings: Settings) -> None:
        super().__init__(node, settings)
        self.count_include_pad = settings.flag("count_include_pad")
        self.divisor_override = settings.optional_integer("divisor_override")

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        work = widened(x)
        windows, out = self.windows(work, 0)
        total = windows.sum(axis=(-2, -1))
        if self.divisor_override is not None:
            divisor: Array = np.asarray(self.divisor_override, work.dtype)
        else:
            divisor = self.geometry.divisors(x.shape[-2:], out, self.count_include_pad).astype(work.dtype)
        return {"y": rounded(total / divisor, x.dtype)}


@implements("AvgPool2d")
def avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The sum of each window's elements inside ``x``, over the catalog's divisor."""
    return _AvgPool(node, check_settings(node, parameters))


class _AdaptiveAvgPool(_Kernel):
    """Each output averages a window whose bounds depend on the input size, so the windows are
    not a strided view; instead each dimension gets a 0/1 *membership matrix* ``M[i, h]`` (input
    position h lies in output i's window), and ``M_H · x · M_Wᵀ`` sums every window in two matrix
    products. Dividing by the window sizes afterwards keeps torch's sum-then-divide order (no
    rounded ``1 / count`` weights), and overlapping or uneven windows need no special case."""

    __slots__ = ("output_size",)

    def __init__(self, node: Node, output_size: tuple[int | None, ...]) -> None:
        super().__init__(node)
        self.output_size = output_size

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim not in (3, 4):
            raise self.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        (rows, row_counts), (cols, col_counts) = (
            adaptive_windows(size, out) for size, out in zip(x.shape[-2:], self.output_size, strict=True)
        )
        work = widened(x)
        total = rows.astype(work.dtype) @ work @ cols.astype(work.dtype).T
        return {"y": rounded(total / np.outer(row_counts, col_counts).astype(work.dtype), x.dtype)}


@implements("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Means over windows chosen to give ``output_size`` (a ``null`` entry keeps that size)."""
    return _AdaptiveAvgPool(node, check_settings(node, parameters)["output_size"])


# --- Normalization --------------------------------------------------------------------------


def _normalize(x: Array, mean: Array, var: Array, eps: float) -> Array:
    """``(x − μ) / √(σ² + eps)``, with the square root and the division done once per statistic
    rather than once per element."""
    return (x - mean) * (1 / np.sqrt(var + eps))


class _BatchNorm(_Kernel):
    __slots__ = ("bias", "channels", "dims", "eps", "mean", "var", "weight")

    def __init__(
        self,
        node: Node,
        *,
        channels: int,
        dims: tuple[int, ...],
        eps: float,
        weight: Array | None,
        bias: Array | None,
        mean: Array | None,
        var: Array | None,
    ) -> None:
        super().__init__(node)
        self.channels, self.dims, self.eps = channels, dims, eps
        self.weight, self.bias, self.mean, self.var = weight, bias, mean, var

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim not in self.dims:
            raise self.fail(f"x should have {' or '.join(map(str, self.dims))} dimensions, got shape {list(x.shape)}")
        if x.shape[1] != self.channels:
            raise self.fail(f"x has {x.shape[1]} channels (shape {list(x.shape)}), expected {self.channels}")
        shape = (1, -1, *([1] * (x.ndim - 2)))  # a per-channel vector, broadcast along dimension 1
        work = widened(x)
        if self.mean is not None and self.var is not None:
            mean, var = _like(self.mean, x).reshape(shape), _like(self.var, x).reshape(shape)
        else:  # no running statistics: the batch's, biased, over every dimension but the channel
            axes = (0, *range(2, x.ndim))
            mean, var = work.mean(axis=axes, keepdims=True), work.var(axis=axes, keepdims=True)
        y = _normalize(work, mean, var, self.eps)
        if self.weight is not None:
            y = y * _like(self.weight, x).reshape(shape)
        if self.bias is not None:
            y = y + _like(self.bias, x).reshape(shape)
        return {"y": rounded(y, x.dtype)}


def _batch_norm(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: tuple[int, ...]
) -> Kernel:
    """BatchNorm1d/2d in eval mode: normalized by the running statistics when the node has them,
    else (a module built with ``track_running_stats=False``) by the batch's.

    Which statistics are used follows the slots, as torch's eval-mode ``forward`` follows its
    buffers: a node whose ``track_running_stats`` is false but that still carries running
    statistics (a torch module whose flag was switched off after construction) uses them.
    """
    settings = check_settings(node, parameters)
    return _BatchNorm(
        node,
        channels=settings.integer("num_features"),
        dims=dims,
        eps=settings.number("eps"),
        weight=optional_array(parameters, "weight"),
        bias=optional_array(parameters, "bias"),
        mean=optional_array(parameters, "running_mean"),
        var=optional_array(parameters, "running_var"),
    )


@implements("BatchNorm1d")
def batch_norm1d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C]`` or ``[N, C, L]``."""
    return _batch_norm(node, children=children, parameters=parameters, dims=(2, 3))


@implements("BatchNorm2d")
def batch_norm2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C, H, W]``."""
    return _batch_norm(node, children=children, parameters=parameters, dims=(4,))


class _TrailingNorm(_Kernel):
    """Shared by LayerNorm and RMSNorm: statistics over the trailing ``normalized_shape``."""

    __slots__ = ("axes", "bias", "eps", "shape", "weight")

    def __init__(
        self, node: Node, shape: tuple[int, ...], eps: float | None, weight: Array | None, bias: Array | None
    ) -> None:
        super().__init__(node)
        self.shape, self.eps, self.weight, self.bias = shape, eps, weight, bias
        self.axes = tuple(range(-len(shape), 0))

    def checked(self, inputs: Mapping[str, Any]) -> Array:
        x = self.floating(inputs)
        if x.ndim < len(self.shape) or x.shape[x.ndim - len(self.shape) :] != self.shape:
            raise self.fail(f"x of shape {list(x.shape)} does not end in normalized_shape {list(self.shape)}")
        return x

    def affine(self, y: Array, x: Array) -> dict[str, Array]:
        """``y · weight + bias``, ``y`` the normalized ``x`` in the compute dtype, rounded once to
        ``x``'s dtype."""
        if self.weight is not None:
            y = y * _like(self.weight, x)
        if self.bias is not None:
            y = y + _like(self.bias, x)
        return {"y": rounded(y, x.dtype)}


class _LayerNorm(_TrailingNorm):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.checked(inputs)
        work = widened(x)
        mean, var = work.mean(axis=self.axes, keepdims=True), work.var(axis=self.axes, keepdims=True)
        assert self.eps is not None  # LayerNorm's eps is never null
        return self.affine(_normalize(work, mean, var, self.eps), x)


@implements("LayerNorm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    settings = check_settings(node, parameters)
    weight, bias = optional_array(parameters, "weight"), optional_array(parameters, "bias")
    return _LayerNorm(node, settings.integers("normalized_shape"), settings.number("eps"), weight, bias)


class _RMSNorm(_TrailingNorm):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.checked(inputs)
        # null: the epsilon of the dtype the norm is computed in (float32's for a 16-bit x), as torch
        eps = epsilon(compute_dtype(x.dtype)) if self.eps is None else self.eps
        work = widened(x)
        mean_square = np.mean(work * work, axis=self.axes, keepdims=True)
        return self.affine(work * (1 / np.sqrt(mean_square + eps)), x)


@implements("RMSNorm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``."""
    settings = check_settings(node, parameters)
    shape, eps = settings.integers("normalized_shape"), settings.optional_number("eps")
    return _RMSNorm(node, shape, eps, optional_array(parameters, "weight"), None)


class _GroupNorm(_Kernel):
    __slots__ = ("bias", "channels", "eps", "groups", "weight")

    def __init__(
        self, node: Node, channels: int, groups: int, eps: float, weight: Array | None, bias: Array | None
    ) -> None:
        super().__init__(node)
        self.channels, self.groups, self.eps, self.weight, self.bias = channels, groups, eps, weight, bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim < 2 or x.shape[1] != self.channels:
            raise self.fail(f"x should be [N, {self.channels}, *], got shape {list(x.shape)}")
        # [N, G, C/G · ∏*]: a group's channels are consecutive, so each row is one (n, g) group.
        work = widened(x)
        grouped = work.reshape(x.shape[0], self.groups, self.channels // self.groups * math.prod(x.shape[2:]))
        mean, var = grouped.mean(axis=-1, keepdims=True), grouped.var(axis=-1, keepdims=True)
        y = _normalize(grouped, mean, var, self.eps).reshape(x.shape)
        shape = (-1, *([1] * (x.ndim - 2)))  # per channel, broadcast over N and *
        if self.weight is not None:
            y = y * _like(self.weight, x).reshape(shape)
        if self.bias is not None:
            y = y + _like(self.bias, x).reshape(shape)
        return {"y": rounded(y, x.dtype)}


@implements("GroupNorm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization of each sample's groups of consecutive channels."""
    settings = check_settings(node, parameters)
    channels, groups = settings.integer("num_channels"), settings.integer("num_groups")
    weight, bias = optional_array(parameters, "weight"), optional_array(parameters, "bias")
    return _GroupNorm(node, channels, groups, settings.number("eps"), weight, bias)


# --- Embedding, dropout and shape helpers ---------------------------------------------------


class _Embedding(_Kernel):
    __slots__ = ("max_norm", "norm_type", "weight")

    def __init__(self, node: Node, weight: Array, max_norm: float | None, norm_type: float) -> None:
        super().__init__(node)
        self.weight, self.max_norm, self.norm_type = weight, max_norm, norm_type

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        if x.dtype.kind not in "iu":
            raise TypeError(f"{self.where}: x must be an integer array, got dtype {x.dtype}")
        rows = self.weight.shape[0]
        if x.size and (x.min() < 0 or x.max() >= rows):  # numpy would wrap negative indices
            raise self.fail(f"indices must lie in [0, {rows}), got values from {x.min()} to {x.max()}")
        y = self.weight[x]
        if self.max_norm is not None:
            y = self._renormed(y)
        return {"y": y}

    def _renormed(self, y: Array) -> Array:
        """Rows whose norm exceeds ``max_norm`` scaled by ``max_norm / (norm + 1e-7)``, as
        torch's ``embedding_renorm_``: the norm in the weight's compute dtype, the factor in double
        precision and rounded to the weight's dtype once, the product rounded once."""
        assert self.max_norm is not None
        work = widened(y)
        norm = np.linalg.norm(work, ord=self.norm_type, axis=-1, keepdims=True)
        factor = widened(rounded(self.max_norm / (norm.astype(np.float64) + 1e-7), y.dtype))
        return rounded(np.where(norm > self.max_norm, work * factor, work), y.dtype)


@implements("Embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = weight[x]``; ``padding_idx``, ``scale_grad_by_freq`` and ``sparse`` only affect
    training, but ``padding_idx`` is still checked, as torch checks it."""
    settings = check_settings(node, parameters)
    weight = required_array(parameters, "weight")
    return _Embedding(node, weight, settings.optional_number("max_norm"), settings.number("norm_type"))


class _Pass(_Kernel):
    """``y = x``: the value itself, not a copy (values in a trama graph are never modified)."""

    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": inputs["x"]}


@implements("Dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The identity (the catalog specifies eval mode); ``p`` is still checked."""
    check_settings(node, parameters)
    return _Pass(node)


@implements("Identity")
def identity(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = x``; like ``torch.nn.Identity``, any slots are ignored."""
    return _Pass(node)


class _Flatten(_Kernel):
    __slots__ = ("end", "start")

    def __init__(self, node: Node, start: int, end: int) -> None:
        super().__init__(node)
        self.start, self.end = start, end

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        try:
            return {"y": x.reshape(flattened_shape(x.shape, self.start, self.end))}
        except ValueError as error:
            raise self.fail(str(error)) from None


@implements("Flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimensions ``start_dim … end_dim`` merged into one, in C order."""
    settings = check_settings(node, parameters)
    return _Flatten(node, settings.integer("start_dim"), settings.integer("end_dim"))
