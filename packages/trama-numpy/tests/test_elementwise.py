"""The numpy elementwise kernels (``trama.catalog.elementwise``): hand-computed values for each
op's edge cases, torch's dtype rules (integers to float32, bool to int64 for ``square``, the
promotion of comparisons and bitwise ops with wrapping numbers), torch itself as the reference
over every input dtype it accepts, and the settings errors, which are ``RegistryError`` s naming
the op and the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from trama import INPUT, Node, Parameter, Ref, RegistryError, Tensor
from trama_numpy._registry import implementations

FACTORIES = implementations()
NAN, INF = float("nan"), float("inf")


def build(op: str, ports: tuple[str, ...], **slots: Any) -> Any:
    node = Node("fn", op, {port: Ref(INPUT, port) for port in ports}, ["y"], {name: name for name in slots})
    entries = {
        name: Parameter(Tensor.from_array(value) if isinstance(value, np.ndarray) else value)
        for name, value in slots.items()
    }
    return FACTORIES[op](node, children={}, parameters=entries)


def run(op: str, inputs: dict[str, Any], **slots: Any) -> Any:
    return np.asarray(build(op, tuple(inputs), **slots)(inputs)["y"])


def f32(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# --- Unary math ------------------------------------------------------------------------------


def test_special_values_follow_torch() -> None:
    assert np.array_equal(run("log", {"x": f32(0, -1, 1)}), f32(-INF, NAN, 0), equal_nan=True)
    assert np.array_equal(run("rsqrt", {"x": f32(0, -0.0, 4, INF)}), f32(INF, -INF, 0.5, 0))
    assert np.array_equal(run("sqrt", {"x": f32(-1, 9)}), f32(NAN, 3), equal_nan=True)
    assert np.array_equal(run("log1p", {"x": f32(-1, 0)}), f32(-INF, 0))
    assert np.array_equal(run("expm1", {"x": f32(-INF, 0)}), f32(-1, 0))
    assert np.array_equal(run("erf", {"x": f32(-INF, 0, INF)}), f32(-1, 0, 1))
    assert np.array_equal(run("reciprocal", {"x": np.asarray([0, 2])}), f32(INF, 0.5))
    # torch's sign of NaN is 0 (numpy's is NaN)
    assert np.array_equal(run("sign", {"x": f32(NAN, -2, 0, 3)}), f32(0, -1, 0, 1))


def test_round_is_half_to_even_and_scales_as_torch_does() -> None:
    assert np.array_equal(run("round", {"x": f32(0.5, 1.5, 2.5, -0.5, -2.5)}), f32(0, 2, 2, -0.0, -2))
    assert np.array_equal(run("round", {"x": f32(1.25, 1.35, 0.125)}, decimals=1), f32(1.2, 1.4, 0.1))
    assert np.array_equal(run("round", {"x": f32(1234.5, 1250)}, decimals=-2), f32(1200, 1200))
    integers = np.asarray([3, -4], dtype=np.int32)
    assert run("round", {"x": integers}).dtype == np.int32
    with pytest.raises(TypeError, match=r"round \(node 'fn'\): rounding to 1 decimals needs a floating x"):
        run("round", {"x": integers}, decimals=1)


_TORCH_UNARY = ("abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "erf")
_TORCH_UNARY += ("floor", "ceil", "round", "sign", "reciprocal", "square")


@pytest.mark.parametrize("op", _TORCH_UNARY)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float32", "float64"])
def test_unary_ops_match_torch_in_value_and_dtype(op: str, dtype: str) -> None:
    x = np.asarray([0, 1, 2, 3, 5], dtype=dtype) if dtype in ("bool", "uint8") else np.asarray([-3, -1, 0, 2, 7])
    x = x.astype(dtype)
    if dtype.startswith("float"):
        x = x * 0.37
    try:
        expected = getattr(torch, op)(torch.from_numpy(x)).numpy()
    except (RuntimeError, TypeError):
        with pytest.raises(TypeError, match=rf"{op} \(node 'fn'\)"):
            run(op, {"x": x})
        return
    got = run(op, {"x": x})
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_abs_keeps_integers_and_wraps_the_most_negative() -> None:
    got = run("abs", {"x": np.asarray([-128, -3, 5], dtype=np.int8)})
    assert got.dtype == np.int8
    assert got.tolist() == [-128, 3, 5]


# --- Comparisons, logic, bits ----------------------------------------------------------------


def test_comparisons_convert_both_operands_to_their_promotion() -> None:
    # float16 against 0.1 compares in float16, as torch does
    assert run("eq", {"x": np.asarray([0.1], dtype=np.float16)}, other=0.1).tolist() == [True]
    # a number wraps to the integer type: uint8 255 == -1
    assert run("eq", {"x": np.asarray([255, 1], dtype=np.uint8)}, other=-1).tolist() == [True, False]
    # an integer tensor against a float number compares in float32
    assert run("lt", {"x": np.asarray([2, 3], dtype=np.int32)}, other=2.5).tolist() == [True, False]
    # the constant may be on the left, and NaN compares false except with ne
    other = f32(1, NAN)
    assert run("gt", {"other": other}, x=1.5).tolist() == [True, False]
    assert run("ne", {"x": f32(NAN), "other": f32(NAN)}).tolist() == [True]
    assert run("ge", {"x": f32(1, 2), "other": np.asarray([[2], [1]], dtype=np.int64)}).tolist() == [
        [False, True],
        [True, True],
    ]


def test_logical_ops_read_truth_values_and_bitwise_ops_promote() -> None:
    x, other = f32(0, NAN, 2, 0), np.asarray([1, 1, 0, 0], dtype=np.int32)
    assert run("logical_and", {"x": x, "other": other}).tolist() == [False, True, False, False]
    assert run("logical_or", {"x": x, "other": other}).tolist() == [True, True, True, False]
    assert run("logical_xor", {"x": x, "other": other}).tolist() == [True, False, True, False]
    assert run("logical_not", {"x": x}).tolist() == [True, False, False, True]
    mask = np.asarray([True, False])
    got = run("bitwise_and", {"x": mask}, other=1)
    assert got.dtype == np.int64
    assert got.tolist() == [1, 0]
    assert run("bitwise_or", {"x": np.asarray([3], dtype=np.uint8)}, other=-1).tolist() == [255]
    assert run("bitwise_xor", {"x": mask, "other": np.asarray([True, True])}).tolist() == [False, True]
    assert run("bitwise_not", {"x": np.asarray([0, -3], dtype=np.int32)}).tolist() == [-1, 2]
    assert run("bitwise_not", {"x": mask}).tolist() == [False, True]
    with pytest.raises(TypeError, match=r"bitwise_and \(node 'fn'\): bitwise operations need bool or integer"):
        run("bitwise_and", {"x": f32(1)}, other=1)


# --- Selection -------------------------------------------------------------------------------


def test_where_promotes_its_branches_and_broadcasts_the_condition() -> None:
    condition = np.asarray([[True], [False]])
    got = run("where", {"condition": condition, "x": np.ones(2, dtype=np.float16)}, other=0.0)
    assert got.dtype == np.float16
    assert got.tolist() == [[1, 1], [0, 0]]
    assert run("where", {"condition": condition}, x=1, other=0).dtype == np.int64
    assert run("where", {"condition": condition}, x=1.0, other=0).dtype == np.float32
    assert run("where", {"condition": condition, "x": np.ones(2, np.int32)}, other=2.5).dtype == np.float32
    with pytest.raises(TypeError, match=r"where \(node 'fn'\): condition must be a bool tensor"):
        run("where", {"condition": np.asarray([1], dtype=np.uint8)}, x=1, other=0)


def test_masked_fill_converts_the_value_to_the_dtype_of_x() -> None:
    mask = np.asarray([True, False, True])
    integers = np.zeros(3, dtype=np.int32)
    assert run("masked_fill", {"x": integers, "mask": mask}, value=-2.7).tolist() == [-2, 0, -2]
    half = np.zeros((2, 1), dtype=np.float16)
    got = run("masked_fill", {"x": half, "mask": mask, "value": np.asarray(-INF, dtype=np.float32)})
    assert got.shape == (2, 3)
    assert got.dtype == np.float16
    assert got[0].tolist() == [-INF, 0, -INF]
    assert run("masked_fill", {"x": np.zeros(3, bool), "mask": mask}, value=2).tolist() == [True, False, True]
    with pytest.raises(ValueError, match=r"masked_fill \(node 'fn'\): value -1000000000.0 cannot be converted"):
        run("masked_fill", {"x": half, "mask": mask}, value=-1e9)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        run("masked_fill", {"x": half, "mask": mask.astype(np.uint8)}, value=0)


def test_clamp_promotes_and_propagates_nan() -> None:
    x = np.asarray([1, 5, -3], dtype=np.int32)
    assert run("clamp", {"x": x}, min=0).dtype == np.int32
    got = run("clamp", {"x": x}, min=0.5)
    assert got.dtype == np.float32
    assert got.tolist() == [1, 5, 0.5]
    assert run("clamp", {"x": x}, min=2, max=1).tolist() == [1, 1, 1]  # min > max gives max
    bound = np.asarray([0, 1, 2], dtype=np.int64)
    assert run("clamp", {"x": x, "min": bound}, max=3).tolist() == [1, 3, 2]
    assert np.isnan(run("clamp", {"x": f32(NAN, 1)}, min=0.0, max=0.5)[0])


def test_minimum_and_maximum_propagate_nan_and_promote() -> None:
    x, other = f32(1, NAN, 3), np.asarray([2, 0, 1], dtype=np.int64)
    assert np.array_equal(run("minimum", {"x": x, "other": other}), f32(1, NAN, 1), equal_nan=True)
    assert np.array_equal(run("maximum", {"x": x, "other": other}), f32(2, NAN, 3), equal_nan=True)
    assert run("maximum", {"x": np.asarray([1], np.int32), "other": np.asarray([2], np.int64)}).dtype == np.int64


# --- Casts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
)
def test_to_matches_torch_on_the_defined_conversions(target: str) -> None:
    sources = [
        np.asarray([2.7, -2.7, 0.5, -0.0, 100.25], dtype=np.float32),
        np.asarray([300, -1, 0, 127, -129], dtype=np.int64),
        np.asarray([True, False]),
    ]
    for x in sources:
        if target == "uint8" and x.dtype.kind == "f":
            x = np.abs(x)  # a negative float to uint8 is undefined in C and torch
        expected = torch.from_numpy(x).to(getattr(torch, target)).numpy()
        got = run("to", {"x": x}, dtype=target)
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected), (x, target)


def test_to_bfloat16_rounds_to_nearest_even_as_torch() -> None:
    x = f32(1.00390625, 1.01171875, -3.3, 65536.5)
    expected = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(run("to", {"x": x}, dtype="bfloat16").astype(np.float32), expected)


# --- Settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "ports", "slots", "message"),
    [
        ("round", ("x",), {"decimals": 1.5}, "round: decimals must be an int, got 1.5"),
        ("to", ("x",), {"dtype": "complex64"}, "to: dtype must be one of"),
        ("to", ("x",), {}, "to: the required slot 'dtype' is missing"),
        ("clamp", ("x",), {}, "clamp: needs min or max (or both)"),
        ("clamp", ("x", "min"), {"min": 0.0}, "clamp: min is both wired and held by a slot"),
        ("clamp", ("x",), {"max": "high"}, "clamp: max must be null or a number"),
        ("masked_fill", ("x", "mask"), {}, "masked_fill: value is neither wired nor held"),
        ("masked_fill", ("x", "mask", "value"), {"value": 1.0}, "masked_fill: value is both wired and held"),
        ("masked_fill", ("x", "mask"), {"value": np.zeros(2, np.float32)}, "value must be a 0-d tensor"),
        ("eq", ("x",), {}, "eq: operand 'other' is neither wired nor held by a slot"),
        ("where", ("condition", "x", "other"), {"other": 0.0}, "where: operand 'other' is both wired and held"),
    ],
)
def test_bad_settings_are_registry_errors_naming_op_and_node(
    op: str, ports: tuple[str, ...], slots: dict[str, Any], message: str
) -> None:
    with pytest.raises(RegistryError, match="node 'fn'") as caught:
        build(op, ports, **slots)
    assert message in str(caught.value)
