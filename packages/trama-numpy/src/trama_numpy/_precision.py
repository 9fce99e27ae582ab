"""Which dtypes are floating, and where a floating result is computed: the catalog's
half-precision rule (``docs/ops.md``, "Half precision"; :data:`trama.catalog.HALF_PRECISION`),
in one place for every numpy kernel.

numpy does not treat ml_dtypes' bfloat16 as floating (its kind is ``"V"``, and
``np.issubdtype(bfloat16, np.floating)`` is false), so no kernel tests ``dtype.kind == "f"``:
:func:`is_floating` is the test. For float16 and bfloat16 inputs a kernel computes in float32
(:func:`compute_dtype`, torch's CPU "opmath" type) and rounds its result once to the input's dtype
(:func:`rounded`); ml_dtypes' own bfloat16 arithmetic would round after every step, and numpy's
float16 sums accumulate in float16. Kernels that compute in float64 for exactness (the
elementwise math, reductions and activations) already satisfy the rule: float64 is at least
float32, and they round once too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from trama.format import numpy_dtype

__all__ = ["FLOATING", "HALF", "compute_dtype", "epsilon", "is_floating", "parameter_like", "rounded", "widened"]

Array = npt.NDArray[Any]

_FLOAT32 = np.dtype(np.float32)
_BFLOAT16 = numpy_dtype("bfloat16")

#: The 16-bit floating dtypes of the format, computed in float32.
HALF = frozenset((numpy_dtype("float16"), _BFLOAT16))
#: The floating dtypes of the format (bfloat16 is ml_dtypes' type, whose numpy kind is not "f").
FLOATING = HALF | {_FLOAT32, np.dtype(np.float64)}


def is_floating(dtype: Any) -> bool:
    """Whether ``dtype`` is one of the format's floating dtypes, the 16-bit ones included."""
    return np.dtype(dtype) in FLOATING


def compute_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype a result of ``dtype`` is computed in: float32 for float16 and bfloat16, the
    dtype itself otherwise."""
    dtype = np.dtype(dtype)
    return _FLOAT32 if dtype in HALF else dtype


def widened(array: Array) -> Array:
    """``array`` in its :func:`compute_dtype` (exact: float32 holds every 16-bit value; no copy
    when it already is)."""
    return array.astype(compute_dtype(array.dtype), copy=False)


def parameter_like(parameter: Array, dtype: Any) -> Array:
    """A parameter as a kernel computing for an input of ``dtype`` uses it: rounded to ``dtype``
    (the catalog: parameters take the input's dtype), then :func:`widened`. No copy when the
    parameter already has ``dtype`` and that is not a 16-bit one."""
    return widened(parameter.astype(dtype, copy=False))


def rounded(value: Any, dtype: Any) -> Array:
    """A result computed in :func:`compute_dtype` rounded once to ``dtype``; a value beyond its
    range becomes ±inf, as rounding does (numpy's overflow warning is silenced)."""
    with np.errstate(over="ignore"):
        return np.asarray(value).astype(dtype, copy=False)


def epsilon(dtype: Any) -> float:
    """The machine epsilon of a floating dtype: ``numpy.finfo``'s, and 2⁻⁷ for bfloat16 (7 stored
    mantissa bits), which ``numpy.finfo`` does not know."""
    dtype = np.dtype(dtype)
    return 2.0**-7 if dtype == _BFLOAT16 else float(np.finfo(dtype).eps)
