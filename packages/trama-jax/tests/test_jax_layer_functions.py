"""trama-jax's kernels of the layer_functions ops: the function forms of the layers (weights on
ports), ``addmm``, and the modules ``Conv3d``, ``ConvTranspose1d`` and ``BatchNorm3d``.

Small cases are computed by hand, the rest compared with torch's own functions and modules
(float32) within 1e-5. Documents run through the ``jax:cpu`` runtime, which compiles them with
``jax.jit``: the ports' shapes are checked while tracing, and a shape that does not fit is a
:class:`trama.ExecutionError` naming the node. The kernels are also called directly under
``jax.jit`` and differentiated with respect to a weight on a port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama
from trama import INPUT, Model, Node, Parameter, Ref, RegistryError, Tensor
from trama_jax import _registry

RTOL = ATOL = 1e-5

#: torch warns that it copies the input for an even kernel with padding "same"; that is its business.
SAME_PADDING_COPIES = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")

T = torch.from_numpy


def document(
    op: str, ports: Mapping[str, np.ndarray], slots: Mapping[str, Any] | None = None, *, constants: tuple[str, ...] = ()
) -> tuple[Model, list[np.ndarray]]:
    """A one-node document of ``op`` (node id ``"op"``), the ports of ``constants`` fed by
    ``constant`` nodes and the others by model inputs (returned in order)."""
    nodes, table, wiring, inputs = [], {}, {}, []
    for port, value in ports.items():
        if port in constants:
            nodes.append(Node(f"c_{port}", "constant", {}, ["y"], {"value": f"c_{port}.value"}))
            table[f"c_{port}.value"] = Parameter(Tensor.from_array(value), learnable=True)
            wiring[port] = Ref(f"c_{port}", "y")
        else:
            wiring[port] = Ref(INPUT, port)
            inputs.append(port)
    for slot, value in (slots or {}).items():
        stored = Tensor.from_array(value) if isinstance(value, np.ndarray) else value
        table[f"op.{slot}"] = Parameter(stored, learnable=isinstance(stored, Tensor) and slot == "weight")
    nodes.append(Node("op", op, wiring, ["y"], {slot: f"op.{slot}" for slot in slots or {}}))
    return Model(inputs, [Ref("op", "y")], nodes, table), [np.asarray(ports[port]) for port in inputs]


def run(op: str, ports: Mapping[str, np.ndarray], slots: Mapping[str, Any] | None = None, **kw: Any) -> np.ndarray:
    model, values = document(op, ports, slots, **kw)
    return np.asarray(trama.runtime_for_name("jax:cpu").prepare(model).run(values)[0])


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got: np.ndarray, want: torch.Tensor | np.ndarray) -> None:
    expected = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_linear_by_hand_and_against_torch() -> None:
    x = np.array([[1, 2], [0, -1]], np.float32)
    weight = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    bias = np.array([0.5, 0, -1], np.float32)
    got = run("linear", {"x": x, "weight": weight, "bias": bias}, constants=("weight",))
    np.testing.assert_array_equal(got, [[1.5, 2, 2], [0.5, -1, -2]])
    x3, w3 = data(2, 3, 4), data(5, 4, seed=1)
    close(run("linear", {"x": x3, "weight": w3}), F.linear(T(x3), T(w3)))


def test_a_weight_that_does_not_fit_is_an_execution_error_naming_the_node() -> None:
    with pytest.raises(trama.ExecutionError, match="last dimension should be 3") as caught:
        run("linear", {"x": data(2, 2), "weight": data(4, 3)})
    assert caught.value.node_id == "op"
    with pytest.raises(trama.ExecutionError, match=r"x has 4 channels, but weight \[6, 3, 1, 1\]"):
        run("conv2d", {"x": data(1, 4, 3, 3), "weight": data(6, 3, 1, 1)})


def test_bilinear_against_torch() -> None:
    ports = {"input1": data(3, 4), "input2": data(3, 2, seed=1), "weight": data(5, 4, 2, seed=2), "bias": data(5)}
    want = F.bilinear(T(ports["input1"]), T(ports["input2"]), T(ports["weight"]), T(ports["bias"]))
    close(run("bilinear", ports), want)


def test_addmm_by_hand_and_its_beta_zero_rule() -> None:
    mat1 = np.array([[1, 2], [3, 4]], np.float32)
    mat2 = np.array([[1, 0, 1], [0, 1, -1]], np.float32)
    bias = np.array([10, 20, 30], np.float32)
    got = run("addmm", {"input": bias, "mat1": mat1, "mat2": mat2}, {"alpha": 2, "beta": 0.5})
    np.testing.assert_array_equal(got, [[7, 14, 13], [11, 18, 13]])
    nan = np.array([[np.nan], [np.inf]], np.float32)
    np.testing.assert_array_equal(run("addmm", {"input": nan, "mat1": mat1, "mat2": mat2}, {"beta": 0}), mat1 @ mat2)


@SAME_PADDING_COPIES
@pytest.mark.parametrize(
    ("dims", "slots"),
    [
        (1, {"padding": "same"}),
        (2, {"stride": [2, 1], "padding": [1, 2], "groups": 2}),
        (2, {"padding": "same", "dilation": [2, 1]}),
        (3, {"stride": [1, 2, 1], "padding": [1, 0, 1], "dilation": [2, 1, 1]}),
    ],
)
def test_conv_against_torch(dims: int, slots: dict[str, Any]) -> None:
    groups = slots.get("groups", 1)
    x = data(2, 4, *[5] * dims)
    weight, bias = data(6, 4 // groups, *[2] * dims, seed=1), data(6, seed=2)
    function = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    got = run(f"conv{dims}d", {"x": x, "weight": weight, "bias": bias}, slots, constants=("weight", "bias"))
    close(got, function(T(x), T(weight), T(bias), **slots))
    close(run(f"conv{dims}d", {"x": x[0], "weight": weight}, slots), function(T(x[0]), T(weight), **slots))


@pytest.mark.parametrize("dims", [1, 2])
def test_conv_transpose_against_torch(dims: int) -> None:
    x, weight, bias = data(2, 4, *([3] * dims)), data(4, 3, *([2] * dims), seed=1), data(6, seed=2)
    slots = {"stride": [2] * dims, "padding": [1] * dims, "output_padding": [1] * dims, "groups": 2}
    function: Any = F.conv_transpose1d if dims == 1 else F.conv_transpose2d
    close(
        run(f"conv_transpose{dims}d", {"x": x, "weight": weight, "bias": bias}, slots),
        function(T(x), T(weight), T(bias), **slots),
    )
    # an input shorter than the kernel, with a stride: spread explicitly (XLA would swap the operands)
    short = data(1, 4, *([1] * dims))
    big = data(4, 3, *([3] * dims), seed=3)
    close(
        run(f"conv_transpose{dims}d", {"x": short, "weight": big}, {"stride": [2] * dims, "groups": 2}),
        function(T(short), T(big), stride=2, groups=2),
    )


def test_conv3d_and_conv_transpose1d_modules_against_torch() -> None:
    torch.manual_seed(0)
    conv = nn.Conv3d(2, 4, (2, 3, 1), stride=(1, 2, 1), padding=1, groups=2, padding_mode="circular").eval()
    slots: dict[str, Any] = {
        "in_channels": 2,
        "out_channels": 4,
        "kernel_size": [2, 3, 1],
        "stride": [1, 2, 1],
        "padding": [1, 1, 1],
        "groups": 2,
        "padding_mode": "circular",
        "weight": conv.state_dict()["weight"].numpy(),
        "bias": conv.state_dict()["bias"].numpy(),
    }
    x = data(2, 2, 3, 4, 2)
    close(run("Conv3d", {"x": x}, slots), conv(T(x)))
    close(run("Conv3d", {"x": x[0]}, slots), conv(T(x[0])))
    transposed = nn.ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2).eval()
    slots = {
        "in_channels": 2,
        "out_channels": 4,
        "kernel_size": [3],
        "stride": [2],
        "padding": [1],
        "output_padding": [1],
        "groups": 2,
        "weight": transposed.state_dict()["weight"].numpy(),
        "bias": transposed.state_dict()["bias"].numpy(),
    }
    close(run("ConvTranspose1d", {"x": x[:, :, 0, 0]}, slots), transposed(T(x[:, :, 0, 0])))


def test_batch_norm_in_both_modes_and_batch_norm3d() -> None:
    x = np.array([[1.0], [3.0]], np.float32)
    np.testing.assert_array_equal(run("batch_norm", {"x": x}, {"training": True, "eps": 0.0}), [[-1.0], [1.0]])
    x5, mean, var = data(2, 3, 2, 2, 2), data(3, seed=1), np.abs(data(3, seed=2)) + 0.5
    ports = {"x": x5, "running_mean": mean, "running_var": var, "bias": data(3, seed=3)}
    want = F.batch_norm(T(x5), T(mean), T(var), None, T(ports["bias"]), False, 0.1, 1e-5)
    close(run("batch_norm", ports, constants=("running_mean", "running_var")), want)
    norm = nn.BatchNorm3d(3).eval()
    norm.load_state_dict({"running_var": T(var)}, strict=False)
    slots = {"num_features": 3, **{k.replace(".", "_"): v.numpy() for k, v in norm.state_dict().items()}}
    close(run("BatchNorm3d", {"x": x5}, slots), norm(T(x5)))


def test_layer_group_and_rms_norm_against_torch() -> None:
    x = data(2, 4, 3, 5)
    w, b = data(3, 5, seed=1), data(3, 5, seed=2)
    close(
        run("layer_norm", {"x": x, "weight": w, "bias": b}, {"normalized_shape": [3, 5]}),
        F.layer_norm(T(x), [3, 5], T(w), T(b)),
    )
    gamma, beta = data(4, seed=3), data(4, seed=4)
    close(
        run("group_norm", {"x": x, "weight": gamma, "bias": beta}, {"num_groups": 2}),
        F.group_norm(T(x), 2, T(gamma), T(beta)),
    )
    close(run("rms_norm", {"x": x}, {"normalized_shape": [5]}), F.rms_norm(T(x), [5]))
    with pytest.raises(trama.ExecutionError, match=r"bias has shape \[4\], expected \[3, 5\]"):
        run("layer_norm", {"x": x, "bias": gamma}, {"normalized_shape": [3, 5]})


def test_embedding_and_dropout() -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    index = np.array([[3, 0], [1, 1]], np.int32)
    np.testing.assert_array_equal(
        run("embedding", {"input": index, "weight": table}, constants=("weight",)), table[index]
    )
    # under jax.jit (the runtime) the indices are unknown while tracing: a row of NaN, never a wrapped row
    assert np.isnan(run("embedding", {"input": np.array([-1], np.int32), "weight": table})).all()
    model, _ = document("embedding", {"input": index, "weight": table})
    kernel = _registry._FACTORIES["embedding"](model.nodes[-1], children={}, parameters={})
    with pytest.raises(trama.ExecutionError, match=r"indices must lie in \[0, 4\)") as caught:
        kernel.apply({}, {"input": jnp.asarray([4]), "weight": jnp.asarray(table)})  # called eagerly: known indices
    assert caught.value.node_id == "op"
    x = data(3, 2)
    np.testing.assert_array_equal(run("dropout", {"x": x}, {"training": True, "p": 0.5}), x)


def test_a_function_form_traces_under_jit_and_differentiates_with_respect_to_its_port() -> None:
    """The weight is an input of ``apply``: ``jax.grad`` reaches it (d/dW Σ x·Wᵀ = Σ_rows x)."""
    model, _ = document("linear", {"x": data(1, 2), "weight": data(3, 2)})
    node = model.nodes[-1]
    kernel = _registry._FACTORIES["linear"](node, children={}, parameters={})
    assert kernel.tensor_slots == ()
    x = jnp.asarray([[1.0, 2.0], [3.0, -1.0]])

    def loss(weight: jax.Array) -> jax.Array:
        return jnp.sum(kernel.apply({}, {"x": x, "weight": weight})["y"])

    grad = jax.jit(jax.grad(loss))(jnp.ones((3, 2)))
    np.testing.assert_array_equal(np.asarray(grad), np.tile([4.0, 1.0], (3, 1)))


@pytest.mark.parametrize(
    ("op", "ports", "slots", "message"),
    [
        ("conv1d", ("x", "weight"), {"padding": "same", "stride": [2]}, 'padding "same" needs every stride to be 1'),
        ("batch_norm", ("x", "running_mean"), {}, "running_mean and running_var must both be connected"),
        ("embedding", ("input", "weight"), {"max_norm": 2.0}, "max_norm must be null"),
    ],
)
def test_bad_settings_are_registry_errors_naming_op_and_node(
    op: str, ports: tuple[str, ...], slots: dict[str, Any], message: str
) -> None:
    model, _ = document(op, {port: data(2, 2) for port in ports}, slots)
    with pytest.raises(RegistryError, match=message) as caught:
        trama.runtime_for_name("jax:cpu").prepare(model)
    assert caught.value.node_id == "op"


# --- weight_norm ----------------------------------------------------------------------------------


def test_weight_norm_by_hand_and_its_zero_norm() -> None:
    v = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    got = run("weight_norm", {"v": v, "g": np.array([[10.0], [1.0]], np.float32)}, constants=("v", "g"))
    np.testing.assert_allclose(got[0], [6.0, 8.0], rtol=1e-6)
    assert np.isnan(got[1]).all()  # 0 · (1 / 0), as torch gives
    whole = run("weight_norm", {"v": np.array([3.0, -4.0], np.float32), "g": np.ones((), np.float32)}, {"dim": -1})
    np.testing.assert_allclose(whole, [0.6, -0.8], rtol=1e-6)  # −1: the whole vector's norm


@pytest.mark.parametrize(
    ("dim", "g_shape"), [(0, (3, 1, 1)), (1, (1, 4, 1)), (2, (1, 1, 5)), (-2, (1, 4, 1)), (-1, ())]
)
def test_weight_norm_against_torch(dim: int, g_shape: tuple[int, ...]) -> None:
    v, g = data(3, 4, 5), data(*g_shape, seed=1)
    close(run("weight_norm", {"v": v, "g": g}, {"dim": dim}), torch._weight_norm(T(v), T(g), dim))


def test_weight_norm_shapes_are_checked_while_tracing() -> None:
    with pytest.raises(trama.ExecutionError, match=r"g has shape \[3\], expected \[3, 1\]") as caught:
        run("weight_norm", {"v": data(3, 4), "g": data(3)})
    assert caught.value.node_id == "op"
    with pytest.raises(trama.ExecutionError, match="empty along dim = 1"):
        run("weight_norm", {"v": np.ones((2, 0), np.float32), "g": np.ones((1, 0), np.float32)}, {"dim": 1})
    with pytest.raises(trama.ExecutionError, match="g has dtype float16 but v has float32"):
        run("weight_norm", {"v": data(3, 4), "g": np.ones((3, 1), np.float16)})


def test_weight_norm_differentiates_with_respect_to_g() -> None:
    """d/dg Σ v·g/‖v‖ = Σ v / ‖v‖ per row: 7/5 for the row [3, 4]."""
    model, _ = document("weight_norm", {"v": data(1, 2), "g": data(1, 1)})
    kernel = _registry._FACTORIES["weight_norm"](model.nodes[-1], children={}, parameters={})
    v = jnp.asarray([[3.0, 4.0]])

    def loss(g: jax.Array) -> jax.Array:
        return jnp.sum(kernel.apply({}, {"v": v, "g": g})["y"])

    grad = jax.jit(jax.grad(loss))(jnp.ones((1, 1)))
    np.testing.assert_allclose(np.asarray(grad), [[1.4]], rtol=1e-6)
