"""trama-jax's tensor-function kernels against torch 2.x.

Each case builds the node by hand (``kernel_harness.build``), runs its kernel under ``jax.jit``
(as runtimes do) and compares with the torch expression the op stands for: float32 within 1e-5,
integers and bools exactly. JAX has no 64-bit types outside its x64 mode, which trama-jax never
turns on, so where torch gives int64 or float64 the kernel must give int32 or float32
(``jax_dtype``) with the same values. The largest errors are printed at the end (``pytest -s``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from kernel_harness import Built, Errors, build, kernel_factories

import trama
from trama_jax.functions import jax_dtype

ERRORS = Errors()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    yield from ERRORS.report()


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ints(*shape: int, low: int = -5, high: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, high, shape).astype(np.int32)


def agree(built: Built, inputs: Mapping[str, Any], expected: torch.Tensor, *, jit: bool = True) -> None:
    """The kernel's ``y`` equals torch's result, in torch's dtype as JAX holds it."""
    actual = built.apply(inputs, jit=jit)["y"]
    wanted = expected.numpy()
    ERRORS.check(built.node.op, actual, wanted.astype(jax_dtype(wanted.dtype)))


def t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(array))


def fails(built: Built, inputs: Mapping[str, Any], match: str) -> None:
    """Calling the kernel raises an ExecutionError that names the node and says ``match``."""
    with pytest.raises(trama.ExecutionError, match=match) as caught:
        built.apply(inputs)
    assert caught.value.node_id == built.node.id


# --- Binary arithmetic ----------------------------------------------------------------------


def test_add_broadcasts_and_scales_by_alpha() -> None:
    x, other = data(2, 3), data(3, seed=1)
    built = build("add", {"alpha": 2.5}, ["x", "other"])
    agree(built, {"x": x, "other": other}, torch.add(t(x), t(other), alpha=2.5))


def test_a_float_number_makes_an_integer_tensor_float32_as_in_torch() -> None:
    x = ints(4)
    built = build("add", {"other": 0.5}, ["x"])
    agree(built, {"x": x}, t(x) + 0.5)


def test_a_number_does_not_widen_a_float16_tensor() -> None:
    x = data(4).astype(np.float16)
    built = build("mul", {"other": 3.0}, ["x"])
    actual = built.apply({"x": x})["y"]
    assert actual.dtype == np.float16
    np.testing.assert_array_equal(actual, (t(x) * 3.0).numpy())


def test_a_zero_dim_tensor_promotes_only_across_kinds() -> None:
    x = ints(3)
    widened = build("add", {"other": np.array(1.5, np.float64)}, ["x"])  # int32 + 0-d float64 -> float64
    agree(widened, {"x": x}, t(x) + torch.tensor(1.5, dtype=torch.float64))
    kept = build("add", {"other": np.array(7, np.int64)}, ["x"])  # int32 + 0-d int64 -> int32
    agree(kept, {"x": x}, t(x) + torch.tensor(7))
    assert kept.apply({"x": x})["y"].dtype == np.int32


def test_add_of_bools_is_logical_or() -> None:
    x, other = np.array([True, False, False]), np.array([True, True, False])
    built = build("add", {}, ["x", "other"])
    agree(built, {"x": x, "other": other}, t(x) + t(other))


def test_sub_with_a_constant_on_the_left() -> None:
    other = data(2, 2)
    built = build("sub", {"x": 1}, ["other"])
    agree(built, {"other": other}, 1 - t(other))


def test_sub_refuses_bools_as_torch_does() -> None:
    built = build("sub", {}, ["x", "other"])
    fails(built, {"x": np.array([True]), "other": np.array([False])}, "bool")


def test_a_tensor_constant_is_a_tensor_slot_that_training_reaches() -> None:
    x, scale = data(2, 3), data(3, seed=2)
    built = build("mul", {"other": scale}, ["x"])
    assert built.kernel.tensor_slots == ("other",)
    agree(built, {"x": x}, t(x) * t(scale))
    grad = jax.grad(lambda held: jnp.sum(built.kernel.apply(held, {"x": x})["y"]))(built.tensors)
    np.testing.assert_allclose(grad["other"], x.sum(axis=0), rtol=1e-6)


def test_mul_of_bools_is_logical_and() -> None:
    x, other = np.array([True, True, False]), np.array([True, False, False])
    agree(build("mul", {}, ["x", "other"]), {"x": x, "other": other}, t(x) * t(other))


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_of_integers(mode: str | None) -> None:
    x, other = np.array([7, -7, 7, -7, 0], np.int32), np.array([2, 2, -2, -2, 3], np.int32)
    built = build("div", {"rounding_mode": mode}, ["x", "other"])
    agree(built, {"x": x, "other": other}, torch.div(t(x), t(other), rounding_mode=mode))


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_of_floats(mode: str | None) -> None:
    x, other = data(6) * 10, data(6, seed=3)
    built = build("div", {"rounding_mode": mode}, ["x", "other"])
    agree(built, {"x": x, "other": other}, torch.div(t(x), t(other), rounding_mode=mode))


def test_pow_with_a_number_exponent_and_a_number_base() -> None:
    x = data(5)
    agree(build("pow", {"other": 2}, ["x"]), {"x": x}, t(x) ** 2)
    agree(build("pow", {"other": -1}, ["x"]), {"x": x}, t(x) ** -1)
    agree(build("pow", {"x": 2.0}, ["other"]), {"other": x}, 2.0 ** t(x))


def test_pow_of_floats_elementwise() -> None:
    x, other = np.abs(data(5)) + 0.1, data(5, seed=4)
    agree(build("pow", {}, ["x", "other"]), {"x": x, "other": other}, torch.pow(t(x), t(other)))


def test_pow_of_integers_to_negative_powers_follows_torch() -> None:
    x = np.array([1, -1, -1, 2, 3, 0, 2], np.int32)
    other = np.array([-3, -3, -2, -1, 2, 3, 0], np.int32)
    agree(build("pow", {}, ["x", "other"]), {"x": x, "other": other}, torch.pow(t(x), t(other)))
    fails(build("pow", {"other": -2}, ["x"]), {"x": x}, "negative integer powers")


@pytest.mark.parametrize(
    ("left", "right"), [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 1, 3, 4), (5, 4, 2))], ids=str
)
def test_matmul_follows_torch_shapes(left: tuple[int, ...], right: tuple[int, ...]) -> None:
    x, other = data(*left), data(*right, seed=5)
    agree(build("matmul", {}, ["x", "other"]), {"x": x, "other": other}, torch.matmul(t(x), t(other)))


def test_matmul_with_a_weight_held_by_the_node() -> None:
    x, w = data(2, 4), data(4, 3, seed=6)
    built = build("matmul", {"other": w}, ["x"])
    agree(built, {"x": x}, t(x) @ t(w))


def test_matmul_refuses_mixed_dtypes_and_zero_dim_operands() -> None:
    built = build("matmul", {}, ["x", "other"])
    fails(built, {"x": data(2, 2), "other": ints(2, 2)}, "dtypes")
    fails(built, {"x": data(2), "other": np.float32(2.0)}, "at least one dimension")
    fails(built, {"x": data(2, 3), "other": data(2, 3)}, "do not multiply")


def test_add_refuses_shapes_that_do_not_broadcast() -> None:
    fails(build("add", {}, ["x", "other"]), {"x": data(2, 3), "other": data(4)}, "do not broadcast")


def test_neg() -> None:
    x = data(2, 3)
    agree(build("neg", {}), {"x": x}, -t(x))
    agree(build("neg", {}), {"x": ints(4)}, -t(ints(4)))
    fails(build("neg", {}), {"x": np.array([True])}, "bool")


@pytest.mark.parametrize(
    ("slots", "connected", "match"),
    [
        ({"other": 2.0}, ["x", "other"], "both wired and held"),
        ({}, ["x"], "neither wired nor held"),
        ({"other": "two"}, ["x"], "must be a tensor, a number or a bool"),
        ({"alpha": "2"}, ["x", "other"], "alpha must be a number"),
    ],
)
def test_bad_operand_slots_are_refused_when_built(slots: dict[str, Any], connected: Sequence[str], match: str) -> None:
    with pytest.raises(trama.RegistryError, match=match) as caught:
        unchecked("add", slots, connected)
    assert caught.value.node_id == "net.bad"


def unchecked(op: str, slots: Mapping[str, Any], connected: Sequence[str]) -> Any:
    """The factory called on slots that the catalog's spec refuses (``build`` checks them)."""
    node = trama.Node(
        "net.bad", op, {port: trama.Ref(trama.INPUT, port) for port in connected}, ["y"], {s: s for s in slots}
    )
    parameters = {slot: trama.Parameter(value) for slot, value in slots.items()}
    return kernel_factories()[op](node, children={}, parameters=parameters)


# --- Joining --------------------------------------------------------------------------------


def test_concat_promotes_and_skips_empty_vectors() -> None:
    x0, x1, x2 = data(2, 3), ints(2, 1), np.zeros((0,), np.float32)
    built = build("concat", {"dim": -1}, ["x0", "x1", "x2"])
    agree(built, {"x0": x0, "x1": x1, "x2": x2}, torch.cat([t(x0), t(x1), t(x2)], dim=-1))


def test_concat_takes_its_ports_in_numeric_order() -> None:
    arrays = {f"x{k}": np.full((1, 2), k, np.float32) for k in range(11)}
    built = build("concat", {"dim": 0}, list(reversed(arrays)))
    agree(built, arrays, torch.cat([t(arrays[f"x{k}"]) for k in range(11)]))


def test_stack() -> None:
    x0, x1 = data(2, 3), data(2, 3, seed=1)
    built = build("stack", {"dim": -1}, ["x0", "x1"])
    agree(built, {"x0": x0, "x1": x1}, torch.stack([t(x0), t(x1)], dim=-1))
    fails(built, {"x0": x0, "x1": data(3, 2)}, "one shape")


# --- Shapes ---------------------------------------------------------------------------------


def test_reshape() -> None:
    x = data(2, 3, 4)
    agree(build("reshape", {"shape": [-1, 6]}), {"x": x}, t(x).reshape(-1, 6))
    fails(build("reshape", {"shape": [5, -1]}), {"x": x}, "cannot reshape")
    with pytest.raises(trama.RegistryError, match="at most one"):
        build("reshape", {"shape": [-1, -1]})


def test_permute_and_transpose() -> None:
    x = data(2, 3, 4)
    agree(build("permute", {"dims": [2, 0, -2]}), {"x": x}, t(x).permute(2, 0, 1))
    agree(build("transpose", {"dim0": 0, "dim1": -1}), {"x": x}, t(x).transpose(0, -1))
    fails(build("permute", {"dims": [0, 1]}), {"x": x}, "do not permute")


@pytest.mark.parametrize(("start", "end"), [(0, -1), (1, 2), (-2, -1)])
def test_flatten(start: int, end: int) -> None:
    x = data(2, 3, 4)
    agree(build("flatten", {"start_dim": start, "end_dim": end}), {"x": x}, torch.flatten(t(x), start, end))


def test_flatten_of_a_scalar_and_of_an_empty_tensor() -> None:
    agree(build("flatten", {}), {"x": np.float32(3.0)}, torch.flatten(torch.tensor(3.0)))
    empty = np.zeros((2, 0, 3), np.float32)
    agree(build("flatten", {"start_dim": 1}), {"x": empty}, torch.flatten(t(empty), 1))


def test_squeeze_keeps_named_dimensions_that_are_not_one() -> None:
    x = data(1, 3, 1, 2)
    agree(build("squeeze", {}), {"x": x}, t(x).squeeze())
    agree(build("squeeze", {"dim": [0, 1]}), {"x": x}, t(x).squeeze((0, 1)))
    agree(build("squeeze", {"dim": -2}), {"x": x}, t(x).squeeze(-2))


def test_unsqueeze() -> None:
    x = data(2, 3)
    agree(build("unsqueeze", {"dim": -1}), {"x": x}, t(x).unsqueeze(-1))
    agree(build("unsqueeze", {"dim": 0}), {"x": x}, t(x).unsqueeze(0))
    fails(build("unsqueeze", {"dim": 3}), {"x": x}, "out of range")


# --- Reductions -----------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(keepdim: bool) -> None:
    x = data(2, 3, 4)
    agree(build("mean", {"dim": [0, -1], "keepdim": keepdim}), {"x": x}, t(x).mean((0, -1), keepdim=keepdim))
    agree(build("mean", {}), {"x": x}, t(x).mean())
    fails(build("mean", {}), {"x": ints(3)}, "floating-point")


def test_sum_of_floats_ints_and_bools() -> None:
    x = data(3, 4)
    agree(build("sum", {"dim": 1}), {"x": x}, t(x).sum(1))
    agree(build("sum", {}), {"x": ints(3, 4)}, t(ints(3, 4)).sum())  # int64 in torch, int32 here
    mask = data(3, 4) > 0
    agree(build("sum", {"dim": 0}), {"x": mask}, t(mask).sum(0))


def test_max_lets_nan_win_and_refuses_empty_dimensions() -> None:
    x = data(3, 4)
    x[1, 2] = np.nan
    agree(build("max", {"dim": 1, "keepdim": True}), {"x": x}, torch.amax(t(x), 1, keepdim=True))
    fails(build("max", {"dim": 0}), {"x": np.zeros((0, 2), np.float32)}, "empty")


def test_argmax_takes_the_first_of_ties_and_indexes_the_flattened_tensor() -> None:
    x = np.array([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]], np.float32)
    agree(build("argmax", {"dim": 1}), {"x": x}, torch.argmax(t(x), 1))
    agree(build("argmax", {}), {"x": x}, torch.argmax(t(x)))
    agree(build("argmax", {"keepdim": True}), {"x": x}, torch.argmax(t(x), keepdim=True))
    agree(build("argmax", {"dim": 0, "keepdim": True}), {"x": x}, torch.argmax(t(x), 0, keepdim=True))


def test_reductions_refuse_bad_dims() -> None:
    with pytest.raises(trama.RegistryError, match="non-empty list"):
        build("sum", {"dim": []})
    fails(build("sum", {"dim": [0, -2]}), {"x": data(2, 3)}, "twice")


# --- Indexing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "torch_index"),
    [
        ([0, [1, 3, None]], (0, slice(1, 3))),
        (["...", None, [None, None, 2]], (..., None, slice(None, None, 2))),
        ([-1, [None, -2, None], 2], (-1, slice(None, -2), 2)),
        ([[10, None, None]], (slice(10, None),)),
    ],
    ids=["int-slice", "ellipsis-newaxis-step", "negative", "clamped"],
)
def test_getitem_basic(index: list[Any], torch_index: tuple[Any, ...]) -> None:
    x = data(4, 5, 6)
    agree(build("getitem", {"index": index}), {"x": x}, t(x)[torch_index])


def test_getitem_applies_integers_before_tensors_as_torch_does() -> None:
    x = data(5, 6, 7, 8)
    whole = [None, None, None]
    built = build("getitem", {"index": [whole, "i0", whole, 0]}, ["x", "i0"])
    index = np.array([0, 3], np.int64)
    agree(built, {"x": x, "i0": index}, t(x)[:, torch.tensor([0, 3]), :, 0])
    assert built.apply({"x": x, "i0": index})["y"].shape == (5, 2, 7)


def test_getitem_with_separated_tensor_items_puts_their_dimensions_first() -> None:
    x = data(4, 5, 6)
    built = build("getitem", {"index": ["i0", [None, None, None], "i1"]}, ["x", "i0", "i1"])
    i0, i1 = np.array([0, 2, 3]), np.array([1, 1, 5])
    agree(built, {"x": x, "i0": i0, "i1": i1}, t(x)[torch.tensor(i0), :, torch.tensor(i1)])


def test_getitem_with_a_constant_bool_mask() -> None:
    x = data(4, 5)
    mask = data(4, 5, seed=3) > 0
    built = build("getitem", {"index": ["i0"]}, ["x", "i0"])
    agree(built, {"x": x, "i0": mask}, t(x)[t(mask)], jit=False)
    fails(built, {"x": x, "i0": mask}, "bool mask must be a constant")  # traced under jit


def test_getitem_with_an_index_computed_under_jit() -> None:
    x = data(4, 5)
    built = build("getitem", {"index": ["i0"]}, ["x", "i0"])
    index = np.array([3, 0, 3])
    rows = jax.jit(lambda x, i: built.kernel.apply({}, {"x": x, "i0": jnp.argsort(i)})["y"])(x, index)
    np.testing.assert_array_equal(np.asarray(rows), x[np.argsort(index, kind="stable")])


def test_getitem_refuses_out_of_range_integers_and_bad_indices() -> None:
    fails(build("getitem", {"index": [4]}), {"x": data(4, 5)}, "out of range")
    fails(build("getitem", {"index": [0, 0, 0]}), {"x": data(4, 5)}, "too many indices")
    for index, match in [
        ([[0, 2, 0]], "positive step"),
        (["i1"], "i0, i1"),
        (["...", "..."], "more than once"),
        ([1.5], "none of"),
    ]:
        with pytest.raises(trama.RegistryError, match=match):
            unchecked("getitem", {"index": index}, ["x", "i1"])


# --- Tuples and constants -------------------------------------------------------------------


def test_tuple_get() -> None:
    built = build("tuple_get", {"index": -1})
    first, last = jnp.ones(2), jnp.zeros(3)
    assert built.kernel.apply({}, {"x": (first, last)})["y"] is last
    with pytest.raises(trama.ExecutionError, match="out of range"):
        build("tuple_get", {"index": 2}).kernel.apply({}, {"x": (first, last)})
    with pytest.raises(trama.ExecutionError, match="tuple or a list"):
        built.kernel.apply({}, {"x": first})


def test_constant_tensor_is_taken_at_call_time_and_a_number_stays_a_number() -> None:
    value = data(2, 2)
    tensor = build("constant", {"value": value}, [])
    assert tensor.kernel.tensor_slots == ("value",)
    np.testing.assert_array_equal(tensor.apply({})["y"], value)
    number = build("constant", {"value": 0.25}, [])
    assert number.kernel.tensor_slots == ()
    assert number.kernel.apply({}, {})["y"] == 0.25
