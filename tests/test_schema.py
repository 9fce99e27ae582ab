"""trama.json_schema(format_version="1.2"), the flat format's schema (for 1.0 to 1.2): a valid
draft 2020-12 schema that every flat document trama writes satisfies, and that rejects documents
of the wrong shape. The current format's (1.3, nested) is tested in
packages/trama-core/tests/test_schema_13.py."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import ml_dtypes
import numpy as np
import pytest
from json_edits import random_edit
from jsonschema import Draft202012Validator

import trama
from trama import NodeFragment, Param, ValueFact

LEGACY = sorted((Path(__file__).resolve().parent / "fixtures" / "legacy").glob("v0_*/*.trama.json"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = trama.json_schema(format_version="1.2")
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors_of(validator: Draft202012Validator, doc: Any) -> list[str]:
    return [error.message for error in validator.iter_errors(doc)]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = trama.json_schema(format_version="1.2")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert jsonschema.validators.validator_for(schema) is Draft202012Validator


def test_schema_is_a_fresh_copy() -> None:
    schema = trama.json_schema(format_version="1.2")
    schema["properties"].clear()
    assert trama.json_schema(format_version="1.2")["properties"]


def test_schema_is_plain_json() -> None:
    schema = trama.json_schema(format_version="1.2")
    assert json.loads(json.dumps(schema, allow_nan=False)) == schema


def test_schema_knows_every_dtype() -> None:
    from trama.format import DTYPE_NAMES

    assert trama.json_schema(format_version="1.2")["$defs"]["tensor"]["properties"]["dtype"]["enum"] == list(
        DTYPE_NAMES
    )


# --------------------------------------------------------------------------------------------
# Documents trama writes
# --------------------------------------------------------------------------------------------


class Annotated:
    """A leaf with node metadata and every kind of parameter value."""

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        return NodeFragment(
            op="lenses.Annotated",
            outputs=["y", "aux"],
            parameters={
                "flag": True,
                "count": 2**60,
                "rate": 1e-7,
                "negzero": -0.0,
                "mode": "same",
                "none": None,
                "kernel": [3, [1, 2.5], [], ["a", None, True]],
                "scale": np.float32(1.5),
                "bf": Param(np.array([1.0, -2.5], dtype=ml_dtypes.bfloat16), learnable=True),
                "mask": np.array([True, False]),
                "empty": np.zeros((2, 0), dtype=np.int16),
                "special": np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float64),
            },
            metadata={"source": "model.py:42", "nested": {"list": [1, {"a": None}]}},
        )


class Wrapper:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        out = ctx.child("inner", self.inner, inputs={"x": ctx.input("x")}, outputs=["y", "aux"])
        return NodeFragment(
            op="Wrapper",
            outputs=["y", "aux", "skip"],
            output_bindings={"y": out["y"], "aux": out["aux"], "skip": ctx.input("x")},
        )


def rich_model() -> trama.Model:
    return trama.export_model(
        Wrapper(Annotated()),
        inputs=["x"],
        outputs=["y", "aux", "skip"],
        metadata={"framework": {"name": "toylayers", "version": "1.0"}, "description": "every optional field"},
        opsets={"trama": 1, "lenses": 3},
        input_facts=[ValueFact("float32", ("batch", 4))],
        output_facts=[ValueFact("float32", ("batch", 2)), None, ValueFact(shape=("batch", 4))],
    )


def test_the_toy_mlp_validates(validator: Draft202012Validator, mlp_model: trama.Model) -> None:
    assert errors_of(validator, json.loads(trama.dumps(mlp_model, format_version="1.2"))) == []


def test_a_document_with_every_optional_field_validates(validator: Draft202012Validator) -> None:
    doc = json.loads(trama.dumps(rich_model(), format_version="1.2"))
    assert {"metadata", "opsets", "input_facts", "output_facts"} <= doc.keys()
    assert any("metadata" in node for node in doc["nodes"])
    assert errors_of(validator, doc) == []


@pytest.mark.parametrize("model", ["mlp", "rich"])
def test_the_external_weights_form_validates(
    validator: Draft202012Validator, tmp_path: Path, mlp_model: trama.Model, model: str
) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(mlp_model if model == "mlp" else rich_model(), path, weights="external", format_version="1.2")
    doc = json.loads(path.read_text())
    assert any("external" in entry["value"] for entry in doc["parameters"].values() if isinstance(entry["value"], dict))
    assert errors_of(validator, doc) == []


def test_dumped_files_validate(validator: Draft202012Validator, tmp_path: Path) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(rich_model(), path, format_version="1.2")
    assert errors_of(validator, json.loads(path.read_text())) == []


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_legacy_fixtures_rewritten_validate(validator: Draft202012Validator, path: Path) -> None:
    doc = json.loads(trama.dumps(trama.load(path), format_version="1.2"))
    assert errors_of(validator, doc) == []


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_legacy_fixtures_as_they_are_do_not(validator: Draft202012Validator, path: Path) -> None:
    # The schema is for the current format: "0.x" documents fail it (docs/format.md, section 6).
    assert errors_of(validator, json.loads(path.read_text())) != []


def test_documents_from_the_spec_validate(validator: Draft202012Validator, make_doc: Callable[[], dict]) -> None:
    doc = make_doc()
    assert errors_of(validator, doc) == []
    trama.loads(json.dumps(doc))  # and trama reads them


# --------------------------------------------------------------------------------------------
# Documents of the wrong shape
# --------------------------------------------------------------------------------------------


def edited(doc: Mapping[str, Any], edit: Callable[[dict], None]) -> dict:
    copied = copy.deepcopy(dict(doc))
    edit(copied)
    return copied


INVALID: list[tuple[str, Callable[[dict], None]]] = [
    ("no-nodes", lambda d: d.pop("nodes")),
    ("no-parameters", lambda d: d.pop("parameters")),
    ("unknown-top-level-field", lambda d: d.update(extra=1)),
    ("version-2", lambda d: d.update(format_version="2.0")),
    ("version-legacy", lambda d: d.update(format_version="0.2")),
    ("version-number", lambda d: d.update(format_version=1.0)),
    ("input-name", lambda d: d.update(inputs=["a.b"])),
    ("node-id", lambda d: d["nodes"][1].update(id="root..linear")),
    ("node-extra-field", lambda d: d["nodes"][1].update(extra=1)),
    ("node-missing-parent", lambda d: d["nodes"][1].pop("parent")),
    ("op-empty", lambda d: d["nodes"][1].update(op="")),
    ("outputs-twice", lambda d: d["nodes"][2].update(outputs=["y", "y"])),
    ("port-name", lambda d: d["nodes"][2].update(inputs={"a b": {"node": "root.linear", "output": "y"}})),
    ("ref-extra-field", lambda d: d["outputs"][0].update(extra="x")),
    ("slot-form", lambda d: d["nodes"][1]["parameters"].update(weight="root.linear.weight")),
    ("entry-name", lambda d: d["parameters"].update({"bad name": {"value": 1, "learnable": False}})),
    ("learnable-missing", lambda d: d["parameters"]["dims.n"].pop("learnable")),
    ("learnable-string", lambda d: d["parameters"]["dims.n"].update(learnable="false")),
    ("unknown-dtype", lambda d: d["parameters"]["root.linear.weight"]["value"].update(dtype="float8")),
    ("negative-dim", lambda d: d["parameters"]["root.linear.weight"]["value"].update(shape=[-2, 2])),
    ("65-dims", lambda d: d["parameters"]["root.linear.weight"]["value"].update(shape=[1] * 65)),
    ("base64-alphabet", lambda d: d["parameters"]["root.linear.weight"]["value"].update(data="-_-_")),
    ("tensor-extra-field", lambda d: d["parameters"]["root.linear.weight"]["value"].update(extra=1)),
    ("object-in-list", lambda d: d["parameters"]["dims.n"].update(value=[1, {"a": 1}])),
    ("opset-zero", lambda d: d.update(opsets={"trama": 0})),
    ("fact-shape", lambda d: d.update(input_facts=[{"shape": [-1]}])),
    ("metadata-array", lambda d: d.update(metadata=[])),
    (
        "checksum-form",
        lambda d: d["parameters"]["root.linear.weight"].update(
            value={"dtype": "float32", "shape": [2, 2], "external": {"path": "w", "key": "k", "checksum": "md5:00"}}
        ),
    ),
    # Op names and opset namespaces are dotted identifiers (a newline inside would forge a line of
    # `trama ssa`). A newline at the very end passes Python's `$` in a plain jsonschema run: see
    # test_a_final_newline_is_refused_by_trama_validate.
    ("op-newline", lambda d: d["nodes"][1].update(op="Linear\nroot.evil = Evil()")),
    ("op-escape-sequence", lambda d: d["nodes"][1].update(op="\x1b[31mLinear")),
    ("op-space", lambda d: d["nodes"][1].update(op="Lin ear")),
    ("op-leading-digit", lambda d: d["nodes"][1].update(op="1x")),
    ("op-digit-segment", lambda d: d["nodes"][1].update(op="acme.2d")),
    ("op-too-long", lambda d: d["nodes"][1].update(op="L" * 257)),
    ("opset-namespace", lambda d: d.update(opsets={"trama": 1, "ac me": 1})),
    ("opset-namespace-too-long", lambda d: d.update(opsets={"a" * 257: 1})),
    # Limits (docs/format.md, section 7)
    ("name-too-long", lambda d: d["nodes"][2].update(outputs=["y" * 257])),
    ("id-segment-too-long", lambda d: d["parameters"].update({"a" * 257: {"value": 1, "learnable": False}})),
    ("fact-beyond-int64", lambda d: d.update(input_facts=[{"shape": [2**63]}])),
    ("fact-65-dims", lambda d: d.update(input_facts=[{"shape": [1] * 65}])),
    # The checksum of an inline tensor (1.2) is well-formed, and beside an inline tensor only.
    (
        "entry-checksum-form",
        lambda d: d.update(format_version="1.2") or d["parameters"]["root.linear.weight"].update(checksum="md5:00"),
    ),
    (
        "entry-checksum-on-a-scalar",
        lambda d: d.update(format_version="1.2") or d["parameters"]["dims.n"].update(checksum="xxh3-64:" + "0" * 16),
    ),
]


@pytest.mark.parametrize("edit", [c[1] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_documents_are_rejected(
    validator: Draft202012Validator, make_doc: Callable[[], dict], edit: Callable[[dict], None]
) -> None:
    doc = edited(make_doc(), edit)
    assert errors_of(validator, doc) != []
    if doc["format_version"] == "0.2":
        return  # trama reads (and upgrades) the legacy version; the schema is for 1.x only
    with pytest.raises(trama.TramaError):  # and trama refuses them too
        load_and_use(json.dumps(doc))


def load_and_use(text: str) -> None:
    model = trama.loads(text)
    for entry in model.parameters.values():  # an unknown checksum algorithm is found on use
        if isinstance(entry.value, trama.Tensor):
            np.asarray(entry.value)


@pytest.mark.parametrize("document", [[], "1.0", None, 1])
def test_non_objects_are_rejected(validator: Draft202012Validator, document: Any) -> None:
    assert errors_of(validator, document) != []


# --------------------------------------------------------------------------------------------
# The rules the schema shares with trama (names, limits, checksums)
# --------------------------------------------------------------------------------------------

NAME_SAMPLES = [
    "Linear",
    "conv1d",
    "BatchNorm2d",
    "lenses.ThinLens",
    "acme.optics.Prism",
    "_private",
    "a_1.b_2",
    "0",
    "1x",
    "acme.2d",
    "x" * 256,
    "x" * 257,
    "",
    ".",
    "a.",
    ".a",
    "a..b",
    "a b",
    "a-b",
    "é",
    "Linear\n",
    "Lin\near",
    "\x1b[0m",
    "%input",
    "a/b",
    ".".join(["n"] * 256),
    ".".join(["n"] * 257),
    ".".join(["n"] * 258),
]


def test_the_schema_patterns_say_what_trama_checks() -> None:
    from trama.format._names import DOTTED_ID, MAX_ENTRY_SEGMENTS, MAX_NODE_DEPTH, NAME, is_op_name
    from trama.format._problems import _compiled

    schema = trama.json_schema(format_version="1.2")
    node = schema["$defs"]["block_node"]["properties"]
    op_schema = node["op"]

    def schema_accepts(pattern: str, text: str) -> bool:
        return _compiled(pattern).search(text) is not None  # `$` as JSON Schema reads it

    for text in NAME_SAMPLES:
        op_ok = schema_accepts(op_schema["pattern"], text) and 0 < len(text) <= op_schema["maxLength"]
        assert op_ok == is_op_name(text), text
        namespace = schema["properties"]["opsets"]["propertyNames"]
        assert (schema_accepts(namespace["pattern"], text) and len(text) <= namespace["maxLength"]) == op_ok
        assert schema_accepts(node["outputs"]["items"]["pattern"], text) == bool(NAME.match(text)), text
        segments = text.count(".") + 1
        assert schema_accepts(node["id"]["pattern"], text) == bool(
            DOTTED_ID.match(text) and segments <= MAX_NODE_DEPTH
        ), text
        assert schema_accepts(schema["properties"]["parameters"]["propertyNames"]["pattern"], text) == bool(
            DOTTED_ID.match(text) and segments <= MAX_ENTRY_SEGMENTS
        ), text


def test_the_schema_knows_the_flat_versions_and_the_entry_checksum() -> None:
    schema = trama.json_schema(format_version="1.2")
    assert schema["$id"].endswith("format-1.2.json")
    assert [trama.json_schema(format_version=v) == schema for v in ("1.0", "1.1", "1.3")] == [True, True, False]
    version = Draft202012Validator({"type": "string", **schema["properties"]["format_version"]})
    assert [v for v in ("1.0", "1.1", "1.2", "1.3", "0.2") if version.is_valid(v)] == ["1.0", "1.1", "1.2"]
    checksum = schema["$defs"]["entry"]["properties"]["checksum"]
    assert checksum["type"] == "string"
    assert schema["$defs"]["entry"]["dependentSchemas"]["checksum"]["properties"]["value"] == {"$ref": "#/$defs/tensor"}


def test_written_documents_carry_checksums_that_the_schema_accepts(
    validator: Draft202012Validator, mlp_model: trama.Model, tmp_path: Path
) -> None:
    doc = json.loads(trama.dumps(mlp_model, format_version="1.2"))
    tensors = [entry for entry in doc["parameters"].values() if isinstance(entry["value"], dict)]
    assert tensors
    assert all(entry["checksum"].startswith("xxh3-64:") for entry in tensors)
    assert all("checksum" not in entry for entry in doc["parameters"].values() if not isinstance(entry["value"], dict))
    assert errors_of(validator, doc) == []
    entry = tensors[0]
    entry["checksum"] = entry["checksum"].replace("xxh3-64:", "crc32:")
    assert errors_of(validator, doc) != []


def test_a_checksum_beside_an_external_tensor_is_refused(validator: Draft202012Validator, tmp_path: Path) -> None:
    doc = {
        "format_version": "1.2",
        "inputs": [],
        "outputs": [],
        "nodes": [],
        "parameters": {
            "w": {
                "value": {
                    "dtype": "float32",
                    "shape": [1],
                    "external": {"path": "w.safetensors", "key": "w", "checksum": "xxh3-64:" + "0" * 16},
                },
                "learnable": False,
                "checksum": "xxh3-64:" + "0" * 16,
            }
        },
    }
    assert errors_of(validator, doc) != []
    with pytest.raises(trama.SchemaError, match="external tensor") as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/parameters/w/checksum"


# --------------------------------------------------------------------------------------------
# trama's schema pass (trama validate): part by part, same messages and places
# --------------------------------------------------------------------------------------------


def reference_violations(doc: Any) -> list[str]:
    """What one jsonschema run over the whole document reports, ranked and ordered as trama
    reports it: the schema pass checks the document a part at a time, and must say the same."""
    from trama.format._problems import _document_order, _pointer, _specific_errors

    validator = Draft202012Validator(trama.json_schema(format_version="1.2"))
    position = _document_order(doc)
    found: list[tuple[list[int], str]] = []
    for error in validator.iter_errors(doc):
        for leaf in _specific_errors(error):
            if leaf.validator == "pattern" and leaf.instance == "" and leaf.schema.get("minLength"):
                continue  # said once, by minLength
            path = list(leaf.absolute_path)
            text = f"{_pointer(path)}: {leaf.message}"
            if all(text != seen for _, seen in found):
                found.append((position(path), text))
    found.sort(key=lambda item: item[0])
    return [text for _, text in found]


VALUES = [None, True, 0, -1, 1.5, "", "x", "a b", "a.b", [], [1], [{}], {}, {"a": 1}, [[[{"z": 1}]]], "%input", 2**70]


@pytest.mark.parametrize("seed", range(4))
def test_the_schema_pass_reports_what_one_whole_document_run_reports(make_doc: Callable[[], dict], seed: int) -> None:
    import random

    from trama.format import schema_violations
    from trama.format._jsontext import parse_json

    rng = random.Random(seed)
    bases = [make_doc(), json.loads(trama.dumps(rich_model(), format_version="1.2"))]
    for _ in range(150):
        doc = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            random_edit(doc, rng, VALUES)
        got = [str(problem) for problem in schema_violations(parse_json(json.dumps(doc)))]
        assert got == reference_violations(doc), doc


def test_a_final_newline_is_refused_by_trama_validate(make_doc: Callable[[], dict], tmp_path: Path) -> None:
    # Python's `$` matches before a final newline, so a plain jsonschema run would let "Linear\n"
    # through; trama reads `$` as JSON Schema does, and decoding refuses it too.
    from trama.format import document_problems

    doc = make_doc()
    doc["nodes"][1]["op"] = "Linear\n"
    doc["nodes"][2]["outputs"] = ["y\n"]
    problems = [str(p) for p in document_problems(json.dumps(doc).encode(), tmp_path)]
    assert [p.split(": ")[0] for p in problems] == ["/nodes/1/op", "/nodes/2/outputs/0"]
    problems = [str(p) for p in document_problems(json.dumps(doc).encode(), tmp_path, schema=False)]
    assert [p.split(": ")[0] for p in problems] == ["/nodes/1/op"]


def test_a_bad_reference_is_judged_as_an_id_and_too_deep_an_id_names_the_limit(
    make_doc: Callable[[], dict], tmp_path: Path
) -> None:
    from trama.format import document_problems

    doc = make_doc()
    doc["nodes"][2]["inputs"]["x"] = {"node": "root linear", "output": "y"}
    deep = ".".join(["n"] * 600)
    doc["outputs"][0]["node"] = deep
    problems = [str(p) for p in document_problems(json.dumps(doc).encode(), tmp_path)]
    assert problems[0].startswith("/outputs/0/node: 'n.n.n.n")
    assert problems[0].endswith("... has 600 segments: the tree nests deeper than 512 levels, the most a document may")
    assert len(problems[0]) < 200
    assert problems[1].startswith("/nodes/2/inputs/x/node: 'root linear' does not match '^[A-Za-z0-9_]")
