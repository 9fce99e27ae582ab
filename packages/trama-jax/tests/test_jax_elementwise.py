"""The JAX elementwise kernels (``trama.catalog.elementwise``) against torch, the reference of
the catalog's semantics: values and dtypes (int64 results are int32 without x64, the documented
exception), under ``jax.jit`` as a runtime runs them, with torch's edge cases (NaN sign,
half-to-even rounding, wrapping numbers, NaN-propagating minimum) and errors naming the node.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
import torch

from trama import INPUT, ExecutionError, Node, Parameter, Ref, RegistryError, Tensor
from trama_jax._registry import _FACTORIES, implementations

implementations()
NAN, INF = float("nan"), float("inf")
_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.float32)}


def run(op: str, inputs: dict[str, Any], **slots: Any) -> np.ndarray:
    """``op`` built from its factory and run under ``jax.jit``."""
    node = Node("fn", op, {port: Ref(INPUT, port) for port in inputs}, ["y"], {name: name for name in slots})
    entries = {
        name: Parameter(Tensor.from_array(value) if isinstance(value, np.ndarray) else value)
        for name, value in slots.items()
    }
    kernel = _FACTORIES[op](node, children={}, parameters=entries)
    tensors = {slot: np.asarray(entries[slot].value) for slot in kernel.tensor_slots}
    return np.asarray(jax.jit(kernel.apply)(tensors, inputs)["y"])


def assert_torch(got: np.ndarray, expected: torch.Tensor) -> None:
    want = expected.numpy()
    assert got.dtype == _NARROW.get(want.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


_UNARY = ("abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "erf")
_UNARY += ("floor", "ceil", "round", "sign", "reciprocal", "square", "logical_not", "bitwise_not")


@pytest.mark.parametrize("op", _UNARY)
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_unary_ops_match_torch(op: str, dtype: str) -> None:
    x = np.asarray([-3.5, -1.0, 0.0, 0.5, 2.5, 7.0, NAN] if dtype == "float32" else [-3, -1, 0, 2, 7]).astype(dtype)
    try:
        expected = getattr(torch, op)(torch.from_numpy(x))
    except (RuntimeError, TypeError):
        with pytest.raises(ExecutionError, match=rf"node 'fn'.*{op}"):
            run(op, {"x": x})
        return
    assert_torch(run(op, {"x": x}), expected)


def test_round_with_decimals_scales_as_torch() -> None:
    x = np.asarray([1.25, 1.35, 0.125, 12345.678, -2.5], dtype=np.float32)
    for decimals in (-2, -1, 1, 2):
        assert_torch(run("round", {"x": x}, decimals=decimals), torch.round(torch.from_numpy(x), decimals=decimals))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor"])
def test_binary_ops_with_numbers_wrap_and_promote_as_torch(op: str) -> None:
    x = np.asarray([255, 1, 0, 3], dtype=np.uint8)
    for other in (-1, 3, True):
        expected = getattr(torch, op)(torch.from_numpy(x), other)
        assert_torch(run(op, {"x": x}, other=other), expected)
    mask = np.asarray([True, False, True, False])
    assert_torch(run(op, {"other": mask}, x=1), getattr(torch, op)(torch.tensor(1), torch.from_numpy(mask)))


def test_logical_ops_minimum_maximum_and_where() -> None:
    x = np.asarray([0.0, NAN, 2.0, -1.0], dtype=np.float32)
    other = np.asarray([[1], [0]], dtype=np.int32)
    tx, to = torch.from_numpy(x), torch.from_numpy(other)
    for op in ("logical_and", "logical_or", "logical_xor", "minimum", "maximum"):
        assert_torch(run(op, {"x": x, "other": other}), getattr(torch, op)(tx, to))
    condition = np.asarray([True, False, True, False])
    got = run("where", {"condition": condition, "x": x.astype(np.float16)}, other=0.0)
    assert_torch(got, torch.where(torch.from_numpy(condition), tx.half(), 0.0))
    assert_torch(run("where", {"condition": condition}, x=1, other=0), torch.where(torch.from_numpy(condition), 1, 0))


def test_masked_fill_from_a_slot_or_a_port() -> None:
    x = np.zeros((2, 1), dtype=np.int32)
    mask = np.asarray([True, False, True])
    expected = torch.from_numpy(x).masked_fill(torch.from_numpy(mask), -2.7)
    assert_torch(run("masked_fill", {"x": x, "mask": mask}, value=-2.7), expected)
    value = np.asarray(-INF, dtype=np.float32)
    half = np.zeros(3, dtype=np.float16)
    expected = torch.from_numpy(half).masked_fill(torch.from_numpy(mask), torch.from_numpy(value))
    assert_torch(run("masked_fill", {"x": half, "mask": mask, "value": value}), expected)
    with pytest.raises(ExecutionError, match=r"node 'fn'.*cannot be converted to float16 without overflow"):
        run("masked_fill", {"x": half, "mask": mask}, value=-1e9)


def test_clamp_with_numbers_ports_and_nan() -> None:
    x = np.asarray([NAN, -2.0, 0.25, 9.0], dtype=np.float32)
    low = np.asarray([0.0, -1.0, 0.5, 1.0], dtype=np.float32)
    tx = torch.from_numpy(x)
    assert_torch(run("clamp", {"x": x}, min=0, max=1), torch.clamp(tx, 0, 1))
    assert_torch(run("clamp", {"x": x, "min": low}, max=3), torch.clamp(tx, min=torch.from_numpy(low)).clamp(max=3))
    integers = np.asarray([1, 5, -3], dtype=np.int32)
    assert_torch(run("clamp", {"x": integers}, min=0.5), torch.clamp(torch.from_numpy(integers), min=0.5))


@pytest.mark.parametrize("target", ["float16", "bfloat16", "float32", "int8", "int16", "int32", "uint8", "bool"])
def test_to_matches_torch_on_the_defined_conversions(target: str) -> None:
    for x in (
        np.asarray([2.7, -2.7, 0.5, -0.0, 100.25, NAN if target == "bool" else 1.0], dtype=np.float32),
        np.asarray([300, -1, 0, 127, -129], dtype=np.int32),
        np.asarray([True, False]),
    ):
        if target == "uint8" and x.dtype.kind == "f":
            x = np.abs(x)
        expected = torch.from_numpy(x).to(getattr(torch, target))
        got = run("to", {"x": x}, dtype=target)
        if target == "bfloat16":
            assert str(got.dtype) == "bfloat16"
            assert np.array_equal(got.astype(np.float32), expected.float().numpy())
        else:
            assert_torch(got, expected)


def test_to_int64_and_float64_are_their_32_bit_counterparts() -> None:
    x = np.asarray([1.5, -2.5], dtype=np.float32)
    assert run("to", {"x": x}, dtype="int64").dtype == np.int32
    assert run("to", {"x": x}, dtype="float64").dtype == np.float32


def test_bad_settings_are_registry_errors() -> None:
    with pytest.raises(RegistryError, match=r"node 'fn'.*clamp: needs min or max"):
        run("clamp", {"x": np.zeros(2, np.float32)})
    with pytest.raises(RegistryError, match=r"node 'fn'.*to: dtype must be one of"):
        run("to", {"x": np.zeros(2, np.float32)}, dtype="float8")
