"""trama.json_schema(): a valid draft 2020-12 schema that every document trama writes satisfies,
and that rejects documents of the wrong shape."""

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
from jsonschema import Draft202012Validator

import trama
from trama import NodeFragment, Param, ValueFact

LEGACY = sorted((Path(__file__).resolve().parent / "fixtures" / "legacy").glob("v0_*/*.trama.json"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = trama.json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors_of(validator: Draft202012Validator, doc: Any) -> list[str]:
    return [error.message for error in validator.iter_errors(doc)]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = trama.json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert jsonschema.validators.validator_for(schema) is Draft202012Validator


def test_schema_is_a_fresh_copy() -> None:
    schema = trama.json_schema()
    schema["properties"].clear()
    assert trama.json_schema()["properties"]


def test_schema_is_plain_json() -> None:
    schema = trama.json_schema()
    assert json.loads(json.dumps(schema, allow_nan=False)) == schema


def test_schema_knows_every_dtype() -> None:
    from trama.format import DTYPE_NAMES

    assert trama.json_schema()["$defs"]["tensor"]["properties"]["dtype"]["enum"] == list(DTYPE_NAMES)


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
    assert errors_of(validator, json.loads(trama.dumps(mlp_model))) == []


def test_a_document_with_every_optional_field_validates(validator: Draft202012Validator) -> None:
    doc = json.loads(trama.dumps(rich_model()))
    assert {"metadata", "opsets", "input_facts", "output_facts"} <= doc.keys()
    assert any("metadata" in node for node in doc["nodes"])
    assert errors_of(validator, doc) == []


@pytest.mark.parametrize("model", ["mlp", "rich"])
def test_the_external_weights_form_validates(
    validator: Draft202012Validator, tmp_path: Path, mlp_model: trama.Model, model: str
) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(mlp_model if model == "mlp" else rich_model(), path, weights="external")
    doc = json.loads(path.read_text())
    assert any("external" in entry["value"] for entry in doc["parameters"].values() if isinstance(entry["value"], dict))
    assert errors_of(validator, doc) == []


def test_dumped_files_validate(validator: Draft202012Validator, tmp_path: Path) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(rich_model(), path)
    assert errors_of(validator, json.loads(path.read_text())) == []


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_legacy_fixtures_rewritten_validate(validator: Draft202012Validator, path: Path) -> None:
    doc = json.loads(trama.dumps(trama.load(path)))
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
