"""trama-numpy's kernels of the layer_functions ops: the function forms of the layers (weights on
ports), ``addmm``, and the modules ``Conv3d``, ``ConvTranspose1d`` and ``BatchNorm3d``.

Small cases are computed by hand; the rest is compared with torch's own functions and modules
(float32, eval mode) within 1e-5. Every document is run through the numpy runtime, as a user runs
it, with the weights fed by ``constant`` nodes (what a capture writes) or by model inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama
from trama import INPUT, Model, Node, Parameter, Ref, RegistryError, Tensor

RTOL = ATOL = 1e-5

#: torch warns that it copies the input for an even kernel with padding "same"; that is its business.
SAME_PADDING_COPIES = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


def document(
    op: str,
    ports: Mapping[str, np.ndarray],
    slots: Mapping[str, Any] | None = None,
    *,
    constants: tuple[str, ...] = (),
) -> tuple[Model, list[np.ndarray]]:
    """A one-node document of ``op`` (node id ``"op"``): the ports named in ``constants`` fed by
    ``constant`` nodes, the others by model inputs (returned in order, to run with)."""
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
    model = Model(inputs, [Ref("op", "y")], nodes, table)
    return model, [np.asarray(ports[port]) for port in inputs]


def run(op: str, ports: Mapping[str, np.ndarray], slots: Mapping[str, Any] | None = None, **kw: Any) -> np.ndarray:
    model, values = document(op, ports, slots, **kw)
    return np.asarray(trama.runtime_for_name("numpy").prepare(model).run(values)[0])


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got: np.ndarray, want: torch.Tensor | np.ndarray) -> None:
    expected = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


T = torch.from_numpy


# --- Dense maps and addmm -------------------------------------------------------------------------


@pytest.mark.parametrize("constants", [(), ("weight", "bias")])
def test_linear_by_hand(constants: tuple[str, ...]) -> None:
    x = np.array([[1, 2], [0, -1]], np.float32)
    weight = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    bias = np.array([0.5, 0, -1], np.float32)
    got = run("linear", {"x": x, "weight": weight, "bias": bias}, constants=constants)
    np.testing.assert_array_equal(got, [[1.5, 2, 2], [0.5, -1, -2]])
    np.testing.assert_array_equal(run("linear", {"x": x[0], "weight": weight}), [1, 2, 3])  # 1-d x, no bias


def test_linear_refuses_a_weight_that_does_not_fit_naming_the_node() -> None:
    with pytest.raises(trama.ExecutionError, match=r"linear.*last dimension should be 3") as caught:
        run("linear", {"x": data(2, 2), "weight": data(4, 3)})
    assert caught.value.node_id == "op"
    with pytest.raises(trama.ExecutionError, match="torch refuses a mix"):
        run("linear", {"x": data(2, 3), "weight": data(4, 3).astype(np.float64)})
    with pytest.raises(trama.ExecutionError, match=r"bias has shape \[3\], expected \[4\]"):
        run("linear", {"x": data(2, 3), "weight": data(4, 3), "bias": data(3)})


def test_bilinear_against_torch() -> None:
    ports = {"input1": data(2, 3, 4), "input2": data(2, 3, 2, seed=1), "weight": data(5, 4, 2, seed=2)}
    ports["bias"] = data(5, seed=3)
    want = F.bilinear(T(ports["input1"]), T(ports["input2"]), T(ports["weight"]), T(ports["bias"]))
    close(run("bilinear", ports, constants=("weight", "bias")), want)


def test_addmm_by_hand_and_its_beta_zero_rule() -> None:
    mat1 = np.array([[1, 2], [3, 4]], np.float32)
    mat2 = np.array([[1, 0, 1], [0, 1, -1]], np.float32)
    bias = np.array([10, 20, 30], np.float32)
    got = run("addmm", {"input": bias, "mat1": mat1, "mat2": mat2}, {"alpha": 2, "beta": 0.5}, constants=("input",))
    np.testing.assert_array_equal(got, [[7, 14, 13], [11, 18, 13]])  # 0.5·bias + 2·(mat1 @ mat2)
    nan = np.array([[np.nan], [np.inf]], np.float32)  # beta 0: ignored, NaN and infinity included
    np.testing.assert_array_equal(run("addmm", {"input": nan, "mat1": mat1, "mat2": mat2}, {"beta": 0}), mat1 @ mat2)


def test_addmm_is_gpt2s_conv1d() -> None:
    """``addmm(bias, x, weight)`` with an ``[in, out]`` weight, as GPT-2's Conv1D calls it."""
    x, weight, bias = data(4, 3), data(3, 5, seed=1), data(5, seed=2)
    close(run("addmm", {"input": bias, "mat1": x, "mat2": weight}), torch.addmm(T(bias), T(x), T(weight)))
    with pytest.raises(trama.ExecutionError, match="does not broadcast"):
        run("addmm", {"input": data(4), "mat1": x, "mat2": weight})


# --- Convolutions ---------------------------------------------------------------------------------


@SAME_PADDING_COPIES
def test_conv1d_by_hand_with_uneven_same_padding() -> None:
    x = np.array([[[1, 2, 3, 4]]], np.float32)
    weight = np.array([[[1, -1]]], np.float32)
    np.testing.assert_array_equal(run("conv1d", {"x": x, "weight": weight}, {"stride": [2]}), [[[-1, -1]]])
    # "same" with an even kernel: t = 1, all of it at the end, as torch pads
    same = run("conv1d", {"x": x, "weight": weight}, {"padding": "same"})
    np.testing.assert_array_equal(same, [[[-1, -1, -1, 4]]])
    close(same, F.conv1d(T(x), T(weight), padding="same"))


@SAME_PADDING_COPIES
@pytest.mark.parametrize(
    "slots",
    [
        {},
        {"stride": [2, 1], "padding": [1, 2]},
        {"padding": "same", "dilation": [2, 1]},
        {"groups": 2},
        {"padding": "valid"},
    ],
)
def test_conv2d_against_torch(slots: dict[str, Any]) -> None:
    groups = slots.get("groups", 1)
    x, weight, bias = data(2, 4, 6, 5), data(6, 4 // groups, 3, 2, seed=1), data(6, seed=2)
    want = F.conv2d(T(x), T(weight), T(bias), **slots)
    close(run("conv2d", {"x": x, "weight": weight, "bias": bias}, slots, constants=("weight", "bias")), want)
    close(run("conv2d", {"x": x[0], "weight": weight}, slots), F.conv2d(T(x[0]), T(weight), **slots))  # unbatched


def test_conv3d_against_torch() -> None:
    x, weight = data(1, 2, 4, 5, 3), data(3, 2, 2, 3, 1, seed=1)
    slots = {"stride": [1, 2, 1], "padding": [1, 0, 1], "dilation": [2, 1, 1]}
    want = F.conv3d(T(x), T(weight), stride=[1, 2, 1], padding=[1, 0, 1], dilation=[2, 1, 1])
    close(run("conv3d", {"x": x, "weight": weight}, slots), want)


def test_a_convolution_whose_weight_does_not_fit_x_is_an_error_naming_the_node() -> None:
    with pytest.raises(trama.ExecutionError, match=r"x has 4 channels, but weight \[6, 3, 1, 1\]") as caught:
        run("conv2d", {"x": data(1, 4, 3, 3), "weight": data(6, 3, 1, 1)})
    assert caught.value.node_id == "op"
    with pytest.raises(trama.ExecutionError, match="groups = 4 must divide the weight's 6 output channels"):
        run("conv2d", {"x": data(1, 4, 3, 3), "weight": data(6, 1, 1, 1)}, {"groups": 4})
    with pytest.raises(trama.ExecutionError, match="smaller than the kernel's extent 3"):
        run("conv1d", {"x": data(1, 1, 2), "weight": data(1, 1, 3)})


@pytest.mark.parametrize("dims", [1, 2])
def test_conv_transpose_against_torch(dims: int) -> None:
    x, weight, bias = data(2, 4, *([3] * dims)), data(4, 3, *([2] * dims), seed=1), data(6, seed=2)
    slots = {
        "stride": [2] * dims,
        "padding": [1] * dims,
        "output_padding": [1] * dims,
        "groups": 2,
        "dilation": [1] * dims,
    }
    function: Any = F.conv_transpose1d if dims == 1 else F.conv_transpose2d
    want = function(T(x), T(weight), T(bias), **slots)
    close(run(f"conv_transpose{dims}d", {"x": x, "weight": weight, "bias": bias}, slots), want)


def test_conv3d_and_conv_transpose1d_modules_against_torch() -> None:
    torch.manual_seed(0)
    conv = nn.Conv3d(2, 4, (2, 3, 1), stride=(1, 2, 1), padding=1, groups=2, padding_mode="replicate").eval()
    slots: dict[str, Any] = {
        "in_channels": 2,
        "out_channels": 4,
        "kernel_size": [2, 3, 1],
        "stride": [1, 2, 1],
        "padding": [1, 1, 1],
        "groups": 2,
        "padding_mode": "replicate",
        "weight": conv.state_dict()["weight"].numpy(),
        "bias": conv.state_dict()["bias"].numpy(),
    }
    x = data(2, 2, 3, 4, 2)
    close(run("Conv3d", {"x": x}, slots), conv(T(x)))
    transposed = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1, bias=False).eval()
    slots = {
        "in_channels": 2,
        "out_channels": 3,
        "kernel_size": [3],
        "stride": [2],
        "padding": [1],
        "output_padding": [1],
        "weight": transposed.weight.detach().numpy(),
    }
    close(run("ConvTranspose1d", {"x": x[0, :, 0, 0]}, slots), transposed(T(x[0, :, 0, 0])))


# --- Normalization --------------------------------------------------------------------------------


def test_batch_norm_by_hand_in_both_modes() -> None:
    x = np.array([[1.0], [3.0]], np.float32)  # N = 2, C = 1
    batch = run("batch_norm", {"x": x}, {"training": True, "eps": 0.0})  # μ = 2, σ² = 1
    np.testing.assert_array_equal(batch, [[-1.0], [1.0]])
    ports = {"x": x, "running_mean": np.array([1.0], np.float32), "running_var": np.array([4.0], np.float32)}
    ports["bias"] = np.array([0.5], np.float32)
    got = run("batch_norm", ports, {"eps": 0.0}, constants=("running_mean", "running_var", "bias"))
    np.testing.assert_array_equal(got, [[0.5], [1.5]])


def test_batch_norm_against_torch_for_any_rank() -> None:
    x, mean, var = data(2, 3, 4, 2, 2), data(3, seed=1), np.abs(data(3, seed=2)) + 0.5
    weight = data(3, seed=3)
    want = F.batch_norm(T(x), T(mean), T(var), T(weight), None, False, 0.1, 1e-3)
    close(run("batch_norm", {"x": x, "running_mean": mean, "running_var": var, "weight": weight}, {"eps": 1e-3}), want)
    close(run("batch_norm", {"x": x}, {"training": True}), F.batch_norm(T(x), None, None, training=True))
    with pytest.raises(trama.ExecutionError, match="more than 1 value per channel"):
        run("batch_norm", {"x": data(1, 3)}, {"training": True})


def test_batch_norm3d_against_torch() -> None:
    norm = nn.BatchNorm3d(2).eval()
    norm.load_state_dict(
        {"running_mean": torch.tensor([0.5, -1.0]), "running_var": torch.tensor([2.0, 0.5])}, strict=False
    )
    slots = {"num_features": 2, **{k.replace(".", "_"): v.numpy() for k, v in norm.state_dict().items()}}
    x = data(2, 2, 3, 2, 2)
    close(run("BatchNorm3d", {"x": x}, slots), norm(T(x)))


def test_layer_group_and_rms_norm_against_torch() -> None:
    x = data(2, 4, 3, 5)
    w, b = data(3, 5, seed=1), data(3, 5, seed=2)
    close(
        run("layer_norm", {"x": x, "weight": w, "bias": b}, {"normalized_shape": [3, 5]}, constants=("weight",)),
        F.layer_norm(T(x), [3, 5], T(w), T(b)),
    )
    close(run("layer_norm", {"x": x}, {"normalized_shape": [5], "eps": 0.1}), F.layer_norm(T(x), [5], eps=0.1))
    gamma = data(4, seed=3)
    close(run("group_norm", {"x": x, "weight": gamma}, {"num_groups": 2}), F.group_norm(T(x), 2, T(gamma)))
    close(run("rms_norm", {"x": x, "weight": w}, {"normalized_shape": [3, 5]}), F.rms_norm(T(x), [3, 5], T(w)))
    with pytest.raises(trama.ExecutionError, match=r"weight has shape \[5\], expected \[3, 5\]"):
        run("layer_norm", {"x": x, "weight": w[0]}, {"normalized_shape": [3, 5]})
    with pytest.raises(trama.ExecutionError, match="C divisible by num_groups = 3"):
        run("group_norm", {"x": x}, {"num_groups": 3})


# --- Embedding and dropout ------------------------------------------------------------------------


def test_embedding_by_hand() -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    index = np.array([[3, 0], [1, 1]], np.int32)
    got = run("embedding", {"input": index, "weight": table}, {"padding_idx": -1}, constants=("weight",))
    np.testing.assert_array_equal(got, table[index])
    with pytest.raises(trama.ExecutionError, match=r"indices must lie in \[0, 4\)"):
        run("embedding", {"input": np.array([4]), "weight": table})
    with pytest.raises(trama.ExecutionError, match="padding_idx = 4 must lie in"):
        run("embedding", {"input": index, "weight": table}, {"padding_idx": 4})


def test_dropout_is_the_identity_whatever_training_says() -> None:
    x = data(3, 4)
    np.testing.assert_array_equal(run("dropout", {"x": x}, {"p": 0.9, "training": True}), x)


# --- Settings refused when the document is read ---------------------------------------------------


@pytest.mark.parametrize(
    ("op", "ports", "slots", "message"),
    [
        ("conv2d", ("x", "weight"), {"padding": "same", "stride": [2, 1]}, 'padding "same" needs every stride to be 1'),
        ("conv2d", ("x", "weight"), {"stride": [1]}, "stride must be a list of 2 ints"),
        ("conv_transpose2d", ("x", "weight"), {"stride": [2, 1], "output_padding": [2, 0]}, "output_padding[0] = 2"),
        ("batch_norm", ("x",), {}, "running_mean and running_var must both be connected"),
        ("batch_norm", ("x", "running_mean", "running_var"), {"training": True}, "update them in place"),
        ("embedding", ("input", "weight"), {"max_norm": 1.0}, "max_norm must be null"),
        ("dropout", ("x",), {"p": 1.5}, "p must lie in [0, 1]"),
        ("layer_norm", ("x",), {"normalized_shape": []}, "normalized_shape must be a non-empty list"),
        ("group_norm", ("x",), {"num_groups": 0}, "num_groups must be an int ≥ 1"),
    ],
)
def test_bad_settings_are_registry_errors_naming_op_and_node(
    op: str, ports: tuple[str, ...], slots: dict[str, Any], message: str
) -> None:
    model, _ = document(op, {port: data(2, 2) for port in ports}, slots)
    with pytest.raises(RegistryError) as caught:
        trama.runtime_for_name("numpy").prepare(model)
    assert caught.value.node_id == "op"
    assert f"{op}: " in str(caught.value)
    assert message in str(caught.value)


# --- weight_norm ----------------------------------------------------------------------------------


def test_weight_norm_by_hand() -> None:
    """Each row (``dim`` 0) or column (``dim`` 1) scaled to the norm in ``g``; −1 is the whole tensor."""
    v = np.array([[3.0, 4.0], [0.0, -2.0]], np.float32)
    rows = run("weight_norm", {"v": v, "g": np.array([[10.0], [-1.0]], np.float32)}, constants=("v", "g"))
    np.testing.assert_allclose(rows, [[6.0, 8.0], [0.0, 1.0]], rtol=1e-6)
    columns = run("weight_norm", {"v": v, "g": np.array([[6.0, 1.0]], np.float32)}, {"dim": 1})
    np.testing.assert_allclose(columns, [[6.0, 4 / 20**0.5], [0.0, -2 / 20**0.5]], rtol=1e-6)
    whole = run("weight_norm", {"v": v, "g": np.array(29**0.5, np.float32)}, {"dim": -1})
    np.testing.assert_allclose(whole, v, rtol=1e-6)  # ‖v‖ = √29 over every element
    # −1 on a vector is the norm of the vector, not of each element (which dim 0 would give)
    vector = np.array([3.0, -4.0], np.float32)
    np.testing.assert_allclose(run("weight_norm", {"v": vector, "g": np.ones(1, np.float32)}, {"dim": -1}), [0.6, -0.8])
    np.testing.assert_allclose(run("weight_norm", {"v": vector, "g": np.ones(2, np.float32)}), [1.0, -1.0])


@pytest.mark.parametrize(("dim", "g_shape"), [(0, (3, 1, 1)), (1, (1, 4, 1)), (2, (1, 1, 5)), (-2, (1, 4, 1)),
                                              (-3, (3, 1, 1)), (-1, ()), (-1, (1, 1))])  # fmt: skip
def test_weight_norm_against_torch(dim: int, g_shape: tuple[int, ...]) -> None:
    v, g = data(3, 4, 5), data(*g_shape, seed=1)
    want = torch._weight_norm(torch.from_numpy(v), torch.from_numpy(g), dim)
    got = run("weight_norm", {"v": v, "g": g}, {"dim": dim}, constants=("g",))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.numpy(), rtol=RTOL, atol=ATOL)


def test_weight_norm_of_a_zero_slice_is_nan_as_in_torch() -> None:
    v = np.array([[0.0, 0.0], [1.0, 2.0]], np.float32)
    g = np.array([[1.0], [1.0]], np.float32)
    got = run("weight_norm", {"v": v, "g": g})
    want = torch._weight_norm(torch.from_numpy(v), torch.from_numpy(g), 0).numpy()
    assert np.isnan(want[0]).all()
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    empty = run("weight_norm", {"v": np.zeros((2, 0), np.float32), "g": np.ones((2, 1), np.float32)})
    assert empty.shape == (2, 0)


@pytest.mark.parametrize(
    ("v", "g", "dim", "message"),
    [
        ((3, 4), (3,), 0, r"g has shape \[3\], expected \[3, 1\]"),
        ((3, 4), (1, 3), 0, r"g has shape \[1, 3\], expected \[3, 1\]"),
        ((3, 4), (3, 4), -1, "with dim = -1 .* g must be one element"),
        ((3, 4), (1, 1), 2, r"dim = 2 is out of range for v of shape \[3, 4\]"),
        ((3, 4), (1, 1), -3, "dim = -3 is out of range"),
        ((), (), 0, "v must have at least one dimension"),
        ((0, 3), (0, 1), 0, "empty along dim = 0"),
    ],
)
def test_weight_norm_shapes_that_do_not_fit_are_execution_errors(
    v: tuple[int, ...], g: tuple[int, ...], dim: int, message: str
) -> None:
    with pytest.raises(trama.ExecutionError, match=message) as caught:
        run("weight_norm", {"v": np.ones(v, np.float32), "g": np.ones(g, np.float32)}, {"dim": dim})
    assert "weight_norm (node 'op')" in str(caught.value)


def test_weight_norm_refuses_a_mix_of_dtypes_and_integers() -> None:
    with pytest.raises(trama.ExecutionError, match="g has dtype float64 but v has float32; torch refuses a mix"):
        run("weight_norm", {"v": data(2, 2), "g": np.ones((2, 1))})
    with pytest.raises(trama.ExecutionError, match="v must be a floating-point array"):
        run("weight_norm", {"v": np.ones((2, 2), np.int64), "g": np.ones((2, 1), np.int64)})


def test_weight_norm_dim_must_be_an_int() -> None:
    model, _ = document("weight_norm", {"v": data(2, 2), "g": data(2, 1)}, {"dim": 0.5})
    with pytest.raises(RegistryError, match="'dim' of op 'weight_norm' must be int") as caught:
        trama.runtime_for_name("numpy").prepare(model)
    assert caught.value.node_id == "op"
