"""The diff-friendly layout of a document's JSON text, computed in one pass over the data.

The layout: a container (object or array) whose one-line form has at most
:data:`MAX_ONE_LINE_ITEMS` items and fits in :data:`LINE_WIDTH` columns at its indentation is
written on one line, ``{"a": 1, "b": [2, 3]}``; any other container is written one item a line,
indented by two spaces. A node then reads as a short block with one field per line, so a change
to one wire or one parameter is a one-line diff. A one-line form is exactly what :mod:`json`
writes (``ensure_ascii=False``, separators ``", "`` and ``": "``, ``allow_nan=False``), and a
key written one item a line is json's text of the key alone.

Why one pass: deciding whether a container fits needs the length of its one-line form, and
the plain way (encode the container, measure, on a miss do the same for each item) encodes a
value once per enclosing container; on a 100,000-node graph that was three quarters of
``dump``. Here items are laid out before their container, each scalar is encoded once, and a
container's one-line form is the join of its items' one-line forms, built only while those are
all narrow enough to be part of a line (a container is wider than any of its items). Two
shortcuts, both checked, so that the output never depends on them: dicts of the same keys are
usually alike (the value of every node's ``inputs`` fits on a line, no node does), so a dict
whose keys last made a dict that fitted is first encoded whole by json's C encoder; and a dict
or list of strings only has its strings encoded in one call.

The output is byte for byte that of the plain way, for any data (``tests/test_layout.py``
compares them on every document the test suite makes, a 100,000-node chain, real models and a
seeded fuzz); values json refuses (NaN, objects it cannot encode) are refused with json's own
errors. Writing recurses once per level of nesting, as the plain way did.

``dump`` writes the nodes of a document without this pass (:mod:`trama.format._writer`: their
layout is known in advance), with the pieces and limits defined here: :class:`ObjectShape`,
:meth:`Layout.array_lines`, the separators, :data:`LINE_WIDTH` and :data:`MAX_ONE_LINE_ITEMS`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable
from operator import add as _concat
from typing import Any, Final

__all__ = [
    "ITEM_SEPARATOR",
    "KEY_SEPARATOR",
    "LINE_WIDTH",
    "MAX_ONE_LINE_ITEMS",
    "Layout",
    "ObjectShape",
    "format_json",
    "interleave",
]

#: Containers whose one-line form fits in this many columns (indentation included) are written
#: on one line.
LINE_WIDTH: Final = 100
#: ... provided they have at most this many items.
MAX_ONE_LINE_ITEMS: Final = 8
#: What separates the items of a container on one line, and a key from its value.
ITEM_SEPARATOR: Final = ", "
KEY_SEPARATOR: Final = ": "

#: A container with more items than this cannot fit on a line measured by ``len``: each item
#: takes at least one character and each separator two.
_MAX_ITEMS_BY_LEN: Final = LINE_WIDTH // 3

#: The reference encoding of one value on one line. Used for what the fast paths below do not
#: cover (subclasses of ``dict``/``list``/``str``/numbers, tuples, non-string keys, non-finite
#: floats, objects JSON cannot encode), so that those are written, or refused, exactly as
#: :mod:`json` does.
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(ITEM_SEPARATOR, KEY_SEPARATOR), allow_nan=False)
_compact = _encoder.encode
#: A string's JSON text (C implementation; ``ensure_ascii=False``, as ``_compact``).
_string: Callable[[str], str] = json.encoder.encode_basestring
_int_text = int.__repr__
_float_text = float.__repr__
_INFINITIES: Final = (float("inf"), float("-inf"))
_CONTAINERS: Final = (dict, list)


def format_json(data: Any, *, width: Callable[[str], int] = len) -> str:
    """JSON text laid out for review: small containers on one line, large ones one item a line.

    ``data`` is a tree of JSON values (``dict`` with string keys, ``list``, ``str``, ``int``,
    ``float``, ``bool``, ``None``). ``width`` measures a one-line text as it will finally read,
    for a writer that puts short placeholders in ``data`` and fills them in afterwards (``dump``
    streams each tensor's base64 in place of its placeholder). It must make a container at least
    two columns wider than any of its items, as ``len`` does and as a placeholder measured by the
    length of its final text does (a JSON string is at least its two quotes wide): a container
    whose item is too wide for a line is then too wide as well, and is never measured. With
    ``len`` itself, widths are summed instead of measured.
    """
    text = Layout(width).text(data, 0)
    # A document written one item a line already ends with its newline (see _closing): adding
    # it here would copy the whole text once more.
    return text if text.endswith("\n") else text + "\n"


class _Short(str):
    """The text of a container written one item a line although it is narrow enough for a line
    (it has too many items), with its one-line text (``None``: only :mod:`json` can give it),
    for an enclosing container that fits on a line."""

    one_line: str | None


class _Items(enum.Enum):
    """What the items of a container say about its one-line text, when not all of them are
    written on one line."""

    TOO_WIDE = "an item is too wide for a line, so the container is"
    UNKNOWN = "an item's one-line text is only known to json: ask it for the container's"


def _one_line_encoder() -> Callable[[Any, int], list[str]]:
    """The C encoder that ``_compact`` builds on each call, built once: it gives the chunks of
    the same one-line text, and refuses the same values with the same errors."""
    make: Any = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    if make is None:  # pragma: no cover - CPython always has it
        return lambda value, _indent: [_compact(value)]
    return make(  # type: ignore[no-any-return]
        {}, _encoder.default, _string, None, KEY_SEPARATOR, ITEM_SEPARATOR, False, False, False
    )


def _closing(bracket: str, indent: int) -> str:
    """How a container written one item a line ends; at indentation 0 (the document itself, the
    only value there) with the document's final newline."""
    return "\n" + " " * indent + bracket if indent else "\n" + bracket + "\n"


def interleave(prefixes: list[str], texts: list[str], closing: str) -> str:
    """``prefixes[0] + texts[0] + prefixes[1] + ... + closing``, in one join."""
    parts: list[str] = [closing] * (2 * len(texts) + 1)
    parts[0:-1:2] = prefixes
    parts[1::2] = texts
    return "".join(parts)


class ObjectShape:
    """What a tuple of keys contributes to a dict's text, computed once per layout run."""

    __slots__ = ("fits", "fixed", "lines", "names", "prefixes", "strings", "template")

    def __init__(self, keys: tuple[str, ...]) -> None:
        names = [_string(key) + KEY_SEPARATOR for key in keys]
        #: ``{"a": `` and ``, "b": ``: what precedes each item on one line (``}`` follows).
        self.prefixes = ["{" + names[0]] + [ITEM_SEPARATOR + name for name in names[1:]]
        #: The one-line text's length less its items'.
        self.fixed = sum(map(len, self.prefixes)) + 1
        #: The one-line text as a ``%`` template of the items' texts.
        self.template = "".join(prefix.replace("%", "%%") + "%s" for prefix in self.prefixes) + "}"
        #: Whether all values were strings the last time (then all are encoded in one call).
        self.strings = True
        #: Whether the last dict of these keys was written on one line (then the next one is
        #: first encoded whole, in one call).
        self.fits = False
        #: By indentation: the prefixes of the items written one a line, and the closing.
        self.lines: dict[int, tuple[list[str], str]] = {}
        self.names = names

    def written(self, indent: int) -> tuple[list[str], str]:
        """What precedes each item of a dict of these keys written one item a line at
        ``indent`` (``{`` or ``,``, a new line, the indentation, the key), and how it closes."""
        lines = self.lines.get(indent)
        if lines is not None:
            return lines
        pad = " " * (indent + 2)
        prefixes = [",\n" + pad + name for name in self.names]
        prefixes[0] = "{\n" + pad + self.names[0]
        lines = self.lines[indent] = (prefixes, _closing("}", indent))
        return lines


class Layout:
    """One layout run.

    ``lay_*`` return the text of a non-empty container written at an indentation. Each
    container written one item a line adds one to ``irregular``: a container whose count did not
    move while its items were laid out knows, without looking, that each item's text is its
    one-line text. When it moved, :meth:`items` looks at each item.
    """

    __slots__ = ("by_len", "encode", "irregular", "list_lines", "shapes", "width")

    def __init__(self, width: Callable[[str], int]) -> None:
        self.width = width
        #: Whether widths are lengths: then a container's width is known from its items'
        #: before its text is built, and one with many items is too wide without measuring.
        self.by_len = width is len
        self.irregular = 0
        #: By tuple of keys, all of exact type ``str`` (``1``, ``1.0`` and ``True`` are equal
        #: as keys but written differently).
        self.shapes: dict[tuple[str, ...], ObjectShape] = {}
        #: By indentation: how a list written one item a line opens, separates and closes.
        self.list_lines: dict[int, tuple[str, str, str]] = {}
        #: ``_compact`` without its per-call set-up: the chunks of a value's one-line text.
        self.encode = _one_line_encoder()

    def text(self, value: Any, indent: int) -> str:
        """The text of any value written at ``indent``."""
        kind = type(value)
        if kind is dict:
            return self.lay_dict(value, indent) if value else "{}"
        if kind is list:
            return self.lay_list(value, indent) if value else "[]"
        if kind is str:
            return _string(value)
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if kind is int:
            return _int_text(value)
        if kind is float and value not in _INFINITIES and value == value:
            return _float_text(value)
        if value and isinstance(value, _CONTAINERS):
            return self.lay_other(value, indent)
        return _compact(value)

    def lay_dict(self, value: dict[Any, Any], indent: int) -> str:
        keys = tuple(value)
        shape = self.shapes.get(keys)
        if shape is None:
            if not all(type(key) is str for key in keys):
                return self.lay_other(value, indent)
            shape = self.shapes[keys] = ObjectShape(keys)
        count = len(keys)
        one_line: str | _Items | None = None
        if shape.fits:
            one_line = self.measured("".join(self.encode(value, 0)), indent)
            if one_line is not None and count <= MAX_ONE_LINE_ITEMS:
                return one_line
            shape.fits = False
            one_line = None
        if shape.strings:
            try:
                strings = tuple(map(_string, value.values()))
            except TypeError:  # not all strings: from now on, one at a time
                shape.strings = False
            else:
                if not self.by_len or count <= _MAX_ITEMS_BY_LEN:
                    one_line = self.measured(shape.template % strings, indent)
                    if one_line is not None and count <= MAX_ONE_LINE_ITEMS:
                        shape.fits = True
                        return one_line
                texts = list(strings)
        if not shape.strings:
            mark = self.irregular
            texts = self.item_texts(value.values(), indent + 2)
            parts = texts if self.irregular == mark else self.items(texts)
            if type(parts) is list:
                if not self.by_len:
                    one_line = self.measured(interleave(shape.prefixes, parts, "}"), indent)
                elif count <= _MAX_ITEMS_BY_LEN and len("".join(parts)) + shape.fixed + indent <= LINE_WIDTH:
                    one_line = interleave(shape.prefixes, parts, "}")
            elif parts is _Items.UNKNOWN:
                one_line = self.unknown(value, indent)
            if type(one_line) is str and count <= MAX_ONE_LINE_ITEMS:
                shape.fits = True
                return one_line
        prefixes, closing = shape.written(indent)
        return self.written(interleave(prefixes, texts, closing), one_line)

    def item_texts(self, items: Iterable[Any], inner: int) -> list[str]:
        """The laid-out text of each item of a container, at indentation ``inner``: the one
        loop that both containers' layouts run over their items (the hot path of a dump)."""
        text, lay_dict, lay_list = self.text, self.lay_dict, self.lay_list
        texts: list[str] = []
        append = texts.append
        for item in items:
            kind = type(item)
            if kind is str:
                append(_string(item))
            elif kind is dict:
                append(lay_dict(item, inner) if item else "{}")
            elif item is None:
                append("null")
            elif kind is list:
                append(lay_list(item, inner) if item else "[]")
            else:
                append(text(item, inner))
        return texts

    def lay_list(self, value: list[Any], indent: int) -> str:
        count = len(value)
        one_line: str | _Items | None = None
        texts: list[str] | None = None
        if type(value[0]) is str:
            try:
                texts = list(map(_string, value))
            except TypeError:  # not all strings
                pass
            else:
                if count <= MAX_ONE_LINE_ITEMS:
                    one_line = "[" + ITEM_SEPARATOR.join(texts) + "]"
                    if (len(one_line) if self.by_len else self.width(one_line)) + indent <= LINE_WIDTH:
                        return one_line
                    one_line = None
                elif not self.by_len or count <= _MAX_ITEMS_BY_LEN:
                    one_line = self.measured("[" + ITEM_SEPARATOR.join(texts) + "]", indent)
        if texts is None:
            mark = self.irregular
            texts = self.item_texts(value, indent + 2)
            parts = texts if self.irregular == mark else self.items(texts)
            if type(parts) is list:
                if not self.by_len or count <= _MAX_ITEMS_BY_LEN:
                    one_line = self.measured("[" + ITEM_SEPARATOR.join(parts) + "]", indent)
            elif parts is _Items.UNKNOWN:
                one_line = self.unknown(value, indent)
            if type(one_line) is str and count <= MAX_ONE_LINE_ITEMS:
                return one_line
        opening, separator, closing = self.array_lines(indent)
        return self.written(opening + separator.join(texts) + closing, one_line)

    def array_lines(self, indent: int) -> tuple[str, str, str]:
        """How a list written one item a line at ``indent`` opens, separates its items and closes."""
        lines = self.list_lines.get(indent)
        if lines is None:
            pad = " " * (indent + 2)
            lines = self.list_lines[indent] = ("[\n" + pad, ",\n" + pad, _closing("]", indent))
        return lines

    def shape(self, keys: tuple[str, ...]) -> ObjectShape:
        """The shape of dicts of these keys (all of them ``str``), made once per run."""
        shape = self.shapes.get(keys)
        if shape is None:
            shape = self.shapes[keys] = ObjectShape(keys)
        return shape

    def lay_other(self, value: dict[Any, Any] | list[Any], indent: int) -> str:
        """A container the fast paths do not cover (a subclass of ``dict`` or ``list``, or a key
        that is not a string), laid out as the layout always has: its one-line text is what
        :mod:`json` gives, and a key written one item a line is json's text of the key alone."""
        mark = self.irregular
        inner = indent + 2
        pad = " " * inner
        if isinstance(value, dict):
            opening, closing = "{", "}"
            pairs = list(value.items())
            prefixes = [
                f"{pad}{_string(key) if isinstance(key, str) else _compact(key)}{KEY_SEPARATOR}" for key, _ in pairs
            ]
            texts = [self.text(item, inner) for _, item in pairs]
        else:
            opening, closing = "[", "]"
            texts = [self.text(item, inner) for item in value]
            prefixes = [pad] * len(texts)
        too_wide = self.irregular != mark and self.items(texts) is _Items.TOO_WIDE
        one_line = None if too_wide else self.unknown(value, indent)
        if type(one_line) is str and len(value) <= MAX_ONE_LINE_ITEMS:
            return one_line
        body = ",\n".join(map(_concat, prefixes, texts))
        return self.written(f"{opening}\n{body}{_closing(closing, indent)}", one_line)

    def items(self, texts: list[str]) -> list[str] | _Items:
        """The items' one-line texts, or why they are not all known."""
        parts = []
        unknown = False
        for text in texts:
            if type(text) is _Short:
                if text.one_line is None:
                    unknown = True
                else:
                    parts.append(text.one_line)
            elif text[1:2] == "\n":  # written one item a line: too wide for a line
                return _Items.TOO_WIDE
            else:
                parts.append(text)
        return _Items.UNKNOWN if unknown else parts

    def unknown(self, value: dict[Any, Any] | list[Any], indent: int) -> str | _Items | None:
        """The one-line text of a container only json can encode, if it is needed."""
        if len(value) <= MAX_ONE_LINE_ITEMS:
            return self.measured(_compact(value), indent)
        if self.by_len and len(value) > _MAX_ITEMS_BY_LEN:
            return None
        return _Items.UNKNOWN

    def measured(self, one_line: str, indent: int) -> str | None:
        return one_line if self.width(one_line) + indent <= LINE_WIDTH else None

    def written(self, text: str, one_line: str | _Items | None) -> str:
        """A container written one item a line, and what its one-line text is."""
        self.irregular += 1
        if one_line is None:
            return text
        short = _Short(text)
        short.one_line = one_line if type(one_line) is str else None
        return short
