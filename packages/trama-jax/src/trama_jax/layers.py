"""JAX kernels for the catalog's fixed layers: dense and bilinear maps, convolutions, pooling,
normalization, embedding, dropout and shape helpers (``docs/ops.md``, section *Layers*).

Each factory reads and checks the node's settings once (:class:`~trama_jax._slots.Slots`) and
returns a :class:`~trama_jax.kernel.JaxKernel` whose ``apply`` is a pure function of the tensors
and the inputs. Everything ``apply`` branches on is static under ``jax.jit``: settings, shapes,
dtypes, which ports are connected. Nothing depends on the values, so one trace serves every call
with the same shapes, and ``jax.grad`` differentiates with respect to the tensors.

Convolutions and pools map onto XLA's own windowed operations (``conv_general_dilated``,
``reduce_window``) rather than an im2col of our own: XLA fuses, tiles and differentiates them.
Dtypes and precision follow :mod:`trama_jax._numerics`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node
from trama_jax._numerics import HIGHEST, accumulation, dense, epsilon, normalized
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Parameters, Site, Slots, Tensors
from trama_jax.kernel import JaxKernel

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

Pads = tuple[tuple[int, int], ...]

#: torch's padding modes and the ``jnp.pad`` modes that compute the same values.
_PAD_MODES: dict[str, Literal["constant", "reflect", "edge", "wrap"]] = {
    "zeros": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}

#: ``conv_general_dilated``'s layout names for torch's channels-first tensors and weights.
_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW")}


def _channel_vector(value: jax.Array, ndim: int, dtype: Any) -> jax.Array:
    """A per-channel ``[C]`` vector shaped to broadcast along dimension 1 of an ``ndim``-d tensor."""
    return value.astype(dtype).reshape(1, -1, *([1] * (ndim - 2)))


# --- Dense maps -----------------------------------------------------------------------------


@implements("Linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = x · weightᵀ + bias`` over the last dimension."""
    slots, site = Slots(node, parameters), Site(node)
    out_features, in_features = slots.integer("out_features"), slots.integer("in_features")
    weight = slots.tensor("weight", (out_features, in_features), "[out_features, in_features]")
    bias = slots.optional_tensor("bias", (out_features,), "[out_features]")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim == 0 or x.shape[-1] != in_features:
            raise site.fail(f"x has shape {list(x.shape)}, whose last dimension should be {in_features}")
        return {"y": dense(x, tensors[weight], None if bias is None else tensors[bias])}

    return JaxKernel(apply, slots.used)


@implements("Bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``, as two
    contractions (input1 with the weight, then with input2) rather than one three-operand einsum
    whose contraction order XLA would have to guess."""
    slots, site = Slots(node, parameters), Site(node)
    out = slots.integer("out_features")
    in1, in2 = slots.integer("in1_features"), slots.integer("in2_features")
    weight = slots.tensor("weight", (out, in1, in2), "[out_features, in1_features, in2_features]")
    bias = slots.optional_tensor("bias", (out,), "[out_features]")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x1, x2 = site.floating(inputs, "input1"), site.floating(inputs, "input2")
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != in1 or x2.shape[-1] != in2:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} should end in {in1} and {in2}")
        if x1.shape[:-1] != x2.shape[:-1]:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} differ in their leading dimensions")
        acc = accumulation(x1.dtype)
        w = tensors[weight].astype(x1.dtype)
        partial = jnp.einsum("...i,oij->...oj", x1, w, precision=HIGHEST, preferred_element_type=acc)
        y = jnp.einsum("...oj,...j->...o", partial, x2.astype(acc), precision=HIGHEST)
        if bias is not None:
            y = y + tensors[bias].astype(acc)
        return {"y": y.astype(x1.dtype)}

    return JaxKernel(apply, slots.used)


# --- Convolutions ---------------------------------------------------------------------------


def _batched(site: Site, x: jax.Array, dims: int, channels: int) -> jax.Array:
    """``x`` with its batch dimension: an unbatched ``[C, *S]`` input gains a leading 1."""
    if x.ndim not in (dims + 1, dims + 2):
        raise site.fail(f"x should have {dims + 1} or {dims + 2} dimensions, got shape {list(x.shape)}")
    batched = x if x.ndim == dims + 2 else x[None]
    if batched.shape[1] != channels:
        raise site.fail(f"x has {batched.shape[1]} channels (shape {list(x.shape)}), expected {channels}")
    return batched


def _channels(slots: Slots, groups: int) -> tuple[int, int]:
    in_channels, out_channels = slots.integer("in_channels", minimum=1), slots.integer("out_channels", minimum=1)
    if in_channels % groups or out_channels % groups:
        raise slots.error(
            f"groups = {groups} must divide in_channels = {in_channels} and out_channels = {out_channels}"
        )
    return in_channels, out_channels


def _conv_padding(
    slots: Slots, dims: int, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> Pads:
    """The ``(before, after)`` padding of each spatial dimension: a list, ``"valid"`` or ``"same"``."""
    padding = slots.raw("padding", [0] * dims)
    if padding == "valid":
        return ((0, 0),) * dims
    if padding == "same":
        if any(s != 1 for s in stride):
            raise slots.error(f'padding "same" needs every stride to be 1, got {list(stride)}')
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise slots.error(f'padding must be a list of {dims} ints, "valid" or "same", got {padding!r}')
    return tuple((p, p) for p in slots.integers("padding", dims, [0] * dims))


def _pad(site: Site, x: jax.Array, pads: Pads, mode: str) -> jax.Array:
    """``x`` ``[N, C, *S]`` padded by value (reflect, replicate, circular), as torch pads it.

    torch refuses a reflection as wide as the dimension and a wrap wider than it; ``jnp.pad``
    would reflect or wrap more than once instead, so those are refused here too.
    """
    for size, (before, after) in zip(x.shape[2:], pads, strict=True):
        widest = max(before, after)
        if mode == "reflect" and widest >= size:
            raise site.fail(f"reflect padding of {widest} needs more than that many elements, got {size}")
        if mode == "circular" and widest > size:
            raise site.fail(f"circular padding of {widest} needs at least that many elements, got {size}")
    return jnp.pad(x, ((0, 0), (0, 0), *pads), mode=_PAD_MODES[mode])


def _convolved(
    x: jax.Array,
    batched: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None,
    *,
    pads: Pads,
    dilation: Sequence[int],
    groups: int,
    stride: Sequence[int] | None = None,
    spread: Sequence[int] | None = None,
) -> Outputs:
    """XLA's convolution of ``batched`` (``x`` with its batch dimension) with ``weight``
    ``[O, C_g, *K]`` in ``x``'s dtype: strided by ``stride``, or with the input *spread* by
    ``spread`` (``stride − 1`` zeros between neighbours, for the transposed convolution).
    Accumulated in :func:`~trama_jax._numerics.accumulation`'s dtype with the bias, rounded once,
    and without the batch dimension again when ``x`` had none."""
    dims = batched.ndim - 2
    acc = accumulation(x.dtype)
    y = jax.lax.conv_general_dilated(
        batched,
        weight,
        window_strides=stride or (1,) * dims,
        padding=pads,
        lhs_dilation=spread,
        rhs_dilation=dilation,
        dimension_numbers=_LAYOUTS[dims],
        feature_group_count=groups,
        precision=HIGHEST,
        preferred_element_type=acc,
    )
    if bias is not None:
        y = y + _channel_vector(bias, y.ndim, acc)
    y = y.astype(x.dtype)
    return {"y": y if x.ndim == y.ndim else y[0]}


def _conv(node: Node, parameters: Parameters, dims: int) -> JaxKernel:
    """Conv1d and Conv2d: grouped, dilated, strided cross-correlation of a padded input.

    Zero padding is handed to XLA's convolution (no padded copy); the other modes pad first.
    """
    slots, site = Slots(node, parameters), Site(node)
    kernel = slots.integers("kernel_size", dims, minimum=1)
    stride = slots.integers("stride", dims, [1] * dims, minimum=1)
    dilation = slots.integers("dilation", dims, [1] * dims, minimum=1)
    groups = slots.integer("groups", 1, minimum=1)
    mode = slots.choice("padding_mode", "zeros", tuple(_PAD_MODES))
    pads = _conv_padding(slots, dims, kernel, stride, dilation)
    in_channels, out_channels = _channels(slots, groups)
    shape = (out_channels, in_channels // groups, *kernel)
    weight = slots.tensor("weight", shape, "[out_channels, in_channels / groups, *kernel_size]")
    bias = slots.optional_tensor("bias", (out_channels,), "[out_channels]")
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    padded_by_value = mode != "zeros" and any(p != (0, 0) for p in pads)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        batched = _batched(site, x, dims, in_channels)
        conv_pads = pads
        if padded_by_value:
            batched, conv_pads = _pad(site, batched, pads, mode), ((0, 0),) * dims
        sizes = [s + lo + hi for s, (lo, hi) in zip(batched.shape[2:], conv_pads, strict=True)]
        if any(size < span for size, span in zip(sizes, spans, strict=True)):
            raise site.fail(f"the padded input's spatial size {sizes} is smaller than the kernel's extent {spans}")
        w = tensors[weight].astype(x.dtype)
        b = None if bias is None else tensors[bias]
        return _convolved(x, batched, w, b, pads=conv_pads, stride=stride, dilation=dilation, groups=groups)

    return JaxKernel(apply, slots.used)


@implements("Conv1d")
def conv1d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Cross-correlation over the last dimension of ``[N, C, L]`` or ``[C, L]``."""
    return _conv(node, parameters, 1)


@implements("Conv2d")
def conv2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Cross-correlation over the last two dimensions of ``[N, C, H, W]`` or ``[C, H, W]``."""
    return _conv(node, parameters, 2)


@implements("ConvTranspose2d")
def conv_transpose2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The transpose of Conv2d, computed as an ordinary convolution of the *dilated* input.

    Spreading each input element over a window of ``y`` (the catalog's definition) equals
    correlating the input, with ``stride − 1`` zeros between neighbours (``lhs_dilation``, which
    XLA does without materialising the zeros), padded by ``dilation·(k − 1) − padding`` at the start
    and that plus ``output_padding`` at the end (negative amounts crop), with ``weight`` flipped
    spatially and its channel axes swapped within each group. Substituting ``a ↦ k − 1 − a`` shows
    that output ``i`` collects exactly the terms with ``h·stride + a·dilation − padding = i``.
    An input shorter than the kernel is spread explicitly instead (:func:`_swappable`).
    """
    slots, site = Slots(node, parameters), Site(node)
    kernel = slots.integers("kernel_size", 2, minimum=1)
    stride = slots.integers("stride", 2, [1, 1], minimum=1)
    padding = slots.integers("padding", 2, [0, 0])
    output_padding = slots.integers("output_padding", 2, [0, 0])
    dilation = slots.integers("dilation", 2, [1, 1], minimum=1)
    groups = slots.integer("groups", 1, minimum=1)
    slots.choice("padding_mode", "zeros", ("zeros",))
    for d in range(2):
        if output_padding[d] >= max(stride[d], dilation[d]):
            raise slots.error(
                f"output_padding[{d}] = {output_padding[d]} must be smaller than stride[{d}] = {stride[d]} "
                f"or dilation[{d}] = {dilation[d]}"
            )
    in_channels, out_channels = _channels(slots, groups)
    per_group, out_per_group = in_channels // groups, out_channels // groups
    weight = slots.tensor(
        "weight", (in_channels, out_per_group, *kernel), "[in_channels, out_channels / groups, *kernel_size]"
    )
    bias = slots.optional_tensor("bias", (out_channels,), "[out_channels]")
    lows = [d * (k - 1) - p for k, d, p in zip(kernel, dilation, padding, strict=True)]
    pads = tuple((low, low + extra) for low, extra in zip(lows, output_padding, strict=True))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        batched = _batched(site, x, 2, in_channels)
        sizes = [
            (s - 1) * t - 2 * p + d * (k - 1) + e + 1
            for s, t, p, d, k, e in zip(
                batched.shape[2:], stride, padding, dilation, kernel, output_padding, strict=True
            )
        ]
        if min(sizes) <= 0:
            raise site.fail(f"the output size {sizes} for x of shape {list(x.shape)} is not positive")
        # [C_in, O_g, *K] = [G, C_g, O_g, *K] -> [G, O_g, C_g, *K] -> [O, C_g, *K], flipped
        w = tensors[weight].astype(x.dtype).reshape(groups, per_group, out_per_group, *kernel)
        w = jnp.flip(w.swapaxes(1, 2).reshape(out_channels, per_group, *kernel), axis=(2, 3))
        b = None if bias is None else tensors[bias]
        spread: Sequence[int] | None = stride
        if _swappable(batched.shape[2:], kernel, stride):
            batched, spread = _spread(batched, stride), None
        return _convolved(x, batched, w, b, pads=pads, spread=spread, dilation=dilation, groups=groups)

    return JaxKernel(apply, slots.used)


def _swappable(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int]) -> bool:
    """Whether XLA may compute this input-dilated convolution with its operands swapped.

    XLA swaps a convolution's input and kernel when the kernel is the larger of the two (in some
    dimension, the kernel is longer than the input), and for an input-dilated convolution
    (``stride > 1``) the swapped one is malformed: jaxlib 0.10.2 aborts the whole process
    ("Window dimensions do not match RHS shape"). Such an input is small, so spreading it
    explicitly (:func:`_spread`) costs little; a larger one keeps XLA's zero-free dilation."""
    return any(t > 1 for t in stride) and any(k > s for k, s in zip(kernel, sizes, strict=True))


def _spread(x: jax.Array, stride: Sequence[int]) -> jax.Array:
    """``x`` ``[N, C, *S]`` with ``stride − 1`` zeros between neighbours along each spatial
    dimension: the input dilation of a transposed convolution, made explicit."""
    interior = [(0, 0, 0), (0, 0, 0), *((0, 0, t - 1) for t in stride)]
    return jax.lax.pad(x, jnp.zeros((), x.dtype), interior)


# --- Pooling --------------------------------------------------------------------------------


def _pool_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """The catalog's (and torch's) output size of a pooled dimension; ≤ 0 when no window fits."""
    room = size + 2 * padding - (dilation * (kernel - 1) + 1)
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:  # the last window starts in the padding
        out -= 1
    return out


class _Windows:
    """The window geometry of a 2-d pool, read from the slots, and ``reduce_window`` over it."""

    __slots__ = ("ceil_mode", "dilation", "kernel", "padding", "site", "stride")

    def __init__(self, slots: Slots, site: Site, *, dilated: bool) -> None:
        self.site = site
        self.kernel = slots.integers("kernel_size", 2, minimum=1)
        stride = slots.raw("stride")
        self.stride = self.kernel if stride is None else slots.integers("stride", 2, minimum=1)
        self.padding = slots.integers("padding", 2, [0, 0])
        self.dilation = slots.integers("dilation", 2, [1, 1], minimum=1) if dilated else (1, 1)
        self.ceil_mode = slots.flag("ceil_mode", False)
        for d in range(2):
            if 2 * self.padding[d] > self.kernel[d]:
                raise slots.error(
                    f"padding[{d}] = {self.padding[d]} must be at most half of kernel_size[{d}] = {self.kernel[d]}"
                )

    def out_size(self, x: jax.Array) -> tuple[int, int]:
        if x.ndim not in (3, 4):
            raise self.site.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        geometry = zip(x.shape[-2:], self.kernel, self.stride, self.padding, self.dilation, strict=True)
        out = tuple(_pool_size(*g, self.ceil_mode) for g in geometry)
        if min(out) <= 0:
            raise self.site.fail(f"x of shape {list(x.shape)} is too small for the window: output size {list(out)}")
        return out[0], out[1]

    def reduce(self, x: jax.Array, init: jax.Array, op: Any, out: tuple[int, int]) -> jax.Array:
        """``op`` over every window of ``x`` padded with ``init``. In ceil mode the last window may
        reach past the end padding, so the end is padded as far as the windows reach."""
        spans = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation, strict=True)]
        ends = [
            max((o - 1) * s + span - size - p, 0)
            for o, s, span, size, p in zip(out, self.stride, spans, x.shape[-2:], self.padding, strict=True)
        ]
        lead = (1,) * (x.ndim - 2)
        y: jax.Array = jax.lax.reduce_window(
            x,
            init,
            op,
            window_dimensions=(*lead, *self.kernel),
            window_strides=(*lead, *self.stride),
            padding=(*((0, 0),) * (x.ndim - 2), *zip(self.padding, ends, strict=True)),
            window_dilation=(*lead, *self.dilation),
        )
        return y[..., : out[0], : out[1]]


@implements("MaxPool2d")
def max_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The largest element of each (dilated) window; padding acts as −∞ (the dtype's minimum for
    integers) and never wins, while a NaN in a window does, as in torch."""
    slots, site = Slots(node, parameters), Site(node)
    windows = _Windows(slots, site, dilated=True)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        if jnp.issubdtype(x.dtype, jnp.floating):
            init = jnp.array(-jnp.inf, x.dtype)
        elif jnp.issubdtype(x.dtype, jnp.integer):
            init = jnp.array(np.iinfo(x.dtype).min, x.dtype)
        else:
            raise site.fail(f"x must hold floating-point numbers or integers, got dtype {x.dtype}")
        return {"y": windows.reduce(x, init, jax.lax.max, windows.out_size(x))}

    return JaxKernel(apply, slots.used)


@implements("AvgPool2d")
def avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The sum of each window's elements inside ``x`` over the catalog's divisor. The divisors
    depend only on the shapes, so they are computed with numpy while tracing: a constant."""
    slots, site = Slots(node, parameters), Site(node)
    windows = _Windows(slots, site, dilated=False)
    count_include_pad = slots.flag("count_include_pad", True)
    divisor_override = slots.optional_integer("divisor_override", minimum=1)

    def counts(d: int, size: int, out: int) -> np.ndarray:
        """Per output index along dimension ``d``: the window clipped to the end padding
        (``e − s``) with ``count_include_pad``, else the number of its positions inside ``x``."""
        start = np.arange(out) * windows.stride[d] - windows.padding[d]
        end = np.minimum(start + windows.kernel[d], size + windows.padding[d])
        return end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        out = windows.out_size(x)
        acc = accumulation(x.dtype)
        total = windows.reduce(x.astype(acc), jnp.array(0, acc), jax.lax.add, out)
        if divisor_override is not None:
            divisor = np.asarray(divisor_override, acc)
        else:
            rows, cols = (counts(d, x.shape[-2 + d], out[d]) for d in range(2))
            divisor = np.outer(rows, cols).astype(acc)
        return {"y": (total / divisor).astype(x.dtype)}

    return JaxKernel(apply, slots.used)


def _membership(size: int, out: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """``M[i, j] = 1`` when input position j lies in output i's window ``⌊i·S/O⌋ … ⌈(i+1)·S/O⌉ − 1``,
    and each window's size."""
    index = np.arange(out)
    start = index * size // out
    end = -(-(index + 1) * size // out)
    position = np.arange(size)
    member = (position >= start[:, None]) & (position < end[:, None])
    return member.astype(dtype), (end - start).astype(dtype)


@implements("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Means over windows chosen to give ``output_size`` (a ``null`` entry keeps that size).

    The windows' bounds depend on the input size, so they are no strided view; each dimension
    gets a constant 0/1 membership matrix instead, and ``M_H · x · M_Wᵀ`` sums every window in two
    exact matrix products (overlapping and uneven windows need no special case). Dividing by the
    window sizes afterwards keeps torch's sum-then-divide order.
    """
    slots, site = Slots(node, parameters), Site(node)
    value = slots.raw("output_size", required=True)
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1) for v in value)
    ):
        raise slots.error(f"output_size must be a list of 2 entries, each an int ≥ 1 or null, got {value!r}")
    output_size: tuple[int | None, ...] = tuple(value)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim not in (3, 4):
            raise site.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        acc = accumulation(x.dtype)
        height, width = x.shape[-2:]
        rows, row_counts = _membership(height, output_size[0] or height, acc)
        cols, col_counts = _membership(width, output_size[1] or width, acc)
        total = jnp.einsum("ih,...hw,jw->...ij", rows, x.astype(acc), cols, precision=HIGHEST)
        return {"y": (total / np.outer(row_counts, col_counts)).astype(x.dtype)}

    return JaxKernel(apply, slots.used)


# --- Normalization --------------------------------------------------------------------------


def _affine(
    slots: Slots, flag: str, shape: Sequence[int], what: str, *, bias_optional: bool
) -> tuple[str | None, str | None]:
    """γ and β of a normalization, checked against the flag that says whether they exist.

    The slots are the truth (the catalog's convention) and the flag must agree with them; only β
    may be absent while the flag is true where torch has ``bias=False`` (``bias_optional``).
    """
    enabled = slots.flag(flag, True)
    weight = slots.optional_tensor("weight", shape, what)
    bias = slots.optional_tensor("bias", shape, what)
    if not enabled and (weight is not None or bias is not None):
        raise slots.error(f"{flag} is false, yet the node has {'weight' if weight is not None else 'bias'}")
    if enabled and weight is None:
        raise slots.error(f"{flag} is true, yet the node has no weight")
    if enabled and bias is None and not bias_optional:
        raise slots.error(f"{flag} is true, yet the node has no bias")
    return weight, bias


def _batch_norm(node: Node, parameters: Parameters, ranks: tuple[int, ...]) -> JaxKernel:
    """BatchNorm1d/2d in eval mode: normalized by the running statistics when the node has them,
    else (a module built with ``track_running_stats=False``) by the batch's, biased.

    Which statistics are used follows the slots, as torch's eval-mode ``forward`` follows its
    buffers: a node whose ``track_running_stats`` is false but that still carries running
    statistics (a torch module whose flag was switched off after construction) uses them.
    ``num_batches_tracked`` matters in training only and is not passed to ``apply``.
    """
    slots, site = Slots(node, parameters), Site(node)
    channels = slots.integer("num_features", minimum=1)
    eps = slots.number("eps", 1e-5)
    tracking = slots.flag("track_running_stats", True)
    weight, bias = _affine(slots, "affine", (channels,), "[num_features]", bias_optional=False)
    mean = slots.optional_tensor("running_mean", (channels,), "[num_features]")
    var = slots.optional_tensor("running_var", (channels,), "[num_features]")
    if (mean is None) != (var is None):
        raise slots.error("running_mean and running_var must be both present or both absent")
    if tracking and mean is None:
        raise slots.error("track_running_stats is true, yet the node has no running_mean and running_var")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim not in ranks:
            raise site.fail(f"x should have {' or '.join(map(str, ranks))} dimensions, got shape {list(x.shape)}")
        if x.shape[1] != channels:
            raise site.fail(f"x has {x.shape[1]} channels (shape {list(x.shape)}), expected {channels}")
        acc = accumulation(x.dtype)
        gamma = None if weight is None else _channel_vector(tensors[weight], x.ndim, acc)
        beta = None if bias is None else _channel_vector(tensors[bias], x.ndim, acc)
        if mean is None or var is None:
            return {"y": normalized(x, (0, *range(2, x.ndim)), eps, gamma, beta)}
        wide = x.astype(acc) - _channel_vector(tensors[mean], x.ndim, acc)
        y = wide * jax.lax.rsqrt(_channel_vector(tensors[var], x.ndim, acc) + jnp.asarray(eps, acc))
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return {"y": y.astype(x.dtype)}

    return JaxKernel(apply, slots.used)


@implements("BatchNorm1d")
def batch_norm1d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C]`` or ``[N, C, L]``."""
    return _batch_norm(node, parameters, (2, 3))


@implements("BatchNorm2d")
def batch_norm2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C, H, W]``."""
    return _batch_norm(node, parameters, (4,))


def _normalized_shape(slots: Slots) -> tuple[int, ...]:
    value = slots.raw("normalized_shape", required=True)
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise slots.error(f"normalized_shape must be a non-empty list of ints ≥ 1, got {value!r}")
    return tuple(int(v) for v in value)


def _trailing(site: Site, inputs: Inputs, shape: tuple[int, ...]) -> jax.Array:
    """``x``, which must end in ``normalized_shape``."""
    x = site.floating(inputs)
    if x.ndim < len(shape) or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise site.fail(f"x of shape {list(x.shape)} does not end in normalized_shape {list(shape)}")
    return x


@implements("LayerNorm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    slots, site = Slots(node, parameters), Site(node)
    shape = _normalized_shape(slots)
    eps = slots.number("eps", 1e-5)
    weight, bias = _affine(slots, "elementwise_affine", shape, "normalized_shape", bias_optional=True)
    axes = tuple(range(-len(shape), 0))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = _trailing(site, inputs, shape)
        gamma = None if weight is None else tensors[weight]
        beta = None if bias is None else tensors[bias]
        return {"y": normalized(x, axes, eps, gamma, beta)}

    return JaxKernel(apply, slots.used)


@implements("RMSNorm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``.

    ``eps`` null is the machine epsilon of the dtype the norm is computed in: ``x``'s own for
    float32 (the catalog's ``torch.finfo(x.dtype).eps``), but float32's for a 16-bit ``x``. That is
    what torch 2.13 does, which upcasts first: with float32's epsilon this kernel's float16 and
    bfloat16 results are bit-identical to torch's, with the 16-bit dtype's most are one rounding
    off (``docs/ops.md`` says ``x``'s dtype; reported as an ambiguity of the catalog)."""
    slots, site = Slots(node, parameters), Site(node)
    shape = _normalized_shape(slots)
    eps = slots.optional_number("eps")
    enabled = slots.flag("elementwise_affine", True)
    weight = slots.optional_tensor("weight", shape, "normalized_shape")
    if enabled != (weight is not None):
        raise slots.error(
            f"elementwise_affine is {str(enabled).lower()}, yet weight is {'absent' if enabled else 'present'}"
        )
    axes = tuple(range(-len(shape), 0))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = _trailing(site, inputs, shape)
        machine = epsilon(accumulation(x.dtype)) if eps is None else eps
        gamma = None if weight is None else tensors[weight]
        return {"y": normalized(x, axes, machine, gamma, None, centred=False)}

    return JaxKernel(apply, slots.used)


@implements("GroupNorm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Normalization of each sample's groups of consecutive channels: ``x`` ``[N, C, *]`` is seen
    as ``[N, G, C/G, *]`` and normalized over everything after ``G``, with γ and β shaped
    ``[G, C/G, 1, …]`` so that the affine step joins the normalization's single rounding."""
    slots, site = Slots(node, parameters), Site(node)
    groups = slots.integer("num_groups", minimum=1)
    channels = slots.integer("num_channels", minimum=1)
    if channels % groups:
        raise slots.error(f"num_groups = {groups} must divide num_channels = {channels}")
    eps = slots.number("eps", 1e-5)
    weight, bias = _affine(slots, "affine", (channels,), "[num_channels]", bias_optional=False)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim < 2 or x.shape[1] != channels:
            raise site.fail(f"x should be [N, {channels}, *], got shape {list(x.shape)}")
        rest = x.shape[2:]
        grouped = x.reshape(x.shape[0], groups, channels // groups, *rest)
        per_channel = (groups, channels // groups, *([1] * len(rest)))
        gamma = None if weight is None else tensors[weight].reshape(per_channel)
        beta = None if bias is None else tensors[bias].reshape(per_channel)
        y = normalized(grouped, range(2, grouped.ndim), eps, gamma, beta)
        return {"y": y.reshape(x.shape)}

    return JaxKernel(apply, slots.used)


# --- Embedding, dropout and shape helpers ---------------------------------------------------


@implements("Embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = weight[x]``, rows renormalized to ``max_norm`` when it is set.

    An index outside ``[0, num_embeddings)`` is an error in torch. Under ``jax.jit`` the indices
    are not known while tracing, so no error can be raised there; such an index gives a row of NaN
    instead (never a clamped or wrapped row, which would be a plausible wrong answer). Called
    outside ``jit``, with concrete indices, the kernel raises :class:`trama.ExecutionError`.
    ``padding_idx``, ``scale_grad_by_freq`` and ``sparse`` affect training only; ``padding_idx``
    is still checked, as torch checks it.
    """
    slots, site = Slots(node, parameters), Site(node)
    rows = slots.integer("num_embeddings", minimum=1)
    columns = slots.integer("embedding_dim")
    weight = slots.tensor("weight", (rows, columns), "[num_embeddings, embedding_dim]")
    padding_idx = slots.optional_integer("padding_idx")
    if padding_idx is not None and padding_idx >= rows:
        raise slots.error(f"padding_idx = {padding_idx} must be below num_embeddings = {rows}")
    max_norm = slots.optional_number("max_norm")
    norm_type = slots.number("norm_type", 2.0)
    slots.flag("scale_grad_by_freq", False)
    slots.flag("sparse", False)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        index = jnp.asarray(inputs["x"])
        if not jnp.issubdtype(index.dtype, jnp.integer):
            raise site.fail(f"x must be an integer tensor, got dtype {index.dtype}")
        if not isinstance(index, jax.core.Tracer) and index.size:
            low, high = int(index.min()), int(index.max())
            if low < 0 or high >= rows:
                raise site.fail(f"indices must lie in [0, {rows}), got values from {low} to {high}")
        table = tensors[weight]
        y = table.at[jnp.where(index < 0, rows, index)].get(mode="fill", fill_value=jnp.nan)
        if max_norm is not None:
            y = _renormed(y, max_norm, norm_type)
        return {"y": y}

    return JaxKernel(apply, slots.used)


def _renormed(y: jax.Array, max_norm: float, norm_type: float) -> jax.Array:
    """Rows whose ``norm_type``-norm exceeds ``max_norm`` scaled by ``max_norm / (norm + 1e-7)``,
    as torch's ``embedding_renorm_`` (which also writes them back into the weight: a side effect
    that is no part of the op's value)."""
    magnitude = jnp.abs(y)
    if norm_type == math.inf:
        norm = jnp.max(magnitude, axis=-1, keepdims=True)
    elif norm_type == 1:
        norm = jnp.sum(magnitude, axis=-1, keepdims=True)
    elif norm_type == 2:
        norm = jnp.sqrt(jnp.sum(magnitude * magnitude, axis=-1, keepdims=True))
    else:
        norm = jnp.sum(magnitude**norm_type, axis=-1, keepdims=True) ** (1.0 / norm_type)
    return jnp.where(norm > max_norm, y * (max_norm / (norm + 1e-7)), y)


def _passed(tensors: Tensors, inputs: Inputs) -> Outputs:
    """``y = x``: the value itself (values in a trama graph are never modified)."""
    return {"y": inputs["x"]}


@implements("Dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The identity (the catalog specifies eval mode); ``p`` is still checked."""
    slots = Slots(node, parameters)
    p = slots.number("p", 0.5)
    if not 0.0 <= p <= 1.0:
        raise slots.error(f"p must lie in [0, 1], got {p}")
    return JaxKernel(_passed)


@implements("Identity")
def identity(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = x``; like ``torch.nn.Identity``, any slots are ignored."""
    return JaxKernel(_passed)


@implements("Flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Dimensions ``start_dim … end_dim`` merged into one, in C order."""
    slots, site = Slots(node, parameters), Site(node)
    start_dim, end_dim = slots.signed("start_dim", 1), slots.signed("end_dim", -1)
    if start_dim >= 0 and end_dim >= 0 and start_dim > end_dim:
        raise slots.error(f"start_dim = {start_dim} comes after end_dim = {end_dim}")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        rank = max(x.ndim, 1)  # torch treats a 0-d tensor as 1-d here: flattening gives [1]
        start = start_dim + rank if start_dim < 0 else start_dim
        end = end_dim + rank if end_dim < 0 else end_dim
        if not (0 <= start < rank and 0 <= end < rank):
            raise site.fail(f"start_dim {start_dim} or end_dim {end_dim} is out of range for shape {list(x.shape)}")
        if start > end:
            raise site.fail(f"start_dim {start_dim} comes after end_dim {end_dim} for shape {list(x.shape)}")
        shape = x.shape or (1,)
        return {"y": x.reshape(*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])}

    return JaxKernel(apply, slots.used)
