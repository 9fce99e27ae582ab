"""Where a lowering is written so that onnxruntime's optimizer fuses it (a ReLU into the
convolution or matrix product before it, the erf form of GELU into one ``Gelu`` kernel, a
``where`` with a number in the second branch as one ``Where``), the fused model still computes the
catalog's values: NaN and signed zeros where the catalog keeps them. And ``Hardshrink``, which is
not ONNX's ``Shrink``, keeps NaN and float64 values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama import INPUT, Model, Node, Parameter, Ref
from trama.format import numpy_dtype
from trama_onnx import OnnxRuntime


def _run(model: Model, *inputs: np.ndarray, functions: bool = True) -> list[np.ndarray]:
    return OnnxRuntime(functions=functions).prepare(model).run(list(inputs))


def _one_leaf(op: str, inputs: dict[str, Ref], slots: dict[str, object]) -> Model:
    """A model of the one node ``root``, each input a model input of the same name."""
    table = {f"root.{slot}": Parameter(value) for slot, value in slots.items()}
    node = Node("root", op, dict(inputs), ["y"], {slot: f"root.{slot}" for slot in slots})
    return Model(list(inputs), [Ref("root", "y")], [node], table)


class _ConvStack(nn.Module):
    """Convolution, batch norm and ReLU, a residual add and ReLU, then a linear map and ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.relu(self.conv2(y) + y)
        return torch.relu(self.fc(y.mean((2, 3))))


@pytest.mark.parametrize("functions", [True, False])
def test_a_relu_fused_into_a_convolution_keeps_nan(functions: bool) -> None:
    torch.manual_seed(0)
    network = _ConvStack().eval()
    x = torch.randn(2, 8, 10, 10)
    document = trama.export_model(network, inputs=["x"], outputs=["y"], example_inputs=(x,))
    x[0, 0, 4, 4] = math.nan  # spreads to part of sample 0, never to sample 1
    with torch.no_grad():
        expected = network(x).numpy()
    (got,) = _run(document, x.numpy(), functions=functions)
    assert np.isnan(expected[0]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_relu_keeps_nan_and_infinities_in_every_dtype(dtype: str) -> None:
    special = [math.nan, -math.inf, math.inf, -0.0, 0.0, -1.5, 2.5] if dtype != "int32" else [-3, 0, 4]
    x = np.asarray(special * 3, dtype=dtype)
    model = _one_leaf("ReLU", {"x": Ref(INPUT, "x")}, {})
    (got,) = _run(model, x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, np.where(x < 0, 0, x).astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])  # onnxruntime has no float64 Erf
def test_gelu_is_the_erf_formula(dtype: str) -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200) * 4, [math.nan, math.inf, 0.0, -0.0, -30.0, 1e-30]])
    x = values.astype(numpy_dtype(dtype))
    (got,) = _run(_one_leaf("GELU", {"x": Ref(INPUT, "x")}, {}), x)
    assert got.dtype == x.dtype
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        exact = 0.5 * wide * (1 + np.asarray([math.erf(value / math.sqrt(2)) for value in wide]))
    t = {"float32": 1e-6, "float16": 2**-10, "bfloat16": 2**-7}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=t, atol=t, equal_nan=True)


def test_a_linear_map_and_gelu_give_torchs_values() -> None:
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 3)).eval()
    x = torch.randn(2, 5, 6)
    document = trama.export_model(network, inputs=["x"], outputs=["y"], example_inputs=(x,))
    with torch.no_grad():
        expected = network(x).numpy()
    (got,) = _run(document, x.numpy())
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("other", [-1e9, 2.5])
def test_where_keeps_a_negative_zero_taken_from_x(other: float) -> None:
    """``where(c, x, number)`` is lowered with its branches swapped (onnxruntime's ``Where`` loses
    the sign of a zero it takes from its first branch)."""
    condition = np.array([True, True, False, True, False, True])
    x = np.array([-0.0, 0.0, -0.0, math.nan, 1.0, -2.0], np.float32)
    model = _one_leaf("where", {"condition": Ref(INPUT, "condition"), "x": Ref(INPUT, "x")}, {"other": other})
    (got,) = _run(model, condition, x)
    expected = np.where(condition, x, np.float32(other))
    np.testing.assert_array_equal(got, expected)
    assert list(np.signbit(got)) == list(np.signbit(expected))


def test_where_of_two_tensors_keeps_the_sign_of_either_zero() -> None:
    condition = np.array([True, False, True, False])
    x = np.array([-0.0, -0.0, 0.0, 1.0], np.float32)
    other = np.array([0.0, -0.0, -0.0, -0.0], np.float32)
    model = _one_leaf(
        "where", {"condition": Ref(INPUT, "condition"), "x": Ref(INPUT, "x"), "other": Ref(INPUT, "other")}, {}
    )
    (got,) = _run(model, condition, x, other)
    assert list(np.signbit(got)) == list(np.signbit(np.where(condition, x, other)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("lambd", [0.5, 0.1, -1.0])
def test_hardshrink_is_torchs(dtype: str, lambd: float) -> None:
    bound = float(np.asarray(lambd).astype(dtype))
    values = [math.nan, math.inf, -math.inf, -0.0, 0.0, bound, -bound, 0.6, -0.6, 0.1, 1e-3, 0.09997, 0.10001]
    x = np.asarray(values, dtype=dtype)
    model = _one_leaf("Hardshrink", {"x": Ref(INPUT, "x")}, {"lambd": lambd})
    (got,) = _run(model, x)
    expected = torch.nn.functional.hardshrink(torch.from_numpy(x), lambd).numpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, expected)
    assert list(np.signbit(got)) == list(np.signbit(expected))
    (function,) = _run(_one_leaf("hardshrink", {"x": Ref(INPUT, "x")}, {"lambd": lambd}), x)
    np.testing.assert_array_equal(function, expected)


@pytest.mark.parametrize(("op", "low", "high"), [("ReLU6", 0.0, 6.0), ("Hardtanh", -0.5, 2.0)])
def test_the_clips_keep_nan_and_clip_infinities(op: str, low: float, high: float) -> None:
    x = np.asarray([math.nan, math.inf, -math.inf, -0.0, 0.0, 7.0, -2.0, 1.25, -0.25] * 3, np.float32)
    slots: dict[str, object] = {} if op == "ReLU6" else {"min_val": low, "max_val": high}
    (got,) = _run(_one_leaf(op, {"x": Ref(INPUT, "x")}, slots), x)
    expected = torch.nn.functional.hardtanh(torch.from_numpy(x), low, high).numpy()
    np.testing.assert_array_equal(got, expected)


def test_a_clamp_from_zero_keeps_nan() -> None:
    x = np.asarray([math.nan, math.inf, -math.inf, -1.0, 0.0, 2.5], np.float32)
    (got,) = _run(_one_leaf("clamp", {"x": Ref(INPUT, "x")}, {"min": 0.0}), x)
    np.testing.assert_array_equal(got, np.asarray([math.nan, math.inf, 0.0, 0.0, 0.0, 2.5], np.float32))
