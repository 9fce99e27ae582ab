"""The numpy kernels of the opset-2 activations against torch, the catalog's reference semantics.

Each activation is checked in both forms (``ReLU6`` and ``relu6``) on float32 values spanning
both branches, the kinks, the far tails and IEEE special values, within 1e-5; then what the specs
single out: settings compared in ``x``'s dtype, PReLU's channel layout and weight checks, GLU's
halves, signed zeros, 16-bit dtypes, integer inputs, and the settings the core refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trama import INPUT, Node, Parameter, Ref, RegistryError, Tensor
from trama_numpy._registry import implementations

FACTORIES = implementations()

#: Both branches, the kinks of the clamps and shrinks, the tails, and the special values.
X = np.concatenate(
    [
        np.random.default_rng(0).standard_normal(44).astype(np.float32) * 4,
        np.array([-40, -25, -6, -3, -1, -0.5, -0.0, 0, 0.5, 1, 3, 6, 25, 40], np.float32),
        np.array([np.nan, np.inf, -np.inf, 1e-3, -1e-3, 0.1], np.float32),
    ]
).reshape(2, 4, 8)


def run(op: str, inputs: dict[str, Any], **slots: Any) -> Any:
    """``op``'s kernel built from its registered factory with ``slots``, run on ``inputs``."""
    parameters = {
        name: Parameter(Tensor.from_array(value) if isinstance(value, np.ndarray) else value)
        for name, value in slots.items()
    }
    node = Node(
        id="act",
        op=op,
        inputs={port: Ref(INPUT, port) for port in inputs},
        outputs=["y"],
        parameters={name: name for name in slots},
    )
    kernel = FACTORIES[op](node, children={}, parameters=parameters)
    return kernel(inputs)["y"]


Reference = Callable[[torch.Tensor], torch.Tensor]
#: (module op, function op, slots, torch's computation)
CASES: list[tuple[str, str, dict[str, Any], Reference]] = [
    ("ReLU6", "relu6", {}, F.relu6),
    ("Hardtanh", "hardtanh", {}, F.hardtanh),
    ("Hardtanh", "hardtanh", {"min_val": -2.5, "max_val": 0.1}, lambda t: F.hardtanh(t, -2.5, 0.1)),
    ("Hardsigmoid", "hardsigmoid", {}, F.hardsigmoid),
    ("Mish", "mish", {}, F.mish),
    ("SELU", "selu", {}, F.selu),
    ("CELU", "celu", {}, F.celu),
    ("CELU", "celu", {"alpha": 0.3}, lambda t: F.celu(t, 0.3)),
    ("CELU", "celu", {"alpha": -2.0}, lambda t: F.celu(t, -2.0)),
    ("GLU", "glu", {}, F.glu),
    ("GLU", "glu", {"dim": 1}, lambda t: F.glu(t, 1)),
    ("LogSigmoid", "logsigmoid", {}, F.logsigmoid),
    ("Softsign", "softsign", {}, F.softsign),
    ("Tanhshrink", "tanhshrink", {}, F.tanhshrink),
    ("Hardshrink", "hardshrink", {}, F.hardshrink),
    ("Hardshrink", "hardshrink", {"lambd": 0.1}, lambda t: F.hardshrink(t, 0.1)),
    ("Hardshrink", "hardshrink", {"lambd": -1.0}, lambda t: F.hardshrink(t, -1.0)),
    ("Softshrink", "softshrink", {}, F.softshrink),
    ("Softshrink", "softshrink", {"lambd": 0.1}, lambda t: F.softshrink(t, 0.1)),
    ("Threshold", "threshold", {"threshold": 0.1, "value": -7.0}, lambda t: F.threshold(t, 0.1, -7.0)),
    ("Softmin", "softmin", {"dim": 2}, lambda t: F.softmin(t, 2)),
    ("Softmin", "softmin", {"dim": None}, lambda t: F.softmin(t, 0)),  # torch's legacy dim for 3 dims
]
IDS = [f"{module}-{'-'.join(map(str, slots.values())) or 'default'}" for module, _, slots, _ in CASES]


@pytest.mark.parametrize(("module", "function", "slots", "reference"), CASES, ids=IDS)
def test_values_match_torch_under_both_names(
    module: str, function: str, slots: dict[str, Any], reference: Reference
) -> None:
    # The softmin's rows would all be NaN with NaN or inf in them: finite values show more.
    x = X if module != "Softmin" else np.nan_to_num(X, nan=0.0, posinf=9.0, neginf=-9.0)
    expected = reference(torch.from_numpy(x)).numpy()
    for op in (module, function):
        actual = run(op, {"x": x}, **slots)
        assert actual.dtype == np.float32
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=op)


def test_prelu_slopes_follow_the_channel_dimension() -> None:
    x = np.array([[[-1.0, 2.0], [-3.0, 0.0]], [[-0.5, -2.0], [4.0, -1.0]]], np.float32)  # [N=2, C=2, L=2]
    weight = np.array([0.5, -2.0], np.float32)
    expected = np.array([[[-0.5, 2.0], [6.0, 0.0]], [[-0.25, -1.0], [4.0, 2.0]]], np.float32)
    np.testing.assert_array_equal(run("PReLU", {"x": x}, num_parameters=2, weight=weight), expected)
    np.testing.assert_array_equal(run("prelu", {"x": x, "weight": weight}), expected)
    # x = 0 gives w · 0: −0 for the negative slope of channel 1, as torch gives.
    zero = run("prelu", {"x": np.zeros((1, 2), np.float32), "weight": weight})
    assert list(np.signbit(zero[0])) == [False, True]
    torch_zero = F.prelu(torch.zeros(1, 2), torch.from_numpy(weight))
    assert list(torch.signbit(torch_zero[0])) == [False, True]


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 4, 3), (2, 4, 0, 2)])
def test_prelu_matches_torch_with_one_or_per_channel_weights(shape: tuple[int, ...]) -> None:
    gen = np.random.default_rng(len(shape))
    x = np.asarray(gen.standard_normal(shape) * 3, np.float32)
    channels = shape[1] if len(shape) >= 2 else 1
    for weight in (
        gen.standard_normal(channels).astype(np.float32),
        np.array([0.25], np.float32),
        np.asarray(-0.75, np.float32),
    ):
        expected = F.prelu(torch.from_numpy(x), torch.from_numpy(weight)).numpy()
        np.testing.assert_array_equal(run("prelu", {"x": x, "weight": weight}), expected)
        if weight.ndim == 1:
            module = run("PReLU", {"x": x}, num_parameters=weight.size, weight=weight)
            np.testing.assert_array_equal(module, expected)


def test_prelu_refuses_a_weight_that_fits_no_channel_count_and_a_dtype_mismatch() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"weight has shape \[2\].*one per channel \(3"):
        run("prelu", {"x": x, "weight": np.ones(2, np.float32)})
    with pytest.raises(ValueError, match=r"weight has shape \[3, 1\]"):
        run("prelu", {"x": x, "weight": np.ones((3, 1), np.float32)})
    with pytest.raises(TypeError, match="weight has dtype float64, but x has float32"):
        run("prelu", {"x": x, "weight": np.ones(3, np.float64)})
    with pytest.raises(ValueError, match=r"one per channel \(1"):  # 1-d x: a single channel
        run("PReLU", {"x": np.zeros(3, np.float32)}, num_parameters=3, weight=np.ones(3, np.float32))
    with pytest.raises(RegistryError, match=r"weight has shape \[2\], but \[num_parameters\] is \[3\]"):
        run("PReLU", {"x": x}, num_parameters=3, weight=np.ones(2, np.float32))


def test_settings_are_compared_in_the_dtype_of_x() -> None:
    """0.1 in float64 is just below float32's 0.1, which torch compares with: float32's 0.1 is
    not above the threshold, is inside Hardshrink's interval, and is not moved by Softshrink."""
    x = np.array([0.1, -0.1, 0.2], np.float32)
    assert float(x[0]) > 0.1  # the premise: float32's 0.1 exceeds float64's
    t = torch.from_numpy(x)
    cases: list[tuple[str, dict[str, Any], torch.Tensor]] = [
        ("threshold", {"threshold": 0.1, "value": 5.0}, F.threshold(t, 0.1, 5.0)),
        ("hardshrink", {"lambd": 0.1}, F.hardshrink(t, 0.1)),
        ("softshrink", {"lambd": 0.1}, F.softshrink(t, 0.1)),
    ]
    for op, slots, expected in cases:
        np.testing.assert_array_equal(run(op, {"x": x}, **slots), expected.numpy(), err_msg=op)
    np.testing.assert_array_equal(
        run("threshold", {"x": x}, threshold=0.1, value=5.0), np.array([5.0, 5.0, 0.2], np.float32)
    )


def test_softshrink_keeps_the_sign_of_zero_and_nan() -> None:
    x = np.array([-0.3, 0.3, -0.0, np.nan], np.float32)
    y = run("Softshrink", {"x": x})
    assert list(np.signbit(y[:3])) == [True, False, True]
    assert np.isnan(y[3])
    assert list(torch.signbit(F.softshrink(torch.from_numpy(x))[:3])) == [True, False, True]


def test_infinities_give_what_the_specs_say() -> None:
    x = np.array([-np.inf, np.inf], np.float32)
    mish = run("mish", {"x": x})
    assert np.isnan(mish[0])
    assert mish[1] == np.inf
    assert np.isnan(run("softsign", {"x": x})).all()
    np.testing.assert_array_equal(run("logsigmoid", {"x": x}), [-np.inf, 0.0])
    np.testing.assert_array_equal(run("tanhshrink", {"x": x}), [-np.inf, np.inf])
    hardswish = run("hardswish", {"x": np.array([-np.inf, -5.0, np.inf], np.float32)})
    assert np.isnan(hardswish[0])  # −inf · 0, not the 0 the opset-1 prose said
    assert hardswish[1] == 0
    assert np.signbit(hardswish[1])
    assert hardswish[2] == np.inf
    assert torch.isnan(F.hardswish(torch.tensor(-np.inf)))


def test_glu_halves_along_dim() -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 6) / 4
    y = run("glu", {"x": x}, dim=1)
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y, x[:, :3] / (1 + np.exp(-x[:, 3:])), rtol=1e-6)
    assert run("GLU", {"x": np.zeros((0, 4), np.float32)}).shape == (0, 2)
    with pytest.raises(ValueError, match="size 3 along dim 0, which must be even"):
        run("glu", {"x": np.zeros((3, 2), np.float32)}, dim=0)
    with pytest.raises(ValueError, match="0-d"):
        run("glu", {"x": np.float32(1.0)})
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        run("GLU", {"x": np.zeros((2, 2), np.float32)}, dim=2)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_floating_dtypes_are_kept(dtype: type) -> None:
    x = X.astype(dtype)
    for op, slots, reference in (
        ("relu6", {}, F.relu6),
        ("hardsigmoid", {}, F.hardsigmoid),
        ("threshold", {"threshold": 0.1, "value": 2.0}, lambda t: F.threshold(t, 0.1, 2.0)),
    ):
        y = run(op, {"x": x}, **slots)
        assert y.dtype == dtype, op
        np.testing.assert_allclose(y, reference(torch.from_numpy(x)).numpy(), rtol=1e-3, equal_nan=True, err_msg=op)


@pytest.mark.parametrize("op", ["relu6", "Hardtanh", "threshold", "Softsign", "tanhshrink", "mish"])
def test_integer_inputs_are_refused_naming_the_node(op: str) -> None:
    slots = {"threshold": 1.0, "value": 0.0} if op == "threshold" else {}
    with pytest.raises(TypeError, match=rf"{op} \(node 'act'\): x must be a floating-point tensor"):
        run(op, {"x": np.array([1, 2], np.int32)}, **slots)


@pytest.mark.parametrize(
    ("op", "slots", "message"),
    [
        ("Hardtanh", {"min_val": 1.0, "max_val": 1.0}, r"min_val \(1.0\) must be less than max_val \(1.0\)"),
        ("hardtanh", {"min_val": 2.0, "max_val": 1.0}, r"min_val \(2.0\) must be at most max_val \(1.0\)"),
        ("CELU", {"alpha": 0.0}, "alpha must not be 0"),
        ("softshrink", {"lambd": -0.5}, "lambd must be ≥ 0"),
        ("Threshold", {"threshold": 1.0}, "the required slot 'value' is missing"),
        ("PReLU", {"num_parameters": 0, "weight": np.ones(0, np.float32)}, "num_parameters must be an int ≥ 1"),
        ("glu", {"dim": 1.5}, "dim must be an int"),
    ],
)
def test_bad_settings_are_registry_errors(op: str, slots: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match=message) as caught:
        run(op, {"x": X}, **slots)
    assert caught.value.node_id == "act"


def test_hardtanh_function_accepts_equal_bounds() -> None:
    np.testing.assert_array_equal(
        run("hardtanh", {"x": X}, min_val=0.5, max_val=0.5),
        F.hardtanh(torch.from_numpy(X), 0.5, 0.5).numpy(),
    )
