"""The numpy kernels of the catalog's arrays ops (:mod:`trama.catalog.arrays`) against values worked
out by hand from the catalog's prose, and the core's refusals of bad settings.

Each case states what torch gives for it (the catalog's reference semantics); the conformance
suite compares the three runtimes over generated cases, so this file holds the edge cases the
prose names: ``-1`` and new leading dimensions in ``expand``, an index smaller than ``x`` in
``gather``, int64 scans of bools, flattened ``roll``, counts per slice in ``repeat_interleave``,
implicit ``einsum`` outputs, NaN in ``min`` and ``argmin``, a zero divisor in ``var``, uint8 in
``any``, ``topk``'s tie rule, torch's default creation dtypes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from trama import INPUT, Node, Parameter, Ref, RegistryError, Tensor
from trama_numpy._registry import implementations

FACTORIES = implementations()


def slot(value: Any) -> Parameter:
    return Parameter(Tensor.from_array(value) if isinstance(value, np.ndarray) else value)


def build(op: str, ports: Any = ("x",), outputs: Any = ("y",), **slots: Any) -> Any:
    node = Node(
        id="fn",
        op=op,
        inputs={port: Ref(INPUT, port) for port in ports},
        outputs=list(outputs),
        parameters={name: name for name in slots},
    )
    return FACTORIES[op](node, children={}, parameters={name: slot(v) for name, v in slots.items()})


def run(op: str, inputs: dict[str, Any], **slots: Any) -> np.ndarray:
    return np.asarray(build(op, tuple(inputs), **slots)(inputs)["y"])


def same(actual: np.ndarray, expected: Any, dtype: Any) -> None:
    expected = np.asarray(expected, dtype=dtype)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-6, equal_nan=True)


M = np.arange(6, dtype=np.float32).reshape(2, 3)  # [[0, 1, 2], [3, 4, 5]]


# --- Shapes ---------------------------------------------------------------------------------


def test_expand_keeps_minus_one_repeats_size_one_and_adds_leading_dimensions() -> None:
    x = np.array([[1], [2]], np.int32)
    same(run("expand", {"x": x}, size=[2, -1, 3]), [[[1, 1, 1], [2, 2, 2]]] * 2, np.int32)
    assert run("expand", {"x": x}, size=[-1, 0]).shape == (2, 0)


@pytest.mark.parametrize(
    ("size", "message"),
    [([3, 1], "of size 2, cannot be expanded to 3"), ([1], "fewer entries"), ([-1, 2, 1], "cannot be −1")],
)
def test_expand_refuses_what_torch_refuses(size: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run("expand", {"x": np.zeros((2, 1), np.float32)}, size=size)


def test_gather_picks_along_dim_with_an_index_smaller_than_x() -> None:
    index = np.array([[2], [0]], np.int64)
    same(run("gather", {"x": M, "index": index}, dim=1), [[2], [3]], np.float32)
    same(run("gather", {"x": M, "index": np.array([[1, 0]], np.int64)}, dim=-2), [[3, 1]], np.float32)


def test_gather_refuses_negative_positions_and_other_index_dtypes() -> None:
    with pytest.raises(IndexError, match="outside 0 … 2"):
        run("gather", {"x": M, "index": np.array([[-1]], np.int64)}, dim=1)
    with pytest.raises(TypeError, match="int64"):
        run("gather", {"x": M, "index": np.array([[0]], np.int32)}, dim=1)


def test_index_select_takes_slices_and_a_0d_index_keeps_the_dimension() -> None:
    same(run("index_select", {"x": M, "index": np.array([2, 0, 2], np.int32)}, dim=1), M[:, [2, 0, 2]], np.float32)
    same(run("index_select", {"x": M, "index": np.array(1, np.int64)}, dim=0), [[3, 4, 5]], np.float32)
    with pytest.raises(IndexError):
        run("index_select", {"x": M, "index": np.array([3], np.int64)}, dim=1)


def test_scans_of_bools_and_integers_are_int64_and_floats_keep_their_dtype() -> None:
    mask = np.array([[True, False, True], [False, True, True]])
    same(run("cumsum", {"x": mask}, dim=1), [[1, 1, 2], [0, 1, 2]], np.int64)
    same(run("cumprod", {"x": np.array([2, 3, -1], np.int32)}, dim=0), [2, 6, -6], np.int64)
    same(run("cumsum", {"x": M}, dim=0), [[0, 1, 2], [3, 5, 7]], np.float32)
    same(run("cumsum", {"x": np.array(4.0, np.float32)}, dim=-1), 4.0, np.float32)


def test_triangles_keep_their_side_of_the_diagonal() -> None:
    x = np.ones((3, 3), np.int64)
    same(run("triu", {"x": x}), [[1, 1, 1], [0, 1, 1], [0, 0, 1]], np.int64)
    same(run("triu", {"x": x}, diagonal=1), [[0, 1, 1], [0, 0, 1], [0, 0, 0]], np.int64)
    same(run("tril", {"x": x}, diagonal=-1), [[0, 0, 0], [1, 0, 0], [1, 1, 0]], np.int64)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        run("tril", {"x": np.ones(3, np.float32)})


def test_roll_moves_toward_higher_positions_and_flattens_without_dims() -> None:
    same(run("roll", {"x": M}, shifts=1), [[5, 0, 1], [2, 3, 4]], np.float32)
    same(run("roll", {"x": M}, shifts=[1, -1], dims=[0, 1]), [[4, 5, 3], [1, 2, 0]], np.float32)
    same(run("roll", {"x": M}, shifts=4, dims=-1), [[2, 0, 1], [5, 3, 4]], np.float32)


def test_flip_repeat_and_tile() -> None:
    same(run("flip", {"x": M}, dims=[0, -1]), [[5, 4, 3], [2, 1, 0]], np.float32)
    same(run("flip", {"x": M}, dims=[]), M, np.float32)
    with pytest.raises(ValueError, match="twice"):
        run("flip", {"x": M}, dims=[1, -1])
    same(run("repeat", {"x": np.array([1, 2], np.int32)}, repeats=[2, 2]), [[1, 2, 1, 2], [1, 2, 1, 2]], np.int32)
    with pytest.raises(ValueError, match="fewer entries"):
        run("repeat", {"x": M}, repeats=[2])
    same(run("tile", {"x": M}, dims=[2]), np.concatenate([M, M], axis=1), np.float32)


def test_repeat_interleave_repeats_each_slice_in_place() -> None:
    same(run("repeat_interleave", {"x": M}, repeats=2, dim=1), [[0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5]], np.float32)
    same(run("repeat_interleave", {"x": M}, repeats=[1, 0, 2], dim=-1), [[0, 2, 2], [3, 5, 5]], np.float32)
    same(run("repeat_interleave", {"x": M}, repeats=[2], dim=0), M[[0, 0, 1, 1]], np.float32)  # one count for all
    same(run("repeat_interleave", {"x": M}, repeats=2), [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5], np.float32)
    same(run("repeat_interleave", {"x": np.array(True)}, repeats=3), [True] * 3, np.bool_)
    with pytest.raises(ValueError, match="repeats has 2 counts, but x has 3 slices along dim 1"):
        run("repeat_interleave", {"x": M}, repeats=[1, 2], dim=1)
    with pytest.raises(ValueError, match="a 0-d x takes dim null only"):
        run("repeat_interleave", {"x": np.array(1.0, np.float32)}, repeats=2, dim=0)


def test_topk_orders_values_and_takes_ties_lower_position_first() -> None:
    x = np.array([[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]], np.int32)
    outputs = build("topk", ("x",), ("values", "indices"), k=2)({"x": x})
    same(np.asarray(outputs["values"]), [[3, 3], [0, 0]], np.int32)
    same(np.asarray(outputs["indices"]), [[1, 2], [0, 1]], np.int64)
    smallest = build("topk", ("x",), ("values", "indices"), k=3, dim=1, largest=False)({"x": x})
    same(np.asarray(smallest["indices"]), [[0, 3, 1], [0, 1, 2]], np.int64)
    nan = np.array([1.0, np.nan, 3.0, np.nan, -0.0, 0.0], np.float32)
    largest = build("topk", ("x",), ("values", "indices"), k=4)({"x": nan})
    same(np.asarray(largest["indices"]), [1, 3, 2, 0], np.int64)  # NaN is the largest
    least = build("topk", ("x",), ("values", "indices"), k=3, largest=False)({"x": nan})
    same(np.asarray(least["indices"]), [4, 5, 0], np.int64)  # −0.0 and +0.0 are equal
    scalar = build("topk", ("x",), ("values", "indices"), k=1, dim=0)({"x": np.array(7.0, np.float32)})
    same(np.asarray(scalar["values"]), 7.0, np.float32)
    same(np.asarray(scalar["indices"]), 0, np.int64)


def test_topk_refuses_what_torch_refuses() -> None:
    with pytest.raises(ValueError, match="k 4 is larger than the 3 elements of x along dim -1"):
        build("topk", ("x",), ("values", "indices"), k=4)({"x": M})
    with pytest.raises(TypeError, match="bools"):
        build("topk", ("x",), ("values", "indices"), k=1)({"x": np.array([True])})


def test_einsum_writes_implicit_outputs_in_ascii_order_and_sums_in_float64() -> None:
    a, b = M, np.arange(12, dtype=np.float32).reshape(3, 4)
    same(run("einsum", {"x0": a, "x1": b}, equation="ij,jk"), a @ b, np.float32)
    same(run("einsum", {"x0": a}, equation="ba"), a.T, np.float32)  # implicit output: "ab"
    same(run("einsum", {"x0": a}, equation="Ba"), a, np.float32)  # capitals first: "Ba"
    same(run("einsum", {"x0": np.eye(3, dtype=np.float32) * 2}, equation="i i -> i"), [2, 2, 2], np.float32)
    with pytest.raises(TypeError, match="one dtype"):
        run("einsum", {"x0": a, "x1": b.astype(np.int32)}, equation="ij,jk->ik")


# --- Reductions -----------------------------------------------------------------------------


def test_min_and_argmin_let_nan_win_and_take_the_first_tie() -> None:
    x = np.array([[3.0, 1.0, 1.0], [2.0, np.nan, 0.0]], np.float32)
    same(run("min", {"x": x}, dim=1), [1.0, np.nan], np.float32)
    same(run("argmin", {"x": x}, dim=1), [1, 1], np.int64)
    same(run("argmin", {"x": x}), 4, np.int64)
    same(run("argmin", {"x": x[:1]}, keepdim=True), [[1]], np.int64)
    with pytest.raises(ValueError, match="empty"):
        run("min", {"x": np.zeros((0, 2), np.float32)}, dim=0)


def test_prod_multiplies_integers_as_int64_and_an_empty_product_is_one() -> None:
    same(run("prod", {"x": np.array([[2, 3], [4, 5]], np.int32)}, dim=1), [6, 20], np.int64)
    same(run("prod", {"x": M + 1}), 720, np.float32)
    same(run("prod", {"x": M + 1}, keepdim=True), [[720]], np.float32)
    same(run("prod", {"x": np.zeros((0,), np.float32)}), 1, np.float32)


def test_var_and_std_divide_by_the_count_less_the_correction() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    same(run("var", {"x": x}), 5 / 3, np.float32)
    same(run("var", {"x": x}, correction=0), 1.25, np.float32)
    same(run("std", {"x": x}, correction=2, keepdim=True), [math.sqrt(2.5)], np.float32)
    same(run("var", {"x": np.array([3.0], np.float32)}), np.nan, np.float32)  # 0 / 0
    same(run("var", {"x": np.array([3.0, 4.0], np.float32)}, correction=3), np.inf, np.float32)
    with pytest.raises(TypeError, match="floating"):
        run("std", {"x": np.array([1, 2], np.int32)})


def test_any_and_all_are_bool_except_for_uint8() -> None:
    x = np.array([[0.0, np.nan], [0.0, 0.0]], np.float32)
    same(run("any", {"x": x}, dim=1), [True, False], np.bool_)
    same(run("all", {"x": x}, dim=0, keepdim=True), [[False, False]], np.bool_)
    same(run("all", {"x": np.zeros((0,), np.float32)}), True, np.bool_)
    same(run("any", {"x": np.array([0, 7], np.uint8)}), 1, np.uint8)


def test_logsumexp_is_stable_and_gives_float32_for_integers() -> None:
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    same(run("logsumexp", {"x": x}, dim=1), [1000 + math.log(2), -np.inf], np.float32)
    same(run("logsumexp", {"x": np.array([0, 0], np.int32)}, dim=[0], keepdim=True), [math.log(2)], np.float32)


# --- Creation -------------------------------------------------------------------------------


def test_arange_takes_torchs_default_dtypes() -> None:
    same(run("arange", {}, end=4), [0, 1, 2, 3], np.int64)
    same(run("arange", {}, start=1, end=-4, step=-2), [1, -1, -3], np.int64)
    same(run("arange", {}, end=1.0, step=0.25), [0, 0.25, 0.5, 0.75], np.float32)
    same(run("arange", {}, start=2, end=2), np.zeros(0), np.int64)
    same(run("arange", {}, end=3, dtype="float16"), [0, 1, 2], np.float16)


def test_full_and_its_kin_take_torchs_dtypes() -> None:
    same(run("full", {}, size=[2], fill_value=7), [7, 7], np.int64)
    same(run("full", {}, size=[2], fill_value=0.5), [0.5, 0.5], np.float32)
    same(run("full", {}, size=[1], fill_value=True), [True], np.bool_)
    same(run("full", {}, size=[2], fill_value=-2.7, dtype="int32"), [-2, -2], np.int32)
    same(run("zeros", {}, size=[1, 2]), [[0, 0]], np.float32)
    same(run("ones", {}, size=[2], dtype="bool"), [True, True], np.bool_)
    x = np.zeros((2, 1), np.int32)
    same(run("full_like", {"x": x}, fill_value=2.5), [[2], [2]], np.int32)
    same(run("ones_like", {"x": x}, dtype="float16"), [[1], [1]], np.float16)
    same(run("zeros_like", {"x": M}), np.zeros((2, 3)), np.float32)


# --- Refused settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "ports", "slots", "message"),
    [
        ("expand", ("x",), {"size": [-2]}, "size must be a list of ints ≥ -1"),
        ("roll", ("x",), {"shifts": [1, 2]}, "with dims null, shifts must be one int"),
        ("roll", ("x",), {"shifts": [1], "dims": [0, 1]}, "must have the same length"),
        ("einsum", ("x0",), {"equation": "ij,jk->ik"}, "the equation has 2 operands, but the node has 1 inputs"),
        ("einsum", ("x0",), {"equation": "i1->i"}, "are not letters"),
        ("einsum", ("x0",), {"equation": "ij->k"}, "which no operand has"),
        ("arange", (), {"end": 3, "step": 0}, "step must not be 0"),
        ("arange", (), {"start": 5, "end": 3}, "goes away from end"),
        ("arange", (), {"end": 2.5, "dtype": "int64"}, "needs integer start, end and step"),
        ("full", (), {"size": [2], "fill_value": 300, "dtype": "int8"}, "does not fit in int8"),
        ("zeros", (), {"size": [2], "dtype": "complex64"}, "dtype must be one of"),
        ("logsumexp", ("x",), {}, "the required slot 'dim' is missing"),
        ("var", ("x",), {"dim": []}, "dim must be null, an int or a non-empty list"),
        ("repeat_interleave", ("x",), {"repeats": -1}, "repeats must be an int ≥ 0 or a list of ints ≥ 0"),
        ("repeat_interleave", ("x",), {"repeats": [2**47, 2**47, 1]}, r"repeats sum to 281474976710657"),
        ("topk", ("x",), {"k": -1}, "k must be an int ≥ 0"),
        ("topk", ("x",), {"k": 1, "largest": 1}, "largest must be a bool"),
    ],
)
def test_bad_settings_are_registry_errors_naming_op_and_node(
    op: str, ports: tuple[str, ...], slots: dict[str, Any], message: str
) -> None:
    with pytest.raises(RegistryError, match=f"{op}: .*{message}") as raised:
        build(op, ports, **slots)
    assert raised.value.node_id == "fn"
