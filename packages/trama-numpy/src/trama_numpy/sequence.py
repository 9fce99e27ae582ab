"""numpy kernels of the sequence ops: ``MultiheadAttention``, ``TransformerEncoderLayer``, ``GRU``, ``LSTM``.

These are the reference the other frameworks are tested against, so each kernel codes the formulas
of ``docs/ops.md`` as they are written, in the input's dtype, and vectorised where the formula
allows: over the batch, the heads and the gates, and over all time steps for a recurrent layer's
input projection. Only the recurrence itself loops in Python, one step at a time, because step t
needs the state of step t − 1.

Two deliberate choices follow torch's arithmetic order rather than the letter of the formula,
because they change rounding only and keep the reference closest to the exporter it checks:

* attention scales ``q`` by ``1/√d`` before the product with ``k`` (torch's ``q_scaled``), and
  adds the merged masks before the scores (torch's ``baddbmm``);
* the recurrent layers add ``b_ih`` to the input projection of all steps and ``b_hh`` to the
  hidden projection of each step, as torch's cells do.

Precision is the input's (float32 in, float32 arithmetic), because a reference that silently
computed in float64 would hide the rounding that every float32 framework has, and because carrying
a recurrent state across calls in the output dtype is what makes chunked streaming exact. The one
exception is the exact GELU, whose ``erf`` numpy lacks: it is evaluated in float64 by ``math.erf``
and rounded once. float16 and bfloat16 follow the catalog's half-precision rule
(:mod:`trama_numpy._precision`): the layer computes in float32 and rounds its outputs once, and a
recurrent layer rounds its state to the input's dtype after every step, as torch's state tensor
is rounded, so that streaming in chunks stays exact.

``TransformerEncoder`` is a composite: runtimes execute its wiring, so it has no kernel here.

Errors: a node whose slots contradict its settings (``num_layers=2`` without ``weight_ih_l1``, a
bias slot while ``bias`` is false) raises :class:`trama.RegistryError` before the kernel is built,
the class for "a node does not match its op's specification": the core checks that
(:func:`trama.catalog.check_settings`) for every framework, and these factories build from the
settings it returns. A request the kernel cannot honour
at run time (streaming a bidirectional layer, a carried state of the wrong batch size, a mask of
an unsupported dtype) raises :class:`trama.ImportModelError`, the class for "a validated document
could not be turned into working runtime objects": the document is valid, this use of it is not.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import trama
from trama.catalog import Settings, check_settings, merged_attention_mask, stacked_layers
from trama_numpy._precision import HALF, compute_dtype, parameter_like, rounded
from trama_numpy._registry import implements, optional_array, required_array

__all__ = [
    "GRUKernel",
    "LSTMKernel",
    "MultiheadAttentionKernel",
    "TransformerEncoderLayerKernel",
    "gru",
    "lstm",
    "multihead_attention",
    "transformer_encoder_layer",
]

Array = npt.NDArray[Any]
Parameters = Mapping[str, trama.Parameter]


# --------------------------------------------------------------------------------------------
# Small numeric helpers
# --------------------------------------------------------------------------------------------


def _linear(x: Array, weight: Array, bias: Array | None) -> Array:
    """``x · weightᵀ + bias`` over the last axis (torch's layout: weight is ``[out, in]``)."""
    y = x @ weight.T
    return y if bias is None else y + bias


def _sigmoid(x: Array) -> Array:
    """The logistic function without overflow: ``exp`` only ever sees ``−|x|``."""
    e = np.exp(-np.abs(x))
    result: Array = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
    return result


def _softmax(s: Array) -> Array:
    """Softmax over the last axis. A row that is −∞ everywhere (every key masked) becomes NaN,
    as in torch; numpy's warning about it is silenced because that NaN is the specified value."""
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        result: Array = e / e.sum(axis=-1, keepdims=True)
    return result


def _layer_norm(x: Array, weight: Array, bias: Array | None, eps: float) -> Array:
    """Layer norm over the last axis with the biased variance, as ``torch.nn.LayerNorm``."""
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    y: Array = centred / np.sqrt(var + eps) * weight
    return y if bias is None else y + bias


_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: Array) -> Array:
    """The exact GELU ``x · Φ(x) = x/2 · (1 + erf(x/√2))``, evaluated in float64 and rounded once
    to ``x``'s dtype (numpy has no ``erf``; ``math.erf`` is correctly rounded in practice)."""
    wide = x.astype(np.float64)
    erf = np.asarray(_ERF(wide / math.sqrt(2.0)), dtype=np.float64)
    result: Array = (0.5 * wide * (1.0 + erf)).astype(x.dtype)
    return result


def _relu(x: Array) -> Array:
    return np.maximum(x, 0)


def _in_dtype(value: Array | None, dtype: np.dtype[Any]) -> Any:
    """An input or weight as the layer computes with it, for results of ``dtype``: rounded to
    ``dtype``, and in float32 when that is a 16-bit float (no copy where nothing changes)."""
    return None if value is None else parameter_like(np.asarray(value), dtype)


def _widened_mask(mask: Any) -> Any:
    """A float mask of a 16-bit dtype widened to float32 (exact), any other value as it is."""
    array = None if mask is None else np.asarray(mask)
    return array.astype(np.float32) if array is not None and array.dtype in HALF else mask


# --------------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Attention:
    """The bound weights of one multi-head attention, shared by the attention and encoder kernels."""

    node_id: str
    num_heads: int
    w_q: Array
    w_k: Array
    w_v: Array
    b_q: Array | None
    b_k: Array | None
    b_v: Array | None
    w_out: Array
    b_out: Array | None
    bias_k: Array | None  # [E], appended as one more key position (step 2)
    bias_v: Array | None
    add_zero_attn: bool
    #: Key positions appended after the real ones (steps 2 and 4): the masks gain as many
    #: "not masked" columns.
    extra_keys: int

    def for_dtype(self, dtype: np.dtype[Any]) -> _Attention:
        """These weights as a layer computing results of ``dtype`` uses them (:func:`_in_dtype`):
        itself when nothing changes (float32 weights for a float32 input)."""
        names = ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "w_out", "b_out", "bias_k", "bias_v")
        cast = {name: _in_dtype(getattr(self, name), dtype) for name in names}
        if all(cast[name] is getattr(self, name) for name in names):
            return self
        return dataclasses.replace(self, **cast)

    def __call__(
        self, query: Array, key: Array, value: Array, mask: Array | None, *, need_weights: bool, average: bool
    ) -> tuple[Array, Array | None]:
        """Attention on batch-first ``[N, L, E]``, ``[N, S, kdim]``, ``[N, S, vdim]``.

        ``mask`` is the merged additive mask, broadcastable to ``[N, H, L, S + extra_keys]``.
        Returns ``y`` ``[N, L, E]`` and the weights (``[N, L, S']`` averaged, ``[N, H, L, S']``
        otherwise, ``None`` unless ``need_weights``).
        """
        n, length, embed = query.shape
        heads = self.num_heads
        d = embed // heads
        # 1. Projections.
        q = _linear(query, self.w_q, self.b_q)
        k = _linear(key, self.w_k, self.b_k)
        v = _linear(value, self.w_v, self.b_v)
        # 2. bias_k / bias_v as one more key position.
        if self.bias_k is not None and self.bias_v is not None:
            k = np.concatenate([k, np.broadcast_to(self.bias_k, (n, 1, embed)).astype(k.dtype)], axis=1)
            v = np.concatenate([v, np.broadcast_to(self.bias_v, (n, 1, embed)).astype(v.dtype)], axis=1)
        # 3. Heads: [N, S, E] -> [N, H, S, d], head h holding features h·d … h·d + d − 1.
        q = q.reshape(n, length, heads, d).transpose(0, 2, 1, 3)
        k = k.reshape(n, k.shape[1], heads, d).transpose(0, 2, 1, 3)
        v = v.reshape(n, v.shape[1], heads, d).transpose(0, 2, 1, 3)
        # 4. A zero key and value in every head.
        if self.add_zero_attn:
            k = np.concatenate([k, np.zeros((n, heads, 1, d), k.dtype)], axis=2)
            v = np.concatenate([v, np.zeros((n, heads, 1, d), v.dtype)], axis=2)
        # 5. Scores, with q scaled first as torch does (same value, torch's rounding).
        q_scaled = q * math.sqrt(1.0 / d)
        s = q_scaled @ k.transpose(0, 1, 3, 2)
        if mask is not None:
            s = mask + s
        # 6. Softmax over the keys, weighted values, heads concatenated back, output projection.
        a = _softmax(s)
        o = (a @ v).transpose(0, 2, 1, 3).reshape(n, length, embed)
        y = _linear(o, self.w_out, self.b_out)
        if not need_weights:
            return y, None
        return y, (a.mean(axis=1) if average else a)

    def merged_mask(
        self, attn_mask: Any, key_padding_mask: Any, *, n: int, length: int, source: int, dtype: Any, batched: bool
    ) -> Array | None:
        """Both masks as one additive mask broadcastable to ``[N, H, L, S + extra_keys]``, by the
        catalog's rules (:func:`trama.catalog.merged_attention_mask`); a mask that does not fit
        is an ImportModelError (the document is valid, this use of it is not)."""
        try:
            scores = (n, self.num_heads, length, source)
            merged: Array | None = merged_attention_mask(
                np, attn_mask, key_padding_mask, scores, dtype, batched=batched, extra_keys=self.extra_keys
            )
        except ValueError as error:
            raise trama.ImportModelError(str(error), node_id=self.node_id) from None
        return merged


def _bind_attention(parameters: Parameters, settings: Settings, *, prefix: str, embed: str, heads: str) -> _Attention:
    """The attention's weights (under ``prefix``: ``self_attn_`` inside an encoder layer, whose
    attention has no options and whose ``embed``/``heads`` settings are ``d_model``/``nhead``),
    as the checked ``settings`` say they are laid out."""
    e = settings.integer(embed)
    if settings.get("packed", True):
        packed = required_array(parameters, f"{prefix}in_proj_weight")
        w_q, w_k, w_v = packed[:e], packed[e : 2 * e], packed[2 * e :]
    else:
        w_q, w_k, w_v = (required_array(parameters, f"{prefix}{x}_proj_weight") for x in "qkv")
    in_bias = optional_array(parameters, f"{prefix}in_proj_bias")
    b_q, b_k, b_v = (None, None, None) if in_bias is None else (in_bias[:e], in_bias[e : 2 * e], in_bias[2 * e :])
    bias_k = optional_array(parameters, f"{prefix}bias_k")
    bias_v = optional_array(parameters, f"{prefix}bias_v")
    return _Attention(
        node_id=settings.node_id,
        num_heads=settings.integer(heads),
        w_q=w_q,
        w_k=w_k,
        w_v=w_v,
        b_q=b_q,
        b_k=b_k,
        b_v=b_v,
        w_out=required_array(parameters, f"{prefix}out_proj_weight"),
        b_out=optional_array(parameters, f"{prefix}out_proj_bias"),
        bias_k=None if bias_k is None else bias_k.reshape(e),
        bias_v=None if bias_v is None else bias_v.reshape(e),
        add_zero_attn=bool(settings.get("add_zero_attn", False)),
        extra_keys=settings.integer("extra_keys"),
    )


class MultiheadAttentionKernel:
    """``MultiheadAttention(query, key, value, [key_padding_mask], [attn_mask]) → (y, attn_weights)``
    in eval mode (no dropout). Inputs are moved to batch-first ``[N, L, E]`` (a unit batch when
    unbatched), computed there, and moved back; ``attn_weights`` is batch-first whatever the layout,
    and ``None`` when ``need_weights`` is false.

    A query whose every key is masked gets NaN weights and therefore a NaN ``y``, the value of the
    formula and what torch gives with ``need_weights``; torch's ``need_weights=False`` path (scaled
    dot-product attention) gives the output bias there instead, a difference of torch's paths that
    the catalog does not settle.
    """

    def __init__(self, attention: _Attention, *, batch_first: bool, need_weights: bool, average: bool) -> None:
        self.attention = attention
        self.batch_first = batch_first
        self.need_weights = need_weights
        self.average = average

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        query, key, value = (np.asarray(inputs[port]) for port in ("query", "key", "value"))
        batched = query.ndim == 3
        if batched:
            if not self.batch_first:
                query, key, value = (x.transpose(1, 0, 2) for x in (query, key, value))
        else:
            query, key, value = query[None], key[None], value[None]
        n, length, _ = query.shape
        source = key.shape[1]
        dtype = np.result_type(query, self.attention.w_q)
        work = compute_dtype(dtype)
        mask = self.attention.merged_mask(
            _widened_mask(inputs.get("attn_mask")),
            _widened_mask(inputs.get("key_padding_mask")),
            n=n,
            length=length,
            source=source,
            dtype=work,
            batched=batched,
        )
        query, key, value = (_in_dtype(x, dtype) for x in (query, key, value))
        attention = self.attention.for_dtype(dtype)
        y, weights = attention(query, key, value, mask, need_weights=self.need_weights, average=self.average)
        y, weights = rounded(y, dtype), None if weights is None else rounded(weights, dtype)
        if not batched:
            y = y[0]
            weights = None if weights is None else weights[0]
        elif not self.batch_first:
            y = y.transpose(1, 0, 2)
        return {"y": y, "attn_weights": weights}


@implements("MultiheadAttention")
def multihead_attention(
    node: trama.Node, *, children: Mapping[str, Any], parameters: Parameters
) -> MultiheadAttentionKernel:
    """Bind a ``MultiheadAttention`` node's weights (``docs/ops.md``, steps 1–6)."""
    settings = check_settings(node, parameters)
    return MultiheadAttentionKernel(
        _bind_attention(parameters, settings, prefix="", embed="embed_dim", heads="num_heads"),
        batch_first=settings.flag("batch_first"),
        need_weights=settings.flag("need_weights"),
        average=settings.flag("average_attn_weights"),
    )


# --------------------------------------------------------------------------------------------
# Transformer encoder layer
# --------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {"relu": _relu, "gelu": _gelu}


class TransformerEncoderLayerKernel:
    """``TransformerEncoderLayer(src, [src_mask], [src_key_padding_mask]) → y`` in eval mode: every
    dropout is the identity. Computed batch-first, like the attention kernel."""

    def __init__(
        self,
        attention: _Attention,
        weights: Mapping[str, Array],
        biases: Mapping[str, Array | None],
        *,
        activation: Callable[[Array], Array],
        eps: float,
        batch_first: bool,
        norm_first: bool,
    ) -> None:
        self.attention = attention
        self.weights = dict(weights)  # by module: linear1, linear2, norm1, norm2
        self.biases = dict(biases)
        self.activation = activation
        self.eps = eps
        self.batch_first = batch_first
        self.norm_first = norm_first

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        src = np.asarray(inputs["src"])
        batched = src.ndim == 3
        x = (src if self.batch_first else src.transpose(1, 0, 2)) if batched else src[None]
        n, length, _ = x.shape
        dtype = np.result_type(x, self.attention.w_q)
        mask = self.attention.merged_mask(
            _widened_mask(inputs.get("src_mask")),
            _widened_mask(inputs.get("src_key_padding_mask")),
            n=n,
            length=length,
            source=length,
            dtype=compute_dtype(dtype),
            batched=batched,
        )
        attention = self.attention.for_dtype(dtype)
        weights = {module: _in_dtype(w, dtype) for module, w in self.weights.items()}
        biases = {module: _in_dtype(b, dtype) for module, b in self.biases.items()}

        def norm(module: str, z: Array) -> Array:
            return _layer_norm(z, weights[module], biases[module], self.eps)

        def feed_forward(z: Array) -> Array:
            hidden = self.activation(_linear(z, weights["linear1"], biases["linear1"]))
            return _linear(hidden, weights["linear2"], biases["linear2"])

        def self_attention(z: Array) -> Array:
            return attention(z, z, z, mask, need_weights=False, average=False)[0]

        x = _in_dtype(x, dtype)
        if self.norm_first:
            h = x + self_attention(norm("norm1", x))
            y = h + feed_forward(norm("norm2", h))
        else:
            h = norm("norm1", x + self_attention(x))
            y = norm("norm2", h + feed_forward(h))
        y = rounded(y, dtype)
        if not batched:
            return {"y": y[0]}
        return {"y": y if self.batch_first else y.transpose(1, 0, 2)}


@implements("TransformerEncoderLayer")
def transformer_encoder_layer(
    node: trama.Node, *, children: Mapping[str, Any], parameters: Parameters
) -> TransformerEncoderLayerKernel:
    """Bind a ``TransformerEncoderLayer`` node: its ``self_attn_*`` attention, FF and norms."""
    settings = check_settings(node, parameters)
    modules = ("linear1", "linear2", "norm1", "norm2")
    return TransformerEncoderLayerKernel(
        _bind_attention(parameters, settings, prefix="self_attn_", embed="d_model", heads="nhead"),
        {module: required_array(parameters, f"{module}_weight") for module in modules},
        {module: optional_array(parameters, f"{module}_bias") for module in modules},
        activation=_ACTIVATIONS[settings.text("activation")],
        eps=settings.number("layer_norm_eps"),
        batch_first=settings.flag("batch_first"),
        norm_first=settings.flag("norm_first"),
    )


# --------------------------------------------------------------------------------------------
# Recurrent layers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Direction:
    """One layer's weights in one direction. ``w_hr`` is the LSTM projection (``proj_size > 0``)."""

    w_ih: Array
    w_hh: Array
    b_ih: Array | None
    b_hh: Array | None
    w_hr: Array | None


#: What a recurrent kernel's state is: the final states of the previous call, ``(h_n,)`` for a GRU
#: and ``(h_n, c_n)`` for an LSTM, read-only arrays shaped like those outputs. ``None`` is the
#: initial state (zeros), whose batch size is known only once an input arrives.
RecurrentState = tuple[Array, ...] | None


def _stored(dtype: np.dtype[Any]) -> Callable[[Array], Array]:
    """How a recurrent layer keeps its state between steps for results of ``dtype``: rounded to
    it, as torch's state tensor is, and widened back to the compute dtype (the identity where the
    two are one dtype)."""
    if compute_dtype(dtype) == dtype:
        return lambda state: state
    return lambda state: rounded(state, dtype).astype(compute_dtype(dtype))


def _gru_pass(
    direction: _Direction, x: Array, states: tuple[Array, ...], reverse: bool, *, store: Callable[[Array], Array]
) -> tuple[Array, tuple[Array]]:
    """One GRU layer over ``x`` ``[L, N, in]`` in one direction, from ``h`` ``[N, H]``; ``store``
    keeps the state between steps (:func:`_stored`)."""
    (h,) = states
    gi = _linear(x, direction.w_ih, direction.b_ih)  # every step's input projection at once
    gi_r, gi_z, gi_n = np.split(gi, 3, axis=-1)
    out = np.empty((*x.shape[:2], h.shape[-1]), dtype=np.result_type(gi, h))
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        gh_r, gh_z, gh_n = np.split(_linear(h, direction.w_hh, direction.b_hh), 3, axis=-1)
        r = _sigmoid(gi_r[t] + gh_r)
        z = _sigmoid(gi_z[t] + gh_z)
        n = np.tanh(gi_n[t] + r * gh_n)
        h = store((1 - z) * n + z * h)
        out[t] = h
    return out, (h,)


def _lstm_pass(
    direction: _Direction, x: Array, states: tuple[Array, ...], reverse: bool, *, store: Callable[[Array], Array]
) -> tuple[Array, tuple[Array, Array]]:
    """One LSTM layer over ``x`` ``[L, N, in]`` in one direction, from ``h`` ``[N, H_out]`` and
    ``c`` ``[N, H]``; ``store`` keeps the states between steps (:func:`_stored`)."""
    h, c = states
    gi = _linear(x, direction.w_ih, direction.b_ih)  # every step's input projection at once
    out = np.empty((*x.shape[:2], h.shape[-1]), dtype=np.result_type(gi, h))
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        gates = gi[t] + _linear(h, direction.w_hh, direction.b_hh)
        g_i, g_f, g_g, g_o = np.split(gates, 4, axis=-1)
        i, f, g, o = _sigmoid(g_i), _sigmoid(g_f), np.tanh(g_g), _sigmoid(g_o)
        c = store(f * c + i * g)
        h = o * np.tanh(c)
        if direction.w_hr is not None:
            h = h @ direction.w_hr.T
        h = store(h)
        out[t] = h
    return out, (h, c)


class _RecurrentKernel:
    """A multi-layer, optionally bidirectional recurrent network (shared by GRU and LSTM).

    A :class:`trama.StatefulKernel`: :meth:`step` continues from the final states of the previous
    call, so a sequence streamed in chunks through one state gives the outputs of the whole
    sequence in one call. Explicit ``h0`` / ``c0`` inputs win over the carried state when they are
    connected. Called as a plain kernel, it starts from zeros (or ``h0`` / ``c0``).

    A bidirectional layer cannot be streamed: its reverse direction starts at the *last* time
    step, so the reverse outputs of an early chunk depend on inputs that have not arrived yet.
    Continuing a bidirectional layer from a carried state would therefore give numbers that match
    no whole-sequence run; :meth:`step` refuses it with :class:`trama.ImportModelError` (the
    document is valid; this runtime use of it cannot be computed) instead of answering wrongly.
    Running each whole sequence in one call, from the initial state or from ``h0``, is fine.
    """

    #: The state inputs and outputs, in state order: ("h0",) and ("h_n",) for a GRU.
    initial_ports: tuple[str, ...]
    final_ports: tuple[str, ...]

    def __init__(
        self,
        node: trama.Node,
        layers: Sequence[Sequence[_Direction]],
        *,
        state_sizes: tuple[int, ...],
        batch_first: bool,
    ) -> None:
        self.node_id = node.id
        self.op = node.op
        self.layers = [tuple(directions) for directions in layers]
        self.num_directions = len(self.layers[0])
        self.state_sizes = state_sizes  # feature size of each state: (H,) or (H_out, H)
        self.batch_first = batch_first

    def _pass(
        self,
        direction: _Direction,
        x: Array,
        states: tuple[Array, ...],
        reverse: bool,
        *,
        store: Callable[[Array], Array],
    ) -> tuple[Array, tuple[Array, ...]]:
        """One layer in one direction over the whole of ``x``: the cell's recurrence, its state
        kept between steps by ``store``."""
        raise NotImplementedError

    @property
    def bidirectional(self) -> bool:
        return self.num_directions == 2

    def initial_state(self) -> RecurrentState:
        """``None``: zeros, materialised at the first step, when the batch size is known."""
        return None

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """The outputs of one whole sequence from the initial state (or ``h0`` / ``c0``)."""
        return self.step(inputs, self.initial_state())[0]

    def step(self, inputs: Mapping[str, Any], state: RecurrentState) -> tuple[Mapping[str, Any], RecurrentState]:
        """Outputs ``y``, ``h_n`` (and ``c_n``) and the next state, ``(h_n,)`` / ``(h_n, c_n)``.

        ``state`` is never written to; the new state is a read-only copy, so it shares no buffer
        with the outputs or with any other state.
        """
        x = np.asarray(inputs["x"])
        batched = x.ndim == 3
        if not batched:
            x = x[:, None, :]  # a batch of one: [L, 1, in]
        elif self.batch_first:
            x = x.transpose(1, 0, 2)  # -> [L, N, in]
        n = x.shape[1]
        dtype = np.result_type(x, self.layers[0][0].w_ih)
        starts = [_in_dtype(start, dtype) for start in self._initial(inputs, state, n=n, dtype=dtype, batched=batched)]
        layers = [[self._in_dtype(direction, dtype) for direction in directions] for directions in self.layers]
        run = functools.partial(self._pass, store=_stored(dtype))
        y, finals = stacked_layers(
            layers, _in_dtype(x, dtype), starts, run, lambda outputs: np.concatenate(outputs, axis=-1)
        )
        y = rounded(y, dtype)
        ends = [rounded(np.stack(values), dtype) for values in finals]  # [D·num_layers, N, ·]
        if batched:
            y = y.transpose(1, 0, 2) if self.batch_first else y
        else:
            y = y[:, 0]
            ends = [end[:, 0] for end in ends]
        result: dict[str, Any] = {"y": y}
        result.update(zip(self.final_ports, ends, strict=True))
        return result, tuple(_frozen_copy(end) for end in ends)

    @staticmethod
    def _in_dtype(direction: _Direction, dtype: np.dtype[Any]) -> _Direction:
        """One direction's weights as the layer computes with them (:func:`_in_dtype`)."""
        if compute_dtype(dtype) == dtype and direction.w_ih.dtype == dtype:
            return direction  # the common case: float32 weights for a float32 input
        cast = {field.name: _in_dtype(getattr(direction, field.name), dtype) for field in dataclasses.fields(direction)}
        return _Direction(**cast)

    def _initial(
        self, inputs: Mapping[str, Any], state: RecurrentState, *, n: int, dtype: Any, batched: bool
    ) -> list[Array]:
        """The starting states ``[D·num_layers, N, ·]``: connected ports, else the carried state,
        else zeros."""
        connected = [port in inputs and inputs[port] is not None for port in self.initial_ports]
        if any(connected) and not all(connected):
            raise trama.ImportModelError(
                f"{self.op} needs {' and '.join(self.initial_ports)} together (as torch's tuple), or neither",
                node_id=self.node_id,
            )
        if all(connected):
            given: Sequence[Any] = [inputs[port] for port in self.initial_ports]
            source = " and ".join(self.initial_ports)
        elif state is not None:
            if self.bidirectional:
                raise trama.ImportModelError(
                    f"a bidirectional {self.op} cannot continue from a carried state: its reverse direction "
                    "needs the end of the sequence first, so chunked outputs would match no whole-sequence "
                    "run; give it the whole sequence in one call",
                    node_id=self.node_id,
                )
            given = state
            source = "the carried state"
        else:
            rows = len(self.layers) * self.num_directions
            return [np.zeros((rows, n, size), dtype=dtype) for size in self.state_sizes]

        starts = []
        rows = len(self.layers) * self.num_directions
        for value, size in zip(given, self.state_sizes, strict=True):
            array = np.asarray(value)
            expected = (rows, n, size) if batched else (rows, size)
            if array.shape != expected:
                raise trama.ImportModelError(
                    f"{self.op}: {source} has shape {list(array.shape)}, expected {list(expected)}",
                    node_id=self.node_id,
                )
            starts.append(array if batched else array[:, None, :])
        return starts


def _frozen_copy(array: Array) -> Array:
    """A private, read-only copy: a state must not change under the runtime that keeps it."""
    copy = np.array(array, copy=True)
    copy.flags.writeable = False
    return copy


class GRUKernel(_RecurrentKernel):
    """``GRU(x, [h0]) → (y, h_n)`` in eval mode (no dropout between layers); state ``(h_n,)``."""

    initial_ports = ("h0",)
    final_ports = ("h_n",)

    def _pass(
        self,
        direction: _Direction,
        x: Array,
        states: tuple[Array, ...],
        reverse: bool,
        *,
        store: Callable[[Array], Array],
    ) -> tuple[Array, tuple[Array, ...]]:
        return _gru_pass(direction, x, states, reverse, store=store)


class LSTMKernel(_RecurrentKernel):
    """``LSTM(x, [h0], [c0]) → (y, h_n, c_n)`` in eval mode (no dropout between layers); state
    ``(h_n, c_n)``."""

    initial_ports = ("h0", "c0")
    final_ports = ("h_n", "c_n")

    def _pass(
        self,
        direction: _Direction,
        x: Array,
        states: tuple[Array, ...],
        reverse: bool,
        *,
        store: Callable[[Array], Array],
    ) -> tuple[Array, tuple[Array, ...]]:
        return _lstm_pass(direction, x, states, reverse, store=store)


def _bind_recurrent(parameters: Parameters, settings: Settings) -> list[list[_Direction]]:
    """Every layer's weights, in each direction, as the checked ``settings`` lay them out."""
    suffixes = ("", "_reverse")[: settings.integer("directions")]
    return [
        [
            _Direction(
                w_ih=required_array(parameters, f"weight_ih_l{k}{suffix}"),
                w_hh=required_array(parameters, f"weight_hh_l{k}{suffix}"),
                b_ih=optional_array(parameters, f"bias_ih_l{k}{suffix}"),
                b_hh=optional_array(parameters, f"bias_hh_l{k}{suffix}"),
                w_hr=optional_array(parameters, f"weight_hr_l{k}{suffix}"),
            )
            for suffix in suffixes
        ]
        for k in range(settings.integer("num_layers"))
    ]


@implements("GRU")
def gru(node: trama.Node, *, children: Mapping[str, Any], parameters: Parameters) -> GRUKernel:
    """Bind a ``GRU`` node's per-layer weights (gates r, z, n, in that row order)."""
    settings = check_settings(node, parameters)
    layers = _bind_recurrent(parameters, settings)
    return GRUKernel(
        node, layers, state_sizes=(settings.integer("hidden_size"),), batch_first=settings.flag("batch_first")
    )


@implements("LSTM")
def lstm(node: trama.Node, *, children: Mapping[str, Any], parameters: Parameters) -> LSTMKernel:
    """Bind an ``LSTM`` node's per-layer weights (gates i, f, g, o, in that row order)."""
    settings = check_settings(node, parameters)
    layers = _bind_recurrent(parameters, settings)
    sizes = (settings.integer("h_out"), settings.integer("hidden_size"))
    return LSTMKernel(node, layers, state_sizes=sizes, batch_first=settings.flag("batch_first"))
