"""JSON text in and out: strict parsing with precise errors, and a diff-friendly layout.

Parsing is the standard library's C scanner plus three guards it lacks on its own: a repeated
key in one object is an error (JSON leaves it undefined, and a silent "last one wins" hides
edits), ``NaN``/``Infinity`` are refused (not JSON), and too-deep nesting is reported instead of
crashing. Long base64 runs in ``"data"`` fields are cut out of the text before parsing and kept
as zero-copy views of the input, which halves the peak memory of loading an inline-weights file
and lets tensors decode lazily straight from the file's bytes. Only a run of base64 characters
is cut out: anything else (a raw newline, a NUL, a byte that is not UTF-8) stays in the text, so
that the JSON parser refuses it where it is, exactly as in a short string.
"""

from __future__ import annotations

import gc
import json
import mmap
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pybase64

from trama.errors import JSONError

__all__ = ["BLOB_MIN_LENGTH", "ParsedText", "format_json", "gc_paused", "parse_json"]

#: Base64 runs at least this long are lifted out of the text before parsing.
BLOB_MIN_LENGTH = 1024
#: A candidate run is checked this many characters at a time (a multiple of 4).
_CHECK_CHUNK = 1 << 16
#: Containers whose one-line form fits in this many columns are written on one line.
LINE_WIDTH = 100

_WHITESPACE = b" \t\r\n"


class ParsedText:
    """Parsed JSON data plus the base64 runs lifted out of it, by placeholder string."""

    __slots__ = ("blobs", "data")

    def __init__(self, data: Any, blobs: dict[str, memoryview]) -> None:
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


def parse_json(data: bytes | str | mmap.mmap) -> ParsedText:
    """Parse a document's text; raise :class:`JSONError` with line and column on any problem.

    ``data`` may be a memory-mapped file: tensors' base64 then stays in the page cache, viewed
    in place, instead of being copied into the process.
    """
    raw: bytes | mmap.mmap
    if isinstance(data, str):
        # A str may hold lone surrogates (from a "\ud800" escape): they go back to being escapes.
        raw = data.encode("utf-8", "backslashreplace")
    elif isinstance(data, mmap.mmap):
        raw = data
    else:
        raw = bytes(data)
    if raw[:3] == b"\xef\xbb\xbf":
        raw = raw[3:]
    text, blobs = _lift_blobs(raw)
    try:
        with gc_paused():
            # Decode here rather than in json.loads, which would also accept UTF-16 and UTF-32.
            return ParsedText(
                json.loads(
                    str(text, "utf-8"),
                    object_pairs_hook=_unique_pairs,
                    parse_constant=_reject_constant,
                    parse_float=_finite_float,
                ),
                blobs,
            )
    except (json.JSONDecodeError, _DuplicateKey, ValueError, UnicodeDecodeError, RecursionError):
        pass  # locate the problem in the original text, below (slow, but only for bad files)
    _raise_located(bytes(raw))
    raise JSONError("the text could not be parsed as JSON", line=1, column=1)  # pragma: no cover


def _lift_blobs(raw: bytes | mmap.mmap) -> tuple[bytes | mmap.mmap, dict[str, memoryview]]:
    """Replace long ``"data": "<base64>"`` strings by short placeholders.

    A candidate must be the key ``"data"`` right after ``{`` or ``,`` (so it cannot be inside a
    string), and its value must be base64 characters in whole groups of four and nothing else (so
    the end quote is the real one, and the JSON parser would have accepted every byte of it). The replacement is
    itself a valid JSON string, so the text stays valid exactly when it was; a string that is
    not base64 is left where it is, for the parser to judge.
    """
    if len(raw) < BLOB_MIN_LENGTH or raw.find(b'"data"') < 0:
        return raw, {}
    view = memoryview(raw)
    nonce = secrets.token_hex(8)
    blobs: dict[str, memoryview] = {}
    pieces: list[bytes | memoryview] = []
    done = 0
    at = raw.find(b'"data"')
    while at >= 0:
        start = _value_start(raw, at)
        if start is not None:
            end = raw.find(b'"', start)
            if end - start >= BLOB_MIN_LENGTH and _is_base64(view[start:end]):
                placeholder = f"\x00{nonce}:{len(blobs)}"
                blobs[placeholder] = view[start:end]
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
    the JSON parser would accept it as a string. Checked by decoding it a chunk at a time: the
    fastest check at hand (about 5 GB/s), holding no more than a chunk. The full base64 rules
    (padding only at the very end) are checked, as for any tensor, when the tensor is decoded."""
    size = len(run)
    if size % 4:
        return False
    try:
        for begin in range(0, size, _CHECK_CHUNK):
            pybase64.b64decode(run[begin : begin + _CHECK_CHUNK], validate=True)
    except ValueError:  # binascii.Error
        return False
    return True


def _value_start(raw: bytes | mmap.mmap, at: int) -> int | None:
    """If ``"data"`` at ``at`` is an object key followed by a string, where the string starts."""
    before = at - 1
    while before >= 0 and raw[before] in _WHITESPACE:
        before -= 1
    if before < 0 or raw[before] not in b"{,":
        return None
    pos = at + 6
    while pos < len(raw) and raw[pos] in _WHITESPACE:
        pos += 1
    if pos >= len(raw) or raw[pos] != ord(":"):
        return None
    pos += 1
    while pos < len(raw) and raw[pos] in _WHITESPACE:
        pos += 1
    if pos >= len(raw) or raw[pos] != ord('"'):
        return None
    return pos + 1


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


def format_json(data: Any, *, width: Callable[[str], int] = len) -> str:
    """JSON text laid out for review: small containers on one line, large ones one item a line.

    A node reads as a short block with one field per line, so a change to one wire or one
    parameter is a one-line diff. ``width`` measures a compact text as it will finally read,
    for a writer that puts short placeholders in ``data`` and fills them in afterwards.
    """
    out: list[str] = []
    _emit(data, 0, out, width)
    out.append("\n")
    return "".join(out)


#: One encoder for every fragment: ``json.dumps`` would build a new one per call, and a large
#: graph is written as millions of small fragments.
_compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False).encode


def _emit(value: Any, indent: int, out: list[str], width: Callable[[str], int]) -> None:
    if not isinstance(value, (dict, list)) or not value:
        out.append(_compact(value))
        return
    one_line = _one_line(value, indent, width)
    if one_line is not None:
        out.append(one_line)
        return
    pad = " " * (indent + 2)
    last = len(value) - 1
    if isinstance(value, dict):
        out.append("{\n")
        for k, (key, item) in enumerate(value.items()):
            out.append(f"{pad}{_compact(key)}: ")
            _emit(item, indent + 2, out, width)
            out.append(",\n" if k < last else "\n")
        out.append(" " * indent + "}")
    else:
        out.append("[\n")
        for k, item in enumerate(value):
            out.append(pad)
            _emit(item, indent + 2, out, width)
            out.append(",\n" if k < last else "\n")
        out.append(" " * indent + "]")


def _one_line(value: dict[str, Any] | list[Any], indent: int, width: Callable[[str], int]) -> str | None:
    """The container's one-line text if it is short enough to be written that way."""
    if len(value) > 8:
        return None
    text = _compact(value)
    return text if width(text) + indent <= LINE_WIDTH else None
