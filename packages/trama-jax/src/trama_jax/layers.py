"""JAX kernels for the catalog's fixed layers: dense and bilinear maps, convolutions, pooling,
normalization, embedding, dropout and shape helpers (``docs/ops.md``, section *Layers*).

Each factory builds from the node's settings as the core checked them
(:func:`trama.catalog.check_settings`) and returns a :class:`~trama_jax.kernel.JaxKernel` whose
``apply`` is a pure function of the tensors and the inputs. Everything ``apply`` branches on is
static under ``jax.jit``: settings, shapes, dtypes, which ports are connected. Nothing depends on
the values, so one trace serves every call with the same shapes, and ``jax.grad`` differentiates
with respect to the tensors.

Convolutions and pools map onto XLA's own windowed operations (``conv_general_dilated``,
``reduce_window``) rather than an im2col of our own: XLA fuses, tiles and differentiates them.
Dtypes and precision follow :mod:`trama_jax._numerics`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node
from trama.catalog import (
    PAD_MODES,
    PoolWindows,
    adaptive_windows,
    channels_first,
    check_pad_room,
    check_settings,
    flattened_shape,
)
from trama_jax._numerics import HIGHEST, accumulation, dense, epsilon, normalized
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Parameters, Site, Tensors, held
from trama_jax.kernel import JaxKernel
from trama_jax.pooling import _DENSE_WINDOWS, adaptive_average

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

Pads = tuple[tuple[int, int], ...]

#: ``conv_general_dilated``'s layout names for torch's channels-first tensors and weights.
_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW")}


def _channel_vector(value: jax.Array, ndim: int, dtype: Any) -> jax.Array:
    """A per-channel ``[C]`` vector shaped to broadcast along dimension 1 of an ``ndim``-d tensor."""
    return value.astype(dtype).reshape(1, -1, *([1] * (ndim - 2)))


# --- Dense maps -----------------------------------------------------------------------------


@implements("Linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = x · weightᵀ + bias`` over the last dimension."""
    settings, site = check_settings(node, parameters), Site(node)
    in_features, bias = settings.integer("in_features"), held(settings, "bias")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim == 0 or x.shape[-1] != in_features:
            raise site.fail(f"x has shape {list(x.shape)}, whose last dimension should be {in_features}")
        return {"y": dense(x, tensors["weight"], None if bias is None else tensors[bias])}

    return JaxKernel(apply, settings.tensors)


@implements("Bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``, as two
    contractions (input1 with the weight, then with input2) rather than one three-operand einsum
    whose contraction order XLA would have to guess."""
    settings, site = check_settings(node, parameters), Site(node)
    in1, in2 = settings.integer("in1_features"), settings.integer("in2_features")
    bias = held(settings, "bias")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x1, x2 = site.floating(inputs, "input1"), site.floating(inputs, "input2")
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != in1 or x2.shape[-1] != in2:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} should end in {in1} and {in2}")
        if x1.shape[:-1] != x2.shape[:-1]:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} differ in their leading dimensions")
        acc = accumulation(x1.dtype)
        w = tensors["weight"].astype(x1.dtype)
        partial = jnp.einsum("...i,oij->...oj", x1, w, precision=HIGHEST, preferred_element_type=acc)
        y = jnp.einsum("...oj,...j->...o", partial, x2.astype(acc), precision=HIGHEST)
        if bias is not None:
            y = y + tensors[bias].astype(acc)
        return {"y": y.astype(x1.dtype)}

    return JaxKernel(apply, settings.tensors)


# --- Convolutions ---------------------------------------------------------------------------


def _batched(site: Site, x: jax.Array, dims: int, channels: int) -> jax.Array:
    """``x`` with its batch dimension: an unbatched ``[C, *S]`` input gains a leading 1."""
    try:
        return x if channels_first(x.shape, dims, channels) else x[None]
    except ValueError as error:
        raise site.fail(str(error)) from None


def _pad(site: Site, x: jax.Array, pads: Pads, mode: str) -> jax.Array:
    """``x`` ``[N, C, *S]`` padded by value (reflect, replicate, circular), as torch pads it,
    within the catalog's limits (:func:`trama.catalog.check_pad_room`)."""
    try:
        check_pad_room(mode, pads, x.shape[2:])
    except ValueError as error:
        raise site.fail(str(error)) from None
    return jnp.pad(x, ((0, 0), (0, 0), *pads), mode=PAD_MODES[mode])


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
    settings, site = check_settings(node, parameters), Site(node)
    kernel, stride, dilation = (settings.integers(name) for name in ("kernel_size", "stride", "dilation"))
    groups, mode, in_channels = (
        settings.integer("groups"),
        settings.text("padding_mode"),
        settings.integer("in_channels"),
    )
    pads: Pads = settings["pads"]
    bias = held(settings, "bias")
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
        w = tensors["weight"].astype(x.dtype)
        b = None if bias is None else tensors[bias]
        return _convolved(x, batched, w, b, pads=conv_pads, stride=stride, dilation=dilation, groups=groups)

    return JaxKernel(apply, settings.tensors)


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
    settings, site = check_settings(node, parameters), Site(node)
    kernel, stride, padding, output_padding, dilation = (
        settings.integers(name) for name in ("kernel_size", "stride", "padding", "output_padding", "dilation")
    )
    groups, in_channels, out_channels = (settings.integer(name) for name in ("groups", "in_channels", "out_channels"))
    per_group, out_per_group = in_channels // groups, out_channels // groups
    bias = held(settings, "bias")
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
        w = tensors["weight"].astype(x.dtype).reshape(groups, per_group, out_per_group, *kernel)
        w = jnp.flip(w.swapaxes(1, 2).reshape(out_channels, per_group, *kernel), axis=(2, 3))
        b = None if bias is None else tensors[bias]
        spread: Sequence[int] | None = stride
        if _swappable(batched.shape[2:], kernel, stride):
            batched, spread = _spread(batched, stride), None
        return _convolved(x, batched, w, b, pads=pads, spread=spread, dilation=dilation, groups=groups)

    return JaxKernel(apply, settings.tensors)


def _swappable(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int]) -> bool:
    """Whether XLA may compute this input-dilated convolution with its operands swapped.

    XLA swaps a convolution's input and kernel when the kernel is the larger of the two (in some
    dimension, the kernel is longer than the input), and for an input-dilated convolution
    (``stride > 1``) the swapped one is malformed: jaxlib 0.10.2 aborts the whole process
    ("Window dimensions do not match RHS shape"). Such an input is small, so spreading it
    explicitly (:func:`_spread`) costs little; a larger one keeps XLA's zero-free dilation,
    unless the spread input is larger than :data:`_LARGEST_DILATION` (XLA would compile for
    minutes): then it is spread explicitly too."""
    return any(t > 1 for t in stride) and (
        any(k > s for k, s in zip(kernel, sizes, strict=True)) or _spread_extent(sizes, stride) > _LARGEST_DILATION
    )


#: The most elements of an input-dilated convolution's spread input that XLA dilates itself.
#: Its CPU compiler takes time in proportion to that extent (seconds for 2**30, minutes for a
#: stride of 2**36 on two elements, all inside trama's bounds); :func:`_spread` compiles in
#: constant time and makes an array no larger than the convolution's output per channel.
_LARGEST_DILATION = 2**20


def _spread_extent(sizes: Sequence[int], stride: Sequence[int]) -> int:
    """How many elements the input's spatial dimensions have once spread by ``stride``."""
    return math.prod((s - 1) * t + 1 for s, t in zip(sizes, stride, strict=True))


def _spread(x: jax.Array, stride: Sequence[int]) -> jax.Array:
    """``x`` ``[N, C, *S]`` with ``stride − 1`` zeros between neighbours along each spatial
    dimension: the input dilation of a transposed convolution, made explicit."""
    interior = [(0, 0, 0), (0, 0, 0), *((0, 0, t - 1) for t in stride)]
    return jax.lax.pad(x, jnp.zeros((), x.dtype), interior)


# --- Pooling --------------------------------------------------------------------------------


def _pooled(site: Site, geometry: PoolWindows, x: jax.Array, init: jax.Array, op: Any) -> jax.Array:
    """``op`` over every window of ``x`` padded with ``init`` (in ceil mode the end is padded as
    far as the last window reaches: :meth:`trama.catalog.PoolWindows.fit`)."""
    try:
        out, pads = geometry.fit(x.shape)
    except ValueError as error:
        raise site.fail(str(error)) from None
    lead = (1,) * (x.ndim - 2)
    y: jax.Array = jax.lax.reduce_window(
        x,
        init,
        op,
        window_dimensions=(*lead, *geometry.kernel),
        window_strides=(*lead, *geometry.stride),
        padding=(*((0, 0),) * (x.ndim - 2), *pads),
        window_dilation=(*lead, *geometry.dilation),
    )
    return y[..., : out[0], : out[1]]


@implements("MaxPool2d")
def max_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The largest element of each (dilated) window; padding acts as −∞ (the dtype's minimum for
    integers) and never wins, while a NaN in a window does, as in torch."""
    geometry, site = PoolWindows.of(check_settings(node, parameters)), Site(node)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        if jnp.issubdtype(x.dtype, jnp.floating):
            init = jnp.array(-jnp.inf, x.dtype)
        elif jnp.issubdtype(x.dtype, jnp.integer):
            init = jnp.array(np.iinfo(x.dtype).min, x.dtype)
        else:
            raise site.fail(f"x must hold floating-point numbers or integers, got dtype {x.dtype}")
        return {"y": _pooled(site, geometry, x, init, jax.lax.max)}

    return JaxKernel(apply)


@implements("AvgPool2d")
def avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The sum of each window's elements inside ``x`` over the catalog's divisor. The divisors
    depend only on the shapes, so they are computed with numpy while tracing: a constant."""
    settings, site = check_settings(node, parameters), Site(node)
    geometry = PoolWindows.of(settings)
    count_include_pad = settings.flag("count_include_pad")
    divisor_override = settings.optional_integer("divisor_override")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        acc = accumulation(x.dtype)
        total = _pooled(site, geometry, x.astype(acc), jnp.array(0, acc), jax.lax.add)
        if divisor_override is not None:
            divisor = np.asarray(divisor_override, acc)
        else:
            divisor = geometry.divisors(x.shape[-2:], total.shape[-2:], count_include_pad).astype(acc)
        return {"y": (total / divisor).astype(x.dtype)}

    return JaxKernel(apply)


@implements("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Means over windows chosen to give ``output_size`` (a ``null`` entry keeps that size).

    The windows' bounds depend on the input size, so they are no strided view; each dimension
    gets a constant 0/1 membership matrix instead, and ``M_H · x · M_Wᵀ`` sums every window in two
    exact matrix products (overlapping and uneven windows need no special case). Dividing by the
    window sizes afterwards keeps torch's sum-then-divide order.
    """
    site = Site(node)
    output_size: tuple[int | None, ...] = check_settings(node, parameters)["output_size"]

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim not in (3, 4):
            raise site.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        if any(size * (out or size) > _DENSE_WINDOWS for size, out in zip(x.shape[-2:], output_size, strict=True)):
            return {"y": adaptive_average(x, output_size)}  # windows gathered, no huge constant matrix
        acc = accumulation(x.dtype)
        (rows, row_counts), (cols, col_counts) = (
            adaptive_windows(size, out) for size, out in zip(x.shape[-2:], output_size, strict=True)
        )
        total = jnp.einsum("ih,...hw,jw->...ij", rows.astype(acc), x.astype(acc), cols.astype(acc), precision=HIGHEST)
        return {"y": (total / np.outer(row_counts, col_counts).astype(acc)).astype(x.dtype)}

    return JaxKernel(apply)


# --- Normalization --------------------------------------------------------------------------


def _batch_norm(node: Node, parameters: Parameters, ranks: tuple[int, ...]) -> JaxKernel:
    """BatchNorm1d/2d in eval mode: normalized by the running statistics when the node has them,
    else (a module built with ``track_running_stats=False``) by the batch's, biased.

    Which statistics are used follows the slots, as torch's eval-mode ``forward`` follows its
    buffers: a node whose ``track_running_stats`` is false but that still carries running
    statistics (a torch module whose flag was switched off after construction) uses them.
    ``num_batches_tracked`` matters in training only and is not passed to ``apply``.
    """
    settings, site = check_settings(node, parameters), Site(node)
    channels, eps = settings.integer("num_features"), settings.number("eps")
    weight, bias, mean, var = (held(settings, slot) for slot in ("weight", "bias", "running_mean", "running_var"))

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

    return JaxKernel(apply, settings.tensors)


@implements("BatchNorm1d")
def batch_norm1d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C]`` or ``[N, C, L]``."""
    return _batch_norm(node, parameters, (2, 3))


@implements("BatchNorm2d")
def batch_norm2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C, H, W]``."""
    return _batch_norm(node, parameters, (4,))


def _trailing(site: Site, inputs: Inputs, shape: tuple[int, ...]) -> jax.Array:
    """``x``, which must end in ``normalized_shape``."""
    x = site.floating(inputs)
    if x.ndim < len(shape) or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise site.fail(f"x of shape {list(x.shape)} does not end in normalized_shape {list(shape)}")
    return x


@implements("LayerNorm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    settings, site = check_settings(node, parameters), Site(node)
    shape, eps = settings.integers("normalized_shape"), settings.number("eps")
    weight, bias = held(settings, "weight"), held(settings, "bias")
    axes = tuple(range(-len(shape), 0))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = _trailing(site, inputs, shape)
        gamma = None if weight is None else tensors[weight]
        beta = None if bias is None else tensors[bias]
        return {"y": normalized(x, axes, eps, gamma, beta)}

    return JaxKernel(apply, settings.tensors)


@implements("RMSNorm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``.

    ``eps`` null is the machine epsilon of the dtype the norm is computed in: ``x``'s own for
    float32 (the catalog's ``torch.finfo(x.dtype).eps``), but float32's for a 16-bit ``x``. That is
    what torch 2.13 does, which upcasts first: with float32's epsilon this kernel's float16 and
    bfloat16 results are bit-identical to torch's, with the 16-bit dtype's most are one rounding
    off (``docs/ops.md`` says ``x``'s dtype; reported as an ambiguity of the catalog)."""
    settings, site = check_settings(node, parameters), Site(node)
    shape, eps, weight = (
        settings.integers("normalized_shape"),
        settings.optional_number("eps"),
        held(settings, "weight"),
    )
    axes = tuple(range(-len(shape), 0))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = _trailing(site, inputs, shape)
        machine = epsilon(accumulation(x.dtype)) if eps is None else eps
        gamma = None if weight is None else tensors[weight]
        return {"y": normalized(x, axes, machine, gamma, None, centred=False)}

    return JaxKernel(apply, settings.tensors)


@implements("GroupNorm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Normalization of each sample's groups of consecutive channels: ``x`` ``[N, C, *]`` is seen
    as ``[N, G, C/G, *]`` and normalized over everything after ``G``, with γ and β shaped
    ``[G, C/G, 1, …]`` so that the affine step joins the normalization's single rounding."""
    settings, site = check_settings(node, parameters), Site(node)
    groups, channels, eps = settings.integer("num_groups"), settings.integer("num_channels"), settings.number("eps")
    weight, bias = held(settings, "weight"), held(settings, "bias")

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

    return JaxKernel(apply, settings.tensors)


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
    settings, site = check_settings(node, parameters), Site(node)
    rows, max_norm, norm_type = (
        settings.integer("num_embeddings"),
        settings.optional_number("max_norm"),
        settings.number("norm_type"),
    )

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        index = jnp.asarray(inputs["x"])
        if not jnp.issubdtype(index.dtype, jnp.integer):
            raise site.fail(f"x must be an integer tensor, got dtype {index.dtype}")
        bounds = _concrete_bounds(index)
        if bounds is not None and (bounds[0] < 0 or bounds[1] >= rows):
            raise site.fail(f"indices must lie in [0, {rows}), got values from {bounds[0]} to {bounds[1]}")
        table = tensors["weight"]
        y = table.at[jnp.where(index < 0, rows, index)].get(mode="fill", fill_value=jnp.nan)
        if max_norm is not None:
            y = _renormed(y, max_norm, norm_type)
        return {"y": y}

    return JaxKernel(apply, settings.tensors)


def _concrete_bounds(index: jax.Array) -> tuple[int, int] | None:
    """The smallest and largest index when they are known now: ``None`` while ``jax.jit`` traces
    values it does not know (any abstract value, not only a top-level tracer), or for no index."""
    if not index.size:
        return None
    try:
        return int(index.min()), int(index.max())
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError):
        return None


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
    check_settings(node, parameters)
    return JaxKernel(_passed)


@implements("Identity")
def identity(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = x``; like ``torch.nn.Identity``, any slots are ignored."""
    return JaxKernel(_passed)


@implements("Flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Dimensions ``start_dim … end_dim`` merged into one, in C order."""
    settings, site = check_settings(node, parameters), Site(node)
    start_dim, end_dim = settings.integer("start_dim"), settings.integer("end_dim")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        try:
            return {"y": x.reshape(flattened_shape(x.shape, start_dim, end_dim))}
        except ValueError as error:
            raise site.fail(str(error)) from None

    return JaxKernel(apply)
