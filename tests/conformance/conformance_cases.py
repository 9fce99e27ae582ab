"""Hypothesis strategies that generate valid applications of every catalog leaf op.

Each strategy draws the settings (slots) an op admits by its spec in ``docs/ops.md``, shapes
that fit them, and values, and returns a :class:`~conformance_support.Case`. Structure (which
slots, which sizes, which layout) is drawn by hypothesis so that it shrinks to a small failing
case; the numbers themselves come from a numpy generator seeded by one drawn integer, because
drawing thousands of floats one by one would be slow and shrinks to nothing more readable.

What is generated, and why:

* floats are float32, standard normal times a modest scale, so that no op is evaluated where it
  is ill-conditioned (the README lists the few exceptions and their tolerances). Some cases
  quantize values to multiples of 0.5, so that ties (``argmax``, ``max``, ``relu`` at 0) and
  exact quotients (``div`` with rounding) are exercised, and reductions see NaN;
* integer and bool tensors appear wherever an op accepts them, to check dtype promotion and
  exact integer results;
* shapes are small (sizes 0 to 5, ranks 0 to 4): agreement does not depend on size, and small
  shapes keep the number of distinct programs a compiling runtime has to build low.

:data:`CASES` maps every leaf op name to its strategy; a meta-test checks that it covers the
catalog, so that an op added without a case fails CI.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import cases_activations
import cases_arrays
import cases_attention
import cases_elementwise
import cases_layer_functions
import cases_pooling
import numpy as np
from conformance_support import TOLERANCES, Case, spec_of
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

from trama.catalog.sequence import RNN_MAX_LAYERS

__all__ = ["CASES", "case_for"]

Draw: TypeAlias = DrawFn
Shape: TypeAlias = tuple[int, ...]

FLOAT32 = np.dtype(np.float32)


# --- Values ---------------------------------------------------------------------------------


def rng(draw: Draw) -> np.random.Generator:
    """A numpy generator for the values of one case, from one drawn seed."""
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def floats(gen: np.random.Generator, shape: Shape, scale: float = 1.0) -> np.ndarray:
    return np.asarray(gen.standard_normal(shape) * scale, dtype=np.float32)


def quantized(gen: np.random.Generator, shape: Shape, scale: float = 2.0) -> np.ndarray:
    """Multiples of 0.5 in [−scale, scale]: ties and exactly representable results."""
    steps = int(scale * 2)
    return np.asarray(gen.integers(-steps, steps + 1, size=shape) / 2, dtype=np.float32)


def values(draw: Draw, gen: np.random.Generator, shape: Shape, scale: float = 1.0, *, nan: bool = False) -> np.ndarray:
    """float32 values: normal, or quantized (ties); with ``nan``, possibly a few NaNs."""
    array = quantized(gen, shape) if draw(st.booleans()) else floats(gen, shape, scale)
    if nan and array.size and draw(st.booleans()):
        array[gen.random(shape) < 0.2] = np.nan
    return array


def integers(gen: np.random.Generator, shape: Shape, dtype: str, low: int = -5, high: int = 5) -> np.ndarray:
    if dtype == "bool":
        return np.asarray(gen.random(shape) < 0.5)
    return np.asarray(gen.integers(low, high + 1, size=shape), dtype=dtype)


def tensor(draw: Draw, gen: np.random.Generator, shape: Shape, dtype: str) -> np.ndarray:
    """A tensor of ``dtype`` (float32 values as :func:`values`)."""
    return values(draw, gen, shape) if dtype == "float32" else integers(gen, shape, dtype)


def weight(gen: np.random.Generator, shape: Shape, fan_in: int) -> np.ndarray:
    """A weight scaled as torch initializes it, so that activations stay of order 1."""
    return floats(gen, shape, 1.0 / max(fan_in, 1) ** 0.5)


# --- Shapes and dimensions ------------------------------------------------------------------


def shapes(draw: Draw, min_rank: int = 0, max_rank: int = 4, min_size: int = 0, max_size: int = 4) -> Shape:
    """A shape; where ``min_size`` is 0, one shape in eight may have empty dimensions (they are
    an edge case to cover, not the common case)."""
    if min_size == 0 and draw(st.integers(0, 7)) != 0:
        min_size = 1
    sizes = st.integers(min_size, max_size)
    return tuple(draw(st.lists(sizes, min_size=min_rank, max_size=max_rank)))


def dim(draw: Draw, rank: int) -> int:
    """A dimension of a rank-``rank`` tensor, possibly negative (a 0-d tensor admits 0 and −1)."""
    size = max(rank, 1)
    return draw(st.integers(-size, size - 1))


def dims(draw: Draw, rank: int) -> int | list[int] | None:
    """A reduction's ``dim`` slot: null, an int, or a non-empty list of distinct dimensions."""
    kind = draw(st.sampled_from(["null", "int", "list"]))
    if kind == "null":
        return None
    if kind == "int" or rank == 0:
        return dim(draw, rank)
    chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return [d - rank if draw(st.booleans()) else d for d in chosen]


def broadcast_partner(draw: Draw, shape: Shape) -> Shape:
    """A shape that broadcasts with ``shape``: a suffix of it, some sizes replaced by 1, and
    possibly extra leading dimensions."""
    keep = draw(st.integers(0, len(shape)))
    partner = [1 if draw(st.booleans()) else size for size in shape[len(shape) - keep :]]
    if keep < len(shape):  # leading dimensions would meet some of shape's
        return tuple(partner)
    return (*draw(st.lists(st.integers(1, 3), max_size=max(0, 4 - len(shape)))), *partner)


def optional(draw: Draw, slots: dict[str, Any], name: str, strategy: st.SearchStrategy[Any]) -> None:
    """Set slot ``name`` to a drawn value, or leave it absent (the catalog default)."""
    if draw(st.booleans()):
        slots[name] = draw(strategy)


# --- Activations ----------------------------------------------------------------------------


def activation(op: str) -> st.SearchStrategy[Case]:
    """Elementwise activations: any float32 shape (0-d and empty included), and their slots."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        shape = shapes(draw)
        slots: dict[str, Any] = {}
        name = op.lower()
        if name == "leaky_relu":
            optional(draw, slots, "negative_slope", st.floats(-2, 2, width=32))
        elif name == "gelu":
            optional(draw, slots, "approximate", st.sampled_from(["none", "tanh"]))
        elif name in ("softmax", "logsoftmax", "log_softmax"):
            slots["dim"] = dim(draw, len(shape)) if draw(st.booleans()) else None
        elif name == "softplus":
            optional(draw, slots, "beta", st.floats(0.25, 4))
            optional(draw, slots, "threshold", st.floats(1, 20))
        elif name == "elu":
            optional(draw, slots, "alpha", st.floats(0.1, 2))
        return Case(op, {"x": values(draw, gen, shape, scale=3.0)}, slots)

    return strategy()


# --- Arithmetic -----------------------------------------------------------------------------

_NUMBERS: dict[str, st.SearchStrategy[Any]] = {
    "int": st.integers(-4, 4),
    "float": st.floats(-3, 3, width=32).map(float),
    "bool": st.booleans(),
}


@st.composite
def operand(draw: Draw, gen: np.random.Generator, shape: Shape, allowed: tuple[str, ...]) -> Any:
    """A tensor of ``shape`` of one of the ``allowed`` dtypes, or (``"number"``) a Python number."""
    dtype = draw(st.sampled_from(allowed))
    if dtype == "number":
        return draw(st.sampled_from(["int", "float", "bool"]).flatmap(lambda kind: _NUMBERS[kind]))
    return tensor(draw, gen, shape, dtype)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, np.ndarray) and value.dtype == np.bool_)


def _is_integral(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "iub"
    return isinstance(value, (bool, int))


def _place(draw: Draw, x: Any, other: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each operand on its port or in its constant slot: a number always in the slot (a port
    carries tensors), a tensor either way, and at least one operand on a port."""
    inputs: dict[str, Any] = {}
    slots: dict[str, Any] = {}
    for name, value in (("x", x), ("other", other)):
        if isinstance(value, np.ndarray) and ((not inputs and name == "other") or draw(st.booleans())):
            inputs[name] = value
        else:
            slots[name] = value
    return inputs, slots


TENSORS = ("float32", "int32", "int64", "bool")


def binary(op: str) -> st.SearchStrategy[Case]:
    """``add``, ``sub``, ``mul``, ``div``, ``pow``: broadcasting operands of every kind, given on
    ports or as constants, with the combinations torch refuses left out (bools to ``sub`` and
    ``pow``, integer division by zero, integers to negative Python powers)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        shape = shapes(draw, max_rank=3)
        x = tensor(draw, gen, shape, draw(st.sampled_from(TENSORS)))
        if op == "pow" and x.dtype.kind == "f":
            x = x * 1.5 if draw(st.booleans()) else np.abs(x) + np.float32(0.25)
        other = draw(operand(gen, broadcast_partner(draw, shape), (*TENSORS, "number")))
        if draw(st.booleans()):
            x, other = other, x
        slots_extra: dict[str, Any] = {}
        if op in ("sub", "pow") and (_is_bool(x) or _is_bool(other)):
            x, other = _without_bools(gen, x), _without_bools(gen, other)
        if op == "pow":
            other = _exponent(draw, gen, other)
        if op == "div":
            mode = draw(st.sampled_from([None, "trunc", "floor"]))
            if mode is not None:
                slots_extra["rounding_mode"] = mode
                x, other = _without_bools(gen, x), _without_bools(gen, other)
                if _is_integral(x) and _is_integral(other):
                    other = _nonzero(other)
            elif draw(st.booleans()):
                slots_extra["rounding_mode"] = None
        floating = not (_is_integral(x) and _is_integral(other))
        if op in ("add", "sub") and floating and not (_is_bool(x) or _is_bool(other)):
            # torch takes a float alpha for floating results only
            optional(draw, slots_extra, "alpha", st.floats(-2, 2, width=32).map(float))
        inputs, slots = _place(draw, x, other)
        return Case(op, inputs, {**slots, **slots_extra})

    return strategy()


def _without_bools(gen: np.random.Generator, value: Any) -> Any:
    """Where a bool operand is not allowed: a bool number becomes an int, a bool tensor int32."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, np.ndarray) and value.dtype == np.bool_:
        return integers(gen, value.shape, "int32")
    return value


def _nonzero(value: Any) -> Any:
    """An integer divisor without zeros (torch raises on integer division by zero)."""
    if isinstance(value, np.ndarray):
        return np.where(value == 0, np.ones_like(value), value)
    return value or 1


def _exponent(draw: Draw, gen: np.random.Generator, other: Any) -> Any:
    """``pow``'s exponent: small, so that integer powers do not overflow; a Python integer
    exponent of an integer base is non-negative (torch refuses negative ones); floating
    exponents of negative bases are integral half of the time, so that not every such result is
    NaN."""
    if isinstance(other, np.ndarray) and other.dtype.kind == "f":
        if draw(st.booleans()):
            return np.round(other).clip(-3, 3).astype(np.float32)
        return other.clip(-2.5, 2.5)
    if isinstance(other, np.ndarray):
        return other.clip(-2, 4)
    if isinstance(other, int):
        return abs(other)
    return other


@st.composite
def matmul(draw: Draw) -> Case:
    """Every rank combination numpy's and torch's ``matmul`` share (1-D vectors, matrices,
    broadcast batches), of float32 or integers, either operand possibly a constant tensor."""
    gen = rng(draw)
    n, k, m = (draw(st.integers(1, 4)) for _ in range(3))
    batch = shapes(draw, max_rank=2, min_size=1, max_size=3)
    x_shape = (k,) if draw(st.booleans()) else (*batch, n, k)
    other_batch = batch
    if batch and draw(st.booleans()):  # batch dimensions that broadcast
        other_batch = broadcast_partner(draw, batch)[-len(batch) :]
    other_shape = (k,) if draw(st.booleans()) else (*other_batch, k, m)
    dtype = draw(st.sampled_from(["float32", "float32", "int64"]))
    x, other = tensor(draw, gen, x_shape, dtype), tensor(draw, gen, other_shape, dtype)
    inputs, slots = _place(draw, x, other)
    return Case("matmul", inputs, slots)


@st.composite
def neg(draw: Draw) -> Case:
    gen = rng(draw)
    return Case("neg", {"x": tensor(draw, gen, shapes(draw), draw(st.sampled_from(["float32", "int32", "int64"])))})


# --- Joining --------------------------------------------------------------------------------


def _mixed_dtypes(draw: Draw, count: int) -> list[str]:
    """float32 inputs, or now and then a mix, whose promotion the op must follow."""
    if draw(st.booleans()):
        return [draw(st.sampled_from(TENSORS)) for _ in range(count)]
    return ["float32"] * count


@st.composite
def concat(draw: Draw) -> Case:
    gen = rng(draw)
    count = draw(st.integers(1, 4))
    shape = shapes(draw, min_rank=1, max_rank=3, max_size=3)
    axis = dim(draw, len(shape))
    inputs = {}
    for k, dtype in enumerate(_mixed_dtypes(draw, count)):
        own = list(shape)
        own[axis] = draw(st.integers(0, 3))
        inputs[f"x{k}"] = tensor(draw, gen, tuple(own), dtype)
    slots: dict[str, Any] = {"dim": axis} if axis or draw(st.booleans()) else {}
    return Case("concat", inputs, slots)


@st.composite
def stack(draw: Draw) -> Case:
    gen = rng(draw)
    count = draw(st.integers(1, 4))
    shape = shapes(draw, max_rank=3, max_size=3)
    rank = len(shape)
    axis = draw(st.integers(-(rank + 1), rank))
    inputs = {f"x{k}": tensor(draw, gen, shape, dtype) for k, dtype in enumerate(_mixed_dtypes(draw, count))}
    slots: dict[str, Any] = {"dim": axis} if axis or draw(st.booleans()) else {}
    return Case("stack", inputs, slots)


# --- Shapes ---------------------------------------------------------------------------------


def _any_tensor(draw: Draw, gen: np.random.Generator, shape: Shape) -> np.ndarray:
    """Shape functions move elements without looking at them: any dtype will do."""
    return tensor(draw, gen, shape, draw(st.sampled_from(TENSORS)))


@st.composite
def reshape(draw: Draw) -> Case:
    """A new shape with the same element count: the count's prime factors dealt into a few
    sizes (1s inserted), one of them possibly written −1."""
    gen = rng(draw)
    shape = shapes(draw, min_size=1)
    total = int(np.prod(shape))
    factors = [p for p in (2, 3, 5, 7) for _ in range(_multiplicity(total, p))]
    rank = draw(st.integers(1, 4))
    sizes = [1] * rank
    for factor in factors:
        sizes[draw(st.integers(0, rank - 1))] *= factor
    if draw(st.booleans()):
        sizes[draw(st.integers(0, rank - 1))] = -1
    return Case("reshape", {"x": _any_tensor(draw, gen, shape)}, {"shape": sizes})


def _multiplicity(n: int, p: int) -> int:
    count = 0
    while n % p == 0 and n > 1:
        n, count = n // p, count + 1
    return count


@st.composite
def permute(draw: Draw) -> Case:
    gen = rng(draw)
    shape = shapes(draw, min_rank=1)
    order = draw(st.permutations(range(len(shape))))
    order = [d - len(shape) if draw(st.booleans()) else d for d in order]
    return Case("permute", {"x": _any_tensor(draw, gen, shape)}, {"dims": order})


@st.composite
def transpose(draw: Draw) -> Case:
    gen = rng(draw)
    shape = shapes(draw)
    slots = {"dim0": dim(draw, len(shape)), "dim1": dim(draw, len(shape))}
    return Case("transpose", {"x": _any_tensor(draw, gen, shape)}, slots)


def flatten(op: str) -> st.SearchStrategy[Case]:
    """``flatten`` (0-d allowed, start_dim default 0) and ``Flatten`` (start_dim default 1)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        shape = shapes(draw, min_rank=0 if op == "flatten" else 2)
        rank = max(len(shape), 1)
        start = draw(st.integers(0, rank - 1))
        end = draw(st.integers(start, rank - 1))
        slots: dict[str, Any] = {}
        if start != (0 if op == "flatten" else 1) or draw(st.booleans()):
            slots["start_dim"] = start - rank if draw(st.booleans()) else start
        if end != rank - 1 or draw(st.booleans()):
            slots["end_dim"] = end - rank if draw(st.booleans()) else end
        x = _any_tensor(draw, gen, shape) if op == "flatten" else values(draw, gen, shape)
        return Case(op, {"x": x}, slots)

    return strategy()


@st.composite
def squeeze(draw: Draw) -> Case:
    gen = rng(draw)
    shape = tuple(1 if draw(st.booleans()) else size for size in shapes(draw, min_size=2))
    slots: dict[str, Any] = {}
    if draw(st.booleans()):
        slots["dim"] = dims(draw, len(shape))
    return Case("squeeze", {"x": _any_tensor(draw, gen, shape)}, slots)


@st.composite
def unsqueeze(draw: Draw) -> Case:
    gen = rng(draw)
    shape = shapes(draw, max_rank=3)
    rank = len(shape)
    return Case("unsqueeze", {"x": _any_tensor(draw, gen, shape)}, {"dim": draw(st.integers(-(rank + 1), rank))})


# --- Reductions -----------------------------------------------------------------------------


def reduction(op: str) -> st.SearchStrategy[Case]:
    """``mean`` (floats), ``sum`` (ints and bools too, summed as int64), ``max`` (with NaN):
    every form of ``dim`` and ``keepdim``. Sizes start at 1: an empty ``max`` is an error."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        shape = shapes(draw, min_size=1)
        dtypes = {"mean": ["float32"], "sum": list(TENSORS), "max": ["float32", "int32", "int64"]}[op]
        dtype = draw(st.sampled_from(dtypes))
        x = values(draw, gen, shape, nan=op == "max") if dtype == "float32" else integers(gen, shape, dtype)
        slots: dict[str, Any] = {}
        if draw(st.booleans()):
            slots["dim"] = dims(draw, len(shape))
        optional(draw, slots, "keepdim", st.booleans())
        return Case(op, {"x": x}, slots)

    return strategy()


@st.composite
def argmax(draw: Draw) -> Case:
    """Ties (quantized values) and NaNs, where the first index and NaN-as-largest rules decide."""
    gen = rng(draw)
    shape = shapes(draw, min_size=1)
    dtype = draw(st.sampled_from(["float32", "int32", "int64"]))
    x = values(draw, gen, shape, nan=True) if dtype == "float32" else integers(gen, shape, dtype, -2, 2)
    slots: dict[str, Any] = {}
    if draw(st.booleans()):
        slots["dim"] = dim(draw, len(shape))
        optional(draw, slots, "keepdim", st.booleans())
    elif draw(st.booleans()):
        slots["dim"] = None
    return Case("argmax", {"x": x}, slots)


# --- Indexing -------------------------------------------------------------------------------


@st.composite
def getitem(draw: Draw) -> Case:
    """An index list of every item kind the catalog defines: ints, slices (clamped bounds,
    steps > 1, empty results), ``null``, ``"..."`` (standing for no dimension, some, or all),
    and tensor items on ports ``i0``, ``i1``, … (integer arrays broadcasting together, adjacent
    or not, or one bool mask over one or two dimensions), mixed with ints, which torch applies
    before the tensor items; trailing dimensions may be left to no item.

    Integer index tensors come from model inputs or ``constant`` nodes; bool masks from
    ``constant`` nodes, as a tracer writes ``x[mask]`` for a fixed mask: a mask that is a model
    input gives a shape that depends on values, which a compiling runtime cannot build (see
    ``test_a_bool_mask_from_a_model_input``).
    """
    gen = rng(draw)
    shape = shapes(draw, min_rank=1, min_size=1)
    rank = len(shape)
    tensor_kind = draw(st.sampled_from(["none", "none", "integers", "mask"]))
    index_shape = shapes(draw, min_rank=1, max_rank=2, min_size=1, max_size=3)
    inputs: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    index: list[Any] = []

    def tensor_item(value: np.ndarray, from_input: bool) -> None:
        port = f"i{len(inputs) + len(constants)}"
        (inputs if from_input else constants)[port] = value
        index.append(port)

    def items(start: int, stop: int) -> None:
        """Items for dimensions ``start`` … ``stop − 1`` of ``x``."""
        position = start
        while position < stop:
            if draw(st.integers(0, 4)) == 0:
                index.append(None)
            size = shape[position]
            kind = draw(st.sampled_from(["int", "slice", "slice", "whole", "tensor"]))
            if kind == "int":
                index.append(draw(st.integers(-size, size - 1)))
            elif kind == "slice":
                bound = st.none() | st.integers(-size - 2, size + 2)
                index.append([draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3]))])
            elif kind == "tensor" and tensor_kind == "integers":
                tensor_item(np.asarray(gen.integers(-size, size, size=index_shape)), draw(st.booleans()))
            elif (
                kind == "tensor"
                and tensor_kind == "mask"
                and not any(isinstance(v, np.ndarray) for v in constants.values())
            ):
                width = draw(st.integers(1, min(2, stop - position)))
                tensor_item(np.asarray(gen.random(shape[position : position + width]) < 0.6), False)
                position += width
                continue
            else:
                index.append([None, None, None])
            position += 1

    if draw(st.booleans()):  # "..." over dimensions start … stop − 1 (possibly none)
        start = draw(st.integers(0, rank))
        stop = draw(st.integers(start, rank))
        items(0, start)
        index.append("...")
        items(stop, rank)
    else:
        items(0, draw(st.integers(0, rank)))
    if draw(st.booleans()):
        index.append(None)
    x = _any_tensor(draw, gen, shape)
    return Case("getitem", {"x": x, **inputs}, {"index": index}, constants=constants)


# --- Layers ---------------------------------------------------------------------------------


def _bias(draw: Draw, gen: np.random.Generator, slots: dict[str, Any], size: int, fan_in: int) -> None:
    """An optional bias: present, explicitly null, or absent (all three mean what torch means)."""
    choice = draw(st.sampled_from(["present", "present", "null", "absent"]))
    if choice == "present":
        slots["bias"] = weight(gen, (size,), fan_in)
    elif choice == "null":
        slots["bias"] = None


@st.composite
def linear(draw: Draw) -> Case:
    gen = rng(draw)
    n_in, n_out = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    lead = shapes(draw, max_rank=2, min_size=1)
    slots: dict[str, Any] = {"in_features": n_in, "out_features": n_out, "weight": weight(gen, (n_out, n_in), n_in)}
    _bias(draw, gen, slots, n_out, n_in)
    return Case("Linear", {"x": floats(gen, (*lead, n_in))}, slots)


@st.composite
def bilinear(draw: Draw) -> Case:
    gen = rng(draw)
    n1, n2, n_out = (draw(st.integers(1, 4)) for _ in range(3))
    lead = shapes(draw, max_rank=2, min_size=1)
    slots: dict[str, Any] = {
        "in1_features": n1,
        "in2_features": n2,
        "out_features": n_out,
        "weight": weight(gen, (n_out, n1, n2), n1),
    }
    _bias(draw, gen, slots, n_out, n1)
    inputs = {"input1": floats(gen, (*lead, n1)), "input2": floats(gen, (*lead, n2))}
    return Case("Bilinear", inputs, slots)


def _tuple(draw: Draw, count: int, low: int, high: int) -> list[int]:
    return [draw(st.integers(low, high)) for _ in range(count)]


def convolution(op: str) -> st.SearchStrategy[Case]:
    """``Conv1d`` and ``Conv2d``: groups, strides, dilations, every padding form and mode, batched
    or not. Input sizes are drawn so that the output has at least one position and a reflecting
    pad is narrower than the input (torch's conditions)."""
    spatial = 1 if op == "Conv1d" else 2

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        groups = draw(st.integers(1, 3))
        c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
        kernel = _tuple(draw, spatial, 1, 3)
        dilation = _tuple(draw, spatial, 1, 2)
        mode = draw(st.sampled_from(["zeros", "zeros", "reflect", "replicate", "circular"]))
        padding_kind = draw(st.sampled_from(["list", "list", "valid", "same"]))
        stride = [1] * spatial if padding_kind == "same" else _tuple(draw, spatial, 1, 2)
        if padding_kind == "list":
            padding: Any = _tuple(draw, spatial, 0, 2)
            pads = [(p, p) for p in padding]
        elif padding_kind == "valid":
            padding, pads = "valid", [(0, 0)] * spatial
        else:
            padding = "same"
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation, strict=True)]
        sizes = []
        for (low, high), k, d in zip(pads, kernel, dilation, strict=True):
            least = max(d * (k - 1) + 1 - low - high, max(low, high) + 1, 1)
            sizes.append(draw(st.integers(least, least + 3)))
        batch = draw(st.sampled_from([(), (1,), (2,)]))
        slots: dict[str, Any] = {
            "in_channels": c_in,
            "out_channels": c_out,
            "kernel_size": kernel,
            "weight": weight(gen, (c_out, c_in // groups, *kernel), c_in // groups * int(np.prod(kernel))),
        }
        optional(draw, slots, "stride", st.just(stride))
        if stride != [1] * spatial:
            slots["stride"] = stride
        if padding_kind != "list" or padding != [0] * spatial or draw(st.booleans()):
            slots["padding"] = padding
        optional(draw, slots, "dilation", st.just(dilation))
        if dilation != [1] * spatial:
            slots["dilation"] = dilation
        optional(draw, slots, "groups", st.just(groups))
        if groups != 1:
            slots["groups"] = groups
        optional(draw, slots, "padding_mode", st.just(mode))
        if mode != "zeros":
            slots["padding_mode"] = mode
        _bias(draw, gen, slots, c_out, c_in)
        return Case(op, {"x": floats(gen, (*batch, c_in, *sizes))}, slots)

    return strategy()


@st.composite
def conv_transpose2d(draw: Draw) -> Case:
    """Strides, paddings, output paddings (below stride or dilation), dilations and groups, with
    input sizes whose output has at least one position."""
    gen = rng(draw)
    groups = draw(st.integers(1, 2))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = _tuple(draw, 2, 1, 3)
    stride = _tuple(draw, 2, 1, 2)
    dilation = _tuple(draw, 2, 1, 2)
    padding = _tuple(draw, 2, 0, 1)
    output_padding = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation, strict=True)]
    sizes = []
    for d in range(2):
        # y = (H − 1)·s − 2p + d(k − 1) + op + 1 must be at least 1
        least = 1
        while (least - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel[d] - 1) + output_padding[d] + 1 < 1:
            least += 1
        sizes.append(draw(st.integers(least, least + 2)))
    slots: dict[str, Any] = {
        "in_channels": c_in,
        "out_channels": c_out,
        "kernel_size": kernel,
        "stride": stride,
        "padding": padding,
        "output_padding": output_padding,
        "dilation": dilation,
        "groups": groups,
        "weight": weight(gen, (c_in, c_out // groups, *kernel), c_in),
    }
    if draw(st.booleans()):
        slots["padding_mode"] = "zeros"
    _bias(draw, gen, slots, c_out, c_in)
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    return Case("ConvTranspose2d", {"x": floats(gen, (*batch, c_in, *sizes))}, slots)


def pooling(op: str) -> st.SearchStrategy[Case]:
    """``MaxPool2d`` and ``AvgPool2d``: window, stride (null: the window), padding up to half the
    window, dilation (max only), ceil mode, and the average's divisor options."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        kernel = _tuple(draw, 2, 1, 3)
        stride = draw(st.none() | st.lists(st.integers(1, 3), min_size=2, max_size=2))
        padding = [draw(st.integers(0, k // 2)) for k in kernel]
        dilation = _tuple(draw, 2, 1, 2) if op == "MaxPool2d" else [1, 1]
        sizes = [
            draw(st.integers(max(d * (k - 1) + 1 - 2 * p, 1), d * (k - 1) + 4))
            for k, p, d in zip(kernel, padding, dilation, strict=True)
        ]
        slots: dict[str, Any] = {"kernel_size": kernel}
        if stride is not None or draw(st.booleans()):
            slots["stride"] = stride
        if padding != [0, 0] or draw(st.booleans()):
            slots["padding"] = padding
        optional(draw, slots, "ceil_mode", st.booleans())
        if op == "MaxPool2d":
            if dilation != [1, 1] or draw(st.booleans()):
                slots["dilation"] = dilation
        else:
            optional(draw, slots, "count_include_pad", st.booleans())
            optional(draw, slots, "divisor_override", st.none() | st.integers(1, 5))
        batch = draw(st.sampled_from([(), (1,), (2,)]))
        x = values(draw, gen, (*batch, draw(st.integers(1, 3)), *sizes), nan=False)
        return Case(op, {"x": x}, slots)

    return strategy()


@st.composite
def adaptive_avg_pool2d(draw: Draw) -> Case:
    """Output sizes smaller, equal and larger than the input's (overlapping windows), or null."""
    gen = rng(draw)
    output_size = [draw(st.none() | st.integers(1, 5)) for _ in range(2)]
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    x = floats(gen, (*batch, draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7))))
    return Case("AdaptiveAvgPool2d", {"x": x}, {"output_size": output_size})


def _affine_slots(
    draw: Draw, gen: np.random.Generator, slots: dict[str, Any], flag: str, shape: Shape, *, bias: bool = True
) -> None:
    """``weight`` and ``bias`` as the flag ``flag`` says (drawn, default true), near 1 and 0."""
    affine = draw(st.booleans())
    if not affine or draw(st.booleans()):
        slots[flag] = affine
    if affine:
        slots["weight"] = (1 + floats(gen, shape, 0.3)).astype(np.float32)
        if bias:
            slots["bias"] = floats(gen, shape, 0.3)


def batch_norm(op: str) -> st.SearchStrategy[Case]:
    """Running statistics (variances away from 0), or none, in which case the eval-mode value is
    the batch's statistics, over at least two values per channel (torch refuses one)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        channels = draw(st.integers(1, 4))
        track = draw(st.booleans())
        n = draw(st.integers(1 if track else 2, 3))
        spatial = [] if op == "BatchNorm1d" and draw(st.booleans()) else [draw(st.integers(1, 3))]
        if op == "BatchNorm2d":
            spatial = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
        slots: dict[str, Any] = {"num_features": channels}
        optional(draw, slots, "eps", st.floats(1e-5, 1e-2))
        optional(draw, slots, "momentum", st.none() | st.floats(0.01, 0.5))
        _affine_slots(draw, gen, slots, "affine", (channels,))
        if not track or draw(st.booleans()):
            slots["track_running_stats"] = track
        if track:
            slots["running_mean"] = floats(gen, (channels,), 0.5)
            slots["running_var"] = gen.uniform(0.5, 2.0, channels).astype(np.float32)
            slots["num_batches_tracked"] = np.array(draw(st.integers(0, 100)), dtype=np.int64)
        return Case(op, {"x": floats(gen, (n, channels, *spatial))}, slots)

    return strategy()


def _normalized(draw: Draw) -> tuple[Shape, Shape]:
    """The input shape and the normalized trailing shape (1 or 2 dimensions) of a layer norm."""
    lead = shapes(draw, max_rank=2, min_size=1)
    normalized = shapes(draw, min_rank=1, max_rank=2, min_size=1, max_size=5)
    return (*lead, *normalized), normalized


@st.composite
def layer_norm(draw: Draw) -> Case:
    gen = rng(draw)
    shape, normalized = _normalized(draw)
    slots: dict[str, Any] = {"normalized_shape": list(normalized)}
    optional(draw, slots, "eps", st.floats(1e-6, 1e-2))
    _affine_slots(draw, gen, slots, "elementwise_affine", normalized, bias=draw(st.booleans()))
    return Case("LayerNorm", {"x": floats(gen, shape, 2.0)}, slots)


@st.composite
def rms_norm(draw: Draw) -> Case:
    gen = rng(draw)
    shape, normalized = _normalized(draw)
    slots: dict[str, Any] = {"normalized_shape": list(normalized)}
    optional(draw, slots, "eps", st.none() | st.floats(1e-6, 1e-2))
    _affine_slots(draw, gen, slots, "elementwise_affine", normalized, bias=False)
    return Case("RMSNorm", {"x": floats(gen, shape, 2.0)}, slots)


@st.composite
def group_norm(draw: Draw) -> Case:
    gen = rng(draw)
    groups = draw(st.integers(1, 3))
    channels = groups * draw(st.integers(1, 2))
    slots: dict[str, Any] = {"num_groups": groups, "num_channels": channels}
    optional(draw, slots, "eps", st.floats(1e-6, 1e-2))
    _affine_slots(draw, gen, slots, "affine", (channels,))
    rest = shapes(draw, max_rank=2, min_size=1)
    # at least two values per group: one value has variance 0 and normalizes to 0/√eps
    if channels // groups * int(np.prod(rest)) < 2:
        rest = (*rest, 2)
    return Case("GroupNorm", {"x": floats(gen, (draw(st.integers(1, 2)), channels, *rest), 2.0)}, slots)


@st.composite
def embedding(draw: Draw) -> Case:
    """Lookups by int32 or int64 indices of any shape, with or without renormalization by
    ``max_norm`` under several ``norm_type``s; the gradient-only slots set now and then."""
    gen = rng(draw)
    rows, columns = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    slots: dict[str, Any] = {"num_embeddings": rows, "embedding_dim": columns, "weight": floats(gen, (rows, columns))}
    optional(draw, slots, "padding_idx", st.none() | st.integers(0, rows - 1))
    optional(draw, slots, "max_norm", st.none() | st.floats(0.5, 2.0))
    optional(draw, slots, "norm_type", st.sampled_from([1.0, 2.0, 3.0]))
    optional(draw, slots, "scale_grad_by_freq", st.booleans())
    optional(draw, slots, "sparse", st.booleans())
    dtype = draw(st.sampled_from(["int32", "int64"]))
    x = gen.integers(0, rows, size=shapes(draw, max_rank=2)).astype(dtype)
    return Case("Embedding", {"x": x}, slots)


@st.composite
def dropout(draw: Draw) -> Case:
    gen = rng(draw)
    slots: dict[str, Any] = {}
    optional(draw, slots, "p", st.floats(0, 1))
    return Case("Dropout", {"x": values(draw, gen, shapes(draw))}, slots)


@st.composite
def identity(draw: Draw) -> Case:
    gen = rng(draw)
    return Case("Identity", {"x": _any_tensor(draw, gen, shapes(draw))})


# --- Attention ------------------------------------------------------------------------------


def _mask(draw: Draw, gen: np.random.Generator, shape: Shape, *, whole_rows: bool = False) -> np.ndarray:
    """A bool mask (true: may not attend) or an additive float mask of ``shape``. A bool mask
    leaves the first key free in every row, except, with ``whole_rows``, one mask in five.

    Whole rows only where the catalog fixes the result: attention weights are NaN for a query
    whose every key is masked, so ``MultiheadAttention`` with ``need_weights``. Where torch does
    not compute the weights (``need_weights`` false, and inside ``TransformerEncoderLayer``) its
    fused kernel gives 0 for such a row instead, which the catalog does not say (README.md,
    "Findings").
    """
    if draw(st.booleans()):
        mask = gen.random(shape) < 0.4
        if not whole_rows or draw(st.integers(0, 4)) != 0:
            mask[..., 0] = False
        return np.asarray(mask)
    return floats(gen, shape)


@st.composite
def multihead_attention(draw: Draw) -> Case:
    """Heads, key and value widths other than E (separate projections), biases, ``bias_k`` and
    ``bias_v``, a zero key, both layouts and unbatched inputs, bool and float masks of both
    shapes, averaged, per-head or no weights."""
    gen = rng(draw)
    heads, head_dim = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    e = heads * head_dim
    kdim = draw(st.sampled_from([e, e, 1, 3]))
    vdim = draw(st.sampled_from([e, e, 2, 4]))
    length, source = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(st.sampled_from([None, 1, 2]))
    batch_first = draw(st.booleans())
    bias = draw(st.booleans())
    add_bias_kv = draw(st.booleans())
    need_weights = draw(st.booleans())
    slots: dict[str, Any] = {"embed_dim": e, "num_heads": heads, "out_proj_weight": weight(gen, (e, e), e)}
    for name, value, default in (
        ("bias", bias, True),
        ("add_bias_kv", add_bias_kv, False),
        ("batch_first", batch_first, False),
    ):
        if value != default or draw(st.booleans()):
            slots[name] = value
    optional(draw, slots, "dropout", st.floats(0, 0.5))
    optional(draw, slots, "add_zero_attn", st.booleans())
    optional(draw, slots, "average_attn_weights", st.booleans())
    if not need_weights or draw(st.booleans()):
        slots["need_weights"] = need_weights
    if kdim != e or vdim != e:
        slots.update(kdim=kdim, vdim=vdim)
        slots["q_proj_weight"] = weight(gen, (e, e), e)
        slots["k_proj_weight"] = weight(gen, (e, kdim), kdim)
        slots["v_proj_weight"] = weight(gen, (e, vdim), vdim)
    else:
        if draw(st.booleans()):
            slots.update(kdim=None, vdim=None)
        slots["in_proj_weight"] = weight(gen, (3 * e, e), e)
    if bias:
        slots["in_proj_bias"] = floats(gen, (3 * e,), 0.1)
        slots["out_proj_bias"] = floats(gen, (e,), 0.1)
    if add_bias_kv:
        slots["bias_k"], slots["bias_v"] = floats(gen, (1, 1, e), 0.5), floats(gen, (1, 1, e), 0.5)

    def layout(steps: int, width: int) -> Shape:
        if batch is None:
            return (steps, width)
        return (batch, steps, width) if batch_first else (steps, batch, width)

    inputs: dict[str, Any] = {
        "query": floats(gen, layout(length, e)),
        "key": floats(gen, layout(source, kdim)),
        "value": floats(gen, layout(source, vdim)),
    }
    if draw(st.booleans()):
        padding_shape = (source,) if batch is None else (batch, source)
        inputs["key_padding_mask"] = _mask(draw, gen, padding_shape, whole_rows=need_weights)
    if draw(st.booleans()):
        per_head = draw(st.booleans())
        shape = ((batch or 1) * heads, length, source) if per_head else (length, source)
        inputs["attn_mask"] = _mask(draw, gen, shape, whole_rows=need_weights)
    return Case("MultiheadAttention", inputs, slots, outputs=None if need_weights else ("y",))


@st.composite
def transformer_encoder_layer(draw: Draw) -> Case:
    """Both activations, norm first or last, with and without biases, every layout, masks."""
    gen = rng(draw)
    heads, head_dim = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    e, ff = heads * head_dim, draw(st.integers(1, 6))
    bias = draw(st.booleans())
    batch_first = draw(st.booleans())
    slots: dict[str, Any] = {
        "d_model": e,
        "nhead": heads,
        "dim_feedforward": ff,
        "self_attn_in_proj_weight": weight(gen, (3 * e, e), e),
        "self_attn_out_proj_weight": weight(gen, (e, e), e),
        "linear1_weight": weight(gen, (ff, e), e),
        "linear2_weight": weight(gen, (e, ff), ff),
        "norm1_weight": (1 + floats(gen, (e,), 0.2)).astype(np.float32),
        "norm2_weight": (1 + floats(gen, (e,), 0.2)).astype(np.float32),
    }
    optional(draw, slots, "dropout", st.floats(0, 0.5))
    optional(draw, slots, "activation", st.sampled_from(["relu", "gelu"]))
    optional(draw, slots, "layer_norm_eps", st.floats(1e-6, 1e-3))
    optional(draw, slots, "norm_first", st.booleans())
    if batch_first or draw(st.booleans()):
        slots["batch_first"] = batch_first
    if not bias or draw(st.booleans()):
        slots["bias"] = bias
    if bias:
        for name, size in (
            ("self_attn_in_proj_bias", 3 * e),
            ("self_attn_out_proj_bias", e),
            ("linear1_bias", ff),
            ("linear2_bias", e),
            ("norm1_bias", e),
            ("norm2_bias", e),
        ):
            slots[name] = floats(gen, (size,), 0.1)
    steps, batch = draw(st.integers(1, 4)), draw(st.sampled_from([None, 1, 2]))
    if batch is None:
        shape: Shape = (steps, e)
    else:
        shape = (batch, steps, e) if batch_first else (steps, batch, e)
    inputs: dict[str, Any] = {"src": floats(gen, shape)}
    if draw(st.booleans()):
        inputs["src_mask"] = _mask(draw, gen, (steps, steps))
    if draw(st.booleans()):
        padding_shape = (steps,) if batch is None else (batch, steps)
        inputs["src_key_padding_mask"] = _mask(draw, gen, padding_shape)
    return Case("TransformerEncoderLayer", inputs, slots)


# --- Recurrent layers -----------------------------------------------------------------------


def recurrent(op: str) -> st.SearchStrategy[Case]:
    """``GRU`` and ``LSTM``: stacked, bidirectional, biased or not, both layouts and unbatched,
    with or without initial states, and (LSTM) projected hidden states. Sequences are short:
    agreement per step is what matters, and the error of a long recurrence grows with it."""
    gates = 3 if op == "GRU" else 4

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = rng(draw)
        size, hidden = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        layers = draw(st.integers(1, min(2, RNN_MAX_LAYERS)))
        bidirectional, bias = draw(st.booleans()), draw(st.booleans())
        batch_first = draw(st.booleans())
        projection = draw(st.integers(0, hidden - 1)) if op == "LSTM" else 0
        out = projection or hidden
        directions = 2 if bidirectional else 1
        slots: dict[str, Any] = {"input_size": size, "hidden_size": hidden}
        for name, value, default in (
            ("num_layers", layers, 1),
            ("bias", bias, True),
            ("batch_first", batch_first, False),
            ("bidirectional", bidirectional, False),
        ):
            if value != default or draw(st.booleans()):
                slots[name] = value
        optional(draw, slots, "dropout", st.floats(0, 0.5))
        if op == "LSTM" and (projection or draw(st.booleans())):
            slots["proj_size"] = projection
        for k in range(layers):
            for suffix in ("", "_reverse")[:directions]:
                fan = size if k == 0 else directions * out
                slots[f"weight_ih_l{k}{suffix}"] = weight(gen, (gates * hidden, fan), hidden)
                slots[f"weight_hh_l{k}{suffix}"] = weight(gen, (gates * hidden, out), hidden)
                if bias:
                    slots[f"bias_ih_l{k}{suffix}"] = weight(gen, (gates * hidden,), hidden)
                    slots[f"bias_hh_l{k}{suffix}"] = weight(gen, (gates * hidden,), hidden)
                if projection:
                    slots[f"weight_hr_l{k}{suffix}"] = weight(gen, (projection, hidden), hidden)
        steps, batch = draw(st.integers(1, 5)), draw(st.sampled_from([None, 1, 2]))
        if batch is None:
            shape: Shape = (steps, size)
        else:
            shape = (batch, steps, size) if batch_first else (steps, batch, size)
        inputs: dict[str, Any] = {"x": floats(gen, shape)}
        if draw(st.booleans()):
            state_batch = () if batch is None else (batch,)
            inputs["h0"] = floats(gen, (directions * layers, *state_batch, out), 0.5)
            if op == "LSTM":
                inputs["c0"] = floats(gen, (directions * layers, *state_batch, hidden), 0.5)
        return Case(op, inputs, slots)

    return strategy()


# --- Constants and tuples -------------------------------------------------------------------


@st.composite
def constant(draw: Draw) -> Case:
    """A value of every kind the slot holds: tensors of several dtypes, and Python numbers,
    bools, strings, null and lists, which stay Python values."""
    gen = rng(draw)
    kind = draw(st.sampled_from(["tensor", "tensor", "int", "float", "bool", "string", "null", "list"]))
    value: Any
    if kind == "tensor":
        value = tensor(draw, gen, shapes(draw, max_rank=3), draw(st.sampled_from(TENSORS)))
    elif kind == "list":
        value = draw(st.lists(st.integers(-5, 5), max_size=4))
    elif kind == "string":
        value = draw(st.sampled_from(["none", "tanh", "same"]))
    elif kind == "null":
        value = None
    else:
        value = draw(_NUMBERS[kind])
    return Case("constant", {}, {"value": value})


@st.composite
def tuple_get(draw: Draw) -> Case:
    """An element of a tuple model input (where tuples enter a catalog graph: catalog ops
    produce none), by a positive or negative index."""
    gen = rng(draw)
    count = draw(st.integers(1, 4))
    elements = tuple(_any_tensor(draw, gen, shapes(draw, max_rank=2)) for _ in range(count))
    return Case("tuple_get", {"x": elements}, {"index": draw(st.integers(-count, count - 1))})


# --- The table ------------------------------------------------------------------------------

_ACTIVATIONS = [
    *("ReLU", "relu", "LeakyReLU", "leaky_relu", "GELU", "gelu", "SiLU", "silu", "Sigmoid", "sigmoid"),
    *("Tanh", "tanh", "Softmax", "softmax", "LogSoftmax", "log_softmax", "Softplus", "softplus"),
    *("ELU", "elu", "Hardswish", "hardswish"),
]

#: A strategy for every catalog leaf op, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    **{op: activation(op) for op in _ACTIVATIONS},
    **{op: binary(op) for op in ("add", "sub", "mul", "div", "pow")},
    **{op: reduction(op) for op in ("mean", "sum", "max")},
    **{op: convolution(op) for op in ("Conv1d", "Conv2d")},
    **{op: pooling(op) for op in ("MaxPool2d", "AvgPool2d")},
    **{op: batch_norm(op) for op in ("BatchNorm1d", "BatchNorm2d")},
    **{op: recurrent(op) for op in ("GRU", "LSTM")},
    **{op: flatten(op) for op in ("flatten", "Flatten")},
    "matmul": matmul(),
    "neg": neg(),
    "concat": concat(),
    "stack": stack(),
    "reshape": reshape(),
    "permute": permute(),
    "transpose": transpose(),
    "squeeze": squeeze(),
    "unsqueeze": unsqueeze(),
    "argmax": argmax(),
    "getitem": getitem(),
    "tuple_get": tuple_get(),
    "constant": constant(),
    "Linear": linear(),
    "Bilinear": bilinear(),
    "ConvTranspose2d": conv_transpose2d(),
    "AdaptiveAvgPool2d": adaptive_avg_pool2d(),
    "LayerNorm": layer_norm(),
    "RMSNorm": rms_norm(),
    "GroupNorm": group_norm(),
    "Embedding": embedding(),
    "Dropout": dropout(),
    "Identity": identity(),
    "MultiheadAttention": multihead_attention(),
    "TransformerEncoderLayer": transformer_encoder_layer(),
    **cases_activations.CASES,
    **cases_elementwise.CASES,
    **cases_arrays.CASES,
    **cases_layer_functions.CASES,
    **cases_pooling.CASES,
    **cases_attention.CASES,
}


# The families' documented tolerances join the suite's table (conformance_support.TOLERANCES).
for _family in (
    cases_activations,
    cases_elementwise,
    cases_arrays,
    cases_layer_functions,
    cases_pooling,
    cases_attention,
):
    TOLERANCES.update(_family.TOLERANCES)


def case_for(op: str) -> st.SearchStrategy[Case]:
    """The strategy of ``op``, checked against the spec: the case may only use its ports and slots."""
    spec = spec_of(op)
    ports = {*spec.inputs, *spec.optional_inputs}
    slots = {schema.name for schema in spec.parameters}

    def checked(case: Case) -> Case:
        unknown_ports = {p for p in {*case.inputs, *case.constants} if p not in ports and not spec.variadic_inputs}
        if op == "getitem":
            unknown_ports = {p for p in unknown_ports if not p.startswith("i")}
        assert not unknown_ports, f"{op} case uses ports {unknown_ports} its spec lacks"
        assert set(case.slots) <= slots, f"{op} case uses slots {set(case.slots) - slots} its spec lacks"
        return case

    return CASES[op].map(checked)
