"""The closed set of tensor element types a document may name, and their numpy equivalents.

Names are the format's own vocabulary (``"float32"``, ``"bfloat16"``...). Bytes on disk are
always little-endian; :func:`numpy_dtype` returns the little-endian numpy dtype so that decoding
is a zero-copy view on every platform. ``bfloat16`` comes from ``ml_dtypes``, the package that
JAX and TensorFlow use for it, because numpy has no such type of its own.

The names are plain data, read by the catalog's specs and the JSON Schema; numpy and ml_dtypes
are imported by the first call that needs a dtype, so that discovering plugins imports neither
(:mod:`trama.format._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.errors import TensorDataError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DTYPE_NAMES", "SAFETENSORS_DTYPES", "dtype_name", "numpy_dtype"]

#: Each format dtype's numpy type code, little-endian (``None``: bfloat16, ml_dtypes' type).
_TYPE_CODES: dict[str, str | None] = {
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "bfloat16": None,
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "u1",
    "bool": "?",
}

#: Every dtype name the format knows, in a stable order.
DTYPE_NAMES: tuple[str, ...] = tuple(_TYPE_CODES)

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

#: The numpy dtypes by format name, and the names by (kind, itemsize) for every dtype but
#: bfloat16: empty until :func:`_load` fills them, on the first call that needs a dtype.
_NUMPY_DTYPES: dict[str, np.dtype] = {}
_NAMES_BY_KIND: dict[tuple[str, int], str] = {}


def _load() -> None:
    """Import numpy and ml_dtypes and fill the tables. Filled whole, then published in one
    ``update`` each, so a thread that races another fills the same values and a reader never
    meets a half-filled table (a non-empty ``_NUMPY_DTYPES`` is a complete one)."""
    import ml_dtypes
    import numpy as np

    dtypes = {name: np.dtype(ml_dtypes.bfloat16 if code is None else code) for name, code in _TYPE_CODES.items()}
    _NAMES_BY_KIND.update({(dt.kind, dt.itemsize): name for name, dt in dtypes.items() if name != "bfloat16"})
    _NUMPY_DTYPES.update(dtypes)


def numpy_dtype(name: str, *, location: str | None = None) -> np.dtype:
    """Return the little-endian numpy dtype for a format dtype name."""
    try:
        return _NUMPY_DTYPES[name]
    except (KeyError, TypeError):
        if not _NUMPY_DTYPES and isinstance(name, str) and name in _TYPE_CODES:
            _load()
            return _NUMPY_DTYPES[name]
        known = ", ".join(DTYPE_NAMES)
        raise TensorDataError(f"unknown dtype {name!r}; the format knows {known}", location=location) from None


def dtype_name(dtype: np.dtype) -> str:
    """Return the format's name for a numpy dtype, or raise if the format cannot store it."""
    import numpy as np  # already imported: the caller holds a numpy dtype

    if not _NUMPY_DTYPES:
        _load()
    dtype = np.dtype(dtype)
    if dtype == _NUMPY_DTYPES["bfloat16"]:
        return "bfloat16"
    name = _NAMES_BY_KIND.get((dtype.kind, dtype.itemsize))
    if name is None:
        known = ", ".join(DTYPE_NAMES)
        raise TensorDataError(f"numpy dtype {dtype} cannot be stored; the format knows {known}")
    return name
