"""Out-of-line weights: tensors in a safetensors file beside the JSON document.

The document keeps each tensor's dtype and shape and replaces ``data`` with
``"external": {"path", "key", "checksum"}``: a path relative to the document's folder, the key
in the safetensors file, and ``xxh3-64:<16 hex digits>`` of the tensor's bytes. Loading reads the
file's header only; each tensor is read the first time it is used and verified against its
checksum then, so opening a large model costs almost nothing until its weights are touched.

**Copies by default, a shared mapping on request.** By default a tensor is read with ordinary
positional reads (``preadv``) straight into a fresh array of its own, a megabyte at a time, each
block hashed while it is still in cache, and the checksum is verified on that copy: what was
verified is what the model computes with, whatever later happens to the file. Rewriting the
file in place (``cp``, ``rsync --inplace``) after a tensor was read changes nothing; rewriting
or truncating it before is a clean :class:`WeightsFileError` at first use. The file stays open
(not mapped) until each of its tensors was read, so a newer dump replacing or removing it does
not affect a model already loaded. ``mmap_weights=True`` instead returns read-only views of one
shared memory map: no copy, and pages shared with every process mapping the same file, but the
values are those of the file *now*. An in-place rewrite after verification changes a loaded
model's outputs with no error, and truncating the file kills the process with SIGBUS when a
vanished page is touched. trama's own dumps never change a file in place, so the risk is other
programs writing the weights file of a loaded model.

We write safetensors ourselves (a JSON header and the raw bytes, streamed from each array with no
intermediate copy); the ``safetensors`` package reads our files in the test suite, which keeps us
honest about the format. xxh3 (from ``xxhash``) hashes at tens of GB/s where SHA-256 manages about
2 GB/s on the machines we measured, which made the checksum a visible share of a load; readers
also accept ``sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import reprlib
import struct
import weakref
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import numpy as np
import xxhash

from trama.errors import WeightsFileError
from trama.format._commit import owner_prefix
from trama.format._dtypes import SAFETENSORS_DTYPES, dtype_name, numpy_dtype
from trama.format._files import NotRegularFileError, open_regular, read_at, read_into, refused_in_path
from trama.format._tensor import Tensor, TensorSource, fresh_bytes

__all__ = [
    "ExternalSource",
    "MissingWeightsFileError",
    "SafetensorsFile",
    "UnresolvedExternal",
    "WrittenWeights",
    "check_reference",
    "checksum",
    "make_resolver",
    "safetensors_key",
    "tensor_values",
    "write_safetensors",
]

#: safetensors headers beyond this size are refused as malformed (real ones are kilobytes).
MAX_HEADER_BYTES = 100 * 1024 * 1024
#: The key safetensors reserves for its string metadata (never a tensor's key).
METADATA_KEY = "__metadata__"
_DTYPES_BY_CODE = {code: name for name, code in SAFETENSORS_DTYPES.items()}
#: A tensor is read, and hashed, and written, this many bytes at a time: a block that the
#: hash reads again while it is still in the processor's cache (one pass over memory, not two).
BLOCK = 1 << 20


class MissingWeightsFileError(WeightsFileError):
    """The weights file a document names does not exist (perhaps a newer dump just retired it)."""


def checksum(data: Any) -> str:
    """The checksum string the format records for a tensor's bytes."""
    hasher = xxhash.xxh3_64()
    hasher.update(data)
    return _hashed(hasher)


def _hashed(hasher: xxhash.xxh3_64) -> str:
    """The checksum string of the bytes fed to ``hasher``, an ``xxhash.xxh3_64`` (the format's
    ``xxh3-64:<16 hex digits>``)."""
    return "xxh3-64:" + hasher.hexdigest()


def _hasher(expected: str, location: str) -> Any:
    """A hash object (``update``, ``hexdigest``) for the algorithm of the checksum ``expected``."""
    algorithm = expected.partition(":")[0]
    if algorithm == "xxh3-64":
        return xxhash.xxh3_64()
    if algorithm == "sha256":
        return hashlib.sha256()
    raise WeightsFileError(f"unknown checksum algorithm {algorithm!r} (known: xxh3-64, sha256)", location=location)


def _compare(expected: str, hasher: Any, location: str) -> None:
    """Raise unless the bytes fed to ``hasher`` have the checksum ``expected``."""
    if hasher.hexdigest() != expected.partition(":")[2].lower():
        raise WeightsFileError(
            "the tensor's bytes do not match the checksum the document records: the weights file "
            "was changed or belongs to another version of this document",
            location=location,
        )


def _verify(expected: str, data: Any, location: str) -> None:
    hasher = _hasher(expected, location)
    hasher.update(data)
    _compare(expected, hasher, location)


def safetensors_key(name: str) -> str:
    """The key trama gives the tensor of entry ``name``: the name itself, except for the one
    name safetensors reserves, whose tensor is keyed ``trama:__metadata__`` (a colon appears in
    no entry name, so that key cannot collide)."""
    return f"trama:{name}" if name == METADATA_KEY else name


class WrittenWeights(NamedTuple):
    """What :func:`write_safetensors` wrote: each entry's checksum, and 16 hex digits that
    identify the file's content (its header and its tensors' checksums)."""

    checksums: dict[str, str]
    content_id: str


def tensor_values(tensor: Tensor) -> np.ndarray:
    """A tensor's values for writing them out. An undecoded tensor (external or inline) is read
    for the occasion and not kept in its model, so re-dumping a lazily loaded model holds one
    tensor at a time in memory rather than all of them."""
    return tensor.read()


def write_safetensors(
    write: Callable[[bytes | memoryview], object], tensors: dict[str, Tensor], *, document: str | None = None
) -> WrittenWeights:
    """Write ``tensors`` (by entry name) as a safetensors file through ``write``, one at a time.

    With ``document``, the header's ``__metadata__`` comes first and names it, which is how a
    later dump recognizes the weights files it may collect (:mod:`trama.format._commit`)."""
    header: dict[str, Any] = {}
    if document is not None:
        header[METADATA_KEY] = {"trama.document": document}
    offset = 0
    for name, tensor in tensors.items():
        header[safetensors_key(name)] = {
            "dtype": SAFETENSORS_DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + tensor.nbytes],
        }
        offset += tensor.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as safetensors does
    if document is not None:
        assert text.startswith(owner_prefix(document))
    write(struct.pack("<Q", len(text)))
    write(text)
    sums = {}
    for name, tensor in tensors.items():
        array = tensor_values(tensor)
        data = np.ascontiguousarray(array, dtype=numpy_dtype(tensor.dtype)).reshape(-1).view(np.uint8)
        if data.nbytes != tensor.nbytes:  # pragma: no cover - a Tensor's array always fits its shape
            raise ValueError(f"tensor {name!r} holds {data.nbytes} bytes, not {tensor.nbytes}")
        hasher = xxhash.xxh3_64()
        for begin in range(0, data.nbytes, BLOCK):  # hashed while in cache, then written from it
            block = data[begin : begin + BLOCK].data
            hasher.update(block)
            write(block)
        sums[name] = _hashed(hasher)
        del array, data
    identity = xxhash.xxh3_64(text)
    for name in tensors:
        identity.update(f"{name}\n{sums[name]}\n".encode())
    return WrittenWeights(sums, identity.hexdigest())


class SafetensorsFile:
    """An open safetensors file whose header has been checked against its size.

    Tensors are read as private copies, or (``mapped``) as views of one shared memory map; see
    the module's notes for what each means when the file changes under a loaded model."""

    def __init__(self, path: Path, location: str, *, mapped: bool = False) -> None:
        self.path = path
        self.mapped = mapped
        self._map: mmap.mmap | None = None
        self._fd: int | None = None
        try:
            fd, size = open_regular(path)
        except NotRegularFileError as exc:
            raise WeightsFileError(
                f"weights file {str(path)!r} is {exc.kind}, not a regular file", location=location
            ) from None
        except FileNotFoundError as exc:
            raise MissingWeightsFileError(
                f"cannot open weights file {str(path)!r}: {exc.strerror}", location=location
            ) from None
        except OSError as exc:
            raise WeightsFileError(
                f"cannot open weights file {str(path)!r}: {exc.strerror}", location=location
            ) from None
        try:
            info = os.fstat(fd)
            #: Which file this is (device, inode): a document's resolver opens each file once.
            self.identity = (info.st_dev, info.st_ino)
            header, header_len = self._read_header(fd, size, location)
            if mapped:
                self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            os.close(fd)
            message = f"cannot read weights file {str(path)!r}: {exc.strerror}"
            raise WeightsFileError(message, location=location) from None
        except BaseException:
            os.close(fd)
            raise
        if mapped:
            os.close(fd)
        else:
            # Closed when this object goes, which is when the last of its tensors was read (a
            # decoded Tensor lets go of its source) or its model was dropped.
            self._fd = fd
            weakref.finalize(self, os.close, fd)
        self._header = header
        self._data_start = 8 + header_len
        self._data_size = size - self._data_start

    def _read_header(self, fd: int, size: int, location: str) -> tuple[dict[str, Any], int]:
        corrupt = f"weights file {str(self.path)!r} has a corrupt safetensors header"
        if size < 8:
            raise WeightsFileError(f"weights file {str(self.path)!r} is too short to be safetensors", location=location)
        head = read_at(fd, 8, 0)
        if len(head) < 8:
            raise WeightsFileError(f"weights file {str(self.path)!r} is too short to be safetensors", location=location)
        (header_len,) = struct.unpack("<Q", head)
        if header_len > min(MAX_HEADER_BYTES, size - 8):
            raise WeightsFileError(corrupt, location=location)
        text = read_at(fd, header_len, 8)
        if len(text) != header_len:
            raise WeightsFileError(f"weights file {str(self.path)!r} was truncated while being read", location=location)
        try:
            header = json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise WeightsFileError(corrupt, location=location) from None
        if type(header) is not dict:
            raise WeightsFileError(corrupt, location=location)
        return header, header_len

    def _span(self, key: str, dtype: str, shape: tuple[int, ...], location: str) -> tuple[int, int]:
        """The file offsets of tensor ``key``, after checking its entry against the document."""
        entry = self._header.get(key) if key != METADATA_KEY else None
        if type(entry) is not dict:
            raise WeightsFileError(f"weights file {self.path.name!r} has no tensor {key!r}", location=location)
        code, found = entry.get("dtype"), entry.get("shape")
        same_shape = (
            type(found) is list
            and len(found) == len(shape)
            and all(type(d) is int and d == e for d, e in zip(found, shape, strict=True))
        )
        if (_DTYPES_BY_CODE.get(code) if type(code) is str else None) != dtype or not same_shape:
            raise WeightsFileError(
                f"tensor {key!r} in {self.path.name!r} is {_brief(entry.get('dtype'))}{_brief(entry.get('shape'))}, "
                f"but the document says {dtype}{list(shape)}",
                location=location,
            )
        offsets = entry.get("data_offsets")
        if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            raise WeightsFileError(
                f"tensor {key!r} in {self.path.name!r} has corrupt offsets: data_offsets is not [begin, end]",
                location=location,
            )
        begin, end = offsets
        if not 0 <= begin <= end <= self._data_size or end - begin != math.prod(shape) * numpy_dtype(dtype).itemsize:
            raise WeightsFileError(f"tensor {key!r} in {self.path.name!r} has corrupt offsets", location=location)
        return self._data_start + begin, self._data_start + end

    def read(self, key: str, dtype: str, shape: tuple[int, ...], expected: str, location: str) -> np.ndarray:
        """The tensor ``key`` as a read-only array, checked against the document and verified
        against ``expected`` (its checksum)."""
        begin, end = self._span(key, dtype, shape, location)
        np_dtype = numpy_dtype(dtype)
        if self._map is not None:
            raw = memoryview(self._map)[begin:end]
            _verify(expected, raw, location)
            return np.frombuffer(raw, dtype=np_dtype).reshape(shape)
        hasher = _hasher(expected, location)
        out = fresh_bytes(end - begin)
        with out.data as buffer:
            self._read_into(buffer, begin, hasher, location)
        _compare(expected, hasher, location)
        array = out.view(np_dtype).reshape(shape)
        array.flags.writeable = False
        return array

    def _read_into(self, buffer: memoryview, offset: int, hasher: Any, location: str) -> None:
        """Fill ``buffer`` from the file at ``offset`` with positional reads (no shared file
        position, so threads may read tensors at once), straight into the array's memory, a
        :data:`BLOCK` at a time, each block fed to ``hasher`` while it is still in cache."""
        fd = self._fd
        assert fd is not None
        done = 0
        while done < len(buffer):
            with buffer[done : done + BLOCK] as block:
                try:
                    got = read_into(fd, block, offset + done)
                except OSError as exc:
                    raise WeightsFileError(
                        f"cannot read weights file {str(self.path)!r}: {exc.strerror}", location=location
                    ) from None
                if got == 0:
                    raise WeightsFileError(
                        f"weights file {self.path.name!r} ends before the tensor does: it was truncated "
                        "after the document was loaded",
                        location=location,
                    )
                with block[:got] as filled:
                    hasher.update(filled)
            done += got


def _brief(value: Any) -> str:
    """A value read from a weights file's header, for a message: short, and printable (a list
    nested deeper than a few levels is shown as ``[...]``, never walked: a header may nest as
    deep as its parser allowed)."""
    text = ascii(value)[1:-1] if isinstance(value, str) else ascii(_BRIEF.repr(value))[1:-1]
    return text if len(text) <= 40 else text[:37] + "..."


def _brief_repr() -> reprlib.Repr:
    brief = reprlib.Repr()  # (keyword arguments only from Python 3.12)
    brief.maxlevel, brief.maxlist, brief.maxdict, brief.maxstring, brief.maxother = 3, 8, 4, 40, 40
    return brief


_BRIEF = _brief_repr()


class ExternalSource:
    """A tensor's bytes in an external file, verified against the checksum on first use."""

    __slots__ = ("checksum", "file", "key", "location")

    def __init__(self, file: SafetensorsFile, key: str, checksum: str, location: str) -> None:
        self.file = file
        self.key = key
        self.checksum = checksum
        self.location = location

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        return self.file.read(self.key, dtype_name(dtype), shape, self.checksum, self.location)

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
    refused = {char for char in path if refused_in_path(char)}
    if refused - {"\\"}:
        raise WeightsFileError(
            f"external path {path!a} holds a character no file name may (a NUL, a control character "
            "or a lone surrogate)",
            location=f"{where}/path",
        )
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts or refused:
        raise WeightsFileError(
            f"external path {reference['path']!r} must be relative and stay inside the document's folder",
            location=f"{where}/path",
        )
    return relative


def make_resolver(
    base_dir: Path, *, mmap_weights: bool = False
) -> Callable[[Any, str, tuple[int, ...], str], TensorSource]:
    """A resolver for :func:`trama.format._codec.decode_document` that opens each weights file
    once: read into private copies, or (``mmap_weights``) mapped; see the module's notes."""
    # Each file is opened once, and its header read once, however the document spells its path
    # (``w.safetensors``, ``./w.safetensors``, ``a/../w.safetensors`` through a link...): by
    # the spelling for speed, then by the file itself (device and inode) for the promise.
    files: dict[str, SafetensorsFile] = {}
    opened: dict[tuple[int, int], SafetensorsFile] = {}
    folder: list[Path] = []  # the real path of base_dir, once it is needed

    def resolve(reference: Any, dtype: str, shape: tuple[int, ...], location: str) -> TensorSource:
        where = f"{location}/external"
        relative = check_reference(reference, where)
        file = files.get(reference["path"])
        if file is None:
            path = base_dir.joinpath(*relative.parts)
            # The rule is on the real path: a symbolic link inside the folder (to a file, a
            # folder, or /) must not reach outside it. Checked before the file is opened, and
            # said the same way whether or not what it points to exists.
            try:
                real = path.resolve()
            except (RuntimeError, OSError) as exc:  # a loop of links (RuntimeError before 3.13)
                why = (exc.strerror if isinstance(exc, OSError) else None) or "a loop of symbolic links"
                raise WeightsFileError(
                    f"external path {reference['path']!r} cannot be resolved: {why}",
                    location=f"{where}/path",
                ) from None
            if not folder:
                folder.append(base_dir.resolve())
            if not real.is_relative_to(folder[0]):
                raise WeightsFileError(
                    f"external path {reference['path']!r} leads outside the document's folder (through a "
                    "symbolic link); readers only read weights inside it",
                    location=f"{where}/path",
                )
            identity = _identity(real)
            file = opened.get(identity) if identity is not None else None
            if file is None:
                file = SafetensorsFile(path, f"{where}/path", mapped=mmap_weights)
                opened.setdefault(file.identity, file)
            files[reference["path"]] = file
        return ExternalSource(file, reference["key"], reference["checksum"], where)

    return resolve


def _identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path``, or ``None`` (opening it says why)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def external_reference(path: str, name: str, tensor: Tensor, sums: dict[str, str]) -> dict[str, Any]:
    """The document value of entry ``name``'s tensor, written to the external file ``path``."""
    return {
        "dtype": tensor.dtype,
        "shape": list(tensor.shape),
        "external": {"path": path, "key": safetensors_key(name), "checksum": sums[name]},
    }
