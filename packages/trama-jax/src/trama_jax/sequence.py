"""JAX kernels of the sequence ops: ``MultiheadAttention``, ``TransformerEncoderLayer``, ``GRU``, ``LSTM``.

Attention is computed batch-first (``[N, L, E]``, a unit batch when unbatched) and moved back,
vectorised over the batch and the heads. The recurrent layers project every time step's input in
one matrix product and run only the recurrence itself through ``jax.lax.scan``: one compiled loop
body, no Python loop over time, and ``scan(reverse=True)`` visits a reverse direction's steps from
the last while stacking its outputs in time order, which is exactly the catalog's layout.

Two choices follow torch's arithmetic order rather than the letter of ``docs/ops.md``, because
they change rounding only and keep the kernels closest to torch (and to trama-numpy's reference):
attention scales ``q`` by ``1/√d`` before the product with ``k`` and adds the merged masks to the
scores; a GRU cell computes ``h′ = (h − n)·z + n`` (torch's form of ``(1 − z)·n + z·h``) with
``b_ih`` added to the input projection and ``b_hh`` to the hidden one. Dtypes and precision follow
:mod:`trama_jax._numerics`; a recurrent layer keeps its state in the input's dtype, so that a
sequence streamed in chunks rounds exactly as the whole sequence does.

Recurrent kernels are stateful (``step``, ``initial_state``): the state is ``(h_n,)`` for a GRU and
``(h_n, c_n)`` for an LSTM, the arrays of those outputs. ``initial_state()`` is ``None``, zeros
shaped once the first input gives the batch size. Explicit ``h0`` / ``c0`` inputs win over a
carried state. A bidirectional layer refuses to continue from a carried state: its reverse
direction starts at the *last* step, so chunked outputs would match no whole-sequence run.

Errors: a node whose slots contradict its settings raises :class:`trama.RegistryError` before the
kernel is built (the core's check, :func:`trama.catalog.check_settings`, the same for every
framework); an input the kernel cannot take (wrong shape or dtype, a carried state of another
batch size) raises :class:`trama.ExecutionError` naming the node, while tracing: shapes and
dtypes are static, so these checks cost nothing inside ``jax.jit``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from trama import Node
from trama.catalog import Settings, check_settings, merged_attention_mask, stacked_layers
from trama_jax._numerics import dense, normalized, product, softmax
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Parameters, Site, Tensors, held
from trama_jax.kernel import JaxKernel

__all__ = ["RecurrentState", "gru", "lstm", "multihead_attention", "transformer_encoder_layer"]


#: A recurrent kernel's state: the final states of the previous call, ``(h_n,)`` or ``(h_n, c_n)``,
#: shaped like those outputs; ``None`` before the first call (zeros).
RecurrentState = tuple[jax.Array, ...] | None


def _get(tensors: Tensors, slot: str | None) -> jax.Array | None:
    """An optional tensor: ``None`` where the slot is absent."""
    return None if slot is None else tensors[slot]


# --------------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Attention:
    """One multi-head attention: its geometry and the slots of its weights (read at build time,
    fetched from ``tensors`` at every call). Shared by the attention and the encoder kernels."""

    site: Site
    embed_dim: int
    num_heads: int
    kdim: int
    vdim: int
    #: The packed ``[3E, E]`` projection's slot, else the slots of the three projections.
    projections: str | tuple[str, str, str]
    in_bias: str | None
    out_weight: str
    out_bias: str | None
    bias_k: str | None
    bias_v: str | None
    add_zero_attn: bool
    #: Key positions appended after the real ones (steps 2 and 4): the masks gain as many
    #: "not masked" columns.
    extra_keys: int

    def _projections(self, tensors: Tensors) -> tuple[tuple[jax.Array, jax.Array | None], ...]:
        """``(W, b)`` for q, k and v (step 1): thirds of the packed weight and bias, or the three."""
        e = self.embed_dim
        if isinstance(self.projections, str):
            packed = tensors[self.projections]
            weights = (packed[:e], packed[e : 2 * e], packed[2 * e :])
        else:
            weights = tuple(tensors[slot] for slot in self.projections)
        bias = _get(tensors, self.in_bias)
        biases = (None, None, None) if bias is None else (bias[:e], bias[e : 2 * e], bias[2 * e :])
        return tuple(zip(weights, biases, strict=True))

    def __call__(
        self,
        tensors: Tensors,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        mask: jax.Array | None,
        *,
        need_weights: bool,
        average: bool,
    ) -> tuple[jax.Array, jax.Array | None]:
        """Attention on batch-first ``[N, L, E]``, ``[N, S, kdim]``, ``[N, S, vdim]`` (one dtype).

        ``mask`` is the merged additive mask, broadcastable to ``[N, H, L, S + extra_keys]``.
        Returns ``y`` ``[N, L, E]`` and the weights (``[N, L, S′]`` averaged, ``[N, H, L, S′]``
        otherwise; ``None`` unless ``need_weights``).
        """
        n, length, e = query.shape
        heads = self.num_heads
        d = e // heads
        # 1. Projections.
        (w_q, b_q), (w_k, b_k), (w_v, b_v) = self._projections(tensors)
        q, k, v = dense(query, w_q, b_q), dense(key, w_k, b_k), dense(value, w_v, b_v)
        # 2. bias_k / bias_v as one more key position.
        if self.bias_k is not None and self.bias_v is not None:
            k = jnp.concatenate([k, jnp.broadcast_to(tensors[self.bias_k].astype(k.dtype), (n, 1, e))], axis=1)
            v = jnp.concatenate([v, jnp.broadcast_to(tensors[self.bias_v].astype(v.dtype), (n, 1, e))], axis=1)
        # 3. Heads: [N, S, E] -> [N, H, S, d], head h holding features h·d … h·d + d − 1.
        q, k, v = (t.reshape(n, t.shape[1], heads, d).transpose(0, 2, 1, 3) for t in (q, k, v))
        # 4. A zero key and value in every head.
        if self.add_zero_attn:
            k = jnp.concatenate([k, jnp.zeros((n, heads, 1, d), k.dtype)], axis=2)
            v = jnp.concatenate([v, jnp.zeros((n, heads, 1, d), v.dtype)], axis=2)
        # 5. Scores, q scaled first as torch does (same value, torch's rounding), masks added.
        scores = product(q * math.sqrt(1.0 / d), k.swapaxes(-1, -2))
        if mask is not None:
            scores = mask + scores
        # 6. Softmax over the keys, weighted values, heads concatenated back, output projection.
        a = softmax(scores)
        o = product(a, v).transpose(0, 2, 1, 3).reshape(n, length, e)
        y = dense(o, tensors[self.out_weight], _get(tensors, self.out_bias))
        if not need_weights:
            return y, None
        return y, (jnp.mean(a, axis=1) if average else a)

    def merged_mask(
        self, attn_mask: Any, key_padding_mask: Any, query: jax.Array, key: jax.Array, *, batched: bool
    ) -> jax.Array | None:
        """Both masks as one additive mask broadcastable to ``[N, H, L, S + extra_keys]``, for the
        batch-first ``query`` ``[N, L, ·]`` and ``key`` ``[N, S, ·]`` (in ``query``'s dtype), by
        the catalog's rules (:func:`trama.catalog.merged_attention_mask`)."""
        (n, length, _), source, dtype = query.shape, key.shape[1], query.dtype
        try:
            scores = (n, self.num_heads, length, source)
            merged: jax.Array | None = merged_attention_mask(
                jnp, attn_mask, key_padding_mask, scores, dtype, batched=batched, extra_keys=self.extra_keys
            )
        except ValueError as error:
            raise self.site.fail(str(error)) from None
        return merged


def _bind_attention(settings: Settings, site: Site, *, prefix: str, embed: str, heads: str) -> _Attention:
    """The attention's slots (under ``prefix``: ``self_attn_`` inside an encoder layer, whose
    attention has none of the options and whose ``embed``/``heads`` settings are
    ``d_model``/``nhead``), laid out as the checked ``settings`` say.

    torch packs the three projections into ``in_proj_weight`` exactly when ``kdim`` and ``vdim``
    equal ``embed_dim``; a node may also carry the three separately, as the catalog allows.
    """
    e = settings.integer(embed)
    projections: str | tuple[str, str, str] = f"{prefix}in_proj_weight"
    if not settings.get("packed", True):
        projections = (f"{prefix}q_proj_weight", f"{prefix}k_proj_weight", f"{prefix}v_proj_weight")
    return _Attention(
        site=site,
        embed_dim=e,
        num_heads=settings.integer(heads),
        kdim=settings.get("kdim", e),
        vdim=settings.get("vdim", e),
        projections=projections,
        in_bias=held(settings, f"{prefix}in_proj_bias"),
        out_weight=f"{prefix}out_proj_weight",
        out_bias=held(settings, f"{prefix}out_proj_bias"),
        bias_k=held(settings, f"{prefix}bias_k"),
        bias_v=held(settings, f"{prefix}bias_v"),
        add_zero_attn=bool(settings.get("add_zero_attn", False)),
        extra_keys=settings.integer("extra_keys"),
    )


def _batch_first(site: Site, values: Mapping[str, Any], features: Mapping[str, int], batch_first: bool) -> Any:
    """The sequence inputs as floating, batch-first ``[N, ·, F]`` arrays of one dtype (a unit batch
    when unbatched), and whether they were batched. Every input must agree in rank and batch size
    and end in its expected feature size."""
    arrays = {port: site.floating(values, port) for port in features}
    ranks = {array.ndim for array in arrays.values()}
    if len(ranks) != 1 or not ranks <= {2, 3}:
        shapes = {port: list(array.shape) for port, array in arrays.items()}
        raise site.fail(f"inputs must all be batched (3-d) or all unbatched (2-d), got shapes {shapes}")
    batched = ranks == {3}
    dtype = jnp.result_type(*arrays.values())
    moved = {}
    for port, array in arrays.items():
        if array.shape[-1] != features[port]:
            raise site.fail(f"{port} has shape {list(array.shape)}, whose last dimension should be {features[port]}")
        array = array.astype(dtype)
        moved[port] = (array if batch_first else array.swapaxes(0, 1)) if batched else array[None]
    if len({array.shape[0] for array in moved.values()}) != 1:
        raise site.fail(f"inputs differ in batch size: { ({p: list(a.shape) for p, a in arrays.items()}) }")
    return moved, batched


@implements("MultiheadAttention")
def multihead_attention(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``MultiheadAttention(query, key, value, [key_padding_mask], [attn_mask]) → (y, attn_weights)``
    in eval mode (no dropout); ``docs/ops.md`` steps 1–6.

    ``attn_weights`` is batch-first whatever the layout, and ``None`` when ``need_weights`` is
    false. A query whose every key is masked gets NaN weights and a NaN ``y``, the value of the
    formula and what torch gives with ``need_weights``.
    """
    settings, site = check_settings(node, parameters), Site(node)
    attention = _bind_attention(settings, site, prefix="", embed="embed_dim", heads="num_heads")
    embed_dim, kdim, vdim = attention.embed_dim, attention.kdim, attention.vdim
    batch_first = settings.flag("batch_first")
    need_weights = settings.flag("need_weights")
    average = settings.flag("average_attn_weights")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        features = {"query": embed_dim, "key": kdim, "value": vdim}
        moved, batched = _batch_first(site, inputs, features, batch_first)
        query, key, value = moved["query"], moved["key"], moved["value"]
        if key.shape[1] != value.shape[1]:
            raise site.fail(f"key and value differ in length: {key.shape[1]} and {value.shape[1]}")
        mask = attention.merged_mask(
            inputs.get("attn_mask"), inputs.get("key_padding_mask"), query, key, batched=batched
        )
        y, weights = attention(tensors, query, key, value, mask, need_weights=need_weights, average=average)
        if not batched:
            return {"y": y[0], "attn_weights": None if weights is None else weights[0]}
        return {"y": y if batch_first else y.swapaxes(0, 1), "attn_weights": weights}

    return JaxKernel(apply, settings.tensors)


# --------------------------------------------------------------------------------------------
# Transformer encoder layer
# --------------------------------------------------------------------------------------------


def _relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, 0)


def _gelu(x: jax.Array) -> jax.Array:
    """The exact (erf) GELU, torch's default, not the tanh approximation ``jax.nn.gelu`` defaults to."""
    return jax.nn.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {"relu": _relu, "gelu": _gelu}


@implements("TransformerEncoderLayer")
def transformer_encoder_layer(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``TransformerEncoderLayer(src, [src_mask], [src_key_padding_mask]) → y`` in eval mode (every
    dropout the identity): self-attention and a feed-forward network, each with a residual
    connection and a layer norm, before (``norm_first``) or after each block."""
    settings, site = check_settings(node, parameters), Site(node)
    e = settings.integer("d_model")
    activation = _ACTIVATIONS[settings.text("activation")]
    eps = settings.number("layer_norm_eps")
    batch_first, norm_first = settings.flag("batch_first"), settings.flag("norm_first")
    attention = _bind_attention(settings, site, prefix="self_attn_", embed="d_model", heads="nhead")
    modules = ("linear1", "linear2", "norm1", "norm2")
    weights = {module: f"{module}_weight" for module in modules}
    biases = {module: held(settings, f"{module}_bias") for module in modules}

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        moved, batched = _batch_first(site, inputs, {"src": e}, batch_first)
        x = moved["src"]
        mask = attention.merged_mask(inputs.get("src_mask"), inputs.get("src_key_padding_mask"), x, x, batched=batched)

        def norm(module: str, z: jax.Array) -> jax.Array:
            return normalized(z, (-1,), eps, tensors[weights[module]], _get(tensors, biases[module]))

        def linear(module: str, z: jax.Array) -> jax.Array:
            return dense(z, tensors[weights[module]], _get(tensors, biases[module]))

        def self_attention(z: jax.Array) -> jax.Array:
            return attention(tensors, z, z, z, mask, need_weights=False, average=False)[0]

        def feed_forward(z: jax.Array) -> jax.Array:
            return linear("linear2", activation(linear("linear1", z)))

        if norm_first:
            h = x + self_attention(norm("norm1", x))
            y = h + feed_forward(norm("norm2", h))
        else:
            h = norm("norm1", x + self_attention(x))
            y = norm("norm2", h + feed_forward(h))
        if not batched:
            return {"y": y[0]}
        return {"y": y if batch_first else y.swapaxes(0, 1)}

    return JaxKernel(apply, settings.tensors)


# --------------------------------------------------------------------------------------------
# Recurrent layers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Direction:
    """The slots of one layer's weights in one direction; ``w_hr`` is the LSTM projection."""

    w_ih: str
    w_hh: str
    b_ih: str | None
    b_hh: str | None
    w_hr: str | None


#: ``pass(tensors, direction, x [L, N, in], states, reverse) -> (outputs [L, N, H_out], final states)``
_Pass = Callable[[Tensors, _Direction, jax.Array, tuple[jax.Array, ...], bool], tuple[jax.Array, tuple[jax.Array, ...]]]


def _gru_pass(
    tensors: Tensors, direction: _Direction, x: jax.Array, states: tuple[jax.Array, ...], reverse: bool
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """One GRU layer over ``x`` in one direction, from ``h`` ``[N, H]`` (gates r, z, n)."""
    gi = dense(x, tensors[direction.w_ih], _get(tensors, direction.b_ih))  # every step's input projection
    w_hh, b_hh = tensors[direction.w_hh], _get(tensors, direction.b_hh)

    def cell(h: jax.Array, gi_t: jax.Array) -> tuple[jax.Array, jax.Array]:
        i_r, i_z, i_n = jnp.split(gi_t, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(dense(h, w_hh, b_hh), 3, axis=-1)
        r = jax.nn.sigmoid(i_r + h_r)
        z = jax.nn.sigmoid(i_z + h_z)
        candidate = jnp.tanh(i_n + r * h_n)
        h = (h - candidate) * z + candidate
        return h, h

    last, out = jax.lax.scan(cell, states[0], gi, reverse=reverse)
    return out, (last,)


def _lstm_pass(
    tensors: Tensors, direction: _Direction, x: jax.Array, states: tuple[jax.Array, ...], reverse: bool
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """One LSTM layer over ``x`` in one direction, from ``h`` ``[N, H_out]`` and ``c`` ``[N, H]``
    (gates i, f, g, o), projecting ``h`` by ``weight_hr`` when there is one."""
    gi = dense(x, tensors[direction.w_ih], _get(tensors, direction.b_ih))
    w_hh, b_hh = tensors[direction.w_hh], _get(tensors, direction.b_hh)
    w_hr = _get(tensors, direction.w_hr)

    def cell(carry: tuple[jax.Array, jax.Array], gi_t: jax.Array) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        h, c = carry
        g_i, g_f, g_g, g_o = jnp.split(gi_t + dense(h, w_hh, b_hh), 4, axis=-1)
        c = jax.nn.sigmoid(g_f) * c + jax.nn.sigmoid(g_i) * jnp.tanh(g_g)
        h = jax.nn.sigmoid(g_o) * jnp.tanh(c)
        if w_hr is not None:
            h = dense(h, w_hr, None)
        return (h, c), h

    (h, c), out = jax.lax.scan(cell, (states[0], states[1]), gi, reverse=reverse)
    return out, (h, c)


@dataclass(frozen=True, slots=True)
class _Recurrent:
    """A multi-layer, optionally bidirectional recurrent network (GRU or LSTM) with its settings
    bound: the pure ``step`` that the kernel's ``apply`` and ``step`` both are."""

    site: Site
    layers: tuple[tuple[_Direction, ...], ...]
    input_size: int
    state_sizes: tuple[int, ...]  # feature size of each state: (H,) or (H_out, H)
    initial_ports: tuple[str, ...]  # ("h0",) or ("h0", "c0")
    final_ports: tuple[str, ...]  # ("h_n",) or ("h_n", "c_n")
    batch_first: bool
    layer_pass: _Pass

    @property
    def directions(self) -> int:
        return len(self.layers[0])

    def apply(self, tensors: Tensors, inputs: Inputs) -> Outputs:
        """The outputs of one whole sequence from zeros (or ``h0`` / ``c0``)."""
        return self.step(tensors, inputs, None)[0]

    def step(self, tensors: Tensors, inputs: Inputs, state: RecurrentState) -> tuple[Outputs, RecurrentState]:
        """Outputs ``y``, ``h_n`` (and ``c_n``) and the next state, ``(h_n,)`` / ``(h_n, c_n)``."""
        x = self.site.floating(inputs)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise self.site.fail(
                f"x should be [L, N, {self.input_size}], [N, L, {self.input_size}] (batch_first) or "
                f"[L, {self.input_size}], got shape {list(x.shape)}"
            )
        batched = x.ndim == 3
        if not batched:
            x = x[:, None, :]  # a batch of one: [L, 1, in]
        elif self.batch_first:
            x = x.swapaxes(0, 1)  # -> [L, N, in]
        starts = self._initial(inputs, state, n=x.shape[1], dtype=x.dtype, batched=batched)
        run = functools.partial(self.layer_pass, tensors)
        y, finals = stacked_layers(self.layers, x, starts, run, lambda outputs: jnp.concatenate(outputs, axis=-1))
        ends = [jnp.stack(values) for values in finals]  # [D·num_layers, N, ·]
        if not batched:
            y, ends = y[:, 0], [end[:, 0] for end in ends]
        elif self.batch_first:
            y = y.swapaxes(0, 1)
        result: Outputs = {"y": y, **dict(zip(self.final_ports, ends, strict=True))}
        return result, tuple(ends)

    def _initial(self, inputs: Inputs, state: RecurrentState, *, n: int, dtype: Any, batched: bool) -> list[jax.Array]:
        """The starting states ``[D·num_layers, N, ·]``: the connected ports, else the carried
        state, else zeros."""
        rows = len(self.layers) * self.directions
        connected = [inputs.get(port) is not None for port in self.initial_ports]
        if any(connected) and not all(connected):
            raise self.site.fail(f"needs {' and '.join(self.initial_ports)} together (as torch's tuple), or neither")
        if all(connected):
            given: Sequence[Any] = [inputs[port] for port in self.initial_ports]
            source = " and ".join(self.initial_ports)
        elif state is not None:
            if self.directions == 2:
                raise self.site.fail(
                    "a bidirectional layer cannot continue from a carried state: its reverse direction needs "
                    "the end of the sequence first, so chunked outputs would match no whole-sequence run; "
                    "give it the whole sequence in one call"
                )
            given, source = state, "the carried state"
        else:
            return [jnp.zeros((rows, n, size), dtype) for size in self.state_sizes]
        starts = []
        for value, size in zip(given, self.state_sizes, strict=True):
            array = jnp.asarray(value)
            expected = (rows, n, size) if batched else (rows, size)
            if array.shape != expected:
                raise self.site.fail(f"{source} has shape {list(array.shape)}, expected {list(expected)}")
            array = array.astype(dtype)
            starts.append(array if batched else array[:, None, :])
        return starts


def _recurrent(
    node: Node,
    parameters: Parameters,
    *,
    initial_ports: tuple[str, ...],
    final_ports: tuple[str, ...],
    layer_pass: _Pass,
) -> JaxKernel:
    """Bind a stateful kernel to every layer's slots, as the checked settings lay them out."""
    settings, site = check_settings(node, parameters), Site(node)
    suffixes = ("", "_reverse")[: settings.integer("directions")]
    layers = tuple(
        tuple(
            _Direction(
                w_ih=f"weight_ih_l{k}{suffix}",
                w_hh=f"weight_hh_l{k}{suffix}",
                b_ih=held(settings, f"bias_ih_l{k}{suffix}"),
                b_hh=held(settings, f"bias_hh_l{k}{suffix}"),
                w_hr=held(settings, f"weight_hr_l{k}{suffix}"),
            )
            for suffix in suffixes
        )
        for k in range(settings.integer("num_layers"))
    )
    network = _Recurrent(
        site=site,
        layers=layers,
        input_size=settings.integer("input_size"),
        state_sizes=(settings.integer("h_out"), settings.integer("hidden_size"))[: len(initial_ports)],
        initial_ports=initial_ports,
        final_ports=final_ports,
        batch_first=settings.flag("batch_first"),
        layer_pass=layer_pass,
    )
    return JaxKernel(network.apply, settings.tensors, step=network.step, initial_state=_zeros)


def _zeros() -> RecurrentState:
    """``None``: zeros, shaped at the first step, once the batch size is known."""
    return None


@implements("GRU")
def gru(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``GRU(x, [h0]) → (y, h_n)`` in eval mode (no dropout between layers); state ``(h_n,)``."""
    return _recurrent(node, parameters, initial_ports=("h0",), final_ports=("h_n",), layer_pass=_gru_pass)


@implements("LSTM")
def lstm(node: Node, *, children: Mapping[str, Any], parameters: Parameters) -> JaxKernel:
    """``LSTM(x, [h0], [c0]) → (y, h_n, c_n)`` in eval mode (no dropout between layers); state
    ``(h_n, c_n)``."""
    return _recurrent(node, parameters, initial_ports=("h0", "c0"), final_ports=("h_n", "c_n"), layer_pass=_lstm_pass)
