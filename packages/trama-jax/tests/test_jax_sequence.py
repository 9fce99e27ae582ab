"""trama-jax's sequence kernels (attention, encoder layer, GRU, LSTM) against torch 2.x and trama-numpy.

As in ``test_jax_layers``: nodes read from torch modules (``kernel_harness.torch_slots``), kernels
from the registered factories, ``apply`` under ``jax.jit`` (a few cases also eagerly), float32
within 1e-5 relative and absolute of torch in eval mode and of trama-numpy's reference. The
recurrent kernels are also streamed: a sequence run in chunks through a jitted ``step``, the state
threaded from one call to the next as a runtime's ``State`` threads it, gives the outputs of the
whole sequence.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from kernel_harness import ATOL, RTOL, Built, Errors, assert_gradients_match, build, kernel_factories, torch_slots

import trama
from trama_jax import sequence

ERRORS = Errors()


report_errors = ERRORS.fixture()


def test_the_registry_serves_these_factories() -> None:
    factories = kernel_factories()
    assert factories["MultiheadAttention"] is sequence.multihead_attention
    assert factories["TransformerEncoderLayer"] is sequence.transformer_encoder_layer
    assert factories["GRU"] is sequence.gru
    assert factories["LSTM"] is sequence.lstm


def as_numpy(values: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {port: value.numpy() for port, value in values.items()}


def agree(
    built: Built, inputs: Mapping[str, Any], expected: Mapping[str, torch.Tensor | None], *, eager: bool = False
) -> None:
    """Every output under ``jax.jit`` (and, with ``eager``, op by op) matches torch's and trama-numpy's."""
    reference = built.reference(inputs)
    for jit in (True, False) if eager else (True,):
        outputs = built.apply(inputs, jit=jit)
        assert set(outputs) == set(expected)
        for name, value in expected.items():
            if value is None:
                assert outputs[name] is None, name
                continue
            ERRORS.check(built.node.op, outputs[name], value)
            np.testing.assert_allclose(outputs[name], reference[name], rtol=RTOL, atol=ATOL, err_msg=name)


def mask(kind: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """A ``"bool"`` mask (true: may not attend; the first key always allowed, so no row is fully
    masked) or a ``"float"`` one (added to the scores as it is)."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "float":
        return torch.randn(shape, generator=generator)
    masked = torch.rand(shape, generator=generator) < 0.4
    masked[..., 0] = False
    return masked


def sequence_first(tensor: torch.Tensor, batch_first: bool) -> torch.Tensor:
    """``tensor`` drawn as ``[N, L, F]`` in the layout a module expects."""
    return tensor if batch_first else tensor.transpose(0, 1).contiguous()


# --------------------------------------------------------------------------------------------
# MultiheadAttention
# --------------------------------------------------------------------------------------------

#: Constructor arguments, forward flags, batch size (None: unbatched), query and key lengths, and
#: the masks: attn_mask of kind "bool", "float" (both [L, S]) or "heads" (float [N·H, L, S]), and
#: key_padding_mask "bool" or "float".
ATTENTION: dict[str, dict[str, Any]] = {
    "packed-seq-first-float-mask": {
        "module": {"embed_dim": 6, "num_heads": 3},
        "batch": 2,
        "lengths": (3, 4),
        "attn_mask": "float",
    },
    "kdim-vdim-batch-first-bool-masks-per-head-weights": {
        "module": {"embed_dim": 4, "num_heads": 2, "kdim": 3, "vdim": 5, "batch_first": True},
        "flags": {"average_attn_weights": False},
        "batch": 3,
        "lengths": (2, 5),
        "attn_mask": "bool",
        "key_padding_mask": "bool",
    },
    "bias-kv-without-bias-per-head-float-masks": {
        "module": {"embed_dim": 8, "num_heads": 4, "add_bias_kv": True, "bias": False},
        "batch": 2,
        "lengths": (4, 3),
        "attn_mask": "heads",
        "key_padding_mask": "float",
    },
    "zero-attn-unbatched-no-weights": {
        "module": {"embed_dim": 4, "num_heads": 1, "add_zero_attn": True},
        "flags": {"need_weights": False},
        "batch": None,
        "lengths": (3, 3),
        "key_padding_mask": "bool",
    },
    "unbatched-bias-kv-zero-attn-batch-first": {
        "module": {"embed_dim": 6, "num_heads": 2, "add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
        "flags": {"average_attn_weights": False},
        "batch": None,
        "lengths": (2, 4),
        "attn_mask": "heads",
    },
}


@pytest.mark.parametrize("case", ATTENTION)
def test_multihead_attention_matches_torch(case: str) -> None:
    spec = ATTENTION[case]
    arguments, flags, n = spec["module"], spec.get("flags", {}), spec["batch"]
    length, source = spec["lengths"]
    torch.manual_seed(21)
    module = torch.nn.MultiheadAttention(**arguments).eval()
    if module.bias_k is not None and module.bias_v is not None:  # torch draws them near zero: make them count
        with torch.no_grad():
            module.bias_k.uniform_(-1, 1)
            module.bias_v.uniform_(-1, 1)
    e, heads = arguments["embed_dim"], arguments["num_heads"]
    features = {"query": (length, e), "key": (source, module.kdim), "value": (source, module.vdim)}
    ports: dict[str, torch.Tensor] = {}
    for port, (steps, width) in features.items():
        drawn = torch.randn(n or 1, steps, width)
        ports[port] = drawn[0] if n is None else sequence_first(drawn, arguments.get("batch_first", False))
    kind = spec.get("attn_mask")
    if kind is not None:
        shape = ((n or 1) * heads, length, source) if kind == "heads" else (length, source)
        ports["attn_mask"] = mask("float" if kind == "heads" else kind, shape, seed=1)
    if "key_padding_mask" in spec:
        ports["key_padding_mask"] = mask(spec["key_padding_mask"], (source,) if n is None else (n, source), seed=2)
    with torch.no_grad():
        y, weights = module(**ports, **flags)
    built = build("MultiheadAttention", torch_slots("MultiheadAttention", module, **arguments, **flags), list(ports))
    agree(built, as_numpy(ports), {"y": y, "attn_weights": weights}, eager=case == "packed-seq-first-float-mask")


def test_multihead_attention_on_torchs_fused_self_attention_path() -> None:
    """Batch-first self-attention in eval mode without grad takes torch's fused native kernel."""
    torch.manual_seed(22)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        y, weights = module(x, x, x, key_padding_mask=padding)
    built = build("MultiheadAttention", torch_slots("MultiheadAttention", module), ["query", "key", "value"])
    ports = {"query": x, "key": x, "value": x, "key_padding_mask": padding}
    agree(built, as_numpy(ports), {"y": y, "attn_weights": weights})


def test_multihead_attention_query_with_every_key_masked_is_nan_as_in_torch() -> None:
    torch.manual_seed(23)
    module = torch.nn.MultiheadAttention(6, 3).eval()
    x = torch.randn(4, 2, 6)
    padding = torch.zeros(2, 4, dtype=torch.bool)
    padding[1] = True  # batch element 1 may attend to nothing
    with torch.no_grad():
        y, weights = module(x, x, x, key_padding_mask=padding)
    built = build("MultiheadAttention", torch_slots("MultiheadAttention", module), ["query", "key", "value"])
    outputs = built.apply(as_numpy({"query": x, "key": x, "value": x, "key_padding_mask": padding}))
    assert np.isnan(outputs["attn_weights"][1]).all()
    assert np.isnan(outputs["y"][:, 1]).all()
    assert not np.isnan(outputs["y"][:, 0]).any()
    ERRORS.check("MultiheadAttention", outputs["attn_weights"], weights)
    ERRORS.check("MultiheadAttention", outputs["y"], y)


def test_multihead_attention_refuses_inconsistent_slots_and_inputs() -> None:
    module = torch.nn.MultiheadAttention(4, 2, bias=False).eval()
    with pytest.raises(trama.RegistryError, match="needs the tensor 'in_proj_bias'"):  # bias true, no bias slots
        build("MultiheadAttention", torch_slots("MultiheadAttention", module), [])
    with pytest.raises(trama.RegistryError, match="num_heads = 3 does not divide embed_dim = 4"):
        build("MultiheadAttention", torch_slots("MultiheadAttention", module, bias=False, num_heads=3), [])
    built = build("MultiheadAttention", torch_slots("MultiheadAttention", module, bias=False), [])
    x = np.zeros((3, 2, 4), np.float32)
    with pytest.raises(trama.ExecutionError, match=r"attn_mask has shape \[2, 2\]") as caught:
        built.apply({"query": x, "key": x, "value": x, "attn_mask": np.zeros((2, 2), bool)})
    assert caught.value.node_id == "net.layer"
    with pytest.raises(trama.ExecutionError, match="attn_mask must be bool or floating point"):
        built.apply({"query": x, "key": x, "value": x, "attn_mask": np.zeros((3, 3), np.int32)})
    with pytest.raises(trama.ExecutionError, match=r"key has shape \[3, 2, 3\], whose last dimension should be 4"):
        built.apply({"query": x, "key": x[..., :3], "value": x})
    with pytest.raises(trama.ExecutionError, match="all be batched"):
        built.apply({"query": x[0], "key": x, "value": x})


# --------------------------------------------------------------------------------------------
# TransformerEncoderLayer
# --------------------------------------------------------------------------------------------

#: Constructor arguments (beyond d_model 6, nhead 2, dim_feedforward 10), batch size (None:
#: unbatched) and the masks: src_mask "causal" (float), "bool" or "heads" (float [N·H, S, S]),
#: src_key_padding_mask "bool".
ENCODER: dict[str, dict[str, Any]] = {
    "post-norm-gelu-seq-first-causal": {"module": {"activation": "gelu"}, "batch": 2, "src_mask": "causal"},
    "pre-norm-relu-batch-first-padding": {
        "module": {"norm_first": True, "batch_first": True, "layer_norm_eps": 1e-4},
        "batch": 3,
        "src_key_padding_mask": "bool",
    },
    "pre-norm-no-bias-unbatched": {"module": {"norm_first": True, "bias": False}, "batch": None},
    "post-norm-batch-first-both-bool-masks": {
        "module": {"batch_first": True},
        "batch": 2,
        "src_mask": "bool",
        "src_key_padding_mask": "bool",
    },
    "pre-norm-gelu-per-head-mask": {
        "module": {"norm_first": True, "activation": "gelu"},
        "batch": 2,
        "src_mask": "heads",
    },
}


@pytest.mark.parametrize("case", ENCODER)
def test_transformer_encoder_layer_matches_torch(case: str) -> None:
    spec = ENCODER[case]
    n, length = spec["batch"], 4
    arguments = {"d_model": 6, "nhead": 2, "dim_feedforward": 10, **spec["module"]}
    torch.manual_seed(31)
    module = torch.nn.TransformerEncoderLayer(**arguments).eval()
    with torch.no_grad():  # the norms' affine parameters away from 1 and 0
        for norm in (module.norm1, module.norm2):
            norm.weight.uniform_(0.5, 1.5)
            if norm.bias is not None:
                norm.bias.uniform_(-1, 1)
    drawn = torch.randn(n or 1, length, 6)
    ports = {"src": drawn[0] if n is None else sequence_first(drawn, arguments.get("batch_first", False))}
    kind = spec.get("src_mask")
    if kind == "causal":
        ports["src_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(length)
    elif kind is not None:
        shape = ((n or 1) * 2, length, length) if kind == "heads" else (length, length)
        ports["src_mask"] = mask("float" if kind == "heads" else kind, shape, seed=3)
    if "src_key_padding_mask" in spec:
        ports["src_key_padding_mask"] = mask("bool", (length,) if n is None else (n, length), seed=4)
    with torch.no_grad():
        y = module(**ports)
    built = build("TransformerEncoderLayer", torch_slots("TransformerEncoderLayer", module, **arguments), list(ports))
    agree(built, as_numpy(ports), {"y": y})


def test_transformer_encoder_layer_refuses_an_unknown_activation() -> None:
    module = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)
    slots = torch_slots("TransformerEncoderLayer", module, d_model=4, nhead=2, dim_feedforward=8, activation="tanh")
    with pytest.raises(trama.RegistryError, match="activation must be one of 'relu', 'gelu', got 'tanh'"):
        build("TransformerEncoderLayer", slots, ["src"])


# --------------------------------------------------------------------------------------------
# GRU and LSTM
# --------------------------------------------------------------------------------------------

#: Constructor arguments (beyond input_size 3, hidden_size 4), batch size (None: unbatched) and
#: whether the initial states are given.
RECURRENT: dict[str, tuple[str, dict[str, Any], int | None, bool]] = {
    "gru-seq-first": ("GRU", {}, 3, False),
    "gru-three-layers-batch-first-h0": ("GRU", {"num_layers": 3, "batch_first": True}, 2, True),
    "gru-bidirectional-no-bias-unbatched": ("GRU", {"bidirectional": True, "bias": False}, None, False),
    "lstm-projection-h0-c0": ("LSTM", {"proj_size": 2}, 3, True),
    "lstm-two-layers-bidirectional-batch-first-projection": (
        "LSTM",
        {"num_layers": 2, "bidirectional": True, "batch_first": True, "proj_size": 3},
        2,
        False,
    ),
    "lstm-three-layers-no-bias-unbatched-h0-c0": ("LSTM", {"num_layers": 3, "bias": False}, None, True),
    "lstm-bidirectional-batch-of-one-h0-c0": ("LSTM", {"bidirectional": True}, 1, True),
}

INPUT, HIDDEN = 3, 4


def recurrent(op: str, arguments: Mapping[str, Any], ports: list[str]) -> tuple[Any, Built]:
    """A torch GRU or LSTM in eval mode and the kernel of its node, ``ports`` connected."""
    module = getattr(torch.nn, op)(INPUT, HIDDEN, **arguments).eval()
    return module, build(op, torch_slots(op, module), ports)


#: The final-state outputs (and so the state) of each recurrent op, in torch's order.
FINALS = {"GRU": ("h_n",), "LSTM": ("h_n", "c_n")}


def initial_states(op: str, module: Any, n: int | None) -> dict[str, torch.Tensor]:
    """``h0`` (and ``c0``) for ``module``, uniform in [−1, 1): ``[D·num_layers, (N,) size]``."""
    rows = module.num_layers * (1 + module.bidirectional)
    sizes = {"h0": module.proj_size or HIDDEN, "c0": HIDDEN}
    ports = ("h0",) if op == "GRU" else ("h0", "c0")
    return {port: torch.rand(rows, *([n] if n else []), sizes[port]) * 2 - 1 for port in ports}


def in_torch(op: str, module: Any, x: torch.Tensor, states: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The module's outputs by trama's output names."""
    given = tuple(states.values())
    with torch.no_grad(), warnings.catch_warnings():
        # torch notes that oneDNN lacks projections and falls back to its default kernel
        warnings.filterwarnings("ignore", "LSTM with projections is not supported", UserWarning)
        y, final = module(x, (given[0] if op == "GRU" else given) if given else None)
    return {"y": y, **dict(zip(FINALS[op], (final,) if op == "GRU" else final, strict=True))}


@pytest.mark.parametrize("case", RECURRENT)
def test_recurrent_matches_torch(case: str) -> None:
    op, arguments, n, with_states = RECURRENT[case]
    torch.manual_seed(41)
    state_ports = ["h0", "c0"][: len(FINALS[op])] if with_states else []
    module, built = recurrent(op, arguments, ["x", *state_ports])
    assert built.kernel.stateful
    drawn = torch.randn(n or 1, 5, INPUT)
    x = drawn[0] if n is None else sequence_first(drawn, arguments.get("batch_first", False))
    states = initial_states(op, module, n) if with_states else {}
    agree(built, as_numpy({"x": x, **states}), in_torch(op, module, x, states), eager=case == "gru-seq-first")


@pytest.mark.parametrize(
    ("op", "arguments", "chunks"),
    [("GRU", {"num_layers": 2, "bias": False}, [4, 1, 6]), ("LSTM", {"proj_size": 2, "batch_first": True}, [3, 8])],
)
def test_streaming_in_chunks_through_step_equals_the_whole_sequence(
    op: str, arguments: Mapping[str, Any], chunks: list[int]
) -> None:
    torch.manual_seed(42)
    module, built = recurrent(op, arguments, ["x"])
    time_axis = 1 if arguments.get("batch_first") else 0
    x = sequence_first(torch.randn(2, sum(chunks), INPUT), bool(time_axis))
    expected = in_torch(op, module, x, {})
    kernel, tensors = built.kernel, built.tensors
    assert kernel.step is not None
    assert kernel.initial_state is not None
    step = jax.jit(kernel.step)  # as a runtime runs it: the state is an argument like any other

    whole, whole_state = step(tensors, {"x": jnp.asarray(x.numpy())}, kernel.initial_state())
    carried = kernel.initial_state()
    pieces = []
    for chunk in torch.split(x, chunks, dim=time_axis):
        outputs, carried = step(tensors, {"x": jnp.asarray(chunk.numpy())}, carried)
        pieces.append(np.asarray(outputs["y"]))
    streamed = np.concatenate(pieces, axis=time_axis)

    assert carried is not None
    np.testing.assert_allclose(streamed, whole["y"], rtol=0, atol=1e-6)
    for name, final, whole_final in zip(FINALS[op], carried, whole_state, strict=True):
        np.testing.assert_allclose(final, whole_final, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(whole_final, whole[name])  # the state is the final outputs
        ERRORS.check(op, final, expected[name])
    ERRORS.check(op, streamed, expected["y"])


def test_connected_initial_states_win_over_the_carried_state() -> None:
    torch.manual_seed(43)
    module, built = recurrent("LSTM", {}, ["x", "h0", "c0"])
    kernel, tensors = built.kernel, built.tensors
    assert kernel.step is not None
    step = jax.jit(kernel.step)
    x = jnp.asarray(torch.randn(3, 2, INPUT).numpy())
    _, carried = step(tensors, {"x": x}, None)
    given = {name: jnp.asarray(value.numpy()) for name, value in initial_states("LSTM", module, 2).items()}
    from_given, _ = step(tensors, {"x": x, **given}, carried)
    np.testing.assert_array_equal(from_given["y"], built.apply({"x": x, **given})["y"])
    continued, _ = step(tensors, {"x": x}, carried)
    assert not np.allclose(continued["y"], from_given["y"])
    with pytest.raises(trama.ExecutionError, match=r"the carried state has shape \[1, 2, 4\], expected \[1, 1, 4\]"):
        step(tensors, {"x": x[:, :1]}, carried)  # a state of batch 2 for a batch of 1


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_bidirectional_refuses_to_continue_from_a_carried_state(op: str) -> None:
    _, built = recurrent(op, {"bidirectional": True}, ["x"])
    kernel, tensors = built.kernel, built.tensors
    assert kernel.step is not None
    step = jax.jit(kernel.step)
    x = jnp.asarray(torch.randn(4, 1, INPUT).numpy())
    _, carried = step(tensors, {"x": x}, None)  # a whole sequence: fine
    with pytest.raises(trama.ExecutionError, match="bidirectional layer cannot continue") as caught:
        step(tensors, {"x": x}, carried)
    assert caught.value.node_id == "net.layer"


def test_recurrent_refuses_inconsistent_slots_and_inputs() -> None:
    module, built = recurrent("GRU", {"num_layers": 2}, ["x"])
    with pytest.raises(trama.RegistryError, match="needs the tensor 'weight_ih_l2' with these settings"):
        build("GRU", torch_slots("GRU", module, num_layers=3), ["x"])
    with pytest.raises(trama.RegistryError, match="has the tensor 'bias_ih_l0'"):
        build("GRU", torch_slots("GRU", module, bias=False), ["x"])
    with pytest.raises(trama.RegistryError, match="num_layers must be 1 … 8 in opset 1, got 9"):
        build("GRU", torch_slots("GRU", module, num_layers=9), ["x"])
    lstm = torch.nn.LSTM(INPUT, HIDDEN)
    with pytest.raises(trama.RegistryError, match="connects only one of h0 and c0"):
        build("LSTM", torch_slots("LSTM", lstm), ["x", "c0"])
    with pytest.raises(trama.ExecutionError, match="x should be"):
        built.apply({"x": np.zeros((5, 2, INPUT + 1), np.float32)})


def test_gru_gradients_with_respect_to_the_tensors_match_torch() -> None:
    torch.manual_seed(44)
    module, built = recurrent("GRU", {"num_layers": 2, "bidirectional": True}, ["x"])
    x = torch.randn(6, 2, INPUT)
    weights = torch.randn(6, 2, 2 * HIDDEN)

    def loss(tensors: Mapping[str, jax.Array]) -> jax.Array:
        outputs = built.kernel.apply(tensors, {"x": jnp.asarray(x.numpy())})
        return jnp.sum(outputs["y"] * jnp.asarray(weights.numpy())) + jnp.sum(outputs["h_n"])

    grads = jax.jit(jax.grad(loss))(built.tensors)
    y, h_n = module(x)
    assert_gradients_match(grads, module, (y * weights).sum() + h_n.sum())
