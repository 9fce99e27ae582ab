"""trama-jax's arrays kernels (:mod:`trama.catalog.arrays`) against torch 2.x.

Each case builds the node by hand (``kernel_harness.build``), runs its kernel under ``jax.jit``
(as runtimes do) and compares with the torch call the op stands for: float32 within 1e-5,
integers and bools exactly. Where torch gives int64 the kernel gives int32 with the same values
(JAX without x64 mode, the documented exception). Shape and dtype errors are
:class:`trama.ExecutionError` naming the node, raised while tracing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from kernel_harness import Errors, build

import trama
from trama_jax.functions import jax_dtype

ERRORS = Errors()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    yield from ERRORS.report()


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def agree(
    op: str,
    slots: Mapping[str, Any],
    inputs: Mapping[str, np.ndarray],
    expected: torch.Tensor,
    connected: Sequence[str] | None = None,
) -> None:
    """The jitted kernel's ``y`` equals torch's, in torch's dtype as JAX holds it."""
    built = build(op, slots, tuple(inputs) if connected is None else connected)
    actual = built.apply(inputs)["y"]
    wanted = expected.numpy()
    ERRORS.check(op, actual, wanted.astype(jax_dtype(wanted.dtype)))


def t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(array))


X = data(3, 4)
INDEX = np.array([[2, 0, 1, 3], [1, 1, 0, 0]], np.int64)

#: ``(op, slots, inputs, torch's result)``: every op once or more.
CASES: list[tuple[str, dict[str, Any], dict[str, np.ndarray], Callable[[], torch.Tensor]]] = [
    ("expand", {"size": [2, -1, 4]}, {"x": X[:, :1]}, lambda: t(X[:, :1]).expand(2, -1, 4)),
    ("gather", {"dim": 1}, {"x": X, "index": INDEX}, lambda: torch.gather(t(X), 1, t(INDEX))),
    ("gather", {"dim": 0}, {"x": X, "index": INDEX[:, :2] % 3}, lambda: torch.gather(t(X), 0, t(INDEX[:, :2] % 3))),
    (
        "index_select",
        {"dim": -1},
        {"x": X, "index": np.array([3, 0, 3], np.int32)},
        lambda: torch.index_select(t(X), -1, t(np.array([3, 0, 3], np.int32))),
    ),
    ("cumsum", {"dim": 1}, {"x": X}, lambda: torch.cumsum(t(X), 1)),
    ("cumsum", {"dim": 0}, {"x": X > 0}, lambda: torch.cumsum(t(X > 0), 0)),
    ("cumprod", {"dim": -1}, {"x": X}, lambda: torch.cumprod(t(X), -1)),
    ("triu", {"diagonal": -1}, {"x": X}, lambda: torch.triu(t(X), -1)),
    ("tril", {}, {"x": X > 0}, lambda: torch.tril(t(X > 0))),
    ("roll", {"shifts": [5]}, {"x": X}, lambda: torch.roll(t(X), 5)),
    ("roll", {"shifts": [1, -2], "dims": [0, -1]}, {"x": X}, lambda: torch.roll(t(X), (1, -2), (0, -1))),
    ("flip", {"dims": [-1, 0]}, {"x": X}, lambda: torch.flip(t(X), [-1, 0])),
    ("repeat", {"repeats": [2, 1, 3]}, {"x": X}, lambda: t(X).repeat(2, 1, 3)),
    ("tile", {"dims": [2]}, {"x": X}, lambda: torch.tile(t(X), (2,))),
    ("repeat_interleave", {"repeats": 2, "dim": -1}, {"x": X}, lambda: torch.repeat_interleave(t(X), 2, -1)),
    (
        "repeat_interleave",
        {"repeats": [0, 2, 1], "dim": 0},
        {"x": X},
        lambda: torch.repeat_interleave(t(X), torch.tensor([0, 2, 1]), 0),
    ),
    ("repeat_interleave", {"repeats": [3]}, {"x": X > 0}, lambda: torch.repeat_interleave(t(X > 0), 3)),
    (
        "einsum",
        {"equation": "ij,kj->ik"},
        {"x0": X, "x1": X[:2]},
        lambda: torch.einsum("ij,kj->ik", t(X), t(X[:2])),
    ),
    ("einsum", {"equation": "...j->..."}, {"x0": X}, lambda: torch.einsum("...j->...", t(X))),
    ("min", {"dim": [0, 1], "keepdim": True}, {"x": X}, lambda: torch.amin(t(X), (0, 1), keepdim=True)),
    ("argmin", {"dim": 1}, {"x": X}, lambda: torch.argmin(t(X), 1)),
    ("argmin", {"keepdim": True}, {"x": X}, lambda: torch.argmin(t(X), keepdim=True)),
    ("prod", {"dim": 0}, {"x": X}, lambda: torch.prod(t(X), 0)),
    ("prod", {}, {"x": (X > 0).astype(np.int32) + 1}, lambda: torch.prod(t((X > 0).astype(np.int32) + 1))),
    ("var", {"dim": 1, "correction": 0}, {"x": X}, lambda: torch.var(t(X), 1, correction=0)),
    ("std", {}, {"x": X}, lambda: torch.std(t(X))),
    ("any", {"dim": 1}, {"x": X > 1}, lambda: torch.any(t(X > 1), 1)),
    ("all", {"keepdim": True}, {"x": X}, lambda: torch.all(t(X), dim=None, keepdim=True)),
    ("logsumexp", {"dim": [0, 1]}, {"x": X * 30}, lambda: torch.logsumexp(t(X * 30), (0, 1))),
    ("arange", {"start": 1, "end": 8, "step": 3}, {}, lambda: torch.arange(1, 8, 3)),
    ("arange", {"end": 1.0, "step": 0.25}, {}, lambda: torch.arange(0, 1.0, 0.25)),
    ("full", {"size": [2, 1], "fill_value": -1.5}, {}, lambda: torch.full((2, 1), -1.5)),
    ("zeros", {"size": [3], "dtype": "int32"}, {}, lambda: torch.zeros(3, dtype=torch.int32)),
    ("ones", {"size": [1, 2]}, {}, lambda: torch.ones(1, 2)),
    ("full_like", {"fill_value": 2}, {"x": X}, lambda: torch.full_like(t(X), 2)),
    ("zeros_like", {"dtype": "bool"}, {"x": X}, lambda: torch.zeros_like(t(X), dtype=torch.bool)),
    ("ones_like", {}, {"x": X > 0}, lambda: torch.ones_like(t(X > 0))),
]


@pytest.mark.parametrize(("op", "slots", "inputs", "expected"), CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_kernel_agrees_with_torch(
    op: str, slots: dict[str, Any], inputs: dict[str, np.ndarray], expected: Callable[[], torch.Tensor]
) -> None:
    agree(op, slots, inputs, expected())


@pytest.mark.parametrize(("k", "dim", "largest"), [(2, -1, True), (3, 0, False), (0, 1, True), (4, 1, False)])
def test_topk_agrees_with_torch_where_nothing_ties(k: int, dim: int, largest: bool) -> None:
    """Random normal values tie with negligible probability, so torch's own order is the catalog's."""
    outputs = build("topk", {"k": k, "dim": dim, "largest": largest}, ("x",)).apply({"x": X})
    values, indices = torch.topk(t(X), k, dim, largest)
    ERRORS.check("topk", outputs["values"], values.numpy())
    ERRORS.check("topk", outputs["indices"], indices.numpy().astype(np.int32))


def test_topk_takes_ties_lower_position_first_and_nan_as_the_largest() -> None:
    x = np.array([2.0, np.nan, 2.0, 5.0, np.nan, 2.0], np.float32)
    largest = build("topk", {"k": 5}, ("x",)).apply({"x": x})
    np.testing.assert_array_equal(largest["indices"], [1, 4, 3, 0, 2])
    least = build("topk", {"k": 3, "largest": False}, ("x",)).apply({"x": x})
    np.testing.assert_array_equal(least["indices"], [0, 2, 5])
    assert largest["indices"].dtype == np.int32  # int64 outside x64 mode


def test_integer_results_are_int32_outside_x64_mode_with_torchs_values() -> None:
    built = build("cumsum", {"dim": 0}, ("x",))
    got = built.apply({"x": np.array([True, True, False])})["y"]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [1, 2, 2])


@pytest.mark.parametrize(
    ("op", "slots", "inputs", "message"),
    [
        ("expand", {"size": [3]}, {"x": X[0]}, "cannot be expanded to 3"),
        ("gather", {"dim": 0}, {"x": X, "index": INDEX[0]}, "index has 1 dimensions, x has 2"),
        ("gather", {"dim": 0}, {"x": X, "index": np.zeros((1, 5), np.int64)}, "is larger than x"),
        ("index_select", {"dim": 0}, {"x": X, "index": X[:1].astype(np.int64)}, "1-D or 0-d"),
        ("triu", {}, {"x": X[0]}, "at least 2 dimensions"),
        ("roll", {"shifts": 1, "dims": 0}, {"x": X[0, 0]}, "a 0-d x has no dimension to roll"),
        ("repeat", {"repeats": [2]}, {"x": X}, "fewer entries"),
        ("flip", {"dims": [0, -2]}, {"x": X}, "name a dimension twice"),
        ("einsum", {"equation": "ij,jk->ik"}, {"x0": X, "x1": X}, "letter 'j' has sizes 4 and 3"),
        ("einsum", {"equation": "ijk->i"}, {"x0": X}, "operand 0 has 2 dimensions"),
        ("min", {"dim": 0}, {"x": X[:0]}, "empty dimension"),
        ("var", {}, {"x": INDEX}, "floating dtype"),
        ("repeat_interleave", {"repeats": [1, 2], "dim": 1}, {"x": X}, "repeats has 2 counts, but x has 4 slices"),
        ("repeat_interleave", {"repeats": 2, "dim": 0}, {"x": X[0, 0]}, "a 0-d x takes dim null only"),
        ("topk", {"k": 5}, {"x": X}, "k 5 is larger than the 4 elements of x along dim -1"),
        ("topk", {"k": 1, "dim": 2}, {"x": X}, "dim 2 is out of range"),
        ("topk", {"k": 1}, {"x": X > 0}, "bools"),
    ],
)
def test_inputs_that_do_not_fit_are_execution_errors_naming_the_node(
    op: str, slots: dict[str, Any], inputs: dict[str, np.ndarray], message: str
) -> None:
    built = build(op, slots, tuple(inputs))
    with pytest.raises(trama.ExecutionError, match=message) as raised:
        built.apply(inputs)
    assert raised.value.node_id == "net.layer"


def test_created_values_do_not_depend_on_tracing() -> None:
    """A creation op's value is computed at build time, so eager and jitted calls agree."""
    built = build("arange", {"start": -1.5, "end": 2.0, "step": 0.7}, ())
    eager, jitted = built.apply({}, jit=False)["y"], built.apply({})["y"]
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_allclose(jitted, torch.arange(-1.5, 2.0, 0.7).numpy(), rtol=1e-6)
