"""Format 1.3: the nested text, settings in their node, blocks written once, the weights file
named once; and every flat document (1.2 and older) still read, and equal once rewritten."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from trama.errors import SchemaError, TramaError
from trama.format import INPUT, Model, Node, Parameter, Ref, Tensor
from trama.format._expand import EXPANSION_ALLOWANCE, expand_document
from trama.format._jsontext import lift_text
from trama.format._typed_nested import decode_nested

FIXTURES = Path(__file__).parent / "fixtures"


def _tensor(seed: int, shape: tuple[int, ...], dtype: str = "float32") -> Tensor:
    values = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return Tensor.from_array(values)


def stack(layers: int, *, hidden: int = 4, vary: int | None = None) -> Model:
    """A model of ``layers`` equal blocks (a Linear and a ReLU in a composite each, ``block.i``),
    then a head; with ``vary``, that layer's ReLU is a GELU (so it is not like the others)."""
    nodes = [Node("body", "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {}, {"class": "demo.Stack"})]
    parameters: dict[str, Parameter] = {}
    previous = Ref(INPUT, "x")
    for i in range(layers):
        block = f"body.block_{i}"
        nodes.append(
            Node(block, "Graph", {"x": previous}, ["y"], {}, {"y": Ref(f"{block}.act", "y")}, {"class": "demo.Block"})
        )
        nodes.append(
            Node(
                f"{block}.fc",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {slot: f"{block}.fc.{slot}" for slot in ("in_features", "out_features", "weight", "bias")},
            )
        )
        act = "GELU" if i == vary else "ReLU"
        nodes.append(Node(f"{block}.act", act, {"x": Ref(f"{block}.fc", "y")}, ["y"]))
        parameters[f"{block}.fc.in_features"] = Parameter(hidden)
        parameters[f"{block}.fc.out_features"] = Parameter(hidden)
        parameters[f"{block}.fc.weight"] = Parameter(_tensor(i, (hidden, hidden)), True)
        parameters[f"{block}.fc.bias"] = Parameter(_tensor(100 + i, (hidden,)), True)
        previous = Ref(block, "y")
    nodes[0].output_bindings = {"y": previous}
    nodes.append(Node("head", "mul", {"x": Ref("body", "y")}, ["y"], {"other": "head.other"}))
    parameters["head.other"] = Parameter(2.0)
    return Model(inputs=["x"], outputs=[Ref("head", "y")], nodes=nodes, parameters=parameters)


def same_model(a: Model, b: Model) -> None:
    assert a.inputs == b.inputs
    assert a.outputs == b.outputs
    assert a.nodes == b.nodes
    assert a.parameters == b.parameters
    assert (a.metadata, a.opsets, a.input_facts, a.output_facts) == (
        b.metadata,
        b.opsets,
        b.input_facts,
        b.output_facts,
    )


def read_both_ways(text: str) -> tuple[Model, Model | None]:
    """The careful reader's model (expansion, then the flat decoder) and the fast reader's."""
    careful = trama.format._codec.decode_document(json.loads(text))
    fast = decode_nested(lift_text(text.encode()), None)
    return careful, fast


# ----- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 2, 5])
def test_a_model_round_trips_through_the_nested_text(layers: int) -> None:
    model = stack(layers)
    text = trama.dumps(model)
    assert json.loads(text)["format_version"] == "1.3"
    same_model(trama.loads(text), model)


def test_every_flat_fixture_round_trips_through_1_3_with_every_tensor_and_setting_equal() -> None:
    documents = sorted(FIXTURES.rglob("*.trama.json"))
    assert len(documents) >= 5
    for path in documents:
        flat = trama.load(path)
        again = trama.loads(trama.dumps(flat), base_dir=path.parent)
        same_model(again, flat)
        for name, entry in flat.parameters.items():
            if isinstance(entry.value, Tensor):
                assert np.asarray(again.parameters[name].value).tobytes() == np.asarray(entry.value).tobytes()


def test_1_2_text_and_1_3_text_of_one_model_read_to_the_same_model() -> None:
    model = stack(3)
    same_model(trama.loads(trama.dumps(model, format_version="1.2")), trama.loads(trama.dumps(model)))


def test_the_same_model_is_the_same_bytes() -> None:
    assert trama.dumps(stack(4)) == trama.dumps(stack(4))


def test_an_unknown_writable_version_is_refused() -> None:
    with pytest.raises(ValueError, match="format_version"):
        trama.dumps(stack(1), format_version="1.1")


# ----- settings and references --------------------------------------------------------------------


def test_settings_are_written_in_their_node_and_shared_entries_in_the_table() -> None:
    model = stack(1)
    model.nodes.append(Node("tail", "mul", {"x": Ref("head", "y")}, ["y"], {"other": "head.other"}))
    model.outputs = [Ref("tail", "y")]
    doc = json.loads(trama.dumps(model))
    fc = doc["nodes"][0]["nodes"][0]["nodes"][0]
    assert fc["set"]["in_features"] == 4
    assert fc["set"]["weight"]["shape"] == [4, 4]
    assert "dtype" not in fc["set"]["weight"]  # float32 is the default
    assert doc["nodes"][1]["set"] == {"other": {"ref": "head.other"}}
    assert doc["parameters"] == {"head.other": 2.0}
    same_model(trama.loads(trama.dumps(model)), model)


def test_a_learnable_setting_and_a_buffer_keep_their_flags() -> None:
    model = stack(1)
    model.parameters["head.other"] = Parameter(2.0, learnable=True)
    model.parameters["body.block_0.fc.bias"].learnable = False
    doc = json.loads(trama.dumps(model))
    assert doc["parameters"]["head.other"] == {"value": 2.0, "learnable": True}
    bias = doc["nodes"][0]["nodes"][0]["nodes"][0]["set"]["bias"]
    assert bias["learnable"] is False
    same_model(trama.loads(trama.dumps(model)), model)


def test_references_are_short_strings_in_their_scope() -> None:
    doc = json.loads(trama.dumps(stack(2)))
    body = doc["nodes"][0]
    assert body["in"] == "%x"  # one port named x: the reference alone
    assert body["nodes"][1]["in"] == "block_0"  # the only output of an earlier sibling
    assert body["out"] == "block_1"  # one output named y: the reference alone
    assert doc["outputs"] == ["head"]


def test_a_reference_to_one_of_several_outputs_names_it() -> None:
    model = Model(
        inputs=["x"],
        outputs=[Ref("pair", "b")],
        nodes=[
            Node("split", "demo.Split", {"x": Ref(INPUT, "x")}, ["a", "b"]),
            Node("pair", "add", {"x": Ref("split", "a"), "other": Ref("split", "b")}, ["b"]),
        ],
        parameters={},
    )
    doc = json.loads(trama.dumps(model))
    assert doc["nodes"][1]["in"] == {"x": "split.a", "other": "split.b"}
    assert doc["nodes"][0]["out"] == ["a", "b"]
    assert doc["outputs"] == ["pair"]
    same_model(trama.loads(trama.dumps(model)), model)


# ----- blocks -------------------------------------------------------------------------------------


def test_equal_composites_are_one_block_and_each_layer_one_line() -> None:
    text = trama.dumps(stack(6))
    doc = json.loads(text)
    assert list(doc["blocks"]) == ["Block"]
    layers = doc["nodes"][0]["nodes"]
    assert [layer["use"] for layer in layers] == ["Block"] * 6
    assert all(len(layer["tensors"]) == 2 for layer in layers)
    assert sum('"use":"Block"' in line for line in text.splitlines()) == 6  # one line each


def test_a_block_is_written_once_however_often_it_repeats() -> None:
    two, eight = ([line.rstrip(",") for line in trama.dumps(stack(n)).splitlines()] for n in (2, 8))
    assert len(eight) - len(two) == 6
    new = [line for line in eight if line not in two]
    assert sum('"use":"Block"' in line for line in new) == 6
    assert len(new) == 7  # and the stack's closing line, which binds the last layer


def test_a_layer_that_differs_is_written_out_in_full() -> None:
    doc = json.loads(trama.dumps(stack(3, vary=1)))
    layers = doc["nodes"][0]["nodes"]
    assert [layer.get("use") for layer in layers] == ["Block", None, "Block"]
    assert layers[1]["nodes"][1]["op"] == "GELU"


def test_instances_keep_their_own_tensors_and_entry_names() -> None:
    model = stack(3)
    again = trama.loads(trama.dumps(model))
    for i in range(3):
        name = f"body.block_{i}.fc.weight"
        assert np.array_equal(np.asarray(again.parameters[name].value), np.asarray(model.parameters[name].value))
    assert again.node("body.block_2.fc").parameters["weight"] == "body.block_2.fc.weight"


def _layer(prefix: str, seed: int, feed: Ref, nodes: list[Node], parameters: dict[str, Parameter]) -> Ref:
    nodes.append(
        Node(prefix, "Graph", {"x": feed}, ["y"], {}, {"y": Ref(f"{prefix}.act", "y")}, {"class": "demo.Block"})
    )
    nodes.append(Node(f"{prefix}.fc", "Linear", {"x": Ref(INPUT, "x")}, ["y"], {"weight": f"{prefix}.fc.weight"}))
    nodes.append(Node(f"{prefix}.act", "ReLU", {"x": Ref(f"{prefix}.fc", "y")}, ["y"]))
    parameters[f"{prefix}.fc.weight"] = Parameter(_tensor(seed, (4, 4)), True)
    return Ref(prefix, "y")


def test_blocks_nest_and_the_outermost_instance_gives_every_tensor() -> None:
    nodes: list[Node] = []
    parameters: dict[str, Parameter] = {}
    feed = Ref(INPUT, "x")
    for k in range(2):
        stage = f"stage_{k}"
        nodes.append(Node(stage, "Graph", {"x": feed}, ["y"], {}, {}, {"class": "demo.Stage"}))
        inner = Ref(INPUT, "x")
        for j in range(2):
            inner = _layer(f"{stage}.layer_{j}", 10 * k + j, inner, nodes, parameters)
        nodes[-7].output_bindings = {"y": inner}
        feed = Ref(stage, "y")
    model = Model(inputs=["x"], outputs=[feed], nodes=nodes, parameters=parameters)
    trama.validate(model)
    doc = json.loads(trama.dumps(model))
    assert list(doc["blocks"]) == ["Stage", "Block"]  # the stage, and the layer inside it
    assert [node.get("use") for node in doc["nodes"]] == ["Stage", "Stage"]
    assert [node["use"] for node in doc["blocks"]["Stage"]["nodes"]] == ["Block", "Block"]
    assert all("tensors" not in node for node in doc["blocks"]["Stage"]["nodes"])
    assert len(doc["nodes"][0]["tensors"]) == 2  # every tensor of the stage, nested layers included
    same_model(trama.loads(trama.dumps(model)), model)


def test_external_weights_name_the_file_once_and_each_tensor_by_checksum(tmp_path: Path) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(stack(3), path, weights="external")
    text = path.read_text()
    doc = json.loads(text)
    weights = doc["weights"]
    assert text.count(weights) == 1
    assert (tmp_path / weights).is_file()
    assert all(len(c) == 16 for layer in doc["nodes"][0]["nodes"] for c in layer["tensors"])
    assert trama.weights_path(path) == tmp_path / weights
    same_model(trama.load(path), stack(3))
    # The file renamed: one line of the document changes.
    renamed = tmp_path / "renamed.safetensors"
    (tmp_path / weights).rename(renamed)
    path.write_text(text.replace(weights, renamed.name))
    same_model(trama.load(path), stack(3))


def test_a_block_whose_tensors_do_not_fit_its_shapes_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.trama.json"
    trama.dump(stack(2), path, weights="external")
    doc = json.loads(path.read_text())
    doc["blocks"]["Block"]["nodes"][0]["set"]["weight"]["shape"] = [4, 5]
    path.write_text(json.dumps(doc))
    model = trama.load(path)
    with pytest.raises(TramaError) as caught:
        np.asarray(model.parameters["body.block_0.fc.weight"].value)
    assert "'body.block_0.fc.weight'" in caught.value.message
    assert "float32[4, 5]" in caught.value.message
    assert caught.value.location == "/nodes/0/nodes/0/tensors/0"  # this instance's tensor


# ----- the careful and the fast reader ------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 3])
def test_both_readers_read_the_same_model(layers: int) -> None:
    model = stack(layers, vary=0)
    careful, fast = read_both_ways(trama.dumps(model))
    same_model(careful, model)
    if fast is not None:
        same_model(fast, model)


def test_the_fast_reader_reads_a_document_without_blocks() -> None:
    model = stack(1)
    text = trama.dumps(model)
    assert '"blocks"' not in text
    fast = decode_nested(lift_text(text.encode()), None)
    assert fast is not None
    same_model(fast, model)


def test_a_repeated_key_is_refused_by_both_readers() -> None:
    text = trama.dumps(stack(1)).replace('"op":"ReLU"', '"op":"ReLU","op":"GELU"')
    assert decode_nested(lift_text(text.encode()), None) is None
    with pytest.raises(TramaError, match="twice"):
        trama.loads(text)


# ----- bad documents: one clear error each, located in the 1.3 text -------------------------------


def _doc() -> dict[str, Any]:
    return json.loads(trama.dumps(stack(2)))


def _refused(doc: dict[str, Any]) -> TramaError:
    with pytest.raises(TramaError) as caught:
        trama.loads(json.dumps(doc))
    return caught.value


def test_an_unknown_block_is_named() -> None:
    doc = _doc()
    doc["nodes"][0]["nodes"][1]["use"] = "Nope"
    error = _refused(doc)
    assert error.location == "/nodes/0/nodes/1/use"
    assert "Nope" in error.message


def test_a_block_that_uses_itself_is_refused() -> None:
    doc = _doc()
    doc["blocks"]["Block"]["nodes"].append({"name": "again", "use": "Block", "in": "%x"})
    error = _refused(doc)
    assert "uses itself" in error.message
    assert error.location.startswith("/blocks/Block/nodes/2")


def test_an_instance_with_too_few_or_too_many_tensors_is_refused() -> None:
    for change in (lambda t: t.pop(), lambda t: t.append(t[0])):
        doc = _doc()
        change(doc["nodes"][0]["nodes"][1]["tensors"])
        error = _refused(doc)
        assert error.location.startswith("/nodes/0/nodes/1/tensors")
        assert "Block" in error.message


def test_an_instance_that_feeds_other_ports_is_refused() -> None:
    doc = _doc()
    doc["nodes"][0]["nodes"][1]["in"] = {"z": "block_0"}
    error = _refused(doc)
    assert error.location == "/nodes/0/nodes/1/in"
    assert "ports" in error.message


def test_references_that_do_not_resolve_are_located() -> None:
    doc = _doc()
    doc["nodes"][1]["in"] = "missing"
    error = _refused(doc)
    assert error.location == "/nodes/1/in"
    assert "missing" in error.message


def test_a_rule_of_the_flat_form_is_reported_where_the_1_3_text_says_it() -> None:
    doc = _doc()
    doc["nodes"][1]["in"] = "body.nowhere"  # resolves to a node id, which the flat rules refuse
    error = _refused(doc)
    assert error.location == "/nodes/1/in/x"


def test_a_rule_broken_inside_a_block_names_the_instance() -> None:
    doc = _doc()
    doc["blocks"]["Block"]["nodes"][1]["in"] = "fc.nope"
    error = _refused(doc)
    assert error.location.startswith("/blocks/Block/nodes/1/in")
    assert "instance" in error.message


def test_a_name_with_a_dot_is_refused() -> None:
    doc = _doc()
    doc["nodes"][1]["name"] = "he.ad"
    error = _refused(doc)
    assert error.location == "/nodes/1/name"


def test_a_tensor_by_checksum_needs_a_weights_file() -> None:
    doc = _doc()
    doc["nodes"][0]["nodes"][0]["tensors"][0] = "0123456789abcdef"
    error = _refused(doc)
    assert "weights" in error.message


def test_a_relative_class_needs_an_enclosing_class() -> None:
    doc = _doc()
    doc["nodes"][1]["class"] = ".Head"
    error = _refused(doc)
    assert error.location == "/nodes/1/class"


def test_blocks_that_multiply_beyond_the_text_are_refused_before_allocating() -> None:
    blocks: dict[str, Any] = {
        "B0": {"in": ["x"], "nodes": [{"name": "r", "op": "ReLU", "in": "%x"}], "out": {"y": "r"}}
    }
    for k in range(1, 12):
        inner = [{"name": f"i{j}", "use": f"B{k - 1}", "in": "%x"} for j in range(8)]
        blocks[f"B{k}"] = {"in": ["x"], "nodes": inner, "out": {"y": "i7"}}
    doc = {
        "format_version": "1.3",
        "inputs": ["x"],
        "outputs": ["top"],
        "blocks": blocks,
        "nodes": [{"name": "top", "use": "B11", "in": "%x"}],
    }
    with pytest.raises(SchemaError, match="expands to more than"):
        expand_document(copy.deepcopy(doc))
    assert EXPANSION_ALLOWANCE < 8**11


def test_upgrade_rewrites_any_version_and_back(tmp_path: Path) -> None:
    from trama.tools.cli import main

    legacy = sorted((FIXTURES / "legacy").rglob("*.trama.json"))[0]
    upgraded = tmp_path / "up.trama.json"
    assert main(["upgrade", str(legacy), "-o", str(upgraded)]) == 0
    assert json.loads(upgraded.read_text())["format_version"] == "1.3"
    flat = tmp_path / "flat.trama.json"
    assert main(["upgrade", str(upgraded), "-o", str(flat), "--format-version", "1.2"]) == 0
    assert json.loads(flat.read_text())["format_version"] == "1.2"
    same_model(trama.load(flat), trama.load(legacy))
    assert main(["upgrade", str(tmp_path / "absent.json"), "-o", str(flat)]) == 1


def test_a_tensor_with_data_and_an_external_file_is_refused() -> None:
    doc = json.loads(trama.dumps(stack(1)))
    weight = doc["nodes"][0]["nodes"][0]["nodes"][0]["set"]["weight"]
    weight["external"] = {"path": "w.safetensors", "key": "k", "checksum": weight.pop("checksum")}
    error = _refused(doc)
    assert "not both" in error.message
    assert error.location.endswith("/set/weight")


def test_a_class_given_twice_is_refused() -> None:
    doc = _doc()
    doc["nodes"][0]["meta"] = {"class": "demo.Other"}
    error = _refused(doc)
    assert error.location == "/nodes/0/meta/class"


def test_a_block_without_its_ports_or_used_by_no_node_is_refused() -> None:
    doc = _doc()
    del doc["blocks"]["Block"]["in"]
    assert "'in'" in _refused(doc).message
    doc = _doc()
    doc["blocks"]["Spare"] = doc["blocks"]["Block"]
    error = _refused(doc)
    assert error.location == "/blocks/Spare"
    assert "used by no node" in error.message


@pytest.mark.parametrize("odd", ["", ".Leading", 3, None, "no_module"])
def test_any_class_metadata_round_trips(odd: Any) -> None:
    model = stack(1)
    model.nodes[1].metadata = {"class": odd, "other": [1]}
    same_model(trama.loads(trama.dumps(model)), model)
