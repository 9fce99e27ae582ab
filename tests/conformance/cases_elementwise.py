"""Conformance cases of the catalog's elementwise ops (merged into ``conformance_cases.CASES``).

The cases follow ``conformance_cases``: structure drawn by hypothesis, numbers from a numpy
generator seeded by one drawn integer, small shapes (sizes 0 to 4, ranks 0 to 4). What is
particular here:

* every op sees integer and bool inputs where torch accepts them, because their result dtypes
  (``exp`` of int64 is float32, ``square`` of bool int64, a comparison of int32 with 2.5 in
  float32) are half of what these ops promise;
* values stay away from singularities unless the op's special value is the point and every
  runtime must give it: ``log`` and ``sqrt`` see 0 and negatives now and then (−inf, NaN),
  ``rsqrt`` and ``reciprocal`` never come near 0, ``log1p`` stays above −1;
* ``to`` never converts a NaN, an infinity or an out-of-range float to an integer (torch leaves
  those undefined; the catalog leaves them unspecified), never a negative float to uint8 (C's
  undefined behaviour), and never targets float64, which JAX without x64 computes as float32
  (int64 results are int32 there: the documented dtype exception covers them).

The module cannot import ``conformance_cases`` (which imports it), so the few helpers it needs
are its own.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from conformance_support import Case, Tolerance
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

__all__ = ["CASES", "TOLERANCES"]

Draw: TypeAlias = DrawFn
Shape: TypeAlias = tuple[int, ...]

#: Tensor dtypes of the arithmetic cases.
TENSORS = ("float32", "int32", "int64", "bool")


# --- Values and shapes ----------------------------------------------------------------------


def _rng(draw: Draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _shape(draw: Draw, min_rank: int = 0, max_rank: int = 4) -> Shape:
    """A shape of sizes 1 to 4, or now and then (one in eight) with empty dimensions."""
    low = 0 if draw(st.integers(0, 7)) == 0 else 1
    return tuple(draw(st.lists(st.integers(low, 4), min_size=min_rank, max_size=max_rank)))


def _reduced(draw: Draw, shape: Shape) -> Shape:
    """A shape that broadcasts to ``shape`` itself: a suffix of it, some sizes replaced by 1."""
    keep = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else size for size in shape[len(shape) - keep :])


def _partner(draw: Draw, shape: Shape) -> Shape:
    """A shape that broadcasts with ``shape``: a suffix of it, some sizes 1, maybe leading dims."""
    keep = draw(st.integers(0, len(shape)))
    partner = [1 if draw(st.booleans()) else size for size in shape[len(shape) - keep :]]
    if keep < len(shape):
        return tuple(partner)
    return (*draw(st.lists(st.integers(1, 3), max_size=max(0, 4 - len(shape)))), *partner)


def _floats(draw: Draw, gen: np.random.Generator, shape: Shape, scale: float = 1.0, *, nan: bool = False) -> Any:
    """float32 values: normal times ``scale``, or multiples of 0.5 (ties, exact zeros)."""
    if draw(st.booleans()):
        array = np.asarray(gen.integers(-4, 5, size=shape) / 2, dtype=np.float32)
    else:
        array = np.asarray(gen.standard_normal(shape) * scale, dtype=np.float32)
    if nan and array.size and draw(st.booleans()):
        array[gen.random(shape) < 0.2] = np.nan
    return array


def _integers(gen: np.random.Generator, shape: Shape, dtype: str, low: int = -5, high: int = 5) -> Any:
    if dtype == "bool":
        return np.asarray(gen.random(shape) < 0.5)
    return np.asarray(gen.integers(low, high + 1, size=shape), dtype=dtype)


def _tensor(draw: Draw, gen: np.random.Generator, shape: Shape, dtype: str, *, nan: bool = False) -> Any:
    return _floats(draw, gen, shape, nan=nan) if dtype == "float32" else _integers(gen, shape, dtype)


_NUMBERS: dict[str, st.SearchStrategy[Any]] = {
    "int": st.integers(-4, 4),
    "float": st.floats(-3, 3, width=32).map(float),
    "bool": st.booleans(),
}


def _number(draw: Draw, kinds: tuple[str, ...] = ("int", "float", "bool")) -> Any:
    return draw(_NUMBERS[draw(st.sampled_from(kinds))])


def _place(draw: Draw, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each operand on its port or in its slot: a number always in the slot, a tensor either way
    (a held 0-d tensor promotes as a tensor, not as a number), at least one on a port."""
    inputs: dict[str, Any] = {}
    slots: dict[str, Any] = {}
    names = list(values)
    for name in names:
        value = values[name]
        last = name == names[-1]
        if isinstance(value, np.ndarray) and ((last and not inputs) or draw(st.booleans())):
            inputs[name] = value
        else:
            slots[name] = value
    return inputs, slots


# --- Unary math -----------------------------------------------------------------------------


def _positive(gen: np.random.Generator, shape: Shape, low: float) -> Any:
    return np.asarray(np.abs(gen.standard_normal(shape)) * 2 + low, dtype=np.float32)


def _with_specials(draw: Draw, gen: np.random.Generator, array: Any, specials: tuple[float, ...]) -> Any:
    """Now and then, a few elements replaced by the op's special values (0, −1: −inf and NaN)."""
    if array.size and draw(st.booleans()):
        array = array.copy()
        chosen = gen.random(array.shape) < 0.25
        array[chosen] = gen.choice(np.asarray(specials, dtype=np.float32), size=int(chosen.sum()))
    return array


def _float_input(op: str, draw: Draw, gen: np.random.Generator, shape: Shape) -> Any:
    """A float32 ``x`` in the op's well-conditioned domain (see the module's doc)."""
    if op == "log":
        return _with_specials(draw, gen, _positive(gen, shape, 0.05), (0.0, -1.0))
    if op == "sqrt":
        return _with_specials(draw, gen, _positive(gen, shape, 0.0), (0.0, -2.0))
    if op == "rsqrt":
        return _positive(gen, shape, 0.1)
    if op == "log1p":
        return np.asarray(gen.uniform(-0.9, 3.0, size=shape), dtype=np.float32)
    if op == "reciprocal":
        sign = np.where(gen.random(shape) < 0.5, -1.0, 1.0)
        return np.asarray(sign * (np.abs(gen.standard_normal(shape)) + 0.1), dtype=np.float32)
    scale = {"exp": 3.0, "expm1": 2.0, "sin": 4.0, "cos": 4.0, "erf": 2.0}.get(op, 1.0)
    return _floats(draw, gen, shape, scale, nan=True)


def _integer_input(op: str, gen: np.random.Generator, shape: Shape, dtype: str) -> Any:
    """An integer or bool ``x`` in the op's domain (integer inputs give float32 results)."""
    if dtype == "bool":
        return _integers(gen, shape, "bool")
    if op in ("log", "sqrt"):
        return _integers(gen, shape, dtype, 0, 6)  # log(0) is −inf everywhere
    if op in ("rsqrt", "reciprocal"):
        return _integers(gen, shape, dtype, 1, 6)
    if op == "log1p":
        return _integers(gen, shape, dtype, 0, 6)
    return _integers(gen, shape, dtype)


def float_unary(op: str) -> st.SearchStrategy[Case]:
    """The transcendental ops: float32 in the op's domain, or integers and bools (→ float32)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw)
        dtype = draw(st.sampled_from(TENSORS))
        x = _float_input(op, draw, gen, shape) if dtype == "float32" else _integer_input(op, gen, shape, dtype)
        return Case(op, {"x": x})

    return strategy()


def kept_unary(op: str, dtypes: tuple[str, ...]) -> st.SearchStrategy[Case]:
    """``abs``, ``floor``, ``ceil``, ``sign``, ``square``: the dtype of ``x`` kept (bool for
    ``sign``, → int64 for ``square``), NaN included."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw)
        dtype = draw(st.sampled_from(dtypes))
        x = _floats(draw, gen, shape, 3.0, nan=True) if dtype == "float32" else _integers(gen, shape, dtype)
        return Case(op, {"x": x})

    return strategy()


@st.composite
def round_case(draw: Draw) -> Case:
    """Half-to-even ties (multiples of 0.5), ``decimals`` −1 to 2; integers without decimals."""
    gen = _rng(draw)
    shape = _shape(draw)
    slots: dict[str, Any] = {}
    if draw(st.booleans()):
        x = _floats(draw, gen, shape, 20.0, nan=True)
        if draw(st.booleans()):
            slots["decimals"] = draw(st.integers(-1, 2))
    else:
        x = _integers(gen, shape, draw(st.sampled_from(["int32", "int64"])))
        if draw(st.booleans()):
            slots["decimals"] = 0
    return Case("round", {"x": x}, slots)


# --- Comparisons and logic ------------------------------------------------------------------


def _operand(
    draw: Draw, gen: np.random.Generator, shape: Shape, dtypes: tuple[str, ...], kinds: tuple[str, ...]
) -> Any:
    """A tensor of one of ``dtypes``, or a number of one of ``kinds``."""
    choice = draw(st.sampled_from((*dtypes, *(["number"] if kinds else []))))
    if choice == "number":
        return _number(draw, kinds)
    return _tensor(draw, gen, shape, choice, nan=True)


def binary(op: str, dtypes: tuple[str, ...], kinds: tuple[str, ...]) -> st.SearchStrategy[Case]:
    """Comparisons and bitwise ops: broadcasting operands of ``dtypes`` or numbers of ``kinds``,
    on either side, on ports or in slots."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw, max_rank=3)
        x = _tensor(draw, gen, shape, draw(st.sampled_from(dtypes)), nan=True)
        other = _operand(draw, gen, _partner(draw, shape), dtypes, kinds)
        if draw(st.booleans()):
            x, other = other, x
        inputs, slots = _place(draw, {"x": x, "other": other})
        return Case(op, inputs, slots)

    return strategy()


def pair(op: str, dtypes: tuple[str, ...]) -> st.SearchStrategy[Case]:
    """Two broadcasting tensors on ports (``logical_*``, ``minimum``, ``maximum``), NaN included."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw, max_rank=3)
        x = _tensor(draw, gen, shape, draw(st.sampled_from(dtypes)), nan=True)
        other = _tensor(draw, gen, _partner(draw, shape), draw(st.sampled_from(dtypes)), nan=True)
        if draw(st.booleans()):
            x, other = other, x
        return Case(op, {"x": x, "other": other})

    return strategy()


@st.composite
def logical_not(draw: Draw) -> Case:
    gen = _rng(draw)
    return Case("logical_not", {"x": _tensor(draw, gen, _shape(draw), draw(st.sampled_from(TENSORS)), nan=True)})


@st.composite
def bitwise_not(draw: Draw) -> Case:
    gen = _rng(draw)
    dtype = draw(st.sampled_from(("bool", "int32", "int64", "uint8", "int8")))
    return Case("bitwise_not", {"x": _integers(gen, _shape(draw), dtype, 0 if dtype == "uint8" else -5)})


# --- Selection ------------------------------------------------------------------------------


@st.composite
def where(draw: Draw) -> Case:
    """A bool condition broadcasting with ``x`` and ``other`` (tensors or numbers, ports or
    slots): the promotion of the two branches alone decides the dtype."""
    gen = _rng(draw)
    shape = _shape(draw, max_rank=3)
    condition = _integers(gen, _partner(draw, shape), "bool")
    x = _operand(draw, gen, shape, TENSORS, ("int", "float", "bool"))
    other = _operand(draw, gen, _reduced(draw, shape), TENSORS, ("int", "float", "bool"))
    if not isinstance(x, np.ndarray) and not isinstance(other, np.ndarray) and draw(st.booleans()):
        x = _tensor(draw, gen, shape, "float32")
    inputs, slots = _place(draw, {"x": x, "other": other})
    return Case("where", {"condition": condition, **inputs}, slots)


def _fill(draw: Draw, dtype: str, *, tensor: bool) -> Any:
    """A fill value that fits ``dtype`` (floats into integers are truncated: in range here);
    −inf only as a tensor, since JSON has no number for it."""
    if dtype == "float32":
        return draw(st.sampled_from([-1e9, 0.0, 2.5, -3, True, *([float("-inf")] if tensor else [])]))
    return draw(st.sampled_from([-3, 0, 2, 2.7, -2.7, True, False]))


@st.composite
def masked_fill(draw: Draw) -> Case:
    """``value`` a number (a large negative, a float into an integer tensor, a bool), a held 0-d
    tensor (``-inf`` too), or a 0-d tensor on the port; the mask broadcasts with ``x``."""
    gen = _rng(draw)
    shape = _shape(draw, max_rank=3)
    dtype = draw(st.sampled_from(TENSORS))
    x = _tensor(draw, gen, shape, dtype, nan=True)
    mask = _integers(gen, _partner(draw, shape), "bool")
    form = draw(st.sampled_from(["number", "held", "port"]))
    value = _fill(draw, dtype, tensor=form != "number")
    if form != "number":
        value = np.asarray(float(value), dtype=np.float32)
    if form == "port":
        return Case("masked_fill", {"x": x, "mask": mask, "value": value})
    return Case("masked_fill", {"x": x, "mask": mask}, {"value": value})


@st.composite
def clamp(draw: Draw) -> Case:
    """Bounds as numbers (ints keep an integer tensor integer, floats make it float32), as
    broadcasting tensors on the ports, or one of each; ``min > max`` included; NaN in ``x``."""
    gen = _rng(draw)
    shape = _shape(draw, max_rank=3)
    dtype = draw(st.sampled_from(("float32", "int32", "int64")))
    x = _tensor(draw, gen, shape, dtype, nan=True)
    inputs: dict[str, Any] = {"x": x}
    slots: dict[str, Any] = {}
    present = draw(st.sampled_from([("min",), ("max",), ("min", "max")]))
    for name in ("min", "max"):
        if name not in present:
            if draw(st.booleans()):
                slots[name] = None
            continue
        if draw(st.booleans()):
            inputs[name] = _tensor(draw, gen, _partner(draw, shape), draw(st.sampled_from(("float32", "int32"))))
        else:
            slots[name] = _number(draw, ("int", "float"))
    return Case("clamp", inputs, slots)


# --- Casts ----------------------------------------------------------------------------------

#: Every target but float64 (float32 in JAX without x64) and bfloat16, which the suite cannot compare
#: yet (``conformance_support.normalize`` reads a torch tensor through ``.numpy()``, which has no
#: bfloat16): the unit tests of each framework cover bfloat16.
_TARGETS = ("float16", "float32", "int8", "int16", "int32", "int64", "uint8", "bool")


@st.composite
def to(draw: Draw) -> Case:
    """Every source kind to every target of :data:`_TARGETS`: floats to integers truncated (in range,
    non-negative for uint8), integers wrapped (int32 −3 → uint8 253), anything to bool."""
    gen = _rng(draw)
    shape = _shape(draw)
    source = draw(st.sampled_from(("float32", "int32", "int64", "bool", "uint8", "int8")))
    target = draw(st.sampled_from(_TARGETS))
    if source == "float32":
        x = np.asarray(gen.standard_normal(shape) * 40, dtype=np.float32)
        if target == "uint8":
            x = np.abs(x)
        elif target == "int8":
            x = np.clip(x, -127, 127)
        if target == "bool" and x.size and draw(st.booleans()):
            x[gen.random(shape) < 0.3] = draw(st.sampled_from([0.0, -0.0, float("nan")]))
    else:
        low, high = (0, 255) if source == "uint8" else ((-128, 127) if source == "int8" else (-300, 300))
        x = _integers(gen, shape, source, low, high)
    return Case("to", {"x": x}, {"dtype": target})


_FLOAT_UNARY = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "erf", "reciprocal")
_BITS = ("bool", "int32", "int64", "uint8")

#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    **{op: float_unary(op) for op in _FLOAT_UNARY},
    "abs": kept_unary("abs", ("float32", "int32", "int64")),
    "floor": kept_unary("floor", ("float32", "int32", "int64")),
    "ceil": kept_unary("ceil", ("float32", "int32", "int64")),
    "sign": kept_unary("sign", TENSORS),
    "square": kept_unary("square", TENSORS),
    "round": round_case(),
    **{op: binary(op, TENSORS, ("int", "float", "bool")) for op in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{op: pair(op, TENSORS) for op in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": logical_not(),
    **{op: binary(op, _BITS, ("int", "bool")) for op in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    "bitwise_not": bitwise_not(),
    "where": where(),
    "masked_fill": masked_fill(),
    "clamp": clamp(),
    "minimum": pair("minimum", ("float32", "int32", "int64")),
    "maximum": pair("maximum", ("float32", "int32", "int64")),
    "to": to(),
}

#: Documented tolerance exceptions of the family's ops (each says why).
TOLERANCES: dict[str, Tolerance] = {}
