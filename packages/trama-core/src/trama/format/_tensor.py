"""Tensor values: an element type, a shape, and bytes that are decoded only when asked for.

A :class:`Tensor` read from a file keeps its source (its base64 text, the bytes decoded while a
large document was read, its place in the document's file or in an external weights file)
until the first ``numpy.asarray(tensor)``, which checks its size, checksum and values and makes
the array. Sizes are checked before anything is decoded or allocated, so a file cannot make the
reader allocate more than the file itself justifies. Base64 left in a large document's file is
decoded a megabyte at a time straight into the tensor's own array, its checksum verified as it
goes.
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
from trama.format._jsontext import READ_BLOCK, DecodedRun, TextRun

__all__ = [
    "CHECKSUM",
    "Base64Source",
    "Tensor",
    "TensorSource",
    "base64_length",
    "checksum_hasher",
    "checksum_of",
    "encode_base64",
    "fresh_bytes",
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


def checksum_hasher(dtype: str, shape: Sequence[int], algorithm: str = "xxh3-64") -> Any:
    """A hash object (``update``, ``hexdigest``) for an inline tensor's checksum, its header
    already in: feed it the tensor's bytes, in as many pieces as convenient."""
    header = f"{dtype}[{','.join(str(int(d)) for d in shape)}]".encode("ascii")
    if algorithm == "xxh3-64":
        hasher: Any = xxhash.xxh3_64()
    elif algorithm == "sha256":
        hasher = hashlib.sha256()
    else:
        raise ValueError(f"unknown checksum algorithm {algorithm!r} (known: xxh3-64, sha256)")
    hasher.update(header)
    return hasher


def tensor_checksum(dtype: str, shape: Sequence[int], data: Any, algorithm: str = "xxh3-64") -> str:
    """The checksum an entry records for its inline tensor (``docs/format.md``, "Inline tensors").

    The hash covers the ASCII text ``<dtype>[<d0>,<d1>,...]`` (``int64[2,3]``, ``float32[]``)
    followed by the tensor's little-endian C-order bytes ``data``: an edit of the bytes, of the
    dtype (an int64 tensor relabelled float64 has the same bytes) or of the shape all change it.
    """
    hasher = checksum_hasher(dtype, shape, algorithm)
    hasher.update(data)
    return checksum_of(hasher, algorithm)


def checksum_of(hasher: Any, algorithm: str = "xxh3-64") -> str:
    """The checksum text of a :func:`checksum_hasher` (for ``algorithm``) fed a tensor's bytes."""
    return f"{algorithm}:{hasher.hexdigest()}"


def inline_checksum(tensor: Tensor) -> str:
    """The ``xxh3-64`` checksum a writer records beside ``tensor`` written inline. A tensor not
    yet decoded is decoded for the occasion and stays undecoded (:meth:`Tensor.read`)."""
    flat = np.ascontiguousarray(tensor.read(), dtype=numpy_dtype(tensor.dtype)).reshape(-1)
    return tensor_checksum(tensor.dtype, tensor.shape, flat.view(np.uint8))


def base64_length(nbytes: int) -> int:
    """Length of the padded standard base64 text that encodes ``nbytes`` bytes."""
    return 4 * ((nbytes + 2) // 3)


def encode_base64(array: np.ndarray, *, hasher: Any = None) -> bytes:
    """Base64 (standard alphabet, padded) of an array's little-endian C-order bytes.

    ``hasher`` (a :func:`checksum_hasher`) is fed the same bytes, after they are encoded: a
    writer encoding a tensor a piece at a time hashes each piece while the encoder has just
    brought it into the CPU's cache, one pass over the tensor's memory instead of two."""
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    text = pybase64.b64encode(memoryview(flat))  # type: ignore[arg-type]
    if hasher is not None:
        hasher.update(flat)
    return text


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


#: A run left in a document's file is decoded this many characters at a time (a multiple of 4).
DECODE_CHUNK = READ_BLOCK


class Base64Source:
    """Bytes held as base64 text inside the document, with the checksum its entry records
    (``None`` when it records none), verified when the bytes are decoded.

    ``data`` is the text in memory, a :class:`~trama.format._jsontext.DecodedRun` (the bytes,
    decoded while a large document's file was read), or a
    :class:`~trama.format._jsontext.TextRun` left in the document's file: that is read again a
    chunk at a time, decoded into the array it fills and hashed on the way, and it must still
    be the text that was there when the document was loaded (see
    :mod:`trama.format._jsontext`)."""

    __slots__ = ("checksum", "checksum_location", "data", "entry", "location")

    def __init__(
        self,
        data: str | bytes | memoryview | TextRun | DecodedRun,
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
        #: Where the checksum is written, where that is not the entry's ``checksum`` member of
        #: the flat form (a 1.3 tensor object's own ``checksum``).
        self.checksum_location: str | None = None

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        if isinstance(self.data, TextRun):
            return self._load_run(self.data, dtype, shape)
        if isinstance(self.data, DecodedRun):
            return self._load_decoded(self.data, dtype, shape)
        try:
            raw = pybase64.b64decode(self.data, validate=True)
        except (ValueError, TypeError) as exc:
            raise TensorDataError(f"tensor data is not valid base64 ({exc})", location=self.location) from None
        expected = math.prod(shape) * dtype.itemsize
        if len(raw) != expected:
            raise self._wrong_size(len(raw), dtype, shape)
        if self.checksum is not None:
            self._verify(raw, dtype, shape)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def _load_decoded(self, run: DecodedRun, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The bytes decoded at load, as the tensor's array: no copy, checked as any. Their
        checksum was computed as they were decoded if the scan guessed this dtype and shape."""
        raw: np.ndarray = run.data
        if raw.size != math.prod(shape) * dtype.itemsize:
            raise self._wrong_size(raw.size, dtype, shape)
        if self.checksum is not None:
            hashed = run.hashed
            if (
                hashed is not None
                and self.checksum.startswith("xxh3-64:")
                and hashed[0] == dtype_name(dtype)
                and hashed[1] == shape
            ):
                self._compare(hashed[2])
            else:
                self._verify(raw, dtype, shape)
        array: np.ndarray = raw.view(dtype).reshape(shape)
        return array

    def _load_run(self, run: TextRun, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """Decode a run left in the document's file straight into a new array, a chunk at a
        time: memory for the values and one chunk, however large the tensor."""
        expected = math.prod(shape) * dtype.itemsize
        out = fresh_bytes(expected)
        hasher = None if self.checksum is None else self._hasher(dtype, shape)
        done = read = 0
        for text in run.chunks(DECODE_CHUNK, self.location):
            read += len(text)
            try:
                raw = pybase64.b64decode(text, validate=True)
                if read < len(run) and len(raw) * 4 != len(text) * 3:
                    raise ValueError("padding before the end of the text")
            except ValueError as exc:
                run.verify(self.location)  # a file changed since it was loaded says so
                raise TensorDataError(f"tensor data is not valid base64 ({exc})", location=self.location) from None
            if done + len(raw) > expected:
                raise self._wrong_size(done + len(raw), dtype, shape)
            out[done : done + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            if hasher is not None:
                hasher.update(raw)
            done += len(raw)
            del raw  # before the next chunk is decoded: one decoded chunk at a time
        if done != expected:
            raise self._wrong_size(done, dtype, shape)
        if hasher is not None:
            self._compare(hasher)
        array = out.view(dtype).reshape(shape)
        array.flags.writeable = False
        return array

    def _wrong_size(self, size: int, dtype: np.dtype, shape: tuple[int, ...]) -> TensorDataError:
        expected = math.prod(shape) * dtype.itemsize
        return TensorDataError(
            f"tensor data decodes to {size} bytes but {dtype_name(dtype)}{list(shape)} needs {expected}",
            location=self.location,
        )

    def _where(self) -> str | None:
        """Where a checksum problem is reported: the entry's ``checksum`` member."""
        if self.checksum_location is not None:
            return self.checksum_location
        return self.location if self.entry is None else f"/parameters/{pointer_token(self.entry)}/checksum"

    def _hasher(self, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        assert self.checksum is not None
        try:
            return checksum_hasher(dtype_name(dtype), shape, self.checksum.partition(":")[0])
        except ValueError as exc:
            raise TensorDataError(str(exc), location=self._where()) from None

    def _verify(self, raw: bytes | np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        """Check the decoded bytes ``raw`` against the checksum the entry records."""
        hasher = self._hasher(dtype, shape)
        hasher.update(raw)
        self._compare(hasher)

    def _compare(self, hasher: Any) -> None:
        """Compare the checksum of the bytes fed to ``hasher`` with the one the entry records."""
        assert self.checksum is not None
        where = self._where()
        digest = self.checksum.partition(":")[2]
        if hasher.hexdigest() != digest.lower():
            entry = "this entry" if self.entry is None else f"entry {self.entry!r}"
            raise TensorDataError(
                f"the tensor of {entry} does not match the checksum the entry records: its data, dtype "
                "or shape was changed after it was written",
                location=where,
            )

    def describe(self) -> str:
        if isinstance(self.data, TextRun):
            return f"inline base64 in {self.data.file.name}"
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
        if not isinstance(data, (str, bytes, memoryview, TextRun, DecodedRun)):
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

    def read(self) -> np.ndarray:
        """The values, without keeping them: the array when already decoded, otherwise decoded
        (and verified) for the caller alone, the tensor staying undecoded.

        For work that passes over every tensor of a lazily loaded model once (writing it out,
        checking it) and should hold one tensor at a time, not all of them when it is done."""
        if self._array is not None:
            return self._array
        source = self._source
        assert source is not None
        array = source.load(numpy_dtype(self.dtype), self.shape)
        if self.dtype == "bool":
            _check_bool_bytes(array, self.location)
        return array

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


def fresh_bytes(size: int) -> np.ndarray:
    """A new writable uint8 array of ``size`` bytes, for a tensor to be read or decoded into.

    It is ``numpy.empty``: numpy's own allocation, huge-page policy included (numpy asks the
    kernel for huge pages on arrays of 4 MiB or more; ``NUMPY_MADVISE_HUGEPAGE=0`` turns that
    off). Filling a new array is mostly its page faults, and huge pages make them two to three
    times cheaper: on a 2-CPU Firecracker VM (Linux 6.18, THP ``madvise``), first writes to
    268 MB took 0.04-0.07 s with huge pages against 0.11-0.15 s in 4 KiB pages (a private
    mapping of our own, which this used to be), and loading and decoding a 268 MB inline model
    took a median 0.25 s against 0.32 s (10 fresh processes each). On that VM either can stall
    for a few tenths of a second now and then, when the host backs guest memory on first touch;
    the kernel never stalled to compact memory (``compact_stall`` stayed 0)."""
    return np.empty(size, dtype=np.uint8)


def _check_bool_bytes(array: np.ndarray, location: str | None) -> None:
    """Bool tensors must hold only the bytes 0 and 1; anything else is a corrupt file."""
    if array.size and array.view(np.uint8).max() > 1:
        raise TensorDataError("bool tensor holds bytes other than 0 and 1", location=location)
