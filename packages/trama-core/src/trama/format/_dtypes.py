"""The closed set of tensor element types a document may name, and their numpy equivalents.

Names are the format's own vocabulary (``"float32"``, ``"bfloat16"``...). Bytes on disk are
always little-endian; :func:`numpy_dtype` returns the little-endian numpy dtype so that decoding
is a zero-copy view on every platform. ``bfloat16`` comes from ``ml_dtypes``, the package that
JAX and TensorFlow use for it, because numpy has no such type of its own.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from trama.errors import TensorDataError

__all__ = ["DTYPE_NAMES", "SAFETENSORS_DTYPES", "dtype_name", "numpy_dtype"]

_NUMPY_DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype("<f2"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}

#: Every dtype name the format knows, in a stable order.
DTYPE_NAMES: tuple[str, ...] = tuple(_NUMPY_DTYPES)

#: The dtype codes safetensors uses for the same element types.
SAFETENSORS_DTYPES: dict[str, str] = {
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
    "bfloat16": "BF16",
    "int8": "I8",
    "int16": "I16",
    "int32": "I32",
    "int64": "I64",
    "uint8": "U8",
    "bool": "BOOL",
}

_NAMES_BY_KIND: dict[tuple[str, int], str] = {
    (dt.kind, dt.itemsize): name for name, dt in _NUMPY_DTYPES.items() if name != "bfloat16"
}


def numpy_dtype(name: str, *, location: str | None = None) -> np.dtype:
    """Return the little-endian numpy dtype for a format dtype name."""
    try:
        return _NUMPY_DTYPES[name]
    except (KeyError, TypeError):
        known = ", ".join(DTYPE_NAMES)
        raise TensorDataError(f"unknown dtype {name!r}; the format knows {known}", location=location) from None


def dtype_name(dtype: np.dtype) -> str:
    """Return the format's name for a numpy dtype, or raise if the format cannot store it."""
    dtype = np.dtype(dtype)
    if dtype == _NUMPY_DTYPES["bfloat16"]:
        return "bfloat16"
    name = _NAMES_BY_KIND.get((dtype.kind, dtype.itemsize))
    if name is None:
        known = ", ".join(DTYPE_NAMES)
        raise TensorDataError(f"numpy dtype {dtype} cannot be stored; the format knows {known}")
    return name
