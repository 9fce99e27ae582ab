"""The numpy ``scaled_dot_product_attention`` against hand-computed values and torch 2.x.

The catalog fixes what torch leaves to its kernels: rows whose every key is masked give 0, a
causal mask is aligned top-left when L ≠ S, grouped heads serve consecutive query heads, and
L, S or Ev of 0 return zeros shaped from the query. Each is asserted here on values worked out
by hand, and then against torch itself over masks, scales and dtypes (float32 within 1e-5).
Bad settings are a ``RegistryError`` naming the node; bad shapes a ``ValueError`` or
``TypeError`` naming it too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trama import INPUT, Node, Parameter, Ref, RegistryError
from trama.format import numpy_dtype
from trama_numpy._registry import implementations

FACTORIES = implementations()
OP = "scaled_dot_product_attention"
BFLOAT16 = numpy_dtype("bfloat16")


def kernel(ports: tuple[str, ...] = ("query", "key", "value"), **slots: Any) -> Any:
    node = Node(
        id="attn",
        op=OP,
        inputs={port: Ref(INPUT, port) for port in ports},
        outputs=["y"],
        parameters={name: name for name in slots},
    )
    return FACTORIES[OP](node, children={}, parameters={name: Parameter(value) for name, value in slots.items()})


def run(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, **slots: Any) -> np.ndarray:
    inputs = {"query": q, "key": k, "value": v}
    if mask is not None:
        inputs["attn_mask"] = mask
    return np.asarray(kernel(tuple(inputs), **slots)(inputs)["y"])


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def torch_sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, **kw: Any) -> np.ndarray:
    t = torch.from_numpy
    result = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=None if mask is None else t(mask), **kw)
    return result.numpy()


# --- Hand-computed ------------------------------------------------------------------------


def test_one_query_two_keys_by_hand() -> None:
    q = np.array([[1.0, 0.0]], np.float32)
    k = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    v = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    s = 1 / math.sqrt(2)  # the default scale 1/√E; scores [s, 0]
    w0 = math.exp(s) / (math.exp(s) + 1)
    expected = [[w0 * 1 + (1 - w0) * 3, w0 * 2 + (1 - w0) * 4]]
    np.testing.assert_allclose(run(q, k, v), expected, rtol=1e-6)
    # scale 0: uniform weights, the mean of the values
    np.testing.assert_allclose(run(q, k, v, scale=0.0), [[2.0, 3.0]], rtol=1e-6)


def test_a_bool_mask_is_true_where_the_key_takes_part() -> None:
    q, k, v = data(1, 3), data(2, 3, seed=1), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_allclose(run(q, k, v, np.array([[False, True]])), [[3.0, 4.0]])
    np.testing.assert_allclose(run(q, k, v, np.array([[True, False]])), [[1.0, 2.0]])


def test_causal_is_aligned_top_left_when_l_differs_from_s() -> None:
    """Query i sees keys 0…i: with L = 2 and S = 3 the first query sees only the first key (a
    bottom-right alignment would let it see two)."""
    q, k = data(2, 4), data(3, 4, seed=1)
    v = np.eye(3, dtype=np.float32)  # y's row is then the row of weights itself
    y = run(q, k, v, is_causal=True)
    np.testing.assert_allclose(y[0], [1.0, 0.0, 0.0])
    assert y[1, 2] == 0
    assert y[1, 0] > 0
    assert y[1, 1] > 0


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_row_without_any_key_is_zero(kind: str) -> None:
    q, k, v = data(2, 3, 4), data(2, 5, 4, seed=1), data(2, 5, 6, seed=2)
    if kind == "bool":
        mask: np.ndarray = np.ones((3, 5), bool)
        mask[1] = False
    else:
        mask = np.zeros((3, 5), np.float32)
        mask[1] = -np.inf
    y = run(q, k, v, mask)
    assert not np.isnan(y).any()
    np.testing.assert_array_equal(y[:, 1], 0.0)
    np.testing.assert_allclose(y, torch_sdpa(q, k, v, mask), rtol=1e-5, atol=1e-5)


def test_a_positive_infinite_mask_entry_makes_its_row_nan() -> None:
    q, k, v = data(2, 3), data(4, 3, seed=1), data(4, 2, seed=2)
    mask = np.zeros((2, 4), np.float32)
    mask[0, 1] = np.inf
    y = run(q, k, v, mask)
    assert np.isnan(y[0]).all()
    assert np.isfinite(y[1]).all()
    assert np.isnan(torch_sdpa(q, k, v, mask)[0]).all()


def test_grouped_heads_serve_consecutive_query_heads() -> None:
    q, k, v = data(1, 4, 3, 2), data(1, 2, 5, 2, seed=1), data(1, 2, 5, 3, seed=2)
    y = run(q, k, v, enable_gqa=True)
    # query heads 0 and 1 use key head 0, heads 2 and 3 key head 1
    for head in range(4):
        alone = run(q[:, head : head + 1], k[:, head // 2 : head // 2 + 1], v[:, head // 2 : head // 2 + 1])
        np.testing.assert_allclose(y[:, head : head + 1], alone, rtol=1e-6, atol=1e-7)


def test_zero_width_scores_are_zero_so_weights_are_uniform() -> None:
    q, k, v = data(2, 0), data(3, 0), data(3, 4, seed=2)
    np.testing.assert_allclose(run(q, k, v), np.broadcast_to(v.mean(0), (2, 4)), rtol=1e-6)


@pytest.mark.parametrize(
    ("q", "k", "v"),
    [
        ((0, 3), (4, 3), (5, 4, 6)),  # L = 0: value's batch takes no part
        ((2, 3), (5, 0, 3), (5, 0, 6)),  # S = 0: nor key's
        ((1, 2, 3), (3, 4, 3), (3, 4, 0)),  # Ev = 0
        ((2, 2, 3), (0, 4, 3), (0, 4, 6)),  # value of no elements (a batch size 0)
    ],
)
def test_empty_sizes_return_zeros_shaped_from_the_query(
    q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]
) -> None:
    y = run(data(*q), data(*k, seed=1), data(*v, seed=2))
    expected = torch_sdpa(data(*q), data(*k, seed=1), data(*v, seed=2))
    assert y.shape == expected.shape == (*q[:-1], v[-1])
    assert not y.any()


# --- Against torch ------------------------------------------------------------------------


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
    ],
)
def test_agrees_with_torch(
    shapes: tuple[tuple[int, ...], ...], mask: tuple[int, ...] | None, slots: dict[str, Any]
) -> None:
    """Each configuration without a mask, or with a bool and with a float mask of that shape."""
    q, k, v = (data(*shape, seed=seed) for seed, shape in enumerate(shapes))
    masks: list[np.ndarray | None] = [None]
    if mask is not None:
        masks = [np.random.default_rng(7).random(mask) < 0.6, data(*mask, seed=7)]
    for m in masks:
        np.testing.assert_allclose(run(q, k, v, m, **slots), torch_sdpa(q, k, v, m, **slots), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_other_float_dtypes_keep_their_dtype(dtype: str) -> None:
    wide = [data(2, 3, 4), data(2, 5, 4, seed=1), data(2, 5, 3, seed=2)]
    mask = np.zeros((3, 5), np.float32)
    mask[:, 0] = -1.5
    target = numpy_dtype(dtype)
    q, k, v, m = (a.astype(target) for a in (*wide, mask))
    y = run(q, k, v, m)
    assert y.dtype == target
    torch_dtype = getattr(torch, dtype)
    t = [torch.from_numpy(a).to(torch_dtype) for a in (*wide, mask)]
    expected = F.scaled_dot_product_attention(t[0], t[1], t[2], attn_mask=t[3]).double().numpy()
    tolerance = {"float64": 1e-12, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=tolerance, atol=tolerance)


# --- Refusals -----------------------------------------------------------------------------


def test_positive_dropout_is_refused_by_the_check() -> None:
    with pytest.raises(RegistryError, match=r"scaled_dot_product_attention: dropout_p must be 0, got 0\.1") as info:
        kernel(dropout_p=0.1)
    assert info.value.node_id == "attn"
    kernel(dropout_p=0.0)  # zero is fine (the form callers use in eval mode)


def test_causal_with_a_mask_is_refused_by_the_check() -> None:
    with pytest.raises(RegistryError, match="is_causal is true and attn_mask is wired"):
        kernel(("query", "key", "value", "attn_mask"), is_causal=True)
    kernel(("query", "key", "value"), is_causal=True)


def test_bad_setting_types_are_refused_by_the_check() -> None:
    with pytest.raises(RegistryError, match="scale must be null or a number"):
        kernel(scale="big")
    with pytest.raises(RegistryError, match="enable_gqa must be a bool"):
        kernel(enable_gqa=1)


@pytest.mark.parametrize(
    ("q", "k", "v", "mask", "slots", "error", "message"),
    [
        (
            (2, 3),
            (4, 3),
            (4, 3),
            np.zeros((2, 4), np.float64),
            {},
            TypeError,
            "attn_mask must be bool or of the query's dtype",
        ),
        ((2, 3), (4, 3), (4, 3), np.zeros((2, 2, 4), np.float32), {}, ValueError, "does not broadcast to the scores"),
        ((2, 3), (4, 3), (4, 3), np.zeros((4,), bool), {}, ValueError, "at least two dimensions"),
        ((3, 2, 3), (2, 4, 3), (2, 4, 3), None, {"enable_gqa": True}, ValueError, r"heads of key \(2\) must divide"),
        ((3, 2, 3), (2, 4, 3), (2, 4, 3), None, {}, ValueError, "do not broadcast"),
        ((2, 3), (4, 2), (4, 3), None, {}, ValueError, "do not fit"),
        ((3,), (4, 3), (4, 3), None, {}, ValueError, "at least two dimensions"),
    ],
)
def test_bad_shapes_and_dtypes_name_the_node(
    q: tuple[int, ...],
    k: tuple[int, ...],
    v: tuple[int, ...],
    mask: np.ndarray | None,
    slots: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message) as info:
        run(data(*q), data(*k), data(*v), mask, **slots)
    assert "node 'attn'" in str(info.value)


def test_integer_inputs_are_refused() -> None:
    ints = np.ones((2, 3), np.int64)
    with pytest.raises(TypeError, match="query must be a floating-point tensor"):
        run(ints, ints, ints)
