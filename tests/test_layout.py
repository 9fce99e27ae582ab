"""The one-pass layout (``trama.format._layout``) writes exactly what the layout has always written.

The layout is defined by the naive algorithm below (``reference_layout``): encode a container on
one line with :mod:`json`, keep it if it has at most 8 items and fits in 100 columns at its
indentation, else write it one item a line and do the same for each item. That is the code trama
wrote documents with until the one-pass layout replaced it (it re-encoded every container once per
enclosing container); the first test checks the two still agree wherever the old code is present.
Everything else compares the one-pass layout with the reference, byte for byte: on every document
the suite's fixtures produce, a 100,000-node chain, real models, hand-picked edge cases (escapes,
surrogates, floats, big integers, empty containers, deep nesting, widths of exactly 99, 100 and
101 columns, 8 and 9 items) and a seeded fuzz, with ``len`` and with ``width`` functions like the
one ``dump`` uses to lay text out as if each tensor's base64 stood where its placeholder is.
``dump`` itself writes nodes without the layout (``trama.format._writer``); ``test_writer.py``
checks that what it writes is the layout of the encoded model.
"""

from __future__ import annotations

import enum
import json
import random
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_calls import calls_model

import trama
from trama.format import _serialization
from trama.format._codec import encode_document
from trama.format._layout import LINE_WIDTH, MAX_ONE_LINE_ITEMS, format_json

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy"
Width = Callable[[str], int]

# ----------------------------------------------------------------------------------------------
# The definition
# ----------------------------------------------------------------------------------------------

_reference_compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False).encode


def reference_layout(data: Any, width: Width = len) -> str:
    """The layout as defined: small containers on one line, others one item a line."""
    out: list[str] = []

    def emit(value: Any, indent: int) -> None:
        if not isinstance(value, (dict, list)) or not value:
            out.append(_reference_compact(value))
            return
        if len(value) <= MAX_ONE_LINE_ITEMS:
            text = _reference_compact(value)
            if width(text) + indent <= LINE_WIDTH:
                out.append(text)
                return
        pad = " " * (indent + 2)
        if isinstance(value, dict):
            out.append("{\n")
            for k, (key, item) in enumerate(value.items()):
                out.append(f"{pad}{_reference_compact(key)}: ")
                emit(item, indent + 2)
                out.append(",\n" if k < len(value) - 1 else "\n")
            out.append(" " * indent + "}")
        else:
            out.append("[\n")
            for k, item in enumerate(value):
                out.append(pad)
                emit(item, indent + 2)
                out.append(",\n" if k < len(value) - 1 else "\n")
            out.append(" " * indent + "]")

    emit(data, 0)
    out.append("\n")
    return "".join(out)


def assert_same(data: Any, width: Width = len) -> str:
    expected = reference_layout(data, width)
    actual = format_json(data, width=width)
    assert actual == expected
    return actual


def assert_same_error(data: Any, width: Width = len) -> None:
    with pytest.raises(Exception) as expected:  # noqa: PT011 - whatever the reference raises
        reference_layout(data, width)
    with pytest.raises(type(expected.value), match=f"^{re.escape(str(expected.value))}$"):
        format_json(data, width=width)


def placeholder_width(final: dict[str, int]) -> Width:
    """A ``width`` as ``dump`` builds it: each placeholder string in ``final`` is measured as the
    length its final text will have (a JSON string of that many characters, quotes excluded)."""
    escaped = {json.dumps(key, ensure_ascii=False)[1:-1]: size for key, size in final.items()}
    pattern = re.compile("|".join(re.escape(key) for key in sorted(escaped, key=len, reverse=True)))

    def width(text: str) -> int:
        return len(text) + sum(escaped[found] - len(found) for found in pattern.findall(text))

    return width


# ----------------------------------------------------------------------------------------------
# The definition is today's layout
# ----------------------------------------------------------------------------------------------


def _legacy_documents() -> Iterator[Any]:
    for path in sorted(LEGACY.glob("v0_*/*.json")):
        yield json.loads(path.read_text(encoding="utf-8"))


def _legacy_models() -> Iterator[trama.Model]:
    for path in sorted(LEGACY.glob("v0_*/*.trama.json")):
        yield trama.load(path)


def test_legacy_fixture_files_as_written_and_as_trama_writes_them() -> None:
    documents = list(_legacy_documents())
    assert len(documents) == 18
    for data in documents:
        assert_same(data)
    for model in _legacy_models():
        assert_same(encode_document(model, _serialization._inline_tensor))


def test_the_suite_s_hand_built_documents(make_doc: Callable[[], dict[str, Any]]) -> None:
    assert_same(make_doc())
    model = calls_model()
    text = assert_same(encode_document(model, _serialization._inline_tensor))
    assert '"calls": "root.block"' in text


def test_exported_toy_models(mlp_model: trama.Model, toy_registry: trama.OpRegistry) -> None:
    import toylayers

    assert_same(encode_document(mlp_model, _serialization._inline_tensor))
    wide = toylayers.mlp([64, 48, 300, 2], seed=1)
    model = trama.export_model(wide, inputs=["x"], outputs=["y"], registry=toy_registry)
    assert_same(encode_document(model, _serialization._inline_tensor))


def _chain(count: int) -> dict[str, Any]:
    """The document of a Sequential of ``count`` chained ReLUs, as ``encode_document`` makes it."""

    def ref(node: str, output: str) -> dict[str, str]:
        return {"node": node, "output": output}

    nodes: list[dict[str, Any]] = [
        {
            "id": "root",
            "parent": None,
            "op": "Sequential",
            "inputs": {"x": ref("%input", "x")},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": {"y": ref(f"root.relu_{count - 1}", "y")},
        }
    ]
    previous = ref("%input", "x")
    for i in range(count):
        nodes.append(
            {
                "id": f"root.relu_{i}",
                "parent": "root",
                "op": "ReLU",
                "inputs": {"x": previous},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": None,
            }
        )
        previous = ref(f"root.relu_{i}", "y")
    return {
        "format_version": "1.2",
        "metadata": {"producer": {"name": "trama", "version": "0.3.0"}},
        "opsets": {"trama": 1},
        "inputs": ["x"],
        "outputs": [ref("root", "y")],
        "nodes": nodes,
        "parameters": {},
    }


def test_a_100k_node_chain() -> None:
    text = assert_same(_chain(100_000))
    assert text.count('"op": "ReLU"') == 100_000


@pytest.mark.parametrize("name", ["torch_keyword_spotter", "tv_resnet18", "hf_bert"])
def test_real_models(name: str) -> None:
    pytest.importorskip("trama_torch")
    realworld = pytest.importorskip("realworld.models")
    try:
        document = realworld.exported(name)
    except ImportError as exc:  # the library that ships the model is not installed
        pytest.skip(str(exc))
    assert len(document.nodes) > 10
    assert_same(encode_document(document, _serialization._inline_tensor))


# ----------------------------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------------------------

STRINGS = [
    "",
    "plain",
    'quote " and backslash \\',
    "control \x00 \x01 \x1f \x7f \b \f \n \r \t",
    "é ü ß 日本語 🎉 \u2028 \u2029 \ufeff",
    "lone surrogates \ud800 \udfff \udc00\ud800",
    "%s %(x)s %% {} {0}",  # format syntax must stay literal
    "x" * 200,
]


def test_strings_as_values_and_keys() -> None:
    for text in STRINGS:
        assert_same(text)
        assert_same([text])
        assert_same({text: text})
        assert_same({"metadata": {text: [text, {text: 1}], "k": text}})
    assert_same({text: k for k, text in enumerate(STRINGS)})
    assert_same(STRINGS)


FLOATS = [0.0, -0.0, 1.0, -1.5, 0.1, 1e-07, 1e-7 * 3, 1e16, 1e300, -1e300, 1.5e300, 5e-324, 1.7976931348623157e308]


def test_numbers_booleans_and_null() -> None:
    ints = [0, -1, 2**53 + 1, 2**63, -(2**63), 10**100, 2**1000, True, False]
    for value in [*FLOATS, *ints, None]:
        assert_same(value)
        assert_same({"v": value})
        assert_same({"v": [value] * 3, "w": {"x": value}})
    assert_same({"floats": FLOATS, "ints": ints, "both": [FLOATS, ints]})


REFUSED = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": -float("inf"),
    "int of 5001 digits": 10**5000,
    "object": object(),
    "bytes": b"bytes",
    "set": {1, 2},
}


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_values_json_refuses_are_refused_alike(value: Any) -> None:
    for data in (value, [value], {"a": value}, {"a": {"b": [1, value]}}, {"n": [0] * 40 + [value]}):
        assert_same_error(data)


def test_empty_containers() -> None:
    for data in ({}, [], [{}], {"a": []}, [[], {}, [[]], [{}]], {"a": {"b": {"c": {}}}}):
        assert_same(data)


def test_json_subtypes_and_non_string_keys() -> None:
    class Kind(enum.IntEnum):
        A = 1

    class Name(str):
        pass

    class Items(list[Any]):
        pass

    assert_same({"ordered": OrderedDict([("b", 1), ("a", [1, 2])]), "list": Items([1, 2]), "name": Name("n")})
    assert_same({Name("key"): Kind.A, "t": (1, 2, "x" * 120)})  # a tuple is always one line
    assert_same({1: "one", 2.5: [1], False: None, None: {}})  # json writes such keys as strings
    assert_same({True: 1, "a": {0: [1.5]}})
    assert_same({str(k): {k: "x" * 10} for k in range(12)})
    assert_same({"big": {k: k for k in range(12)}, "ordered": OrderedDict((str(k), "v" * 20) for k in range(12))})
    assert_same([Items(range(12)), Items(range(3)), {"a": Items([Items([1])] * 9)}])
    assert_same_error({(1, 2): "tuple key"})
    assert_same({str(k): 0 for k in range(9)} | {(1, 2): "tuple key"})  # never encoded on one line


def test_nesting_to_depth_100() -> None:
    for leaf in (1, "x" * 150, [], {"k": "v"}):
        deep_list: Any = leaf
        deep_dict: Any = leaf
        for level in range(100):
            deep_list = [deep_list] if level % 3 else [deep_list, level]
            deep_dict = {"k": deep_dict} if level % 2 else {"k": deep_dict, "n": None}
        assert_same(deep_list)
        assert_same(deep_dict)
        assert_same({"a": deep_list, "b": deep_dict})


# ----------------------------------------------------------------------------------------------
# The two limits: 100 columns and 8 items
# ----------------------------------------------------------------------------------------------


def _padded(columns: int, indent: int, container: str) -> Any:
    """A container whose one-line text is ``columns - indent`` characters long."""
    if container == "list":
        value: Any = ["", 1]  # ["", 1] is 7 characters
        value[0] = "x" * (columns - indent - 7)
        assert len(json.dumps(value)) == columns - indent
    else:
        value = {"k": ""}  # {"k": ""} is 9 characters
        value["k"] = "y" * (columns - indent - 9)
        assert len(json.dumps(value)) == columns - indent
    return value


@pytest.mark.parametrize("container", ["list", "dict"])
@pytest.mark.parametrize("columns", [LINE_WIDTH - 1, LINE_WIDTH, LINE_WIDTH + 1])
def test_widths_at_the_boundary(columns: int, container: str) -> None:
    for depth in range(5):
        indent = 2 * depth
        data: Any = _padded(columns, indent, container)
        for _ in range(depth):
            data = {"z": data}
        text = assert_same(data)
        line = next(line for line in text.splitlines() if '"xx' in line or '"yy' in line)
        on_one_line = line.rstrip(",").endswith(("]", "}"))
        assert on_one_line == (columns <= LINE_WIDTH), (columns, depth, line)
        assert_same({"a": 1, "deep": data, "list": [data, data]})


@pytest.mark.parametrize("count", [MAX_ONE_LINE_ITEMS, MAX_ONE_LINE_ITEMS + 1])
def test_item_counts_at_the_boundary(count: int) -> None:
    items = list(range(count))
    keyed = {str(k): k for k in range(count)}
    strings = [str(k) for k in range(count)]
    keyed_strings = {str(k): "v" for k in range(count)}
    for data in (items, keyed, strings, keyed_strings):
        assert assert_same(data).count("\n") == (1 if count <= MAX_ONE_LINE_ITEMS else count + 2)
        assert_same({"short": data, "n": None})
        assert_same([[data]])
    # too many items, but short: one line inside a container that fits, else one item a line
    assert_same({"short": items})
    assert_same({"short": keyed, "pad": "p" * 40})
    assert_same({"short": items, "pad": "p" * 90})
    assert_same([[items, keyed], [[items]]])
    assert_same({str(k): items for k in range(count)})


def test_many_short_items() -> None:
    """Up to 33 one-character items fit in 100 columns (written on one line inside a container
    that fits); 34 never do."""
    for count in (*range(24, 36), 50, 1000):
        for data in ([0] * count, ["s"] * count, {str(k % 10): 0 for k in range(count)}, [0, *["s"] * (count - 1)]):
            text = assert_same({"w": data})
            assert (text.count("\n") == 1) == (len(json.dumps({"w": data})) <= LINE_WIDTH)
            assert_same([data, {"w": [data]}])


# ----------------------------------------------------------------------------------------------
# Custom widths
# ----------------------------------------------------------------------------------------------


def test_placeholder_widths_like_dump() -> None:
    """Placeholders standing for base64 of every size: an empty tensor's placeholder is wider
    than its final text, a large one's much narrower; the layout must follow the final text."""
    sizes = [0, 4, 8, 60, 61, 62, 63, 64, 80, 120, 10_000]
    final = {f"\x00abc:{k}": size for k, size in enumerate(sizes)}
    width = placeholder_width(final)
    entries = {
        f"p{k}": {"value": {"dtype": "float32", "shape": [size // 4], "data": key}, "learnable": bool(k % 2)}
        for k, (key, size) in enumerate(zip(final, sizes, strict=True))
    }
    data = {"parameters": entries, "inline": [{"data": key} for key in final], "pairs": [list(final)[:2]]}
    assert_same(data, width)
    for key in final:
        assert_same({"value": {"data": key}}, width)
        assert_same([{"x": [key, "y" * 30]}], width)


@pytest.mark.parametrize("scale", [0, 1, 2])
def test_other_width_measures(scale: int) -> None:
    def width(text: str) -> int:  # each "w" counts `scale` columns: a container is still wider than its items
        return len(text) + (scale - 1) * text.count("w")

    for data in (_chain(20), {"k": ["w" * 40, "w" * 20], "m": {"w": "w" * 60}}, [["w" * 33] * 3, ["v" * 33] * 3]):
        assert_same(data, width)


# ----------------------------------------------------------------------------------------------
# Fuzz
# ----------------------------------------------------------------------------------------------

_ALPHABET = 'ab yz0_.%"\\\n\t\x00\x1f\x7fé日🎉\ud800\udfff{}[],:'


def _random_string(rng: random.Random) -> str:
    size = rng.choice([0, 1, 2, 5, 10, 30, 60, 95, 120])
    return "".join(rng.choice(_ALPHABET) for _ in range(size))


def test_deeper_than_the_format_allows() -> None:
    """Writing recurses once per level, like the old layout: 400 levels, four times what a
    document may hold, are written the same."""
    deep_list: Any = "x" * 120
    deep_dict: Any = 1
    for _ in range(400):
        deep_list, deep_dict = [deep_list], {"k": deep_dict}
    assert_same(deep_list)
    assert_same(deep_dict)


def test_dicts_of_one_set_of_keys_that_fit_and_do_not() -> None:
    """Dicts of the same keys come in one after the other, now short, now long: each is laid
    out on its own merits (the layout guesses from the last one, and checks)."""
    sizes = [1, 1, 120, 1, 9, 1, 95, 96, 97, 98, 99, 1, 200, 200, 1]
    data = [{"a": "x" * size, "b": ["y"] * (size % 10)} for size in sizes]
    assert_same(data)
    assert_same({"nodes": data, "again": [{"a": {"deep": ["x" * size]}, "b": []} for size in sizes]})
    assert_same_error([{"a": 1.5}, {"a": float("nan")}])
    assert_same_error([{"a": [1]}, {"a": [object()]}])


def _random_value(rng: random.Random, depth: int, budget: list[int]) -> Any:
    """A random JSON value; ``budget[0]`` bounds how many values one document holds."""
    budget[0] -= 1
    if depth > 0 and budget[0] > 0 and rng.random() < 0.45:
        count = rng.choice([0, 1, 2, 3, 5, 7, 8, 9, 10, 20, 40])
        if rng.random() < 0.5:
            return [_random_value(rng, depth - 1, budget) for _ in range(count)]
        return {_random_string(rng): _random_value(rng, depth - 1, budget) for _ in range(count)}
    return rng.choice(
        [
            lambda: _random_string(rng),
            lambda: rng.randint(-(2**70), 2**70),
            lambda: rng.randint(-9, 99),
            lambda: rng.uniform(-1e6, 1e6),
            lambda: rng.choice(FLOATS),
            lambda: rng.choice([None, True, False]),
        ]
    )()


def test_fuzz() -> None:
    """Seeded random documents, for about two seconds (at least 300 of them)."""
    rng = random.Random(20261124)
    final = {"\x00ph:0": 0, "\x00ph:1": 150}
    widths: list[Width] = [len, placeholder_width(final)]
    deadline = time.monotonic() + 2.0
    checked = 0
    while time.monotonic() < deadline or checked < 300:
        data = _random_value(rng, rng.randint(1, 7), [rng.choice([10, 50, 300])])
        if rng.random() < 0.2:
            data = {"value": {"data": rng.choice(list(final))}, "other": data}
        assert_same(data, widths[checked % 2])
        checked += 1
