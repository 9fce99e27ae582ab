"""numpy kernels of the catalog's layer_functions ops (:mod:`trama.catalog.layer_functions`): the
function forms of the dense, convolution, normalization and embedding layers, ``addmm``, and the
module variants ``Conv3d`` and ``BatchNorm3d`` (``ConvTranspose1d`` is ``trama_numpy.layers``'
``ConvTranspose2d`` code, registered for both).

A function form receives its weights on input ports, so its kernel knows them only when it runs:
it checks their shapes then, with the catalog's shared rules
(:mod:`trama.catalog._layer_functions_checks`: one message in every framework), and computes with
the very code of the module it is the function of (:mod:`trama_numpy.layers`), built for the
weights at hand. That keeps one reference implementation per computation: ``conv2d`` is
``Conv2d``'s im2col with ``padding_mode`` ``"zeros"``, ``batch_norm`` is ``BatchNorm2d``'s
normalization for any rank. Weights must have ``x``'s dtype, as torch requires (the modules cast
theirs, because a document's slot may store another dtype; a port's value is a tensor the model
computed with, and torch refuses the mix).

A kernel raises ``ValueError`` or ``TypeError`` for an input that does not fit, naming the op
and the node, as the layers' kernels do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from trama import Node, Parameter
from trama.catalog import check_settings
from trama.catalog._layer_functions_checks import (
    conv_geometry,
    dense_weights,
    matching_dtypes,
    per_channel,
    transposed_geometry,
    weight_norm_axes,
)
from trama.catalog._reader import Settings
from trama.extension import Kernel
from trama_numpy import layers
from trama_numpy._precision import compute_dtype, rounded, widened
from trama_numpy._registry import implements

__all__ = [
    "addmm",
    "batch_norm",
    "batch_norm3d",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv3d_function",
    "conv_nd",
    "conv_transpose1d_function",
    "conv_transpose2d_function",
    "conv_transpose_nd",
    "dropout",
    "embedding",
    "group_norm",
    "layer_norm",
    "linear",
    "rms_norm",
    "weight_norm",
]

Array = npt.NDArray[Any]
_T = TypeVar("_T")


class _Function(layers._Kernel):
    """Base of the function forms: the node (to build its module's kernel for the weights at hand)
    and its checked settings."""

    __slots__ = ("node", "settings")

    def __init__(self, node: Node, settings: Settings) -> None:
        super().__init__(node)
        self.node = node
        self.settings = settings

    def optional(self, inputs: Mapping[str, Any], port: str) -> Array | None:
        """An optional port's floating value, ``None`` when it is not connected."""
        return self.floating(inputs, port) if inputs.get(port) is not None else None

    def fit(self, rule: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """A shared shape rule applied, its ``ValueError`` naming this node."""
        try:
            return rule(*args, **kwargs)
        except ValueError as error:
            raise self.fail(str(error)) from None


def _shape(array: Array | None) -> tuple[int, ...] | None:
    return None if array is None else array.shape


# --- Dense maps -----------------------------------------------------------------------------------


class _Linear(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x, weight, bias = self.floating(inputs), self.floating(inputs, "weight"), self.optional(inputs, "bias")
        self.fit(matching_dtypes, x, weight=weight, bias=bias)
        self.fit(dense_weights, x.shape, weight.shape, _shape(bias))
        return layers._Linear(self.node, weight, bias)({"x": x})


@implements("linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = x · weightᵀ + bias``, the weights from ports."""
    return _Linear(node, check_settings(node, parameters))


class _Bilinear(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x1, weight, bias = (
            self.floating(inputs, "input1"),
            self.floating(inputs, "weight"),
            self.optional(inputs, "bias"),
        )
        self.fit(matching_dtypes, x1, input2=self.floating(inputs, "input2"), weight=weight, bias=bias)
        if weight.ndim != 3:
            raise self.fail(f"weight must be [out_features, in1_features, in2_features], got {list(weight.shape)}")
        if bias is not None and bias.shape != weight.shape[:1]:
            raise self.fail(f"bias has shape {list(bias.shape)}, expected [{weight.shape[0]}]")
        return layers._Bilinear(self.node, weight, bias)(inputs)


@implements("bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``."""
    return _Bilinear(node, check_settings(node, parameters))


class _Addmm(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        mat1, mat2, addend = (self.floating(inputs, port) for port in ("mat1", "mat2", "input"))
        self.fit(matching_dtypes, mat1, mat2=mat2, input=addend)
        if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
            raise self.fail(f"mat1 {list(mat1.shape)} and mat2 {list(mat2.shape)} must be [n, m] and [m, p]")
        shape = (mat1.shape[0], mat2.shape[1])
        try:
            addend = np.broadcast_to(addend, shape)
        except ValueError:
            raise self.fail(f"input of shape {list(addend.shape)} does not broadcast to {list(shape)}") from None
        beta, alpha = self.settings["beta"], self.settings["alpha"]
        work = compute_dtype(mat1.dtype)  # float32 for the 16-bit floats, rounded once at the end
        product = widened(mat1) @ widened(mat2)
        y = product if alpha == 1 else product * np.asarray(alpha, work)
        if beta != 0:  # beta 0: input ignored, its NaNs included (torch's rule)
            y = y + (widened(addend) if beta == 1 else widened(addend) * np.asarray(beta, work))
        return {"y": rounded(y, mat1.dtype)}


@implements("addmm")
def addmm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = beta · input + alpha · (mat1 @ mat2)``."""
    return _Addmm(node, check_settings(node, parameters))


# --- Convolutions ---------------------------------------------------------------------------------


class _ConvFunction(_Function):
    __slots__ = ("dims",)

    def __init__(self, node: Node, settings: Settings, dims: int) -> None:
        super().__init__(node, settings)
        self.dims = dims

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x, weight, bias = self.floating(inputs), self.floating(inputs, "weight"), self.optional(inputs, "bias")
        self.fit(matching_dtypes, x, weight=weight, bias=bias)
        s = self.settings
        stride, dilation, groups = s.integers("stride"), s.integers("dilation"), s.integer("groups")
        geometry = self.fit(
            conv_geometry,
            x.shape,
            weight.shape,
            _shape(bias),
            dims=self.dims,
            padding=s["padding"],
            stride=stride,
            dilation=dilation,
            groups=groups,
        )
        kernel = layers._Conv(
            self.node,
            weight=weight,
            bias=bias,
            kernel=geometry.kernel,
            stride=stride,
            pads=geometry.pads,
            dilation=dilation,
            groups=groups,
            mode="zeros",
        )
        return kernel({"x": x})


def conv_nd(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: int) -> Kernel:
    """``conv1d``/``conv2d``/``conv3d``: ``Conv{dims}d``'s computation with zero padding, for the
    weights on the ports."""
    return _ConvFunction(node, check_settings(node, parameters), dims)


@implements("conv1d")
def conv1d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last dimension of ``[N, C, L]`` or ``[C, L]``."""
    return conv_nd(node, children=children, parameters=parameters, dims=1)


@implements("conv2d")
def conv2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last two dimensions of ``[N, C, H, W]`` or ``[C, H, W]``."""
    return conv_nd(node, children=children, parameters=parameters, dims=2)


@implements("conv3d")
def conv3d_function(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last three dimensions of ``[N, C, D, H, W]`` or ``[C, D, H, W]``."""
    return conv_nd(node, children=children, parameters=parameters, dims=3)


class _ConvTransposeFunction(_ConvFunction):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x, weight, bias = self.floating(inputs), self.floating(inputs, "weight"), self.optional(inputs, "bias")
        self.fit(matching_dtypes, x, weight=weight, bias=bias)
        s = self.settings
        geometry = {name: s.integers(name) for name in ("stride", "padding", "output_padding", "dilation")}
        groups = s.integer("groups")
        self.fit(transposed_geometry, x.shape, weight.shape, _shape(bias), dims=self.dims, groups=groups, **geometry)
        return layers._ConvTranspose(self.node, weight=weight, bias=bias, groups=groups, **geometry)({"x": x})


def conv_transpose_nd(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: int
) -> Kernel:
    """``conv_transpose1d``/``2d``: ``ConvTranspose2d``'s computation for the weights on the ports."""
    return _ConvTransposeFunction(node, check_settings(node, parameters), dims)


@implements("conv_transpose1d")
def conv_transpose1d_function(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> Kernel:
    """The transpose of conv1d."""
    return conv_transpose_nd(node, children=children, parameters=parameters, dims=1)


@implements("conv_transpose2d")
def conv_transpose2d_function(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> Kernel:
    """The transpose of conv2d."""
    return conv_transpose_nd(node, children=children, parameters=parameters, dims=2)


@implements("Conv3d")
def conv3d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last three dimensions, every padding mode (``Conv2d``'s code)."""
    return layers._conv(node, children=children, parameters=parameters, dims=3)


# --- Normalization --------------------------------------------------------------------------------


class _BatchNormFunction(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim < 2:
            raise self.fail(f"x should be [N, C, *], got shape {list(x.shape)}")
        channels = x.shape[1]
        ports = {port: self.optional(inputs, port) for port in ("running_mean", "running_var", "weight", "bias")}
        self.fit(matching_dtypes, x, **ports)
        for port, value in ports.items():
            self.fit(per_channel, port, _shape(value), (channels,))
        training = self.settings.flag("training")
        if training and x.size // max(channels, 1) <= 1:
            raise self.fail(f"with training true, x needs more than 1 value per channel, got shape {list(x.shape)}")
        kernel = layers._BatchNorm(
            self.node,
            channels=channels,
            dims=(x.ndim,),
            eps=self.settings.number("eps"),
            weight=ports["weight"],
            bias=ports["bias"],
            mean=None if training else ports["running_mean"],
            var=None if training else ports["running_var"],
        )
        return kernel({"x": x})


@implements("batch_norm")
def batch_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C, *]`` by the running statistics (``training`` false) or
    the batch's (``training`` true, no running statistics: the check refuses them then)."""
    return _BatchNormFunction(node, check_settings(node, parameters))


@implements("BatchNorm3d")
def batch_norm3d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C, D, H, W]`` (``BatchNorm2d``'s code)."""
    return layers._batch_norm(node, children=children, parameters=parameters, dims=(5,))


class _TrailingFunction(_Function):
    """``layer_norm`` and ``rms_norm``: their module's kernel for the γ and β on the ports."""

    __slots__ = ("build",)

    def __init__(self, node: Node, settings: Settings, build: type[layers._LayerNorm] | type[layers._RMSNorm]) -> None:
        super().__init__(node, settings)
        self.build = build

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        weight, bias = self.optional(inputs, "weight"), self.optional(inputs, "bias")
        self.fit(matching_dtypes, x, weight=weight, bias=bias)
        shape = self.settings.integers("normalized_shape")
        self.fit(per_channel, "weight", _shape(weight), shape)
        self.fit(per_channel, "bias", _shape(bias), shape)
        eps = self.settings.optional_number("eps")
        return self.build(self.node, shape, eps, weight, bias)({"x": x})


@implements("layer_norm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    return _TrailingFunction(node, check_settings(node, parameters), layers._LayerNorm)


@implements("rms_norm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``."""
    return _TrailingFunction(node, check_settings(node, parameters), layers._RMSNorm)


class _GroupNormFunction(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        groups = self.settings.integer("num_groups")
        if x.ndim < 2 or x.shape[1] % groups:
            raise self.fail(f"x should be [N, C, *] with C divisible by num_groups = {groups}, got {list(x.shape)}")
        weight, bias = self.optional(inputs, "weight"), self.optional(inputs, "bias")
        self.fit(matching_dtypes, x, weight=weight, bias=bias)
        self.fit(per_channel, "weight", _shape(weight), x.shape[1:2])
        self.fit(per_channel, "bias", _shape(bias), x.shape[1:2])
        eps = self.settings.number("eps")
        return layers._GroupNorm(self.node, x.shape[1], groups, eps, weight, bias)({"x": x})


@implements("group_norm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization of each sample's groups of consecutive channels."""
    return _GroupNormFunction(node, check_settings(node, parameters))


# --- Embedding and dropout ------------------------------------------------------------------------


class _Embedding(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        index, table = np.asarray(inputs["input"]), np.asarray(inputs["weight"])
        if index.dtype.kind not in "iu":
            raise TypeError(f"{self.where}: input must be an integer array, got dtype {index.dtype}")
        if table.ndim != 2:
            raise self.fail(f"weight must be [num_embeddings, embedding_dim], got shape {list(table.shape)}")
        rows = table.shape[0]
        padding_idx = self.settings.optional_integer("padding_idx")
        if padding_idx is not None and not -rows <= padding_idx < rows:
            raise self.fail(f"padding_idx = {padding_idx} must lie in [{-rows}, {rows}) for weight of {rows} rows")
        if index.size and (index.min() < 0 or index.max() >= rows):  # numpy would wrap negative indices
            raise self.fail(f"indices must lie in [0, {rows}), got values from {index.min()} to {index.max()}")
        return {"y": table[index]}


@implements("embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = weight[input]``; the gradient-only slots are checked and otherwise ignored."""
    return _Embedding(node, check_settings(node, parameters))


@implements("dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The identity (the catalog's eval mode, whatever ``training`` says); ``p`` is checked."""
    check_settings(node, parameters)
    return layers._Pass(node)


# --- Weight reparametrization ---------------------------------------------------------------------


class _WeightNorm(_Function):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        v, g = self.floating(inputs, "v"), self.floating(inputs, "g")
        self.fit(matching_dtypes, v, named="v", g=g)
        axes = self.fit(weight_norm_axes, v.shape, g.shape, self.settings.integer("dim"))
        # 16-bit floats are summed in float32, as torch's kernels do; a zero norm gives NaN (0 · ∞),
        # which is the catalog's value, so numpy's warnings about it are silenced.
        wide = widened(v)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            norm = np.sqrt(np.sum(wide * wide, axis=axes, keepdims=True))
            y = wide * (widened(g) / norm)
        return {"y": rounded(y, v.dtype)}


@implements("weight_norm")
def weight_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``v · (g / ‖v‖)``, the 2-norm over every dimension but ``dim`` (all of them for −1)."""
    return _WeightNorm(node, check_settings(node, parameters))
