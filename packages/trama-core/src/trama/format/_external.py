"""Out-of-line weights: tensors in a safetensors file beside the JSON document.

The document keeps each tensor's dtype and shape and replaces ``data`` with
``"external": {"path", "key", "checksum"}``: a path relative to the document's folder, the key
in the safetensors file, and ``xxh3-64:<16 hex digits>`` of the tensor's bytes. Reading memory-maps
the file and returns zero-copy views, verifying each tensor's checksum the first time it is
used, so opening a large model costs almost nothing until its weights are touched.

We write safetensors ourselves (a JSON header and the raw bytes, streamed from each array with no
intermediate copy) and read it with ``mmap``; the ``safetensors`` package reads our files in the
test suite, which keeps us honest about the format. xxh3 (from ``xxhash``) hashes at tens of GB/s
where SHA-256 manages about 2 GB/s on the machines we measured, which made the checksum a
visible share of a load; readers also accept ``sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import struct
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import numpy as np
import xxhash

from trama.errors import WeightsFileError
from trama.format._dtypes import SAFETENSORS_DTYPES, numpy_dtype
from trama.format._files import NotRegularFileError, open_regular
from trama.format._tensor import Tensor, TensorSource

__all__ = [
    "ExternalSource",
    "SafetensorsFile",
    "UnresolvedExternal",
    "check_reference",
    "checksum",
    "make_resolver",
    "write_safetensors",
]

#: safetensors headers beyond this size are refused as malformed (real ones are kilobytes).
MAX_HEADER_BYTES = 100 * 1024 * 1024
_DTYPES_BY_CODE = {code: name for name, code in SAFETENSORS_DTYPES.items()}


def checksum(data: Any) -> str:
    """The checksum string the format records for a tensor's bytes."""
    return "xxh3-64:" + xxhash.xxh3_64_hexdigest(data)


def _verify(expected: str, data: memoryview, location: str) -> None:
    algorithm, _, digest = expected.partition(":")
    if algorithm == "xxh3-64":
        actual = xxhash.xxh3_64_hexdigest(data)
    elif algorithm == "sha256":
        actual = hashlib.sha256(data).hexdigest()
    else:
        raise WeightsFileError(f"unknown checksum algorithm {algorithm!r} (known: xxh3-64, sha256)", location=location)
    if actual != digest.lower():
        raise WeightsFileError(
            "the tensor's bytes do not match the checksum the document records: the weights file "
            "was changed or belongs to another version of this document",
            location=location,
        )


def write_safetensors(file: BinaryIO, arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Write ``arrays`` as a safetensors file; return each key's checksum."""
    header: dict[str, Any] = {}
    offset = 0
    flat: dict[str, np.ndarray] = {}
    for key, array in arrays.items():
        from trama.format._dtypes import dtype_name

        name = dtype_name(array.dtype)
        data = np.ascontiguousarray(array, dtype=numpy_dtype(name)).reshape(-1).view(np.uint8)
        header[key] = {
            "dtype": SAFETENSORS_DTYPES[name],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + data.nbytes],
        }
        flat[key] = data
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as safetensors does
    file.write(struct.pack("<Q", len(text)))
    file.write(text)
    sums = {}
    for key, data in flat.items():
        file.write(data.data)
        sums[key] = checksum(data)
    return sums


class SafetensorsFile:
    """A memory-mapped safetensors file whose header has been checked against its size."""

    def __init__(self, path: Path, location: str) -> None:
        self.path = path
        try:
            fd, size = open_regular(path)
            try:
                self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else None
            finally:
                os.close(fd)
        except NotRegularFileError as exc:
            raise WeightsFileError(
                f"weights file {str(path)!r} is {exc.kind}, not a regular file", location=location
            ) from None
        except OSError as exc:
            raise WeightsFileError(
                f"cannot open weights file {str(path)!r}: {exc.strerror}", location=location
            ) from None
        if self._map is None or size < 8:
            raise WeightsFileError(f"weights file {str(path)!r} is too short to be safetensors", location=location)
        (header_len,) = struct.unpack("<Q", self._map[:8])
        if header_len > min(MAX_HEADER_BYTES, size - 8):
            raise WeightsFileError(f"weights file {str(path)!r} has a corrupt safetensors header", location=location)
        try:
            header = json.loads(bytes(self._map[8 : 8 + header_len]))
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise WeightsFileError(
                f"weights file {str(path)!r} has a corrupt safetensors header", location=location
            ) from None
        if type(header) is not dict:
            raise WeightsFileError(f"weights file {str(path)!r} has a corrupt safetensors header", location=location)
        self._header = header
        self._data_start = 8 + header_len
        self._data_size = size - self._data_start

    def array(self, key: str, dtype: str, shape: tuple[int, ...], location: str) -> tuple[np.ndarray, memoryview]:
        """The tensor ``key`` as a read-only view, after checking it against the document."""
        entry = self._header.get(key)
        if type(entry) is not dict:
            raise WeightsFileError(f"weights file {self.path.name!r} has no tensor {key!r}", location=location)
        offsets = entry.get("data_offsets")
        if (
            _DTYPES_BY_CODE.get(str(entry.get("dtype"))) != dtype
            or entry.get("shape") != list(shape)
            or type(offsets) is not list
            or len(offsets) != 2
            or not all(type(o) is int for o in offsets)
        ):
            raise WeightsFileError(
                f"tensor {key!r} in {self.path.name!r} is {entry.get('dtype')}{entry.get('shape')}, "
                f"but the document says {dtype}{list(shape)}",
                location=location,
            )
        begin, end = offsets
        np_dtype = numpy_dtype(dtype)
        if not 0 <= begin <= end <= self._data_size or end - begin != math.prod(shape) * np_dtype.itemsize:
            raise WeightsFileError(f"tensor {key!r} in {self.path.name!r} has corrupt offsets", location=location)
        assert self._map is not None
        raw = memoryview(self._map)[self._data_start + begin : self._data_start + end]
        return np.frombuffer(raw, dtype=np_dtype).reshape(shape), raw


class ExternalSource:
    """A tensor's bytes in an external file, verified against the checksum on first use."""

    __slots__ = ("checksum", "file", "key", "location")

    def __init__(self, file: SafetensorsFile, key: str, checksum: str, location: str) -> None:
        self.file = file
        self.key = key
        self.checksum = checksum
        self.location = location

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        from trama.format._dtypes import dtype_name

        array, raw = self.file.array(self.key, dtype_name(dtype), shape, self.location)
        _verify(self.checksum, raw, self.location)
        return array

    def describe(self) -> str:
        return f"external {self.file.path.name}:{self.key}"


class UnresolvedExternal:
    """An external tensor in a document parsed without knowing its folder."""

    __slots__ = ("location",)

    def __init__(self, location: str) -> None:
        self.location = location

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        raise WeightsFileError(
            "this tensor lives in an external weights file, but the document was read without its "
            "folder: use trama.load(path), or trama.loads(text, base_dir=folder)",
            location=self.location,
        )

    def describe(self) -> str:
        return "external (unresolved)"


def check_reference(reference: Any, where: str) -> PurePosixPath:
    """Check what needs no file: the form of an ``external`` object (at ``where``) and its path
    rules. Return the path. Documents read without a folder are checked this far too."""
    if (
        type(reference) is not dict
        or reference.keys() != {"path", "key", "checksum"}
        or not all(type(v) is str for v in reference.values())
    ):
        raise WeightsFileError('external is {"path": string, "key": string, "checksum": string}', location=where)
    path = reference["path"]
    if "\x00" in path or not path.isprintable() or any("\ud800" <= char <= "\udfff" for char in path):
        raise WeightsFileError(
            f"external path {path!a} holds a character no file name may (a NUL, a control character "
            "or a lone surrogate)",
            location=f"{where}/path",
        )
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts or "\\" in reference["path"]:
        raise WeightsFileError(
            f"external path {reference['path']!r} must be relative and stay inside the document's folder",
            location=f"{where}/path",
        )
    return relative


def make_resolver(base_dir: Path) -> Callable[[Any, str, tuple[int, ...], str], TensorSource]:
    """A resolver for :func:`trama.format._codec.decode_document` that opens each weights file once."""
    files: dict[str, SafetensorsFile] = {}

    def resolve(reference: Any, dtype: str, shape: tuple[int, ...], location: str) -> TensorSource:
        where = f"{location}/external"
        relative = check_reference(reference, where)
        file = files.get(reference["path"])
        if file is None:
            path = base_dir.joinpath(*relative.parts)
            # The rule is on the real path: a symbolic link inside the folder (to a file, a
            # folder, or /) must not reach outside it. Checked before the file is opened, and
            # said the same way whether or not what it points to exists.
            if not path.resolve().is_relative_to(base_dir.resolve()):
                raise WeightsFileError(
                    f"external path {reference['path']!r} leads outside the document's folder (through a "
                    "symbolic link); readers only read weights inside it",
                    location=f"{where}/path",
                )
            file = files[reference["path"]] = SafetensorsFile(path, f"{where}/path")
        return ExternalSource(file, reference["key"], reference["checksum"], where)

    return resolve


def external_reference(path: str, key: str, tensor: Tensor, sums: dict[str, str]) -> dict[str, Any]:
    """The document value of a tensor written to an external file."""
    return {
        "dtype": tensor.dtype,
        "shape": list(tensor.shape),
        "external": {"path": path, "key": key, "checksum": sums[key]},
    }
