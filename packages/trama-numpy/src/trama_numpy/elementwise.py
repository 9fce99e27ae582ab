"""numpy kernels of the catalog's elementwise ops (:mod:`trama.catalog.elementwise`): unary math,
comparisons, logic, ``where``, ``masked_fill``, ``clamp``, ``minimum``/``maximum`` and ``to``.

These kernels are the reference, so they follow torch where numpy differs, each at one place:

* **Result dtypes** are torch's: a transcendental op of an integer tensor gives float32 (numpy
  would give float64), comparisons and bitwise ops promote by :func:`trama.catalog.result_type`,
  and a Python integer operand wraps to the promoted integer type (:func:`_cast`; numpy 2
  refuses ``np.asarray(-1, dtype=np.uint8)``, torch wraps it to 255).
* **Exactness**: a floating result of a transcendental op is computed in float64 from the exact
  input and rounded once to its dtype (within an ulp of the true value; torch's float32 kernels
  may be a few ulps off, which the comparisons' tolerance absorbs). Ops whose result is exact in
  the input's dtype (``floor``, comparisons, ``minimum``, ``clamp``, ``where``) compute there.
* **Edge cases** are torch's: ``sign`` of NaN is 0 (numpy says NaN), ``round`` with decimals
  scales in float32 as torch does, and IEEE specials follow the formula without warnings
  (numpy's floating-point warnings are silenced: torch raises none).

Settings come checked from the core (:func:`trama.catalog.check_settings`): a bad one raises
:class:`trama.RegistryError` naming the node. Inputs that do not fit (a bool tensor to ``abs``,
a float mask) raise ``TypeError`` or ``ValueError`` naming the op and the node.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from trama import Node, Parameter
from trama.catalog import check_settings, result_type
from trama.catalog._elementwise_checks import fill_scalar
from trama.catalog._promotion import is_floating
from trama.extension import Kernel
from trama.format import numpy_dtype
from trama_numpy._registry import implements, required_array
from trama_numpy.activations import erf as _erf64
from trama_numpy.functions import Operand, _binary_kernel, _operand, _where

__all__ = ["cast_operand"]

Array = npt.NDArray[Any]
Float64Array = npt.NDArray[np.float64]

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)


def _output(value: Any) -> Array:
    """A result as an array: numpy operations on 0-d arrays return numpy scalars."""
    return np.asarray(value)


def cast_operand(operand: Operand, dtype: np.dtype[Any]) -> Array:
    """An operand converted to ``dtype`` as torch converts it for an elementwise op: arrays by
    numpy's cast, Python numbers too, so that an integer wraps to a narrower integer type
    (torch's ``uint8 == -1`` compares with 255) and a float rounds to a 16-bit type."""
    with np.errstate(all="ignore"):
        return np.asarray(operand).astype(dtype, copy=False)


def _broadcast(where: str, *values: Any) -> tuple[int, ...]:
    """The broadcast shape of the values, or an error naming the node."""
    try:
        return tuple(np.broadcast_shapes(*(np.shape(value) for value in values)))
    except ValueError:
        shapes = " and ".join(str(list(np.shape(value))) for value in values)
        raise ValueError(f"{where}: operands of shapes {shapes} do not broadcast") from None


# --- Unary math -----------------------------------------------------------------------------


def _refuse_bool(x: Array, where: str) -> None:
    if x.dtype == _BOOL:
        raise TypeError(f"{where}: x must be a number tensor, not bool (torch refuses it too)")


def _float_result(node: Node, formula: Callable[[Float64Array], Float64Array]) -> Kernel:
    """``formula`` (on float64) applied to ``x``: a floating ``x`` keeps its dtype, a bool or
    integer ``x`` gives float32; computed in float64 and rounded once."""

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        dtype = x.dtype if is_floating(x.dtype) else _FLOAT32
        with np.errstate(all="ignore"):
            return {"y": _output(formula(x.astype(_FLOAT64))).astype(dtype)}

    return kernel


def _rsqrt(x: Float64Array) -> Float64Array:
    return 1.0 / np.sqrt(x)


def _reciprocal(x: Float64Array) -> Float64Array:
    return 1.0 / x


_FLOAT_FORMULAS: dict[str, Callable[[Float64Array], Float64Array]] = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "sin": np.sin,
    "cos": np.cos,
    "erf": _erf64,
    "reciprocal": _reciprocal,
}


def _float_factory(name: str) -> Callable[..., Kernel]:
    formula = _FLOAT_FORMULAS[name]

    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        return _float_result(node, formula)

    factory.__doc__ = f"``{name}`` of ``x`` (integers give float32), in float64, rounded once."
    return factory


for _name in _FLOAT_FORMULAS:
    implements(_name)(_float_factory(_name))


@implements("abs")
def abs_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``|x|`` in the dtype of ``x`` (exact; the most negative integer wraps to itself)."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        _refuse_bool(x, where)
        with np.errstate(all="ignore"):
            return {"y": _output(np.abs(x)).astype(x.dtype, copy=False)}

    return kernel


def _integral_rounding(node: Node, formula: Callable[[Float64Array], Float64Array]) -> Kernel:
    """``floor``/``ceil``/``round``: exact in the dtype of a floating ``x`` (every float32 or
    16-bit value is a float64 value and so is its rounding); integers come back as they are."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        _refuse_bool(x, where)
        if not is_floating(x.dtype):
            return {"y": x}
        return {"y": _output(formula(x.astype(_FLOAT64))).astype(x.dtype)}

    return kernel


@implements("floor")
def floor(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``⌊x⌋``."""
    return _integral_rounding(node, np.floor)


@implements("ceil")
def ceil(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``⌈x⌉``."""
    return _integral_rounding(node, np.ceil)


@implements("round")
def round_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Half-to-even rounding (``np.rint``). With ``decimals`` the scaling is torch's: in float32
    for float32 and 16-bit inputs (torch's opmath type), in float64 for float64, the power of ten
    being that type's nearest value of 10^|decimals|, so that ties after scaling fall as torch's."""
    where = _where(node)
    decimals = check_settings(node, parameters).integer("decimals")
    if decimals == 0:
        return _integral_rounding(node, np.rint)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if not is_floating(x.dtype):
            raise TypeError(f"{where}: rounding to {decimals} decimals needs a floating x, got dtype {x.dtype}")
        work = _FLOAT64 if x.dtype == _FLOAT64 else _FLOAT32
        value: Array = x.astype(work)
        power: Array = np.asarray(10.0 ** abs(decimals), dtype=work)
        with np.errstate(all="ignore"):
            rounded = np.rint(value * power) / power if decimals > 0 else np.rint(value / power) * power
        return {"y": _output(rounded).astype(x.dtype)}

    return kernel


@implements("sign")
def sign(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """−1, 0 or 1 in the dtype of ``x``, written with comparisons so that NaN gives 0 as in
    torch (``np.sign`` gives NaN); a bool ``x`` is its own sign."""

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype == _BOOL:
            return {"y": x}
        positive = (x > 0).astype(np.int8)
        negative = (x < 0).astype(np.int8)
        return {"y": _output(positive - negative).astype(x.dtype)}

    return kernel


@implements("square")
def square(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x · x``: floats in float64 rounded once (the product of two float32 values is exact in
    float64), integers in their dtype, wrapping; bools give int64 as torch's ``x ** 2``."""

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype == _BOOL:
            return {"y": x.astype(_INT64)}
        work = _FLOAT64 if is_floating(x.dtype) else x.dtype
        wide = x.astype(work)
        with np.errstate(all="ignore"):
            return {"y": _output(wide * wide).astype(x.dtype)}

    return kernel


# --- Comparisons and logic ------------------------------------------------------------------

_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def _comparison_factory(name: str) -> Callable[..., Kernel]:
    relation = _COMPARISONS[name]

    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        def formula(x: Operand, other: Operand) -> Array:
            dtype = result_type(x, other)
            return _output(relation(cast_operand(x, dtype), cast_operand(other, dtype)))

        return _binary_kernel(node, parameters, formula)

    factory.__doc__ = f"``{name}`` of ``x`` and ``other``, both first converted to their promotion."
    return factory


for _name in _COMPARISONS:
    implements(_name)(_comparison_factory(_name))

_LOGICAL: dict[str, Callable[[Array, Array], Array]] = {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _logical_factory(name: str) -> Callable[..., Kernel]:
    function = _LOGICAL[name]

    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        where = _where(node)

        def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
            x, other = np.asarray(inputs["x"]), np.asarray(inputs["other"])
            _broadcast(where, x, other)
            return {"y": _output(function(x.astype(_BOOL), other.astype(_BOOL)))}

        return kernel

    factory.__doc__ = f"``{name}`` of the truth values (non-zero, NaN included) of ``x`` and ``other``."
    return factory


for _name in _LOGICAL:
    implements(_name)(_logical_factory(_name))


@implements("logical_not")
def logical_not(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x == 0``, elementwise (a NaN is true, so its negation false)."""

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"y": _output(np.logical_not(np.asarray(inputs["x"]).astype(_BOOL)))}

    return kernel


_BITWISE: dict[str, Callable[[Array, Array], Array]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}


def _bitwise_factory(name: str) -> Callable[..., Kernel]:
    function = _BITWISE[name]

    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
        where = _where(node)

        def formula(x: Operand, other: Operand) -> Array:
            dtype = result_type(x, other)
            if is_floating(dtype):
                raise TypeError(f"{where}: bitwise operations need bool or integer operands, got {dtype}")
            return _output(function(cast_operand(x, dtype), cast_operand(other, dtype)))

        return _binary_kernel(node, parameters, formula)

    factory.__doc__ = f"``{name}`` of bool or integer operands in their promoted dtype."
    return factory


for _name in _BITWISE:
    implements(_name)(_bitwise_factory(_name))


@implements("bitwise_not")
def bitwise_not(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``~x``: the complement of an integer, logical not of a bool; floats are refused."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if is_floating(x.dtype):
            raise TypeError(f"{where}: bitwise not needs a bool or integer x, got {x.dtype}")
        return {"y": _output(np.invert(x))}

    return kernel


# --- Selection ------------------------------------------------------------------------------


def _held(node: Node, parameters: Mapping[str, Parameter], names: tuple[str, ...]) -> dict[str, Operand]:
    """The operands the node holds in slots (checked: each given once): tensors as arrays, numbers
    and bools as they are."""
    settings = check_settings(node, parameters)
    held: dict[str, Operand] = {}
    for name in names:
        if name in settings.tensors:
            held[name] = required_array(parameters, name)
        elif name in settings:
            held[name] = settings[name]
    return held


def _fetch(held: Mapping[str, Operand], inputs: Mapping[str, Any], name: str, where: str) -> Operand:
    if name in held:
        if name in inputs:
            raise ValueError(f"{where}: {name} is both wired and held by a slot")
        return held[name]
    if name not in inputs:
        raise ValueError(f"{where}: {name} is neither wired nor held by a slot")
    return _operand(inputs[name])


def _bool_tensor(value: Any, port: str, where: str) -> Array:
    array = np.asarray(value)
    if array.dtype != _BOOL:
        raise TypeError(f"{where}: {port} must be a bool tensor, got dtype {array.dtype}")
    return array


@implements("where")
def where_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` where ``condition``, else ``other``, both converted to their promotion."""
    where = _where(node)
    held = _held(node, parameters, ("x", "other"))

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        condition = _bool_tensor(inputs["condition"], "condition", where)
        x, other = _fetch(held, inputs, "x", where), _fetch(held, inputs, "other", where)
        _broadcast(where, condition, x, other)
        dtype = result_type(x, other)
        return {"y": _output(np.where(condition, cast_operand(x, dtype), cast_operand(other, dtype)))}

    return kernel


@implements("masked_fill")
def masked_fill(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` with ``value`` where ``mask`` is true, in the dtype of ``x``, of the broadcast shape."""
    where = _where(node)
    held = _held(node, parameters, ("value",))

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        mask = _bool_tensor(inputs["mask"], "mask", where)
        value = _fetch(held, inputs, "value", where)
        if np.ndim(value) != 0:
            raise ValueError(f"{where}: value must be 0-d (as torch requires), got shape {list(np.shape(value))}")
        shape = _broadcast(where, x, mask)
        try:
            fill = fill_scalar(value, x.dtype)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        filled = np.where(mask, fill, x)
        return {"y": np.broadcast_to(_output(filled), shape)}

    return kernel


@implements("clamp")
def clamp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``min(max(x, min), max)`` in the promotion of ``x`` and the bounds given (ports or
    numbers); ``np.maximum``/``np.minimum`` propagate NaN, as torch does."""
    where = _where(node)
    settings = check_settings(node, parameters)
    wired: tuple[str, ...] = settings["wired"]
    numbers = {name: settings[name] for name in ("min", "max") if settings[name] is not None}

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        bounds: dict[str, Operand] = {**numbers, **{name: _operand(inputs[name]) for name in wired}}
        _broadcast(where, x, *bounds.values())
        dtype = result_type(x, *bounds.values())
        if dtype == _BOOL:
            raise TypeError(f"{where}: clamp of bools is not defined (torch refuses it too)")
        y = cast_operand(x, dtype)
        if "min" in bounds:
            y = np.maximum(y, cast_operand(bounds["min"], dtype))
        if "max" in bounds:
            y = np.minimum(y, cast_operand(bounds["max"], dtype))
        return {"y": _output(y)}

    return kernel


def _extremum(node: Node, function: Callable[[Array, Array], Array]) -> Kernel:
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x, other = np.asarray(inputs["x"]), np.asarray(inputs["other"])
        _broadcast(where, x, other)
        dtype = result_type(x, other)
        return {"y": _output(function(x.astype(dtype), other.astype(dtype)))}

    return kernel


@implements("minimum")
def minimum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The elementwise minimum in the promoted dtype; NaN propagates (``np.minimum``)."""
    return _extremum(node, np.minimum)


@implements("maximum")
def maximum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The elementwise maximum in the promoted dtype; NaN propagates (``np.maximum``)."""
    return _extremum(node, np.maximum)


# --- Casts ----------------------------------------------------------------------------------


@implements("to")
def to(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` as ``dtype``: numpy's casts are torch's on the defined cases (float to integer
    truncates, integers keep their low bits, anything to bool is ``≠ 0``); the undefined ones
    (NaN or out-of-range floats to integers) give numpy's value, without a warning."""
    dtype = numpy_dtype(check_settings(node, parameters).text("dtype"))

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype == dtype:
            return {"y": x}
        with np.errstate(all="ignore"):
            return {"y": _output(x.astype(dtype))}

    return kernel
