"""Sequence layers: multi-head attention, the transformer encoder and the recurrent layers.

These are leaves holding torch's full state under torch's own names, because their inside is
fixed by torch's definition: a JAX or numpy implementation codes the formulas below once, and a
torch importer loads the slots back as a ``state_dict``. Nested state keys are flattened by
replacing each ``.`` with ``_`` (``self_attn.out_proj.weight`` is the slot
``self_attn_out_proj_weight``); every such slot names its torch key in its doc, so the mapping is
a lookup, not a guess. The one exception is ``TransformerEncoder``, a composite of layers (see
its doc for why).
"""

from __future__ import annotations

from trama.catalog._build import hyper, op, weight
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["RNN_MAX_LAYERS", "SPECS"]

#: Recurrent layers have slots for layers ``0 … RNN_MAX_LAYERS - 1``. A spec declares a fixed set
#: of slots, so the depth needs a bound; a later opset may raise it (adding optional slots is
#: backward compatible).
RNN_MAX_LAYERS = 8


def _state(key: str, shape: str, *, optional: bool = False, absent: str = "") -> ParameterSchema:
    """A learned tensor of a nested torch module, its slot named after its ``state_dict`` key."""
    note = f" Absent when {absent}." if absent else ""
    return weight(key.replace(".", "_"), f"`{shape}`; torch key `{key}`.{note}", optional=optional)


_NO_BIAS = "`bias` is false"


def _submodule(module: str, weight_shape: str, bias_shape: str) -> tuple[ParameterSchema, ParameterSchema]:
    """The ``weight`` and optional ``bias`` of a nested linear or layer-norm module."""
    return (
        _state(f"{module}.weight", weight_shape),
        _state(f"{module}.bias", bias_shape, optional=True, absent=_NO_BIAS),
    )


_MULTIHEAD_ATTENTION = op(
    "MultiheadAttention",
    """
    Multi-head scaled dot-product attention, as `torch.nn.MultiheadAttention`. With
    `E = embed_dim`, `H = num_heads` and `d = E / H`: `query` is `[L, N, E]`, `key`
    `[S, N, kdim]` and `value` `[S, N, vdim]` (`[N, L, E]`, `[N, S, kdim]`, `[N, S, vdim]` when
    `batch_first`; `[L, E]`, `[S, kdim]`, `[S, vdim]` unbatched, and then no `N` below).

    1. Projections: `q = query · W_qᵀ + b_q`, `k = key · W_kᵀ + b_k`, `v = value · W_vᵀ + b_v`.
       `W_q`, `W_k`, `W_v` are rows `0 … E−1`, `E … 2E−1` and `2E … 3E−1` of `in_proj_weight`, or
       `q_proj_weight`, `k_proj_weight` and `v_proj_weight` when those are given instead (torch
       uses `in_proj_weight` exactly when `kdim` and `vdim` equal `E`). `b_q`, `b_k`, `b_v` are
       the same thirds of `in_proj_bias` (0 when it is absent).
    2. With `bias_k` and `bias_v`, these are appended to `k` and `v` as one more key position,
       and each mask gets one more column, "not masked".
    3. Heads: `q`, `k` and `v` are split along the feature dimension into H heads of d features
       (head h holds features `h·d … h·d + d − 1`).
    4. With `add_zero_attn`, a zero key and a zero value are appended in every head as one more
       key position, and each mask gets one more column, "not masked".
    5. Scores: `s = q_h · k_hᵀ / √d`, `[N, H, L, S]`. `attn_mask` (`[L, S]`, or `[N·H, L, S]` with
       index `n·H + h`) and `key_padding_mask` (`[N, S]`, or `[S]` unbatched) are added to `s`:
       a float mask as it is, a bool mask as −∞ where true ("may not attend") and 0 where false.
    6. `a = softmax(s)` over the key positions, `o_h = a · v_h`; the heads are concatenated back
       in head order, and `y = o · out_proj_weightᵀ + out_proj_bias`, shaped like `query`.

    `attn_weights` is `a` averaged over the heads, `[N, L, S]`, when `average_attn_weights` is
    true, else `[N, H, L, S]` (without `N` when unbatched): batch-first whatever `batch_first`
    says. When `need_weights` is false torch returns `None` instead: the output `attn_weights` is
    then null and no node may read it. A query whose every key is masked gets NaN weights, as in
    torch. `need_weights` and `average_attn_weights` are arguments of torch's `forward`, recorded
    as slots because they decide the outputs.
    """,
    eval_mode="No dropout on the attention weights (in training: dropout with probability `dropout`).",
    inputs=("query", "key", "value"),
    optional_inputs=("key_padding_mask", "attn_mask"),
    outputs=("y", "attn_weights"),
    parameters=(
        hyper("embed_dim", "int", "E: features of `query` and `y`."),
        hyper("num_heads", "int", "H: divides E."),
        hyper("dropout", "float", "Dropout probability on the attention weights (training only).", 0.0),
        hyper("bias", "bool", "Whether `in_proj_bias` and `out_proj_bias` exist.", True),
        hyper("add_bias_kv", "bool", "Whether `bias_k` and `bias_v` exist.", False),
        hyper("add_zero_attn", "bool", "Append a zero key and value (step 4).", False),
        hyper("kdim", "int", "Features of `key`; `null` means E.", None),
        hyper("vdim", "int", "Features of `value`; `null` means E.", None),
        hyper("batch_first", "bool", "Layout of `query`, `key`, `value` and `y`.", False),
        hyper("need_weights", "bool", "Whether `attn_weights` is computed.", True),
        hyper("average_attn_weights", "bool", "Whether `attn_weights` is averaged over heads.", True),
        weight("in_proj_weight", "`[3E, E]`: the stacked query, key and value projections.", optional=True),
        weight("q_proj_weight", "`[E, E]`, when `in_proj_weight` is absent.", optional=True),
        weight("k_proj_weight", "`[E, kdim]`, when `in_proj_weight` is absent.", optional=True),
        weight("v_proj_weight", "`[E, vdim]`, when `in_proj_weight` is absent.", optional=True),
        weight("in_proj_bias", "`[3E]`. Absent when `bias` is false.", optional=True),
        *_submodule("out_proj", "[E, E]", "[E]"),
        weight("bias_k", "`[1, 1, E]`, when `add_bias_kv`.", optional=True),
        weight("bias_v", "`[1, 1, E]`, when `add_bias_kv`.", optional=True),
    ),
)

_TRANSFORMER_ENCODER_LAYER = op(
    "TransformerEncoderLayer",
    """
    One encoder block, as `torch.nn.TransformerEncoderLayer`: self-attention and a feed-forward
    network, each with a residual connection and a layer norm. `src` is `[S, N, d_model]`
    (`[N, S, d_model]` when `batch_first`, `[S, d_model]` unbatched) and `y` has its shape;
    `src_mask` and `src_key_padding_mask` are the `attn_mask` and `key_padding_mask` of
    `MultiheadAttention`.

    With `SA(z)` = `MultiheadAttention` of `(z, z, z)` (E = `d_model`, H = `nhead`, weights
    `self_attn_*`, those masks), `FF(z) = linear2(act(linear1(z)))` where `act` is ReLU for
    `"relu"` and the exact (erf) GELU for `"gelu"`, and `norm1`, `norm2` layer norms over the
    last dimension with eps `layer_norm_eps`:

    * `norm_first` false: `h = norm1(src + SA(src))`, `y = norm2(h + FF(h))`;
    * `norm_first` true: `h = src + SA(norm1(src))`, `y = h + FF(norm2(h))`.

    torch also accepts a callable `activation`; a document holds only the two names, so an
    exporter refuses any other callable. torch's `is_causal` argument is a hint about `src_mask`
    and has no slot.
    """,
    eval_mode="The dropouts are the identity (in training: dropout with probability `dropout` after the "
    "attention, inside the feed-forward network and after it).",
    inputs=("src",),
    optional_inputs=("src_mask", "src_key_padding_mask"),
    parameters=(
        hyper("d_model", "int", "E: features of `src` and `y`."),
        hyper("nhead", "int", "Attention heads; divides `d_model`."),
        hyper("dim_feedforward", "int", "F: width of the feed-forward network.", 2048),
        hyper("dropout", "float", "Dropout probability (training only).", 0.1),
        hyper("activation", "string", '`"relu"` or `"gelu"`.', "relu"),
        hyper("layer_norm_eps", "float", "eps of both layer norms.", 1e-5),
        hyper("batch_first", "bool", "Layout of `src` and `y`.", False),
        hyper("norm_first", "bool", "Layer norm before (true) or after (false) each block.", False),
        hyper("bias", "bool", "Whether the linear and layer-norm biases exist.", True),
        _state("self_attn.in_proj_weight", "[3·d_model, d_model]"),
        _state("self_attn.in_proj_bias", "[3·d_model]", optional=True, absent=_NO_BIAS),
        *_submodule("self_attn.out_proj", "[d_model, d_model]", "[d_model]"),
        *_submodule("linear1", "[F, d_model]", "[F]"),
        *_submodule("linear2", "[d_model, F]", "[d_model]"),
        *_submodule("norm1", "[d_model]", "[d_model]"),
        *_submodule("norm2", "[d_model]", "[d_model]"),
    ),
)

_TRANSFORMER_ENCODER = op(
    "TransformerEncoder",
    """
    A stack of encoder layers, as `torch.nn.TransformerEncoder`: a composite whose wiring is
    torch's `forward`. Its children are `layers_0`, `layers_1`, … (torch's `layers.0`,
    `layers.1`, …), each a `TransformerEncoderLayer`, in order: the first reads `src`, each later
    one the previous one's `y`, and every one reads the encoder's `mask` as its `src_mask` and
    `src_key_padding_mask` as its `src_key_padding_mask`. When torch's `norm` is set, a last
    child `norm` (usually a `LayerNorm`) reads the last layer's `y`. `y` is bound to the last
    child's `y`. As for `Sequential`, the wiring is authoritative.

    It is a composite, unlike `TransformerEncoderLayer`, because its state is exactly its layers'
    state and their number varies: a leaf, with its fixed set of slots, could hold them only as
    tensors stacked over the layers, hiding the per-layer weights that torch's `state_dict`
    names one by one (`layers.3.linear1.weight` is slot `linear1_weight` of child `layers_3`).

    Values at positions that `src_key_padding_mask` masks out are not meaningful: torch's
    nested-tensor fast path sets them to 0 in eval mode, its plain path does not.
    """,
    eval_mode="As its children's.",
    inputs=("src",),
    optional_inputs=("mask", "src_key_padding_mask"),
    composite=True,
    parameters=(
        hyper("enable_nested_tensor", "bool", "torch's fast-path switch; no effect on the values defined here.", True),
        hyper("mask_check", "bool", "torch's mask validation switch; no effect on the values defined here.", True),
    ),
)


def _layer_slots(gates: int, *, projection: bool) -> tuple[ParameterSchema, ...]:
    """The per-layer state of a recurrent layer under torch's names, in ``state_dict`` order.

    Docs say "layer k" wherever the slot's shape and presence do not depend on the layer, so
    ``docs/ops.md`` can print one row for each family of slots (``bias_ih_l{k}``, k = 0 … 7).
    """
    rows = f"{gates}·H"
    h_out = "H_out" if projection else "H"
    slots: list[ParameterSchema] = []
    for k in range(RNN_MAX_LAYERS):
        for suffix, direction in (("", "forward"), ("_reverse", "reverse")):
            of = f"of layer k, {direction} direction"
            first = f"of layer {'0' if k == 0 else 'k ≥ 1'}, {direction} direction"
            width = "input_size" if k == 0 else f"D·{h_out}"
            optional = k > 0 or bool(suffix)
            slots += [
                weight(f"weight_ih_l{k}{suffix}", f"`[{rows}, {width}]`: input weights {first}.", optional=optional),
                weight(
                    f"weight_hh_l{k}{suffix}",
                    f"`[{rows}, {h_out}]`: hidden weights {of if optional else first}.",
                    optional=optional,
                ),
                weight(f"bias_ih_l{k}{suffix}", f"`[{rows}]`: input bias {of}; absent without `bias`.", optional=True),
                weight(f"bias_hh_l{k}{suffix}", f"`[{rows}]`: hidden bias {of}; absent without `bias`.", optional=True),
            ]
            if projection:
                slots.append(weight(f"weight_hr_l{k}{suffix}", f"`[proj_size, H]`: projection {of}.", optional=True))
    return tuple(slots)


def _recurrent_hypers(*, projection: bool) -> tuple[ParameterSchema, ...]:
    slots: tuple[ParameterSchema, ...] = (
        hyper("input_size", "int", "Features of `x`."),
        hyper("hidden_size", "int", "H: features of the hidden state."),
        hyper("num_layers", "int", f"Stacked layers, at most {RNN_MAX_LAYERS} in opset 1.", 1),
        hyper("bias", "bool", "Whether the `bias_*` slots exist.", True),
        hyper("batch_first", "bool", "Layout of `x` and `y` (never of the states).", False),
        hyper("dropout", "float", "Dropout probability between layers (training only).", 0.0),
        hyper("bidirectional", "bool", "Whether the `*_reverse` slots exist (D = 2).", False),
    )
    if projection:
        slots += (hyper("proj_size", "int", "Size of the projected hidden state; 0: no projection.", 0),)
    return slots


def _recurrent_doc(torch_name: str, states: str, equations: str, finals: str) -> tuple[str, ...]:
    """The doc of a recurrent layer: what GRU and LSTM share around their cell equations."""
    return (
        f"""
        A multi-layer recurrent network, as `torch.nn.{torch_name}`. With `H = hidden_size` and `D` = 2 when
        `bidirectional`, else 1: `x` is `[L, N, input_size]` (`[N, L, input_size]` when `batch_first`,
        `[L, input_size]` unbatched). {states}

        Layer k in direction δ (0 forward; 1 reverse, whose slots end in `_reverse`) starts from the
        states at index `k·D + δ` and visits the time steps in increasing order (forward) or
        decreasing order (reverse), computing from its input `x_t` at each step t:
        """,
        f"```text\n{equations}\n```",
        f"""
        σ is the logistic sigmoid and ⊙ the elementwise product. The `W_i·` are consecutive row blocks
        of H rows of `weight_ih_l{{k}}` in the order the gates appear above, the `W_h·` those of
        `weight_hh_l{{k}}`, the `b_i·` and `b_h·` those of `bias_ih_l{{k}}` and `bias_hh_l{{k}}` (0 when
        `bias` is false). A layer's output at step t is its h, the two directions concatenated on the
        feature dimension (forward first); layer 0 reads `x`, layer k ≥ 1 the output of layer k − 1.
        `y` is the last layer's output, laid out like `x`. {finals} Slots exist for every layer
        `k < num_layers`, the `_reverse` ones only when `bidirectional`.
        """,
    )


_RECURRENT_EVAL = "No dropout between layers (in training: dropout with probability `dropout` on every layer's "
_RECURRENT_EVAL += "output but the last)."

_GRU = op(
    "GRU",
    _recurrent_doc(
        "GRU",
        "`h0` is `[D·num_layers, N, H]` (never batch-first; `[D·num_layers, H]` unbatched), zeros when absent.",
        "r = σ(W_ir x_t + b_ir + W_hr h + b_hr)\n"
        "z = σ(W_iz x_t + b_iz + W_hz h + b_hz)\n"
        "n = tanh(W_in x_t + b_in + r ⊙ (W_hn h + b_hn))\n"
        "h = (1 − z) ⊙ n + z ⊙ h",
        "`h_n[k·D + δ]` is the last h of layer k in direction δ (for the reverse direction, the h after step 0).",
    ),
    eval_mode=_RECURRENT_EVAL,
    inputs=("x",),
    optional_inputs=("h0",),
    outputs=("y", "h_n"),
    parameters=(*_recurrent_hypers(projection=False), *_layer_slots(3, projection=False)),
)

_LSTM = op(
    "LSTM",
    _recurrent_doc(
        "LSTM",
        "With `H_out = proj_size` when it is positive, else H: `h0` is `[D·num_layers, N, H_out]` and `c0` "
        "`[D·num_layers, N, H]` (never batch-first; no `N` unbatched), both given or both absent (zeros).",
        "i = σ(W_ii x_t + b_ii + W_hi h + b_hi)\n"
        "f = σ(W_if x_t + b_if + W_hf h + b_hf)\n"
        "g = tanh(W_ig x_t + b_ig + W_hg h + b_hg)\n"
        "o = σ(W_io x_t + b_io + W_ho h + b_ho)\n"
        "c = f ⊙ c + i ⊙ g\n"
        "h = o ⊙ tanh(c)            then, when proj_size > 0: h = weight_hr_l{k} · h",
        "`h_n[k·D + δ]` and `c_n[k·D + δ]` are the last h and c of layer k in direction δ (for the reverse "
        "direction, those after step 0).",
    ),
    eval_mode=_RECURRENT_EVAL,
    inputs=("x",),
    optional_inputs=("h0", "c0"),
    outputs=("y", "h_n", "c_n"),
    parameters=(*_recurrent_hypers(projection=True), *_layer_slots(4, projection=True)),
)

SPECS: tuple[OpSpec, ...] = (
    _MULTIHEAD_ATTENTION,
    _TRANSFORMER_ENCODER_LAYER,
    _TRANSFORMER_ENCODER,
    _GRU,
    _LSTM,
)
