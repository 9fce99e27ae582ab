"""Documents written by the trama 0.1.0 and 0.2.0 releases (tests/fixtures/legacy).

Each ``<name>.trama.json`` must load, validate and decode to exactly what its
``<name>.expected.json`` describes (see the fixtures' README for that file's layout): same nodes
and wiring, and values bit for bit. 0.2 sharing must survive (one entry, one object on import);
0.1 inline values become table entries of their own.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import trama

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "legacy"
V0_1 = sorted((FIXTURES / "v0_1").glob("*.trama.json"))
V0_2 = sorted((FIXTURES / "v0_2").glob("*.trama.json"))
ALL = V0_1 + V0_2

NUMPY = {
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "bfloat16": ml_dtypes.bfloat16,
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "u1",
    "bool": "?",
}
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def fixture_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.removesuffix('.trama.json')}"


def expected_of(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name.replace(".trama.json", ".expected.json")).read_text(encoding="utf-8"))


def test_the_fixture_set_is_complete() -> None:
    assert [p.name for p in V0_1] == [f"{n}.trama.json" for n in ("dtypes", "mlp", "nested", "tiny")]
    assert [p.name for p in V0_2] == [f"{n}.trama.json" for n in ("dtypes", "mlp", "nested", "tied", "tiny")]
    for path in ALL:
        assert expected_of(path)["format_version"] == path.parent.name.replace("v0_", "0.")


# --------------------------------------------------------------------------------------------
# Comparing a decoded value with its description
# --------------------------------------------------------------------------------------------


def _plain(values: Any) -> Any:
    if isinstance(values, list):
        return [_plain(v) for v in values]
    return NON_FINITE.get(values, values) if isinstance(values, str) else values


def expected_array(description: Mapping[str, Any]) -> np.ndarray:
    dtype = np.dtype(NUMPY[description["dtype"]])
    values = _plain(description["values"])
    if description["dtype"] == "bool":
        array = np.array(values, dtype=bool)
    elif dtype.kind in "iu":  # exact Python ints, including int64 extremes
        array = np.array(values, dtype=dtype)
    else:  # floats are given as their exact double values; narrowing them is exact
        array = np.array(values, dtype=np.float64).astype(dtype)
    return array.reshape(description["shape"])


def assert_matches(parameter: trama.Parameter, description: Mapping[str, Any], where: str) -> None:
    assert parameter.learnable is description["learnable"], where
    value = parameter.value
    kind = description["kind"]
    if kind == "tensor":
        assert isinstance(value, trama.Tensor), where
        assert value.dtype == description["dtype"], where
        assert list(value.shape) == description["shape"], where
        got = np.asarray(value)
        want = expected_array(description)
        assert got.dtype == want.dtype, where
        assert got.shape == want.shape, where
        if got.dtype.kind == "f" or description["dtype"] == "bfloat16":
            nan = np.isnan(want.astype(np.float64))
            assert np.array_equal(np.isnan(got.astype(np.float64)), nan), where
            # everything but NaN bit for bit: this also tells -0.0 from 0.0
            assert got[~nan].tobytes() == want[~nan].tobytes(), where
        else:
            assert got.tobytes() == want.tobytes(), where
        return
    expected_type = {"bool": bool, "int": int, "float": float, "string": str, "null": type(None)}[kind]
    assert type(value) is expected_type, where
    if kind == "float":
        assert struct.pack("<d", value) == struct.pack("<d", description["value"]), where
    else:
        assert value == description["value"], where


def ref_json(ref: trama.Ref) -> dict[str, str]:
    return {"node": ref.node, "output": ref.output}


def assert_structure(model: trama.Model, expected: Mapping[str, Any]) -> None:
    assert model.inputs == expected["inputs"]
    assert [ref_json(r) for r in model.outputs] == expected["outputs"]
    assert [n.id for n in model.nodes] == [n["id"] for n in expected["nodes"]]
    for node, want in zip(model.nodes, expected["nodes"], strict=True):
        assert node.op == want["op"]
        assert node.parent == want["parent"]
        assert {p: ref_json(r) for p, r in node.inputs.items()} == want["inputs"]
        assert node.outputs == want["outputs"]
        bindings = None if node.output_bindings is None else {o: ref_json(r) for o, r in node.output_bindings.items()}
        assert bindings == want["output_bindings"]
        assert list(node.parameters) == list(want["parameters"])


# --------------------------------------------------------------------------------------------
# Every fixture
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL, ids=fixture_id)
def test_fixture_loads_validates_and_keeps_its_version(path: Path) -> None:
    model = trama.load(path)
    trama.validate(model)
    assert trama.collect_errors(model, fixture_registry(model)) == []
    assert model.source_format_version == expected_of(path)["format_version"]
    assert model.metadata == {}
    assert model.opsets == {}


@pytest.mark.parametrize("path", ALL, ids=fixture_id)
def test_fixture_structure_matches_expected(path: Path) -> None:
    assert_structure(trama.load(path), expected_of(path))


@pytest.mark.parametrize("path", V0_2, ids=fixture_id)
def test_v0_2_table_matches_expected(path: Path) -> None:
    model = trama.load(path)
    expected = expected_of(path)
    assert list(model.parameters) == list(expected["parameters"])
    for node, want in zip(model.nodes, expected["nodes"], strict=True):
        assert node.parameters == want["parameters"]
    for name, description in expected["parameters"].items():
        assert_matches(model.parameters[name], description, name)


@pytest.mark.parametrize("path", V0_1, ids=fixture_id)
def test_v0_1_inline_values_become_entries(path: Path) -> None:
    model = trama.load(path)
    expected = expected_of(path)
    slots = 0
    for node, want in zip(model.nodes, expected["nodes"], strict=True):
        for slot, description in want["parameters"].items():
            name = node.parameters[slot]
            assert name == f"{node.id}.{slot}"  # no clash in these fixtures
            assert_matches(model.parameters[name], description, f"{node.id}/{slot}")
            slots += 1
    # one entry per slot: 0.1 has no sharing, and equal values (mlp's hidden width) stay apart
    assert len(model.parameters) == slots


@pytest.mark.parametrize("path", V0_2, ids=fixture_id)
def test_v0_2_sharing_is_preserved(path: Path) -> None:
    model = trama.load(path)
    shared = expected_of(path)["shared"]
    users: dict[str, list[str]] = {}
    for node in model.nodes:
        for slot, name in node.parameters.items():
            users.setdefault(name, []).append(f"{node.id}/{slot}")
    assert {name: where for name, where in users.items() if len(where) > 1} == shared
    assert set(users) == set(model.parameters)

    instance = trama.import_model(model, registry=fixture_registry(model))
    built = dict(walk(instance))
    for name, where in shared.items():
        objects = [built[w.split("/")[0]]["parameters"][w.split("/")[1]] for w in where]
        assert all(obj is objects[0] for obj in objects), name
        assert objects[0] is model.parameters[name]


def test_tied_weights_are_one_entry_and_one_object() -> None:
    model = trama.load(FIXTURES / "v0_2" / "tied.trama.json")
    embed, head = model.node("root.embed"), model.node("root.head")
    assert embed.parameters["weight"] == head.parameters["weight"] == "root.embed.weight"
    instance = trama.import_model(model, registry=fixture_registry(model))
    built = dict(walk(instance))
    weight = built["root.embed"]["parameters"]["weight"]
    assert built["root.head"]["parameters"]["weight"] is weight
    assert np.asarray(weight.value).shape == (5, 3)
    # Written back, the tie is still one entry referenced twice.
    again = json.loads(trama.dumps(model, format_version="1.2"))
    names = [n["parameters"].get("weight", {}).get("name") for n in again["nodes"]]
    assert names.count("root.embed.weight") == 2
    assert sum(1 for k in again["parameters"] if k.endswith("weight")) == 1


def test_mlp_hidden_width_is_shared_in_0_2_and_separate_in_0_1() -> None:
    v2 = trama.load(FIXTURES / "v0_2" / "mlp.trama.json")
    assert v2.node("root.linear_0").parameters["out_features"] == "dims.hidden"
    assert v2.node("root.linear_2").parameters["in_features"] == "dims.hidden"
    v1 = trama.load(FIXTURES / "v0_1" / "mlp.trama.json")
    first = v1.parameter(v1.node("root.linear_0"), "out_features")
    second = v1.parameter(v1.node("root.linear_2"), "in_features")
    assert first == second  # equal values...
    assert first is not second  # ...that stay two entries
    assert v1.node("root.linear_0").parameters["out_features"] != v1.node("root.linear_2").parameters["in_features"]


@pytest.mark.parametrize("name", ["tiny", "mlp", "nested", "dtypes"])
def test_v0_1_and_v0_2_hold_the_same_values(name: str) -> None:
    v1 = trama.load(FIXTURES / "v0_1" / f"{name}.trama.json")
    v2 = trama.load(FIXTURES / "v0_2" / f"{name}.trama.json")
    assert [n.id for n in v1.nodes] == [n.id for n in v2.nodes]
    for a, b in zip(v1.nodes, v2.nodes, strict=True):
        assert (a.op, a.inputs, a.outputs, a.output_bindings) == (b.op, b.inputs, b.outputs, b.output_bindings)
        assert list(a.parameters) == list(b.parameters)
        for slot in a.parameters:
            assert v1.parameter(a, slot) == v2.parameter(b, slot), f"{a.id}/{slot}"


def test_dtypes_fixture_special_values() -> None:
    # Spot checks that do not go through the expected-file machinery above.
    model = trama.load(FIXTURES / "v0_2" / "dtypes.trama.json")
    root = model.node("root")

    def value(slot: str) -> Any:
        return model.parameter(root, slot).value

    special = np.asarray(value("t_float32_special"))
    assert special.dtype == np.dtype("<f4")
    assert special[0] == np.inf
    assert special[1] == -np.inf
    assert np.isnan(special[2])
    assert special[3] == 0
    assert math.copysign(1.0, float(special[3])) == -1.0
    assert special[4] > 0
    assert special[4] < np.finfo(np.float32).tiny
    assert np.asarray(value("t_int64")).tolist() == [-(2**63), -1, 2**53 + 1, 2**63 - 1]
    assert np.asarray(value("t_bfloat16")).view("<u2").tolist()[:2] == [0x3F80, 0xC020]
    assert np.asarray(value("t_scalar_float32")).shape == ()
    assert np.asarray(value("t_empty_int32_2x0x3")).shape == (2, 0, 3)
    assert np.asarray(value("t_float32_3d"))[1, 0, 2] == 8 - 5.5  # C order
    assert value("s_int_above_2_53") == 2**53 + 1
    assert type(value("s_float_integral")) is float
    assert math.copysign(1.0, value("s_float_negative_zero")) == -1.0
    assert value("s_string_unicode") == 'h\u00e9llo \u2713 "q" \\ \n\ttab'
    assert value("s_null") is None
    assert model.parameter(root, "s_float_learnable").learnable is True


# --------------------------------------------------------------------------------------------
# A loaded legacy model is written as the current format and reads back equal
# --------------------------------------------------------------------------------------------


def same_content(a: trama.Model, b: trama.Model) -> bool:
    return (a.inputs, a.outputs, a.nodes, a.parameters, a.input_facts, a.output_facts) == (
        b.inputs,
        b.outputs,
        b.nodes,
        b.parameters,
        b.input_facts,
        b.output_facts,
    )


@pytest.mark.parametrize("path", ALL, ids=fixture_id)
def test_legacy_model_is_written_as_the_current_format(path: Path, tmp_path: Path) -> None:
    model = trama.load(path)
    text = trama.dumps(model)
    assert json.loads(text)["format_version"] == trama.FORMAT_VERSION
    again = trama.loads(text)
    assert again.source_format_version == trama.FORMAT_VERSION
    assert same_content(model, again)
    assert_structure(again, expected_of(path))

    for weights in ("inline", "external"):
        target = tmp_path / weights / "model.trama.json"
        target.parent.mkdir()
        trama.dump(model, target, weights=weights)  # type: ignore[arg-type]
        reread = trama.load(target)
        assert same_content(model, reread)
        assert trama.dumps(reread) == text


@pytest.mark.parametrize("path", V0_2, ids=fixture_id)
def test_v0_2_values_survive_the_rewrite(path: Path) -> None:
    again = trama.loads(trama.dumps(trama.load(path)))
    for name, description in expected_of(path)["parameters"].items():
        assert_matches(again.parameters[name], description, name)


# --------------------------------------------------------------------------------------------
# Upgrade rules not covered by the fixtures
# --------------------------------------------------------------------------------------------


def legacy_doc(version: str, slots: dict[str, Any], table: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format_version": version,
        "inputs": ["x"],
        "outputs": [{"node": "root", "output": "y"}],
        "nodes": [
            {
                "id": "root",
                "parent": None,
                "op": "Block",
                "inputs": {"x": {"node": "%input", "output": "x"}},
                "outputs": ["y"],
                "parameters": slots,
                "output_bindings": {"y": {"node": "root.inner", "output": "y"}},
            },
            {
                "id": "root.inner",
                "parent": "root",
                "op": "ReLU",
                "inputs": {"x": {"node": "%input", "output": "x"}},
                "outputs": ["y"],
                "parameters": {},
                "output_bindings": None,
            },
        ],
    }
    if table is not None:
        doc["parameters"] = table
    return doc


def test_v0_1_entry_name_clashing_with_a_node_id_is_renamed() -> None:
    # Slot "inner" on "root" would be named "root.inner", which is a child's id.
    doc = legacy_doc("0.1", {"inner": {"value": 4, "learnable": False}, "other": {"value": 5}})
    model = trama.loads(json.dumps(doc))
    assert model.node("root").parameters == {"inner": "root.inner_1", "other": "root.other"}
    assert model.parameters["root.inner_1"] == trama.Parameter(4, False)
    assert model.parameters["root.other"] == trama.Parameter(5, False)  # learnable defaults to false


def test_v0_1_with_a_parameter_table_is_refused() -> None:
    doc = legacy_doc("0.1", {}, table={})
    with pytest.raises(trama.SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/parameters"


@pytest.mark.parametrize("slot", [3, "x", None, [1], {"name": "root.p"}, {"learnable": True}])
def test_v0_1_slot_that_is_not_an_entry(slot: Any) -> None:
    doc = legacy_doc("0.1", {"p": slot})
    with pytest.raises(trama.SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location is not None
    assert info.value.location.startswith("/")


def test_v0_1_node_with_a_non_string_id_is_a_schema_error() -> None:
    doc = legacy_doc("0.1", {"p": {"value": 1}})
    doc["nodes"].append({**doc["nodes"][1], "id": ["not", "a", "string"], "parameters": {"q": {"value": 2}}})
    with pytest.raises(trama.SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/nodes/2/id"


def test_v0_2_without_table_or_learnable_flags() -> None:
    assert trama.loads(json.dumps(legacy_doc("0.2", {}))).parameters == {}
    doc = legacy_doc("0.2", {"p": {"name": "root.p"}}, table={"root.p": {"value": 1.5}})
    assert trama.loads(json.dumps(doc)).parameters == {"root.p": trama.Parameter(1.5, False)}


def test_v0_2_inline_slot_is_refused() -> None:
    doc = legacy_doc("0.2", {"p": {"value": 1, "learnable": False}}, table={})
    with pytest.raises(trama.SchemaError):
        trama.loads(json.dumps(doc))


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_legacy_documents_get_the_current_rules(version: str) -> None:
    # The old loaders accepted these; an upgraded document is checked like a 1.0 one.
    doc = legacy_doc(version, {})
    doc["nodes"][0]["extra"] = 1
    with pytest.raises(trama.SchemaError, match="unknown field"):
        trama.loads(json.dumps(doc))
    doc = legacy_doc(version, {})
    text = json.dumps(doc).replace('"op": "Block",', '"op": "Block", "op": "Block",')
    with pytest.raises(trama.JSONError, match="appears twice"):
        trama.loads(text)
    doc = legacy_doc(version, {})
    doc["nodes"][1]["inputs"]["x"] = {"node": "root.nope", "output": "y"}
    with pytest.raises(trama.ValidationError, match="unknown node"):
        trama.loads(json.dumps(doc))


@pytest.mark.parametrize("version", ["0.1", "0.2"])
@pytest.mark.parametrize("op", ["Block\nroot.evil = Evil()", "\x1b[31mBlock", "Block ", "2Block", "B" * 257])
def test_legacy_op_names_follow_the_current_rule(version: str, op: str) -> None:
    # The old releases accepted any string; no writer produced one that is not an identifier, so
    # the rule holds for legacy documents too (docs/format.md, sections 4.1 and 9).
    doc = legacy_doc(version, {})
    doc["nodes"][0]["op"] = op
    with pytest.raises(trama.SchemaError) as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/nodes/0/op"


def test_every_op_name_in_the_legacy_fixtures_is_an_identifier() -> None:
    from trama.format._names import is_op_name

    ops = {node.op for path in ALL for node in trama.load(path).nodes}
    assert ops
    assert all(is_op_name(op) for op in ops), ops


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_legacy_documents_have_no_checksum(version: str) -> None:
    entry = {"value": 1, "learnable": False, "checksum": "xxh3-64:" + "0" * 16}
    if version == "0.1":
        doc = legacy_doc(version, {"p": entry})
    else:
        doc = legacy_doc(version, {"p": {"name": "root.p"}}, table={"root.p": entry})
    with pytest.raises(trama.SchemaError, match=f"new in format 1.2; this document declares format {version}") as info:
        trama.loads(json.dumps(doc))
    assert info.value.location == "/parameters/root.p/checksum"


@pytest.mark.parametrize("path", ALL, ids=fixture_id)
def test_a_rewritten_legacy_document_records_each_inline_tensor_checksum(path: Path) -> None:
    doc = json.loads(trama.dumps(trama.load(path), format_version="1.2"))
    for entry in doc["parameters"].values():
        assert ("checksum" in entry) == isinstance(entry["value"], dict)
    # and they hold: every tensor decodes with its checksum verified
    for entry in trama.loads(json.dumps(doc)).parameters.values():
        if isinstance(entry.value, trama.Tensor):
            np.asarray(entry.value)


# --------------------------------------------------------------------------------------------
# A registry for the fixture ops, built from the documents themselves
# --------------------------------------------------------------------------------------------


def build(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, trama.Parameter]) -> dict:
    return {"id": node.id, "children": dict(children), "parameters": dict(parameters)}


def fixture_registry(model: trama.Model) -> trama.OpRegistry:
    """Every op in the model, with its ports, outputs, kind and slots (all slots optional, since
    Linear appears with and without a bias)."""
    specs: dict[str, dict[str, Any]] = {}
    for node in model.nodes:
        spec = specs.setdefault(
            node.op,
            {"inputs": tuple(node.inputs), "outputs": tuple(node.outputs), "composite": node.is_composite, "slots": {}},
        )
        for slot in node.parameters:
            spec["slots"][slot] = None
    return trama.OpRegistry(
        trama.OpSpec(
            op,
            inputs=spec["inputs"],
            outputs=spec["outputs"],
            composite=spec["composite"],
            parameters=tuple(trama.ParameterSchema(slot, optional=True) for slot in spec["slots"]),
            factory=build,
        )
        for op, spec in specs.items()
    )


def walk(instance: dict) -> Any:
    yield instance["id"], instance
    for child in instance["children"].values():
        yield from walk(child)


def test_fixture_models_import() -> None:
    for path in ALL:
        model = trama.load(path)
        instance = trama.import_model(model, registry=fixture_registry(model))
        assert [node_id for node_id, _ in walk(instance)] == [n.id for n in model.nodes]


# A tree as deep as trama 0.2.0 writes (tests/fixtures/legacy/deep, written by generate.py with
# 0.2.0): 301 levels, which the first release of format 1.2 refused (its limit was 256).
DEEP = FIXTURES / "deep" / "deep.trama.json"


def test_a_tree_300_levels_deep_written_by_0_2_0_loads_and_runs_everywhere() -> None:
    model = trama.load(DEEP)
    assert_structure(model, expected_of(DEEP))
    assert max(node.id.count(".") + 1 for node in model.nodes) == 301  # 300 Sequentials, a ReLU inside
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    for runtime in ("numpy", "torch:cpu", "jax:cpu"):
        (y,) = trama.runtime_for_name(runtime).prepare(model).run([x])
        np.testing.assert_array_equal(np.asarray(y), np.maximum(x, 0), err_msg=runtime)
    back = trama.loads(trama.dumps(model))  # written as the current format, and read back equal
    assert [node.id for node in back.nodes] == [node.id for node in model.nodes]
