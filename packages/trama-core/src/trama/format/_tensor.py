"""Tensor values: an element type, a shape, and bytes that are decoded only when asked for.

A :class:`Tensor` read from a file keeps its base64 text (or its place in an external weights
file) until the first ``numpy.asarray(tensor)``; loading a document therefore costs time in
proportion to its structure, not to its weights. Sizes are checked before anything is decoded
or allocated, so a file cannot make the reader allocate more than the file itself justifies.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pybase64
import xxhash

from trama.errors import TensorDataError, pointer_token
from trama.format._dtypes import dtype_name, numpy_dtype

__all__ = [
    "CHECKSUM",
    "Base64Source",
    "Tensor",
    "TensorSource",
    "base64_length",
    "encode_base64",
    "inline_checksum",
    "tensor_checksum",
]

#: No real tensor has more dimensions than this; a larger rank is a malformed file.
MAX_RANK = 64
#: Element count (zero dimensions not counted) above which no array of any dtype fits in memory.
MAX_ELEMENTS = sys.maxsize // 8


#: A checksum as the format writes it: the algorithm, a colon, the hexadecimal digest. Readers
#: accept uppercase digits too, as they do for external tensors.
CHECKSUM = re.compile(r"(?:xxh3-64:[0-9a-fA-F]{16}|sha256:[0-9a-fA-F]{64})\Z")


def tensor_checksum(dtype: str, shape: Sequence[int], data: Any, algorithm: str = "xxh3-64") -> str:
    """The checksum an entry records for its inline tensor (``docs/format.md``, "Inline tensors").

    The hash covers the ASCII text ``<dtype>[<d0>,<d1>,...]`` (``int64[2,3]``, ``float32[]``)
    followed by the tensor's little-endian C-order bytes ``data``: an edit of the bytes, of the
    dtype (an int64 tensor relabelled float64 has the same bytes) or of the shape all change it.
    """
    header = f"{dtype}[{','.join(str(int(d)) for d in shape)}]".encode("ascii")
    if algorithm == "xxh3-64":
        hasher: Any = xxhash.xxh3_64()
    elif algorithm == "sha256":
        hasher = hashlib.sha256()
    else:
        raise ValueError(f"unknown checksum algorithm {algorithm!r} (known: xxh3-64, sha256)")
    hasher.update(header)
    hasher.update(data)
    return f"{algorithm}:{hasher.hexdigest()}"


def inline_checksum(tensor: Tensor) -> str:
    """The ``xxh3-64`` checksum a writer records beside ``tensor`` written inline."""
    array = np.ascontiguousarray(tensor.numpy(), dtype=numpy_dtype(tensor.dtype))
    return tensor_checksum(tensor.dtype, tensor.shape, array.reshape(-1).view(np.uint8))


def base64_length(nbytes: int) -> int:
    """Length of the padded standard base64 text that encodes ``nbytes`` bytes."""
    return 4 * ((nbytes + 2) // 3)


def encode_base64(array: np.ndarray) -> bytes:
    """Base64 (standard alphabet, padded) of an array's little-endian C-order bytes."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return pybase64.b64encode(memoryview(flat.view(np.uint8)))  # type: ignore[arg-type]


def check_shape(shape: Any, *, location: str | None) -> tuple[int, ...]:
    """Validate a shape read from a document and return it as a tuple of ints."""
    if not isinstance(shape, (list, tuple)):
        raise TensorDataError(
            f"shape must be a list of non-negative integers, got {type(shape).__name__}",
            location=location,
        )
    if len(shape) > MAX_RANK:
        raise TensorDataError(f"shape has {len(shape)} dimensions; at most {MAX_RANK} are allowed", location=location)
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise TensorDataError(
                f"shape must be a list of non-negative integers, got {list(shape)!r}",
                location=location,
            )
    if math.prod(dim or 1 for dim in shape) > MAX_ELEMENTS:  # numpy refuses such shapes, even empty
        raise TensorDataError(f"shape {list(shape)} has more elements than an array can hold", location=location)
    return tuple(shape)


class TensorSource(Protocol):
    """Where a not-yet-decoded tensor's bytes live (inline base64, an external file...)."""

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """Return the values as a read-only array of ``dtype`` and ``shape``."""
        ...

    def describe(self) -> str:
        """A few words for ``repr`` and error messages: where the bytes are."""
        ...


class Base64Source:
    """Bytes held as base64 text inside the document, with the checksum its entry records
    (``None`` when it records none), verified when the bytes are decoded."""

    __slots__ = ("checksum", "data", "entry", "location")

    def __init__(
        self,
        data: str | bytes | memoryview,
        location: str | None,
        *,
        checksum: str | None = None,
        entry: str | None = None,
    ) -> None:
        self.data = data
        self.location = location
        self.checksum = checksum
        #: The name of the parameter entry that holds the tensor, for the checksum's message.
        self.entry = entry

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        try:
            raw = pybase64.b64decode(self.data, validate=True)
        except (ValueError, TypeError) as exc:
            raise TensorDataError(f"tensor data is not valid base64 ({exc})", location=self.location) from None
        expected = math.prod(shape) * dtype.itemsize
        if len(raw) != expected:
            raise TensorDataError(
                f"tensor data decodes to {len(raw)} bytes but {dtype_name(dtype)}{list(shape)} needs {expected}",
                location=self.location,
            )
        if self.checksum is not None:
            self._verify(raw, dtype, shape)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def _verify(self, raw: bytes, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        assert self.checksum is not None
        where = self.location if self.entry is None else f"/parameters/{pointer_token(self.entry)}/checksum"
        algorithm, _, digest = self.checksum.partition(":")
        try:
            actual = tensor_checksum(dtype_name(dtype), shape, raw, algorithm).partition(":")[2]
        except ValueError as exc:
            raise TensorDataError(str(exc), location=where) from None
        if actual != digest.lower():
            entry = "this entry" if self.entry is None else f"entry {self.entry!r}"
            raise TensorDataError(
                f"the tensor of {entry} does not match the checksum the entry records: its data, dtype "
                "or shape was changed after it was written",
                location=where,
            )

    def describe(self) -> str:
        return "inline base64"


class Tensor:
    """A tensor parameter value: ``dtype`` (a format dtype name), ``shape``, and its values.

    ``numpy.asarray(tensor)`` returns the values as a read-only array, decoded on first use and
    then cached, so every holder of the same ``Tensor`` sees the same array object. Equality is
    bit-exact: same dtype, same shape, same bytes.
    """

    __slots__ = ("_array", "_source", "dtype", "location", "shape")

    def __init__(
        self,
        dtype: str,
        shape: tuple[int, ...],
        *,
        array: np.ndarray | None = None,
        source: TensorSource | None = None,
        location: str | None = None,
    ) -> None:
        if (array is None) == (source is None):
            raise ValueError("a Tensor needs exactly one of array= or source=")
        self.dtype = dtype
        self.shape = shape
        self.location = location
        self._array = array
        self._source = source

    @classmethod
    def from_array(cls, value: Any) -> Tensor:
        """Wrap anything ``numpy.asarray`` accepts; the dtype must be one the format knows."""
        array = np.asarray(value)
        name = dtype_name(array.dtype)
        array = np.asarray(array, dtype=numpy_dtype(name), order="C")  # ascontiguousarray makes 0-d 1-d
        return cls(name, tuple(int(d) for d in array.shape), array=array)

    @classmethod
    def from_base64(
        cls,
        dtype: Any,
        shape: Any,
        data: Any,
        *,
        location: str | None = None,
        checksum: str | None = None,
        entry: str | None = None,
    ) -> Tensor:
        """Build a lazily decoded tensor from a document's ``{dtype, shape, data}`` value.

        Everything that can be checked without decoding is checked here: the dtype name, the
        shape, and that the base64 text has exactly the length ``dtype`` × ``shape`` implies.
        ``checksum`` (of the entry ``entry``, already checked for form) is verified on decoding,
        before any value is handed out.
        """
        np_dtype = numpy_dtype(dtype, location=location)
        dims = check_shape(shape, location=location)
        if not isinstance(data, (str, bytes, memoryview)):
            raise TensorDataError(f"tensor data must be a base64 string, got {type(data).__name__}", location=location)
        nbytes = math.prod(dims) * np_dtype.itemsize
        expected = base64_length(nbytes)
        if len(data) != expected:
            raise TensorDataError(
                f"tensor data has {len(data)} base64 characters but {dtype}{list(dims)} "
                f"({nbytes} bytes) needs exactly {expected}",
                location=location,
            )
        source = Base64Source(data, location, checksum=checksum, entry=entry)
        return cls(dtype, dims, source=source, location=location)

    @property
    def nbytes(self) -> int:
        """Size of the values in bytes (known without decoding)."""
        return math.prod(self.shape) * numpy_dtype(self.dtype).itemsize

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def is_decoded(self) -> bool:
        """Whether the values are in memory (decoding happens on first access)."""
        return self._array is not None

    @property
    def source(self) -> TensorSource | None:
        """Where undecoded bytes live, or ``None`` once decoded or for in-memory tensors."""
        return self._source

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (read-only when decoded from a file)."""
        if self._array is None:
            assert self._source is not None
            array = self._source.load(numpy_dtype(self.dtype), self.shape)
            if self.dtype == "bool":
                _check_bool_bytes(array, self.location)
            self._array = array
            self._source = None  # release the encoded text: keep one copy of the weights
        return self._array

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self.numpy()
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        if copy:
            return array.copy()
        return array

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        if self.dtype != other.dtype or self.shape != other.shape:
            return False
        mine = np.ascontiguousarray(self.numpy()).reshape(-1).view(np.uint8)
        theirs = np.ascontiguousarray(other.numpy()).reshape(-1).view(np.uint8)
        return bool(np.array_equal(mine, theirs))

    __hash__ = None  # type: ignore[assignment]  # mutable-by-decoding, compared by value

    def __repr__(self) -> str:
        where = "decoded" if self._source is None else self._source.describe()
        return f"Tensor({self.dtype}{list(self.shape)}, {where})"


def _check_bool_bytes(array: np.ndarray, location: str | None) -> None:
    """Bool tensors must hold only the bytes 0 and 1; anything else is a corrupt file."""
    if array.size and array.view(np.uint8).max() > 1:
        raise TensorDataError("bool tensor holds bytes other than 0 and 1", location=location)
