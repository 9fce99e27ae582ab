"""Hostile documents, the format side (issue 14): each case is refused where it is, with a located
trama error, by ``trama.load`` and ``trama validate`` alike, and nothing hangs, recurses or grows.

* op names that would forge what a reviewer reads (a newline injecting an SSA line, an ANSI
  escape sequence reaching the terminal);
* an inline tensor edited in place (an int64 tensor relabelled float64: same byte length),
  caught by the entry's checksum (format 1.2);
* bytes that JSON refuses inside a long ``data`` string, which the parser once lifted out of
  the text unchecked;
* facts whose dimensions do not fit a signed 64-bit integer;
* trees nested deeper than the 256-level limit, and the JSON Schema pass's memory.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

import trama
from reliability.isolation import run_cli
from trama import JSONError, SchemaError, TensorDataError, TramaError, ValidationError
from trama.format import document_problems, schema_violations
from trama.format._codec import decode_document
from trama.format._jsontext import BLOB_MIN_LENGTH, parse_json
from trama.format._names import MAX_NODE_DEPTH
from trama.tools.cli import main

Doc = dict[str, Any]


#: The deepest tree the format allows (docs/format.md, section 7).
DEPTH = MAX_NODE_DEPTH


def ref(node: str, output: str) -> dict[str, str]:
    return {"node": node, "output": output}


def small_doc(version: str = "1.2") -> Doc:
    """Two leaves in a composite; ``root.fc`` holds an int64 tensor and its checksum."""
    weight = np.arange(6, dtype="<i8").reshape(2, 3)
    return {
        "format_version": version,
        "inputs": ["x"],
        "outputs": [ref("root", "y")],
        "nodes": [
            {
                "id": "root",
                "parent": None,
                "op": "Sequential",
                "inputs": {"x": ref("%input", "x")},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": {"y": ref("root.act", "y")},
            },
            {
                "id": "root.fc",
                "parent": "root",
                "op": "acme.Table",
                "inputs": {"x": ref("%input", "x")},
                "outputs": ["y"],
                "parameters": {"weight": {"name": "root.fc.weight"}},
                "output_bindings": None,
            },
            {
                "id": "root.act",
                "parent": "root",
                "op": "ReLU",
                "inputs": {"x": ref("root.fc", "y")},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": None,
            },
        ],
        "parameters": {
            "root.fc.weight": {
                "value": {"dtype": "int64", "shape": [2, 3], "data": base64.b64encode(weight.tobytes()).decode()},
                "learnable": False,
                "checksum": "xxh3-64:" + xxhash.xxh3_64_hexdigest(b"int64[2,3]" + weight.tobytes()),
            }
        },
    }


def nested_small_doc(version: str = "1.3") -> Doc:
    """:func:`small_doc` as ``dumps`` writes it now (format 1.3, nested: ``root.fc`` is
    ``/nodes/0/nodes/0``, its weight in its ``set``), labelled ``version``: a newer minor of
    format 1 is read as the nested form."""
    doc: Doc = json.loads(trama.dumps(trama.loads(json.dumps(small_doc()))))
    assert doc["nodes"][0]["nodes"][0]["set"]["weight"]["dtype"] == "int64"
    doc["format_version"] = version
    return doc


def problems_of(doc: Doc | bytes, tmp_path: Path, *, schema: bool = True) -> list[str]:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return [str(problem) for problem in document_problems(data, tmp_path, schema=schema)]


def validate_cli(doc: Doc | bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """``trama validate`` on the document, in process: its exit code and its output lines."""
    path = tmp_path / "hostile.trama.json"
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    code = main(["validate", str(path)])
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).splitlines()


def test_the_small_document_is_valid(tmp_path: Path) -> None:
    # The cases below each break one thing in it; unbroken, everything accepts it.
    model = trama.loads(json.dumps(small_doc()))
    assert np.asarray(model.parameters["root.fc.weight"].value).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert problems_of(small_doc(), tmp_path) == []


# --------------------------------------------------------------------------------------------
# Op names that forge the review view
# --------------------------------------------------------------------------------------------

FORGING_OPS = {
    "newline": "ReLU\n  root.evil = Backdoor(%x)",
    "crlf": "ReLU\r\nroot.evil = Backdoor(%x)",
    "trailing-newline": "ReLU\n",
    "ansi-colour": "\x1b[32mReLU\x1b[0m",
    "ansi-erase-line": "ReLU\x1b[2K\r",
    "osc-title": "\x1b]0;owned\x07ReLU",
    "nul": "ReLU\x00",
    "bidi-override": "ReLU\u202e",
    "space": "ReLU ",
    "too-long": "R" * 257,
}


@pytest.mark.parametrize("op", FORGING_OPS.values(), ids=FORGING_OPS.keys())
def test_forging_op_names_are_refused_by_load(op: str) -> None:
    doc = small_doc()
    doc["nodes"][2]["op"] = op
    with pytest.raises(SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/nodes/2/op"
    shown = str(info.value)
    assert "\n" not in shown
    assert "\r" not in shown
    assert "\x1b" not in shown
    assert "\x00" not in shown
    assert len(shown) < 400  # a huge name is cut, never printed whole


@pytest.mark.parametrize("op", FORGING_OPS.values(), ids=FORGING_OPS.keys())
def test_forging_op_names_are_refused_by_validate(op: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = small_doc()
    doc["nodes"][2]["op"] = op
    # Every stage refuses it: the schema pass, and decoding when the schema pass is skipped.
    with_schema = problems_of(doc, tmp_path)
    assert with_schema
    assert all(problem.startswith("/nodes/2/op: ") for problem in with_schema)
    assert problems_of(doc, tmp_path, schema=False)[0].startswith("/nodes/2/op: ")
    code, lines = validate_cli(doc, tmp_path, capsys)
    assert code == 1
    assert len(lines) == 1
    assert "/nodes/2/op" in lines[0]
    assert "\x1b" not in lines[0]
    assert "\x00" not in lines[0]
    assert "\r" not in lines[0]


def test_a_newline_in_an_op_name_cannot_inject_an_ssa_line(tmp_path: Path) -> None:
    doc = small_doc()
    doc["nodes"][2]["op"] = "ReLU\n  root.evil = Backdoor(%x)"
    path = tmp_path / "forged.trama.json"
    path.write_text(json.dumps(doc))
    for command in ("ssa", "info"):
        outcome = run_cli(command, str(path), timeout_s=60)
        assert outcome.returncode == 1, outcome.describe()
        assert "Backdoor" not in outcome.stdout
        assert not outcome.traceback
        assert len(outcome.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("version", ["0.2", "1.0", "1.1"])
def test_the_op_name_rule_holds_for_every_version_read(version: str) -> None:
    # No writer ever produced another name, so legacy and newer-minor documents get the rule too.
    doc = small_doc(version)
    doc["parameters"]["root.fc.weight"].pop("checksum")
    doc["nodes"][1]["op"] = "acme.Table\x1b[2J"
    with pytest.raises(SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/nodes/1/op"


@pytest.mark.parametrize("version", ["1.3", "1.9"])
def test_the_op_name_rule_holds_for_the_nested_form_and_a_newer_minor(version: str) -> None:
    # A newer minor of format 1 is read as the nested form (1.3), and gets the rule too.
    doc = nested_small_doc(version)
    doc["nodes"][0]["nodes"][0]["op"] = "acme.Table\x1b[2J"
    with pytest.raises(SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/nodes/0/nodes/0/op"
    assert "\x1b" not in str(info.value)


def test_opset_namespaces_follow_the_op_name_rule(tmp_path: Path) -> None:
    doc = small_doc()
    doc["opsets"] = {"trama": 1, "acme\n": 1}
    with pytest.raises(SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/opsets/acme\n"
    assert "\n" not in info.value.message
    assert problems_of(doc, tmp_path)[0].startswith("/opsets: ")  # the schema names the object's keys


def test_a_model_built_in_memory_with_a_forged_op_name_cannot_be_written() -> None:
    model = trama.loads(json.dumps(small_doc()))
    model.nodes[2].op = "ReLU\nroot.evil = Backdoor(%x)"
    with pytest.raises(ValidationError) as info:
        trama.dumps(model)
    assert info.value.location == "/nodes/2/op"


# --------------------------------------------------------------------------------------------
# Inline tensors changed in place: the entry's checksum
# --------------------------------------------------------------------------------------------


def edited_tensor(**changes: Any) -> Doc:
    doc = small_doc()
    doc["parameters"]["root.fc.weight"]["value"].update(changes)
    return doc


EDITS = {
    # the case: int64 relabelled float64, same 48 bytes, decodes to garbage without a word
    "dtype-int64-to-float64": {"dtype": "float64"},
    "dtype-int64-to-uint8-reshaped": {"dtype": "uint8", "shape": [6, 8]},
    "shape-transposed": {"shape": [3, 2]},
    "shape-flattened": {"shape": [6]},
    "one-byte-changed": {"data": base64.b64encode(np.array([[0, 1, 2], [3, 4, 6]], "<i8").tobytes()).decode()},
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_an_edited_inline_tensor_is_refused_before_any_value_is_handed_out(edit: dict[str, Any]) -> None:
    model = trama.loads(json.dumps(edited_tensor(**edit)))
    tensor = model.parameters["root.fc.weight"].value
    for _ in range(2):  # and it stays refused: nothing half-decoded is cached
        with pytest.raises(TensorDataError) as info:
            np.asarray(tensor)
        assert info.value.location == "/parameters/root.fc.weight/checksum"
        assert "'root.fc.weight'" in info.value.message
        assert "changed" in info.value.message
    assert not tensor.is_decoded


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_validate_reports_an_edited_inline_tensor(
    edit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = edited_tensor(**edit)
    assert problems_of(doc, tmp_path) == [
        "/parameters/root.fc.weight/checksum: the tensor of entry 'root.fc.weight' does not match the checksum "
        "the entry records: its data, dtype or shape was changed after it was written"
    ]
    code, lines = validate_cli(doc, tmp_path, capsys)
    assert code == 1
    assert len(lines) == 1


def test_the_checksum_covers_dtype_and_shape_text_then_the_bytes() -> None:
    # The definition (docs/format.md, "Inline tensors"), computed here without trama.
    values = {
        "root.fc.weight": np.arange(6, dtype="<i8").reshape(2, 3),
        "root.fc.scalar": np.array(1.5, dtype="<f4"),
        "root.fc.empty": np.zeros((2, 0), dtype="<i2"),
    }
    doc = small_doc()
    doc["nodes"][1]["parameters"] = {name.rpartition(".")[2]: {"name": name} for name in values}
    model = trama.loads(json.dumps({**doc, "parameters": {}}), validate=False)
    model.parameters = {name: trama.Parameter(trama.Tensor.from_array(array), False) for name, array in values.items()}
    written = json.loads(trama.dumps(model, format_version="1.2"))["parameters"]
    expected = {
        "root.fc.weight": b"int64[2,3]" + values["root.fc.weight"].tobytes(),
        "root.fc.scalar": b"float32[]" + values["root.fc.scalar"].tobytes(),
        "root.fc.empty": b"int16[2,0]",
    }
    for name, hashed in expected.items():
        assert written[name]["checksum"] == "xxh3-64:" + xxhash.xxh3_64_hexdigest(hashed)


def test_sha256_checksums_and_uppercase_digits_are_verified_too() -> None:
    import hashlib

    doc = small_doc()
    weight = np.arange(6, dtype="<i8").reshape(2, 3).tobytes()
    digest = hashlib.sha256(b"int64[2,3]" + weight).hexdigest()
    for checksum in ("sha256:" + digest, "sha256:" + digest.upper()):
        doc["parameters"]["root.fc.weight"]["checksum"] = checksum
        assert np.asarray(trama.loads(json.dumps(doc)).parameters["root.fc.weight"].value).sum() == 15
    doc["parameters"]["root.fc.weight"]["value"]["dtype"] = "float64"
    with pytest.raises(TensorDataError, match="changed"):
        np.asarray(trama.loads(json.dumps(doc)).parameters["root.fc.weight"].value)


@pytest.mark.parametrize("version", ["1.3", "1.9"])
def test_the_nested_form_and_a_newer_minor_still_verify_the_checksum(version: str) -> None:
    # The swap in the form dump writes now (1.3), and in a newer minor read as that form.
    doc = nested_small_doc(version)
    doc["nodes"][0]["nodes"][0]["set"]["weight"]["dtype"] = "float64"
    with pytest.raises(TensorDataError, match="changed"):
        np.asarray(trama.loads(json.dumps(doc)).parameters["root.fc.weight"].value)


def test_without_a_checksum_the_swap_is_not_detectable_which_is_why_writers_record_one() -> None:
    # The checksum is optional for readers of older documents: a 1.1 document cannot carry one,
    # and then the relabelled tensor reads as other numbers. trama writes one by default.
    doc = edited_tensor(dtype="float64")
    doc["format_version"] = "1.1"
    doc["parameters"]["root.fc.weight"].pop("checksum")
    garbage = np.asarray(trama.loads(json.dumps(doc)).parameters["root.fc.weight"].value)
    assert garbage.dtype == np.float64
    assert garbage.tolist() != [[0, 1, 2], [3, 4, 5]]
    rewritten = json.loads(trama.dumps(trama.loads(json.dumps(small_doc())), format_version="1.2"))
    assert (
        rewritten["parameters"]["root.fc.weight"]["checksum"] == small_doc()["parameters"]["root.fc.weight"]["checksum"]
    )


# --------------------------------------------------------------------------------------------
# Bytes JSON refuses, inside a long "data" string
# --------------------------------------------------------------------------------------------


def with_data_bytes(length: int, bad: bytes, at: int) -> tuple[bytes, int]:
    """A valid document whose weight's ``data`` is ``length`` characters, with ``bad`` written
    over it at ``at``; and the byte offset of ``bad`` in the text."""
    count = length // 4 * 3 // 8
    weight = np.arange(count, dtype="<i8")
    doc = small_doc()
    doc["parameters"]["root.fc.weight"] = {
        "value": {"dtype": "int64", "shape": [count], "data": base64.b64encode(weight.tobytes()).decode()},
        "learnable": False,
    }
    text = json.dumps(doc, indent=2).encode()
    start = text.index(b'"data": "') + len(b'"data": "')
    offset = start + at
    return text[:offset] + bad + text[offset + len(bad) :], offset


JSON_REFUSES = {
    "0xff": b"\xff",
    "0xfe0xff": b"\xfe\xff",
    "cut-utf8": b"\xc3A",
    "encoded-surrogate": b"\xed\xa0\x80",
    "overlong-utf8": b"\xc0\xaf",
    "newline": b"\n",
    "carriage-return": b"\r",
    "tab": b"\t",
    "nul": b"\x00",
    "escape": b"\x1b",
    "unit-separator": b"\x1f",
}


@pytest.mark.parametrize("length", [24, 4000, 200_000], ids=["short", "long", "very-long"])
@pytest.mark.parametrize("bad", JSON_REFUSES.values(), ids=JSON_REFUSES.keys())
def test_bytes_json_refuses_are_refused_at_load_in_short_and_long_strings(
    bad: bytes, length: int, tmp_path: Path
) -> None:
    clean, _ = with_data_bytes(length, b"A", 0)
    assert len(parse_json(clean).blobs) == (length >= BLOB_MIN_LENGTH)  # both sides of the lifting
    for at in (0, length // 2, length - len(bad)):
        data, offset = with_data_bytes(length, bad, at)
        with pytest.raises(JSONError) as info:
            trama.loads(data)
        line = data[:offset].count(b"\n") + 1
        assert info.value.line == line, (at, info.value)
        problems = problems_of(data, tmp_path)
        assert len(problems) == 1
        assert problems[0].startswith(f"line {line} column ")


NOT_BASE64 = {"bang": b"!", "dash": b"-", "underscore": b"_", "space": b" ", "e-acute": "é".encode(), "del": b"\x7f"}


@pytest.mark.parametrize("length", [24, 4000], ids=["short", "long"])
@pytest.mark.parametrize("bad", NOT_BASE64.values(), ids=NOT_BASE64.keys())
def test_valid_json_that_is_not_base64_fails_alike_in_short_and_long_strings(
    bad: bytes, length: int, tmp_path: Path
) -> None:
    # JSON accepts these characters; base64 does not. Short or long, the same thing happens:
    # a length that is off by the extra bytes is refused at load, the right length on first use.
    data, _ = with_data_bytes(length, bad, length // 2)
    if len(bad) > 1:
        with pytest.raises(TensorDataError, match="base64 characters"):
            trama.loads(data)
        return
    model = trama.loads(data)
    with pytest.raises(TensorDataError, match="not valid base64") as info:
        np.asarray(model.parameters["root.fc.weight"].value)
    assert info.value.location == "/parameters/root.fc.weight/value"
    # trama validate says so at once (the schema's pattern, or decoding without the schema).
    (problem,) = problems_of(data, tmp_path)
    assert problem.startswith("/parameters/root.fc.weight/value/data: ")
    (problem,) = problems_of(data, tmp_path, schema=False)
    assert problem.startswith("/parameters/root.fc.weight/value: ")


def test_only_base64_runs_are_lifted_out_of_the_text() -> None:
    good, _ = with_data_bytes(4000, b"A", 0)
    assert len(parse_json(good).blobs) == 1
    for bad in (b"!", b"\n", b"\xff", b"\\u0041"):
        data, _ = with_data_bytes(4000, bad, 100)
        with contextlib.suppress(JSONError):  # refused by the parser, which is the point
            assert parse_json(data).blobs == {}


# --------------------------------------------------------------------------------------------
# Facts beyond int64
# --------------------------------------------------------------------------------------------

BAD_FACT_SHAPES = {
    "2**63": ([2**63], "/input_facts/0/shape/0"),
    "2**64-second": (["batch", 2**64], "/input_facts/0/shape/1"),
    "10**30": ([10**30, 4], "/input_facts/0/shape/0"),
    "65-dims": ([1] * 65, "/input_facts/0/shape"),
    "negative": ([-1], "/input_facts/0/shape"),
}


@pytest.mark.parametrize(("shape", "where"), BAD_FACT_SHAPES.values(), ids=BAD_FACT_SHAPES.keys())
def test_fact_dimensions_beyond_int64_are_refused_at_decode(shape: list[Any], where: str, tmp_path: Path) -> None:
    doc = small_doc()
    doc["input_facts"] = [{"dtype": "float32", "shape": shape}]
    with pytest.raises(SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == where
    assert problems_of(doc, tmp_path)[0].startswith(where)
    assert problems_of(doc, tmp_path, schema=False)[0].startswith(where)


def test_the_largest_int64_dimension_and_64_dimensions_are_accepted() -> None:
    doc = small_doc()
    doc["input_facts"] = [{"shape": [2**63 - 1, 0, "batch"]}]
    doc["output_facts"] = [{"shape": [1] * 64}]
    model = trama.loads(json.dumps(doc))
    assert model.input_facts is not None
    assert model.input_facts[0] is not None
    assert model.input_facts[0].shape == (2**63 - 1, 0, "batch")


def test_a_model_built_in_memory_with_a_huge_fact_cannot_be_written() -> None:
    model = trama.loads(json.dumps(small_doc()))
    model.input_facts = [trama.ValueFact("float32", (2**70,))]
    with pytest.raises(ValidationError) as info:
        trama.dumps(model)
    assert info.value.location == "/input_facts/0/shape/0"


# --------------------------------------------------------------------------------------------
# Deep trees
# --------------------------------------------------------------------------------------------


def deep_doc(depth: int) -> Doc:
    """A chain of composites ``n``, ``n.n``, ... ``depth`` levels deep, a ReLU at the bottom."""
    ids = ["n"]
    while len(ids) < depth:
        ids.append(ids[-1] + ".n")
    nodes = []
    for k, node_id in enumerate(ids):
        last = k == depth - 1
        nodes.append(
            {
                "id": node_id,
                "parent": ids[k - 1] if k else None,
                "op": "ReLU" if last else "Graph",
                "inputs": {"x": ref("%input", "x")},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": None if last else {"y": ref(ids[k + 1], "y")},
            }
        )
    return {"format_version": "1.2", "inputs": ["x"], "outputs": [ref("n", "y")], "nodes": nodes, "parameters": {}}


class _StackLimit:
    """Run with little stack to spare: recursion proportional to depth would hit the limit."""

    def __init__(self, spare: int) -> None:
        self.spare = spare

    def __enter__(self) -> None:
        self.saved = sys.getrecursionlimit()
        depth = 0
        frame: Any = sys._getframe()
        while frame is not None:
            depth += 1
            frame = frame.f_back
        sys.setrecursionlimit(depth + self.spare)

    def __exit__(self, *exc: object) -> None:
        sys.setrecursionlimit(self.saved)


def test_a_tree_as_deep_as_allowed_loads_validates_and_dumps_without_deep_recursion(tmp_path: Path) -> None:
    text = json.dumps(deep_doc(DEPTH))
    with _StackLimit(spare=150):  # far less than DEPTH levels of recursion would need
        model = trama.loads(text)
        assert problems_of(text.encode(), tmp_path) == []
        again = trama.loads(trama.dumps(model))
    assert len(again.nodes) == DEPTH
    assert again.nodes[-1].id.count(".") == DEPTH - 1


@pytest.mark.parametrize("depth", [DEPTH + 1, DEPTH + 150, 1500])
def test_a_deeper_tree_is_refused_quickly_and_cleanly(depth: int, tmp_path: Path) -> None:
    doc = deep_doc(depth)
    text = json.dumps(doc)
    started = time.perf_counter()
    with pytest.raises(SchemaError) as info:
        trama.loads(text)
    assert info.value.location == f"/nodes/{DEPTH}/id"
    assert f"{DEPTH + 1} segments" in info.value.message
    assert str(DEPTH) in info.value.message
    assert problems_of(doc, tmp_path, schema=False) == [f"/nodes/{DEPTH}/id: {info.value.message}"]
    schema_problems = problems_of(doc, tmp_path)
    # the schema pass names the limit too, for each id, parent and reference past it
    assert any(problem.startswith(f"/nodes/{DEPTH}/id: ") for problem in schema_problems)
    assert all(f"deeper than {DEPTH} levels" in problem for problem in schema_problems)
    assert not any(problem.startswith((f"/nodes/{DEPTH - 2}/", f"/nodes/{DEPTH - 3}/")) for problem in schema_problems)
    assert all(len(problem) < 400 for problem in schema_problems)  # long ids are cut in messages
    assert time.perf_counter() - started < 20  # the audit saw 67 s for depth 1,500


def test_validate_refuses_a_1500_deep_tree_in_a_bounded_child(tmp_path: Path) -> None:
    path = tmp_path / "deep.trama.json"
    path.write_text(json.dumps(deep_doc(1500)))
    for flags in ([], ["--no-schema"]):
        outcome = run_cli("validate", *flags, str(path), memory_mb=3_000, timeout_s=60)
        assert outcome.returncode == 1, outcome.describe()
        assert not outcome.timed_out
        assert not outcome.traceback
        assert "RecursionError" not in outcome.stdout + outcome.stderr


def test_a_model_built_in_memory_deeper_than_allowed_cannot_be_written() -> None:
    model = trama.loads(json.dumps(deep_doc(DEPTH)))
    deeper = trama.loads(json.dumps(deep_doc(DEPTH)))
    parent = deeper.nodes[-1]
    parent.op = "Graph"
    parent.output_bindings = {"y": trama.Ref(parent.id + ".n", "y")}
    deeper.nodes.append(trama.Node(parent.id + ".n", "ReLU", {"x": trama.Ref("%input", "x")}, ["y"], {}, None))
    trama.dumps(model)
    with pytest.raises(ValidationError, match=f"{DEPTH + 1} segments") as info:
        trama.dumps(deeper)
    assert info.value.location == f"/nodes/{DEPTH}/id"


# --------------------------------------------------------------------------------------------
# The JSON Schema pass: memory in proportion to the file
# --------------------------------------------------------------------------------------------


def many_bad_lists(entries: int) -> bytes:
    """Entries whose list values hold an object 20 levels down: each failure once built a tree
    of anyOf errors, every level quoting its whole sub-list (a 1.6 MB file needed 1.3 GB)."""
    doc = small_doc()
    doc["nodes"][1]["parameters"] = {f"p{k}": {"name": f"root.fc.p{k}"} for k in range(entries)}
    value: Any = [{"a": 1}]
    for _ in range(20):
        value = [value, 1, 2.5, "s"]
    doc["parameters"] = {f"root.fc.p{k}": {"value": value, "learnable": False} for k in range(entries)}
    return json.dumps(doc).encode()


def test_the_schema_pass_needs_memory_in_proportion_to_the_file() -> None:
    data = many_bad_lists(200)
    parsed = parse_json(data)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        problems = schema_violations(parsed)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(problems) == 200
    assert problems[0].location == "/parameters/root.fc.p0/value" + "/0" * 21
    assert problems[0].message == "{'a': 1} is not valid under any of the given schemas"
    # Before: about 670 times the file (jsonschema's error trees, each level quoting its list).
    print(f"schema pass: {len(data)} bytes, peak {peak} bytes ({peak / len(data):.1f}x), {elapsed:.2f} s")
    assert peak < 20 * len(data), (peak, len(data))
    assert elapsed < 30


def test_the_schema_pass_walks_lists_nested_as_deep_as_json_allows(tmp_path: Path) -> None:
    doc = small_doc()
    value: Any = [1]
    for _ in range(900):
        value = [value]
    doc["nodes"][1]["parameters"]["deep"] = {"name": "root.fc.deep"}
    doc["parameters"]["root.fc.deep"] = {"value": value, "learnable": False}
    parsed = parse_json(json.dumps(doc))  # the parser has its own, located, nesting limit
    with _StackLimit(spare=150):
        assert schema_violations(parsed) == []  # the schema says nothing about depth
        with pytest.raises(SchemaError, match="nests more than 100 levels deep") as info:
            decode_document(parsed.data, blobs=parsed.blobs)  # decoding refuses it, located
    assert info.value.location is not None
    assert info.value.location.startswith("/parameters/root.fc.deep/value/0")
    assert len(problems_of(doc, tmp_path)) == 1


def test_problems_say_each_thing_once_and_cut_huge_values(tmp_path: Path) -> None:
    doc = small_doc()
    doc["nodes"][1]["op"] = ""
    doc["nodes"][2] = "x" * 100_000  # neither kind of node: refused once, quoted in short
    problems = problems_of(doc, tmp_path)
    assert problems[0] == "/nodes/1/op: '' should be non-empty"
    assert len([p for p in problems if p.startswith("/nodes/2:")]) == 1
    assert all(len(problem) < 400 for problem in problems)


def test_every_hostile_case_is_a_trama_error_never_another_exception() -> None:
    # A roll-up of the cases above through the one public entry point.
    cases: list[bytes] = [
        json.dumps({**small_doc(), "opsets": {"\x1b[0m": 1}}).encode(),
        json.dumps(edited_tensor(dtype="float64")).encode(),
        with_data_bytes(4000, b"\x00", 10)[0],
        json.dumps({**small_doc(), "input_facts": [{"shape": [2**100]}]}).encode(),
        json.dumps(deep_doc(DEPTH + 44)).encode(),
    ]
    for data in cases:
        with pytest.raises(TramaError):
            load_and_use(data)


def load_and_use(data: bytes) -> None:
    model = trama.loads(data)
    for entry in model.parameters.values():
        if isinstance(entry.value, trama.Tensor):
            np.asarray(entry.value)
