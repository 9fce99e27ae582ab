"""Conformance cases of the catalog's arrays ops (merged into ``conformance_cases.CASES``).

The same principles as :mod:`conformance_cases`: structure drawn by hypothesis, numbers from a
numpy generator seeded by one drawn integer, small shapes (sizes 0 to 4) with empty dimensions now
and then, integer and bool tensors wherever an op takes them, quantized float32 values for ties.
What each op needs on top:

* ``gather``/``index_select`` positions lie in range (torch raises for the others, and a compiled
  runtime cannot check values); index tensors come from model inputs or ``constant`` nodes;
* scans and products of integers use values in −2 … 2, so that int64 results fit in int32
  (JAX's documented dtype exception compares values exactly);
* ``topk`` draws ties and NaNs freely: every runtime follows the catalog's tie rule (the lower
  position first), so ``indices`` agree exactly, where torch's own ``topk`` could order equal
  elements otherwise;
* ``var``/``std`` use a ``correction`` below the element count: at or above it the divisor is 0,
  and whether a float32 sum of squared deviations of equal values is exactly 0 (NaN) or a
  rounding residue (+∞) is not a property of the op;
* creation ops use dtypes JAX has (no float64), float ``arange`` steps that are not powers of
  two, where torch's float32 steps differ from the exact value in the last bit (within 1e-5).

None of these ops needs a looser tolerance than the default.
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

_ANY = ("float32", "int32", "int64", "bool")


# --- Values and shapes ----------------------------------------------------------------------


def _rng(draw: Draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _shape(draw: Draw, min_rank: int = 0, max_rank: int = 3, min_size: int = 0, max_size: int = 4) -> Shape:
    """A shape; where ``min_size`` is 0, one in eight may have empty dimensions."""
    if min_size == 0 and draw(st.integers(0, 7)) != 0:
        min_size = 1
    return tuple(draw(st.lists(st.integers(min_size, max_size), min_size=min_rank, max_size=max_rank)))


def _floats(draw: Draw, gen: np.random.Generator, shape: Shape, scale: float = 1.0, *, nan: bool = False) -> np.ndarray:
    """float32: normal, or multiples of 0.5 (ties); with ``nan`` a few NaNs now and then."""
    if draw(st.booleans()):
        array = np.asarray(gen.integers(-4, 5, size=shape) / 2, dtype=np.float32)
    else:
        array = np.asarray(gen.standard_normal(shape) * scale, dtype=np.float32)
    if nan and array.size and draw(st.integers(0, 3)) == 0:
        array[gen.random(shape) < 0.2] = np.nan
    return array


def _tensor(draw: Draw, gen: np.random.Generator, shape: Shape, dtype: str, low: int = -5, high: int = 5) -> np.ndarray:
    if dtype == "float32":
        return _floats(draw, gen, shape)
    if dtype == "bool":
        return np.asarray(gen.random(shape) < 0.5)
    return np.asarray(gen.integers(low, high + 1, size=shape), dtype=dtype)


def _dim(draw: Draw, rank: int) -> int:
    """A dimension of a rank-``rank`` tensor, possibly negative (0-d admits 0 and −1)."""
    size = max(rank, 1)
    return draw(st.integers(-size, size - 1))


def _dims(draw: Draw, rank: int) -> int | list[int] | None:
    """A reduction's ``dim``: null, an int, or a non-empty list of distinct dimensions."""
    kind = draw(st.sampled_from(["null", "int", "list"]))
    if kind == "null":
        return None
    if kind == "int" or rank == 0:
        return _dim(draw, rank)
    chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return [d - rank if draw(st.booleans()) else d for d in chosen]


def _reduced_count(shape: Shape, dims: int | list[int] | None) -> int:
    if dims is None or not shape:
        return int(np.prod(shape))
    listed = [dims] if isinstance(dims, int) else dims
    return int(np.prod([shape[d] for d in listed]))


def _maybe(draw: Draw, slots: dict[str, Any], name: str, strategy: st.SearchStrategy[Any]) -> None:
    """Set slot ``name`` to a drawn value, or leave it absent (the catalog default)."""
    if draw(st.booleans()):
        slots[name] = draw(strategy)


def _index_port(draw: Draw, index: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    """The index on a model input or, as a tracer writes a fixed index, from a ``constant`` node."""
    return ({"index": index}, {}) if draw(st.booleans()) else ({}, {"index": index})


# --- Shapes ---------------------------------------------------------------------------------


@st.composite
def expand(draw: Draw) -> Case:
    """Sizes kept (own or −1), size-1 dimensions repeated (to 0 too), new leading dimensions."""
    gen = _rng(draw)
    shape = tuple(1 if draw(st.booleans()) else size for size in _shape(draw, min_size=1))
    lead = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    size = list(lead)
    for own in shape:
        if own == 1 and draw(st.booleans()):
            size.append(draw(st.integers(0, 3)))
        else:
            size.append(-1 if draw(st.booleans()) else own)
    x = _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))
    return Case("expand", {"x": x}, {"size": size})


@st.composite
def gather(draw: Draw) -> Case:
    """An int64 index of the rank of ``x``, at most its sizes off ``dim``, positions in range."""
    gen = _rng(draw)
    shape = _shape(draw, min_size=1)
    dim = _dim(draw, len(shape))
    if shape:
        axis = dim % len(shape)
        index_shape = tuple(
            draw(st.integers(0, 4)) if k == axis else draw(st.integers(0, size)) for k, size in enumerate(shape)
        )
        index = np.asarray(gen.integers(0, shape[axis], size=index_shape), dtype=np.int64)
    else:
        index = np.asarray(0, dtype=np.int64)
    inputs, constants = _index_port(draw, index)
    x = _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))
    return Case("gather", {"x": x, **inputs}, {"dim": dim}, constants=constants)


@st.composite
def index_select(draw: Draw) -> Case:
    """A 1-D (or 0-d) int32 or int64 index, positions in range, repeats allowed."""
    gen = _rng(draw)
    shape = _shape(draw, min_size=1)
    dim = _dim(draw, len(shape))
    extent = shape[dim % len(shape)] if shape else 1
    index_shape: Shape = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(0, 4)),)
    dtype = draw(st.sampled_from(["int32", "int64"]))
    index = np.asarray(gen.integers(0, extent, size=index_shape), dtype=dtype)
    inputs, constants = _index_port(draw, index)
    x = _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))
    return Case("index_select", {"x": x, **inputs}, {"dim": dim}, constants=constants)


def scan(op: str) -> st.SearchStrategy[Case]:
    """``cumsum``/``cumprod`` of every dtype (bools and integers give int64)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw)
        dtype = draw(st.sampled_from(_ANY))
        x = _tensor(draw, gen, shape, dtype, -2, 2)
        return Case(op, {"x": x}, {"dim": _dim(draw, len(shape))})

    return strategy()


def triangle(op: str) -> st.SearchStrategy[Case]:
    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw, min_rank=2, max_rank=4)
        slots: dict[str, Any] = {}
        _maybe(draw, slots, "diagonal", st.integers(-4, 4))
        return Case(op, {"x": _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))}, slots)

    return strategy()


@st.composite
def roll(draw: Draw) -> Case:
    """Flattened (``dims`` null or absent, one shift as an int or a list; the only form a 0-d
    ``x`` takes), one dimension, or several distinct ones; shifts beyond the sizes and negative."""
    gen = _rng(draw)
    shape = _shape(draw)
    rank = len(shape)
    shift = st.integers(-6, 6)
    slots: dict[str, Any]
    kind = draw(st.sampled_from(["flat", "int", "list"])) if rank else "flat"
    if kind == "flat":
        slots = {"shifts": draw(shift) if draw(st.booleans()) else [draw(shift)]}
        _maybe(draw, slots, "dims", st.none())
    elif kind == "int":
        slots = {"shifts": draw(shift), "dims": _dim(draw, rank)}
    else:
        chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        slots = {
            "shifts": [draw(shift) for _ in chosen],
            "dims": [d - rank if draw(st.booleans()) else d for d in chosen],
        }
    return Case("roll", {"x": _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))}, slots)


@st.composite
def flip(draw: Draw) -> Case:
    gen = _rng(draw)
    shape = _shape(draw)
    rank = len(shape)
    if rank:
        chosen = draw(st.lists(st.integers(0, rank - 1), max_size=rank, unique=True))
        dims = [d - rank if draw(st.booleans()) else d for d in chosen]
    else:
        dims = draw(st.sampled_from([[], [0], [-1]]))
    return Case("flip", {"x": _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))}, {"dims": dims})


@st.composite
def linalg_vector_norm(draw: Draw) -> Case:
    gen = _rng(draw)
    shape = _shape(draw)
    rank = len(shape)
    x = _floats(draw, gen, shape, 2.0)
    slots: dict[str, Any] = {"ord": draw(st.sampled_from([2, 1, 3, 0.5, 0, "inf", "-inf"]))}
    if rank and draw(st.booleans()):
        chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        slots["dim"] = [d - rank if draw(st.booleans()) else d for d in chosen]
    elif draw(st.booleans()):
        slots["dim"] = _dim(draw, rank)
    _maybe(draw, slots, "keepdim", st.booleans())
    return Case("linalg_vector_norm", {"x": x}, slots)


@st.composite
def slice_scatter(draw: Draw) -> Case:
    gen = _rng(draw)
    shape = _shape(draw)
    if not shape:
        shape = (draw(st.integers(1, 4)),)
    rank = len(shape)
    dim = draw(st.integers(-rank, rank - 1))
    bound = st.one_of(st.none(), st.integers(-6, 6))
    start, end, step = draw(bound), draw(bound), draw(st.integers(1, 3))
    size = len(range(*slice(start, end, step).indices(shape[dim])))
    src_shape = (*shape[: dim % rank], size, *shape[dim % rank + 1 :])
    dtype = draw(st.sampled_from(_ANY))
    return Case(
        "slice_scatter",
        {"x": _tensor(draw, gen, shape, dtype), "src": _tensor(draw, gen, src_shape, dtype)},
        {"dim": dim, "start": start, "end": end, "step": step},
    )


@st.composite
def contiguous(draw: Draw) -> Case:
    gen = _rng(draw)
    return Case("contiguous", {"x": _tensor(draw, gen, _shape(draw), draw(st.sampled_from(_ANY)))}, {})


def tiling(op: str) -> st.SearchStrategy[Case]:
    """``repeat`` (at least the rank of ``x`` entries) and ``tile`` (any number)."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw, max_size=3)
        low = len(shape) if op == "repeat" else 0
        count = draw(st.integers(low, len(shape) + 2))
        repeats = [draw(st.integers(0, 3)) for _ in range(count)]
        slot = "repeats" if op == "repeat" else "dims"
        return Case(op, {"x": _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))}, {slot: repeats})

    return strategy()


@st.composite
def repeat_interleave(draw: Draw) -> Case:
    """One count for every slice or one per slice (0 too), along a dimension or, with ``dim``
    null, the flattened ``x`` (a 0-d ``x`` takes only that)."""
    gen = _rng(draw)
    shape = _shape(draw, max_size=3)
    dim = None if not shape or draw(st.booleans()) else _dim(draw, len(shape))
    slices = int(np.prod(shape)) if dim is None else shape[dim]
    repeats: int | list[int]
    kind = draw(st.sampled_from(["int", "each", "one"]))
    if kind == "int":
        repeats = draw(st.integers(0, 3))
    elif kind == "each":
        repeats = [draw(st.integers(0, 3)) for _ in range(slices)]
    else:
        repeats = [draw(st.integers(0, 3))]
    slots: dict[str, Any] = {"repeats": repeats}
    if dim is not None or draw(st.booleans()):
        slots["dim"] = dim
    return Case("repeat_interleave", {"x": _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)))}, slots)


#: Equations and the sizes of their letters (``.`` is ``...``, drawn as 0 to 2 dimensions).
_EQUATIONS = (
    "ij,jk->ik",
    "bij,bjk->bik",
    "ij->ji",
    "ii->i",
    "ij->",
    "i,i->",
    "i,j->ij",
    "...ij,...jk->...ik",
    "ij,jk",
    "bhqd,bhkd->bhqk",
    "ij,jk,kl->il",
    "ij",
    "Ba",
    "ba",
    "...i->...",
    "ijk->kji",
    "i j , j k -> i k",
)


@st.composite
def einsum(draw: Draw) -> Case:
    """Products, transposes, traces, sums, outer products, ``...`` batches, implicit outputs
    (sorted letters, capitals first) and spaces; float32, or int32 now and then."""
    gen = _rng(draw)
    equation = draw(st.sampled_from(_EQUATIONS))
    left = equation.replace(" ", "").split("->")[0]
    letters = sorted({c for c in left if c.isalpha()})
    sizes = {letter: draw(st.integers(1, 4)) for letter in letters}
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    dtype = "int32" if draw(st.integers(0, 4)) == 0 else "float32"
    inputs = {}
    for k, term in enumerate(left.split(",")):
        shape = (batch if "..." in term else ()) + tuple(sizes[c] for c in term.replace("...", ""))
        inputs[f"x{k}"] = _tensor(draw, gen, shape, dtype, -3, 3)
    return Case("einsum", inputs, {"equation": equation})


# --- Reductions -----------------------------------------------------------------------------


def reduction(op: str) -> st.SearchStrategy[Case]:
    """``min`` (NaN, ties, ints), ``any``/``all`` (every dtype, NaN, zeros, uint8), ``var``/``std``
    (a correction below the count): every form of ``dim`` and ``keepdim``."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        empty_allowed = op in ("any", "all")
        shape = _shape(draw, min_size=0 if empty_allowed else 1)
        slots: dict[str, Any] = {}
        if draw(st.booleans()):
            slots["dim"] = _dims(draw, len(shape))
        _maybe(draw, slots, "keepdim", st.booleans())
        if op == "min":
            dtype = draw(st.sampled_from(["float32", "int32", "int64"]))
            x = _floats(draw, gen, shape, nan=True) if dtype == "float32" else _tensor(draw, gen, shape, dtype)
        elif op in ("any", "all"):
            dtype = draw(st.sampled_from([*_ANY, "uint8"]))
            x = _tensor(draw, gen, shape, dtype, 0 if dtype == "uint8" else -1, 1)
            if dtype == "float32":
                x = np.where(gen.random(shape) < 0.5, 0, _floats(draw, gen, shape, nan=True)).astype(np.float32)
        else:
            x = _floats(draw, gen, shape)
            count = _reduced_count(shape, slots.get("dim"))
            corrections = [c for c in (0, 1, 0.5, 2) if c < count]
            if draw(st.booleans()):
                slots["correction"] = draw(st.sampled_from(corrections))
            elif count <= 1:
                slots["correction"] = 0
        return Case(op, {"x": x}, slots)

    return strategy()


def single(op: str) -> st.SearchStrategy[Case]:
    """``argmin`` (ties, NaN) and ``prod`` (every dtype, small values): one dimension, or all."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        shape = _shape(draw, min_size=1 if op == "argmin" else 0)
        if op == "argmin":
            dtype = draw(st.sampled_from(["float32", "int32", "int64"]))
            x = _floats(draw, gen, shape, nan=True) if dtype == "float32" else _tensor(draw, gen, shape, dtype, -2, 2)
        else:
            x = _tensor(draw, gen, shape, draw(st.sampled_from(_ANY)), -2, 2)
        slots: dict[str, Any] = {}
        if draw(st.booleans()):
            slots["dim"] = _dim(draw, len(shape))
        elif draw(st.booleans()):
            slots["dim"] = None
        _maybe(draw, slots, "keepdim", st.booleans())
        return Case(op, {"x": x}, slots)

    return strategy()


@st.composite
def logsumexp(draw: Draw) -> Case:
    """float32 values (−∞ now and then) or integers (float32 results); ``dim`` an int or a list."""
    gen = _rng(draw)
    shape = _shape(draw, min_size=1)
    rank = len(shape)
    if draw(st.integers(0, 3)) == 0:
        x = _tensor(draw, gen, shape, draw(st.sampled_from(["int32", "int64", "bool"])))
    else:
        x = _floats(draw, gen, shape, 3.0)
        if x.size and draw(st.integers(0, 3)) == 0:
            x[gen.random(shape) < 0.3] = -np.inf
    if rank and draw(st.booleans()):
        chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        dim: int | list[int] = [d - rank if draw(st.booleans()) else d for d in chosen]
    else:
        dim = _dim(draw, rank)
    slots: dict[str, Any] = {"dim": dim}
    _maybe(draw, slots, "keepdim", st.booleans())
    return Case("logsumexp", {"x": x}, slots)


# --- Selection ------------------------------------------------------------------------------


@st.composite
def topk(draw: Draw) -> Case:
    """Any ``k`` up to the dimension's size, largest or smallest; float32 with ties (multiples of
    0.5) and NaNs now and then, or integers of few values (many ties): the runtimes follow the
    catalog's tie rule, so they agree on ``indices`` too. No bools (torch refuses them)."""
    gen = _rng(draw)
    shape = _shape(draw)
    dim = _dim(draw, len(shape))
    size = shape[dim] if shape else 1
    dtype = draw(st.sampled_from(["float32", "float32", "int32", "int64"]))
    x = _floats(draw, gen, shape, nan=True) if dtype == "float32" else _tensor(draw, gen, shape, dtype, -2, 2)
    slots: dict[str, Any] = {"k": draw(st.integers(0, size))}
    if dim != -1 or draw(st.booleans()):
        slots["dim"] = dim
    _maybe(draw, slots, "largest", st.booleans())
    return Case("topk", {"x": x}, slots)


# --- Creation -------------------------------------------------------------------------------

_CREATED_DTYPES = (None, "float32", "int32", "int64", "bool", "uint8", "int8", "float16")


@st.composite
def arange(draw: Draw) -> Case:
    """Integer or float settings (steps negative, fractional, not powers of two), every form of
    the slots, dtype null or one that fits."""
    if draw(st.booleans()):
        start, step = draw(st.integers(-5, 5)), draw(st.sampled_from([1, 2, 3, -1, -2]))
        end = start + step * draw(st.integers(0, 8)) + draw(st.integers(0, abs(step) - 1)) * (1 if step > 0 else -1)
        dtype = draw(st.sampled_from([None, "int64", "int32", "float32"]))
    else:
        start = draw(st.sampled_from([0.0, -1.5, 0.25, 2.0, -3.1]))
        step = draw(st.sampled_from([0.5, 0.3, -0.25, 1.1, -0.7, 1]))
        end = start + step * draw(st.integers(0, 8)) + (0.05 if step > 0 else -0.05)
        dtype = draw(st.sampled_from([None, "float32"]))
    slots: dict[str, Any] = {"end": end}
    if start != 0 or draw(st.booleans()):
        slots["start"] = start
    if step != 1 or draw(st.booleans()):
        slots["step"] = step
    if dtype is not None or draw(st.booleans()):
        slots["dtype"] = dtype
    return Case("arange", {}, slots)


def _fill(draw: Draw) -> int | float | bool:
    return draw(st.one_of(st.integers(-5, 5), st.floats(-3, 3, width=32).map(float), st.booleans()))


def _fill_dtype(draw: Draw, fill: int | float | bool) -> str | None:
    """A dtype the fill value fits (a negative one is not converted to uint8)."""
    dtypes = [d for d in _CREATED_DTYPES if not (d == "uint8" and not isinstance(fill, bool) and fill < 0)]
    return draw(st.sampled_from(dtypes))


@st.composite
def full(draw: Draw) -> Case:
    fill = _fill(draw)
    slots: dict[str, Any] = {"size": list(_shape(draw)), "fill_value": fill}
    dtype = _fill_dtype(draw, fill)
    if dtype is not None or draw(st.booleans()):
        slots["dtype"] = dtype
    return Case("full", {}, slots)


def constant_fill(op: str) -> st.SearchStrategy[Case]:
    @st.composite
    def strategy(draw: Draw) -> Case:
        slots: dict[str, Any] = {"size": list(_shape(draw))}
        _maybe(draw, slots, "dtype", st.sampled_from(_CREATED_DTYPES))
        return Case(op, {}, slots)

    return strategy()


def like(op: str) -> st.SearchStrategy[Case]:
    """The shape of ``x`` (any dtype), of ``dtype`` or that of ``x``."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        x = _tensor(draw, gen, _shape(draw), draw(st.sampled_from(_ANY)))
        slots: dict[str, Any] = {}
        if op == "full_like":
            fill = _fill(draw)
            slots["fill_value"] = fill
            dtype = _fill_dtype(draw, fill)
        else:
            dtype = draw(st.sampled_from(_CREATED_DTYPES))
        if dtype is not None or draw(st.booleans()):
            slots["dtype"] = dtype
        return Case(op, {"x": x}, slots)

    return strategy()


#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    "expand": expand(),
    "gather": gather(),
    "index_select": index_select(),
    **{op: scan(op) for op in ("cumsum", "cumprod")},
    **{op: triangle(op) for op in ("triu", "tril")},
    "roll": roll(),
    "flip": flip(),
    "contiguous": contiguous(),
    "slice_scatter": slice_scatter(),
    "linalg_vector_norm": linalg_vector_norm(),
    **{op: tiling(op) for op in ("repeat", "tile")},
    "repeat_interleave": repeat_interleave(),
    "einsum": einsum(),
    **{op: reduction(op) for op in ("min", "any", "all", "var", "std")},
    **{op: single(op) for op in ("argmin", "prod")},
    "logsumexp": logsumexp(),
    "topk": topk(),
    "arange": arange(),
    "full": full(),
    **{op: constant_fill(op) for op in ("zeros", "ones")},
    **{op: like(op) for op in ("full_like", "zeros_like", "ones_like")},
}

#: Documented tolerance exceptions of the family's ops (each says why): none needed.
TOLERANCES: dict[str, Tolerance] = {}
