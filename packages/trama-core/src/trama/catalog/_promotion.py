"""torch's type promotion, the catalog's (``docs/ops.md``: "the result dtype is torch's type
promotion"), on numpy dtypes, for every framework that does not have it natively.

numpy and JAX promote by other rules (numpy: int32 with a float number gives float64; JAX: its own
lattice), so a kernel decides its result dtype here and casts its operands to it before its
framework sees them. Operands are arrays of any framework that have ``dtype`` and ``ndim`` (a
numpy scalar is a 0-d array), and Python numbers and bools, which torch calls wrapped numbers and
which promote more weakly than tensors.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

import numpy as np

from trama.format._dtypes import numpy_dtype

__all__ = ["Operand", "is_floating", "promote_types", "result_type"]


class _Array(Protocol):
    """What promotion needs of an array: its dtype and whether it has dimensions."""

    @property
    def dtype(self) -> Any: ...

    @property
    def ndim(self) -> int: ...


#: An operand of torch's promotion: an array, or a Python number or bool.
Operand: TypeAlias = "_Array | bool | int | float"

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_FLOAT16 = numpy_dtype("float16")
_BFLOAT16 = numpy_dtype("bfloat16")
#: The floating dtypes of the format (bfloat16 is ml_dtypes' type, whose numpy kind is not "f").
_FLOATING = frozenset((_FLOAT16, _BFLOAT16, _FLOAT32, numpy_dtype("float64")))


def is_floating(dtype: Any) -> bool:
    """Whether ``dtype`` is one of the format's floating dtypes, bfloat16 included."""
    return np.dtype(dtype) in _FLOATING


def _kind(dtype: np.dtype[Any]) -> int:
    """torch's categories, in promotion order: 0 bool, 1 integer, 2 floating."""
    if dtype == _BOOL:
        return 0
    return 2 if dtype in _FLOATING else 1


def promote_types(a: Any, b: Any) -> np.dtype[Any]:
    """``torch.promote_types`` on numpy dtypes: the higher category wins outright (int64 with
    float16 is float16, where numpy says float64); within integers numpy's table is torch's;
    within floats the wider wins, and float16 with bfloat16 is float32 (neither holds the other).
    """
    first: np.dtype[Any] = np.dtype(a)
    second: np.dtype[Any] = np.dtype(b)
    if first == second:
        return first
    if _kind(first) != _kind(second):
        return first if _kind(first) > _kind(second) else second
    if _kind(first) == 2:
        if {first, second} == {_FLOAT16, _BFLOAT16}:
            return _FLOAT32
        return first if first.itemsize > second.itemsize else second
    return np.promote_types(first, second)


def _combine(higher: np.dtype[Any] | None, lower: np.dtype[Any] | None) -> np.dtype[Any] | None:
    """torch's ``combine_categories``: the result of a higher-priority group of operands
    (dimensioned tensors over 0-d tensors over Python numbers) stands unless a lower-priority
    group is of a higher category, which then promotes it."""
    if higher is None:
        return lower
    if lower is None or higher in _FLOATING:
        return higher
    if higher == _BOOL or lower in _FLOATING:
        return promote_types(higher, lower)
    return higher


def _scalar_dtype(value: bool | int | float) -> np.dtype[Any]:
    """The dtype a Python number stands for in promotion: bool, int64, or torch's default float
    dtype (float32) — only its category matters against tensors."""
    if isinstance(value, bool):
        return _BOOL
    return _INT64 if isinstance(value, int) else _FLOAT32


def result_type(*operands: Operand) -> np.dtype[Any]:
    """``torch.result_type`` of arrays and Python numbers.

    Operands are promoted in three groups: tensors with dimensions, 0-d tensors and Python
    numbers. The first group's dtype holds unless a later group brings a higher category
    (bool < integer < floating): ``int32 + 0-d int64`` is int32, ``int32 + 0-d float64`` is
    float64, ``float16 · 2.0`` is float16, ``int32 · 2.0`` is float32.
    """
    groups: list[np.dtype[Any] | None] = [None, None, None]
    for operand in operands:
        if isinstance(operand, (bool, int, float)) and not isinstance(operand, np.generic):
            group, dtype = 2, _scalar_dtype(operand)
        else:
            group, dtype = (0 if operand.ndim else 1), np.dtype(operand.dtype)
        current = groups[group]
        groups[group] = dtype if current is None else promote_types(current, dtype)
    combined = _combine(groups[0], _combine(groups[1], groups[2]))
    if combined is None:
        raise ValueError("result_type needs at least one operand")
    return combined
