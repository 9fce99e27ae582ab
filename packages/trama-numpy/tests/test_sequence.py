"""The numpy sequence kernels against torch 2.x modules in eval mode, weights copied in.

Every kernel is built the way a runtime builds it: the registered factory, called with a
``trama.Node`` and ``trama.Parameter`` objects whose slot names are torch's ``state_dict`` keys
with ``.`` replaced by ``_`` (checked against the catalog's spec, so a misnamed slot fails here
rather than silently falling back to a default). float32 throughout; agreement within 1e-5
relative and absolute, the tolerance of two float32 implementations with different summation
orders. Streaming runs a recurrent layer in chunks through ``step`` and checks that the chunks
reproduce the whole-sequence run and torch.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

import trama
from trama.catalog import standard_registry
from trama.extension import Kernel, StatefulKernel
from trama_numpy._registry import implementations

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}

PORTS = {
    "MultiheadAttention": (("query", "key", "value", "key_padding_mask", "attn_mask"), ("y", "attn_weights")),
    "TransformerEncoderLayer": (("src", "src_mask", "src_key_padding_mask"), ("y",)),
    "GRU": (("x", "h0"), ("y", "h_n")),
    "LSTM": (("x", "h0", "c0"), ("y", "h_n", "c_n")),
}


def build(op: str, module: torch.nn.Module, hypers: Mapping[str, Any], connected: tuple[str, ...]) -> Any:
    """The numpy kernel of ``module``, through the registered factory, as a runtime builds it."""
    spec = standard_registry()[op]
    parameters = {
        key.replace(".", "_"): trama.Parameter(trama.Tensor.from_array(value.detach().numpy()), learnable=True)
        for key, value in module.state_dict().items()
    }
    parameters.update({slot: trama.Parameter(value) for slot, value in hypers.items()})
    for slot, parameter in parameters.items():
        schema = spec.slot(slot)
        assert schema is not None, f"{op} has no slot {slot!r}"
        assert schema.accepts(parameter.value), f"{op} slot {slot!r} refuses {parameter.value!r}"
    inputs, outputs = PORTS[op]
    assert set(connected) <= set(inputs)
    node = trama.Node(
        id="m",
        op=op,
        inputs={port: trama.Ref(trama.INPUT, port) for port in connected},
        outputs=list(outputs),
        parameters={slot: f"m.{slot}" for slot in parameters},
    )
    return implementations()[op](node, children={}, parameters=parameters)


def numpy_inputs(values: Mapping[str, torch.Tensor | None]) -> dict[str, np.ndarray]:
    return {port: value.numpy() for port, value in values.items() if value is not None}


def check(actual: Any, expected: torch.Tensor) -> None:
    np.testing.assert_allclose(actual, expected.detach().numpy(), **TOLERANCE)


# --------------------------------------------------------------------------------------------
# MultiheadAttention
# --------------------------------------------------------------------------------------------

# (constructor arguments, forward flags, batch size (None: unbatched), L, S, masks to give)
MHA_CASES = {
    "seq-first": ({"embed_dim": 8, "num_heads": 2}, {}, 3, 4, 5, ()),
    "batch-first-kdim-vdim-no-bias-bool-masks": (
        {"embed_dim": 8, "num_heads": 4, "kdim": 5, "vdim": 6, "bias": False, "batch_first": True},
        {"average_attn_weights": False},
        2,
        3,
        6,
        ("bool_attn", "bool_padding"),
    ),
    "bias-kv-zero-attn-float-masks": (
        {"embed_dim": 6, "num_heads": 3, "add_bias_kv": True, "add_zero_attn": True},
        {},
        2,
        4,
        3,
        ("float_attn_3d", "float_padding"),
    ),
    "unbatched-no-weights": ({"embed_dim": 8, "num_heads": 2}, {"need_weights": False}, None, 4, 4, ("bool_attn",)),
    "unbatched-per-head-mask": (
        {"embed_dim": 4, "num_heads": 2, "batch_first": True},
        {"average_attn_weights": False},
        None,
        3,
        5,
        ("float_attn_3d", "float_padding"),  # torch deprecates mixing a bool and a float mask
    ),
}


def _masks(kinds: tuple[str, ...], n: int | None, heads: int, length: int, source: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    masks: dict[str, torch.Tensor] = {}
    for kind in kinds:
        if kind == "bool_attn":
            mask = torch.rand(length, source, generator=generator) < 0.3
            mask[:, 0] = False  # every query keeps a key: no NaN rows here
            masks["attn_mask"] = mask
        elif kind == "float_attn_3d":
            masks["attn_mask"] = torch.randn((n or 1) * heads, length, source, generator=generator)
        elif kind == "bool_padding":
            mask = torch.zeros((n, source) if n else (source,), dtype=torch.bool)
            mask[..., -2:] = True
            masks["key_padding_mask"] = mask
        elif kind == "float_padding":
            masks["key_padding_mask"] = torch.randn((n, source) if n else (source,), generator=generator)
    return masks


@pytest.mark.parametrize("case", MHA_CASES)
def test_multihead_attention_matches_torch(case: str) -> None:
    arguments, flags, n, length, source, mask_kinds = MHA_CASES[case]
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(**arguments).eval()
    if arguments.get("add_bias_kv"):  # torch initialises them to zeros-ish normals; make them count
        with torch.no_grad():
            module.bias_k.normal_()
            module.bias_v.normal_()
    e, kdim, vdim = arguments["embed_dim"], arguments.get("kdim", arguments["embed_dim"]), arguments.get("vdim")
    vdim = vdim or e

    def shaped(length: int, features: int) -> torch.Tensor:
        if n is None:
            return torch.randn(length, features)
        return torch.randn(n, length, features) if arguments.get("batch_first") else torch.randn(length, n, features)

    query, key, value = shaped(length, e), shaped(source, kdim), shaped(source, vdim)
    masks = _masks(mask_kinds, n, arguments["num_heads"], length, source)
    with torch.no_grad():
        y, weights = module(query, key, value, **masks, **flags)

    hypers = {**arguments, **flags}
    kernel = build("MultiheadAttention", module, hypers, ("query", "key", "value", *masks))
    assert isinstance(kernel, Kernel)
    outputs = kernel(numpy_inputs({"query": query, "key": key, "value": value, **masks}))
    assert outputs["y"].dtype == np.float32
    check(outputs["y"], y)
    if weights is None:
        assert outputs["attn_weights"] is None
    else:
        check(outputs["attn_weights"], weights)


def test_multihead_attention_self_attention_fast_path() -> None:
    """Batch-first self-attention in eval mode without grad takes torch's fused native kernel."""
    torch.manual_seed(2)
    module = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(3, 7, 16)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[1, 5:] = True
    with torch.no_grad():
        y, weights = module(x, x, x, key_padding_mask=padding)
    kernel = build("MultiheadAttention", module, {"embed_dim": 16, "num_heads": 4, "batch_first": True}, ())
    outputs = kernel({"query": x.numpy(), "key": x.numpy(), "value": x.numpy(), "key_padding_mask": padding.numpy()})
    check(outputs["y"], y)
    check(outputs["attn_weights"], weights)


def test_multihead_attention_fully_masked_query_is_nan_as_in_torch() -> None:
    torch.manual_seed(3)
    module = torch.nn.MultiheadAttention(4, 2).eval()
    x = torch.randn(3, 1, 4)
    mask = torch.zeros(3, 3, dtype=torch.bool)
    mask[1] = True  # query 1 may attend to nothing
    with torch.no_grad():
        y, weights = module(x, x, x, attn_mask=mask)
    kernel = build("MultiheadAttention", module, {"embed_dim": 4, "num_heads": 2}, ("query", "key", "value"))
    outputs = kernel({"query": x.numpy(), "key": x.numpy(), "value": x.numpy(), "attn_mask": mask.numpy()})
    assert np.isnan(outputs["attn_weights"][0, 1]).all()
    assert np.isnan(outputs["y"][1]).all()
    np.testing.assert_allclose(outputs["attn_weights"], weights.numpy(), equal_nan=True, **TOLERANCE)
    np.testing.assert_allclose(outputs["y"], y.numpy(), equal_nan=True, **TOLERANCE)


def test_multihead_attention_refuses_inconsistent_slots() -> None:
    module = torch.nn.MultiheadAttention(4, 2, bias=False).eval()
    with pytest.raises(trama.RegistryError, match="in_proj_bias"):  # bias true, but no bias slots
        build("MultiheadAttention", module, {"embed_dim": 4, "num_heads": 2}, ())
    with pytest.raises(trama.RegistryError, match="does not divide"):
        build("MultiheadAttention", module, {"embed_dim": 4, "num_heads": 3, "bias": False}, ())


# --------------------------------------------------------------------------------------------
# TransformerEncoderLayer
# --------------------------------------------------------------------------------------------

ENCODER_CASES = {
    "post-norm-relu-seq-first": ({}, 3, ()),
    "pre-norm-gelu-batch-first-padding": (
        {"norm_first": True, "activation": "gelu", "batch_first": True, "layer_norm_eps": 1e-6},
        2,
        ("bool_padding",),
    ),
    "no-bias-unbatched-causal-float-mask": ({"bias": False}, None, ("causal",)),
    "batch-first-relu-both-bool-masks": ({"batch_first": True}, 3, ("bool_attn", "bool_padding")),
    "pre-norm-relu-seq-first-per-head-mask": ({"norm_first": True}, 2, ("float_attn_3d",)),
}


@pytest.mark.parametrize("case", ENCODER_CASES)
def test_transformer_encoder_layer_matches_torch(case: str) -> None:
    options, n, mask_kinds = ENCODER_CASES[case]
    d_model, nhead, length = 8, 2, 5
    torch.manual_seed(4)
    module = torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=16, **options).eval()
    with torch.no_grad():  # make the norms' affine parameters count
        for norm in (module.norm1, module.norm2):
            norm.weight.normal_()
            if norm.bias is not None:
                norm.bias.normal_()
    if n is None:
        src = torch.randn(length, d_model)
    else:
        src = torch.randn(n, length, d_model) if options.get("batch_first") else torch.randn(length, n, d_model)
    masks = _masks(tuple(k for k in mask_kinds if k != "causal"), n, nhead, length, length)
    if "causal" in mask_kinds:
        masks["attn_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(length)
    ports = {"src_mask": masks.get("attn_mask"), "src_key_padding_mask": masks.get("key_padding_mask")}
    with torch.no_grad():
        y = module(src, **ports)

    hypers = {"d_model": d_model, "nhead": nhead, "dim_feedforward": 16, "dropout": 0.1, **options}
    connected = ("src", *(port for port, value in ports.items() if value is not None))
    kernel = build("TransformerEncoderLayer", module, hypers, connected)
    outputs = kernel(numpy_inputs({"src": src, **ports}))
    assert set(outputs) == {"y"}
    assert outputs["y"].shape == tuple(src.shape)
    check(outputs["y"], y)


def test_transformer_encoder_layer_refuses_unknown_activation() -> None:
    module = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)
    with pytest.raises(trama.RegistryError, match="activation"):
        build(
            "TransformerEncoderLayer",
            module,
            {"d_model": 4, "nhead": 2, "dim_feedforward": 8, "activation": "tanh"},
            (),
        )


# --------------------------------------------------------------------------------------------
# GRU and LSTM
# --------------------------------------------------------------------------------------------

# (op, constructor arguments, batch size (None: unbatched), whether h0 (and c0) are given)
RNN_CASES = {
    "gru-one-layer": ("GRU", {}, 3, False),
    "gru-two-layers-bidirectional-batch-first-h0": (
        "GRU",
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
        2,
        True,
    ),
    "gru-no-bias-unbatched-two-layers": ("GRU", {"num_layers": 2, "bias": False}, None, True),
    "lstm-one-layer": ("LSTM", {}, 3, False),
    "lstm-two-layers-bidirectional-batch-first-h0-c0": (
        "LSTM",
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
        2,
        True,
    ),
    "lstm-projection-bidirectional-two-layers": (
        "LSTM",
        {"num_layers": 2, "bidirectional": True, "proj_size": 3},
        2,
        True,
    ),
    "lstm-no-bias-unbatched-bidirectional": ("LSTM", {"bias": False, "bidirectional": True}, None, False),
}

INPUT_SIZE, HIDDEN_SIZE = 4, 5


def _rnn(op: str, arguments: Mapping[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
    module = getattr(torch.nn, op)(INPUT_SIZE, HIDDEN_SIZE, **arguments).eval()
    return module, {"input_size": INPUT_SIZE, "hidden_size": HIDDEN_SIZE, **arguments}


def _initial_states(op: str, module: Any, n: int | None) -> dict[str, torch.Tensor]:
    rows = module.num_layers * (2 if module.bidirectional else 1)
    batch = () if n is None else (n,)
    h0 = torch.randn(rows, *batch, module.proj_size or module.hidden_size)
    if op == "GRU":
        return {"h0": h0}
    return {"h0": h0, "c0": torch.randn(rows, *batch, module.hidden_size)}


def _torch_rnn(op: str, module: Any, x: torch.Tensor, states: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    with torch.no_grad(), warnings.catch_warnings():
        # torch notes that oneDNN lacks projections and falls back to its default kernel
        warnings.filterwarnings("ignore", "LSTM with projections is not supported", UserWarning)
        if op == "GRU":
            y, h_n = module(x, states.get("h0"))
            return {"y": y, "h_n": h_n}
        y, (h_n, c_n) = module(x, (states["h0"], states["c0"]) if states else None)
        return {"y": y, "h_n": h_n, "c_n": c_n}


@pytest.mark.parametrize("case", RNN_CASES)
def test_recurrent_matches_torch(case: str) -> None:
    op, arguments, n, with_states = RNN_CASES[case]
    torch.manual_seed(5)
    module, hypers = _rnn(op, arguments)
    length = 6
    if n is None:
        x = torch.randn(length, INPUT_SIZE)
    else:
        x = torch.randn(n, length, INPUT_SIZE) if arguments.get("batch_first") else torch.randn(length, n, INPUT_SIZE)
    states = _initial_states(op, module, n) if with_states else {}
    expected = _torch_rnn(op, module, x, states)

    kernel = build(op, module, hypers, ("x", *states))
    assert isinstance(kernel, StatefulKernel)
    assert isinstance(kernel, Kernel)
    outputs = kernel(numpy_inputs({"x": x, **states}))
    assert set(outputs) == set(expected)
    for name, value in expected.items():
        assert outputs[name].dtype == np.float32
        check(outputs[name], value)


@pytest.mark.parametrize(
    ("op", "arguments"),
    [("GRU", {"num_layers": 2, "batch_first": True}), ("LSTM", {"num_layers": 2, "proj_size": 3})],
)
def test_streaming_in_chunks_equals_the_whole_sequence(op: str, arguments: Mapping[str, Any]) -> None:
    torch.manual_seed(6)
    module, hypers = _rnn(op, arguments)
    batch_first = arguments.get("batch_first", False)
    x = torch.randn(3, 12, INPUT_SIZE) if batch_first else torch.randn(12, 3, INPUT_SIZE)
    time_axis = 1 if batch_first else 0
    expected = _torch_rnn(op, module, x, {})
    kernel = build(op, module, hypers, ("x",))

    whole, whole_state = kernel.step({"x": x.numpy()}, kernel.initial_state())
    state = kernel.initial_state()
    pieces = []
    for chunk in torch.split(x, [5, 1, 6], dim=time_axis):
        given = state
        outputs, state = kernel.step({"x": chunk.numpy()}, state)
        assert given is None or all(not array.flags.writeable for array in given)
        pieces.append(outputs["y"])
    streamed = np.concatenate(pieces, axis=time_axis)

    np.testing.assert_allclose(streamed, whole["y"], rtol=0, atol=1e-6)
    for name, final, whole_final in zip(kernel.final_ports, state, whole_state, strict=True):
        np.testing.assert_allclose(final, whole_final, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(whole_final, whole[name])
        check(final, expected[name])
    check(streamed, expected["y"])


def test_step_never_mutates_its_state_and_h0_wins() -> None:
    torch.manual_seed(7)
    module, hypers = _rnn("GRU", {})
    kernel = build("GRU", module, hypers, ("x", "h0"))
    x = torch.randn(4, 2, INPUT_SIZE).numpy()
    _, state = kernel.step({"x": x}, None)
    frozen = [array.copy() for array in state]
    h0 = np.random.default_rng(0).standard_normal((1, 2, HIDDEN_SIZE)).astype(np.float32)
    with_h0, _ = kernel.step({"x": x, "h0": h0}, state)  # h0 connected: the carried state is ignored
    np.testing.assert_array_equal(with_h0["y"], kernel({"x": x, "h0": h0})["y"])
    carried, _ = kernel.step({"x": x}, state)
    assert not np.array_equal(carried["y"], with_h0["y"])
    for array, copy in zip(state, frozen, strict=True):
        np.testing.assert_array_equal(array, copy)
    with pytest.raises(trama.ImportModelError, match="shape"):
        kernel.step({"x": x[:, :1]}, state)  # a carried state of batch 2 for a batch of 1


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_bidirectional_refuses_to_continue_from_a_carried_state(op: str) -> None:
    module, hypers = _rnn(op, {"bidirectional": True})
    kernel = build(op, module, hypers, ("x",))
    x = torch.randn(5, 2, INPUT_SIZE).numpy()
    _, state = kernel.step({"x": x}, kernel.initial_state())  # a whole sequence: fine
    with pytest.raises(trama.ImportModelError, match="bidirectional"):
        kernel.step({"x": x}, state)


def test_recurrent_refuses_inconsistent_slots() -> None:
    module, hypers = _rnn("GRU", {"num_layers": 2})
    with pytest.raises(trama.RegistryError, match="weight_ih_l2"):
        build("GRU", module, {**hypers, "num_layers": 3}, ("x",))
    with pytest.raises(trama.RegistryError, match="bias_ih_l0"):
        build("GRU", module, {**hypers, "bias": False}, ("x",))
    with pytest.raises(trama.RegistryError, match="must be 1 … 8"):
        build("GRU", module, {**hypers, "num_layers": 9}, ("x",))
    lstm, lstm_hypers = _rnn("LSTM", {})
    with pytest.raises(trama.RegistryError, match="h0 and c0"):
        build("LSTM", lstm, lstm_hypers, ("x", "h0"))
