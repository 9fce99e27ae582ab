"""Lowerings of the layers: ``Linear``, ``Bilinear``, ``Conv1d``, ``Conv2d``, ``Conv3d``,
``ConvTranspose1d``, ``ConvTranspose2d``, ``BatchNorm1d``/``2d``/``3d``, ``LayerNorm``,
``GroupNorm``, ``RMSNorm``, ``Embedding``, ``Dropout``, ``Identity`` and ``Flatten``.

Float16 and bfloat16 inputs are computed in float32 and rounded once (the catalog's rule); the
weights are cast to the compute dtype inside the graph, so the initializers keep the document's
dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.format import Node, Parameter, numpy_dtype
from trama_onnx._common import batched, circular_pad, compute_dtype, const_like, is_float, unbatched
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []


def _weight(g: Emitter, slot: str, dtype: str) -> str:
    info = g.tensor_info(slot)
    return g.cast(g.tensor(slot), dtype, info.dtype)


def _optional_weight(g: Emitter, slot: str, dtype: str) -> str | None:
    return _weight(g, slot, dtype) if g.has_tensor(slot) else None


def _float_input(g: Emitter, inputs: Mapping[str, str], port: str = "x") -> tuple[str, str, str, int]:
    """The input, its dtype, the dtype it is computed in, and its rank."""
    info = g.input_info(port)
    dtype = info.dtype or "float32"
    if not is_float(dtype):
        raise LoweringError(f"{g.node.op} takes a floating x, got {dtype}")
    work = compute_dtype(dtype)
    return g.cast(inputs[port], work, dtype), dtype, work, info.rank


@lowers("Linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · weightᵀ + bias`` for ``x`` of any rank ≥ 1."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, _ = _float_input(g, inputs)
        weight = g.op1("Transpose", [_weight(g, "weight", work)], {"perm": [1, 0]})
        y = g.op1("MatMul", [x, weight])
        bias = _optional_weight(g, "bias", work)
        if bias is not None:
            y = g.op1("Add", [y, bias])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


def _padded(g: Emitter, x: str, pads: Sequence[tuple[int, int]], mode: str) -> str:
    """``x`` (batched, channels first) padded by ``pads`` per spatial dimension in ``mode``."""
    if mode == "circular":
        return circular_pad(g, x, pads, range(2, 2 + len(pads)))
    amounts = [before for before, _ in pads] + [after for _, after in pads]
    axes = list(range(2, 2 + len(pads)))
    onnx_mode = {"reflect": "reflect", "replicate": "edge"}[mode]
    return g.op1(
        "Pad",
        [x, g.const(np.asarray(amounts, np.int64)), None, g.const(np.asarray(axes, np.int64))],
        {"mode": onnx_mode},
    )


@lowers("Conv1d", "Conv2d", "Conv3d")
def convolution(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX ``Conv``, an unbatched input given a batch dimension, ``padding_mode`` other than zeros
    as an explicit ``Pad`` (circular as slices joined), ``"same"`` as its explicit amounts."""
    settings = catalog_settings(node, parameters)
    spatial = {"Conv1d": 1, "Conv2d": 2, "Conv3d": 3}[node.op]
    pads: tuple[tuple[int, int], ...] = settings["pads"]
    mode = settings.text("padding_mode")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        x, added = batched(g, x, rank, spatial)
        conv_pads = [before for before, _ in pads] + [after for _, after in pads]
        if mode != "zeros" and any(conv_pads):
            x = _padded(g, x, pads, mode)
            conv_pads = [0] * (2 * spatial)
        weight = _weight(g, "weight", work)
        bias = _optional_weight(g, "bias", work)
        y = g.op1(
            "Conv",
            [x, weight, bias],
            {
                "kernel_shape": list(settings.integers("kernel_size")),
                "strides": list(settings.integers("stride")),
                "dilations": list(settings.integers("dilation")),
                "pads": conv_pads,
                "group": settings.integer("groups"),
            },
        )
        return {"y": g.cast(unbatched(g, y, added), dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
def batch_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """With running statistics, ONNX ``BatchNormalization``; without, the batch's mean and biased
    variance over every dimension but the channel (1)."""
    settings = catalog_settings(node, parameters)
    channels = settings.integer("num_features")
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        weight = _optional_weight(g, "weight", work)
        bias = _optional_weight(g, "bias", work)
        if g.has_tensor("running_mean") and g.has_tensor("running_var"):
            scale = weight if weight is not None else g.const(np.ones(channels), work)
            shift = bias if bias is not None else g.const(np.zeros(channels), work)
            mean, var = _weight(g, "running_mean", work), _weight(g, "running_var", work)
            y = g.op1("BatchNormalization", [x, scale, shift, mean, var], {"epsilon": eps})
            return {"y": g.cast(y, dtype, work)}
        axes = g.const(np.asarray([d for d in range(rank) if d != 1], np.int64))
        mean = g.op1("ReduceMean", [x, axes], {"keepdims": 1})
        centred = g.op1("Sub", [x, mean])
        var = g.op1("ReduceMean", [g.op1("Mul", [centred, centred]), axes], {"keepdims": 1})
        y = g.op1("Div", [centred, g.op1("Sqrt", [g.op1("Add", [var, const_like(g, eps, work)])])])
        shape = g.const(np.asarray([channels] + [1] * (rank - 2), np.int64))
        if weight is not None:
            y = g.op1("Mul", [y, g.op1("Reshape", [weight, shape])])
        if bias is not None:
            y = g.op1("Add", [y, g.op1("Reshape", [bias, shape])])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("LayerNorm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX ``LayerNormalization`` over the last ``len(normalized_shape)`` dimensions."""
    settings = catalog_settings(node, parameters)
    normalized = list(settings.integers("normalized_shape"))
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, _ = _float_input(g, inputs)
        scale = _optional_weight(g, "weight", work)
        if scale is None:
            scale = g.const(np.ones(normalized), work)
        bias = _optional_weight(g, "bias", work)
        y = g.op1("LayerNormalization", [x, scale, bias], {"axis": -len(normalized), "epsilon": eps})
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("Bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``: ``input1`` times
    the weight as ``[in1, out · in2]`` (a ``MatMul``), then the product with ``input2`` summed over
    ``in2``, in the reference's order."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x1, dtype, work, rank = _float_input(g, inputs, "input1")
        x2, dtype2, _, rank2 = _float_input(g, inputs, "input2")
        if dtype2 != dtype or rank2 != rank:
            raise LoweringError(f"Bilinear: input1 ({dtype}, rank {rank}) and input2 ({dtype2}, rank {rank2}) differ")
        out, in1, in2 = g.tensor_info("weight").shape
        assert isinstance(out, int)
        assert isinstance(in1, int)
        assert isinstance(in2, int)
        weight = g.op1("Transpose", [_weight(g, "weight", work)], {"perm": [1, 0, 2]})
        weight = g.op1("Reshape", [weight, g.const(np.asarray([in1, out * in2], np.int64))])
        partial = g.op1("MatMul", [x1, weight])  # [*, out · in2]
        leading = g.shape(x1, 0, rank - 1)
        partial = g.op1(
            "Reshape", [partial, g.op1("Concat", [leading, g.const(np.asarray([out, in2], np.int64))], {"axis": 0})]
        )
        product = g.op1("Mul", [partial, g.op1("Unsqueeze", [x2, g.const(np.asarray([-2], np.int64))])])
        y = g.op1("ReduceSum", [product, g.const(np.asarray([-1], np.int64))], {"keepdims": 0})
        bias = _optional_weight(g, "bias", work)
        if bias is not None:
            y = g.op1("Add", [y, bias])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("ConvTranspose1d", "ConvTranspose2d")
def conv_transpose(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX ``ConvTranspose`` (the same weight layout, ``[C_in, C_out / groups, *K]``), an unbatched
    input given a batch dimension. onnxruntime refuses an ``output_padding`` as large as the
    stride, which the catalog allows where the dilation is larger; so ``output_padding`` is never
    passed: it is taken off the end padding (``pads`` end ``padding − output_padding``), and
    where that would be negative the end is cropped by nothing and padded with zeros instead,
    positions no input element reaches (they then hold the bias alone, added after)."""
    settings = catalog_settings(node, parameters)
    spatial = 1 if node.op == "ConvTranspose1d" else 2
    padding = list(settings.integers("padding"))
    extra = list(settings.integers("output_padding"))
    ends = [max(p - e, 0) for p, e in zip(padding, extra, strict=True)]
    grown = [max(e - p, 0) for p, e in zip(padding, extra, strict=True)]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        x, added = batched(g, x, rank, spatial)
        weight = _weight(g, "weight", work)
        bias = _optional_weight(g, "bias", work)
        y = g.op1(
            "ConvTranspose",
            [x, weight, None if any(grown) else bias],
            {
                "kernel_shape": list(settings.integers("kernel_size")),
                "strides": list(settings.integers("stride")),
                "dilations": list(settings.integers("dilation")),
                "pads": padding + ends,
                "group": settings.integer("groups"),
            },
        )
        if any(grown):
            amounts = [0] * (2 + spatial) + [0, 0, *grown]
            y = g.op1("Pad", [y, g.const(np.asarray(amounts, np.int64))])
            if bias is not None:
                y = g.op1("Add", [y, g.op1("Reshape", [bias, g.const(np.asarray([-1] + [1] * spatial, np.int64))])])
        return {"y": g.cast(unbatched(g, y, added), dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("GroupNorm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x`` as ``[N, G, rest]``, each row normalized by its mean and biased variance, then the
    per-channel affine map (ONNX ``GroupNormalization`` has per-group scales in opset 18)."""
    settings = catalog_settings(node, parameters)
    channels, groups = settings.integer("num_channels"), settings.integer("num_groups")
    eps = float(settings["eps"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        if rank < 2:
            raise LoweringError(f"GroupNorm: x should be [N, {channels}, *], got {rank} dimensions")
        grouped = g.op1("Reshape", [x, g.const(np.asarray([0, groups, -1], np.int64))])
        last = g.const(np.asarray([-1], np.int64))
        mean = g.op1("ReduceMean", [grouped, last], {"keepdims": 1})
        centred = g.op1("Sub", [grouped, mean])
        var = g.op1("ReduceMean", [g.op1("Mul", [centred, centred]), last], {"keepdims": 1})
        scale = g.op1("Reciprocal", [g.op1("Sqrt", [g.op1("Add", [var, const_like(g, eps, work)])])])
        y = g.op1("Reshape", [g.op1("Mul", [centred, scale]), g.shape(x)])
        shape = g.const(np.asarray([channels] + [1] * (rank - 2), np.int64))
        weight = _optional_weight(g, "weight", work)
        if weight is not None:
            y = g.op1("Mul", [y, g.op1("Reshape", [weight, shape])])
        bias = _optional_weight(g, "bias", work)
        if bias is not None:
            y = g.op1("Add", [y, g.op1("Reshape", [bias, shape])])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("RMSNorm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · 1/√(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``; ``eps`` null is
    the machine epsilon of the compute dtype."""
    settings = catalog_settings(node, parameters)
    normalized = list(settings.integers("normalized_shape"))
    eps = settings.optional_number("eps")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, work, rank = _float_input(g, inputs)
        if rank < len(normalized):
            raise LoweringError(f"RMSNorm: x of rank {rank} does not end in normalized_shape {normalized}")
        epsilon = float(np.finfo(numpy_dtype(work)).eps) if eps is None else float(eps)
        axes = g.const(np.asarray(range(rank - len(normalized), rank), np.int64))
        mean_square = g.op1("ReduceMean", [g.op1("Mul", [x, x]), axes], {"keepdims": 1})
        scale = g.op1("Reciprocal", [g.op1("Sqrt", [g.op1("Add", [mean_square, const_like(g, epsilon, work)])])])
        y = g.op1("Mul", [x, scale])
        weight = _optional_weight(g, "weight", work)
        if weight is not None:
            y = g.op1("Mul", [y, weight])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("Embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``weight[x]`` (``Gather``); with ``max_norm``, each looked-up row whose norm exceeds it scaled
    by ``max_norm / (norm + 1e-7)``."""
    settings = catalog_settings(node, parameters)
    max_norm = settings.optional_number("max_norm")
    norm_type = float(settings["norm_type"])

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.tensor_info("weight")
        dtype = info.dtype or "float32"
        rows = g.op1("Gather", [g.tensor("weight"), inputs["x"]], {"axis": 0})
        if max_norm is None:
            return {"y": rows}
        work = compute_dtype(dtype)
        values = g.cast(rows, work, dtype)
        last = g.const(np.asarray([-1], np.int64))
        if norm_type == 2.0:
            norm = g.op1("ReduceL2", [values, last], {"keepdims": 1})
        elif norm_type == 1.0:
            norm = g.op1("ReduceL1", [values, last], {"keepdims": 1})
        else:
            powered = g.op1("Pow", [g.op1("Abs", [values]), const_like(g, norm_type, work)])
            summed = g.op1("ReduceSum", [powered, last], {"keepdims": 1})
            norm = g.op1("Pow", [summed, const_like(g, 1.0 / norm_type, work)])
        limit = const_like(g, max_norm, work)
        scale = g.op1("Div", [limit, g.op1("Add", [norm, const_like(g, 1e-7, work)])])
        scale = g.op1("Where", [g.op1("Greater", [norm, limit]), scale, const_like(g, 1, work)])
        return {"y": g.cast(g.op1("Mul", [values, scale]), dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("Dropout", "Identity")
def identity(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The identity (``Dropout`` in eval mode)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Identity", [inputs["x"]])}

    return Lowering(node, parameters, emit)


@lowers("Flatten")
def flatten_module(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Dimensions ``start_dim`` … ``end_dim`` merged (start 1 by default)."""
    from trama_onnx.ops_arrays import flattened

    settings = catalog_settings(node, parameters)
    start, end = settings.integer("start_dim"), settings.integer("end_dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": flattened(g, inputs["x"], g.input_info("x").rank, start, end)}

    return Lowering(node, parameters, emit)
