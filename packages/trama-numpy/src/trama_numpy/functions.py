"""numpy kernels for the catalog's tensor functions (``docs/ops.md``, section *Tensor functions*):
arithmetic, joining, reshaping, reductions, indexing, tuples and constants.

The catalog follows torch where numpy differs, and this module is where the differences are
bridged, each at one place:

* **Type promotion** is torch's (:func:`trama.catalog.result_type`, which the core keeps for
  every framework): a Python number does not widen a tensor of its kind, a 0-d tensor widens only
  across kinds, and an integer tensor with a float number gives float32, where numpy would give
  float64 (see ``_BROADCAST_RULE`` in the catalog).
* **Dimensions** are wrapped as torch wraps them (:func:`_wrap_dim`): a 0-d tensor accepts the
  dimensions 0 and −1, as if it had one, where numpy has no axis to name.
* **Indexing** applies integer items before tensor items (:func:`_getitem`), as torch does, so
  that ``x[:, [0], :, 0]`` keeps its advanced dimension in place.

Exactness first: a floating result is computed in float64 from the operands' exact values (a
Python float is not first rounded to a float16 tensor's dtype) and rounded once to the result
dtype, so it is the correctly rounded value for single operations (``+ − · /``), and the nearest
a float64 evaluation gets for the others (``pow``, sums, means, matrix products). Integer
results are computed in their own dtype and wrap on overflow, as in torch.

Settings come checked from the core (:func:`trama.catalog.check_settings`, the ``getitem``
index parsed there too): a bad value raises :class:`trama.RegistryError` naming the node, in
every framework alike. Inputs that do not fit (a bool tensor to ``sub``,
an index out of range) raise ``TypeError``, ``ValueError`` or ``IndexError`` naming the op and
the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

from trama import Node, Parameter
from trama._deprecated import moved_names
from trama.catalog import check_settings, result_type, torch_index
from trama.extension import Kernel
from trama_numpy._precision import is_floating
from trama_numpy._registry import implements, optional_array, required_array

__all__ = [
    "add",
    "argmax",
    "concat",
    "constant",
    "div",
    "flatten",
    "getitem",
    "matmul",
    "max_",
    "mean",
    "mul",
    "neg",
    "permute",
    "pow_",
    "reshape",
    "squeeze",
    "stack",
    "sub",
    "sum_",
    "transpose",
    "tuple_get",
    "unsqueeze",
]

Array = npt.NDArray[Any]

#: A binary operand: a tensor, or a Python number or bool (torch's "wrapped number").
Operand: TypeAlias = "Array | bool | int | float"

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)


# --- Messages and dimensions ----------------------------------------------------------------


def _where(node: Node) -> str:
    """How messages name a node: its op and its id."""
    return f"{node.op} (node {node.id!r})"


def _wrap_dim(dim: int, ndim: int, where: str) -> int:
    """``dim`` (negative counts from the end) as an index in ``range(ndim)``, as torch's
    ``maybe_wrap_dim``: a 0-d tensor accepts 0 and −1, as if it had one dimension."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise IndexError(f"{where}: dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % size


def _wrap_dims(dims: Sequence[int], ndim: int, where: str) -> tuple[int, ...]:
    """Several dimensions wrapped; naming one twice is an error, as in torch."""
    wrapped = tuple(_wrap_dim(d, ndim, where) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise ValueError(f"{where}: dims {list(dims)} name a dimension twice")
    return wrapped


def _output(value: Any) -> Array:
    """A result as an array: numpy operations on 0-d arrays return numpy scalars."""
    return np.asarray(value)


# --- Dtypes ---------------------------------------------------------------------------------


#: Whether a dtype is floating, bfloat16 included (numpy's kind "f" misses it): one test for
#: every kernel, :mod:`trama_numpy._precision`'s.
_is_floating = is_floating


def _operand(value: Any) -> Operand:
    """A value as an operand: Python numbers stay numbers (they promote differently from
    tensors); anything else, numpy scalars included, becomes an array."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return value
    return np.asarray(value)


def _is_bool(operand: Operand) -> bool:
    return operand.dtype == _BOOL if isinstance(operand, np.ndarray) else isinstance(operand, bool)


def _to(operand: Operand, dtype: np.dtype[Any]) -> Array:
    """An operand as an array of ``dtype`` (an integer number too large for it raises)."""
    if isinstance(operand, np.ndarray):
        return operand.astype(dtype, copy=False)
    return np.asarray(operand, dtype=dtype)


def _work_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """Where a result of ``dtype`` is computed: float64 for floats (rounded once at the end),
    the dtype itself otherwise."""
    return _FLOAT64 if _is_floating(dtype) else dtype


def _rounded(value: Any, dtype: np.dtype[Any]) -> Array:
    """A float64 (or integer) result rounded to ``dtype``; overflow gives inf, as rounding does."""
    with np.errstate(over="ignore"):
        return _output(value).astype(dtype, copy=False)


# --- Binary arithmetic ----------------------------------------------------------------------

_BinaryFormula = Callable[[Operand, Operand], Array]


def _binary_kernel(
    node: Node, parameters: Mapping[str, Parameter], formula: _BinaryFormula, *, elementwise: bool = True
) -> Kernel:
    """A kernel for an op on ``x`` and ``other``, each from its port or from the constant slot
    of the same name: exactly one of the two, checked when the kernel is built (for wiring the
    node declares) and again on every call (for the values actually given). ``elementwise``
    ops check first that the operands broadcast, to say so naming the node."""
    where = _where(node)
    settings = check_settings(node, parameters)
    constants: dict[str, Operand] = {}
    for name in ("x", "other"):
        if name in settings.tensors:
            constants[name] = required_array(parameters, name)  # a tensor, even 0-d, is not a Python number
        elif name in settings:
            constants[name] = settings[name]

    def fetch(inputs: Mapping[str, Any], name: str) -> Operand:
        if name in constants:
            if name in inputs:
                raise ValueError(f"{where}: operand {name!r} is both wired and held by a slot")
            return constants[name]
        if name not in inputs:
            raise ValueError(f"{where}: operand {name!r} is neither wired nor held by a slot")
        return _operand(inputs[name])

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x, other = fetch(inputs, "x"), fetch(inputs, "other")
        if elementwise:
            try:
                np.broadcast_shapes(np.shape(x), np.shape(other))
            except ValueError:
                shapes = f"{list(np.shape(x))} and {list(np.shape(other))}"
                raise ValueError(f"{where}: operands of shapes {shapes} do not broadcast") from None
        return {"y": formula(x, other)}

    return kernel


def _scaled(b: Array, alpha: float | int, where: str) -> Array:
    """``alpha · b`` in ``b``'s (working) dtype. An integer result needs an integral ``alpha``
    (torch refuses any float one; an integral float such as ``2.0``, which JSON may well hold,
    is accepted here since the result is the same)."""
    if alpha == 1:
        return b
    if not _is_floating(b.dtype):
        if b.dtype == _BOOL or alpha != int(alpha):
            raise TypeError(f"{where}: alpha {alpha!r} cannot scale a {b.dtype} operand")
        alpha = int(alpha)
    return _output(b * b.dtype.type(alpha))


@implements("add")
def add(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x + alpha · other``; on bools, ``+`` is logical or (as in torch)."""
    where, alpha = _where(node), check_settings(node, parameters)["alpha"]

    def formula(x: Operand, other: Operand) -> Array:
        dtype = result_type(x, other)
        work = _work_dtype(dtype)
        with np.errstate(all="ignore"):
            return _rounded(_to(x, work) + _scaled(_to(other, work), alpha, where), dtype)

    return _binary_kernel(node, parameters, formula)


@implements("sub")
def sub(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x − alpha · other``. torch refuses any bool operand (a bool tensor or ``True``), even
    against integers, and so does this kernel: ``1 − mask`` is to be written ``~mask``."""
    where, alpha = _where(node), check_settings(node, parameters)["alpha"]

    def formula(x: Operand, other: Operand) -> Array:
        if any(_is_bool(operand) for operand in (x, other)):
            raise TypeError(f"{where}: subtraction with a bool operand is not defined (torch refuses it too)")
        dtype = result_type(x, other)
        work = _work_dtype(dtype)
        with np.errstate(all="ignore"):
            return _rounded(_to(x, work) - _scaled(_to(other, work), alpha, where), dtype)

    return _binary_kernel(node, parameters, formula)


@implements("mul")
def mul(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x · other``; on bools, logical and."""

    def formula(x: Operand, other: Operand) -> Array:
        dtype = result_type(x, other)
        work = _work_dtype(dtype)
        with np.errstate(all="ignore"):
            return _rounded(_to(x, work) * _to(other, work), dtype)

    return _binary_kernel(node, parameters, formula)


def _integer_division(a: Array, b: Array, mode: str, where: str) -> Array:
    """Integer quotient rounded toward −∞ (``"floor"``, numpy's ``//``) or toward zero
    (``"trunc"``: the floor plus one where the remainder is nonzero and the signs differ).
    Division by zero is an error, as in torch (numpy would give 0 with a warning)."""
    if np.any(b == 0):
        raise ZeroDivisionError(f"{where}: integer division by zero")
    with np.errstate(all="ignore"):  # the int-min // −1 overflow wraps, as in torch
        quotient = a // b
        if mode == "trunc":
            remainder = a - quotient * b
            quotient = quotient + ((remainder != 0) & ((a < 0) != (b < 0))).astype(quotient.dtype)
    return _output(quotient)


@implements("div")
def div(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x / other``: true division (integers give float32), or rounded toward zero (``"trunc"``)
    or −∞ (``"floor"``, Python's ``//``), which keep integer dtypes.

    Floating quotients are rounded from their float64 value: for operands of float32 or
    narrower that value is never rounded to an integer by mistake, so ``trunc`` and ``floor`` see
    the exact quotient (torch rounds to float32 first, which near an integer can differ by 1).
    Floating ``floor`` is numpy's ``floor_divide``, the algorithm of Python's ``//`` and torch's
    ``div_floor``; division by zero gives ±inf or NaN.
    """
    where = _where(node)
    mode = check_settings(node, parameters)["rounding_mode"]

    def formula(x: Operand, other: Operand) -> Array:
        dtype = result_type(x, other)
        if mode is None:
            dtype = dtype if _is_floating(dtype) else _FLOAT32
        elif dtype == _BOOL:
            raise TypeError(f"{where}: {mode} division of bools is not defined (torch refuses it too)")
        elif not _is_floating(dtype):
            return _integer_division(_to(x, dtype), _to(other, dtype), mode, where)
        a, b = _to(x, _FLOAT64), _to(other, _FLOAT64)
        with np.errstate(all="ignore"):
            if mode is None:
                quotient = a / b
            elif mode == "trunc":
                quotient = np.trunc(a / b)
            else:
                quotient = np.floor_divide(a, b)
        return _rounded(quotient, dtype)

    return _binary_kernel(node, parameters, formula)


@implements("pow")
def pow_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x ** other``.

    Integer powers follow torch, which numpy does not: a negative exponent is an error when it
    is a Python number, and elementwise (a tensor exponent) gives 1 for base 1, ±1 for base −1
    (by parity) and 0 otherwise — the integer part of the true power, rounded toward zero.
    Bools are refused, as torch does.
    """
    where = _where(node)

    def formula(x: Operand, other: Operand) -> Array:
        dtype = result_type(x, other)
        if dtype == _BOOL:
            raise TypeError(f"{where}: pow of bools is not defined (torch refuses it too)")
        if _is_floating(dtype):
            with np.errstate(all="ignore"):
                return _rounded(np.power(_to(x, _FLOAT64), _to(other, _FLOAT64)), dtype)
        if not isinstance(other, np.ndarray) and other < 0:
            raise ValueError(f"{where}: integers to negative integer powers are not allowed (as in torch)")
        base, exponent = np.broadcast_arrays(_to(x, dtype), _to(other, dtype))
        negative = exponent < 0
        with np.errstate(all="ignore"):  # overflow wraps, as in torch
            power = np.power(base, np.where(negative, np.zeros((), dtype), exponent))
        odd = (exponent % 2) != 0
        reciprocal = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0)).astype(dtype)
        return _output(np.where(negative, reciprocal, power))

    return _binary_kernel(node, parameters, formula)


@implements("matmul")
def matmul(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The matrix product, numpy's ``matmul`` rules (which are torch's). torch refuses operands
    of different dtypes, 0-d operands and bools, and so does this kernel. Floating products are
    accumulated in float64 and rounded once: the reference is the exact product, not one
    particular BLAS's float32 rounding."""
    where = _where(node)

    def formula(x: Operand, other: Operand) -> Array:
        if not isinstance(x, np.ndarray) or not isinstance(other, np.ndarray) or x.ndim == 0 or other.ndim == 0:
            raise ValueError(f"{where}: both operands must be tensors of at least one dimension")
        if x.dtype != other.dtype:
            raise TypeError(f"{where}: operands of dtypes {x.dtype} and {other.dtype} (torch requires one dtype)")
        if x.dtype == _BOOL:
            raise TypeError(f"{where}: matmul of bools is not defined (torch refuses it too)")
        work = _work_dtype(x.dtype)
        try:
            with np.errstate(all="ignore"):
                product = np.matmul(x.astype(work, copy=False), other.astype(work, copy=False))
        except ValueError:
            shapes = f"{list(x.shape)} and {list(other.shape)}"
            raise ValueError(f"{where}: operands of shapes {shapes} do not multiply as matrices") from None
        return _rounded(product, x.dtype)

    return _binary_kernel(node, parameters, formula, elementwise=False)


@implements("neg")
def neg(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``−x``: exact, in any dtype but bool (torch refuses it; unsigned integers wrap)."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype == _BOOL:
            raise TypeError(f"{where}: negation of bools is not defined (torch refuses it too)")
        with np.errstate(all="ignore"):
            return {"y": _output(np.negative(x))}

    return kernel


# --- Joining --------------------------------------------------------------------------------


def _numbered_inputs(inputs: Mapping[str, Any], prefix: str, where: str) -> list[Any]:
    """The values of the ports ``x0``, ``x1``, … in numeric order (``x2`` before ``x10``),
    which must be numbered from 0 without gaps and be the only ports."""
    count = len(inputs)
    expected = {f"{prefix}{k}" for k in range(count)}
    if count == 0 or set(inputs) != expected:
        raise ValueError(f"{where}: inputs must be the ports {prefix}0 … {prefix}{{n−1}}, got {sorted(inputs)}")
    return [inputs[f"{prefix}{k}"] for k in range(count)]


def _joined(inputs: Mapping[str, Any], where: str) -> tuple[list[Array], np.dtype[Any]]:
    """The variadic inputs as arrays, and the dtype they promote to."""
    arrays = [np.asarray(value) for value in _numbered_inputs(inputs, "x", where)]
    return arrays, result_type(*arrays)


@implements("concat")
def concat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``torch.cat`` along ``dim``. As torch does, 1-D inputs of shape ``[0]`` are skipped
    whatever ``dim`` is (they still take part in the dtype), so ``dim`` is wrapped against the
    first input that is kept."""
    where = _where(node)
    dim = check_settings(node, parameters).integer("dim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        arrays, dtype = _joined(inputs, where)
        kept = [a for a in arrays if a.shape != (0,)]
        if not kept:
            return {"y": np.zeros((0,), dtype=dtype)}
        if any(a.ndim == 0 for a in kept):
            raise ValueError(f"{where}: 0-d tensors cannot be concatenated (use stack)")
        axis = _wrap_dim(dim, kept[0].ndim, where)
        try:
            return {"y": np.concatenate([a.astype(dtype, copy=False) for a in kept], axis=axis)}
        except ValueError:
            shapes = [list(a.shape) for a in kept]
            raise ValueError(f"{where}: shapes {shapes} do not join along dim {dim}") from None

    return kernel


@implements("stack")
def stack(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``torch.stack``: inputs of one shape joined along a new dimension ``dim`` of ``y``."""
    where = _where(node)
    dim = check_settings(node, parameters).integer("dim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        arrays, dtype = _joined(inputs, where)
        if len({a.shape for a in arrays}) != 1:
            raise ValueError(f"{where}: inputs must have one shape, got {[list(a.shape) for a in arrays]}")
        rank = arrays[0].ndim
        if not -(rank + 1) <= dim <= rank:
            raise IndexError(f"{where}: dim {dim} is out of range for stacking tensors of {rank} dimensions")
        return {"y": np.stack([a.astype(dtype, copy=False) for a in arrays], axis=dim % (rank + 1))}

    return kernel


# --- Shapes ---------------------------------------------------------------------------------
# Values are immutable, so these return numpy views where numpy can: nothing writes into them.


@implements("reshape")
def reshape(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` in C order with the sizes ``shape``; one −1 is inferred, 0 is a size of 0."""
    where = _where(node)
    shape = list(check_settings(node, parameters).integers("shape"))

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        try:
            return {"y": x.reshape(shape)}
        except ValueError:
            raise ValueError(f"{where}: cannot reshape {list(x.shape)} into {shape}") from None

    return kernel


@implements("permute")
def permute(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimension i of ``y`` is dimension ``dims[i]`` of ``x``."""
    where = _where(node)
    dims = list(check_settings(node, parameters).integers("dims"))

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.ndim == 0 and dims in ([], [0], [-1]):
            return {"y": x}  # torch lets a 0-d tensor be permuted by its one wrapped dimension
        if len(dims) != x.ndim:
            raise ValueError(f"{where}: dims {dims} do not permute {x.ndim} dimensions")
        return {"y": np.transpose(x, _wrap_dims(dims, x.ndim, where))}

    return kernel


@implements("transpose")
def transpose(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimensions ``dim0`` and ``dim1`` swapped."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dim0, dim1 = settings.integer("dim0"), settings.integer("dim1")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        a, b = _wrap_dim(dim0, x.ndim, where), _wrap_dim(dim1, x.ndim, where)
        return {"y": x if x.ndim == 0 else np.swapaxes(x, a, b)}

    return kernel


@implements("flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimensions ``start_dim`` … ``end_dim`` merged into one; a 0-d ``x`` becomes ``[1]``."""
    where = _where(node)
    settings = check_settings(node, parameters)
    start_dim, end_dim = settings.integer("start_dim"), settings.integer("end_dim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        start, end = _wrap_dim(start_dim, x.ndim, where), _wrap_dim(end_dim, x.ndim, where)
        if start > end:
            raise ValueError(f"{where}: start_dim {start_dim} comes after end_dim {end_dim}")
        if x.ndim == 0:
            return {"y": x.reshape(1)}
        merged = int(np.prod(x.shape[start : end + 1]))
        return {"y": x.reshape((*x.shape[:start], merged, *x.shape[end + 1 :]))}

    return kernel


@implements("squeeze")
def squeeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimensions of size 1 removed: all of them, or those of ``dim`` that have size 1 (a named
    dimension of another size is kept, as in torch; numpy would raise)."""
    where = _where(node)
    dims: tuple[int, ...] | None = check_settings(node, parameters)["dim"]

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if dims is None:
            return {"y": np.squeeze(x)}
        axes = _wrap_dims(dims, x.ndim, where)
        if x.ndim == 0:
            return {"y": x}
        return {"y": np.squeeze(x, axis=tuple(a for a in axes if x.shape[a] == 1))}

    return kernel


@implements("unsqueeze")
def unsqueeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """A dimension of size 1 inserted at ``dim`` of ``y`` (−(r + 1) … r for ``x`` of r dims)."""
    where = _where(node)
    dim = check_settings(node, parameters).integer("dim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if not -(x.ndim + 1) <= dim <= x.ndim:
            raise IndexError(f"{where}: dim {dim} is out of range for unsqueezing {x.ndim} dimensions")
        return {"y": np.expand_dims(x, dim % (x.ndim + 1))}

    return kernel


# --- Reductions -----------------------------------------------------------------------------


def _reduction(
    node: Node, parameters: Mapping[str, Parameter], reduce: Callable[[Array, tuple[int, ...] | None, bool], Array]
) -> Kernel:
    """A kernel reducing ``x`` over the ``dim`` slot (null: all) with ``keepdim``. A 0-d ``x``
    accepts the dimensions 0 and −1, as in torch, and reduces to itself."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dims: tuple[int, ...] | None = settings["dim"]
    keepdim = settings.flag("keepdim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        axes = None if dims is None else _wrap_dims(dims, x.ndim, where)
        if x.ndim == 0:
            axes = None
        try:
            return {"y": _output(reduce(x, axes, keepdim))}
        except ValueError as error:  # numpy's reduction of an empty dimension without identity
            raise ValueError(f"{where}: {error}") from None

    return kernel


@implements("mean")
def mean(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The mean over ``dim``: a float64 sum divided by the count, rounded once (an empty
    reduction is 0/0 = NaN, as in torch). Integer inputs are refused, as torch does."""
    where = _where(node)

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        if not _is_floating(x.dtype):
            raise TypeError(f"{where}: mean needs a floating-point x, got dtype {x.dtype}")
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        total = np.sum(x.astype(_FLOAT64, copy=False), axis=axes, keepdims=keepdim)
        with np.errstate(invalid="ignore", divide="ignore"):
            return _rounded(total / count, x.dtype)

    return _reduction(node, parameters, reduce)


@implements("sum")
def sum_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The sum over ``dim``: floats accumulated in float64 and rounded once to their dtype;
    bools and integers summed as int64, as in torch."""

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        if _is_floating(x.dtype):
            return _rounded(np.sum(x, axis=axes, dtype=_FLOAT64, keepdims=keepdim), x.dtype)
        return _output(np.sum(x, axis=axes, dtype=_INT64, keepdims=keepdim))

    return _reduction(node, parameters, reduce)


@implements("max")
def max_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The largest element over ``dim`` (``torch.amax``): NaN wins, an empty dimension is an
    error. Floats are compared as float64, which is exact and works for bfloat16 too."""

    def reduce(x: Array, axes: tuple[int, ...] | None, keepdim: bool) -> Array:
        values = x.astype(_FLOAT64, copy=False) if _is_floating(x.dtype) else x
        return _rounded(np.max(values, axis=axes, keepdims=keepdim), x.dtype)

    return _reduction(node, parameters, reduce)


@implements("argmax")
def argmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The int64 index of the largest element along ``dim``: the first on ties, the first NaN if
    any (numpy's ``argmax`` rules, which are torch's). ``dim`` null indexes the flattened ``x``;
    with ``keepdim`` the index then has every dimension of ``x``, with size 1, as torch 2.x
    gives (``docs/ops.md`` says keepdim is then false; see :func:`_argmax_all`)."""
    where = _where(node)
    settings = check_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.size == 0:
            raise ValueError(f"{where}: argmax of an empty tensor")
        values = x.astype(_FLOAT64, copy=False) if _is_floating(x.dtype) else x
        if dim is None:
            return {"y": _argmax_all(values, keepdim)}
        axis = _wrap_dim(dim, x.ndim, where)
        if x.ndim == 0:
            return {"y": np.zeros((), dtype=_INT64)}
        return {"y": _output(np.argmax(values, axis=axis, keepdims=keepdim)).astype(_INT64)}

    return kernel


def _argmax_all(values: Array, keepdim: bool) -> Array:
    """The index into the flattened tensor, 0-d, or (``keepdim``) shaped ``[1, …, 1]``."""
    index = np.asarray(np.argmax(values), dtype=_INT64)
    return index.reshape((1,) * values.ndim) if keepdim else index


# --- Indexing -------------------------------------------------------------------------------

#: An item of a parsed ``getitem`` index: an int, a slice, ``None`` (new axis), ``...``, or the
#: name of an index port (``"i0"``) — replaced by its array when the kernel runs.
_IndexItem: TypeAlias = "int | slice | EllipsisType | str | Array | None"


def _index_tensor(value: Any, where: str) -> int | Array:
    """A value wired to an index port, as an index item: bools are a mask, other integers
    advanced indices. A 0-d integer tensor is a plain int, as in torch (it removes its dimension
    and is no advanced index). uint8 is refused: torch reads it as a (deprecated) mask, the
    catalog's table as integers. A Python list from a ``constant`` node works too; an empty one
    is an empty int64 index."""
    array = np.asarray(value)
    if array.size == 0 and array.dtype == _FLOAT64 and not isinstance(value, np.ndarray):
        array = array.astype(_INT64)  # np.asarray([]) is float64
    if array.dtype == _BOOL:
        return array
    if array.dtype == np.uint8 or array.dtype.kind not in "iu":
        raise TypeError(f"{where}: an index tensor must hold bools or signed integers, got dtype {array.dtype}")
    return int(array) if array.ndim == 0 else array.astype(_INT64, copy=False)


def _getitem(x: Array, items: Sequence[_IndexItem], where: str) -> Array:
    """``x[items]`` with torch's meaning, in two numpy indexings (:func:`trama.catalog.torch_index`:
    integer items go first, as torch removes them before placing the advanced dimensions)."""
    try:
        plan = torch_index(items, x.ndim)
        first = x[plan.basic]
        second = plan.second(first.ndim)
        return _output(first if second is None else first[second])
    except IndexError as error:
        raise IndexError(f"{where}: {error}") from None


@implements("getitem")
def getitem(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x[index]``, torch's indexing (see :func:`_getitem`); tensor items come from the ports
    ``i0``, ``i1``, …"""
    where = _where(node)
    items: tuple[_IndexItem, ...] = check_settings(node, parameters)["index"]

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        resolved: list[_IndexItem] = []
        for item in items:
            if isinstance(item, str):
                if item not in inputs:
                    raise ValueError(f"{where}: the index port {item!r} is not wired")
                resolved.append(_index_tensor(inputs[item], where))
            else:
                resolved.append(item)
        return {"y": _getitem(np.asarray(inputs["x"]), resolved, where)}

    return kernel


@implements("tuple_get")
def tuple_get(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Element ``index`` of a tuple or list value (negative counts from the end)."""
    where = _where(node)
    index = check_settings(node, parameters).integer("index")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = inputs["x"]
        if not isinstance(x, (tuple, list)):
            raise TypeError(f"{where}: x must be a tuple or a list, got {type(x).__name__}")
        if not -len(x) <= index < len(x):
            raise IndexError(f"{where}: index {index} is out of range for {len(x)} elements")
        return {"y": x[index]}

    return kernel


@implements("constant")
def constant(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The ``value`` slot: a tensor as its (shared, read-only) array, anything else as the
    Python value it is (a number stays a number, so it promotes as one)."""
    settings = check_settings(node, parameters)
    result = optional_array(parameters, "value") if "value" in settings.tensors else settings["value"]

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"y": result}

    return kernel


if not TYPE_CHECKING:  # a name of trama-numpy 0.3 that moved: it warns, naming its new home
    __getattr__ = moved_names(__name__, {"promote_types": "trama.catalog"})
