"""Lowerings of the layers as functions (``linear``, ``bilinear``, ``addmm``, ``conv1d`` … ``conv3d``,
``conv_transpose1d``/``2d``, ``batch_norm``, ``layer_norm``, ``group_norm``, ``rms_norm``,
``embedding``, ``dropout``, ``weight_norm``).

Their weights are input ports, so the lowerings read them as values like ``x`` (never as tensors
of slots), and what they know of the weights' shapes comes from :meth:`Emitter.input_info`.
Float16 and bfloat16 are computed in float32 and rounded once (the catalog's rule), as for the
modules of :mod:`trama_onnx.ops_layers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.format import Node, Parameter
from trama_onnx._common import batched, const_like, is_float, unbatched
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings
from trama_onnx.ops_layers import _float_input

__all__: list[str] = []


def _port(g: Emitter, inputs: Mapping[str, str], port: str, work: str) -> str | None:
    """An optional floating port in the compute dtype, ``None`` when it is not connected."""
    if port not in inputs:
        return None
    info = g.input_info(port)
    dtype = info.dtype or "float32"
    if not is_float(dtype):
        raise LoweringError(f"{g.node.op}: {port} must be floating, got {dtype}")
    return g.cast(inputs[port], work, dtype)


def _required(g: Emitter, inputs: Mapping[str, str], port: str, work: str) -> str:
    value = _port(g, inputs, port, work)
    if value is None:
        raise LoweringError(f"{g.node.op}: input {port!r} is not connected")
    return value


def _axes(g: Emitter, axes: Sequence[int]) -> str:
    return g.const(np.asarray(list(axes), np.int64))


def _normalized(g: Emitter, x: str, axes: Sequence[int], eps: float, work: str) -> str:
    """``(x − μ) · (1 / √(σ² + eps))`` over ``axes`` (biased variance), the reference's order."""
    over = _axes(g, axes)
    mean = g.op1("ReduceMean", [x, over], {"keepdims": 1})
    centred = g.op1("Sub", [x, mean])
    var = g.op1("ReduceMean", [g.op1("Mul", [centred, centred]), over], {"keepdims": 1})
    root = g.op1("Sqrt", [g.op1("Add", [var, const_like(g, eps, work)])])
    return g.op1("Mul", [centred, g.op1("Reciprocal", [root])])


def _per_channel(g: Emitter, value: str, rank: int) -> str:
    """A ``[C]`` vector shaped to broadcast along dimension 1 of a rank-``rank`` tensor."""
    return g.op1("Reshape", [value, g.const(np.asarray([-1] + [1] * (rank - 2), np.int64))])


# --- Dense maps -----------------------------------------------------------------------------------


@lowers("linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · weightᵀ + bias``."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, _ = _float_input(g, inputs)
        weight = g.op1("Transpose", [_required(g, inputs, "weight", work)], {"perm": [1, 0]})
        y = g.op1("MatMul", [x, weight])
        bias = _port(g, inputs, "bias", work)
        if bias is not None:
            y = g.op1("Add", [y, bias])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``: ``input1`` times the weight
    (one product), then the sum over ``j`` with ``input2``."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x1, dtype, work, rank = _float_input(g, inputs, "input1")
        x2 = _required(g, inputs, "input2", work)
        weight = _required(g, inputs, "weight", work)
        # [O, I1, I2] -> [I1, O, I2]; input1 [*, I1] times it: [*, O, I2] (MatMul broadcasts).
        shape = g.input_info("weight").shape
        if len(shape) != 3 or not all(isinstance(size, int) for size in shape[:1] + shape[2:]):
            raise LoweringError(f"bilinear needs the weight's out and in2 sizes as numbers, got {shape}")
        out, in2 = int(shape[0]), int(shape[2])  # type: ignore[arg-type]
        flat = g.op1(
            "Reshape",
            [g.op1("Transpose", [weight], {"perm": [1, 0, 2]}), g.const(np.asarray([0, out * in2], np.int64))],
        )
        partial = g.op1("MatMul", [x1, flat])  # [*, O·I2]
        partial = g.op1("Reshape", [partial, g.const(np.asarray([0] * (rank - 1) + [out, in2], np.int64))])
        second = g.op1("Unsqueeze", [x2, _axes(g, [-2])])  # [*, 1, I2]
        y = g.op1("ReduceSum", [g.op1("Mul", [partial, second]), _axes(g, [-1])], {"keepdims": 0})
        bias = _port(g, inputs, "bias", work)
        if bias is not None:
            y = g.op1("Add", [y, bias])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("addmm")
def addmm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``beta · input + alpha · (mat1 @ mat2)``; with ``beta`` 0, ``input`` is not read at all."""
    settings = catalog_settings(node, parameters)
    beta, alpha = float(settings["beta"]), float(settings["alpha"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        mat1, dtype, work, _ = _float_input(g, inputs, "mat1")
        mat2 = _required(g, inputs, "mat2", work)
        y = g.op1("MatMul", [mat1, mat2])
        if alpha != 1:
            y = g.op1("Mul", [y, const_like(g, alpha, work)])
        if beta != 0:
            addend = _required(g, inputs, "input", work)
            if beta != 1:
                addend = g.op1("Mul", [addend, const_like(g, beta, work)])
            y = g.op1("Add", [y, addend])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


# --- Convolutions ---------------------------------------------------------------------------------


def _kernel(g: Emitter, spatial: int) -> list[int]:
    shape = g.input_info("weight").shape
    kernel = list(shape[2:])
    if len(kernel) != spatial or not all(isinstance(size, int) for size in kernel):
        raise LoweringError(f"{g.node.op}: the weight's kernel sizes must be numbers, got {list(shape)}")
    return [int(size) for size in kernel]  # type: ignore[arg-type]


@lowers("conv1d", "conv2d", "conv3d")
def convolution(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX ``Conv`` with the weights of the ports, ``"same"`` as its explicit amounts (computed
    from the weight's kernel sizes)."""
    settings = catalog_settings(node, parameters)
    spatial = int(node.op[4])
    stride, dilation = list(settings.integers("stride")), list(settings.integers("dilation"))
    groups = settings.integer("groups")
    padding = settings["padding"]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        x, added = batched(g, x, rank, spatial)
        if padding == "valid":
            pads = [0] * (2 * spatial)
        elif padding == "same":
            totals = [d * (k - 1) for k, d in zip(_kernel(g, spatial), dilation, strict=True)]
            pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
        else:
            amounts = [int(p) for p in padding]
            pads = amounts + amounts
        weight = _required(g, inputs, "weight", work)
        bias = _port(g, inputs, "bias", work)
        y = g.op1(
            "Conv",
            [x, weight, bias],
            {"strides": stride, "dilations": dilation, "pads": pads, "group": groups},
        )
        return {"y": g.cast(unbatched(g, y, added), dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("conv_transpose1d", "conv_transpose2d")
def conv_transpose(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX ``ConvTranspose``, whose weight layout ``[C_in, C_out / groups, *K]`` and output size
    are torch's.

    onnxruntime refuses an ``output_padding`` not below the stride ("may be too large for stride"),
    which torch allows when it is below the dilation. So ``output_padding`` is never given to it:
    the end padding shrinks by it instead (``padding − output_padding``, down to 0), and what is
    left of it (``output_padding − padding``, positions no input reaches) is appended as zeros,
    the bias added after, so that those positions hold the bias alone."""
    settings = catalog_settings(node, parameters)
    spatial = int(node.op[14])
    padding = list(settings.integers("padding"))
    extra = list(settings.integers("output_padding"))
    ends = [max(p - e, 0) for p, e in zip(padding, extra, strict=True)]
    appended = [max(e - p, 0) for p, e in zip(padding, extra, strict=True)]
    attributes = {
        "strides": list(settings.integers("stride")),
        "dilations": list(settings.integers("dilation")),
        "pads": padding + ends,
        "group": settings.integer("groups"),
    }

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        x, added = batched(g, x, rank, spatial)
        weight = _required(g, inputs, "weight", work)
        bias = _port(g, inputs, "bias", work)
        y = g.op1("ConvTranspose", [x, weight], attributes)
        if any(appended):
            amounts = g.const(np.asarray([0] * spatial + appended, np.int64))
            y = g.op1("Pad", [y, amounts, None, _axes(g, range(2, 2 + spatial))])
        if bias is not None:
            y = g.op1("Add", [y, _per_channel(g, bias, spatial + 2)])
        return {"y": g.cast(unbatched(g, y, added), dtype, work)}

    return Lowering(node, parameters, emit)


# --- Normalization --------------------------------------------------------------------------------


@lowers("batch_norm")
def batch_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """By the running statistics of the ports (``training`` false) or the batch's mean and biased
    variance over every dimension but the channel (``training`` true)."""
    settings = catalog_settings(node, parameters)
    training = settings.flag("training")
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        if rank < 2:
            raise LoweringError(f"batch_norm: x should be [N, C, *], got {rank} dimensions")
        if training:
            y = _normalized(g, x, [d for d in range(rank) if d != 1], eps, work)
        else:
            mean = _per_channel(g, _required(g, inputs, "running_mean", work), rank)
            var = _per_channel(g, _required(g, inputs, "running_var", work), rank)
            root = g.op1("Sqrt", [g.op1("Add", [var, const_like(g, eps, work)])])
            y = g.op1("Mul", [g.op1("Sub", [x, mean]), g.op1("Reciprocal", [root])])
        weight, bias = _port(g, inputs, "weight", work), _port(g, inputs, "bias", work)
        if weight is not None:
            y = g.op1("Mul", [y, _per_channel(g, weight, rank)])
        if bias is not None:
            y = g.op1("Add", [y, _per_channel(g, bias, rank)])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("layer_norm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The mean and biased variance over the last ``len(normalized_shape)`` dimensions, computed
    as the reference does (no ``LayerNormalization``, whose CPU kernel misses torch's numbers
    for some shapes: see ``ops_layers``)."""
    settings = catalog_settings(node, parameters)
    count = len(settings.integers("normalized_shape"))
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, _ = _float_input(g, inputs)
        y = _normalized(g, x, range(-count, 0), eps, work)
        weight, bias = _port(g, inputs, "weight", work), _port(g, inputs, "bias", work)
        if weight is not None:
            y = g.op1("Mul", [y, weight])
        if bias is not None:
            y = g.op1("Add", [y, bias])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("rms_norm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · (1 / √(mean(x²) + eps)) · weight``; a null ``eps`` is the compute dtype's epsilon."""
    settings = catalog_settings(node, parameters)
    count = len(settings.integers("normalized_shape"))
    eps = settings.optional_number("eps")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, _ = _float_input(g, inputs)
        epsilon = float(np.finfo(np.dtype(work)).eps) if eps is None else float(eps)
        square = g.op1("ReduceMean", [g.op1("Mul", [x, x]), _axes(g, range(-count, 0))], {"keepdims": 1})
        root = g.op1("Sqrt", [g.op1("Add", [square, const_like(g, epsilon, work)])])
        y = g.op1("Mul", [x, g.op1("Reciprocal", [root])])
        weight = _port(g, inputs, "weight", work)
        if weight is not None:
            y = g.op1("Mul", [y, weight])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("group_norm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Each sample's groups of consecutive channels normalized: ``x`` as ``[N, G, C/G · ∏*]``."""
    settings = catalog_settings(node, parameters)
    groups = settings.integer("num_groups")
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        if rank < 2:
            raise LoweringError(f"group_norm: x should be [N, C, *], got {rank} dimensions")
        grouped = g.op1("Reshape", [x, g.const(np.asarray([0, groups, -1], np.int64))])
        y = g.op1("Reshape", [_normalized(g, grouped, [-1], eps, work), g.shape(x)])
        weight, bias = _port(g, inputs, "weight", work), _port(g, inputs, "bias", work)
        if weight is not None:
            y = g.op1("Mul", [y, _per_channel(g, weight, rank)])
        if bias is not None:
            y = g.op1("Add", [y, _per_channel(g, bias, rank)])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


# --- Embedding, dropout, weight norm --------------------------------------------------------------


@lowers("embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``weight[input]`` (``Gather``); the gradient-only slots are checked and otherwise ignored."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        index = g.input_info("input").dtype
        if index not in ("int32", "int64"):
            raise LoweringError(f"embedding: input must be int32 or int64, got {index}")
        return {"y": g.op1("Gather", [inputs["weight"], inputs["input"]], {"axis": 0})}

    return Lowering(node, parameters, emit)


@lowers("dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The identity (the catalog's eval mode, whatever ``training`` says)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Identity", [inputs["x"]])}

    return Lowering(node, parameters, emit)


@lowers("weight_norm")
def weight_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``v · (g / ‖v‖)``, the 2-norm over every dimension but ``dim`` (all of them for −1)."""
    settings = catalog_settings(node, parameters)
    dim = settings.integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        v, dtype, work, rank = _float_input(g, inputs, "v")
        magnitude = _required(g, inputs, "g", work)
        if rank < 1:
            raise LoweringError("weight_norm: v must have at least one dimension")
        if dim == -1:
            axes = list(range(rank))
        elif -rank <= dim < rank:
            keep = dim % rank
            axes = [d for d in range(rank) if d != keep]
        else:
            raise LoweringError(f"weight_norm: dim {dim} is out of range for {rank} dimensions")
        square = g.op1("Mul", [v, v])
        # An empty axes list would make ReduceSum reduce everything: no dimension to sum is the
        # square itself.
        summed = g.op1("ReduceSum", [square, _axes(g, axes)], {"keepdims": 1}) if axes else square
        norm = g.op1("Sqrt", [summed])
        y = g.op1("Mul", [v, g.op1("Div", [magnitude, norm])])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)
