"""The settings checks of :mod:`trama.catalog.arrays`, and the framework-neutral rules its kernels
share: an ``einsum`` equation parsed into explicit form, the dtype and values of a created
tensor (``arange``, ``full``, …), which depend on the settings alone, and what a
``repeat_interleave`` or ``topk`` asks of its input's shape (every runtime refuses alike).

What a check derives is added to the settings, so that every framework reads the same thing:
``einsum``'s ``equation`` in explicit form (``"ij,jk->ik"``, spaces removed, the implicit output
written out), and a creation op's ``result_dtype`` (a format dtype name, or ``None`` for a
``_like`` op whose dtype is that of ``x``).
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from typing import Any

import numpy as np

from trama.catalog._limits import MAX_ELEMENTS, MAX_TENSOR_BYTES, extent_problem, shown_limit, slice_problem
from trama.catalog._reader import (
    REQUIRED,
    Checker,
    Choice,
    Dims,
    Flag,
    Integer,
    IntList,
    Number,
    Reader,
    Relation,
    is_int,
    is_number,
)
from trama.format._dtypes import DTYPE_NAMES, numpy_dtype

__all__ = [
    "CHECKERS",
    "Counts",
    "Scalar",
    "arange_length",
    "arange_values",
    "einsum_shapes",
    "einsum_terms",
    "expanded_shape",
    "filled",
    "interleaved",
    "scattered_slice",
    "top_k_axis",
]

_LETTERS = frozenset(string.ascii_letters)
_INTEGER_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


# --- Rules ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scalar:
    """A Python number kept as it is (an int stays an int: it decides a created tensor's dtype),
    or with ``bools`` also a bool."""

    default: Any = REQUIRED
    nullable: bool = False
    bools: bool = False

    def read(self, reader: Reader, slot: str) -> int | float | bool:
        value = reader.raw(slot, self.default)
        if isinstance(value, bool) and self.bools:
            return value
        if not is_number(value):
            kind = "a number or a bool" if self.bools else "a number"
            raise reader.error(f"{slot} must be {kind}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value) and not self.bools:
            raise reader.error(f"{slot} must be finite, got {value!r}")
        return value  # type: ignore[no-any-return]

    def types(self) -> tuple[str, ...]:
        return ("int", "float", "bool") if self.bools else ("int", "float")


@dataclass(frozen=True, slots=True)
class IntOrList:
    """An int or a non-empty list of ints, as a tuple (``roll``'s ``shifts``, ``logsumexp``'s
    required ``dim``)."""

    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> tuple[int, ...]:
        value = reader.raw(slot, self.default)
        if is_int(value):
            return (int(value),)
        if isinstance(value, (list, tuple)) and value and all(is_int(v) for v in value):
            return tuple(int(v) for v in value)
        raise reader.error(f"{slot} must be an int or a non-empty list of ints, got {value!r}")

    def types(self) -> tuple[str, ...]:
        return ("int", "list")


@dataclass(frozen=True, slots=True)
class Order:
    """A norm's ``ord``: a number, or ``"inf"``/``"-inf"`` (JSON has no infinite number), as a float."""

    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> float:
        value = reader.raw(slot, self.default)
        if is_number(value):
            return float(value)
        if value in ("inf", "-inf"):
            return float(value)
        raise reader.error(f'{slot} must be a number, "inf" or "-inf", got {value!r}')

    def types(self) -> tuple[str, ...]:
        return ("int", "float", "string")


@dataclass(frozen=True, slots=True)
class Equation:
    """``einsum``'s ``equation``: parsed, and stored in explicit form (see :func:`einsum_terms`)."""

    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> str:
        value = reader.raw(slot, self.default)
        if not isinstance(value, str):
            raise reader.error(f"{slot} must be a string, got {value!r}")
        try:
            inputs, output = einsum_terms(value)
        except ValueError as error:
            raise reader.error(f"{slot} {value!r}: {error}") from None
        return ",".join(inputs) + "->" + output

    def types(self) -> tuple[str, ...]:
        return ("string",)


def _term(term: str, *, output: bool) -> str:
    """One operand's (or the output's) subscripts: letters, and ``...`` at most once."""
    if term.count("...") > 1:
        raise ValueError(f"the term {term!r} has '...' more than once")
    letters = term.replace("...", "")
    bad = sorted(set(letters) - _LETTERS)
    if bad:
        raise ValueError(f"the term {term!r} has {bad}, which are not letters")
    if output and len(set(letters)) != len(letters):
        raise ValueError(f"the output {term!r} names a letter twice")
    return term


def einsum_terms(equation: str) -> tuple[list[str], str]:
    """An equation's operand terms and its output term, spaces removed and the implicit output
    written out: the letters used exactly once, in ASCII order (capitals first), after ``...``
    when an operand has it. Raises ``ValueError`` saying what is wrong."""
    text = equation.replace(" ", "")
    if text.count("->") > 1:
        raise ValueError("'->' appears more than once")
    left, arrow, right = text.partition("->")
    inputs = [_term(term, output=False) for term in left.split(",")]
    if arrow:
        output = _term(right, output=True)
        known = {letter for term in inputs for letter in term.replace("...", "")}
        unknown = sorted(set(output.replace("...", "")) - known)
        if unknown:
            raise ValueError(f"the output has the letters {unknown}, which no operand has")
        if "..." in output and not any("..." in term for term in inputs):
            raise ValueError("the output has '...', which no operand has")
    else:
        letters = [letter for term in inputs for letter in term.replace("...", "")]
        once = sorted(letter for letter in set(letters) if letters.count(letter) == 1)
        output = ("..." if any("..." in term for term in inputs) else "") + "".join(once)
    return inputs, output


def einsum_shapes(equation: str, shapes: list[tuple[int, ...]]) -> None:
    """Operand shapes that fit an explicit equation: one per term, as many dimensions as the term
    has letters (at least that many with ``...``), and one size per letter. Raises ``ValueError``
    saying which operand and which letter do not fit."""
    terms = equation.split("->")[0].split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"the equation has {len(terms)} operands, got {len(shapes)}")
    sizes: dict[str, int] = {}
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        letters = term.replace("...", "")
        named = len(shape) - len(letters) if "..." in term else 0
        if named < 0 or ("..." not in term and len(shape) != len(letters)):
            raise ValueError(f"operand {k} has {len(shape)} dimensions, which {term!r} does not name")
        before, _, after = term.partition("...")
        dims = (
            list(shape[: len(before)]) + list(shape[len(shape) - len(after) :]) if after else list(shape[: len(before)])
        )
        for letter, size in zip(before + after, dims, strict=True):
            if sizes.setdefault(letter, size) != size:
                raise ValueError(f"letter {letter!r} has sizes {sizes[letter]} and {size} (operand {k})")


@dataclass(frozen=True, slots=True)
class Counts:
    """``repeat_interleave``'s ``repeats``: an int ≥ 0 or a list of them, as a tuple (an int is
    the count every slice takes, as a list of one entry is). A count, and a list's sum (the
    length it makes along the dimension), is at most 2**48: a larger one could only ask a
    framework for more than any tensor trama accepts."""

    default: Any = REQUIRED
    nullable: bool = False

    def read(self, reader: Reader, slot: str) -> tuple[int, ...]:
        value = reader.raw(slot, self.default)
        counts = [value] if is_int(value) else value
        if not isinstance(counts, (list, tuple)) or not all(is_int(count) and count >= 0 for count in counts):
            raise reader.error(f"{slot} must be an int ≥ 0 or a list of ints ≥ 0, got {value!r}")
        total = sum(int(count) for count in counts)
        if total > MAX_ELEMENTS:
            what = f"{slot} {total}" if is_int(value) else f"{slot} sum to {total}, which"
            raise reader.error(
                f"{what} is beyond {shown_limit(MAX_ELEMENTS)}, the longest dimension trama accepts "
                "(docs/format.md, section 7)"
            )
        return tuple(int(count) for count in counts)

    def types(self) -> tuple[str, ...]:
        return ("int", "list")


# --- Relations ------------------------------------------------------------------------------


def _einsum_ports(reader: Reader) -> None:
    """One port per operand of the equation, numbered ``x0``, ``x1``, … without gaps."""
    count = reader.values["equation"].split("->")[0].count(",") + 1
    ports = set(reader.node.inputs)
    if ports != {f"x{k}" for k in range(len(ports))} or not ports:
        raise reader.error(f"the inputs must be the ports x0 … x{{n−1}}, got {sorted(ports)}")
    if len(ports) != count:
        raise reader.error(f"the equation has {count} operands, but the node has {len(ports)} inputs")


def _roll(reader: Reader) -> None:
    shifts, dims = reader.values["shifts"], reader.values["dims"]
    if dims is None and len(shifts) != 1:
        raise reader.error(f"with dims null, shifts must be one int, got {list(shifts)}")
    if dims is not None and len(shifts) != len(dims):
        raise reader.error(f"shifts {list(shifts)} and dims {list(dims)} must have the same length")


def _arange(reader: Reader) -> None:
    start, end, step = (reader.values[slot] for slot in ("start", "end", "step"))
    dtype = reader.values["dtype"]
    if step == 0:
        raise reader.error("step must not be 0")
    if (end > start and step < 0) or (end < start and step > 0):  # comparisons: no overflow
        raise reader.error(f"step {step!r} goes away from end {end!r} (start {start!r})")
    integral = all(is_int(value) for value in (start, end, step))
    if dtype == "bool":
        raise reader.error("dtype bool is not allowed (torch refuses it)")
    if dtype in _INTEGER_DTYPES and not integral:
        raise reader.error(f"dtype {dtype} needs integer start, end and step, got {start!r}, {end!r}, {step!r}")
    result = reader.values["result_dtype"] = dtype or ("int64" if integral else "float32")
    length = arange_length(start, end, step)
    itemsize = numpy_dtype(result).itemsize
    if length > MAX_TENSOR_BYTES // itemsize:
        count = "too many" if math.isinf(length) else str(int(length))
        raise reader.error(
            f"start {start!r}, end {end!r} and step {step!r} make {count} {result} values, more than "
            f"{shown_limit(MAX_TENSOR_BYTES)} bytes, trama's limit (docs/format.md, section 7)"
        )


def arange_length(start: float, end: float, step: float) -> float:
    """How many values ``arange`` makes: ``⌈(end − start) / step⌉`` (at least 0), computed in
    float64 as the kernels compute it; ``inf`` where float64 overflows (a span of 1e308 by
    steps of 1e-308), which no check lets through."""
    try:
        span = (float(end) - float(start)) / float(step)
    except OverflowError:  # an int beyond float64
        return math.inf
    return float(max(0, math.ceil(span))) if math.isfinite(span) else math.inf


def _created(reader: Reader) -> None:
    """A created tensor (``zeros``, ``ones``, ``full``) of at most 2**48 bytes."""
    problem = extent_problem(reader.values["size"], numpy_dtype(reader.values["result_dtype"]).itemsize)
    if problem is not None:
        raise reader.error(f"size: {problem}")


def _extent(slot: str) -> Relation:
    """The shape (or the counts multiplying one) in ``slot`` holds at most 2**48 elements; a
    ``-1`` (keep that size) counts as 1."""

    def check(reader: Reader) -> None:
        problem = extent_problem(reader.values[slot], limit=MAX_ELEMENTS)
        if problem is not None:
            raise reader.error(f"{slot}: {problem}")

    return check


def _bounded_slice(reader: Reader) -> None:
    """``slice_scatter``'s slice within trama's bounds (:func:`~trama.catalog._limits.slice_problem`):
    a step of at most 2**48, a start and end within the signed 64-bit range."""
    values = reader.values
    problem = slice_problem(values["start"], values["end"], values["step"], stop_name="end")
    if problem is not None:
        raise reader.error(problem)


def _full(reader: Reader) -> None:
    dtype, fill = reader.values["dtype"], reader.values["fill_value"]
    if dtype is None:
        dtype = "bool" if isinstance(fill, bool) else "int64" if is_int(fill) else "float32"
    _fits(reader, fill, dtype)
    reader.values["result_dtype"] = dtype


def _fill_like(reader: Reader) -> None:
    dtype = reader.values["dtype"]
    if dtype is not None:
        _fits(reader, reader.values["fill_value"], dtype)
    reader.values["result_dtype"] = dtype


def _fits(reader: Reader, fill: Any, dtype: str) -> None:
    """A fill value that the dtype cannot hold is refused (torch raises an overflow error)."""
    if dtype in _INTEGER_DTYPES and isinstance(fill, float) and not math.isfinite(fill):
        raise reader.error(f"fill_value {fill!r} cannot be converted to {dtype}")
    if dtype in _INTEGER_DTYPES and not isinstance(fill, bool):
        info = np.iinfo(numpy_dtype(dtype))
        if not info.min <= int(fill) <= info.max:
            raise reader.error(f"fill_value {fill!r} does not fit in {dtype}")


def _default_float(reader: Reader) -> None:
    reader.values["result_dtype"] = reader.values["dtype"] or "float32"


def _like(reader: Reader) -> None:
    reader.values["result_dtype"] = reader.values["dtype"]


# --- Values the kernels share ---------------------------------------------------------------


def arange_values(start: float, end: float, step: float, dtype: str) -> np.ndarray:
    """``arange``'s values: ``start + i·step`` in float64 (exact integers for integer settings),
    rounded once to ``dtype``; the length is ``⌈(end − start) / step⌉``, computed in float64."""
    length = int(arange_length(start, end, step))
    target = numpy_dtype(dtype)
    if all(is_int(value) for value in (start, end, step)):
        with np.errstate(over="ignore"):
            return (int(start) + np.arange(length, dtype=np.int64) * int(step)).astype(target)
    values = float(start) + np.arange(length, dtype=np.float64) * float(step)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(target)


def expanded_shape(shape: tuple[int, ...], size: tuple[int, ...]) -> tuple[int, ...]:
    """``Tensor.expand``'s result shape for ``x`` of ``shape``: −1 keeps a size, a size-1
    dimension takes any size, new leading dimensions (never −1) are added. Raises ``ValueError``
    saying what does not fit."""
    lead = len(size) - len(shape)
    if lead < 0:
        raise ValueError(f"size {list(size)} has fewer entries than x has dimensions ({len(shape)})")
    result = []
    for k, target in enumerate(size):
        if k < lead:
            if target < 0:
                raise ValueError(f"size {list(size)}: the new leading dimension {k} cannot be −1")
            result.append(target)
            continue
        own = shape[k - lead]
        if target in (-1, own):
            result.append(own)
        elif own == 1:
            result.append(target)
        else:
            raise ValueError(f"dimension {k - lead} of x, of size {own}, cannot be expanded to {target}")
    return tuple(result)


def interleaved(shape: tuple[int, ...], dim: int | None, counts: tuple[int, ...]) -> tuple[int | None, int]:
    """Where ``repeat_interleave`` repeats ``x`` of ``shape``, and how long that makes it: the
    dimension (wrapped; ``None`` for the flattened ``x``) and the length of ``y`` along it.
    ``counts`` has one entry, or one per slice. Raises ``ValueError`` saying what does not fit."""
    if dim is None:
        axis, size = None, math.prod(shape)
    elif not shape:
        raise ValueError(f"a 0-d x takes dim null only (torch refuses dim {dim})")
    elif not -len(shape) <= dim < len(shape):
        raise ValueError(f"dim {dim} is out of range for x of {len(shape)} dimensions")
    else:
        axis = dim % len(shape)
        size = shape[axis]
    if len(counts) == 1:
        return axis, counts[0] * size
    if len(counts) != size:
        along = "elements" if axis is None else f"slices along dim {dim}"
        raise ValueError(f"repeats has {len(counts)} counts, but x has {size} {along}")
    return axis, sum(counts)


def top_k_axis(shape: tuple[int, ...], dim: int, k: int) -> int:
    """The dimension ``topk`` searches in ``x`` of ``shape`` (wrapped; a 0-d ``x`` is one element
    along 0 or −1), where ``k`` elements must be. Raises ``ValueError`` saying what does not fit."""
    rank = max(len(shape), 1)
    if not -rank <= dim < rank:
        raise ValueError(f"dim {dim} is out of range for x of {len(shape)} dimensions")
    axis = dim % rank
    size = shape[axis] if shape else 1
    if k > size:
        raise ValueError(f"k {k} is larger than the {size} elements of x along dim {dim}")
    return axis


def filled(shape: tuple[int, ...], fill: int | float | bool, dtype: np.dtype[Any]) -> np.ndarray:
    """A tensor of ``shape`` and ``dtype`` whose every element is ``fill`` converted as torch
    converts a Python number (a float to an integer truncates toward zero; any nonzero to true)."""
    if dtype == np.bool_:
        value: Any = bool(fill)
    elif dtype.kind in "iu":
        value = int(fill)
    else:
        value = float(fill)
    with np.errstate(over="ignore"):
        return np.full(shape, value, dtype=dtype)


# --- The table ------------------------------------------------------------------------------

_DIM = Integer(minimum=None)
_KEEPDIM = Flag(default=False)
_DTYPE = Choice((None, *DTYPE_NAMES), default=None)
_REDUCTION = Checker({"dim": Dims(), "keepdim": _KEEPDIM})
_SINGLE = Checker({"dim": Integer(minimum=None, nullable=True, default=None), "keepdim": _KEEPDIM})
_VARIANCE = Checker({"dim": Dims(), "correction": Number(default=1), "keepdim": _KEEPDIM})
_SIZE = IntList(minimum=0)
_FILL = Scalar(bools=True)


#: Every op of the family's checker, by op name.
def scattered_slice(shape: tuple[int, ...], src: tuple[int, ...], settings: Any) -> tuple[int, slice]:
    """``slice_scatter``'s dimension and slice of ``x`` (of ``shape``), checked against ``src``'s
    shape; raises ``ValueError`` saying what does not fit (every framework says the same)."""
    rank = len(shape)
    dim = settings["dim"]
    if not -max(rank, 1) <= dim < max(rank, 1) or rank == 0:
        raise ValueError(f"dim {dim} is out of range for x of {rank} dimensions")
    dim %= rank
    part = slice(settings["start"], settings["end"], settings["step"])
    wanted = (*shape[:dim], len(range(*part.indices(shape[dim]))), *shape[dim + 1 :])
    if tuple(src) != wanted:
        raise ValueError(f"src has shape {list(src)}, but the slice of x it replaces has shape {list(wanted)}")
    return dim, part


CHECKERS: dict[str, Checker] = {
    "expand": Checker({"size": IntList(minimum=-1)}, (_extent("size"),)),
    "gather": Checker({"dim": _DIM}),
    "index_select": Checker({"dim": _DIM}),
    "cumsum": Checker({"dim": _DIM}),
    "cumprod": Checker({"dim": _DIM}),
    "triu": Checker({"diagonal": Integer(minimum=None, default=0)}),
    "tril": Checker({"diagonal": Integer(minimum=None, default=0)}),
    "roll": Checker({"shifts": IntOrList(), "dims": Dims()}, (_roll,)),
    "flip": Checker({"dims": IntList()}),
    "contiguous": Checker(),
    "slice_scatter": Checker(
        {
            "dim": Integer(minimum=None, default=0),
            "start": Integer(minimum=None, nullable=True, default=None),
            "end": Integer(minimum=None, nullable=True, default=None),
            "step": Integer(minimum=1, default=1),
        },
        (_bounded_slice,),
    ),
    "repeat": Checker({"repeats": IntList(minimum=0)}, (_extent("repeats"),)),
    "tile": Checker({"dims": IntList(minimum=0)}, (_extent("dims"),)),
    "repeat_interleave": Checker({"repeats": Counts(), "dim": Integer(minimum=None, nullable=True, default=None)}),
    "einsum": Checker({"equation": Equation()}, (_einsum_ports,)),
    "min": _REDUCTION,
    "argmin": _SINGLE,
    "prod": _SINGLE,
    "var": _VARIANCE,
    "std": _VARIANCE,
    "any": _REDUCTION,
    "all": _REDUCTION,
    "linalg_vector_norm": Checker({"dim": Dims(), "ord": Order(default=2), "keepdim": _KEEPDIM}),
    "logsumexp": Checker({"dim": IntOrList(), "keepdim": _KEEPDIM}),
    "topk": Checker({"k": Integer(), "dim": Integer(minimum=None, default=-1), "largest": Flag(default=True)}),
    "arange": Checker(
        {"start": Scalar(default=0), "end": Scalar(), "step": Scalar(default=1), "dtype": _DTYPE}, (_arange,)
    ),
    "full": Checker({"size": _SIZE, "fill_value": _FILL, "dtype": _DTYPE}, (_full, _created)),
    "zeros": Checker({"size": _SIZE, "dtype": _DTYPE}, (_default_float, _created)),
    "ones": Checker({"size": _SIZE, "dtype": _DTYPE}, (_default_float, _created)),
    "full_like": Checker({"fill_value": _FILL, "dtype": _DTYPE}, (_fill_like,)),
    "zeros_like": Checker({"dtype": _DTYPE}, (_like,)),
    "ones_like": Checker({"dtype": _DTYPE}, (_like,)),
}
