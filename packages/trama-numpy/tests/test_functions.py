"""The numpy tensor functions against torch 2.x, the catalog's reference semantics.

Arithmetic is checked over generated broadcasting shapes, every way of giving an operand (port,
tensor slot, 0-d tensor, Python number, on either side) and torch's type promotion table; shape
functions and reductions over every dimension argument; ``getitem`` over hand-computed cases of
each index item kind and against torch's indexing. Floating results agree with torch within
1e-5 (relative and absolute); integer and shape results exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trama import INPUT, Node, Parameter, Ref, RegistryError, Tensor
from trama.catalog import CATALOG_CATEGORIES, promote_types, result_type
from trama.format import numpy_dtype
from trama_numpy._registry import implementations

FACTORIES = implementations()
BFLOAT16 = numpy_dtype("bfloat16")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RTOL = ATOL = 1e-5


def slot(value: Any) -> Parameter:
    """A parameter entry: arrays become tensors, anything else stays the plain value."""
    return Parameter(Tensor.from_array(value) if isinstance(value, np.ndarray) else value)


def build(op: str, ports: Any = ("x",), **slots: Any) -> Any:
    """``op``'s kernel from its registered factory, for a node wired on ``ports``."""
    node = Node(
        id="fn",
        op=op,
        inputs={port: Ref(INPUT, port) for port in ports},
        outputs=["y"],
        parameters={name: name for name in slots},
    )
    return FACTORIES[op](node, children={}, parameters={name: slot(v) for name, v in slots.items()})


def run(op: str, inputs: dict[str, Any], **slots: Any) -> Any:
    return build(op, tuple(inputs), **slots)(inputs)["y"]


def to_torch(value: Any) -> Any:
    """numpy → torch (bfloat16 through float32, which is exact); numbers stay numbers."""
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype == BFLOAT16:
        return torch.from_numpy(value.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(value, order="C"))  # a copy; ascontiguousarray makes 0-d 1-d


def dtype_name(dtype: Any) -> str:
    """numpy and torch dtypes by one name (``"float32"``, ``"bfloat16"``, ``"bool"``)."""
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else np.dtype(dtype).name


def assert_matches(actual: Any, expected: torch.Tensor, *, exact: bool = False) -> None:
    """Same dtype, same shape, and the same values (within RTOL and ATOL unless ``exact``)."""
    assert isinstance(actual, np.ndarray)
    assert dtype_name(actual.dtype) == dtype_name(expected.dtype)
    assert actual.shape == tuple(expected.shape)
    wanted = expected.float().numpy() if expected.dtype == torch.bfloat16 else expected.numpy()
    if exact or wanted.dtype.kind != "f":
        np.testing.assert_array_equal(actual.astype(wanted.dtype), wanted)
    else:
        np.testing.assert_allclose(actual.astype(wanted.dtype), wanted, equal_nan=True, rtol=RTOL, atol=ATOL)


def test_every_catalog_function_is_implemented_here() -> None:
    (category,) = [c for c in CATALOG_CATEGORIES if c.key == "functions"]
    for name in category.names:
        assert FACTORIES[name].__module__ == "trama_numpy.functions", name


# --- Type promotion --------------------------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def operands() -> list[Any]:
    """One operand of each kind: a tensor and a 0-d tensor of every dtype, and Python numbers."""
    out: list[Any] = []
    for name in DTYPES:
        out += [np.ones(2, numpy_dtype(name)), np.ones((), numpy_dtype(name))]
    return [*out, True, 3, 2.5]


def test_result_type_is_torchs() -> None:
    for a, b in itertools.product(operands(), repeat=2):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            expected = torch.result_type(to_torch(a), to_torch(b))
            assert dtype_name(result_type(a, b)) == dtype_name(expected), (a, b)


def test_promote_types_is_torchs() -> None:
    for a, b in itertools.product(DTYPES, repeat=2):
        expected = torch.promote_types(getattr(torch, a), getattr(torch, b))
        assert dtype_name(promote_types(numpy_dtype(a), numpy_dtype(b))) == dtype_name(expected), (a, b)


# --- Binary arithmetic -----------------------------------------------------------------------

TORCH_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}


def values(shape: tuple[int, ...], seed: int, low: float = -4.0, high: float = 4.0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).uniform(low, high, shape), dtype=np.float32)


@pytest.mark.parametrize("op", sorted(TORCH_BINARY))
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4), seed=st.integers(0, 99))
def test_binary_ops_broadcast_as_torch(op: str, shapes: Any, seed: int) -> None:
    shape_x, shape_other = shapes.input_shapes
    x, other = values(shape_x, seed), values(shape_other, seed + 1)
    if op == "pow":
        x = np.abs(x)  # a negative base to a fractional power is NaN in both; keep values finite
    y = run(op, {"x": x, "other": other})
    assert_matches(y, TORCH_BINARY[op](to_torch(x), to_torch(other)))


def operand_forms() -> list[Any]:
    """(ports, slots, the torch operands): every way of giving an operand, on either side."""
    x, w = values((2, 3), 0), values((3,), 1)
    zero_d = np.array(1.5, np.float32)
    return [
        pytest.param({"x": x, "other": w}, {}, (x, w), id="ports"),
        pytest.param({"x": x}, {"other": w}, (x, w), id="tensor-slot-right"),
        pytest.param({"other": x}, {"x": w}, (w, x), id="tensor-slot-left"),
        pytest.param({"x": x}, {"other": 0.5}, (x, 0.5), id="number-right"),
        pytest.param({"other": x}, {"x": 2}, (2, x), id="int-left"),
        pytest.param({"x": x}, {"other": zero_d}, (x, zero_d), id="0d-tensor-slot"),
        pytest.param({"x": x, "other": 3.0}, {}, (x, 3.0), id="number-on-port"),
        pytest.param({"x": x, "other": np.float64(3.0)}, {}, (x, np.array(3.0)), id="numpy-scalar-is-0d"),
    ]


@pytest.mark.parametrize("op", sorted(TORCH_BINARY))
@pytest.mark.parametrize(("ports", "slots", "operands"), operand_forms())
def test_operands_from_ports_and_slots(op: str, ports: dict[str, Any], slots: dict[str, Any], operands: Any) -> None:
    a, b = operands
    if op == "pow":  # positive bases: a negative one to a fractional power is NaN

        def positive(v: Any) -> Any:
            return np.asarray(np.abs(v)) if isinstance(v, np.ndarray) else v

        ports = {k: positive(v) for k, v in ports.items()}
        slots = {k: positive(v) for k, v in slots.items()}
        a, b = positive(a), positive(b)
    y = build(op, tuple(ports), **slots)(ports)["y"]
    assert_matches(y, TORCH_BINARY[op](to_torch(a), to_torch(b)))


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, 2, -0.5, 2.0])
def test_alpha(op: str, alpha: float) -> None:
    x, other = values((3, 4), 2), values((4,), 3)
    function = torch.add if op == "add" else torch.sub
    assert_matches(run(op, {"x": x, "other": other}, alpha=alpha), function(to_torch(x), to_torch(other), alpha=alpha))
    ints, other_ints = np.arange(-6, 6).reshape(3, 4), np.arange(4, dtype=np.int32)
    if float(alpha).is_integer():  # torch refuses any float alpha with integers; 2.0 is accepted here
        expected = function(to_torch(ints), to_torch(other_ints), alpha=int(alpha))
        assert_matches(run(op, {"x": ints, "other": other_ints}, alpha=alpha), expected, exact=True)
    else:
        with pytest.raises(TypeError, match="alpha"):
            run(op, {"x": ints, "other": other_ints}, alpha=alpha)


INTEGER_PAIRS = [
    ("int32", "int64"),
    ("uint8", "int8"),
    ("int16", "int16"),
    ("int64", "bool"),
    ("uint8", "uint8"),
]


@pytest.mark.parametrize(("a", "b"), INTEGER_PAIRS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_integer_arithmetic_is_exact(a: str, b: str, op: str) -> None:
    """Integers compute in their promoted dtype (wrapping as torch does); true division of
    integers is float32."""
    x = np.array([[-7, 0, 5, 100], [3, -2, 9, 1]]).astype(numpy_dtype(a))
    other = np.array([3, -4, 2, 7]).astype(numpy_dtype(b))
    if b == "bool":
        other = np.array([True, False, True, True])
        if op == "sub":
            with pytest.raises(TypeError, match="bool"):  # torch refuses any bool operand to sub
                run(op, {"x": x, "other": other})
            return
    assert_matches(run(op, {"x": x, "other": other}), TORCH_BINARY[op](to_torch(x), to_torch(other)), exact=op != "div")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "float32", "float64", "float16"])
def test_div_rounding_modes(mode: str, dtype: str) -> None:
    grid = np.arange(-9, 10)
    x, other = np.meshgrid(grid, grid[grid != 0])  # every numerator with every nonzero divisor
    x, other = x.astype(numpy_dtype(dtype)), other.astype(numpy_dtype(dtype))
    y = run("div", {"x": x, "other": other}, rounding_mode=mode)
    assert_matches(y, torch.div(to_torch(x), to_torch(other), rounding_mode=mode), exact=True)


def test_div_special_cases() -> None:
    x = np.array([1.0, -1.0, 0.0, 7.5, -7.5], np.float32)
    zero = np.zeros(5, np.float32)
    for mode in (None, "trunc", "floor"):
        expected = torch.div(to_torch(x), to_torch(zero), rounding_mode=mode)
        assert_matches(run("div", {"x": x, "other": zero}, rounding_mode=mode), expected)
        y = run("div", {"x": x, "other": -2.0}, rounding_mode=mode)
        assert_matches(y, torch.div(to_torch(x), -2.0, rounding_mode=mode), exact=True)
    with pytest.raises(ZeroDivisionError):
        run("div", {"x": np.array([1, 2]), "other": np.array([1, 0])}, rounding_mode="floor")
    with pytest.raises(TypeError, match="bools"):
        run("div", {"x": np.array([True]), "other": np.array([True])}, rounding_mode="trunc")
    y = run("div", {"x": np.array([7, -7]), "other": 2})
    assert_matches(y, torch.tensor([7, -7]) / 2)
    with pytest.raises(RegistryError, match="rounding_mode"):
        build("div", ("x", "other"), rounding_mode="round")


def test_integer_pow_follows_torch() -> None:
    base = np.array([2, 1, -1, -1, 0, 3, -2], np.int64)
    exponent = np.array([-1, -5, -3, -2, -1, 3, 3], np.int64)
    expected = torch.pow(to_torch(base), to_torch(exponent))
    assert_matches(run("pow", {"x": base, "other": exponent}), expected, exact=True)
    assert_matches(run("pow", {"x": base}, other=2), torch.pow(to_torch(base), 2), exact=True)
    assert_matches(run("pow", {"other": np.arange(5)}, x=2), 2 ** torch.arange(5), exact=True)
    with pytest.raises(ValueError, match="negative integer powers"):
        run("pow", {"x": base}, other=-1)
    with pytest.raises(TypeError, match="bools"):
        run("pow", {"x": np.array([True]), "other": True})


def test_bool_arithmetic() -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert_matches(run("add", {"x": a, "other": b}), torch.add(to_torch(a), to_torch(b)), exact=True)
    assert_matches(run("mul", {"x": a, "other": b}), torch.mul(to_torch(a), to_torch(b)), exact=True)
    assert_matches(run("div", {"x": a, "other": b}), torch.div(to_torch(a), to_torch(b)))
    with pytest.raises(TypeError, match="bool"):
        run("sub", {"x": a, "other": b})


def test_half_precision_results_are_rounded_once() -> None:
    """float16 · a Python float stays float16 and is the correctly rounded product of the exact
    operands (the number is not first rounded to float16)."""
    x = np.array([1.0, 3.0, 1000.0, 6e4], np.float16)
    y = run("mul", {"x": x}, other=1e-3)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, (x.astype(np.float64) * 1e-3).astype(np.float16))
    assert run("add", {"x": x}, other=1e5).tolist()[-1] == np.inf  # overflow rounds to inf, quietly
    b = np.ones(4, BFLOAT16)
    assert run("add", {"x": b, "other": x}).dtype == np.float32  # float16 with bfloat16


def test_operand_errors() -> None:
    with pytest.raises(RegistryError, match="both wired"):
        build("add", ("x", "other"), other=1.0)
    with pytest.raises(RegistryError, match="neither wired"):  # the core refuses the node before a kernel exists
        build("mul", ("x",))
    with pytest.raises(ValueError, match="both wired"):
        build("mul", ("x",), other=2.0)({"x": np.ones(2), "other": np.ones(2)})
    with pytest.raises(RegistryError, match="constant"):
        build("mul", ("x",), other="two")
    with pytest.raises(ValueError, match=r"shapes \[3\] and \[4\] do not broadcast"):
        run("add", {"x": np.ones(3), "other": np.ones(4)})


# --- matmul and neg --------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)),
    ((3,), (5, 3, 2)),
    ((5, 2, 3), (3,)),
    ((2, 0), (0, 3)),
]


@pytest.mark.parametrize(("shape_x", "shape_other"), MATMUL_SHAPES)
def test_matmul_matches_torch(shape_x: tuple[int, ...], shape_other: tuple[int, ...]) -> None:
    x, other = values(shape_x, 4), values(shape_other, 5)
    expected = torch.matmul(to_torch(x), to_torch(other))
    assert_matches(run("matmul", {"x": x, "other": other}), expected)
    assert_matches(run("matmul", {"x": x}, other=other), expected)  # x @ self.w


def test_matmul_integers_and_errors() -> None:
    x, other = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    assert_matches(run("matmul", {"x": x, "other": other}), torch.matmul(to_torch(x), to_torch(other)), exact=True)
    with pytest.raises(TypeError, match="dtype"):
        run("matmul", {"x": np.ones((2, 2), np.float32), "other": np.ones((2, 2))})
    with pytest.raises(ValueError, match="at least one dimension"):
        run("matmul", {"x": np.ones(2)}, other=2.0)
    with pytest.raises(ValueError, match="at least one dimension"):
        run("matmul", {"x": np.ones(()), "other": np.ones(2)})
    with pytest.raises(ValueError, match="do not multiply"):
        run("matmul", {"x": np.ones((2, 3)), "other": np.ones((2, 3))})


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "bfloat16"])
def test_neg(dtype: str) -> None:
    x = np.array([[0, 1, 2], [3, 100, 7]]).astype(numpy_dtype(dtype))
    assert_matches(run("neg", {"x": x}), torch.neg(to_torch(x)), exact=True)
    with pytest.raises(TypeError, match="bools"):
        run("neg", {"x": np.array([True])})


# --- Joining ---------------------------------------------------------------------------------


def numbered(arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Ports x0, x1, … inserted in a scrambled order (x10 before x2): order must not matter."""
    ports = {f"x{k}": a for k, a in enumerate(arrays)}
    return dict(sorted(ports.items(), key=lambda item: item[0][::-1]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_concat_matches_torch(dim: int) -> None:
    arrays = [values((2, 3, 4), seed) for seed in range(12)]
    expected = torch.cat([to_torch(a) for a in arrays], dim=dim)
    assert_matches(run("concat", numbered(arrays), dim=dim), expected, exact=True)


def test_concat_promotes_and_skips_empty_vectors() -> None:
    arrays: list[np.ndarray] = [np.ones((2, 3), np.int32), np.zeros(0, np.float64), np.full((2, 1), 2, np.uint8)]
    expected = torch.cat([to_torch(a) for a in arrays], dim=1)
    assert_matches(run("concat", numbered(arrays), dim=1), expected, exact=True)
    assert run("concat", {"x0": np.zeros(0, np.float32)}).shape == (0,)
    with pytest.raises(ValueError, match="x0"):
        run("concat", {"x0": np.ones(2), "x2": np.ones(2)})
    with pytest.raises(ValueError, match="do not join"):
        run("concat", {"x0": np.ones((2, 3)), "x1": np.ones((3, 3))}, dim=1)


@pytest.mark.parametrize("dim", [-4, -3, -2, -1, 0, 1, 2, 3])
def test_stack_matches_torch(dim: int) -> None:
    arrays = [values((2, 3, 4), seed) for seed in range(11)]
    arrays[3] = arrays[3].astype(np.float64)
    expected = torch.stack([to_torch(a) for a in arrays], dim=dim)
    assert_matches(run("stack", numbered(arrays), dim=dim), expected, exact=True)


def test_stack_errors_and_0d() -> None:
    assert_matches(
        run("stack", {"x0": np.array(1), "x1": np.array(2)}), torch.stack([torch.tensor(1), torch.tensor(2)])
    )
    with pytest.raises(IndexError, match="out of range"):
        run("stack", {"x0": np.ones((2, 3))}, dim=3)
    with pytest.raises(ValueError, match="one shape"):
        run("stack", {"x0": np.ones(2), "x1": np.ones(3)})


# --- Shapes ----------------------------------------------------------------------------------

X4 = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)


@pytest.mark.parametrize("shape", [[120], [-1], [6, -1], [2, 3, 20], [-1, 5, 1], [1, 120, 1]])
def test_reshape(shape: list[int]) -> None:
    assert_matches(run("reshape", {"x": X4}, shape=shape), to_torch(X4).reshape(shape), exact=True)


def test_reshape_zero_sizes_and_errors() -> None:
    assert run("reshape", {"x": np.zeros((0, 4))}, shape=[2, 0, 2]).shape == (2, 0, 2)
    assert run("reshape", {"x": np.float32(3.0)}, shape=[1, 1]).shape == (1, 1)
    with pytest.raises(ValueError, match="cannot reshape"):
        run("reshape", {"x": X4}, shape=[7, -1])
    for bad in ([-1, -1], [2, -2], "flat", [1.5]):
        with pytest.raises(RegistryError, match="shape"):
            build("reshape", shape=bad)


@pytest.mark.parametrize("dims", [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [-1, 0, -2, 1]])
def test_permute(dims: list[int]) -> None:
    assert_matches(run("permute", {"x": X4}, dims=dims), to_torch(X4).permute(dims), exact=True)


def test_permute_errors() -> None:
    with pytest.raises(ValueError, match="twice"):
        run("permute", {"x": X4}, dims=[0, 1, 2, -4])
    with pytest.raises(ValueError, match="permute"):
        run("permute", {"x": X4}, dims=[0, 1])


@pytest.mark.parametrize(("dim0", "dim1"), list(itertools.product(range(-4, 4), repeat=2)))
def test_transpose(dim0: int, dim1: int) -> None:
    assert_matches(run("transpose", {"x": X4}, dim0=dim0, dim1=dim1), to_torch(X4).transpose(dim0, dim1), exact=True)


def test_transpose_0d_and_errors() -> None:
    assert run("transpose", {"x": np.array(2.0)}, dim0=0, dim1=-1).shape == ()
    with pytest.raises(IndexError, match="out of range"):
        run("transpose", {"x": X4}, dim0=0, dim1=4)
    with pytest.raises(RegistryError, match="dim1"):
        build("transpose", dim0=0)


@pytest.mark.parametrize(("start", "end"), [(s, e) for s in range(-4, 4) for e in range(-4, 4) if s % 4 <= e % 4])
def test_flatten(start: int, end: int) -> None:
    y = run("flatten", {"x": X4}, start_dim=start, end_dim=end)
    assert_matches(y, torch.flatten(to_torch(X4), start, end), exact=True)


def test_flatten_defaults_0d_and_errors() -> None:
    assert run("flatten", {"x": X4}).shape == (120,)
    assert run("flatten", {"x": np.array(5.0)}).shape == (1,)
    with pytest.raises(ValueError, match="after"):
        run("flatten", {"x": X4}, start_dim=2, end_dim=1)


@pytest.mark.parametrize("dim", [None, 0, 1, 2, -1, -4, [0, 2], [1, 3], [0, -1, 2]])
def test_squeeze(dim: Any) -> None:
    x = np.zeros((1, 3, 1, 1), np.float32)
    expected = torch.squeeze(to_torch(x)) if dim is None else torch.squeeze(to_torch(x), dim)
    assert_matches(run("squeeze", {"x": x}, dim=dim), expected, exact=True)


def test_squeeze_0d_and_errors() -> None:
    assert run("squeeze", {"x": np.array(1.0)}, dim=0).shape == ()
    with pytest.raises(ValueError, match="twice"):
        run("squeeze", {"x": np.zeros((1, 1))}, dim=[0, -2])
    with pytest.raises(RegistryError, match="non-empty"):
        build("squeeze", dim=[])


@pytest.mark.parametrize("dim", list(range(-5, 5)))
def test_unsqueeze(dim: int) -> None:
    assert_matches(run("unsqueeze", {"x": X4}, dim=dim), torch.unsqueeze(to_torch(X4), dim), exact=True)


def test_unsqueeze_0d_and_errors() -> None:
    assert run("unsqueeze", {"x": np.array(1.0)}, dim=-1).shape == (1,)
    with pytest.raises(IndexError, match="out of range"):
        run("unsqueeze", {"x": X4}, dim=5)


# --- Reductions ------------------------------------------------------------------------------

REDUCTION_DIMS = [None, 0, 2, -1, [0, 2], [-1, 1], [0, 1, 2, 3]]
TORCH_REDUCTIONS: dict[str, Callable[..., torch.Tensor]] = {"mean": torch.mean, "sum": torch.sum, "max": torch.amax}


@pytest.mark.parametrize("op", sorted(TORCH_REDUCTIONS))
@pytest.mark.parametrize("dim", REDUCTION_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_match_torch(op: str, dim: Any, keepdim: bool) -> None:
    x = values((2, 3, 4, 5), 6)
    t = to_torch(x)
    if dim is None:
        expected = TORCH_REDUCTIONS[op](t, dim=tuple(range(4)), keepdim=keepdim) if keepdim else TORCH_REDUCTIONS[op](t)
    else:
        expected = TORCH_REDUCTIONS[op](t, dim=dim, keepdim=keepdim)
    assert_matches(run(op, {"x": x}, dim=dim, keepdim=keepdim), expected)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float64"])
def test_reduction_dtypes(dtype: str) -> None:
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(numpy_dtype(dtype))
    t = to_torch(x)
    assert_matches(run("sum", {"x": x}, dim=1), torch.sum(t, dim=1), exact=dtype != "bfloat16")
    assert_matches(run("max", {"x": x}, dim=[0, 2]), torch.amax(t, dim=[0, 2]), exact=True)
    if x.dtype.kind == "f" or dtype == "bfloat16":
        assert_matches(run("mean", {"x": x}, dim=-1), torch.mean(t, dim=-1))
    else:
        with pytest.raises(TypeError, match="floating"):
            run("mean", {"x": x})


def test_reductions_of_0d_and_empty_tensors() -> None:
    x = np.array(2.5, np.float32)
    for op in ("mean", "sum", "max"):
        for dim in (None, 0, -1):
            assert run(op, {"x": x}, dim=dim, keepdim=True).shape == ()
    assert np.isnan(run("mean", {"x": np.zeros((0, 3), np.float32)}, dim=0)).all()
    assert run("sum", {"x": np.zeros((0, 3), np.float32)}, dim=0).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="max"):
        run("max", {"x": np.zeros((0, 3))}, dim=0)


def test_reduction_slot_errors() -> None:
    with pytest.raises(RegistryError, match="non-empty"):
        build("sum", dim=[])
    with pytest.raises(RegistryError, match="keepdim"):
        build("mean", keepdim=1)
    with pytest.raises(ValueError, match="twice"):
        run("sum", {"x": np.ones((2, 2))}, dim=[1, -1])
    with pytest.raises(IndexError, match="out of range"):
        run("max", {"x": np.ones((2, 2))}, dim=2)


def test_max_propagates_nan() -> None:
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    assert_matches(run("max", {"x": x}, dim=1), torch.amax(to_torch(x), dim=1))


@pytest.mark.parametrize("dim", [None, 0, 1, 2, -1, -3])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_matches_torch(dim: int | None, keepdim: bool) -> None:
    """Ties go to the first; with dim null and keepdim, torch 2.x keeps every dimension (size 1)."""
    x = np.random.default_rng(7).integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    y = run("argmax", {"x": x}, dim=dim, keepdim=keepdim)
    assert_matches(y, torch.argmax(to_torch(x), dim=dim, keepdim=keepdim), exact=True)


def test_argmax_nan_ints_and_0d() -> None:
    x = np.array([[1.0, np.nan, 3.0, np.nan], [np.inf, 2.0, np.inf, 0.0]], np.float32)
    assert_matches(run("argmax", {"x": x}, dim=1), torch.argmax(to_torch(x), dim=1), exact=True)
    assert_matches(run("argmax", {"x": x}), torch.argmax(to_torch(x)), exact=True)
    ints = np.array([3, 9, 9, -1], np.int16)
    assert_matches(run("argmax", {"x": ints}, dim=0), torch.argmax(to_torch(ints), dim=0), exact=True)
    assert run("argmax", {"x": np.array(4.0)}, dim=0, keepdim=True).shape == ()
    with pytest.raises(ValueError, match="empty"):
        run("argmax", {"x": np.zeros((0,))})
    with pytest.raises(RegistryError, match="dim"):
        build("argmax", dim=[0, 1])


# --- getitem ---------------------------------------------------------------------------------

X = np.arange(24).reshape(2, 3, 4)


def getitem(x: np.ndarray, index: list[Any], **tensors: Any) -> np.ndarray:
    y = build("getitem", ("x", *tensors), index=index)({"x": x, **tensors})["y"]
    assert isinstance(y, np.ndarray)
    return y


HAND_COMPUTED = [
    # ints (negative counts from the end), each removing its dimension
    pytest.param([1], [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]], id="int"),
    pytest.param([-1, -1, -1], 23, id="negative-ints"),
    pytest.param([0, 2], [8, 9, 10, 11], id="two-ints"),
    # slices [start, stop, step]: defaults, negatives, steps, clamping, empty
    pytest.param([1, [None, None, 2], -1], [15, 23], id="step"),
    pytest.param([0, 0, [1, 3, None]], [1, 2], id="start-stop"),
    pytest.param([0, 0, [-2, None, None]], [2, 3], id="negative-start"),
    pytest.param([0, 0, [None, -3, None]], [0], id="negative-stop"),
    pytest.param([0, 0, [1, 100, 2]], [1, 3], id="clamped-stop"),
    pytest.param([0, 0, [-100, 2, None]], [0, 1], id="clamped-start"),
    pytest.param([0, 0, [3, 1, None]], np.zeros(0, int), id="empty-slice"),
    # null: a new dimension of size 1
    pytest.param([0, None, 1, [None, None, 3]], [[4, 7]], id="newaxis"),
    # "...": the dimensions the other items leave
    pytest.param(["...", 3], [[3, 7, 11], [15, 19, 23]], id="ellipsis-first"),
    pytest.param([1, "...", None, 0], [[12], [16], [20]], id="ellipsis-middle"),
    pytest.param([1, 2, 3, "..."], 23, id="ellipsis-of-nothing"),
]


@pytest.mark.parametrize(("index", "expected"), HAND_COMPUTED)
def test_getitem_hand_computed(index: list[Any], expected: Any) -> None:
    y = getitem(X, index)
    expected = np.asarray(expected)
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_getitem_tensor_items_hand_computed() -> None:
    # integer tensors pick along their dimension; negatives count from the end
    np.testing.assert_array_equal(getitem(X, [0, 0, "i0"], i0=np.array([3, -4, 1])), [3, 0, 1])
    # two tensors broadcast together: ([[0], [1]], [2, 0]) picks X[i, j, :] on a [2, 2] grid
    y = getitem(X, ["i0", "i1"], i0=np.array([[0], [1]]), i1=np.array([2, 0]))
    assert y.shape == (2, 2, 4)
    np.testing.assert_array_equal(y[1, 0], X[1, 2])
    # a bool mask over two dimensions: the selected [row, column] pairs in C order
    mask = np.array([[True, False, True], [False, False, True]])
    np.testing.assert_array_equal(getitem(X, ["i0", 1], i0=mask), [1, 9, 21])
    # catalog's example: x[:, [0], :, 0] of [5, 6, 7, 8] is [5, 1, 7] (numpy alone: [1, 5, 7])
    x = np.arange(5 * 6 * 7 * 8).reshape(5, 6, 7, 8)
    assert getitem(x, [[None, None, None], "i0", [None, None, None], 0], i0=np.array([0])).shape == (5, 1, 7)
    # non-adjacent tensor items: their broadcast shape goes to the front
    y = getitem(x, ["i0", [None, None, None], "i1"], i0=np.array([1, 2]), i1=np.array([3, 4]))
    assert y.shape == (2, 6, 8)
    np.testing.assert_array_equal(y[1], x[2, :, 4])
    # a 0-d integer tensor is an int: it removes its dimension and is no advanced index
    y = getitem(X, ["i0", [None, None, None], "i1"], i0=np.array(1), i1=np.array([0, 3]))
    assert y.shape == (3, 2)
    np.testing.assert_array_equal(y[:, 1], [15, 19, 23])
    # 0-d bools: a new dimension of size 1 (true) or 0 (false)
    assert getitem(X, ["i0"], i0=np.array(True)).shape == (1, 2, 3, 4)
    assert getitem(X, [[None, None, None], "i0"], i0=np.array(False)).shape == (2, 0, 3, 4)
    # a constant index list arrives as a Python list; an empty one is an empty int index
    np.testing.assert_array_equal(getitem(X, [1, 1, "i0"], i0=[0, 2]), [16, 18])
    assert getitem(X, ["i0"], i0=[]).shape == (0, 3, 4)


def torch_index(index: list[Any], tensors: dict[str, np.ndarray]) -> tuple[Any, ...]:
    """The JSON index as a Python subscript for torch."""
    items: list[Any] = []
    for item in index:
        if isinstance(item, list):
            items.append(slice(*item))
        elif item == "...":
            items.append(Ellipsis)
        elif isinstance(item, str):
            items.append(torch.from_numpy(np.asarray(tensors[item])))
        else:
            items.append(item)
    return tuple(items)


ALL = [None, None, None]
AGAINST_TORCH = [
    ([ALL, "i0"], {"i0": np.array([2, 0, 2])}),
    (["i0", ALL, "i1"], {"i0": np.array([[1], [0]]), "i1": np.array([[0, 1, 2, 3]])}),
    ([ALL, "i0", "i1"], {"i0": np.array([0, 2]), "i1": np.array([-1, 1])}),
    (["i0", 1, "i1"], {"i0": np.array([0, 1, 1]), "i1": np.array([3, 2, 1])}),
    ([1, "i0", None, "i1"], {"i0": np.array([0, 1]), "i1": np.array([3, 2])}),
    (["i0", None, ALL, "i1"], {"i0": np.array([0, 1]), "i1": np.array([3, 2])}),
    (["...", "i0"], {"i0": np.array([[0, 1], [2, 3]])}),
    (["i0", "..."], {"i0": np.array([True, False])}),
    (["i0"], {"i0": np.arange(24).reshape(2, 3, 4) % 3 == 0}),
    ([ALL, "i0"], {"i0": np.array([[True, False, True, False], [True, True, False, False], [False] * 4])}),
    (["i0", [None, None, 2], "i1"], {"i0": np.array(1), "i1": np.array([0, 3])}),
    (["i0", ALL, "i1"], {"i0": np.array(True), "i1": np.array([0, 1])}),
    ([None, "i0", [1, None, None], "i1", None], {"i0": np.array([1]), "i1": np.array([[0], [2]])}),
    ([-1, [None, None, 2], "i0"], {"i0": np.array([[0, 0], [3, 3]])}),
]


@pytest.mark.parametrize(("index", "tensors"), AGAINST_TORCH)
def test_getitem_matches_torch(index: list[Any], tensors: dict[str, np.ndarray]) -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    expected = to_torch(x)[torch_index(index, tensors)]
    assert_matches(getitem(x, index, **tensors), expected, exact=True)


@SETTINGS
@given(data=st.data())
def test_getitem_basic_items_match_torch(data: st.DataObject) -> None:
    """Random subscripts of ints, slices, nulls and one "...": the same as torch."""
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    bound = st.none() | st.integers(-7, 7)
    index: list[Any] = []
    dim = 0  # the next dimension of x an item would index (null indexes none)
    for _ in range(data.draw(st.integers(0, 4))):
        kind = data.draw(st.sampled_from(["int", "slice", "none"] if dim < x.ndim else ["none"]))
        if kind == "int":
            index.append(data.draw(st.integers(-x.shape[dim], x.shape[dim] - 1)))
        elif kind == "slice":
            index.append([data.draw(bound), data.draw(bound), data.draw(st.none() | st.integers(1, 3))])
        else:
            index.append(None)
        dim += kind != "none"
    if data.draw(st.booleans()):
        index.insert(data.draw(st.integers(0, len(index))), "...")
    assert_matches(getitem(x, index), to_torch(x)[torch_index(index, {})], exact=True)


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ([[None, None, 0]], "positive step"),
        ([[None, None, -1]], "positive step"),
        (["...", 0, "..."], "more than once"),
        ([True], "none of"),
        (["x"], "none of"),
        ([[0, 1]], "none of"),
        ([[0.5, None, None]], "none of"),
        (["i1"], "i0, i1"),
        (["i0", "i0"], "i0, i1"),
        ("0", "must be a list"),
    ],
)
def test_getitem_refuses_bad_index_lists(index: Any, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        build("getitem", ("x",), index=index)


def test_getitem_runtime_errors() -> None:
    with pytest.raises(IndexError, match="out of bounds"):
        getitem(X, [0, 3])
    with pytest.raises(IndexError, match="too many"):
        getitem(X, [0, 0, 0, 0])
    with pytest.raises(IndexError, match="too many"):
        getitem(X, [0, "i0"], i0=np.ones((3, 4, 1), bool))
    with pytest.raises(IndexError):
        getitem(X, [0, "i0"], i0=np.array([3]))
    with pytest.raises(TypeError, match="uint8"):
        getitem(X, ["i0"], i0=np.array([1, 0], np.uint8))
    with pytest.raises(TypeError, match="float"):
        getitem(X, ["i0"], i0=np.array([1.0]))
    with pytest.raises(ValueError, match="not wired"):
        build("getitem", ("x",), index=["i0"])({"x": X})


# --- tuple_get and constant ------------------------------------------------------------------


def test_tuple_get() -> None:
    pair = (np.ones(2), [1, 2], "three")
    assert run("tuple_get", {"x": pair}, index=1) == [1, 2]
    assert run("tuple_get", {"x": list(pair)}, index=-1) == "three"
    with pytest.raises(IndexError, match="out of range"):
        run("tuple_get", {"x": pair}, index=3)
    with pytest.raises(TypeError, match="tuple"):
        run("tuple_get", {"x": np.ones(3)}, index=0)
    with pytest.raises(RegistryError, match="index"):
        build("tuple_get", index="0")


@pytest.mark.parametrize("value", [0.5, 3, True, None, "text", [1, [2, 3]]])
def test_constant_plain_values_stay_python_values(value: Any) -> None:
    y = build("constant", (), value=value)({})["y"]
    assert y == value
    assert type(y) is type(value)


def test_constant_tensor_is_its_array() -> None:
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    y = build("constant", (), value=array)({})["y"]
    assert isinstance(y, np.ndarray)
    assert y.dtype == np.int16
    np.testing.assert_array_equal(y, array)
    with pytest.raises(RegistryError, match="value"):
        build("constant", ())
