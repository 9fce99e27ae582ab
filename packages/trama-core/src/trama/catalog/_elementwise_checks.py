"""The settings checks of :mod:`trama.catalog.elementwise`.

Most of these ops have no setting at all. What is checked besides ``round``'s ``decimals`` and
``to``'s ``dtype`` is how values that may come either way are given: a comparison's or a bitwise
op's operands and ``where``'s branches follow the binary ops' rule (each wired or held, exactly
once; shared with :mod:`trama.catalog._function_checks`), ``masked_fill``'s ``value`` likewise
(and held as a tensor, it must be 0-d, as torch requires), and ``clamp``'s bounds are each a
port, a number or nothing, never two of these, and not both nothing.

The checked settings hold a number or bool operand under its name; a tensor operand is a tensor
slot (a JAX kernel takes it at call time, like a weight).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trama.catalog._function_checks import _operands
from trama.catalog._promotion import is_floating
from trama.catalog._reader import Checker, Choice, Integer, Number, Reader
from trama.catalog.elementwise import CAST_DTYPES, UNARY_OPS
from trama.format._dtypes import numpy_dtype
from trama.format._tensor import Tensor

__all__ = ["CHECKERS", "fill_scalar"]


#: bfloat16's largest finite value: float32's exponent range with 7 mantissa bits.
_BFLOAT16_MAX = (2 - 2.0**-7) * 2.0**127


def _largest(dtype: np.dtype[Any]) -> float:
    """The largest finite value of a floating dtype (``numpy.finfo`` does not know bfloat16)."""
    return _BFLOAT16_MAX if dtype == numpy_dtype("bfloat16") else float(np.finfo(dtype).max)


def fill_scalar(value: Any, dtype: Any) -> np.ndarray:
    """``masked_fill``'s value (a number, a bool or a 0-d array) as a 0-d array of ``dtype``,
    converted as torch converts a scalar for a tensor of that dtype: to an integer type by
    truncation toward zero, to bool as ``value ≠ 0``, to a float type by rounding. A finite value
    outside the range of ``dtype`` raises ``ValueError``, as torch refuses it (infinities and NaN
    fit any float type). Shared by the numpy and JAX kernels, which must refuse alike."""
    target = np.dtype(dtype)
    scalar = np.asarray(value)
    if target == np.bool_:
        return scalar.astype(np.bool_)
    number = scalar.item()
    if is_floating(target):
        if not np.isfinite(number) or abs(number) <= _largest(target):
            with np.errstate(all="ignore"):
                return np.asarray(number, dtype=np.float64).astype(target)
    elif np.isfinite(number):
        whole = int(number)  # truncation toward zero
        info = np.iinfo(target)
        if info.min <= whole <= info.max:
            return np.asarray(whole).astype(target)
    raise ValueError(f"value {number!r} cannot be converted to {target} without overflow (as in torch)")


def _fill_value(reader: Reader) -> None:
    """``masked_fill``'s ``value``: wired or held, never both, never neither; a held tensor is 0-d."""
    entry = reader.parameters.get("value")
    wired = "value" in reader.node.inputs
    if entry is None:
        if not wired:
            raise reader.error("value is neither wired nor held by a slot")
        return
    if wired:
        raise reader.error("value is both wired and held by a slot")
    if isinstance(entry.value, Tensor):
        if tuple(entry.value.shape) != ():
            raise reader.error(f"value must be a 0-d tensor (as torch requires), got shape {list(entry.value.shape)}")
        reader.use("value")
    elif isinstance(entry.value, (bool, int, float)):
        reader.values["value"] = entry.value
    else:
        raise reader.error(f"the constant value must be a number, a bool or a 0-d tensor, got {entry.value!r}")


def _bounds(reader: Reader) -> None:
    """``clamp``'s ``min`` and ``max``: each a wired port, a number, or absent; one at least.
    ``wired`` (a derived setting) names the bounds that come from ports, in that order."""
    wired = tuple(name for name in ("min", "max") if name in reader.node.inputs)
    for name in wired:
        if reader.values[name] is not None:
            raise reader.error(f"{name} is both wired and held by a slot")
    if not wired and reader.values["min"] is None and reader.values["max"] is None:
        raise reader.error("needs min or max (or both), as torch requires")
    reader.values["wired"] = wired


_PLAIN = Checker()
_BINARY = Checker(relations=(_operands,))
_BOUND = Number(default=None, nullable=True, exact=True)

#: Every op of the family's checker, by op name.
CHECKERS: dict[str, Checker] = {
    **{name: _PLAIN for name in UNARY_OPS},
    "round": Checker({"decimals": Integer(minimum=None, default=0)}),
    **{name: _BINARY for name in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{name: _PLAIN for name in ("logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_not")},
    **{name: _BINARY for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    "where": _BINARY,
    "masked_fill": Checker(relations=(_fill_value,)),
    "clamp": Checker({"min": _BOUND, "max": _BOUND}, (_bounds,)),
    "minimum": _PLAIN,
    "maximum": _PLAIN,
    "to": Checker({"dtype": Choice(CAST_DTYPES)}),
}
