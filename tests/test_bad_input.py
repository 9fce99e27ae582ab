"""Hand-made corrupt documents: each must raise one specific TramaError subclass with a message
and a location, and nothing else (no KeyError, RecursionError, MemoryError, no hang).

Documents are built from the small valid document of ``conftest.py`` with one thing broken.
"""

from __future__ import annotations

import json
import struct
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from trama import (
    FormatVersionError,
    JSONError,
    SchemaError,
    TensorDataError,
    TramaError,
    ValidationError,
    WeightsFileError,
)

Doc = dict[str, Any]
Mutator = Callable[[Doc], None]

WEIGHT = ("parameters", "root.linear.weight")
WEIGHT_VALUE = (*WEIGHT, "value")
LINEAR = ("nodes", 1)
RELU = ("nodes", 2)


def text_of(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


def touch_tensors(model: trama.Model) -> None:
    """Decode every tensor (errors in the bytes surface here, not at load)."""
    for entry in model.parameters.values():
        if isinstance(entry.value, trama.Tensor):
            np.asarray(entry.value)


def load_error(
    data: str | bytes, expected: type[TramaError], match: str | None = None, **loads_args: Any
) -> TramaError:
    """``trama.loads(data)`` raises ``expected`` (only that) with a message and a location."""
    with pytest.raises(expected, match=match) as info:
        trama.loads(data, **loads_args)
    return checked(info.value)


def checked(error: TramaError) -> TramaError:
    assert error.message
    assert error.location is not None
    assert str(error)
    return error


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def setting(path: tuple[Any, ...], value: Any) -> Mutator:
    def mutate(doc: Doc) -> None:
        at(doc, path[:-1])[path[-1]] = value

    mutate.__name__ = f"{'/'.join(map(str, path))}={value!r}"[:70]
    return mutate


def deleting(path: tuple[Any, ...]) -> Mutator:
    def mutate(doc: Doc) -> None:
        del at(doc, path[:-1])[path[-1]]

    return mutate


def appending(node: Doc) -> Mutator:
    def mutate(doc: Doc) -> None:
        doc["nodes"].append(node)

    return mutate


def leaf(node_id: str, parent: str | None, inputs: dict[str, Any] | None = None) -> Doc:
    return {
        "id": node_id,
        "parent": parent,
        "op": "ReLU",
        "inputs": inputs or {},
        "outputs": ["y"],
        "parameters": {},
        "output_bindings": None,
    }


def ref(node: str, output: str) -> dict[str, str]:
    return {"node": node, "output": output}


# ---------------------------------------------------------------------------------------------
# Text that is not (acceptable) JSON
# ---------------------------------------------------------------------------------------------


def small_dumped_doc(make_doc: Callable[[], Doc]) -> bytes:
    doc = make_doc()
    doc["metadata"] = {"note": "héllo ✓ — non-ASCII, so that some cuts fall inside a character"}
    return trama.dumps(trama.loads(text_of(doc))).encode()


def test_every_truncation_of_a_small_document_is_a_json_error(make_doc: Callable[[], Doc]) -> None:
    data = small_dumped_doc(make_doc).rstrip()  # only the final newline may go
    trama.loads(data)  # the whole text is fine
    for cut in range(len(data)):
        with pytest.raises((JSONError, SchemaError)) as info:
            trama.loads(data[:cut])
        checked(info.value)


def test_truncated_files_on_disk(tmp_path: Path, make_doc: Callable[[], Doc]) -> None:
    data = small_dumped_doc(make_doc)
    path = tmp_path / "cut.trama.json"
    for cut in (1, len(data) // 3, len(data) // 2, len(data) - 2):
        path.write_bytes(data[:cut])
        with pytest.raises(JSONError) as info:
            trama.load(path)
        checked(info.value)


def test_truncation_inside_a_long_base64_run(make_doc: Callable[[], Doc], encode_tensor: Any) -> None:
    # Runs of 1024+ base64 characters take a different path through the parser.
    doc = make_doc()
    doc["parameters"]["root.linear.weight"]["value"] = encode_tensor(np.arange(2048, dtype="<f4").reshape(1024, 2))
    data = trama.dumps(trama.loads(text_of(doc))).encode().rstrip()
    start = data.index(b'"data"')
    for cut in (start, start + 8, start + 10, start + 500, start + 5000, start + 10930, len(data) - 1):
        with pytest.raises(JSONError) as info:
            trama.loads(data[:cut])
        checked(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "Expecting value"),
        (b"   \n  ", "Expecting value"),
        (b"hello", "Expecting value"),
        (b"{'format_version': '1.0'}", "double quotes"),
        (b'{"format_version": "1.0",}', "double quotes"),
        (b'{"a": 1} trailing', "Extra data"),
        (b'{"a": 1}{"b": 2}', "Extra data"),
        (b'{"a": [1, 2,]}', "Expecting value"),
    ],
    ids=["empty", "whitespace", "word", "single-quotes", "trailing-comma", "extra-text", "two-objects", "array-comma"],
)
def test_text_that_is_not_json(data: bytes, message: str) -> None:
    error = load_error(data, JSONError, message)
    assert isinstance(error, JSONError)
    assert error.line >= 1
    assert error.column >= 1


def test_empty_file_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "empty.trama.json"
    path.write_bytes(b"")
    with pytest.raises(JSONError) as info:
        trama.load(path)
    assert (info.value.line, info.value.column) == (1, 1)


def test_missing_file_is_a_trama_error(tmp_path: Path) -> None:
    with pytest.raises(TramaError, match="cannot read"):
        trama.load(tmp_path / "nope.trama.json")


def line_column(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals_are_refused_where_they_are(make_doc: Callable[[], Doc], literal: str) -> None:
    text = text_of(make_doc()).replace('"value": 2,', f'"value": {literal},')
    assert literal in text
    error = load_error(text, JSONError, f"{literal} is not valid JSON")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == line_column(text, text.index(literal))


def test_non_finite_literal_inside_a_list_and_at_top_level(make_doc: Callable[[], Doc]) -> None:
    text = text_of(make_doc()).replace('"value": 2,', '"value": [1, 2, NaN],')
    error = load_error(text, JSONError, "NaN")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == line_column(text, text.index("NaN"))
    load_error("NaN", JSONError, "NaN")
    load_error("-Infinity", JSONError, "Infinity")


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e309"])
@pytest.mark.parametrize("where", ["metadata", "value"])
def test_number_too_large_for_a_double_is_refused(make_doc: Callable[[], Doc], number: str, where: str) -> None:
    # 1e400 is JSON grammar but would silently become infinity, which no document may hold
    # (a model read with one in its metadata could not even be written back).
    doc = make_doc()
    doc["metadata"] = {"big": 7}
    text = text_of(doc)
    text = (
        text.replace('"big": 7', f'"big": {number}')
        if where == "metadata"
        else text.replace('"value": 2,', f'"value": {number},')
    )
    error = load_error(text, JSONError, "out of range")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == line_column(text, text.index(number))


def test_huge_integer_literal_is_a_json_error(make_doc: Callable[[], Doc]) -> None:
    text = text_of(make_doc()).replace('"value": 2,', '"value": ' + "9" * 5000 + ",")
    load_error(text, JSONError)


def with_duplicate(make_doc: Callable[[], Doc], anchor: str, duplicate: str) -> tuple[str, int]:
    """The document's text with the member ``duplicate`` inserted just before the line that
    holds ``anchor`` (a key of the same object), and where that original key now starts."""
    text = text_of(make_doc())
    key_at = text.index(anchor)
    line_start = text.rindex("\n", 0, key_at) + 1
    inserted = " " * (key_at - line_start) + duplicate + ",\n"
    return text[:line_start] + inserted + text[line_start:], key_at + len(inserted)


@pytest.mark.parametrize(
    ("anchor", "duplicate"),
    [
        ('"inputs": [', '"inputs": []'),
        ('"op": "ReLU"', '"op": "Linear"'),
        ('"root.linear.bias": {', '"root.linear.bias": {"value": 1, "learnable": false}'),
        ('"in_features": {', '"in_features": {"name": "dims.n"}'),
    ],
    ids=["top-level", "node", "parameter-table", "slot-map"],
)
def test_duplicate_keys_point_at_the_repeated_key(make_doc: Callable[[], Doc], anchor: str, duplicate: str) -> None:
    text, second = with_duplicate(make_doc, anchor, duplicate)
    key = anchor.split('"')[1]
    assert text[second:].startswith(f'"{key}"')
    error = load_error(text, JSONError, "appears twice")
    assert isinstance(error, JSONError)
    assert repr(key) in error.message
    assert (error.line, error.column) == line_column(text, second)


def test_duplicate_key_in_metadata_and_in_a_one_line_object() -> None:
    text = '{"format_version": "1.0", "metadata": {"a": 1, "b": {"c": 2, "c": 3}}}'
    error = load_error(text, JSONError, "'c' appears twice")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == (1, text.rindex('"c"') + 1)


def test_utf8_bom_is_accepted(make_doc: Callable[[], Doc]) -> None:
    text = text_of(make_doc())
    plain = trama.loads(text.encode())
    with_bom = trama.loads(b"\xef\xbb\xbf" + text.encode())
    assert with_bom.parameters == plain.parameters
    assert with_bom.nodes == plain.nodes


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_other_encodings_are_refused(make_doc: Callable[[], Doc], encoding: str) -> None:
    # json.loads(bytes) alone would guess UTF-16/32; a document is UTF-8 (with or without BOM).
    load_error(text_of(make_doc()).encode(encoding), JSONError)


def test_bom_twice_is_refused(make_doc: Callable[[], Doc]) -> None:
    load_error(b"\xef\xbb\xbf\xef\xbb\xbf" + text_of(make_doc()).encode(), JSONError)


@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"],
    ids=["ff", "cut-sequence", "encoded-surrogate", "overlong"],
)
def test_invalid_utf8_is_located(make_doc: Callable[[], Doc], bad: bytes) -> None:
    doc = make_doc()
    doc["metadata"] = {"note": "before-MARK-after"}
    data = text_of(doc).encode()
    index = data.index(b"MARK")
    data = data[:index] + bad + data[index:]
    error = load_error(data, JSONError, "not UTF-8")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == line_column(data[:index].decode(), index)


def test_invalid_utf8_inside_a_long_base64_run(make_doc: Callable[[], Doc], encode_tensor: Any) -> None:
    # Long "data" runs are lifted out of the text before parsing only when they are base64; one
    # with other bytes stays in the text, and the parser refuses it where it is, at load.
    doc = make_doc()
    doc["parameters"]["root.linear.weight"]["value"] = encode_tensor(np.zeros((1024, 2), dtype="<f4"))
    data = text_of(doc).encode()
    start = data.index(b'"data": "') + 20
    data = data[:start] + b"\xff\xfe" + data[start + 2 :]
    error = load_error(data, JSONError, "not UTF-8")
    assert isinstance(error, JSONError)
    assert (error.line, error.column) == line_column(data[:start].decode(), start)


@pytest.mark.parametrize("bad", [b"\xff", b"\n", b"\x01"], ids=["ff", "newline", "control"])
def test_invalid_utf8_or_control_character_in_a_long_metadata_string(make_doc: Callable[[], Doc], bad: bytes) -> None:
    doc = make_doc()
    doc["metadata"] = {"data": "MARK" + "a" * 2000}
    data = text_of(doc).encode()
    index = data.index(b"MARK")
    data = data.replace(b"MARK", bad)
    error = load_error(data, JSONError)
    assert isinstance(error, JSONError)
    assert error.line == data[:index].count(b"\n") + 1


def test_long_metadata_string_under_data_key_survives(make_doc: Callable[[], Doc]) -> None:
    doc = make_doc()
    doc["metadata"] = {"data": "é" + "x" * 3000, "nested": [{"data": "y" * 2000}]}
    model = trama.loads(text_of(doc))
    assert model.metadata == doc["metadata"]


# ---------------------------------------------------------------------------------------------
# Nesting: a deep document is an error, never a RecursionError or a crash
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opening", ["[", '{"a":', '{"a": ['])
def test_100k_levels_of_nesting_is_a_json_error(opening: str) -> None:
    error = load_error(opening * 100_000, JSONError, "nested too deeply")
    assert error.location == "line 1 column 1"


def test_deep_nesting_closed_properly_is_a_json_error() -> None:
    load_error("[" * 100_000 + "]" * 100_000, JSONError, "nested too deeply")


@pytest.mark.parametrize("depth", [101, 150, 500, 900, 950, 990, 2000, 50_000])
@pytest.mark.parametrize("where", ["metadata", "node-metadata", "list-value"])
def test_deep_values_are_refused_without_recursion_error(make_doc: Callable[[], Doc], depth: int, where: str) -> None:
    doc = make_doc()
    if where == "metadata":
        doc["metadata"] = {"deep": "PLACEHOLDER"}
    elif where == "node-metadata":
        doc["nodes"][2]["metadata"] = {"deep": "PLACEHOLDER"}
    else:
        doc["parameters"]["dims.n"]["value"] = "PLACEHOLDER"
        doc["nodes"][1]["parameters"]["in_features"] = {"name": "dims.n"}
    text = json.dumps(doc).replace('"PLACEHOLDER"', "[" * depth + "]" * depth)
    with pytest.raises((JSONError, SchemaError)) as info:
        trama.loads(text)
    error = checked(info.value)
    assert "deep" in error.message


@pytest.mark.parametrize("where", ["metadata", "node-metadata", "list-value"])
def test_nesting_limit_is_100_levels(make_doc: Callable[[], Doc], where: str) -> None:
    # The outermost list or metadata object is level 1; level 100 is fine and 101 is not.
    def document(levels: int) -> str:
        doc = make_doc()
        if where == "list-value":
            doc["parameters"]["dims.n"]["value"] = "PLACEHOLDER"
            inner = levels
        else:
            target = doc if where == "metadata" else doc["nodes"][2]
            target["metadata"] = {"deep": "PLACEHOLDER"}
            inner = levels - 1
        return json.dumps(doc).replace('"PLACEHOLDER"', "[" * inner + "]" * inner)

    model = trama.loads(document(100))
    again = trama.loads(trama.dumps(model))
    assert again.parameters == model.parameters
    assert again.metadata == model.metadata
    error = load_error(document(101), SchemaError, "more than 100 levels")
    assert error.location in ("/metadata", "/nodes/2/metadata") or error.location.startswith("/parameters/dims.n/value")


def test_moderately_nested_values_load_and_round_trip(make_doc: Callable[[], Doc]) -> None:
    doc = make_doc()
    nested: Any = [1]
    for _ in range(60):
        nested = [nested, "x"]
    doc["metadata"] = {"nested": nested}
    doc["nodes"][2]["metadata"] = {"nested": nested}
    model = trama.loads(json.dumps(doc))
    again = trama.loads(trama.dumps(model))
    assert again.metadata["nested"] == nested
    assert again.nodes[2].metadata == {"nested": nested}


# ---------------------------------------------------------------------------------------------
# Well-formed JSON that is not a trama document
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[]", '["format_version"]', '"1.0"', "1", "null", "true"])
def test_top_level_must_be_an_object(text: str) -> None:
    error = load_error(text, SchemaError, "a trama document is a JSON object")
    assert error.location == ""


MISSING = [
    (deleting(("format_version",)), FormatVersionError, "format_version", "/format_version"),
    (deleting(("inputs",)), SchemaError, "missing required field 'inputs'", "/"),
    (deleting(("outputs",)), SchemaError, "missing required field 'outputs'", "/"),
    (deleting(("nodes",)), SchemaError, "missing required field 'nodes'", "/"),
    (deleting(("parameters",)), SchemaError, "missing required field 'parameters'", "/"),
    *[
        (deleting((*LINEAR, key)), SchemaError, f"missing required field '{key}'", "/nodes/1")
        for key in ("id", "parent", "op", "inputs", "outputs", "parameters", "output_bindings")
    ],
    (deleting((*WEIGHT, "value")), SchemaError, "a parameter entry is", "/parameters/root.linear.weight"),
    (deleting((*WEIGHT, "learnable")), SchemaError, "a parameter entry is", "/parameters/root.linear.weight"),
    *[
        (deleting((*WEIGHT_VALUE, key)), SchemaError, "a tensor is", "/parameters/root.linear.weight/value")
        for key in ("dtype", "shape", "data")
    ],
    (deleting((*RELU, "inputs", "x", "output")), SchemaError, "a reference is", "/nodes/2/inputs/x"),
    (deleting(("outputs", 0, "node")), SchemaError, "a reference is", "/outputs/0"),
    (
        deleting((*LINEAR, "parameters", "weight", "name")),
        SchemaError,
        "a parameter slot is",
        "/nodes/1/parameters/weight",
    ),
]


@pytest.mark.parametrize(("mutate", "error", "message", "location"), MISSING)
def test_missing_fields(
    make_doc: Callable[[], Doc], mutate: Mutator, error: type[TramaError], message: str, location: str
) -> None:
    doc = make_doc()
    mutate(doc)
    found = load_error(text_of(doc), error, message)
    assert found.location == location


#: Op names that are not dotted identifiers: a newline (which would forge an SSA line), escape
#: sequences, spaces, a segment starting with a digit, empty segments, non-ASCII, too long.
BAD_OP_NAMES = [
    "Linear\nfake = Evil()",
    "\x1b[31mLinear",
    "Line\x1b]0;title\x07ar",
    "Linear\n",
    "Linear\r",
    "Lin\tear",
    "Lin\x00ear",
    "Lin ear",
    "Lin-ear",
    "1x",
    "lenses.1x",
    "a..b",
    ".Linear",
    "Linear.",
    "Linéar",
    "Linear\u202e",
    "%input",
    "x" * 257,
]

WRONG_TYPES = [
    # top level
    (setting(("inputs",), "x"), SchemaError, "/inputs"),
    (setting(("inputs",), [1]), SchemaError, "/inputs/0"),
    (setting(("outputs",), {"node": "root", "output": "y"}), SchemaError, "/outputs"),
    (setting(("outputs",), ["root.y"]), SchemaError, "/outputs/0"),
    (setting(("nodes",), {}), SchemaError, "/nodes"),
    (setting(("nodes", 2), "root.relu"), SchemaError, "/nodes/2"),
    (setting(("parameters",), []), SchemaError, "/parameters"),
    (setting(("metadata",), []), SchemaError, "/metadata"),
    (setting(("metadata",), None), SchemaError, "/metadata"),
    (setting(("opsets",), {"trama": 0}), SchemaError, "/opsets/trama"),
    (setting(("opsets",), {"trama": "1"}), SchemaError, "/opsets/trama"),
    (setting(("opsets",), []), SchemaError, "/opsets"),
    (setting(("input_facts",), []), SchemaError, "/input_facts"),
    (setting(("input_facts",), [{"dtype": "float32", "rank": 2}]), SchemaError, "/input_facts/0"),
    (setting(("input_facts",), [{"shape": [-1]}]), SchemaError, "/input_facts/0/shape"),
    (setting(("input_facts",), [{"dtype": "float128"}]), TensorDataError, "/input_facts/0/dtype"),
    (setting(("output_facts",), "y"), SchemaError, "/output_facts"),
    # nodes
    (setting((*LINEAR, "id"), 7), SchemaError, "/nodes/1/id"),
    (setting((*LINEAR, "parent"), 7), SchemaError, "/nodes/1/parent"),
    (setting((*LINEAR, "op"), 7), SchemaError, "/nodes/1/op"),
    (setting((*LINEAR, "op"), ""), SchemaError, "/nodes/1/op"),
    (setting((*LINEAR, "inputs"), [ref("%input", "x")]), SchemaError, "/nodes/1/inputs"),
    (setting((*LINEAR, "inputs", "x"), "%input.x"), SchemaError, "/nodes/1/inputs/x"),
    (
        setting((*LINEAR, "inputs", "x"), {"node": "%input", "output": "x", "extra": 1}),
        SchemaError,
        "/nodes/1/inputs/x",
    ),
    (setting((*LINEAR, "outputs"), "y"), SchemaError, "/nodes/1/outputs"),
    (setting((*LINEAR, "outputs"), [None]), SchemaError, "/nodes/1/outputs/0"),
    (setting((*LINEAR, "parameters"), []), SchemaError, "/nodes/1/parameters"),
    (setting((*LINEAR, "parameters", "weight"), "root.linear.weight"), SchemaError, "/nodes/1/parameters/weight"),
    (setting((*LINEAR, "parameters", "weight"), {"name": 3}), SchemaError, "/nodes/1/parameters/weight"),
    (setting((*LINEAR, "output_bindings"), []), SchemaError, "/nodes/1/output_bindings"),
    (setting((*LINEAR, "output_bindings"), "y"), SchemaError, "/nodes/1/output_bindings"),
    (setting((*LINEAR, "metadata"), "note"), SchemaError, "/nodes/1/metadata"),
    # parameter entries
    (setting(WEIGHT, [1, 2]), SchemaError, "/parameters/root.linear.weight"),
    (setting((*WEIGHT, "learnable"), "true"), SchemaError, "/parameters/root.linear.weight"),
    (setting((*WEIGHT, "learnable"), 1), SchemaError, "/parameters/root.linear.weight"),
    (setting((*WEIGHT, "learnable"), None), SchemaError, "/parameters/root.linear.weight"),
    (setting(WEIGHT_VALUE, {"a": 1}), SchemaError, "/parameters/root.linear.weight/value"),
    (setting(("parameters", "dims.n", "value"), [1, {"a": 1}]), SchemaError, "/parameters/dims.n/value/1"),
    # tensors
    *[
        (setting((*WEIGHT_VALUE, "shape"), shape), TensorDataError, "/parameters/root.linear.weight/value")
        for shape in ([-2, -2], [2, -2], [2.0, 2], [True, 2], ["2", 2], [None, 2], "2,2", None, 4, {"0": 2}, [1] * 65)
    ],
    *[
        (setting((*WEIGHT_VALUE, "dtype"), dtype), TensorDataError, "/parameters/root.linear.weight/value")
        for dtype in ("float8", "Float32", "f4", "", "uint16", "complex64", None, 4, ["float32"])
    ],
    (setting((*WEIGHT_VALUE, "data"), None), TensorDataError, "/parameters/root.linear.weight/value"),
    (setting((*WEIGHT_VALUE, "data"), [1, 2]), TensorDataError, "/parameters/root.linear.weight/value"),
    # op names are dotted identifiers (docs/format.md, section 4.1), on every node
    *[
        (setting((*node, "op"), op), SchemaError, f"/nodes/{node[1]}/op")
        for node in (LINEAR, RELU)
        for op in BAD_OP_NAMES
    ],
    # and so are the namespaces of opsets
    *[
        (setting(("opsets",), {"trama": 1, key: 1}), SchemaError, f"/opsets/{key.replace('/', '~1')}")
        for key in ("", "tra\nma", "1lenses", "a..b", "lenses/x", "x" * 257)
    ],
    # fact shapes: at most 64 dimensions, each fitting a signed 64-bit integer
    (setting(("input_facts",), [{"shape": [2**63]}]), SchemaError, "/input_facts/0/shape/0"),
    (setting(("input_facts",), [{"shape": ["batch", 10**30]}]), SchemaError, "/input_facts/0/shape/1"),
    (setting(("input_facts",), [{"shape": [1] * 65}]), SchemaError, "/input_facts/0/shape"),
    (setting(("output_facts",), [{"shape": [2**64, 1]}]), SchemaError, "/output_facts/0/shape/0"),
    (setting(("output_facts",), [{"shape": ["n"] * 65}]), SchemaError, "/output_facts/0/shape"),
]


def _case_id(case: tuple[Any, ...]) -> str:
    return case[0].__name__


@pytest.mark.parametrize(("mutate", "error", "location"), WRONG_TYPES, ids=[_case_id(c) for c in WRONG_TYPES])
def test_wrong_types(make_doc: Callable[[], Doc], mutate: Mutator, error: type[TramaError], location: str) -> None:
    doc = make_doc()
    mutate(doc)
    assert load_error(text_of(doc), error).location == location


def test_output_bindings_of_wrong_type(base_doc: Doc) -> None:
    base_doc["nodes"][0]["output_bindings"] = [ref("root.relu", "y")]
    assert load_error(text_of(base_doc), SchemaError).location == "/nodes/0/output_bindings"


def test_65_dimensions_are_refused_and_64_accepted(base_doc: Doc, encode_tensor: Any) -> None:
    base_doc["parameters"]["root.linear.weight"]["value"] = encode_tensor(np.zeros([1] * 64, dtype="<f4"))
    trama.loads(text_of(base_doc))
    base_doc["parameters"]["root.linear.weight"]["value"]["shape"] = [1] * 65
    load_error(text_of(base_doc), TensorDataError, "at most 64")


# ---------------------------------------------------------------------------------------------
# Tensor bytes
# ---------------------------------------------------------------------------------------------


def test_base64_shorter_or_longer_than_dtype_times_shape(base_doc: Doc) -> None:
    data = base_doc["parameters"]["root.linear.weight"]["value"]["data"]
    for wrong in (data[:-4], data + "AAAA", data[:-1], data + "=", ""):
        base_doc["parameters"]["root.linear.weight"]["value"]["data"] = wrong
        error = load_error(text_of(base_doc), TensorDataError, "base64 characters")
        assert error.location == "/parameters/root.linear.weight/value"


def test_invalid_base64_characters_of_the_right_length_fail_on_access(base_doc: Doc) -> None:
    value = base_doc["parameters"]["root.linear.weight"]["value"]
    for bad in ("!" * len(value["data"]), "-_" + value["data"][2:], " " + value["data"][1:]):
        value["data"] = bad
        model = trama.loads(text_of(base_doc))  # sizes agree, so the text is only decoded on use
        tensor = model.parameters["root.linear.weight"].value
        assert isinstance(tensor, trama.Tensor)
        with pytest.raises(TensorDataError, match="not valid base64") as info:
            np.asarray(tensor)
        assert checked(info.value).location == "/parameters/root.linear.weight/value"


def test_base64_of_the_right_length_that_decodes_short(base_doc: Doc) -> None:
    # 4 characters encode 1 to 3 bytes; "AA==" is 1 byte where float16[1] needs 2.
    base_doc["parameters"]["root.linear.weight"]["value"] = {"dtype": "float16", "shape": [1], "data": "AA=="}
    model = trama.loads(text_of(base_doc))
    with pytest.raises(TensorDataError, match="decodes to 1 bytes"):
        touch_tensors(model)


@pytest.mark.parametrize("byte", [2, 0xFF, 0x80])
def test_bool_tensor_with_a_byte_other_than_0_or_1(base_doc: Doc, encode_tensor: Any, byte: int) -> None:
    value = encode_tensor(np.array([1, byte, 0], dtype=np.uint8), dtype="bool")
    base_doc["parameters"]["root.linear.weight"]["value"] = value
    model = trama.loads(text_of(base_doc))
    with pytest.raises(TensorDataError, match="bool") as info:
        touch_tensors(model)
    checked(info.value)


def test_bool_tensor_with_zeros_and_ones_is_fine(base_doc: Doc, encode_tensor: Any) -> None:
    base_doc["parameters"]["root.linear.weight"]["value"] = encode_tensor(np.array([True, False, True]))
    model = trama.loads(text_of(base_doc))
    assert np.asarray(model.parameters["root.linear.weight"].value).tolist() == [True, False, True]


@pytest.mark.parametrize(
    ("shape", "data"),
    [
        ([2**40, 2**40], "AAAA"),
        ([2**31, 2**31, 2**31], "AAAAAAAA"),
        ([2**62, 4], ""),
        ([0, 2**62, 4], ""),
        ([0, 2**70], ""),
        ([2**40] * 64, "AAAA"),
    ],
)
def test_absurd_shapes_fail_without_allocating(base_doc: Doc, shape: list[int], data: str) -> None:
    base_doc["parameters"]["root.linear.weight"]["value"] = {"dtype": "float64", "shape": shape, "data": data}
    text = text_of(base_doc)
    tracemalloc.start()
    try:
        with pytest.raises(TensorDataError) as info:
            touch_tensors(trama.loads(text))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    checked(info.value)
    assert peak < 10 * 1024 * 1024


def test_empty_tensor_with_large_dimensions_is_fine(base_doc: Doc) -> None:
    base_doc["parameters"]["root.linear.weight"]["value"] = {"dtype": "int8", "shape": [0, 1000, 1000], "data": ""}
    model = trama.loads(text_of(base_doc))
    assert np.asarray(model.parameters["root.linear.weight"].value).shape == (0, 1000, 1000)


# ---------------------------------------------------------------------------------------------
# Structure: references, bindings, parents, ids, the parameter table
# ---------------------------------------------------------------------------------------------


def reorder(*order: int) -> Mutator:
    def mutate(doc: Doc) -> None:
        doc["nodes"] = [doc["nodes"][i] for i in order]

    return mutate


def rename_entry(old: str, new: str) -> Mutator:
    def mutate(doc: Doc) -> None:
        doc["parameters"][new] = doc["parameters"].pop(old)
        for node in doc["nodes"]:
            for slot, target in node["parameters"].items():
                if target == {"name": old}:
                    node["parameters"][slot] = {"name": new}

    return mutate


def add_top_level_node(node: Doc) -> Mutator:
    def mutate(doc: Doc) -> None:
        doc["nodes"].insert(0, node)

    return mutate


def combined(*mutators: Mutator) -> Mutator:
    def mutate(doc: Doc) -> None:
        for m in mutators:
            m(doc)

    return mutate


STRUCTURE = [
    # references
    (
        "unknown-node",
        setting((*RELU, "inputs", "x"), ref("root.nope", "y")),
        "unknown node 'root.nope'",
        "/nodes/2/inputs/x",
    ),
    ("later-node", setting((*LINEAR, "inputs", "x"), ref("root.relu", "y")), "comes later", "/nodes/1/inputs/x"),
    ("self-cycle", setting((*RELU, "inputs", "x"), ref("root.relu", "y")), "comes later", "/nodes/2/inputs/x"),
    (
        "other-scope-parent",
        setting((*RELU, "inputs", "x"), ref("root", "y")),
        "not in the same scope",
        "/nodes/2/inputs/x",
    ),
    (
        "other-scope-top-level",
        combined(
            add_top_level_node(leaf("pre", None, {"x": ref("%input", "x")})),
            setting(("nodes", 3, "inputs", "x"), ref("pre", "y")),
        ),
        "not in the same scope",
        "/nodes/3/inputs/x",
    ),
    (
        "undeclared-output",
        setting((*RELU, "inputs", "x"), ref("root.linear", "z")),
        "has no output 'z'",
        "/nodes/2/inputs/x",
    ),
    (
        "unknown-scope-input",
        setting((*LINEAR, "inputs", "x"), ref("%input", "w")),
        "'w' is not an input of composite 'root'",
        "/nodes/1/inputs/x",
    ),
    (
        "unknown-model-input",
        setting(("nodes", 0, "inputs", "x"), ref("%input", "w")),
        "'w' is not an input of the model",
        "/nodes/0/inputs/x",
    ),
    ("model-output-unknown", setting(("outputs", 0), ref("nope", "y")), "unknown node 'nope'", "/outputs/0"),
    ("model-output-nested", setting(("outputs", 0), ref("root.linear", "y")), "not in the same scope", "/outputs/0"),
    ("model-output-undeclared", setting(("outputs", 0), ref("root", "z")), "has no output 'z'", "/outputs/0"),
    ("model-output-input", setting(("outputs", 0), ref("%input", "x")), "top-level node", "/outputs/0"),
    # bindings
    ("binding-missing", setting(("nodes", 0, "output_bindings"), {}), r"missing \['y'\]", "/nodes/0/output_bindings"),
    (
        "binding-extra",
        setting(("nodes", 0, "output_bindings", "z"), ref("root.relu", "y")),
        r"not declared \['z'\]",
        "/nodes/0/output_bindings",
    ),
    (
        "binding-self",
        setting(("nodes", 0, "output_bindings", "y"), ref("root", "y")),
        "not a child",
        "/nodes/0/output_bindings/y",
    ),
    (
        "binding-outside",
        combined(
            add_top_level_node(leaf("pre", None, {"x": ref("%input", "x")})),
            setting(("nodes", 1, "output_bindings", "y"), ref("pre", "y")),
        ),
        "not a child",
        "/nodes/1/output_bindings/y",
    ),
    (
        "binding-unknown",
        setting(("nodes", 0, "output_bindings", "y"), ref("root.nope", "y")),
        "unknown node",
        "/nodes/0/output_bindings/y",
    ),
    (
        "binding-undeclared",
        setting(("nodes", 0, "output_bindings", "y"), ref("root.relu", "q")),
        "has no output 'q'",
        "/nodes/0/output_bindings/y",
    ),
    (
        "binding-bad-input",
        setting(("nodes", 0, "output_bindings", "y"), ref("%input", "w")),
        "'w' is not an input",
        "/nodes/0/output_bindings/y",
    ),
    # parents
    ("parent-mismatch", setting((*LINEAR, "parent"), None), "dotted prefix", "/nodes/1/parent"),
    ("parent-wrong-name", setting((*LINEAR, "parent"), "rot"), "dotted prefix", "/nodes/1/parent"),
    ("parent-missing", appending(leaf("ghost.child", "ghost")), "'ghost' does not exist", "/nodes/3/parent"),
    ("parent-later", reorder(1, 0, 2), "'root' does not exist or comes later", "/nodes/0/parent"),
    ("parent-leaf", appending(leaf("root.relu.inner", "root.relu")), "'root.relu' is a leaf", "/nodes/3/parent"),
    # ids
    ("duplicate-id", appending(leaf("root.relu", "root", {"x": ref("root.linear", "y")})), "used twice", "/nodes/3/id"),
    (
        "id-not-dotted",
        combined(
            setting((*RELU, "id"), "root.re lu"), setting(("nodes", 0, "output_bindings", "y"), ref("root.re lu", "y"))
        ),
        "not a dotted identifier",
        "/nodes/2/id",
    ),
    (
        "id-empty-segment",
        combined(setting((*RELU, "id"), "root..relu"), setting((*RELU, "parent"), "root.")),
        "not a dotted identifier",
        "/nodes/2/id",
    ),
    # parameter table
    (
        "slot-missing-entry",
        setting((*LINEAR, "parameters", "weight"), {"name": "nope.w"}),
        "missing parameter 'nope.w'",
        "/nodes/1/parameters/weight",
    ),
    (
        "unreferenced-entry",
        setting(("parameters", "extra.p"), {"value": 1, "learnable": False}),
        "not referenced",
        "/parameters/extra.p",
    ),
    ("entry-named-like-node", rename_entry("root.linear.bias", "root.relu"), "also a node id", "/parameters/root.relu"),
    (
        "entry-name-space",
        rename_entry("root.linear.bias", "bad name"),
        "not a dotted identifier",
        "/parameters/bad name",
    ),
    ("entry-name-dots", rename_entry("root.linear.bias", "a..b"), "not a dotted identifier", "/parameters/a..b"),
    ("entry-name-newline", rename_entry("root.linear.bias", "p\n"), "not a dotted identifier", "/parameters/p\n"),
    ("entry-name-empty", rename_entry("root.linear.bias", ""), "not a dotted identifier", "/parameters/"),
    ("entry-name-slash", rename_entry("root.linear.bias", "a/b"), "not a dotted identifier", "/parameters/a~1b"),
    # names of inputs, ports and outputs
    ("model-input-name", setting(("inputs",), ["x", "bad name"]), "not an identifier", "/inputs/1"),
    ("model-input-twice", setting(("inputs",), ["x", "x"]), "repeat", "/inputs"),
    ("port-name", setting((*RELU, "inputs"), {"a.b": ref("root.linear", "y")}), "port name 'a.b'", "/nodes/2/inputs"),
    ("output-name", setting((*RELU, "outputs"), ["y", "y z"]), "output name 'y z'", "/nodes/2/outputs/1"),
    ("outputs-twice", setting((*RELU, "outputs"), ["y", "y"]), "repeat", "/nodes/2/outputs"),
]


@pytest.mark.parametrize(("mutate", "message", "location"), [c[1:] for c in STRUCTURE], ids=[c[0] for c in STRUCTURE])
def test_structural_errors(make_doc: Callable[[], Doc], mutate: Mutator, message: str, location: str) -> None:
    doc = make_doc()
    mutate(doc)
    error = load_error(text_of(doc), ValidationError, message)
    assert error.location == location
    assert error.all_errors[0] is error


def test_a_wrong_parent_is_found_while_decoding(base_doc: Doc) -> None:
    # The in-memory Node derives its parent from its id, so a mismatch cannot wait for validate.
    base_doc["nodes"][1]["parent"] = None
    with pytest.raises(ValidationError, match="dotted prefix"):
        trama.loads(text_of(base_doc), validate=False)


def test_validate_false_defers_structural_errors_to_validate(base_doc: Doc) -> None:
    base_doc["nodes"][2]["inputs"]["x"] = ref("root.nope", "y")
    base_doc["parameters"]["extra.p"] = {"value": 1, "learnable": False}
    model = trama.loads(text_of(base_doc), validate=False)
    errors = trama.collect_errors(model)
    assert [e.location for e in errors] == ["/nodes/2/inputs/x", "/parameters/extra.p"]
    with pytest.raises(ValidationError) as info:
        trama.validate(model)
    assert info.value.location == "/nodes/2/inputs/x"
    assert [(e.location, e.message) for e in info.value.all_errors] == [(e.location, e.message) for e in errors]


# ---------------------------------------------------------------------------------------------
# Format versions
# ---------------------------------------------------------------------------------------------


def test_newer_major_version_names_both_versions(base_doc: Doc) -> None:
    base_doc["format_version"] = "2.0"
    error = load_error(text_of(base_doc), FormatVersionError)
    assert "2.0" in error.message
    assert trama.FORMAT_VERSION in error.message
    assert error.location == "/format_version"


@pytest.mark.parametrize("version", ["1", "1.0.0", "v1.0", "01.0", "1.00", "1.", ".0", "", " 1.0", "1.0\n", "1,0"])
def test_malformed_version_strings(base_doc: Doc, version: str) -> None:
    base_doc["format_version"] = version
    error = load_error(text_of(base_doc), FormatVersionError, "format_version must be a string like")
    assert error.location == "/format_version"


@pytest.mark.parametrize("version", [1.0, 1, None, ["1.0"], {"major": 1}])
def test_version_of_the_wrong_type(base_doc: Doc, version: Any) -> None:
    base_doc["format_version"] = version
    load_error(text_of(base_doc), FormatVersionError)


@pytest.mark.parametrize("version", ["0.0", "0.3", "0.10"])
def test_unknown_older_version(base_doc: Doc, version: str) -> None:
    base_doc["format_version"] = version
    error = load_error(text_of(base_doc), FormatVersionError, "unknown format version")
    assert version in error.message


UNKNOWN_FIELDS = [
    ("top-level", setting(("extra",), 1), "/"),
    ("node", setting((*LINEAR, "extra"), 1), "/nodes/1"),
    ("entry", setting((*WEIGHT, "extra"), 1), "/parameters/root.linear.weight"),
]


@pytest.mark.parametrize(("mutate", "location"), [c[1:] for c in UNKNOWN_FIELDS], ids=[c[0] for c in UNKNOWN_FIELDS])
def test_unknown_fields_are_errors_in_the_current_version(
    make_doc: Callable[[], Doc], mutate: Mutator, location: str
) -> None:
    doc = make_doc()
    mutate(doc)
    error = load_error(text_of(doc), SchemaError, r"unknown field\(s\) \['extra'\]")
    assert error.location == location


def nested_doc(make_doc: Callable[[], Doc]) -> Doc:
    """The small valid document as the current format (1.3, nested) writes it: a newer minor
    (1.4 and on) is of that shape, not of the flat one."""
    return json.loads(trama.dumps(trama.loads(text_of(make_doc()))))


#: The root composite's Linear, and its weight, in the nested document.
NESTED_LINEAR = ("nodes", 0, "nodes", 0)
NESTED_WEIGHT = (*NESTED_LINEAR, "set", "weight")

UNKNOWN_FIELDS_NESTED = [
    ("top-level", setting(("extra",), 1), "/"),
    ("node", setting((*NESTED_LINEAR, "extra"), 1), "/nodes/0/nodes/0"),
    ("tensor", setting((*NESTED_WEIGHT, "extra"), 1), "/nodes/0/nodes/0/set/weight"),
]


@pytest.mark.parametrize(
    ("mutate", "location"), [c[1:] for c in UNKNOWN_FIELDS_NESTED], ids=[c[0] for c in UNKNOWN_FIELDS_NESTED]
)
def test_unknown_fields_are_errors_in_the_nested_form_of_the_current_version(
    make_doc: Callable[[], Doc], mutate: Mutator, location: str
) -> None:
    doc = nested_doc(make_doc)
    mutate(doc)
    error = load_error(text_of(doc), SchemaError, r"unknown field\(s\) \['extra'\]")
    # The flat reader says "/" for the document itself, the nested one "" (the JSON pointer).
    assert error.location == location or (location == "/" and error.location == "")


@pytest.mark.parametrize(
    ("mutate", "location"), [c[1:] for c in UNKNOWN_FIELDS_NESTED], ids=[c[0] for c in UNKNOWN_FIELDS_NESTED]
)
def test_unknown_fields_are_ignored_in_a_newer_minor(
    make_doc: Callable[[], Doc], mutate: Mutator, location: str
) -> None:
    doc = nested_doc(make_doc)
    mutate(doc)
    doc["format_version"] = "1.7"
    model = trama.loads(text_of(doc))
    assert model.source_format_version == "1.7"
    assert model.parameters == trama.loads(text_of(make_doc())).parameters
    del location


def test_newer_minor_still_checks_known_fields(make_doc: Callable[[], Doc]) -> None:
    doc = nested_doc(make_doc)
    doc["format_version"] = "1.7"
    at(doc, NESTED_LINEAR)["name"] = 3
    error = load_error(text_of(doc), SchemaError)
    assert error.location.startswith("/nodes/0/nodes/0")


# ---------------------------------------------------------------------------------------------
# The checksum of an inline tensor (format 1.2): form, place and version
# ---------------------------------------------------------------------------------------------

GOOD_SUM = "xxh3-64:" + "0" * 16


def with_checksum(doc: Doc, entry: str, checksum: Any, version: str = "1.2") -> Doc:
    doc["format_version"] = version
    doc["parameters"][entry]["checksum"] = checksum
    return doc


@pytest.mark.parametrize(
    "checksum",
    [
        "md5:" + "0" * 32,
        "xxh3-64:" + "0" * 15,
        "xxh3-64:" + "0" * 17,
        "xxh3-64:" + "g" * 16,
        "XXH3-64:" + "0" * 16,
        "sha256:" + "0" * 63,
        "xxh3-64:",
        "",
        "xxh3-64:" + "0" * 16 + "\n",
        7,
        None,
        ["xxh3-64:" + "0" * 16],
        {"xxh3-64": "0" * 16},
    ],
)
def test_malformed_entry_checksums_are_refused_at_load(base_doc: Doc, checksum: Any) -> None:
    doc = with_checksum(base_doc, "root.linear.weight", checksum)
    error = load_error(text_of(doc), SchemaError, "a checksum is")
    assert error.location == "/parameters/root.linear.weight/checksum"


@pytest.mark.parametrize(
    ("entry", "value", "message"),
    [
        ("dims.n", 2, "not one"),
        ("dims.n", 2.5, "not one"),
        ("dims.n", "text", "not one"),
        ("dims.n", None, "not one"),
        ("dims.n", [1, 2], "not one"),
        ("root.linear.weight", {"dtype": "float32", "shape": [1], "external": {}}, "an external tensor"),
    ],
)
def test_a_checksum_belongs_beside_an_inline_tensor_only(base_doc: Doc, entry: str, value: Any, message: str) -> None:
    base_doc["parameters"][entry]["value"] = value
    doc = with_checksum(base_doc, entry, GOOD_SUM)
    error = load_error(text_of(doc), SchemaError, message)
    assert error.location == f"/parameters/{entry}/checksum"


@pytest.mark.parametrize("version", ["0.1", "0.2", "1.0", "1.1"])
def test_a_checksum_in_a_document_older_than_1_2_is_refused(base_doc: Doc, version: str) -> None:
    if version == "0.1":  # 0.1 keeps entries inline in the slots
        base_doc = {**base_doc, "format_version": "0.1"}
        table = base_doc.pop("parameters")
        for node in base_doc["nodes"]:
            node["parameters"] = {slot: dict(table[ref["name"]]) for slot, ref in node["parameters"].items()}
        base_doc["nodes"][1]["parameters"]["weight"]["checksum"] = GOOD_SUM
        error = load_error(text_of(base_doc), SchemaError, "new in format 1.2")
        assert error.location == "/parameters/root.linear.weight/checksum"
        return
    doc = with_checksum(base_doc, "root.linear.weight", GOOD_SUM, version)
    error = load_error(
        text_of(doc), SchemaError, f"'checksum' is new in format 1.2; this document declares format {version}"
    )
    assert error.location == "/parameters/root.linear.weight/checksum"


def test_a_wrong_checksum_is_found_on_use_and_by_nothing_earlier(base_doc: Doc) -> None:
    doc = with_checksum(base_doc, "root.linear.weight", GOOD_SUM)
    model = trama.loads(text_of(doc))  # the bytes are not read at load
    with pytest.raises(TensorDataError, match="does not match the checksum") as info:
        touch_tensors(model)
    assert checked(info.value).location == "/parameters/root.linear.weight/checksum"


def test_the_right_checksum_loads_in_1_2_and_in_a_newer_minor(base_doc: Doc) -> None:
    import xxhash

    weight = np.array([[1.0, -2.0], [0.5, 4.0]], dtype="<f4")
    checksum = "xxh3-64:" + xxhash.xxh3_64_hexdigest(b"float32[2,2]" + weight.tobytes())
    doc = with_checksum(copy_doc(base_doc), "root.linear.weight", checksum, "1.2")
    model = trama.loads(text_of(doc))
    assert np.array_equal(np.asarray(model.parameters["root.linear.weight"].value), weight)
    # A newer minor is of the nested shape, where an xxh3-64 checksum is its 16 digits alone.
    nested = json.loads(trama.dumps(model))
    assert at(nested, NESTED_WEIGHT)["checksum"] == checksum.removeprefix("xxh3-64:")
    for version in ("1.3", "1.9"):
        nested["format_version"] = version
        model = trama.loads(text_of(nested))
        assert model.source_format_version == version
        assert np.array_equal(np.asarray(model.parameters["root.linear.weight"].value), weight)
    at(nested, NESTED_WEIGHT)["checksum"] = "0" * 16
    with pytest.raises(TensorDataError, match="does not match the checksum"):
        touch_tensors(trama.loads(text_of(nested)))


def copy_doc(doc: Doc) -> Doc:
    return json.loads(json.dumps(doc))


# ---------------------------------------------------------------------------------------------
# Node depth (at most 512 levels)
# ---------------------------------------------------------------------------------------------


def chain_doc(depth: int) -> Doc:
    ids = [".".join(["n"] * k) for k in range(1, depth + 1)]
    nodes = [
        {
            "id": node_id,
            "parent": ids[k - 1] if k else None,
            "op": "Graph" if k < depth - 1 else "ReLU",
            "inputs": {"x": ref("%input", "x")},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": {"y": ref(ids[k + 1], "y")} if k < depth - 1 else None,
        }
        for k, node_id in enumerate(ids)
    ]
    return {"format_version": "1.2", "inputs": ["x"], "outputs": [ref("n", "y")], "nodes": nodes, "parameters": {}}


def test_node_depth_512_is_read_and_513_refused_where_it_starts() -> None:
    assert len(trama.loads(text_of(chain_doc(512))).nodes) == 512
    error = load_error(text_of(chain_doc(513)), SchemaError, "513 segments")
    assert error.location == "/nodes/512/id"
    # the careful path of the decoder says the same (a node with metadata does not take the fast one)
    doc = chain_doc(513)
    doc["nodes"][512]["metadata"] = {"note": 1}
    assert load_error(text_of(doc), SchemaError, "513 segments").location == "/nodes/512/id"


def test_op_name_errors_show_the_name_escaped(base_doc: Doc) -> None:
    base_doc["nodes"][2]["op"] = "ReLU\n  root.evil = Evil(%x)\x1b[0m"
    error = load_error(text_of(base_doc), SchemaError, "is not a dotted identifier")
    assert "\n" not in str(error)
    assert "\x1b" not in str(error)
    assert "'ReLU\\n  root.evil = Evil(%x)\\x1b[0m'" in error.message


# ---------------------------------------------------------------------------------------------
# External weights
# ---------------------------------------------------------------------------------------------


def dump_external(folder: Path, make_doc: Callable[[], Doc], version: str) -> tuple[Path, Path]:
    model = trama.loads(text_of(make_doc()))
    path = folder / "model.trama.json"
    trama.dump(model, path, weights="external", format_version=version)
    # the weights file is the one the document names (its name is the writer's choice)
    doc = json.loads(path.read_text())
    if version == "1.2":
        return path, folder / doc["parameters"]["root.linear.weight"]["value"]["external"]["path"]
    return path, folder / doc["weights"]


@pytest.fixture
def external_pair(tmp_path: Path, make_doc: Callable[[], Doc]) -> tuple[Path, Path]:
    """A valid document with external weights, in the flat form (format 1.2), whose external
    references the tests edit: (document path, weights path)."""
    return dump_external(tmp_path, make_doc, "1.2")


@pytest.fixture(params=["1.2", "1.3"])
def any_external_pair(request: pytest.FixtureRequest, tmp_path: Path, make_doc: Callable[[], Doc]) -> tuple[Path, Path]:
    """A valid document with external weights, in either form: for tests of the weights file."""
    return dump_external(tmp_path, make_doc, request.param)


def weight_location(path: Path) -> str:
    """Where the document at ``path`` gives the weight's tensor."""
    if json.loads(path.read_text())["format_version"] == "1.2":
        return "/parameters/root.linear.weight/value/external"
    return "/" + "/".join(map(str, NESTED_WEIGHT))


def edit_doc(path: Path, edit: Callable[[Doc], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def set_external(field: str, value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        doc["parameters"]["root.linear.weight"]["value"]["external"][field] = value

    return edit


def load_and_touch(path: Path) -> None:
    touch_tensors(trama.load(path))


@pytest.mark.parametrize(
    "bad_path",
    [
        "/etc/passwd",
        "../model.safetensors",
        "sub/../../model.safetensors",
        "..",
        "",
        "C:\\w.safetensors",
        "a\\..\\b",
    ],
)
def test_external_path_must_stay_in_the_folder(external_pair: tuple[Path, Path], bad_path: str) -> None:
    path, _ = external_pair
    edit_doc(path, set_external("path", bad_path))
    with pytest.raises(WeightsFileError, match="must be relative") as info:
        trama.load(path)
    assert checked(info.value).location == "/parameters/root.linear.weight/value/external/path"


@pytest.mark.parametrize("bad_path", ["/etc/passwd", "../model.safetensors", "..", "", "C:\\w.safetensors"])
def test_the_weights_file_of_a_nested_document_must_stay_in_the_folder(
    tmp_path: Path, make_doc: Callable[[], Doc], bad_path: str
) -> None:
    path, _ = dump_external(tmp_path, make_doc, "1.3")
    edit_doc(path, lambda doc: doc.update(weights=bad_path))
    with pytest.raises(WeightsFileError, match="must be relative") as info:
        trama.load(path)
    checked(info.value)


def test_the_weights_file_of_a_nested_document_may_be_in_a_subfolder(
    tmp_path: Path, make_doc: Callable[[], Doc]
) -> None:
    path, weights = dump_external(tmp_path, make_doc, "1.3")
    (path.parent / "sub").mkdir()
    weights.rename(path.parent / "sub" / weights.name)
    edit_doc(path, lambda doc: doc.update(weights=f"./sub/{weights.name}"))
    model = trama.load(path)
    touch_tensors(model)
    assert np.asarray(model.parameters["root.linear.weight"].value).tolist() == [[1.0, -2.0], [0.5, 4.0]]


def resolves(doc: Any, pointer: str) -> bool:
    """Whether the JSON Pointer ``pointer`` names a member of ``doc``."""
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict) and key in doc:
            doc = doc[key]
        elif isinstance(doc, list) and key.isdigit() and int(key) < len(doc):
            doc = doc[int(key)]
        else:
            return False
    return True


def _bad_weights_path(path: Path, weights: Path) -> None:
    edit_doc(path, lambda doc: doc.update(weights="../" + weights.name))


def _changed_table_tensor(path: Path, weights: Path) -> None:
    # dims.n (shared by two slots: in the table) made a tensor, its bytes in the weights file changed
    model = trama.load(path)
    model.parameters["dims.n"] = trama.Parameter(trama.Tensor.from_array(np.arange(3, dtype=np.float32)))
    trama.dump(model, path, weights="external")
    doc = json.loads(path.read_text())
    assert "dims.n" in doc["parameters"]
    data = bytearray(trama.weights_path(path).read_bytes())
    data[-1] ^= 0xFF
    trama.weights_path(path).write_bytes(bytes(data))


@pytest.mark.parametrize("change", [_bad_weights_path, _changed_table_tensor], ids=["weights path", "table tensor"])
def test_an_error_of_the_weights_file_of_a_nested_document_is_located_in_its_text(
    tmp_path: Path, make_doc: Callable[[], Doc], change: Callable[[Path, Path], None]
) -> None:
    path, weights = dump_external(tmp_path, make_doc, "1.3")
    change(path, weights)
    with pytest.raises(WeightsFileError) as info:
        load_and_touch(path)
    location = checked(info.value).location
    assert resolves(json.loads(path.read_text()), location), location


def test_external_path_may_have_dot_segments_and_subfolders(external_pair: tuple[Path, Path]) -> None:
    path, weights = external_pair
    (path.parent / "sub").mkdir()
    weights.rename(path.parent / "sub" / weights.name)

    def edit(doc: Doc) -> None:
        for entry in doc["parameters"].values():
            if isinstance(entry["value"], dict):
                entry["value"]["external"]["path"] = f"./sub/{weights.name}"

    edit_doc(path, edit)
    model = trama.load(path)
    touch_tensors(model)
    assert np.asarray(model.parameters["root.linear.weight"].value).tolist() == [[1.0, -2.0], [0.5, 4.0]]


def test_external_path_naming_the_folder_itself(external_pair: tuple[Path, Path]) -> None:
    path, _ = external_pair
    edit_doc(path, set_external("path", "."))
    with pytest.raises(WeightsFileError) as info:
        load_and_touch(path)
    checked(info.value)


def test_external_path_with_dotdot_is_refused_even_if_the_file_exists(external_pair: tuple[Path, Path]) -> None:
    path, weights = external_pair
    inner = path.parent / "inner"
    inner.mkdir()
    moved = inner / path.name
    path.rename(moved)
    edit_doc(moved, set_external("path", "../" + weights.name))
    with pytest.raises(WeightsFileError, match="must be relative"):
        trama.load(moved)


def test_external_file_missing(any_external_pair: tuple[Path, Path]) -> None:
    path, weights = any_external_pair
    weights.unlink()
    with pytest.raises(WeightsFileError, match="cannot open weights file") as info:
        trama.load(path)
    checked(info.value)


@pytest.mark.parametrize(
    "reference",
    [None, "model.safetensors", {"path": "model.safetensors", "key": "k"}, {"path": 1, "key": "k", "checksum": "c"}],
)
def test_malformed_external_reference(external_pair: tuple[Path, Path], reference: Any) -> None:
    path, _ = external_pair

    def edit(doc: Doc) -> None:
        doc["parameters"]["root.linear.weight"]["value"]["external"] = reference

    edit_doc(path, edit)
    with pytest.raises(WeightsFileError) as info:
        trama.load(path)
    assert checked(info.value).location == "/parameters/root.linear.weight/value/external"


@pytest.mark.parametrize(
    "reference",
    [None, {"path": "w.safetensors", "key": "k"}, {"path": "../w.safetensors", "key": "k", "checksum": "c"}],
)
def test_external_reference_is_checked_even_without_a_folder(base_doc: Doc, reference: Any) -> None:
    # Without base_dir the file cannot be opened, but the reference's form and path can be checked.
    value = base_doc["parameters"]["root.linear.weight"]["value"]
    del value["data"]
    value["external"] = reference
    error = load_error(text_of(base_doc), WeightsFileError)
    assert error.location.startswith("/parameters/root.linear.weight/value/external")


def test_checksum_mismatch_is_found_on_access(external_pair: tuple[Path, Path]) -> None:
    path, _ = external_pair
    edit_doc(path, set_external("checksum", "xxh3-64:0123456789abcdef"))
    model = trama.load(path)  # lazy: nothing read yet
    with pytest.raises(WeightsFileError, match="checksum") as info:
        touch_tensors(model)
    assert checked(info.value).location == "/parameters/root.linear.weight/value/external"


def test_unknown_checksum_algorithm(external_pair: tuple[Path, Path]) -> None:
    path, _ = external_pair
    edit_doc(path, set_external("checksum", "md5:00"))
    with pytest.raises(WeightsFileError, match="unknown checksum algorithm"):
        load_and_touch(path)


def test_unknown_key(external_pair: tuple[Path, Path]) -> None:
    path, _ = external_pair
    edit_doc(path, set_external("key", "nope"))
    with pytest.raises(WeightsFileError, match="no tensor 'nope'"):
        load_and_touch(path)


def header_of(weights: Path) -> tuple[dict[str, Any], bytes]:
    data = weights.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def write_weights(weights: Path, header: Any, body: bytes) -> None:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    weights.write_bytes(struct.pack("<Q", len(text)) + text + body)


@pytest.mark.parametrize(
    "header",
    [b"", b"{", b"not json", b"[]", b"null", b"\xff\xfe", b"[" * 100_000, b'{"a": 1e400}'],
    ids=["empty", "open-brace", "text", "array", "null", "bytes", "deep", "big-number"],
)
def test_corrupt_safetensors_header(any_external_pair: tuple[Path, Path], header: bytes) -> None:
    path, weights = any_external_pair
    _, body = header_of(weights)
    write_weights(weights, header, body)
    with pytest.raises(WeightsFileError) as info:
        load_and_touch(path)
    checked(info.value)


def test_safetensors_header_length_beyond_the_file(any_external_pair: tuple[Path, Path]) -> None:
    path, weights = any_external_pair
    data = weights.read_bytes()
    for length in (len(data), 2**63, 2**64 - 1):
        weights.write_bytes(struct.pack("<Q", length) + data[8:])
        with pytest.raises(WeightsFileError, match="corrupt safetensors header"):
            trama.load(path)


def test_truncated_safetensors_file(any_external_pair: tuple[Path, Path]) -> None:
    path, weights = any_external_pair
    data = weights.read_bytes()
    for cut in range(len(data)):
        weights.write_bytes(data[:cut])
        with pytest.raises(WeightsFileError) as info:
            load_and_touch(path)
        checked(info.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dtype", "F16", "the document says float32"),
        ("dtype", "I32", "the document says float32"),
        ("dtype", None, "the document says float32"),
        ("shape", [4], "the document says float32"),
        ("shape", [2, 2, 1], "the document says float32"),
        ("data_offsets", [0, 8], "corrupt offsets"),
        ("data_offsets", [0, 10**12], "corrupt offsets"),
        ("data_offsets", [8, 0], "corrupt offsets"),
        ("data_offsets", [-16, 0], "corrupt offsets"),
        ("data_offsets", "0-16", "corrupt offsets"),  # not a dtype or shape mismatch (issue 14)
    ],
)
def test_safetensors_entry_disagreeing_with_the_document(
    any_external_pair: tuple[Path, Path], field: str, value: Any, message: str
) -> None:
    path, weights = any_external_pair
    header, body = header_of(weights)
    header["root.linear.weight"][field] = value
    write_weights(weights, header, body)
    model = trama.load(path)
    with pytest.raises(WeightsFileError, match=message) as info:
        touch_tensors(model)
    assert checked(info.value).location == weight_location(path)


@pytest.mark.parametrize(
    ("dtype", "shape"), [("int32", [2, 2]), ("float32", [4]), ("float64", [2, 2]), ("float32", [4, 1])]
)
def test_document_dtype_or_shape_disagreeing_with_safetensors(
    external_pair: tuple[Path, Path], dtype: str, shape: list[int]
) -> None:
    path, _ = external_pair

    def edit(doc: Doc) -> None:
        doc["parameters"]["root.linear.weight"]["value"]["dtype"] = dtype
        doc["parameters"]["root.linear.weight"]["value"]["shape"] = shape

    edit_doc(path, edit)
    with pytest.raises(WeightsFileError, match="but the document says") as info:
        load_and_touch(path)
    checked(info.value)


@pytest.mark.parametrize(
    ("dtype", "shape"), [("float8", [2, 2]), ("float32", [-1]), ("float32", [2**40, 2**40]), ("float32", [0, 2**70])]
)
def test_external_tensor_with_bad_dtype_or_shape_in_the_document(
    external_pair: tuple[Path, Path], dtype: str, shape: list[int]
) -> None:
    path, _ = external_pair
    edit_doc(path, lambda doc: doc["parameters"]["root.linear.weight"]["value"].update(dtype=dtype, shape=shape))
    tracemalloc.start()
    try:
        with pytest.raises(TensorDataError) as info:
            load_and_touch(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert checked(info.value).location == "/parameters/root.linear.weight/value"
    assert peak < 10 * 1024 * 1024


def test_tensor_with_both_data_and_external(base_doc: Doc) -> None:
    base_doc["parameters"]["root.linear.weight"]["value"]["external"] = {"path": "w", "key": "k", "checksum": "c"}
    load_error(text_of(base_doc), SchemaError, "a tensor is")


# ---------------------------------------------------------------------------------------------
# Reading never imports or runs anything a document names
# ---------------------------------------------------------------------------------------------

PROBE_MODULE = "trama_probe_never_import_me"


def test_load_never_imports_what_a_document_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_doc: Callable[[], Doc]
) -> None:
    marker = tmp_path / "imported.txt"
    package = tmp_path / "pkgs"
    package.mkdir()
    (package / f"{PROBE_MODULE}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        "class Boom:\n    def __init__(self, *a, **k):\n        raise SystemExit('constructed')\n"
    )
    monkeypatch.syspath_prepend(str(package))

    doc = make_doc()
    doc["metadata"] = {
        "py/object": f"{PROBE_MODULE}.Boom",
        "code": f"__import__('{PROBE_MODULE}')",
        "os": "__import__('os').system('touch " + str(tmp_path / "ran") + "')",
        "!!python/object/apply:os.system": ["true"],
    }
    doc["nodes"][2]["op"] = f"{PROBE_MODULE}.Boom"
    doc["nodes"][2]["metadata"] = {"class": f"{PROBE_MODULE}:Boom", "__reduce__": "os.system"}
    doc["nodes"].append(
        {
            "id": "os",
            "parent": None,
            "op": "os.system",
            "inputs": {},
            "outputs": ["y"],
            "parameters": {"cmd": {"name": "os_cmd"}},
            "output_bindings": None,
        }
    )
    doc["parameters"]["os_cmd"] = {"value": "touch " + str(tmp_path / "ran"), "learnable": False}
    path = tmp_path / "evil.trama.json"
    path.write_text(text_of(doc))

    trama.loads(text_of(make_doc()))  # warm up: any lazy imports of trama itself happen here
    before = set(sys.modules)
    model = trama.load(path)
    trama.validate(model)
    again = trama.loads(trama.dumps(model))
    problems = trama.collect_errors(again, trama.OpRegistry())
    assert any("unknown op 'os.system'" in e.message for e in problems)
    assert set(sys.modules) - before == set()
    assert PROBE_MODULE not in sys.modules
    assert not marker.exists()
    assert not (tmp_path / "ran").exists()
    assert model.node("root.relu").op == f"{PROBE_MODULE}.Boom"
    assert model.metadata["code"] == f"__import__('{PROBE_MODULE}')"


# ---------------------------------------------------------------------------------------------
# A last sweep: every single-field corruption of every kind raises a TramaError and nothing else
# ---------------------------------------------------------------------------------------------

ODD_VALUES: list[Any] = [None, True, 0, -1, 2.5, "", "x", [], [None], {}, {"a": None}, 2**70]


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, (*prefix, index))


def test_every_field_of_a_nested_document_replaced_by_every_odd_value(make_doc: Callable[[], Doc]) -> None:
    """The same sweep over the document as format 1.3 writes it, read from its compact text
    (the fast nested reader's way in) and from an indented one (the careful reader's)."""
    base = nested_doc(make_doc)
    count = 0
    for path in paths_of(base):
        if not path:
            continue
        for odd in ODD_VALUES:
            doc = copy_doc(base)
            setting(path, odd)(doc)
            for text in (json.dumps(doc, separators=(",", ":"), ensure_ascii=False), text_of(doc)):
                try:
                    model = trama.loads(text)
                    touch_tensors(model)
                    trama.validate(model)
                    trama.loads(trama.dumps(model))
                except TramaError as error:
                    checked(error)
            count += 1
    assert count > 400


def test_every_field_replaced_by_every_odd_value(make_doc: Callable[[], Doc]) -> None:
    base = make_doc()
    count = 0
    for path in paths_of(base):
        if not path:
            continue
        for odd in ODD_VALUES:
            doc = make_doc()
            setting(path, odd)(doc)
            try:
                model = trama.loads(text_of(doc))
                touch_tensors(model)
                trama.validate(model)
                trama.loads(trama.dumps(model))
            except TramaError as error:
                checked(error)
            count += 1
    assert count > 500
