"""Reading and writing documents: ``load``/``loads``/``dump``/``dumps``.

Writing is atomic: the new text goes to a temporary file in the same folder, is flushed to disk,
and only then replaces the old file, so a failure at any point leaves the previous good copy in
place. Reading never executes code and never imports anything a document names.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal

from trama.errors import TramaError
from trama.format._codec import decode_document, encode_document
from trama.format._external import external_reference, make_resolver, write_safetensors
from trama.format._files import NotRegularFileError, open_regular
from trama.format._jsontext import format_json, gc_paused, parse_json
from trama.format._model import Model
from trama.format._specs import OpRegistry
from trama.format._tensor import Tensor, base64_length, encode_base64
from trama.format._validation import validate as validate_model

__all__ = ["atomic_file", "dump", "dumps", "load", "loads", "weights_path"]

PathLike = str | os.PathLike[str]

#: Files at least this large are memory-mapped by :func:`load` instead of read.
MMAP_THRESHOLD = 1 << 20


def loads(
    text: str | bytes | mmap.mmap,
    *,
    validate: bool = True,
    registry: OpRegistry | None = None,
    base_dir: PathLike | None = None,
) -> Model:
    """Parse a document from text.

    With ``validate`` (the default) the structural rules are checked, and the registry's rules
    too when one is given. ``base_dir`` is the folder external weights paths are relative to.
    """
    resolver = make_resolver(Path(base_dir)) if base_dir is not None else None
    with gc_paused():
        parsed = parse_json(text)
        model = decode_document(parsed.data, resolve_external=resolver, blobs=parsed.blobs)
        if validate:
            validate_model(model, registry)
    return model


def load(path: PathLike, *, validate: bool = True, registry: OpRegistry | None = None) -> Model:
    """Read a document from a file (tensors decode lazily; external weights are memory-mapped)."""
    file = Path(path)
    try:
        fd, size = open_regular(file)
        with os.fdopen(fd, "rb") as handle:
            # Large files are mapped rather than read: inline base64 is then decoded straight
            # from the page cache, which halves the memory an inline-weights load needs.
            data: bytes | mmap.mmap = (
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                if size and size >= MMAP_THRESHOLD
                else handle.read()
            )
    except NotRegularFileError as exc:
        raise TramaError(f"cannot read {str(file)!r}: it is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise TramaError(f"cannot read {str(file)!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise TramaError(f"cannot read {str(file)!a}: {exc}") from None
    return loads(data, validate=validate, registry=registry, base_dir=file.parent)


def dumps(model: Model) -> str:
    """The document as text, tensors inline as base64."""
    validate_model(model)
    return format_json(encode_document(model, _inline_tensor))


def _inline_tensor(name: str, tensor: Tensor) -> dict[str, Any]:
    return {"dtype": tensor.dtype, "shape": list(tensor.shape), "data": encode_base64(tensor.numpy()).decode("ascii")}


def weights_path(path: PathLike) -> Path:
    """Where ``dump(..., weights="external")`` puts the weights of the document at ``path``:
    ``model.trama.json`` -> ``model.safetensors``."""
    file = Path(path)
    name = file.name
    for suffix in (".trama.json", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return file.with_name(name[: -len(suffix)] + ".safetensors")
    return file.with_name(name + ".safetensors")


def dump(model: Model, path: PathLike, *, weights: Literal["inline", "external"] = "inline") -> None:
    """Write a document to ``path``, atomically.

    ``weights="inline"`` (the default) keeps the file self-contained, tensors as base64.
    ``weights="external"`` writes tensors to :func:`weights_path` (safetensors) and references
    them by relative path, key and checksum.
    """
    validate_model(model)
    file = Path(path)
    if weights == "inline":
        with atomic_file(file) as handle:
            _write_inline(model, handle)
    elif weights == "external":
        _dump_external(model, file)
    else:
        raise ValueError(f"weights must be 'inline' or 'external', got {weights!r}")


def _write_inline(model: Model, handle: BinaryIO) -> None:
    """Write the text with each tensor's base64 streamed in place of a placeholder, so the
    whole encoded document never sits in memory at once."""
    nonce = secrets.token_hex(8)
    tensors: list[Tensor] = []

    def placeholder(name: str, tensor: Tensor) -> dict[str, Any]:
        tensors.append(tensor)
        return {"dtype": tensor.dtype, "shape": list(tensor.shape), "data": f"\x00{nonce}:{len(tensors) - 1}"}

    marker = f"\\u0000{nonce}:"
    pattern = re.compile(rf"\\u0000{nonce}:([0-9]+)")

    def width(compact: str) -> int:  # lay the text out as dumps() would, with the real base64
        if marker not in compact:
            return len(compact)
        return len(compact) + sum(
            base64_length(tensors[int(k)].nbytes) - len(f"\\u0000{nonce}:{k}") for k in pattern.findall(compact)
        )

    text = format_json(encode_document(model, placeholder), width=width)
    parts = pattern.split(text)
    handle.write(_utf8(parts[0]))
    for k in range(1, len(parts), 2):
        handle.write(encode_base64(tensors[int(parts[k])].numpy()))
        handle.write(_utf8(parts[k + 1]))


def _utf8(text: str) -> bytes:
    """UTF-8, with lone surrogates (read from "\\ud800" escapes) written as escapes again."""
    return text.encode("utf-8", "backslashreplace")


def _dump_external(model: Model, file: Path) -> None:
    target = weights_path(file)
    arrays = {name: entry.value.numpy() for name, entry in model.parameters.items() if isinstance(entry.value, Tensor)}
    sums: dict[str, str] = {}
    with atomic_file(target, commit=False) as weights_handle:
        sums.update(write_safetensors(weights_handle, arrays))
    weights_tmp = Path(weights_handle.name)
    try:
        relative = target.name

        def reference(name: str, tensor: Tensor) -> dict[str, Any]:
            return external_reference(relative, name, tensor, sums)

        text = format_json(encode_document(model, reference))
        with atomic_file(file, commit=False) as doc_handle:
            doc_handle.write(_utf8(text))
        # Both files are complete on disk; swap them in, weights first. A reader that catches
        # the instant between the two sees the old document with new weights, which the
        # checksums turn into a clear error rather than wrong numbers.
        os.replace(weights_tmp, target)
        os.replace(doc_handle.name, file)
    except BaseException:
        weights_tmp.unlink(missing_ok=True)
        Path(getattr(locals().get("doc_handle"), "name", weights_tmp)).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_file(path: Path, *, commit: bool = True) -> Iterator[BinaryIO]:
    """A temporary file beside ``path``; on success it is synced and (if ``commit``) moved
    over ``path``. On failure it is removed and ``path`` is untouched."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        handle = open(tmp, "xb")  # noqa: SIM115 - closed below, after the sync
    except OSError as exc:
        raise TramaError(f"cannot write beside {str(path)!r}: {exc.strerror}") from None
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if commit:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
