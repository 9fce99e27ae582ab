"""Lowerings of the sequence layers: ``MultiheadAttention``, ``TransformerEncoderLayer``, ``GRU`` and
``LSTM``.

The attention and the encoder layer are lowered as their math (``MatMul``, an explicit softmax,
``Where`` for bool masks), in the order of the numpy reference (:mod:`trama_numpy.sequence`): ``q``
scaled by ``1/√d`` before the product with ``k``, the merged masks added to the scores.

The recurrent layers are ONNX ``GRU`` and ``LSTM``, one node per layer (both directions in one
node), from ``h0``/``c0`` where they are wired and from zeros otherwise. ONNX orders the gates
otherwise than torch (GRU: ``z, r, h`` for torch's ``r, z, n``; LSTM: ``i, o, f, c`` for torch's
``i, f, g, o``), so the row blocks of each weight and bias are reordered in the graph; torch's GRU
applies ``r`` after the hidden projection, which is ONNX's ``linear_before_reset=1``. An LSTM with
``proj_size > 0`` has no ONNX op: its recurrence is unrolled over the time steps, which needs a
sequence length known when lowering.

Float16 and bfloat16 are computed in float32 and rounded once (the catalog allows it for these
stepped ops; a recurrent state is then not rounded between steps, within the stepped ops'
tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.format import Node, Parameter
from trama_onnx._common import compute_dtype, const_like, is_float
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []


def _ints(g: Emitter, values: Sequence[int]) -> str:
    return g.const(np.asarray(list(values), np.int64))


def _weight(g: Emitter, slot: str, work: str) -> str | None:
    """A tensor slot in the compute dtype, ``None`` where the slot holds none."""
    if not g.has_tensor(slot):
        return None
    return g.cast(g.tensor(slot), work, g.tensor_info(slot).dtype)


def _required(g: Emitter, slot: str, work: str) -> str:
    value = _weight(g, slot, work)
    if value is None:
        raise LoweringError(f"{g.node.op}: slot {slot!r} holds no tensor")
    return value


def _float_port(g: Emitter, inputs: Mapping[str, str], port: str) -> tuple[str, str, int]:
    info = g.input_info(port)
    dtype = info.dtype or "float32"
    if not is_float(dtype):
        raise LoweringError(f"{g.node.op}: {port} must be floating, got {dtype}")
    return inputs[port], dtype, info.rank


def _linear(g: Emitter, x: str, weight: str, bias: str | None) -> str:
    """``x · weightᵀ + bias`` over the last axis."""
    y = g.op1("MatMul", [x, g.op1("Transpose", [weight], {"perm": [1, 0]})])
    return y if bias is None else g.op1("Add", [y, bias])


def _thirds(g: Emitter, value: str, size: int, parts: int) -> list[str]:
    """``value`` split along axis 0 into ``parts`` blocks of ``size`` rows."""
    return g.op("Split", [value, _ints(g, [size] * parts)], {"axis": 0}, outputs=parts)


# --- Multi-head attention -------------------------------------------------------------------------


class _Attention:
    """One multi-head attention's weights (under ``prefix``), as the checked settings lay them out."""

    def __init__(self, settings: Any, *, prefix: str, embed: str, heads: str, options: bool) -> None:
        self.prefix = prefix
        self.embed = settings.integer(embed)
        self.heads = settings.integer(heads)
        self.packed = bool(settings.get("packed", True))
        self.add_zero_attn = bool(settings.get("add_zero_attn", False)) if options else False
        self.extra_keys = settings.integer("extra_keys")
        self.options = options

    def projections(self, g: Emitter, work: str) -> tuple[list[str], list[str | None]]:
        e, p = self.embed, self.prefix
        if self.packed:
            weights = _thirds(g, _required(g, f"{p}in_proj_weight", work), e, 3)
        else:
            weights = [_required(g, f"{p}{x}_proj_weight", work) for x in "qkv"]
        in_bias = _weight(g, f"{p}in_proj_bias", work)
        biases: list[str | None] = [None, None, None] if in_bias is None else list(_thirds(g, in_bias, e, 3))
        return weights, biases

    def mask(
        self,
        g: Emitter,
        inputs: Mapping[str, str],
        attn_port: str,
        padding_port: str,
        work: str,
        *,
        batched: bool,
    ) -> str | None:
        """The merged additive mask, broadcastable to ``[N, H, L, S + extra_keys]``."""
        merged: str | None = None
        if attn_port in inputs:
            mask = self._additive(g, inputs[attn_port], attn_port, work)
            rank = g.input_info(attn_port).rank
            if rank == 2:
                mask = g.op1("Unsqueeze", [mask, _ints(g, [0, 1])])
            elif rank == 3:
                shape = g.op1("Concat", [_ints(g, [-1, self.heads]), g.shape(mask, 1, 3)], {"axis": 0})
                mask = g.op1("Reshape", [mask, shape])
            else:
                raise LoweringError(f"{g.node.op}: {attn_port} must have 2 or 3 dimensions, got {rank}")
            merged = mask
        if padding_port in inputs:
            mask = self._additive(g, inputs[padding_port], padding_port, work)
            mask = g.op1("Unsqueeze", [mask, _ints(g, [1, 2] if batched else [0, 1, 2])])
            merged = mask if merged is None else g.op1("Add", [merged, mask])
        if merged is not None and self.extra_keys:
            merged = g.op1("Pad", [merged, _ints(g, [0, 0, 0, 0, 0, 0, 0, self.extra_keys])])
        return merged

    @staticmethod
    def _additive(g: Emitter, mask: str, port: str, work: str) -> str:
        dtype = g.input_info(port).dtype
        if dtype == "bool":
            return g.op1("Where", [mask, const_like(g, -np.inf, work), const_like(g, 0, work)])
        if is_float(dtype):
            return g.cast(mask, work, dtype)
        raise LoweringError(f"{g.node.op}: {port} must be bool or floating point, got {dtype}")

    def __call__(
        self, g: Emitter, query: str, key: str, value: str, mask: str | None, work: str, *, weights: bool
    ) -> tuple[str, str | None]:
        """Attention on batch-first ``[N, L, E]`` values in ``work``: ``y`` and, with ``weights``,
        the per-head weights ``[N, H, L, S′]``."""
        e, heads = self.embed, self.heads
        d = e // heads
        (w_q, w_k, w_v), (b_q, b_k, b_v) = self.projections(g, work)
        q, k, v = _linear(g, query, w_q, b_q), _linear(g, key, w_k, b_k), _linear(g, value, w_v, b_v)
        if self.options:
            bias_k, bias_v = _weight(g, "bias_k", work), _weight(g, "bias_v", work)
            if bias_k is not None and bias_v is not None:
                shape = g.op1("Concat", [g.shape(k, 0, 1), _ints(g, [1, e])], {"axis": 0})
                k = g.op1("Concat", [k, g.op1("Expand", [bias_k, shape])], {"axis": 1})
                v = g.op1("Concat", [v, g.op1("Expand", [bias_v, shape])], {"axis": 1})
        split = _ints(g, [0, -1, heads, d])
        q, k, v = (g.op1("Transpose", [g.op1("Reshape", [t, split])], {"perm": [0, 2, 1, 3]}) for t in (q, k, v))
        if self.add_zero_attn:
            shape = g.op1("Concat", [g.shape(k, 0, 2), _ints(g, [1, d])], {"axis": 0})
            zeros = g.op1("ConstantOfShape", [shape], {"value": _zero(work)})
            k = g.op1("Concat", [k, zeros], {"axis": 2})
            v = g.op1("Concat", [v, zeros], {"axis": 2})
        scaled = g.op1("Mul", [q, const_like(g, math.sqrt(1.0 / d), work)])
        s = g.op1("MatMul", [scaled, g.op1("Transpose", [k], {"perm": [0, 1, 3, 2]})])
        if mask is not None:
            s = g.op1("Add", [mask, s])
        # The softmax spelled out, as the reference computes it: a row masked everywhere is NaN.
        last = _ints(g, [-1])
        shifted = g.op1("Sub", [s, g.op1("ReduceMax", [s, last], {"keepdims": 1})])
        exp = g.op1("Exp", [shifted])
        a = g.op1("Div", [exp, g.op1("ReduceSum", [exp, last], {"keepdims": 1})])
        o = g.op1("Transpose", [g.op1("MatMul", [a, v])], {"perm": [0, 2, 1, 3]})
        o = g.op1("Reshape", [o, _ints(g, [0, 0, e])])
        y = _linear(
            g, o, _required(g, f"{self.prefix}out_proj_weight", work), _weight(g, f"{self.prefix}out_proj_bias", work)
        )
        return y, (a if weights else None)


def _zero(work: str) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros(1, np.dtype(work)))


def _to_batch_first(g: Emitter, x: str, rank: int, batch_first: bool) -> str:
    if rank == 2:
        return g.op1("Unsqueeze", [x, _ints(g, [0])])
    if rank != 3:
        raise LoweringError(f"{g.node.op}: expected 2 or 3 dimensions, got {rank}")
    return x if batch_first else g.op1("Transpose", [x], {"perm": [1, 0, 2]})


def _from_batch_first(g: Emitter, y: str, rank: int, batch_first: bool) -> str:
    if rank == 2:
        return g.op1("Squeeze", [y, _ints(g, [0])])
    return y if batch_first else g.op1("Transpose", [y], {"perm": [1, 0, 2]})


@lowers("MultiheadAttention")
def multihead_attention(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Steps 1–6 of the catalog, batch-first inside; ``attn_weights`` batch-first, averaged over the
    heads or not, absent without ``need_weights``."""
    settings = catalog_settings(node, parameters)
    attention = _Attention(settings, prefix="", embed="embed_dim", heads="num_heads", options=True)
    batch_first, need_weights = settings.flag("batch_first"), settings.flag("need_weights")
    average = settings.flag("average_attn_weights")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        _, dtype, rank = _float_port(g, inputs, "query")
        work = compute_dtype(dtype)
        values = []
        for port in ("query", "key", "value"):
            value, port_dtype, port_rank = _float_port(g, inputs, port)
            if port_rank != rank:
                raise LoweringError(f"MultiheadAttention: {port} has {port_rank} dimensions, query {rank}")
            values.append(_to_batch_first(g, g.cast(value, work, port_dtype), rank, batch_first))
        mask = attention.mask(g, inputs, "attn_mask", "key_padding_mask", work, batched=rank == 3)
        query, key, value = values
        y, a = attention(g, query, key, value, mask, work, weights=need_weights)
        result = {"y": g.cast(_from_batch_first(g, y, rank, batch_first), dtype, work)}
        if a is not None:
            if average:
                a = g.op1("ReduceMean", [a, _ints(g, [1])], {"keepdims": 0})
            if rank == 2:
                a = g.op1("Squeeze", [a, _ints(g, [0])])
            result["attn_weights"] = g.cast(a, dtype, work)
        return result

    return Lowering(node, parameters, emit)


# --- Transformer encoder layer --------------------------------------------------------------------


def _layer_norm(g: Emitter, x: str, weight: str, bias: str | None, eps: float, work: str) -> str:
    """``(x − μ) / √(σ² + eps) · weight + bias`` over the last axis, as the reference computes it."""
    last = _ints(g, [-1])
    centred = g.op1("Sub", [x, g.op1("ReduceMean", [x, last], {"keepdims": 1})])
    var = g.op1("ReduceMean", [g.op1("Mul", [centred, centred]), last], {"keepdims": 1})
    y = g.op1("Div", [centred, g.op1("Sqrt", [g.op1("Add", [var, const_like(g, eps, work)])])])
    y = g.op1("Mul", [y, weight])
    return y if bias is None else g.op1("Add", [y, bias])


@lowers("TransformerEncoderLayer")
def transformer_encoder_layer(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> Lowering:
    """Self-attention and the feed-forward network, each with its residual sum and layer norm,
    before (``norm_first``) or after each block."""
    settings = catalog_settings(node, parameters)
    attention = _Attention(settings, prefix="self_attn_", embed="d_model", heads="nhead", options=False)
    activation = settings.text("activation")
    eps = float(settings["layer_norm_eps"])
    batch_first, norm_first = settings.flag("batch_first"), settings.flag("norm_first")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        src, dtype, rank = _float_port(g, inputs, "src")
        work = compute_dtype(dtype)
        x = _to_batch_first(g, g.cast(src, work, dtype), rank, batch_first)
        mask = attention.mask(g, inputs, "src_mask", "src_key_padding_mask", work, batched=rank == 3)

        def norm(module: str, z: str) -> str:
            return _layer_norm(
                g, z, _required(g, f"{module}_weight", work), _weight(g, f"{module}_bias", work), eps, work
            )

        def feed_forward(z: str) -> str:
            hidden = _linear(g, z, _required(g, "linear1_weight", work), _weight(g, "linear1_bias", work))
            if activation == "relu":
                hidden = g.op1("Relu", [hidden])
            elif activation == "gelu":
                erf = g.op1("Erf", [g.op1("Mul", [hidden, const_like(g, 1 / math.sqrt(2.0), work)])])
                half = g.op1("Mul", [hidden, const_like(g, 0.5, work)])
                hidden = g.op1("Mul", [half, g.op1("Add", [erf, const_like(g, 1.0, work)])])
            else:
                raise LoweringError(f"TransformerEncoderLayer: activation {activation!r} is not relu or gelu")
            return _linear(g, hidden, _required(g, "linear2_weight", work), _weight(g, "linear2_bias", work))

        def self_attention(z: str) -> str:
            return attention(g, z, z, z, mask, work, weights=False)[0]

        if norm_first:
            h = g.op1("Add", [x, self_attention(norm("norm1", x))])
            y = g.op1("Add", [h, feed_forward(norm("norm2", h))])
        else:
            h = norm("norm1", g.op1("Add", [x, self_attention(x)]))
            y = norm("norm2", g.op1("Add", [h, feed_forward(h)]))
        return {"y": g.cast(_from_batch_first(g, y, rank, batch_first), dtype, work)}

    return Lowering(node, parameters, emit)


# --- Recurrent layers -----------------------------------------------------------------------------

#: Where each ONNX gate block comes from among torch's: GRU ``z, r, h`` from ``r, z, n``; LSTM
#: ``i, o, f, c`` from ``i, f, g, o``.
_GATE_ORDER = {"GRU": (1, 0, 2), "LSTM": (0, 3, 1, 2)}


def _reordered(g: Emitter, value: str, hidden: int, order: Sequence[int]) -> str:
    """A torch weight or bias with its gate blocks (``hidden`` rows each) in ONNX's order."""
    blocks = _thirds(g, value, hidden, len(order))
    return g.op1("Concat", [blocks[k] for k in order], {"axis": 0})


def _stacked(g: Emitter, values: Sequence[str]) -> str:
    """One value per direction stacked on a new axis 0."""
    parts = [g.op1("Unsqueeze", [value, _ints(g, [0])]) for value in values]
    return parts[0] if len(parts) == 1 else g.op1("Concat", parts, {"axis": 0})


def _states(g: Emitter, value: str, start: int, stop: int) -> str:
    """Rows ``start … stop − 1`` of a ``[D·num_layers, N, ·]`` state."""
    return g.op1("Slice", [value, _ints(g, [start]), _ints(g, [stop]), _ints(g, [0])])


@lowers("GRU", "LSTM")
def recurrent(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """One ONNX ``GRU``/``LSTM`` node per layer, both directions in it, the gate blocks reordered;
    an LSTM with ``proj_size > 0`` unrolled over the time steps (:func:`_projected_pass`)."""
    settings = catalog_settings(node, parameters)
    op = node.op
    hidden = settings.integer("hidden_size")
    layers = settings.integer("num_layers")
    directions = settings.integer("directions")
    batch_first = settings.flag("batch_first")
    projected = op == "LSTM" and settings.integer("proj_size") > 0
    order = _GATE_ORDER[op]
    suffixes = ("", "_reverse")[:directions]
    state_ports = ("h0", "c0") if op == "LSTM" else ("h0",)
    final_ports = ("h_n", "c_n") if op == "LSTM" else ("h_n",)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, dtype, rank = _float_port(g, inputs, "x")
        work = compute_dtype(dtype)
        wired = [port in inputs for port in state_ports]
        if any(wired) and not all(wired):
            raise LoweringError(f"{op} needs {' and '.join(state_ports)} together, or neither")
        x = g.cast(x, work, dtype)
        if rank == 2:
            x = g.op1("Unsqueeze", [x, _ints(g, [1])])  # [L, 1, in]
        elif rank == 3:
            x = g.op1("Transpose", [x], {"perm": [1, 0, 2]}) if batch_first else x
        else:
            raise LoweringError(f"{op}: x must have 2 or 3 dimensions, got {rank}")
        starts: list[str | None] = [None] * len(state_ports)
        if all(wired):
            starts = []
            for port in state_ports:
                value, port_dtype, _ = _float_port(g, inputs, port)
                value = g.cast(value, work, port_dtype)
                starts.append(g.op1("Unsqueeze", [value, _ints(g, [1])]) if rank == 2 else value)
        finals: list[list[str]] = [[] for _ in final_ports]
        for k in range(layers):
            begin, end = k * directions, (k + 1) * directions
            layer_starts = [None if start is None else _states(g, start, begin, end) for start in starts]
            if projected:
                x, ends = _projected_layer(g, x, k, suffixes, layer_starts, hidden, work)
            else:
                x, ends = _onnx_layer(g, op, x, k, suffixes, layer_starts, hidden, order, work)
            for collected, value in zip(finals, ends, strict=True):
                collected.append(value)
        y = x
        if rank == 2:
            y = g.op1("Squeeze", [y, _ints(g, [1])])
        elif batch_first:
            y = g.op1("Transpose", [y], {"perm": [1, 0, 2]})
        result = {"y": g.cast(y, dtype, work)}
        for port, values in zip(final_ports, finals, strict=True):
            value = values[0] if len(values) == 1 else g.op1("Concat", values, {"axis": 0})
            if rank == 2:
                value = g.op1("Squeeze", [value, _ints(g, [1])])
            result[port] = g.cast(value, dtype, work)
        return result

    return Lowering(node, parameters, emit)


def _onnx_layer(
    g: Emitter,
    op: str,
    x: str,
    k: int,
    suffixes: Sequence[str],
    starts: Sequence[str | None],
    hidden: int,
    order: Sequence[int],
    work: str,
) -> tuple[str, list[str]]:
    """Layer ``k`` as one ONNX ``GRU``/``LSTM`` node over ``x`` ``[L, N, in]``: its output
    ``[L, N, D·H]`` and final states ``[D, N, H]``."""
    w = _stacked(g, [_reordered(g, _required(g, f"weight_ih_l{k}{s}", work), hidden, order) for s in suffixes])
    r = _stacked(g, [_reordered(g, _required(g, f"weight_hh_l{k}{s}", work), hidden, order) for s in suffixes])
    biases: list[str] = []
    for s in suffixes:
        b_ih, b_hh = _weight(g, f"bias_ih_l{k}{s}", work), _weight(g, f"bias_hh_l{k}{s}", work)
        if b_ih is None and b_hh is None:
            continue
        gates = len(order) * hidden
        zeros = g.const(np.zeros(gates, np.dtype(work)))
        parts = [_reordered(g, b if b is not None else zeros, hidden, order) for b in (b_ih, b_hh)]
        biases.append(g.op1("Concat", parts, {"axis": 0}))
    if biases and len(biases) != len(suffixes):
        raise LoweringError(f"{op}: layer {k} has biases in one direction only")
    b = _stacked(g, biases) if biases else None
    attributes: dict[str, Any] = {
        "hidden_size": hidden,
        "direction": "bidirectional" if len(suffixes) == 2 else "forward",
    }
    if op == "GRU":
        attributes["linear_before_reset"] = 1
        y, h_n = g.op("GRU", [x, w, r, b, None, *starts], attributes, outputs=2)
        ends = [h_n]
    else:
        y, h_n, c_n = g.op("LSTM", [x, w, r, b, None, *starts], attributes, outputs=3)
        ends = [h_n, c_n]
    # Y is [L, D, N, H]: the directions side by side on the features, forward first.
    y = g.op1("Transpose", [y], {"perm": [0, 2, 1, 3]})
    return g.op1("Reshape", [y, _ints(g, [0, 0, -1])]), ends


def _projected_layer(
    g: Emitter,
    x: str,
    k: int,
    suffixes: Sequence[str],
    starts: Sequence[str | None],
    hidden: int,
    work: str,
) -> tuple[str, list[str]]:
    """Layer ``k`` of an LSTM with ``proj_size > 0``, unrolled: ``[L, N, D·H_out]`` and the final
    ``h`` ``[D, N, H_out]`` and ``c`` ``[D, N, H]``."""
    length = g.input_info("x").shape[1 if g.input_info("x").rank == 3 and g.setting("batch_first") else 0]
    if not isinstance(length, int):
        raise LoweringError("LSTM with proj_size > 0 is unrolled over the time steps, which needs a fixed length")
    outputs: list[str] = []
    finals_h: list[str] = []
    finals_c: list[str] = []
    for delta, suffix in enumerate(suffixes):
        w_ih = _required(g, f"weight_ih_l{k}{suffix}", work)
        w_hh = _required(g, f"weight_hh_l{k}{suffix}", work)
        w_hr = _required(g, f"weight_hr_l{k}{suffix}", work)
        b_ih, b_hh = _weight(g, f"bias_ih_l{k}{suffix}", work), _weight(g, f"bias_hh_l{k}{suffix}", work)
        gi = _linear(g, x, w_ih, b_ih)  # [L, N, 4H], every step's input projection at once
        h_start, c_start = starts
        if h_start is None or c_start is None:
            batch = g.shape(x, 1, 2)
            h_size = int(g.tensor_info(f"weight_hr_l{k}{suffix}").shape[0] or 0)  # a tensor's sizes are numbers
            h = g.op1(
                "ConstantOfShape", [g.op1("Concat", [batch, _ints(g, [h_size])], {"axis": 0})], {"value": _zero(work)}
            )
            c = g.op1(
                "ConstantOfShape", [g.op1("Concat", [batch, _ints(g, [hidden])], {"axis": 0})], {"value": _zero(work)}
            )
        else:
            index = _ints(g, [delta])
            h = g.op1("Squeeze", [g.op1("Gather", [h_start, index], {"axis": 0}), _ints(g, [0])])
            c = g.op1("Squeeze", [g.op1("Gather", [c_start, index], {"axis": 0}), _ints(g, [0])])
        steps: list[str] = [""] * length
        for t in reversed(range(length)) if suffix else range(length):
            at = g.op1("Gather", [gi, g.const(np.asarray(t, np.int64))], {"axis": 0})
            gates = g.op1("Add", [at, _linear(g, h, w_hh, b_hh)])
            g_i, g_f, g_g, g_o = g.op("Split", [gates, _ints(g, [hidden] * 4)], {"axis": -1}, outputs=4)
            c = g.op1(
                "Add",
                [
                    g.op1("Mul", [g.op1("Sigmoid", [g_f]), c]),
                    g.op1("Mul", [g.op1("Sigmoid", [g_i]), g.op1("Tanh", [g_g])]),
                ],
            )
            h = g.op1("Mul", [g.op1("Sigmoid", [g_o]), g.op1("Tanh", [c])])
            h = g.op1("MatMul", [h, g.op1("Transpose", [w_hr], {"perm": [1, 0]})])
            steps[t] = g.op1("Unsqueeze", [h, _ints(g, [0])])
        outputs.append(steps[0] if length == 1 else g.op1("Concat", steps, {"axis": 0}))
        finals_h.append(h)
        finals_c.append(c)
    y = outputs[0] if len(outputs) == 1 else g.op1("Concat", outputs, {"axis": -1})
    return y, [_stacked(g, finals_h), _stacked(g, finals_c)]
