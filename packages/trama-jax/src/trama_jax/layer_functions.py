"""JAX kernels of the catalog's layer_functions ops (:mod:`trama.catalog.layer_functions`): the
function forms of the dense, convolution, normalization and embedding layers, ``addmm``, and the
module variants ``Conv3d``, ``ConvTranspose1d`` and ``BatchNorm3d``.

A function form's weights arrive on input ports, so ``apply`` finds them among its inputs rather
than its tensors (a node of these ops holds no tensor slot), and their shapes are checked when it
runs, which under ``jax.jit`` is while tracing, where shapes are static: the catalog's shared rules
(:mod:`trama.catalog._layer_functions_checks`) give one message in every framework. A function
form and its module share one computation here (``conv2d`` and ``Conv3d`` the convolution of
:func:`_convolution`, ``conv_transpose1d`` and ``ConvTranspose1d`` :func:`_transposed`); the
numerics are those of :mod:`trama_jax.layers` (:mod:`trama_jax._numerics`). Weights must have
``x``'s dtype, as torch requires.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from trama import Node
from trama.catalog import channels_first, check_settings
from trama.catalog._layer_functions_checks import (
    conv_geometry,
    dense_weights,
    matching_dtypes,
    per_channel,
    transposed_geometry,
    weight_norm_axes,
)
from trama_jax import layers
from trama_jax._numerics import HIGHEST, accumulation, dense, epsilon, normalized
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Parameters, Site, Tensors, held
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

Pads = tuple[tuple[int, int], ...]
_T = TypeVar("_T")

#: ``conv_general_dilated``'s layout names for torch's channels-first tensors and weights.
_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


def _fit(site: Site, rule: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """A shared shape rule applied, its ``ValueError`` as an error naming the node."""
    try:
        return rule(*args, **kwargs)
    except ValueError as error:
        raise site.fail(str(error)) from None


def _optional(site: Site, inputs: Inputs, port: str) -> jax.Array | None:
    """An optional port's floating value, ``None`` when it is not connected."""
    return site.floating(inputs, port) if inputs.get(port) is not None else None


def _shape(value: jax.Array | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(value.shape)


# --- Dense maps -----------------------------------------------------------------------------------


@implements("linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = x · weightᵀ + bias``, accumulated as ``Linear``'s (:func:`~trama_jax._numerics.dense`)."""
    check_settings(node, parameters)
    site = Site(node)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x, weight, bias = site.floating(inputs), site.floating(inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x, weight=weight, bias=bias)
        _fit(site, dense_weights, x.shape, weight.shape, _shape(bias))
        return {"y": dense(x, weight, bias)}

    return JaxKernel(apply)


@implements("bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``Bilinear``'s two contractions, for the weights on the ports."""
    check_settings(node, parameters)
    site = Site(node)

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x1, x2 = site.floating(inputs, "input1"), site.floating(inputs, "input2")
        weight, bias = site.floating(inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x1, input2=x2, weight=weight, bias=bias)
        if weight.ndim != 3:
            raise site.fail(f"weight must be [out_features, in1_features, in2_features], got {list(weight.shape)}")
        out, in1, in2 = weight.shape
        if bias is not None and tuple(bias.shape) != (out,):
            raise site.fail(f"bias has shape {list(bias.shape)}, expected [{out}]")
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != in1 or x2.shape[-1] != in2:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} should end in {in1} and {in2}")
        if x1.shape[:-1] != x2.shape[:-1]:
            raise site.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} differ in their leading dimensions")
        acc = accumulation(x1.dtype)
        partial = jnp.einsum("...i,oij->...oj", x1, weight, precision=HIGHEST, preferred_element_type=acc)
        y = jnp.einsum("...oj,...j->...o", partial, x2.astype(acc), precision=HIGHEST)
        if bias is not None:
            y = y + bias.astype(acc)
        return {"y": y.astype(x1.dtype)}

    return JaxKernel(apply)


@implements("addmm")
def addmm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = beta · input + alpha · (mat1 @ mat2)``, accumulated in float32 for 16-bit floats and
    rounded once; ``beta`` 0 ignores ``input`` (its NaNs included), as torch does."""
    settings, site = check_settings(node, parameters), Site(node)
    beta, alpha = settings["beta"], settings["alpha"]

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        mat1, mat2, addend = (site.floating(inputs, port) for port in ("mat1", "mat2", "input"))
        _fit(site, matching_dtypes, mat1, mat2=mat2, input=addend)
        if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
            raise site.fail(f"mat1 {list(mat1.shape)} and mat2 {list(mat2.shape)} must be [n, m] and [m, p]")
        shape = (mat1.shape[0], mat2.shape[1])
        try:
            fits = jnp.broadcast_shapes(addend.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise site.fail(f"input of shape {list(addend.shape)} does not broadcast to {list(shape)}")
        acc = accumulation(mat1.dtype)
        y = jnp.matmul(mat1, mat2, precision=HIGHEST, preferred_element_type=acc)
        if alpha != 1:
            y = y * jnp.asarray(alpha, acc)
        if beta != 0:
            y = y + (addend.astype(acc) if beta == 1 else addend.astype(acc) * jnp.asarray(beta, acc))
        return {"y": y.astype(mat1.dtype)}

    return JaxKernel(apply)


# --- Convolutions ---------------------------------------------------------------------------------


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
    ``[O, C_g, *K]``, for 1 to 3 spatial dimensions (as :func:`trama_jax.layers._convolved`, which
    knows 1 and 2): strided by ``stride``, or with the input spread by ``spread`` (a transposed
    convolution), accumulated with the bias and rounded once to ``x``'s dtype."""
    dims = batched.ndim - 2
    acc = accumulation(x.dtype)
    y = jax.lax.conv_general_dilated(
        batched,
        weight.astype(x.dtype),
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
        y = y + bias.astype(acc).reshape(1, -1, *([1] * dims))
    y = y.astype(x.dtype)
    return {"y": y if x.ndim == y.ndim else y[0]}


def _convolution(
    site: Site,
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None,
    *,
    batched: bool,
    kernel: Sequence[int],
    stride: Sequence[int],
    pads: Pads,
    dilation: Sequence[int],
    groups: int,
    mode: str = "zeros",
) -> Outputs:
    """The cross-correlation of the convolutions, function forms and modules alike; zero padding
    is handed to XLA, the other modes pad first (:func:`trama_jax.layers._pad`)."""
    dims = len(kernel)
    full = x if batched else x[None]
    if mode != "zeros" and any(p != (0, 0) for p in pads):
        full, pads = layers._pad(site, full, pads, mode), ((0, 0),) * dims
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    sizes = [s + lo + hi for s, (lo, hi) in zip(full.shape[2:], pads, strict=True)]
    if any(size < span for size, span in zip(sizes, spans, strict=True)):
        raise site.fail(f"the padded input's spatial size {sizes} is smaller than the kernel's extent {spans}")
    return _convolved(x, full, weight, bias, pads=pads, stride=stride, dilation=dilation, groups=groups)


def _conv_function(node: Node, parameters: Parameters, dims: int) -> JaxKernel:
    settings, site = check_settings(node, parameters), Site(node)
    stride, dilation, groups = settings.integers("stride"), settings.integers("dilation"), settings.integer("groups")
    padding = settings["padding"]

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x, weight, bias = site.floating(inputs), site.floating(inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x, weight=weight, bias=bias)
        geometry = _fit(
            site,
            conv_geometry,
            x.shape,
            weight.shape,
            _shape(bias),
            dims=dims,
            padding=padding,
            stride=stride,
            dilation=dilation,
            groups=groups,
        )
        return _convolution(
            site,
            x,
            weight,
            bias,
            batched=geometry.batched,
            kernel=geometry.kernel,
            stride=stride,
            pads=geometry.pads,
            dilation=dilation,
            groups=groups,
        )

    return JaxKernel(apply)


@implements("conv1d")
def conv1d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Cross-correlation over the last dimension of ``[N, C, L]`` or ``[C, L]``."""
    return _conv_function(node, parameters, 1)


@implements("conv2d")
def conv2d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Cross-correlation over the last two dimensions of ``[N, C, H, W]`` or ``[C, H, W]``."""
    return _conv_function(node, parameters, 2)


@implements("conv3d")
def conv3d_function(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Cross-correlation over the last three dimensions of ``[N, C, D, H, W]`` or ``[C, D, H, W]``."""
    return _conv_function(node, parameters, 3)


@implements("Conv3d")
def conv3d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``Conv3d``: the function forms' convolution with the weights of the slots and every padding mode."""
    settings, site = check_settings(node, parameters), Site(node)
    kernel, stride, dilation = (settings.integers(name) for name in ("kernel_size", "stride", "dilation"))
    groups, mode, in_channels = (
        settings.integer("groups"),
        settings.text("padding_mode"),
        settings.integer("in_channels"),
    )
    pads: Pads = settings["pads"]
    bias = held(settings, "bias")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        batched = _fit(site, channels_first, x.shape, 3, in_channels)
        b = None if bias is None else tensors[bias]
        return _convolution(
            site,
            x,
            tensors["weight"],
            b,
            batched=batched,
            kernel=kernel,
            stride=stride,
            pads=pads,
            dilation=dilation,
            groups=groups,
            mode=mode,
        )

    return JaxKernel(apply, settings.tensors)


def _transposed(
    site: Site,
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None,
    *,
    batched: bool,
    stride: Sequence[int],
    padding: Sequence[int],
    output_padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Outputs:
    """A transposed convolution as an ordinary one of the input spread by the strides, with the
    kernel flipped and its channel axes swapped within each group (the derivation is
    :func:`trama_jax.layers.conv_transpose2d`'s, for any number of spatial dimensions); an input
    shorter than the kernel is spread explicitly, as there (:func:`trama_jax.layers._swappable`)."""
    in_channels, out_per_group, *kernel = weight.shape
    dims, per_group = len(kernel), in_channels // groups
    lows = [d * (k - 1) - p for k, d, p in zip(kernel, dilation, padding, strict=True)]
    pads = tuple((low, low + extra) for low, extra in zip(lows, output_padding, strict=True))
    w = weight.astype(x.dtype).reshape(groups, per_group, out_per_group, *kernel)
    w = jnp.flip(w.swapaxes(1, 2).reshape(groups * out_per_group, per_group, *kernel), axis=tuple(range(2, 2 + dims)))
    full = x if batched else x[None]
    spread: Sequence[int] | None = stride
    if layers._swappable(full.shape[2:], kernel, stride):
        full, spread = layers._spread(full, stride), None
    return _convolved(x, full, w, bias, pads=pads, spread=spread, dilation=dilation, groups=groups)


def _conv_transpose_function(node: Node, parameters: Parameters, dims: int) -> JaxKernel:
    settings, site = check_settings(node, parameters), Site(node)
    geometry = {name: settings.integers(name) for name in ("stride", "padding", "output_padding", "dilation")}
    groups = settings.integer("groups")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x, weight, bias = site.floating(inputs), site.floating(inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x, weight=weight, bias=bias)
        fitted = _fit(
            site, transposed_geometry, x.shape, weight.shape, _shape(bias), dims=dims, groups=groups, **geometry
        )
        return _transposed(site, x, weight, bias, batched=fitted.batched, groups=groups, **geometry)

    return JaxKernel(apply)


@implements("conv_transpose1d")
def conv_transpose1d_function(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The transpose of conv1d."""
    return _conv_transpose_function(node, parameters, 1)


@implements("conv_transpose2d")
def conv_transpose2d_function(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The transpose of conv2d."""
    return _conv_transpose_function(node, parameters, 2)


@implements("ConvTranspose1d")
def conv_transpose1d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``ConvTranspose1d``: the function forms' transposed convolution with the slots' weights."""
    settings, site = check_settings(node, parameters), Site(node)
    geometry = {name: settings.integers(name) for name in ("stride", "padding", "output_padding", "dilation")}
    groups, in_channels = settings.integer("groups"), settings.integer("in_channels")
    bias = held(settings, "bias")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        weight = tensors["weight"]
        fitted = _fit(
            site,
            transposed_geometry,
            x.shape,
            weight.shape,
            None,
            dims=1,
            groups=groups,
            **geometry,
        )
        if fitted.in_channels != in_channels:
            raise site.fail(f"x has {fitted.in_channels} channels (shape {list(x.shape)}), expected {in_channels}")
        b = None if bias is None else tensors[bias]
        return _transposed(site, x, weight, b, batched=fitted.batched, groups=groups, **geometry)

    return JaxKernel(apply, settings.tensors)


# --- Normalization --------------------------------------------------------------------------------


def _channel_vector(value: jax.Array, ndim: int, dtype: Any) -> jax.Array:
    return value.astype(dtype).reshape(1, -1, *([1] * (ndim - 2)))


@implements("batch_norm")
def batch_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C, *]`` by the running statistics (``training`` false)
    or the batch's (``training`` true), computed as ``BatchNorm2d``'s."""
    settings, site = check_settings(node, parameters), Site(node)
    training, eps = settings.flag("training"), settings.number("eps")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim < 2:
            raise site.fail(f"x should be [N, C, *], got shape {list(x.shape)}")
        channels = x.shape[1]
        ports = {port: _optional(site, inputs, port) for port in ("running_mean", "running_var", "weight", "bias")}
        _fit(site, matching_dtypes, x, **ports)
        for port, value in ports.items():
            _fit(site, per_channel, port, _shape(value), (channels,))
        acc = accumulation(x.dtype)
        weight, bias = ports["weight"], ports["bias"]
        gamma = None if weight is None else _channel_vector(weight, x.ndim, acc)
        beta = None if bias is None else _channel_vector(bias, x.ndim, acc)
        if training:
            if x.size // max(channels, 1) <= 1:
                raise site.fail(f"with training true, x needs more than 1 value per channel, got shape {list(x.shape)}")
            return {"y": normalized(x, (0, *range(2, x.ndim)), eps, gamma, beta)}
        mean, var = ports["running_mean"], ports["running_var"]
        if mean is None or var is None:  # the check requires both when training is false
            raise site.fail("training is false, so running_mean and running_var must both be connected")
        wide = x.astype(acc) - _channel_vector(mean, x.ndim, acc)
        y = wide * jax.lax.rsqrt(_channel_vector(var, x.ndim, acc) + jnp.asarray(eps, acc))
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return {"y": y.astype(x.dtype)}

    return JaxKernel(apply)


@implements("BatchNorm3d")
def batch_norm3d(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Per-channel normalization of ``[N, C, D, H, W]`` (``BatchNorm2d``'s kernel)."""
    return layers._batch_norm(node, parameters, (5,))


def _trailing(node: Node, parameters: Parameters, *, centred: bool) -> JaxKernel:
    """``layer_norm`` (``centred``) and ``rms_norm``: statistics over ``normalized_shape``."""
    settings, site = check_settings(node, parameters), Site(node)
    shape, eps = settings.integers("normalized_shape"), settings.optional_number("eps")
    axes = tuple(range(-len(shape), 0))

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = layers._trailing(site, inputs, shape)
        weight, bias = _optional(site, inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x, weight=weight, bias=bias)
        _fit(site, per_channel, "weight", _shape(weight), shape)
        _fit(site, per_channel, "bias", _shape(bias), shape)
        machine = epsilon(accumulation(x.dtype)) if eps is None else eps
        return {"y": normalized(x, axes, machine, weight, bias, centred=centred)}

    return JaxKernel(apply)


@implements("layer_norm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    return _trailing(node, parameters, centred=True)


@implements("rms_norm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``x / √(mean(x²) + eps) · weight``; ``eps`` null as ``RMSNorm``'s (see its kernel)."""
    return _trailing(node, parameters, centred=False)


@implements("group_norm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``GroupNorm``'s computation (``x`` seen as ``[N, G, C/G, *]``), γ and β from the ports."""
    settings, site = check_settings(node, parameters), Site(node)
    groups, eps = settings.integer("num_groups"), settings.number("eps")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        x = site.floating(inputs)
        if x.ndim < 2 or x.shape[1] % groups:
            raise site.fail(f"x should be [N, C, *] with C divisible by num_groups = {groups}, got {list(x.shape)}")
        weight, bias = _optional(site, inputs, "weight"), _optional(site, inputs, "bias")
        _fit(site, matching_dtypes, x, weight=weight, bias=bias)
        channels, rest = x.shape[1], x.shape[2:]
        _fit(site, per_channel, "weight", _shape(weight), (channels,))
        _fit(site, per_channel, "bias", _shape(bias), (channels,))
        grouped = x.reshape(x.shape[0], groups, channels // groups, *rest)
        per_group = (groups, channels // groups, *([1] * len(rest)))
        gamma = None if weight is None else weight.reshape(per_group)
        beta = None if bias is None else bias.reshape(per_group)
        return {"y": normalized(grouped, range(2, grouped.ndim), eps, gamma, beta).reshape(x.shape)}

    return JaxKernel(apply)


# --- Embedding and dropout ------------------------------------------------------------------------


@implements("embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``y = weight[input]``, as ``Embedding``'s kernel: an index out of range is an error when the
    indices are known, and a row of NaN under ``jax.jit`` (never a clamped or wrapped row)."""
    settings, site = check_settings(node, parameters), Site(node)
    padding_idx = settings.optional_integer("padding_idx")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        index, table = jnp.asarray(inputs["input"]), jnp.asarray(inputs["weight"])
        if not jnp.issubdtype(index.dtype, jnp.integer):
            raise site.fail(f"input must be an integer tensor, got dtype {index.dtype}")
        if table.ndim != 2:
            raise site.fail(f"weight must be [num_embeddings, embedding_dim], got shape {list(table.shape)}")
        rows = table.shape[0]
        if padding_idx is not None and not -rows <= padding_idx < rows:
            raise site.fail(f"padding_idx = {padding_idx} must lie in [{-rows}, {rows}) for weight of {rows} rows")
        bounds = layers._concrete_bounds(index)
        if bounds is not None and (bounds[0] < 0 or bounds[1] >= rows):
            raise site.fail(f"indices must lie in [0, {rows}), got values from {bounds[0]} to {bounds[1]}")
        return {"y": table.at[jnp.where(index < 0, rows, index)].get(mode="fill", fill_value=jnp.nan)}

    return JaxKernel(apply)


@implements("dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """The identity (the catalog's eval mode, whatever ``training`` says); ``p`` is checked."""
    check_settings(node, parameters)
    return JaxKernel(layers._passed)


# --- Weight reparametrization ---------------------------------------------------------------------


@implements("weight_norm")
def weight_norm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``v · (g / ‖v‖)``, the 2-norm over every dimension but ``dim`` (all of them for −1), summed
    in float32 for 16-bit floats; a zero norm gives NaN, as torch's does."""
    settings, site = check_settings(node, parameters), Site(node)
    dim = settings.integer("dim")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        v, g = site.floating(inputs, "v"), site.floating(inputs, "g")
        _fit(site, matching_dtypes, v, named="v", g=g)
        axes = _fit(site, weight_norm_axes, v.shape, g.shape, dim)
        wide = v.astype(accumulation(v.dtype))
        norm = jnp.sqrt(jnp.sum(wide * wide, axis=axes, keepdims=True))
        return {"y": (wide * (g.astype(wide.dtype) / norm)).astype(v.dtype)}

    return JaxKernel(apply)
