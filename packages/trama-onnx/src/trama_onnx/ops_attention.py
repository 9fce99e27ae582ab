"""Lowering of ``scaled_dot_product_attention`` (opset 18 has no ``Attention`` op: it is written with
``MatMul``, ``Softmax`` and ``Where``).

The catalog's steps, in order: grouped heads (``enable_gqa``: key and value heads repeated as
torch's ``repeat_interleave`` does, an ``Expand`` of an inserted axis and a ``Reshape``), the scores
``query · keyᵀ · scale``, the causal mask (top-left aligned, ``i ≥ j`` from two ``Range``s) or
``attn_mask`` (a bool one as ``0``/``−inf`` addends, a float one added as it is), a softmax whose
rows without any key give weights of 0 (torch's ``_safe_softmax``; ONNX's ``Softmax`` gives NaN
there, so such rows are selected away), and the weighted sum of the values. float16 and bfloat16
are computed in float32 and rounded once.

The scale multiplies the query before the product rather than the scores after it: with ``E = 0``
the scores are 0 whatever the scale (the default ``1/√0`` is infinite), which the product of an
empty query gives, and otherwise the two agree to rounding.

Empty sizes (L, S or the value's elements 0) make torch return zeros of shape
``[*query's batch dimensions, L, Ev]`` before computing anything. Where the input shapes say
so, the lowering returns exactly that; where the sizes are symbolic, the ordinary computation
gives zeros too, and the lowering checks that the key's and value's batch dimensions cannot
change the shape (else it refuses the node rather than risk a wrong shape).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from onnx import numpy_helper

from trama.format import Node, Parameter
from trama_onnx._common import compute_dtype, const_like, is_float
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, ValueInfo, catalog_settings

__all__: list[str] = []


def _ints(g: Emitter, values: list[int]) -> str:
    return g.const(np.asarray(values, np.int64))


def _empty(info: ValueInfo, axes: range | list[int]) -> bool | None:
    """Whether one of ``axes`` of the value is 0: ``None`` where a size is unknown."""
    sizes = [info.shape[a] for a in axes]
    if any(size == 0 for size in sizes):
        return True
    if all(isinstance(size, int) for size in sizes):
        return False
    return None


def _contained(query: ValueInfo, other: ValueInfo, gqa: bool) -> bool:
    """Whether ``other``'s batch dimensions surely broadcast into the query's without changing them
    (with ``gqa``, its heads become the query's)."""
    q_batch, o_batch = query.shape[:-2], other.shape[:-2]
    if len(o_batch) > len(q_batch):
        return False
    if gqa:
        q_batch, o_batch = q_batch[:-1], o_batch[:-1]
    for mine, theirs in zip(reversed(q_batch), reversed(o_batch), strict=False):
        if theirs == 1 or (theirs is not None and theirs == mine):
            continue
        return False
    return True


def _grouped(g: Emitter, x: str, rank: int, query: str) -> str:
    """``x``'s heads (dimension −3) repeated to the query's, each serving a run of consecutive query
    heads (torch's ``repeat_interleave``): ``[…, H, S, E]`` → ``[…, H, r, S, E]`` → ``[…, Hq, S, E]``."""
    heads = g.shape(query, -3, -2)
    own = g.shape(x, -3, -2)
    repeats = g.op1("Div", [heads, own])
    target = g.op1("Concat", [_ints(g, [1] * (rank - 2)), repeats, _ints(g, [1, 1])], {"axis": 0})
    spread = g.op1("Expand", [g.op1("Unsqueeze", [x, _ints(g, [rank - 2])]), target])
    shape = g.op1("Concat", [g.shape(x, 0, rank - 3), heads, g.shape(x, rank - 2, rank)], {"axis": 0})
    return g.op1("Reshape", [spread, shape], {"allowzero": 1})


def _matmul(g: Emitter, a: str, b: str, inner: str, size: int | str | None, work: str) -> str:
    """``a · b``, where the contracted size may be 0: onnxruntime's ``MatMul`` leaves its result
    uninitialized for an empty contraction (1.31, CPU: garbage where the empty sum is 0), so where
    ``size`` is not known to be positive the result is 0 wherever the size, read from ``inner``'s
    last dimension, is 0. (Padding both operands with a zero instead trips onnxruntime's graph
    optimizer on ``Pad`` with ``axes``: "indices element out of data bounds" from a ``Gather`` it
    inserts.)"""
    product = g.op1("MatMul", [a, b])
    if isinstance(size, int) and size > 0:
        return product
    empty = g.op1("Equal", [g.shape(inner, -1), _ints(g, [0])])
    return g.op1("Where", [empty, const_like(g, 0, work), product])


@lowers("scaled_dot_product_attention")
def scaled_dot_product_attention(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> Lowering:
    """``softmax(q · kᵀ · scale + mask) · v``, rows without any key giving 0."""
    settings = catalog_settings(node, parameters)
    causal, gqa = settings.flag("is_causal"), settings.flag("enable_gqa")
    scale_setting = settings.optional_number("scale")
    if settings.number("dropout_p") != 0:
        raise LoweringError("scaled_dot_product_attention: dropout_p must be 0", node_id=node.id)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        infos = {port: g.input_info(port) for port in ("query", "key", "value")}
        q_info, k_info, v_info = infos["query"], infos["key"], infos["value"]
        for port, info in infos.items():
            if not is_float(info.dtype):
                raise LoweringError(f"{g.node.op}: {port} must be a floating-point tensor, got dtype {info.dtype}")
            if info.rank < 2:
                raise LoweringError(f"{g.node.op}: {port} must have at least two dimensions")
            if gqa and info.rank < 3:
                raise LoweringError(f"{g.node.op}: with enable_gqa, {port} must have at least three dimensions")
        dtype = q_info.dtype
        assert dtype is not None
        if k_info.dtype != dtype or v_info.dtype != dtype:
            raise LoweringError(f"{g.node.op}: query, key and value must have one dtype")
        mask_info = g.input_info("attn_mask") if "attn_mask" in inputs else None
        if mask_info is not None:
            if mask_info.dtype not in ("bool", dtype):
                raise LoweringError(f"{g.node.op}: attn_mask must be bool or of the query's dtype {dtype}")
            if mask_info.rank < 2:
                raise LoweringError(f"{g.node.op}: attn_mask must have at least two dimensions")
            if causal:
                raise LoweringError(f"{g.node.op}: is_causal with an attn_mask is refused, as torch refuses it")
        work = compute_dtype(dtype)
        q, k, v = (g.cast(inputs[port], work, dtype) for port in ("query", "key", "value"))

        empty = [
            _empty(q_info, [q_info.rank - 2]),
            _empty(k_info, [k_info.rank - 2]),
            _empty(v_info, range(v_info.rank)),
        ]
        if any(flag is True for flag in empty):  # torch's early return: zeros [*query's batch, L, Ev]
            shape = g.op1("Concat", [g.shape(q, 0, q_info.rank - 1), g.shape(v, v_info.rank - 1)], {"axis": 0})
            zeros = g.op1("ConstantOfShape", [shape], {"value": numpy_helper.from_array(np.zeros(1, np.float32))})
            return {"y": g.cast(zeros, dtype, "float32")}
        if any(flag is None for flag in empty) and not (
            _contained(q_info, k_info, gqa) and _contained(q_info, v_info, gqa)
        ):
            raise LoweringError(
                f"{g.node.op}: the sizes of query, key and value are not all known, and with empty ones the "
                "result's batch dimensions are the query's alone, which this lowering can give only where the key's "
                "and value's batch dimensions are known to broadcast into the query's"
            )

        if gqa:
            k = _grouped(g, k, k_info.rank, q)
            v = _grouped(g, v, v_info.rank, q)

        width = q_info.shape[-1]
        if scale_setting is not None:
            q = g.op1("Mul", [q, const_like(g, scale_setting, work)])
        elif isinstance(width, int):
            if width:
                q = g.op1("Mul", [q, const_like(g, 1 / math.sqrt(width), work)])
        else:
            e = g.cast(g.shape(q, q_info.rank - 1), work, "int64")
            q = g.op1("Mul", [q, g.op1("Reciprocal", [g.op1("Sqrt", [e])])])
        perm = [*range(k_info.rank - 2), k_info.rank - 1, k_info.rank - 2]
        k_t = g.op1("Transpose", [k], {"perm": perm})
        scores = _matmul(g, q, k_t, q, width, work)

        minus_inf = const_like(g, -np.inf, work)
        if causal:
            zero, one = _ints(g, [0]), _ints(g, [1])
            length = g.op1("Squeeze", [g.shape(q, q_info.rank - 2, q_info.rank - 1)])
            source = g.op1("Squeeze", [g.shape(k, k_info.rank - 2, k_info.rank - 1)])
            rows = g.op1(
                "Unsqueeze", [g.op1("Range", [const_like(g, 0, "int64"), length, const_like(g, 1, "int64")]), one]
            )
            columns = g.op1(
                "Unsqueeze", [g.op1("Range", [const_like(g, 0, "int64"), source, const_like(g, 1, "int64")]), zero]
            )
            scores = g.op1("Where", [g.op1("GreaterOrEqual", [rows, columns]), scores, minus_inf])
        if mask_info is not None:
            mask = inputs["attn_mask"]
            if mask_info.dtype == "bool":
                addend = g.op1("Where", [mask, const_like(g, 0, work), minus_inf])
            else:
                addend = g.cast(mask, work, mask_info.dtype)
            scores = g.op1("Add", [scores, addend])

        # torch's _safe_softmax: a row whose every score is −inf gives weights of 0 (ONNX's Softmax
        # gives NaN there). Counting the scores that are not −inf also counts NaN ones, so a NaN
        # row stays NaN.
        kept = g.cast(g.op1("Not", [g.op1("Equal", [scores, minus_inf])]), work, "bool")
        count = g.op1("ReduceSum", [kept, _ints(g, [-1])], {"keepdims": 1})
        excluded = g.op1("Equal", [count, const_like(g, 0, work)])
        weights = g.op1("Softmax", [scores], {"axis": -1})
        weights = g.op1("Where", [excluded, const_like(g, 0, work), weights])
        y = _matmul(g, weights, v, weights, k_info.shape[-2], work)
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)
