"""The JAX kernels of the opset-2 activations against torch: values under both names (special
values included), gradients, PReLU's trainable weight and channel layout, settings compared in
``x``'s dtype, and the errors that name the node."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from kernel_harness import Errors, build
from torch.nn import functional as F

import trama

ERRORS = Errors()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    yield from ERRORS.report()


#: Both branches, the kinks, the tails, and the special values the specs speak of.
X = np.concatenate(
    [
        np.random.default_rng(0).standard_normal(44).astype(np.float32) * 4,
        np.array([-40, -25, -6, -3, -1, -0.5, -0.0, 0, 0.5, 1, 3, 6, 25, 40], np.float32),
        np.array([np.nan, np.inf, -np.inf, 1e-3, -1e-3, 0.1], np.float32),
    ]
).reshape(2, 4, 8)
#: The finite inputs, for the error log and the gradients.
FINITE = np.nan_to_num(X, nan=0.25, posinf=9.0, neginf=-9.0)

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
    ("CELU", "celu", {"alpha": -2.0}, lambda t: F.celu(t, -2.0)),
    ("GLU", "glu", {}, F.glu),
    ("GLU", "glu", {"dim": 1}, lambda t: F.glu(t, 1)),
    ("LogSigmoid", "logsigmoid", {}, F.logsigmoid),
    ("Softsign", "softsign", {}, F.softsign),
    ("Tanhshrink", "tanhshrink", {}, F.tanhshrink),
    ("Hardshrink", "hardshrink", {"lambd": 0.1}, lambda t: F.hardshrink(t, 0.1)),
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
    expected = reference(torch.from_numpy(FINITE)).numpy()
    for op in (module, function):
        ERRORS.check(op, build(op, slots).apply({"x": FINITE})["y"], expected)


@pytest.mark.parametrize(("module", "function", "slots", "reference"), CASES, ids=IDS)
def test_special_values_match_torch(module: str, function: str, slots: dict[str, Any], reference: Reference) -> None:
    """NaN, ±inf and signed zeros give torch's values (the error log cannot hold infinities)."""
    expected = reference(torch.from_numpy(X)).numpy()
    actual = build(module, slots).apply({"x": X})["y"]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=module)


@pytest.mark.parametrize(("module", "function", "slots", "reference"), CASES, ids=IDS)
def test_gradients_match_torch(module: str, function: str, slots: dict[str, Any], reference: Reference) -> None:
    """The gradient of a weighted sum of the outputs, away from the kinks (where the two
    frameworks may pick different one-sided derivatives)."""
    x_np = FINITE.copy()
    kinks = np.array([0.0, 0.1, 0.5, 1.0, 2.5, 3.0, 6.0])
    x_np[np.isclose(np.abs(x_np)[..., None], kinks, atol=1e-6).any(-1)] += 0.03125
    gen = np.random.default_rng(1)
    out_shape = reference(torch.from_numpy(x_np)).shape
    weights = gen.standard_normal(tuple(out_shape)).astype(np.float32)
    x = torch.from_numpy(x_np.copy()).requires_grad_(True)
    (expected,) = torch.autograd.grad((reference(x) * torch.from_numpy(weights)).sum(), [x])
    kernel = build(module, slots).kernel
    actual = jax.jit(jax.grad(lambda x: jnp.sum(kernel.apply({}, {"x": x})["y"] * weights)))(x_np)
    ERRORS.check(f"{module} gradient", actual, expected.numpy())


def test_prelu_module_weight_is_a_trainable_tensor_slot() -> None:
    module = torch.nn.PReLU(4)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([0.1, -0.5, 2.0, 0.0]))
    built = build("PReLU", {"num_parameters": 4, "weight": module.weight})
    assert built.kernel.tensor_slots == ("weight",)
    x = torch.from_numpy(FINITE)
    ERRORS.check("PReLU", built.apply({"x": FINITE})["y"], module(x))
    weights = np.random.default_rng(2).standard_normal(FINITE.shape).astype(np.float32)
    (expected,) = torch.autograd.grad((module(x) * torch.from_numpy(weights)).sum(), [module.weight])

    def loss(tensors: dict[str, jax.Array]) -> jax.Array:
        return jnp.sum(built.kernel.apply(tensors, {"x": FINITE})["y"] * weights)

    ERRORS.check("PReLU weight gradient", jax.grad(loss)(built.tensors)["weight"], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("weight", [np.float32(0.25), np.array([0.25], np.float32), np.arange(4, dtype=np.float32)])
def test_prelu_function_takes_its_weight_on_a_port(weight: Any) -> None:
    weight = np.asarray(np.asarray(weight, np.float32) - 1.0)
    built = build("prelu", {})
    expected = F.prelu(torch.from_numpy(FINITE), torch.from_numpy(weight))
    ERRORS.check("prelu", built.apply({"x": FINITE, "weight": weight})["y"], expected)


def test_prelu_refuses_a_weight_of_another_count_or_dtype() -> None:
    built = build("prelu", {})
    with pytest.raises(trama.ExecutionError, match=r"weight has shape \[3\]; .* one per channel \(4") as caught:
        built.apply({"x": X, "weight": np.ones(3, np.float32)})
    assert caught.value.node_id == built.node.id
    with pytest.raises(trama.ExecutionError, match="weight has dtype float16, but x has float32"):
        built.apply({"x": X, "weight": np.ones(4, np.float16)})


def test_settings_are_compared_in_the_dtype_of_x() -> None:
    """float32's 0.1 is above float64's 0.1; torch compares with float32's, so 0.1 is not above
    the threshold and not outside Hardshrink's interval."""
    x = np.array([0.1, -0.1, 0.2], np.float32)
    t = torch.from_numpy(x)
    for op, slots, expected in (
        ("threshold", {"threshold": 0.1, "value": 5.0}, F.threshold(t, 0.1, 5.0)),
        ("hardshrink", {"lambd": 0.1}, F.hardshrink(t, 0.1)),
        ("softshrink", {"lambd": 0.1}, F.softshrink(t, 0.1)),
    ):
        np.testing.assert_array_equal(build(op, slots).apply({"x": x})["y"], expected.numpy(), err_msg=op)


def test_hardswish_of_minus_infinity_is_nan_as_in_torch() -> None:
    y = build("Hardswish", {}).apply({"x": np.array([-np.inf, -5.0], np.float32)})["y"]
    assert np.isnan(y[0])
    assert y[1] == 0


def test_glu_of_an_odd_size_or_a_0d_input_is_an_error_naming_the_node() -> None:
    built = build("glu", {"dim": 0})
    with pytest.raises(trama.ExecutionError, match="size 3 along dim 0, which must be even"):
        built.apply({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(trama.ExecutionError, match="0-d"):
        built.apply({"x": np.float32(1.0)})


@pytest.mark.parametrize("op", ["relu6", "Hardtanh", "Threshold", "softsign", "Mish", "glu"])
def test_integer_inputs_are_refused_naming_the_node(op: str) -> None:
    built = build(op, {"threshold": 0.0, "value": 1.0} if op == "Threshold" else {})
    with pytest.raises(trama.ExecutionError, match="floating-point") as caught:
        built.apply({"x": np.array([1, 2], np.int32)})
    assert caught.value.node_id == built.node.id


def test_float16_is_kept() -> None:
    x = X.astype(np.float16)
    y = build("hardsigmoid", {}).apply({"x": x})["y"]
    assert y.dtype == np.float16
    expected = F.hardsigmoid(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y.astype(np.float32), expected.astype(np.float32), atol=1e-3, equal_nan=True)


def test_bad_settings_are_refused_when_built() -> None:
    with pytest.raises(trama.RegistryError, match="min_val"):
        build("Hardtanh", {"min_val": 1.0, "max_val": 1.0})
    with pytest.raises(trama.RegistryError, match="alpha must not be 0"):
        build("celu", {"alpha": 0.0})
    with pytest.raises(trama.RegistryError, match=r"weight has shape \[2\], but \[num_parameters\] is \[3\]"):
        build("PReLU", {"num_parameters": 3, "weight": np.ones(2, np.float32)})
