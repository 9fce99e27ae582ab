"""Reading and writing documents: ``load``/``loads``/``dump``/``dumps``.

Writing is atomic: the new text goes to a temporary file in the same folder, is flushed to disk,
and only then replaces the old file, so a failure or a crash at any point leaves the previous good
copy in place; external weights go to a new file named after its content, and the document's
rename is the one commit point (:mod:`trama.format._commit` explains how, and how concurrent
writers and killed ones are handled). Every failure to write is one
:class:`~trama.errors.WriteError`. Reading never executes code and never imports anything a
document names.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np

from trama.errors import TramaError, WeightsFileError, WriteError
from trama.format import _commit
from trama.format._codec import FLAT_VERSION, _inline_checksum, check_flat_writable, decode_document
from trama.format._compact import model_pieces_13, short_checksum
from trama.format._dtypes import numpy_dtype
from trama.format._external import (
    MissingWeightsFileError,
    check_reference,
    external_reference,
    make_resolver,
    write_safetensors,
)
from trama.format._files import NotRegularFileError, open_regular, read_regular
from trama.format._jsontext import DocumentFile, gc_paused, lift_text, parse_json
from trama.format._memory import raising_out_of_memory
from trama.format._model import Model
from trama.format._progress import Progress, progress_line
from trama.format._specs import OpRegistry
from trama.format._stack import in_nested_room
from trama.format._tensor import (
    Tensor,
    base64_length,
    checksum_hasher,
    checksum_of,
    encode_base64,
    inline_checksum,
)
from trama.format._typed import decode_typed
from trama.format._typed_nested import decode_nested
from trama.format._validation import StructureProof
from trama.format._validation import validate as validate_model
from trama.format._writer import model_pieces
from trama.version import FORMAT_VERSION

__all__ = ["atomic_file", "dump", "dumps", "load", "loads", "weights_path"]

PathLike = str | os.PathLike[str]

#: Files at least this large are read by :func:`load` a block at a time, their tensors' base64
#: decoded as it is read or left in the file (:mod:`trama.format._jsontext`), instead of read
#: whole.
#: (``trama.tools.cli`` maps a redirected standard input this large.)
MMAP_THRESHOLD = 1 << 20


def loads(
    text: str | bytes | mmap.mmap,
    *,
    validate: bool = True,
    registry: OpRegistry | None = None,
    base_dir: PathLike | None = None,
    mmap_weights: bool = False,
) -> Model:
    """Parse a document from text.

    With ``validate`` (the default) the structural rules are checked, and the registry's rules
    too when one is given. ``base_dir`` is the folder external weights paths are relative to;
    ``mmap_weights`` is as for :func:`load`.
    """
    return _decode(text, validate=validate, registry=registry, base_dir=base_dir, mmap_weights=mmap_weights)


@raising_out_of_memory("read the document")
@in_nested_room
def _decode(
    text: str | bytes | mmap.mmap | DocumentFile,
    *,
    validate: bool,
    registry: OpRegistry | None,
    base_dir: PathLike | None,
    mmap_weights: bool,
    progress: Progress | None = None,
    lazy_inline: bool = False,
) -> Model:
    """:func:`loads`, for :func:`load` too: which passes a large document as its open file (and
    the ``progress`` of reading it, and whether its inline tensors are decoded as it is read);
    running out of memory is a trama error."""
    resolver = make_resolver(Path(base_dir), mmap_weights=mmap_weights) if base_dir is not None else None
    with gc_paused():
        lifted = lift_text(text, progress, decode=not lazy_inline, hashers=checksum_hasher)
        typed = decode_typed(lifted, resolver)
        if typed is None:
            nested = decode_nested(lifted, resolver)
            typed = None if nested is None else (nested, True)
        if typed is None:  # not a format the fast readers know, or something the careful path must judge
            parsed = parse_json(lifted)
            model = decode_document(parsed.data, resolve_external=resolver, blobs=parsed.blobs)
            sound = False
        else:
            model, sound = typed
        if validate:
            try:
                if not sound:
                    validate_model(model, registry)
                elif registry is not None:
                    validate_model(model, registry, structure_checked=True)
            except TramaError as error:
                if model.source_places is not None:  # located in the nested text it was read from
                    for each in error.all_errors:
                        model.source_places.locate(each)
                raise
    return model


def load(
    path: PathLike,
    *,
    validate: bool = True,
    registry: OpRegistry | None = None,
    mmap_weights: bool = False,
    progress: bool | None = None,
    lazy_inline: bool = False,
) -> Model:
    """Read a document from a file.

    Reading a file of 100 MB or more shows a progress line on standard error when that is a
    terminal; ``progress=False`` never shows it, ``progress=True`` shows it for any size (still
    only on a terminal). See :mod:`trama.format._progress`.

    The file is read once, a block at a time, and never mapped. The inline tensors of a large
    document (1 MB or more) are decoded as they are read, each into an array of its own: the
    file is read once, its text never held whole, and what happens to it afterwards changes
    nothing. Each tensor's size, checksum and values are checked when it is first used, as for
    a small document, whose base64 is decoded then. (A run of base64 that is not plain base64,
    padding inside it, is left in the file and refused at first use, as described below.)

    ``lazy_inline=True`` leaves a large document's inline tensors in its file instead, for a
    program that looks at the structure only: the load costs the memory of the structure, not
    of the weights. A tensor is then read again on first use and decoded into an array of its
    own; the file must still hold, byte for byte, the text that was read at load, so a document
    truncated or rewritten in place before its tensors were used is a
    :class:`~trama.errors.TensorDataError`, never other values and never a crash.

    External weights are read when first used, each tensor into an array of its own, verified
    against its checksum: a model computes with the bytes that were verified, whatever later
    happens to the file, and a weights file truncated or rewritten before its tensors were used
    is a :class:`~trama.errors.WeightsFileError`, never a crash.

    ``mmap_weights=True`` maps the weights files instead and returns read-only views of the
    mapping: no copy, and memory shared with every process mapping the same file, but at the
    file's mercy. A program that rewrites a weights file in place (``cp``, ``rsync --inplace``)
    after its tensors were verified silently changes the outputs of models already loaded from
    it, and truncating it kills the process with SIGBUS. Use it only for weights files that
    nothing rewrites in place (trama's own dumps never do).

    A document being replaced by another process's dump at the same moment is read whole, old
    or new: the JSON is reopened if the weights file it named was retired in the meantime.
    """
    file = Path(path)
    for attempt in range(_LOAD_ATTEMPTS):
        data, identity = _read_document(file)
        size = data.size if isinstance(data, DocumentFile) else len(data)
        try:
            with progress_line(progress, f"reading {file.name}", size) as line:
                return _decode(
                    data,
                    validate=validate,
                    registry=registry,
                    base_dir=file.parent,
                    mmap_weights=mmap_weights,
                    progress=line if line.shown else None,
                    lazy_inline=lazy_inline,
                )
        except MissingWeightsFileError:
            # Its weights file is gone: if the document was replaced since we read it, a newer
            # dump committed and collected it. Read the new one.
            if attempt + 1 == _LOAD_ATTEMPTS or _identity(file) in (identity, None):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


#: How many times :func:`load` reads a document that other processes keep replacing.
_LOAD_ATTEMPTS = 5


def _identity(file: Path) -> tuple[int, ...] | None:
    try:
        info = os.stat(file)
    except OSError:
        return None
    return _file_identity(info)


def _file_identity(info: os.stat_result) -> tuple[int, ...]:
    """Which file a path named: device and inode, and its change time, since writers that
    replace a document many times a second free inode numbers that the next file may get."""
    return info.st_dev, info.st_ino, info.st_ctime_ns


def _read_document(file: Path) -> tuple[bytes | DocumentFile, tuple[int, ...]]:
    """The document's bytes (a large one: its open file) and the identity of its file."""
    with _read_errors(file):
        fd, size = open_regular(file)
        info = os.fstat(fd)
        return document_text(fd, size, file.name), _file_identity(info)


def document_text(fd: int, size: int, name: str) -> bytes | DocumentFile:
    """The text of the document open as ``fd`` (``size`` bytes), taking over the descriptor:
    a small one read whole, a large one (:data:`MMAP_THRESHOLD` bytes or more) kept open and
    read a block at a time, so that its text is never whole in memory (see
    trama.format._jsontext)."""
    if size >= MMAP_THRESHOLD:
        return DocumentFile(fd, size, name)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


@contextmanager
def _read_errors(file: Path) -> Iterator[None]:
    """Turn a failure to read the document ``file`` into one trama error naming it."""
    try:
        yield
    except NotRegularFileError as exc:
        raise TramaError(f"cannot read {str(file)!r}: it is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise TramaError(f"cannot read {str(file)!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise TramaError(f"cannot read {str(file)!a}: {exc}") from None


#: The format versions a writer can write: the current (nested) one, and the last flat one.
WRITABLE_VERSIONS = (FORMAT_VERSION, FLAT_VERSION)


def dumps(model: Model, *, format_version: str = FORMAT_VERSION) -> str:
    """The document as text, tensors inline as base64; ``format_version="1.2"`` writes the
    flat form of format 1.2 (one object per node, every value in the table), for a reader
    that predates 1.3."""
    flat = _flat(format_version, model)
    with gc_paused(), _proving(model) as proof:  # as in dump
        text = "".join(
            piece if isinstance(piece, str) else piece.decode("ascii")
            for piece in _inline_pieces(model, proof, flat=flat)
        )
        proof.finish()
    return text


@contextmanager
def _proving(model: Model) -> Iterator[StructureProof]:
    """The proof of ``model``'s structural rules that ``dump`` and ``dumps`` make while they
    write its text (:class:`~trama.format._validation.StructureProof`), instead of validating
    it in a pass of its own first: the writer proves each node's rules before writing it, and
    the rest once every node is declared, before the parameter table; the caller calls
    ``finish`` again before the text is used (returned, or committed: until then it is only in
    a temporary file, which a failure removes). A model that breaks a rule raises the error
    ``validate`` raises, since ``validate`` itself makes it.

    Any other error raised before the model is proven (a tensor that cannot be read, a disk
    that is full, a bad argument) comes after the model's own, as when validation ran first:
    the model is validated and its error, if it has one, is raised instead."""
    proof: StructureProof | None = None
    try:
        proof = StructureProof(model)
        if not proof.proven:
            proof.settle()  # what the node pass relies on does not hold: decide before writing
        yield proof
    except Exception as exc:
        if proof is not None and proof.settled:
            raise
        failure = exc
    else:
        return
    validate_model(model)  # outside the handler, so that its error does not chain the other
    raise failure


def _flat(format_version: str, model: Model) -> bool:
    """Whether to write the flat form; a model the flat form cannot hold (sizes, symbols) is
    refused there, before anything is written."""
    if format_version not in WRITABLE_VERSIONS:
        raise ValueError(f"format_version must be one of {list(WRITABLE_VERSIONS)}, got {format_version!r}")
    if format_version == FLAT_VERSION:
        check_flat_writable(model)
        return True
    return False


def _pieces(
    model: Model,
    tensor: Callable[[str, Tensor], dict[str, Any]],
    checksum: Callable[[str, Tensor], str] | None = None,
    *,
    width: Callable[[str], int] = len,
    proof: StructureProof | None = None,
    weights: str | None = None,
    flat: bool = False,
) -> Iterator[str]:
    """The text of a model, in pieces: the nested form (1.3, :mod:`trama.format._compact`) or
    the flat one (1.2, :mod:`trama.format._writer`); each proves the model with ``proof`` as it
    makes the nodes' text, the nested one before its first piece."""
    if flat:
        yield from model_pieces(model, tensor, checksum, width=width, proof=proof)
        return
    yield from model_pieces_13(model, tensor, checksum or _inline_checksum, weights=weights, proof=proof)


def _inline_tensor(name: str, tensor: Tensor) -> dict[str, Any]:
    return {"dtype": tensor.dtype, "shape": list(tensor.shape), "data": encode_base64(tensor.numpy()).decode("ascii")}


def weights_path(path: PathLike) -> Path:
    """The weights file of the external-weights document at ``path``, as the document names it.

    ``dump(..., weights="external")`` names it after the document and its content:
    ``model.trama.json`` -> ``model.<16 hex digits>.safetensors`` (documents written by
    earlier trama name ``model.safetensors``). Raises :class:`~trama.errors.WeightsFileError` when
    the document names no weights file, or several."""
    file = Path(path)
    with _read_errors(file):
        data = parse_json(read_regular(file)).data
    parameters = data.get("parameters") if type(data) is dict else None
    named: list[str] = []
    if type(data) is dict and type(data.get("weights")) is str:  # format 1.3 names it once
        named.append(str(check_reference({"path": data["weights"], "key": "", "checksum": ""}, "/weights")))
    for name, entry in parameters.items() if type(parameters) is dict else ():
        value = entry.get("value") if type(entry) is dict else None
        if type(value) is dict and "external" in value:
            relative = str(check_reference(value["external"], f"/parameters/{name}/value/external"))
            if relative not in named:
                named.append(relative)
    if len(named) != 1:
        listed = f" ({', '.join(named)})" if named else ""
        raise WeightsFileError(f"{str(file)!r} names {len(named)} weights files{listed}")
    return file.parent.joinpath(*named[0].split("/"))


def dump(
    model: Model,
    path: PathLike,
    *,
    weights: Literal["inline", "external"] = "inline",
    progress: bool | None = None,
    format_version: str = FORMAT_VERSION,
) -> None:
    """Write a document to ``path``, atomically.

    Writing 100 MB or more shows a progress line on standard error when that is a terminal;
    ``progress`` decides as for :func:`load`.

    ``weights="inline"`` (the default) keeps the file self-contained, tensors as base64.
    ``weights="external"`` writes the tensors to a safetensors file beside it, named after the
    document and the file's content (``model.<16 hex digits>.safetensors``, see
    :func:`weights_path`), and references them by relative path, key and checksum.

    Whatever happens (an error, a full disk, the process killed, another process dumping to the
    same path at the same time), ``path`` names either the previous document or the new one,
    each whole with its own weights. Weights files of the previous document that the new one
    does not name are removed, as are temporary files left by killed dumps to ``path``. A
    failure to write is a :class:`~trama.errors.WriteError`.
    """
    # Proving a large graph valid and writing its text build and drop many small containers and
    # no cycles: the collector, triggered by their count, would rescan the whole model again and
    # again. The model is proven valid as its text is made (_proving): nothing is committed, and
    # no text returned, before it is.
    flat = _flat(format_version, model)
    with gc_paused(), _proving(model) as proof:
        if weights not in ("inline", "external"):
            raise ValueError(f"weights must be 'inline' or 'external', got {weights!r}")
        file = Path(path)
        tensors = [entry.value for entry in model.parameters.values() if isinstance(entry.value, Tensor)]
        if weights == "inline":
            size = sum(base64_length(tensor.nbytes) for tensor in tensors)
        else:
            size = sum(tensor.nbytes for tensor in tensors)
        with _commit.write_errors(file), progress_line(progress, f"writing {file.name}", size) as line:
            _commit.check_target(file)
            if weights == "inline":
                with _temporary(file.parent, file.name) as temp:
                    _write_inline(model, _counted(temp.write, line), proof, flat=flat)
                    proof.finish()
                    temp.sync()
                    _commit.commit_document(file, temp)
            else:
                _dump_external(model, file, line, proof, flat=flat)


def _write_inline(
    model: Model, write: Callable[[bytes], object], proof: StructureProof | None = None, *, flat: bool = False
) -> None:
    """Write the text with each tensor's base64 streamed in place of a placeholder, so the
    whole encoded document never sits in memory at once (proving the model with ``proof``,
    as :func:`_inline_pieces`)."""
    for piece in _inline_pieces(model, proof, flat=flat):
        write(_utf8(piece) if isinstance(piece, str) else piece)


#: A tensor's base64 is produced from this many of its bytes at a time (a multiple of 3, so
#: that the pieces join into the one base64 text of the whole): 192 KiB, whose 256 KiB of text
#: stay in the CPU's cache from the encoder to the hash and the write. On a 2-CPU Xeon VM,
#: encoding and hashing 268 MB took 0.033-0.040 s this way against 0.045-0.051 s in 768 KiB
#: pieces hashed before they were encoded.
_ENCODE_CHUNK = 3 << 16
#: The length of the checksum a writer records: ``xxh3-64:`` and 16 hexadecimal digits.
_CHECKSUM_LENGTH = 24


def _inline_pieces(model: Model, proof: StructureProof | None = None, *, flat: bool = False) -> Iterator[str | bytes]:
    """The inline document's text, in order: the structure as ``str``, each tensor's base64 as
    ``bytes`` a chunk at a time.

    The structure is laid out with short placeholders for each tensor's ``data`` and its entry's
    ``checksum``, measured as the real text will read, and comes a piece at a time (a large
    graph's text is never whole in memory). The tensors are taken one at a time where their
    placeholders are: decoded when not yet (:meth:`Tensor.read`, which keeps nothing), encoded,
    and their checksum computed on the same array. Writing a lazily loaded model holds one
    tensor at a time, not all of them, and leaves them undecoded; a bad tensor is found when
    reached.

    With a ``proof``, the model is proven valid as the structure is made
    (:func:`~trama.format._writer.model_pieces`): all of it before the parameter table, so no
    tensor of an invalid model is ever read or encoded.
    """
    nonce = secrets.token_hex(8)
    tensors: list[Tensor] = []

    def placeholder(name: str, tensor: Tensor) -> dict[str, Any]:
        tensors.append(tensor)
        return {"dtype": tensor.dtype, "shape": list(tensor.shape), "data": f"\x00{nonce}:{len(tensors) - 1}"}

    def checksum(name: str, tensor: Tensor) -> str:
        assert tensors[-1] is tensor  # asked right after the entry's value is encoded
        return f"\x00{nonce}:c{len(tensors) - 1}"

    marker = f"\\u0000{nonce}:"
    pattern = re.compile(rf"\\u0000{nonce}:(c?)([0-9]+)")

    def width(compact: str) -> int:  # lay the text out as it will read, with the real base64
        if marker not in compact:
            return len(compact)
        return len(compact) + sum(
            (_CHECKSUM_LENGTH if kind else base64_length(tensors[int(k)].nbytes)) - len(f"\\u0000{nonce}:{kind}{k}")
            for kind, k in pattern.findall(compact)
        )

    sums: dict[int, str] = {}
    # The structure comes in pieces (model_pieces), none of which splits a placeholder.
    for text in _pieces(model, placeholder, checksum, width=width, proof=proof, flat=flat):
        if marker not in text:
            yield text
            continue
        parts = pattern.split(text)
        yield parts[0]
        for k in range(1, len(parts), 3):
            index = int(parts[k + 1])
            tensor = tensors[index]
            if parts[k]:  # the entry's checksum, computed when its data was written just before
                written = sums.pop(index) if index in sums else inline_checksum(tensor)
                yield written if flat else short_checksum(written)
            else:
                values = np.ascontiguousarray(tensor.read(), dtype=numpy_dtype(tensor.dtype)).reshape(-1).view(np.uint8)
                hasher = checksum_hasher(tensor.dtype, tensor.shape)  # fed each piece as it is encoded
                for begin in range(0, len(values), _ENCODE_CHUNK):
                    yield encode_base64(values[begin : begin + _ENCODE_CHUNK], hasher=hasher)
                sums[index] = checksum_of(hasher)
                del values
            yield parts[k + 2]


def _utf8(text: str) -> bytes:
    """UTF-8, with lone surrogates (read from "\\ud800" escapes) written as escapes again."""
    return text.encode("utf-8", "backslashreplace")


def _counted(write: Callable[[Any], object], progress: Progress) -> Callable[[Any], object]:
    """``write``, telling ``progress`` of every byte (when it is shown at all)."""
    if not progress.shown:
        return write

    def counted(data: Any) -> object:
        result = write(data)
        progress.advance(data.nbytes if isinstance(data, memoryview) else len(data))
        return result

    return counted


def _dump_external(model: Model, file: Path, progress: Progress, proof: StructureProof, *, flat: bool = False) -> None:
    """Weights first, to a file named after its content; then the document, whose rename
    commits both (see :mod:`trama.format._commit`).

    The weights are written before the text, which names their file: so the model is validated
    first, the careful way, rather than proven as its text is made, so that the weights of an
    invalid model are never written at all (their time dwarfs a validation's anyway)."""
    tensors = {name: entry.value for name, entry in model.parameters.items() if isinstance(entry.value, Tensor)}
    folder = file.parent
    stem = _commit.weights_stem(file.name)
    if not tensors:  # nothing to put beside it: the document alone
        with _temporary(folder, file.name) as temp:
            temp.write(_utf8("".join(_pieces(model, _inline_tensor, proof=proof, flat=flat))))
            proof.finish()
            temp.sync()
            _commit.commit_document(file, temp)
        return
    proof.settle()
    with _temporary(folder, f"{stem}.safetensors") as weights_temp:
        written = write_safetensors(_counted(weights_temp.write, progress), tensors, document=file.name)
        weights_temp.sync()
        name = f"{stem}.{written.content_id}.safetensors"
        _loadable_reference(name, file)

        def reference(key: str, tensor: Tensor) -> dict[str, Any]:
            return external_reference(name, key, tensor, written.checksums)

        text = "".join(_pieces(model, reference, weights=name, flat=flat))
        with _temporary(folder, file.name) as temp:
            temp.write(_utf8(text))
            temp.sync()
            _commit.commit_document(file, temp, (weights_temp, name))


def _loadable_reference(name: str, file: Path) -> None:
    """Refuse, before anything is replaced, to commit a document whose reference to its weights
    file ``name`` a reader would refuse (:func:`~trama.format._commit.weights_stem` makes sure it
    never is: this is the reader's own check, so that the two cannot drift apart)."""
    try:
        check_reference({"path": name, "key": "", "checksum": ""}, "/")
    except WeightsFileError as exc:
        raise WriteError(
            f"cannot write {str(file)!a} with external weights: its weights file would be named "
            f"{name!a}, which a reader refuses ({exc.message})"
        ) from None


@contextmanager
def _temporary(folder: Path, target: str) -> Iterator[_commit.TempFile]:
    """A locked temporary file for ``target`` in ``folder``, removed unless it was renamed."""
    temp = _commit.TempFile(folder, target)
    try:
        yield temp
    finally:
        if not temp.handle.closed:  # not renamed into place (renaming closes it)
            temp.discard()


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A temporary file beside ``path``; on success it is synced and moved over ``path``. On
    failure it is removed and ``path`` is untouched. A failure to write is a
    :class:`~trama.errors.WriteError`."""
    path = Path(path)
    with _commit.write_errors(path):
        _commit.check_target(path)
        with _temporary(path.parent, path.name) as temp:
            yield temp.handle
            temp.sync()
            _commit.replace_file(path, temp)
