"""trama-jax's ``scaled_dot_product_attention`` against torch 2.x and trama-numpy.

Each case builds the node by hand (``kernel_harness.build``), runs it under ``jax.jit`` and
compares with ``F.scaled_dot_product_attention`` (float32 within 1e-5) and with the numpy
reference kernel: masks of both kinds and several ranks, causal with L ≠ S, grouped heads,
scales, rows without any key (0, not NaN, and a finite gradient), and torch's early return for
empty sizes. Shape problems found while tracing are an ``ExecutionError`` naming the node.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from kernel_harness import Errors, build

import trama

OP = "scaled_dot_product_attention"
ERRORS = Errors()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    yield from ERRORS.report()


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, **slots: Any) -> np.ndarray:
    """The kernel's ``y`` agrees with torch's and with trama-numpy's; returned for further checks."""
    inputs = {"query": q, "key": k, "value": v}
    if mask is not None:
        inputs["attn_mask"] = mask
    built = build(OP, slots, connected=list(inputs))
    y = built.apply(inputs)["y"]
    t = torch.from_numpy
    expected = F.scaled_dot_product_attention(
        t(q), t(k), t(v), attn_mask=None if mask is None else t(mask), **slots
    ).numpy()
    ERRORS.check(OP, y, expected)
    np.testing.assert_allclose(y, built.reference(inputs)["y"], rtol=1e-5, atol=1e-5)
    return np.asarray(y)


@pytest.mark.parametrize(
    ("shapes", "mask", "slots"),
    [
        (((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)), None, {}),
        (((2, 3, 4, 5), (1, 3, 6, 5), (3, 6, 7)), None, {"scale": 0.3}),
        (((2, 1, 4, 5), (1, 3, 6, 5), (2, 3, 6, 2)), (2, 1, 1, 6), {}),
        (((3, 4, 5), (3, 6, 5), (3, 6, 5)), (4, 6), {"scale": -1.0}),
        (((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)), (3, 1, 6), {}),
        (((2, 3, 4, 5), (2, 3, 2, 5), (2, 3, 2, 7)), None, {"is_causal": True}),
        (((4, 5), (6, 5), (6, 3)), None, {"is_causal": True, "scale": 2.0}),
        (((2, 6, 4, 5), (2, 2, 6, 5), (2, 3, 6, 7)), (2, 1, 4, 6), {"enable_gqa": True}),
        (((2, 0), (3, 0), (3, 4)), None, {}),
    ],
)
def test_agrees_with_torch_and_numpy(
    shapes: tuple[tuple[int, ...], ...], mask: tuple[int, ...] | None, slots: dict[str, Any]
) -> None:
    """Each configuration without a mask, or with a bool and with a float mask of that shape."""
    q, k, v = (data(*shape, seed=seed) for seed, shape in enumerate(shapes))
    masks: list[np.ndarray | None] = [None]
    if mask is not None:
        masks = [np.random.default_rng(7).random(mask) < 0.6, data(*mask, seed=7)]
    for m in masks:
        check(q, k, v, m, **slots)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_row_without_any_key_is_zero_with_a_finite_gradient(kind: str) -> None:
    q, k, v = data(2, 3, 4), data(2, 5, 4, seed=1), data(2, 5, 6, seed=2)
    if kind == "bool":
        mask: np.ndarray = np.ones((3, 5), bool)
        mask[1] = False
    else:
        mask = np.zeros((3, 5), np.float32)
        mask[1] = -np.inf
    y = check(q, k, v, mask)
    np.testing.assert_array_equal(y[:, 1], 0.0)

    built = build(OP, {}, connected=["query", "key", "value", "attn_mask"])

    def loss(query: jax.Array) -> jax.Array:
        inputs = {"query": query, "key": jnp.asarray(k), "value": jnp.asarray(v), "attn_mask": jnp.asarray(mask)}
        return jnp.sum(built.kernel.apply({}, inputs)["y"])

    grad = np.asarray(jax.grad(loss)(jnp.asarray(q)))
    assert np.isfinite(grad).all()
    np.testing.assert_array_equal(grad[:, 1], 0.0)


@pytest.mark.parametrize(
    ("q", "k", "v"),
    [((0, 3), (4, 3), (5, 4, 6)), ((2, 3), (5, 0, 3), (5, 0, 6)), ((1, 2, 3), (3, 4, 3), (3, 4, 0))],
)
def test_empty_sizes_return_zeros_shaped_from_the_query(
    q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]
) -> None:
    y = check(data(*q), data(*k, seed=1), data(*v, seed=2))
    assert y.shape == (*q[:-1], v[-1])


def test_sixteen_bit_inputs_keep_their_dtype() -> None:
    q, k, v = (jnp.asarray(data(2, 3, 4, seed=s), jnp.bfloat16) for s in range(3))
    built = build(OP, {})
    y = built.apply({"query": q, "key": k, "value": v})["y"]
    assert y.dtype == jnp.bfloat16
    t = [torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16) for a in (q, k, v)]
    expected = F.scaled_dot_product_attention(t[0], t[1], t[2]).float().numpy()
    np.testing.assert_allclose(np.asarray(y, np.float32), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    ("q", "k", "v", "mask", "slots", "message"),
    [
        ((2, 3), (4, 3), (4, 3), np.zeros((2, 2, 4), np.float32), {}, "does not broadcast to the scores"),
        ((2, 3), (4, 3), (4, 3), np.zeros((2, 4), np.int32), {}, "attn_mask must be bool or of the query's dtype"),
        ((3, 2, 3), (2, 4, 3), (2, 4, 3), None, {"enable_gqa": True}, r"heads of key \(2\) must divide"),
        ((2, 3), (4, 3), (4, 3), None, {"enable_gqa": True}, "at least three dimensions"),
        ((2, 3), (4, 2), (4, 3), None, {}, "do not fit"),
    ],
)
def test_bad_shapes_name_the_node(
    q: tuple[int, ...],
    k: tuple[int, ...],
    v: tuple[int, ...],
    mask: np.ndarray | None,
    slots: dict[str, Any],
    message: str,
) -> None:
    inputs = {"query": data(*q), "key": data(*k), "value": data(*v)}
    if mask is not None:
        inputs["attn_mask"] = mask
    built = build(OP, slots, connected=list(inputs))
    with pytest.raises(trama.ExecutionError, match=message) as info:
        built.apply(inputs)
    assert info.value.node_id == "net.layer"


def test_positive_dropout_is_refused() -> None:
    with pytest.raises(trama.RegistryError, match="dropout_p must be 0"):
        build(OP, {"dropout_p": 0.5})
