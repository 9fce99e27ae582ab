"""trama-jax's activation kernels against torch 2.x: values under ``jax.jit`` (float32 within
1e-5), both names of each op, their slots, and gradients against torch's autograd, where
``jax.nn``'s formulas matter most (no NaN from the branch ``where`` discards, relu's 0 at 0).
The largest errors are printed at the end (``pytest -s``)."""

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


#: Inputs spanning both branches of every activation, the far tails and the kinks.
X = np.concatenate(
    [
        np.random.default_rng(0).standard_normal(40).astype(np.float32) * 4,
        np.array([-40.0, -25.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 19.9, 20.1, 40.0], np.float32),
    ]
).reshape(5, 10)

#: (module op, function op, slots, torch function of a tensor)
CASES: list[tuple[str, str, dict[str, Any], Callable[[torch.Tensor], torch.Tensor]]] = [
    ("ReLU", "relu", {}, F.relu),
    ("LeakyReLU", "leaky_relu", {}, F.leaky_relu),
    ("LeakyReLU", "leaky_relu", {"negative_slope": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
    ("GELU", "gelu", {}, F.gelu),
    ("GELU", "gelu", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    ("SiLU", "silu", {}, F.silu),
    ("Sigmoid", "sigmoid", {}, torch.sigmoid),
    ("Tanh", "tanh", {}, torch.tanh),
    ("Softmax", "softmax", {"dim": 1}, lambda x: F.softmax(x, dim=1)),
    ("Softmax", "softmax", {"dim": -2}, lambda x: F.softmax(x, dim=-2)),
    ("LogSoftmax", "log_softmax", {"dim": 1}, lambda x: F.log_softmax(x, dim=1)),
    ("Softplus", "softplus", {}, F.softplus),
    ("Softplus", "softplus", {"beta": 2.0, "threshold": 5.0}, lambda x: F.softplus(x, beta=2.0, threshold=5.0)),
    ("ELU", "elu", {}, F.elu),
    ("ELU", "elu", {"alpha": 0.5}, lambda x: F.elu(x, alpha=0.5)),
    ("Hardswish", "hardswish", {}, F.hardswish),
]
IDS = [f"{module}-{'-'.join(map(str, slots.values())) or 'default'}" for module, _, slots, _ in CASES]


@pytest.mark.parametrize(("module", "function", "slots", "reference"), CASES, ids=IDS)
def test_values_match_torch_under_both_names(
    module: str, function: str, slots: dict[str, Any], reference: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    expected = reference(torch.from_numpy(X)).numpy()
    for op in (module, function):
        ERRORS.check(op, build(op, slots).apply({"x": X})["y"], expected)


@pytest.mark.parametrize(("module", "function", "slots", "reference"), CASES, ids=IDS)
def test_gradients_match_torch(
    module: str, function: str, slots: dict[str, Any], reference: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """The gradient of a weighted sum of the outputs, so that softmax's is not zero."""
    weights = np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)
    x = torch.from_numpy(X.copy()).requires_grad_(True)
    (expected,) = torch.autograd.grad((reference(x) * torch.from_numpy(weights)).sum(), [x])
    kernel = build(module, slots).kernel
    actual = jax.jit(jax.grad(lambda x: jnp.sum(kernel.apply({}, {"x": x})["y"] * weights)))(X)
    assert np.all(np.isfinite(np.asarray(actual)))
    ERRORS.check(f"{module} gradient", actual, expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_softmax_without_dim_takes_torchs_legacy_dimension(ndim: int) -> None:
    x = np.random.default_rng(ndim).standard_normal((2, 3, 4, 5)[:ndim]).astype(np.float32)
    expected = F.softmax(torch.from_numpy(x), dim=0 if ndim in (0, 1, 3) else 1).numpy()
    ERRORS.check("Softmax", build("Softmax", {"dim": None}).apply({"x": x})["y"], expected)


def test_softmax_of_float16_keeps_the_dtype() -> None:
    x = X.astype(np.float16)
    actual = build("softmax", {"dim": -1}).apply({"x": x})["y"]
    assert actual.dtype == np.float16
    expected = F.softmax(torch.from_numpy(x).float(), dim=-1).half().numpy()
    np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32), rtol=1e-3, atol=1e-4)


def test_relu_keeps_integers_and_nan() -> None:
    ints = np.array([-3, 0, 4], np.int32)
    np.testing.assert_array_equal(build("relu", {}).apply({"x": ints})["y"], np.array([0, 0, 4], np.int32))
    assert np.isnan(build("ReLU", {}).apply({"x": np.array([np.nan], np.float32)})["y"][0])


@pytest.mark.parametrize("op", ["GELU", "sigmoid", "Softmax", "elu"])
def test_integer_inputs_are_refused_naming_the_node(op: str) -> None:
    built = build(op, {})
    with pytest.raises(trama.ExecutionError, match="floating-point") as caught:
        built.apply({"x": np.array([1, 2], np.int32)})
    assert caught.value.node_id == built.node.id


def test_bad_slots_are_refused_when_built() -> None:
    with pytest.raises(trama.RegistryError, match="approximate"):
        build("GELU", {"approximate": "erf"})
    with pytest.raises(trama.ExecutionError, match="out of range"):
        build("softmax", {"dim": 2}).apply({"x": X})
