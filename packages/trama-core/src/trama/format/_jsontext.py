"""JSON text in: strict parsing with precise errors (the layout of what trama writes is
:mod:`trama.format._layout`).

Parsing is the standard library's C scanner plus three guards it lacks on its own: a repeated
key in one object is an error (JSON leaves it undefined, and a silent "last one wins" hides
edits), ``NaN``/``Infinity`` are refused (not JSON), and too-deep nesting is reported instead of
crashing. Long base64 runs in ``"data"`` fields are cut out of the text before parsing, so that
the parser never copies them and tensors decode lazily. Only a run of base64 characters is cut
out: anything else (a raw newline, a NUL, a byte that is not UTF-8) stays in the text, so that
the JSON parser refuses it where it is, exactly as in a short string.

**Large files are read, never mapped.** A document in memory keeps its runs as views of its
(immutable) bytes. A large file (:class:`DocumentFile`) is read once with ordinary positional
reads, a block at a time, and the text around the runs is kept. Each run is then either

* decoded as it is read (``decode``, what ``trama.load`` does by default), a few hundred
  kilobytes at a time, into an array of its own (a :class:`DecodedRun`): the file is read once,
  each block of text decoded while it is in the CPU's cache, and later changes to the file
  change nothing; a run that is not plain base64 is left in the file instead, as below; or
* checked and recorded as a :class:`TextRun` (its place in the file and the xxh3 of its text)
  and left in the file, for a reader that wants the structure only. A tensor reads its run
  again on first use, a megabyte at a time, straight into an array of its own, and the run
  must still hash to what was read at load. A file truncated or rewritten in place in between
  is therefore a clean :class:`~trama.errors.TensorDataError` at first use, never a SIGBUS
  (which a memory map gives when a vanished page is touched) and never silently other values;
  after first use the values are the reader's own.

Either way the peak memory of loading and using every tensor is the weights themselves plus a
few blocks.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import re
import secrets
import weakref
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from typing import Any, TypeAlias

import pybase64
import xxhash

from trama.errors import JSONError, TensorDataError, TramaError
from trama.format._files import read_at, read_into
from trama.format._progress import Progress
from trama.format._stack import nested_room

__all__ = [
    "BASE64_PATTERN",
    "BLOB_MIN_LENGTH",
    "Blob",
    "DocumentFile",
    "LiftedText",
    "ParsedText",
    "TextRun",
    "gc_paused",
    "lift_text",
    "parse_json",
]

#: Base64 runs at least this long are lifted out of the text before parsing.
BLOB_MIN_LENGTH = 1024
#: A candidate run in memory is checked this many characters at a time (a multiple of 4).
_CHECK_CHUNK = 1 << 16
#: A run in a large file is read, at load and again on first use, this many bytes at a time
#: (a multiple of 4, so that each piece decodes on its own).
READ_BLOCK = 1 << 20
#: A run decoded as it is read (:meth:`_FileScan.stream_decoded`) is read this many bytes at a
#: time (a multiple of 4, at most :data:`READ_BLOCK`): the text and its bytes stay in the CPU's
#: cache between the read, the decoding and the copy into the tensor's array. On a 2-CPU Xeon
#: VM, loading a 268 MB model took 0.20-0.23 s with 256 KiB steps and 0.22-0.40 s with 1 MiB.
DECODE_STEP = 1 << 18
#: The text between runs is read this many bytes at a time: small, because the block read
#: after a run is mostly the next run, which is read on its own.
SCAN_STEP = 1 << 16
#: The schema's pattern for a tensor's ``data``; :attr:`TextRun.well_formed` answers it for a run.
BASE64_PATTERN = "^[A-Za-z0-9+/]*={0,2}$"
_BASE64_TEXT = re.compile(rb"[A-Za-z0-9+/]*={0,2}\Z")
_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_SPACES = re.compile(rb"[ \t\r\n]*")
_BOM = b"\xef\xbb\xbf"

_WHITESPACE = b" \t\r\n"


class DocumentFile:
    """A document's open regular file, read with positional reads (never mapped).

    It owns the descriptor ``fd`` and closes it when the last :class:`TextRun` of it is gone,
    which is when every tensor lifted from it was decoded, or its model was dropped. ``size``
    is the size the file had when opened: nothing past it is read, so a file that keeps growing
    cannot make a reader read forever. ``name`` names the file in messages."""

    __slots__ = ("__weakref__", "fd", "name", "size")

    def __init__(self, fd: int, size: int, name: str) -> None:
        self.fd = fd
        self.size = size
        self.name = name
        weakref.finalize(self, os.close, fd)

    def read(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer where the file ends; raises ``OSError``)."""
        return read_at(self.fd, size, offset)

    def read_into(self, buffer: memoryview, offset: int) -> int:
        """Fill ``buffer`` from ``offset`` as far as the file goes; the number of bytes read."""
        done = 0
        while done < len(buffer):
            got = read_into(self.fd, buffer[done:], offset + done)
            if got == 0:
                break
            done += got
        return done

    def read_all(self) -> bytes:
        """The whole file as it is now, up to its size at opening (to locate a syntax error)."""
        pieces = []
        offset = 0
        while offset < self.size:
            piece = self.read(min(SCAN_STEP << 4, self.size - offset), offset)
            if not piece:
                break
            pieces.append(piece)
            offset += len(piece)
        return b"".join(pieces)


class TextRun:
    """A long base64 ``data`` string left in a :class:`DocumentFile`: where it is, and what it
    was when the document was loaded (the xxh3 of its text).

    ``len()`` is its length in characters. :meth:`chunks` reads it again for decoding, and the
    reader learns there whether the file still holds the same text. ``well_formed`` says
    whether the text matches :data:`BASE64_PATTERN` (padding only at the end), which the scan
    found out for the schema's sake."""

    __slots__ = ("digest", "file", "length", "offset", "well_formed")

    def __init__(self, file: DocumentFile, offset: int, length: int, digest: int, well_formed: bool) -> None:
        self.file = file
        self.offset = offset
        self.length = length
        self.digest = digest
        self.well_formed = well_formed

    def __len__(self) -> int:
        return self.length

    def __bytes__(self) -> bytes:
        return b"".join(bytes(piece) for piece in self.chunks(READ_BLOCK, None))

    def chunks(self, size: int, location: str | None) -> Iterator[memoryview]:
        """The text, ``size`` characters at a time (a multiple of 4, so that each piece decodes
        on its own), each piece a view of one buffer that the next piece overwrites. Having
        handed out the last piece, it raises :class:`~trama.errors.TensorDataError` (at
        ``location``) when the text is not the one read at load: a caller consumes every piece
        before it trusts any."""
        hasher = xxhash.xxh3_64()
        offset, end = self.offset, self.offset + self.length
        with memoryview(bytearray(min(size, self.length))) as buffer:
            while offset < end:
                want = min(size, end - offset)
                with buffer[:want] as piece:
                    try:
                        got = self.file.read_into(piece, offset)
                    except OSError as exc:
                        raise TensorDataError(
                            f"cannot read the document file {self.file.name!r}: {exc.strerror or exc}",
                            location=location,
                        ) from None
                    if got < want:
                        raise TensorDataError(
                            f"the document file {self.file.name!r} ends before this tensor's data does: it "
                            "was truncated after the document was loaded",
                            location=location,
                        )
                    hasher.update(piece)
                    yield piece
                offset += want
        if hasher.intdigest() != self.digest:
            raise TensorDataError(self._changed(), location=location)

    def verify(self, location: str | None) -> None:
        """Raise :class:`~trama.errors.TensorDataError` unless the file still holds the text
        read at load: for a decoder that found bad base64, to tell a file changed under it
        from one that was bad all along."""
        for _ in self.chunks(READ_BLOCK, location):
            pass

    def _changed(self) -> str:
        return (
            f"this tensor's data in the document file {self.file.name!r} changed after the document was "
            "loaded (the file was rewritten in place)"
        )


class DecodedRun:
    """A long base64 ``data`` string of a large file, decoded while the file was read: its bytes
    (``data``, a read-only ``numpy.uint8`` array of their own) and the length of its text.

    Only a run whose every character is base64 and whose padding, if any, ends it is decoded
    at load (``well_formed`` is therefore always true); any other run is a :class:`TextRun`,
    judged when its tensor is used, as a string in a small document would be.

    ``hashed`` is ``(dtype, shape, hasher)`` when the text just before the run gave the
    tensor's dtype and shape (``"dtype": ..., "shape": [...], "data": ...``, as trama writes a
    tensor): the hasher a :data:`Hashers` made for them, fed the bytes while they were in the
    CPU's cache. The tensor's checksum is then compared with its digest, if the dtype and shape
    parsed are those; otherwise the bytes are hashed when the tensor is used."""

    __slots__ = ("data", "hashed", "length")

    well_formed = True

    def __init__(self, data: Any, length: int, hashed: Hashed | None = None) -> None:
        self.data = data
        self.length = length
        self.hashed = hashed

    def __len__(self) -> int:
        return self.length

    def __bytes__(self) -> bytes:
        """The base64 text again (for a schema pattern other than base64's: rare)."""
        return bytes(pybase64.b64encode(memoryview(self.data)))


#: Makes the hasher of a tensor's checksum for its dtype name and shape (``update``,
#: ``hexdigest``): :func:`trama.format._tensor.checksum_hasher`, given by the reader.
Hashers: TypeAlias = Callable[[str, tuple[int, ...]], Any]

#: A :class:`DecodedRun`'s guess of its tensor's dtype and shape, and the hasher fed its bytes.
Hashed: TypeAlias = tuple[str, tuple[int, ...], Any]

#: What a placeholder stands for: a view of a document in memory, a copy, a run left in a
#: file, or a run decoded while its file was read.
Blob: TypeAlias = memoryview | bytes | TextRun | DecodedRun


class ParsedText:
    """Parsed JSON data plus the base64 runs lifted out of it, by placeholder string."""

    __slots__ = ("blobs", "data")

    def __init__(self, data: Any, blobs: dict[str, Blob]) -> None:
        self.data = data
        self.blobs = blobs


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """A JSON number; one too large for a double (``1e400``) would silently become infinity."""
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError(f"the number {text} is out of range")
    return value


_INF = float("inf")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while a document is parsed and decoded.

    Loading builds hundreds of thousands of small containers and no cycles. The collector,
    triggered by allocation counts, would rescan them again and again; and once re-enabled, its
    next young-generation pass would scan all of them at once (0.16 s for a 100,000-node graph).
    So on the way out everything young is moved straight to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``), which costs nothing and only defers when other
    young garbage gets collected. Programs that froze objects themselves keep their freeze: the
    move is skipped for them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class LiftedText:
    """A document's text ready to parse: long base64 runs replaced by placeholders (``text``,
    UTF-8 bytes, the BOM dropped), the runs by placeholder (``blobs``), and where the text came
    from (``source``), to locate a syntax error in the original."""

    __slots__ = ("blobs", "source", "text")

    def __init__(
        self, text: bytes | bytearray | mmap.mmap, blobs: dict[str, Blob], source: bytes | mmap.mmap | DocumentFile
    ) -> None:
        self.text = text
        self.blobs = blobs
        self.source = source


def lift_text(
    data: bytes | str | mmap.mmap | DocumentFile,
    progress: Progress | None = None,
    *,
    decode: bool = False,
    hashers: Hashers | None = None,
) -> LiftedText:
    """Prepare a document's text for a parser: the first step of :func:`parse_json`.

    ``data`` may be an open :class:`DocumentFile`: it is read a block at a time, ``progress``
    told of each block. Its tensors' base64 stays in the file (see the module's notes), unless
    ``decode``: then each run that is plain base64 is decoded as it is read, into memory of its
    own (a :class:`DecodedRun`, hashed by ``hashers`` where it can be), and the file is read
    once. A memory-mapped file is accepted
    too, but its runs are copied out: a view of a mapping would be at the file's mercy.
    """
    text: bytes | bytearray | mmap.mmap
    blobs: dict[str, Blob]
    if isinstance(data, DocumentFile):
        try:
            text, blobs = _FileScan(data, progress, decode=decode, hashers=hashers).lift()
        except OSError as exc:
            raise TramaError(f"cannot read {data.name!r}: {exc.strerror or exc}") from None
        return LiftedText(text, blobs, data)
    raw: bytes | mmap.mmap
    if isinstance(data, str):
        # A str may hold lone surrogates (from a "\ud800" escape): they go back to being escapes.
        raw = data.encode("utf-8", "backslashreplace")
    elif isinstance(data, mmap.mmap):
        raw = data
    else:
        raw = bytes(data)
    if raw[:3] == _BOM:
        raw = raw[3:]
    text, blobs = _lift_blobs(raw)
    return LiftedText(text, blobs, raw)


def parse_json(data: bytes | str | mmap.mmap | DocumentFile | LiftedText) -> ParsedText:
    """Parse a document's text; raise :class:`JSONError` with line and column on any problem.

    ``data`` is the text (see :func:`lift_text`), or what :func:`lift_text` made of it.
    """
    with nested_room():  # a nested (1.3) document of the deepest tree allowed is ~1,030 levels of JSON
        return _parse_json(data)


def _parse_json(data: bytes | str | mmap.mmap | DocumentFile | LiftedText) -> ParsedText:
    lifted = data if isinstance(data, LiftedText) else lift_text(data)
    try:
        with gc_paused():
            # Decode here rather than in json.loads, which would also accept UTF-16 and UTF-32.
            return ParsedText(
                json.loads(
                    str(lifted.text, "utf-8"),
                    object_pairs_hook=_unique_pairs,
                    parse_constant=_reject_constant,
                    parse_float=_finite_float,
                ),
                lifted.blobs,
            )
    except (json.JSONDecodeError, _DuplicateKey, ValueError, UnicodeDecodeError, RecursionError):
        pass  # locate the problem in the original text, below (slow, but only for bad files)
    source = lifted.source
    if isinstance(source, DocumentFile):
        try:
            whole = source.read_all()
        except OSError as exc:
            raise TramaError(f"cannot read {source.name!r}: {exc.strerror or exc}") from None
        _raise_located(whole[3:] if whole[:3] == _BOM else whole)
    else:
        _raise_located(bytes(source))
    raise JSONError("the text could not be parsed as JSON", line=1, column=1)  # pragma: no cover


def _lift_blobs(raw: bytes | mmap.mmap) -> tuple[bytes | mmap.mmap, dict[str, Blob]]:
    """Replace long ``"data": "<base64>"`` strings by short placeholders.

    A candidate must be the key ``"data"`` right after ``{`` or ``,`` (so it cannot be inside a
    string), and its value must be base64 characters in whole groups of four and nothing else (so
    the end quote is the real one, and the JSON parser would have accepted every byte of it). The replacement is
    itself a valid JSON string, so the text stays valid exactly when it was; a string that is
    not base64 is left where it is, for the parser to judge. Runs of bytes in memory are kept
    as views; runs of a mapped file are copied (:func:`parse_json` says why).
    """
    if len(raw) < BLOB_MIN_LENGTH or raw.find(b'"data"') < 0:
        return raw, {}
    view = memoryview(raw)
    copy = isinstance(raw, mmap.mmap)
    nonce = secrets.token_hex(8)
    blobs: dict[str, Blob] = {}
    pieces: list[bytes | memoryview] = []
    done = 0
    at = raw.find(b'"data"')
    while at >= 0:
        start = _value_start(raw, at, 0, final=True)
        if start is not None:
            end = raw.find(b'"', start)
            if end - start >= BLOB_MIN_LENGTH and _is_base64(view[start:end]):
                placeholder = f"\x00{nonce}:{len(blobs)}"
                blobs[placeholder] = bytes(view[start:end]) if copy else view[start:end]
                pieces.append(view[done:start])
                pieces.append(f"\\u0000{nonce}:{len(blobs) - 1}".encode())
                done = end
                at = end
        at = raw.find(b'"data"', at + 1)
    if not blobs:
        return raw, {}
    pieces.append(view[done:])
    return b"".join(pieces), blobs


def _is_base64(run: memoryview) -> bool:
    """Whether ``run`` holds only base64 characters (``A-Za-z0-9+/`` and ``=`` padding), so that
    the JSON parser would accept it as a string. Checked a chunk at a time (:func:`_judge_run`),
    holding no more than a chunk. The full base64 rules (padding only at the very end) are
    checked, as for any tensor, when the tensor is decoded."""
    size = len(run)
    if size % 4:
        return False
    return all(_judge_run(run[begin : begin + _CHECK_CHUNK]) != _NOT_BASE64 for begin in range(0, size, _CHECK_CHUNK))


def _skip_spaces(raw: bytes | bytearray | mmap.mmap, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    match = _SPACES.match(raw, pos)
    return pos if match is None else match.end()


#: :func:`_value_start`'s answer when the text it was given ends before it can tell.
_MORE = -1


def _value_start(raw: bytes | bytearray | mmap.mmap, at: int, previous: int, *, final: bool) -> int | None:
    """If ``"data"`` at ``at`` is an object key followed by a string, where the string starts.

    ``previous`` is the last byte other than whitespace before ``raw`` (0 for none). Where
    ``raw`` ends before the answer is known, :data:`_MORE` unless ``final`` (nothing follows)."""
    before = at - 1
    while before >= 0 and raw[before] in _WHITESPACE:
        before -= 1
    if (raw[before] if before >= 0 else previous) not in b"{,":
        return None
    pos = _skip_spaces(raw, at + 6)
    if pos >= len(raw):
        return None if final else _MORE
    if raw[pos] != ord(":"):
        return None
    pos = _skip_spaces(raw, pos + 1)
    if pos >= len(raw):
        return None if final else _MORE
    if raw[pos] != ord('"'):
        return None
    return pos + 1


#: :func:`_judge_run`'s verdicts on a piece of a candidate run.
_NOT_BASE64, _MISPLACED_PADDING, _BASE64 = 0, 1, 2


def _judge_run(piece: memoryview) -> int:
    """Whether ``piece`` (whole 4-character groups of a candidate run) holds base64 characters
    only, and whether, read on its own, its padding is where :data:`BASE64_PATTERN` allows it
    (at the end). Decoding is the fastest check at hand (over 10 GB/s), and what it accepts
    has its padding at the end; only a piece it refuses is looked at more closely."""
    try:
        pybase64.b64decode(piece, validate=True)
    except ValueError:  # binascii.Error
        text = bytes(piece)
        if text.translate(None, _BASE64_ALPHABET):
            return _NOT_BASE64
        return _BASE64 if _BASE64_TEXT.match(text) else _MISPLACED_PADDING
    return _BASE64


class _FileScan:
    """One pass over a :class:`DocumentFile`, lifting its runs as :func:`_lift_blobs` does text
    in memory, with the same rules, reading a block at a time.

    The text is looked at through a window, a ``bytearray`` of the bytes not yet judged, that
    slides over the file; a run is read on from the file past the window and left there. Its
    text is hashed as it goes by, and the scan carries on after its closing quote."""

    def __init__(
        self,
        file: DocumentFile,
        progress: Progress | None = None,
        *,
        decode: bool = False,
        hashers: Hashers | None = None,
    ) -> None:
        self.file = file
        self.progress = progress  # told of every byte read
        self.decode = decode  # decode runs as they are read (DecodedRun), or leave them (TextRun)
        self.hashers = hashers
        self.window = bytearray()
        self.base = 0  # the file offset of window[0]
        self.emitted = 0  # window[:emitted] is in the text already
        self.previous = 0  # the last byte other than whitespace before the window (0: none)
        self.final = False  # the window reaches the end of what will be read
        # The text with its runs cut out, grown in place: one buffer, never joined from pieces
        # (which held the text twice at the end, in fresh memory).
        self.text = bytearray()
        self.nonce = secrets.token_hex(8)
        self.blobs: dict[str, Blob] = {}
        self.buffer: bytearray | None = None  # for reading runs, made on first need

    def lift(self) -> tuple[bytearray, dict[str, Blob]]:
        self.fill()
        pos = 0
        if self.window[:3] == _BOM:
            self.emitted = pos = 3
        while True:
            at = self.window.find(b'"data"', pos)
            if at < 0:
                if self.final:
                    break
                cut = max(pos, len(self.window) - 5)  # a "data" may begin in the last 5 bytes
                self.slide(cut)
                pos = 0
                self.fill()
                continue
            start = _value_start(self.window, at, self.previous, final=self.final)
            if start == _MORE:
                self.slide(at)
                pos = 0
                self.fill()
                continue
            run = None if start is None else self.take_run(start, at)
            if run is None:
                pos = at + 1
                continue
            assert start is not None
            self.text += self.window[self.emitted : start]
            self.text += f"\\u0000{self.nonce}:{len(self.blobs)}".encode()
            self.blobs[f"\x00{self.nonce}:{len(self.blobs)}"] = run
            end = start + run.length  # the closing quote, in the window or past it
            if end < len(self.window):
                self.emitted = pos = end
            else:
                self.window = bytearray()
                self.base += end
                self.emitted = pos = 0
                self.previous = ord("A")  # the run's last character
                self.final = False
                self.fill()
        self.slide(len(self.window))
        return self.text, self.blobs

    def fill(self) -> None:
        """Read on past the window: a step, or as much as the window holds (so that a window
        that must grow, over a long stretch of whitespace, is read in linear time)."""
        end = self.base + len(self.window)
        want = min(max(SCAN_STEP, len(self.window)), self.file.size - end)
        block = self.file.read(want, end) if want > 0 else b""
        if self.progress is not None:
            self.progress.advance(len(block))
        self.window += block
        if len(block) < want or end + len(block) >= self.file.size:
            self.final = True  # the end, or a file truncated while being read: the text ends here

    def slide(self, cut: int) -> None:
        """Let go of ``window[:cut]``, its text (past what is in already) joining the text."""
        window = self.window
        if cut > self.emitted:
            self.text += window[self.emitted : cut]
        if cut:
            last = window[cut - 1]
            if last in _WHITESPACE:
                kept = window[:cut].rstrip(_WHITESPACE)
                last = kept[-1] if kept else self.previous
            self.previous = last
        del window[:cut]
        self.base += cut
        self.emitted = max(0, self.emitted - cut)

    def take_run(self, start: int, key: int) -> TextRun | DecodedRun | None:
        """The run that starts at ``window[start]`` (its key ``"data"`` at ``window[key]``), if
        it is one to lift, else ``None``. The dtype and shape before the key are looked for only
        for a run that is decoded."""
        end = self.window.find(b'"', start)
        if end < 0:
            if self.final:
                return None
            if self.decode:
                return self.stream_decoded(self.base + start, self.hasher(key))
            return self.stream_run(self.base + start)
        length = end - start
        if length < BLOB_MIN_LENGTH or length % 4:
            return None
        with memoryview(self.window) as view, view[start:end] as piece:
            if self.decode:
                raw = _decoded(piece)
                if raw is not None:
                    import numpy as np

                    hasher = self.hasher(key)
                    if hasher is not None:
                        hasher[2].update(raw)
                    return DecodedRun(np.frombuffer(raw, dtype=np.uint8), length, hasher)
            verdict = _judge_run(piece)
            if verdict == _NOT_BASE64:
                return None
            digest = xxhash.xxh3_64_intdigest(piece)
        return TextRun(self.file, self.base + start, length, digest, verdict == _BASE64)

    def run_pieces(self, offset: int, step: int) -> Generator[tuple[memoryview, bool], None, None]:
        """The text of the run that starts at ``offset``, read from the file ``step`` bytes at a
        time (a multiple of 4: whole 4-character groups of it) into one buffer: each piece, a
        view that the next one overwrites, and whether it is the last (its closing quote comes
        next). Where the file ends before the closing quote, no last piece comes."""
        size = self.file.size
        if self.buffer is None:
            self.buffer = bytearray(READ_BLOCK)
        block = self.buffer
        read = 0
        while True:
            want = min(step, size - offset - read)
            with memoryview(block) as whole, whole[: max(want, 0)] as room:
                got = self.file.read_into(room, offset + read) if want > 0 else 0
            if self.progress is not None:
                self.progress.advance(got)
            if not got:
                return  # no closing quote: the parser reports the unterminated string
            quote = block.find(b'"', 0, got)
            last = quote >= 0
            with memoryview(block) as whole, whole[: quote if last else got] as piece:
                yield piece, last
            if last:
                return
            read += got

    def stream_run(self, offset: int) -> TextRun | None:
        """A run that goes on past the window, read from the file a block at a time from
        ``offset``, or ``None``."""
        hasher = xxhash.xxh3_64()
        length = 0
        well_formed = True
        padded = False  # a piece so far ended with padding: nothing may follow it
        with closing(self.run_pieces(offset, READ_BLOCK)) as pieces:
            for piece, last in pieces:
                length += len(piece)
                if (length < BLOB_MIN_LENGTH or length % 4) if last else len(piece) % 4:
                    return None
                verdict = _judge_run(piece)
                if verdict == _NOT_BASE64:
                    return None
                if piece:
                    well_formed = well_formed and verdict == _BASE64 and not padded
                    padded = piece[-1] == ord("=")
                hasher.update(piece)
                if last:
                    return TextRun(self.file, offset, length, hasher.intdigest(), well_formed)
        return None

    def hasher(self, key: int) -> Hashed | None:
        """``(dtype, shape, hasher)`` for the tensor whose ``"data"`` key is at ``window[key]``,
        when the window's text just before it gives its dtype and shape; else ``None``."""
        if self.hashers is None:
            return None
        found = _DTYPE_AND_SHAPE.search(self.window, max(0, key - 640), key)
        if found is None:
            return None
        dtype = "float32" if found[1] is None else found[1].decode("ascii")
        shape = tuple(int(dim) for dim in found[2].split(b",") if dim.strip())
        return dtype, shape, self.hashers(dtype, shape)

    def stream_decoded(self, offset: int, hasher: Hashed | None) -> TextRun | DecodedRun | None:
        """:meth:`stream_run`, decoding the run as it is read (:data:`DECODE_STEP` at a time)
        into an array of its own. A run that is not plain base64, padding only at its end, is
        read again by :meth:`stream_run` and left in the file, to be judged where its tensor is
        used.

        The array is reserved for the most the rest of the file could decode to (capped at
        :data:`_RESERVE` and grown past it): memory the kernel backs only where written, so
        only the run's bytes become resident, and the reservation is shrunk to them at the end
        without a copy (``ndarray.resize``: ``realloc``, which moves no pages on Linux)."""
        import numpy as np

        out = _reserve(min((self.file.size - offset) * 3 // 4, _RESERVE))
        done = length = 0
        with closing(self.run_pieces(offset, DECODE_STEP)) as pieces:
            for piece, last in pieces:
                length += len(piece)
                if (length < BLOB_MIN_LENGTH or length % 4) if last else len(piece) % 4:
                    return None
                raw = _decoded(piece)
                if raw is None or (not last and len(raw) * 4 != len(piece) * 3):  # not base64, or padded inside
                    break
                if done + len(raw) > out.size:
                    out.resize(max(2 * out.size, done + len(raw)), refcheck=False)
                out[done : done + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
                if hasher is not None:
                    hasher[2].update(raw)
                done += len(raw)
                del raw
                if last:
                    out.resize(done, refcheck=False)
                    out.flags.writeable = False
                    return DecodedRun(out, length, hasher)
            else:
                return None  # the file ended before the closing quote
        progress, self.progress = self.progress, None  # its bytes were counted once already
        try:
            return self.stream_run(offset)
        finally:
            self.progress = progress


#: The text trama writes before a tensor's ``"data"``: its dtype and shape, the dtype left out
#: for float32 in format 1.3 (the rest of the tensor object is parsed as JSON later; this only
#: guesses, to hash the bytes as they come, and a wrong guess is only a second hash on first use).
_DTYPE_AND_SHAPE = re.compile(
    rb'(?:"dtype"[ \t\r\n]*:[ \t\r\n]*"([a-z0-9_]{1,24})"[ \t\r\n]*,[ \t\r\n]*)?'
    rb'"shape"[ \t\r\n]*:[ \t\r\n]*\[((?:[ \t\r\n]*[0-9]{1,19}[ \t\r\n]*,){0,63}[ \t\r\n]*(?:[0-9]{1,19})?[ \t\r\n]*)\]'
    rb"[ \t\r\n]*,[ \t\r\n]*\Z"
)

#: The most memory a run being decoded reserves before it knows its length (it grows past it).
_RESERVE = 1 << 30


def _reserve(size: int) -> Any:
    """A new uint8 array of ``size`` bytes (:func:`numpy.empty`, so that a large one gets
    numpy's huge pages), or a small one to grow where the system refuses to promise so much."""
    import numpy as np

    try:
        return np.empty(size, dtype=np.uint8)
    except MemoryError:
        return np.empty(min(size, READ_BLOCK), dtype=np.uint8)


def _decoded(piece: memoryview) -> bytes | None:
    """The bytes of ``piece`` (whole 4-character groups of a run) when it is base64 whose
    padding, if any, ends it; else ``None``."""
    try:
        return pybase64.b64decode(piece, validate=True)
    except ValueError:  # binascii.Error
        return None


def _line_column(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _raise_located(raw: bytes) -> None:
    """Parse the original text slowly, tracking positions, and raise a located JSONError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", "replace")
        line, column = _line_column(prefix, len(prefix))
        raise JSONError("the file is not UTF-8 text", line=line, column=column) from None
    decoder = json.JSONDecoder(
        object_pairs_hook=_unique_pairs, parse_constant=_reject_constant, parse_float=_finite_float
    )
    try:
        with gc_paused():
            _parse_with_positions(decoder, text)
    except json.JSONDecodeError as exc:
        raise JSONError(exc.msg, line=exc.lineno, column=exc.colno) from None
    except _Located as exc:
        line, column = _line_column(text, exc.pos)
        raise JSONError(exc.message, line=line, column=column) from None
    except RecursionError:
        raise JSONError("the document is nested too deeply", line=1, column=1) from None
    except ValueError as exc:  # NaN / Infinity outside any object
        match = _NON_JSON_NUMBER.search(text)
        line, column = _line_column(text, match.start() if match else 0)
        raise JSONError(str(exc), line=line, column=column) from None


_NON_JSON_NUMBER = re.compile(r'(?<!["\w])(-?Infinity|NaN)(?!["\w])')


_STDLIB_DECODER: Any = json.decoder


class _Located(Exception):
    def __init__(self, message: str, pos: int) -> None:
        self.message = message
        self.pos = pos


def _parse_with_positions(decoder: json.JSONDecoder, text: str) -> Any:
    """The pure-Python scanner with a hook on every container, so that a duplicate key or a
    refused number (``NaN``, ``1e400``) is reported where it is, not where its object starts."""
    from json import scanner

    json_decoder: Any = _STDLIB_DECODER  # its scanner internals are not in the type stubs

    def located(scan_once: Any) -> Any:
        def scan(string: str, idx: int) -> Any:
            try:
                return scan_once(string, idx)
            except ValueError as exc:
                if isinstance(exc, json.JSONDecodeError):
                    raise
                raise _Located(str(exc), idx) from None

        return scan

    def parse_object(
        state: tuple[str, int],
        strict: bool,
        scan_once: Any,
        object_hook: Any,
        object_pairs_hook: Any,
        memo: Any = None,
        _w: Any = json_decoder.WHITESPACE.match,
        _ws: str = json_decoder.WHITESPACE_STR,
    ) -> Any:
        start = state[1] - 1
        try:
            return json_decoder.JSONObject(
                state, strict, located(scan_once), object_hook, object_pairs_hook, memo, _w, _ws
            )
        except _DuplicateKey as exc:
            position = _second_key_position(state[0], start, exc.key, scan_once)
            raise _Located(f"the key {exc.key!r} appears twice in this object", position) from None

    def parse_array(
        state: tuple[str, int],
        scan_once: Any,
        _w: Any = json_decoder.WHITESPACE.match,
        _ws: str = json_decoder.WHITESPACE_STR,
    ) -> Any:
        return json_decoder.JSONArray(state, located(scan_once), _w, _ws)

    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.parse_array = parse_array  # type: ignore[attr-defined]
    decoder.scan_once = scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    value, end = decoder.raw_decode(text, json_decoder.WHITESPACE.match(text, 0).end())
    end = json_decoder.WHITESPACE.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _second_key_position(text: str, start: int, key: str, scan_once: Any) -> int:
    """Where ``key`` occurs for the second time in the (well-formed) object at ``start``."""
    whitespace = _STDLIB_DECODER.WHITESPACE
    seen = False
    pos = start + 1
    while True:
        pos = whitespace.match(text, pos).end()
        name, end = _STDLIB_DECODER.scanstring(text, pos + 1)
        if name == key:
            if seen:
                return int(pos)
            seen = True
        end = whitespace.match(text, end).end() + 1  # past the colon
        _, end = scan_once(text, whitespace.match(text, end).end())
        pos = whitespace.match(text, end).end() + 1  # past the comma
