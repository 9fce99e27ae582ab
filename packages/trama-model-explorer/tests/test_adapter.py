"""The Model Explorer adapter: a document's tree becomes layers, its wiring edges, its settings attributes.

A hand-built document covers what the wiring may do (a reference through a composite's binding
and through a scope input, a call of a composite, a leaf with two outputs, a model input that is
also an output, a tied entry, every kind of setting); a small torch module exported with trama
covers what an exporter writes. The graphs are checked as Model Explorer reads them: its own
``graph_builder`` classes, turned to JSON the way its server sends them to the page and read back
with ``dacite`` as it reads graphs itself, and the adapter loaded by Model Explorer's extension
manager from ``--extensions=trama_model_explorer``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("model_explorer")

import dacite
from model_explorer.extension_manager import ExtensionManager
from model_explorer.graph_builder import Graph, GraphNode
from model_explorer.utils import convert_adapter_response

import trama
from trama import INPUT, Model, Node, Parameter, Ref, SizeExpr, ValueFact

# Read as a module (not imported by name) so that the import sorting does not depend on whether
# the linter is told that trama_model_explorer is first-party.
adapter = pytest.importorskip("trama_model_explorer")
TramaAdapter, convert_model = adapter.TramaAdapter, adapter.convert_model


def _tensor(*shape: int) -> trama.Tensor:
    return trama.Tensor.from_array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def hand_built() -> Model:
    """``net`` holds ``block`` (holding ``fc``), ``again`` (a call of ``block``) and ``act``; at
    top level, ``split`` has two outputs, ``add`` reads one of them and the input ``skip``, and
    ``proj`` shares its weight with ``net.block.fc``. The model also returns ``skip`` itself, through
    ``keep``, a composite without leaves."""
    x, h = Ref(INPUT, "x"), Ref(INPUT, "h")
    nodes = [
        Node(
            "net",
            "Graph",
            {"x": x},
            ["y"],
            output_bindings={"y": Ref("net.act", "y")},
            metadata={"class": "demo.Net", "note": [1, "two"]},
        ),
        Node(
            "net.block",
            "Graph",
            {"h": x},  # the scope input x of net
            ["y"],
            output_bindings={"y": Ref("net.block.fc", "y")},
            metadata={"class": "demo.Block"},
        ),
        Node(
            "net.block.fc",
            "Linear",
            {"x": h},
            ["y"],
            {"in_features": "fc.in", "weight": "tied", "bias": "fc.bias"},
        ),
        Node("net.again", "Graph", {"h": Ref("net.block", "y")}, ["y"], calls="net.block"),
        Node("net.act", "relu", {"x": Ref("net.again", "y")}, ["y"], {"inplace": "act.inplace"}),
        Node(
            "split",
            "chunk",
            {"x": Ref("net", "y")},
            ["y0", "y1"],
            {"chunks": "split.chunks", "dim": "split.dim", "mode": "split.mode", "shape": "split.shape"},
        ),
        Node("add", "add", {"x": Ref("split", "y1"), "other": Ref(INPUT, "skip")}, ["y"], {"alpha": "add.alpha"}),
        Node("proj", "Linear", {"x": Ref("add", "y")}, ["y"], {"weight": "tied", "bias": "proj.bias"}),
        # A composite with no leaf, whose output is its input: not a layer, and no node.
        Node("keep", "Identity", {"v": Ref(INPUT, "skip")}, ["y"], output_bindings={"y": Ref(INPUT, "v")}),
    ]
    parameters = {
        "fc.in": Parameter(4),
        "tied": Parameter(_tensor(4, 4), learnable=True),
        "fc.bias": Parameter(_tensor(4), learnable=True),
        "act.inplace": Parameter(False),
        "split.chunks": Parameter(2),
        "split.dim": Parameter(-1),
        "split.mode": Parameter("same"),
        "split.shape": Parameter([SizeExpr.parse("batch * 2"), -1]),
        "add.alpha": Parameter(1e-06),
        "proj.bias": Parameter(None),
    }
    model = Model(
        inputs=["x", "skip"],
        outputs=[Ref("proj", "y"), Ref("split", "y0"), Ref("keep", "y")],
        nodes=nodes,
        parameters=parameters,
        metadata={"producer": {"name": "hand", "version": "1"}},
        input_facts=[ValueFact("float32", ("batch", 4)), ValueFact("float32", None)],
        output_facts=[ValueFact("float32", ("batch", 4)), None, None],
    )
    trama.validate(model)
    return model


def graph_of(model: Model) -> Graph:
    graphs = convert_model(model)
    assert set(graphs) == {"graphs"}
    (graph,) = graphs["graphs"]
    assert isinstance(graph, Graph)
    return graph


def by_id(graph: Graph) -> dict[str, GraphNode]:
    nodes = {node.id: node for node in graph.nodes}
    assert len(nodes) == len(graph.nodes), "node ids are unique"
    return nodes


def edges(node: GraphNode) -> list[tuple[str, str, str]]:
    return [(e.sourceNodeId, e.sourceNodeOutputId, e.targetNodeInputId) for e in node.incomingEdges]


def attrs(node: GraphNode) -> dict[str, Any]:
    keys = [item.key for item in node.attrs]
    assert len(keys) == len(set(keys)), keys
    return {item.key: item.value for item in node.attrs}


def tags(items: list[Any]) -> dict[str, str]:
    """Each input's or output's id -> its name (``__tensor_tag``)."""
    return {item.id: next(kv.value for kv in item.attrs if kv.key == "__tensor_tag") for item in items}


def shapes(items: list[Any]) -> dict[str, str]:
    return {item.id: kv.value for item in items for kv in item.attrs if kv.key == "tensor_shape"}


# --- the hand-built document -----------------------------------------------------------------


def test_one_node_per_leaf_in_its_parents_namespace() -> None:
    nodes = by_id(graph_of(hand_built()))
    namespaces = {node_id: node.namespace for node_id, node in nodes.items()}
    assert namespaces == {
        "%input.x": "",
        "%input.skip": "",
        "net.block.fc": "net/block",
        "net.again.fc": "net/again",  # the call's copy of fc, in a layer of its own
        "net.act": "net",
        "split": "",
        "add": "",
        "proj": "",
        "%output.0": "",
        "%output.1": "",
        "%output.2": "",
    }
    labels = {node_id: node.label for node_id, node in nodes.items()}
    assert labels["net.block.fc"] == labels["net.again.fc"] == "Linear"
    assert labels["split"] == "chunk"
    assert {labels[f"%input.{name}"] for name in ("x", "skip")} == {"Input"}
    assert {labels[f"%output.{k}"] for k in range(3)} == {"Output"}


def test_edges_follow_the_wiring_through_bindings_and_scope_inputs() -> None:
    nodes = by_id(graph_of(hand_built()))
    assert edges(nodes["net.block.fc"]) == [("%input.x", "0", "0")]  # scope input h <- net's x <- model x
    assert edges(nodes["net.again.fc"]) == [("net.block.fc", "0", "0")]  # the call reads block's output
    assert edges(nodes["net.act"]) == [("net.again.fc", "0", "0")]  # through the call's binding
    assert edges(nodes["split"]) == [("net.act", "0", "0")]  # through net's binding
    assert edges(nodes["add"]) == [("split", "1", "0"), ("%input.skip", "0", "1")]
    assert edges(nodes["proj"]) == [("add", "0", "0")]
    assert edges(nodes["%output.0"]) == [("proj", "0", "0")]
    assert edges(nodes["%output.1"]) == [("split", "0", "0")]
    assert edges(nodes["%output.2"]) == [("%input.skip", "0", "0")]
    assert edges(nodes["%input.x"]) == edges(nodes["%input.skip"]) == []
    # Ports and outputs are numbered as the node lists them, each tagged with its name.
    assert tags(nodes["add"].inputsMetadata) == {"0": "x", "1": "other"}
    assert tags(nodes["split"].outputsMetadata) == {"0": "y0", "1": "y1"}
    assert tags(nodes["%input.skip"].outputsMetadata) == {"0": "skip"}


def test_attributes_hold_op_class_settings_and_parameter_counts() -> None:
    nodes = by_id(graph_of(hand_built()))
    fc = attrs(nodes["net.block.fc"])
    assert fc == {
        "op": "Linear",
        "in_features": "4",
        "weight": "f32[4, 4] learnable (shared entry tied)",
        "bias": "f32[4] learnable",
        "#parameters": "20",
    }
    assert attrs(nodes["net.again.fc"]) == {
        "op": "Linear",
        "copy of": "net.block.fc",
        **{k: v for k, v in fc.items() if k != "op"},
    }
    assert attrs(nodes["split"]) == {
        "op": "chunk",
        "chunks": "2",
        "dim": "-1",
        "mode": '"same"',
        "shape": "[batch * 2, -1]",
    }
    assert attrs(nodes["add"]) == {"op": "add", "alpha": "1e-06"}
    assert attrs(nodes["net.act"]) == {"op": "relu", "inplace": "false"}
    assert attrs(nodes["proj"])["bias"] == "null"
    assert attrs(nodes["proj"])["#parameters"] == "16"
    assert attrs(nodes["%input.x"]) == {"name": "x", "type": "f32[batch, 4]"}
    assert attrs(nodes["%output.2"]) == {"index": "2", "ref": "%keep.y"}


def test_shapes_come_from_the_facts() -> None:
    nodes = by_id(graph_of(hand_built()))
    assert shapes(nodes["%input.x"].outputsMetadata) == {"0": "f32[batch, 4]"}
    assert shapes(nodes["%input.skip"].outputsMetadata) == {"0": "f32[?]"}  # a dtype, no shape
    assert shapes(nodes["proj"].outputsMetadata) == {"0": "f32[batch, 4]"}  # the fact of output 0
    assert attrs(nodes["%output.0"])["type"] == "f32[batch, 4]"
    assert shapes(nodes["split"].outputsMetadata) == {}  # output 1 has no fact


def test_layers_and_the_graph_carry_attributes() -> None:
    graph = graph_of(hand_built())
    groups = graph.groupNodeAttributes
    assert groups is not None
    assert set(groups) == {"", "net", "net/block", "net/again"}  # not keep, which holds no leaf
    assert groups["net"] == {
        "op": "Graph",
        "class": "demo.Net",
        "id": "net",
        "inputs": "x",
        "outputs": "y",
        "#parameters": "20",  # the call shares block's entries: counted once
        "metadata.note": '[1, "two"]',
    }
    assert groups["net/again"]["copy of"] == "net.block"
    assert groups["net/block"]["class"] == "demo.Block"
    assert groups[""]["producer"] == "hand 1"
    assert groups[""]["inputs"] == "x, skip"
    assert groups[""]["#parameters"] == "20"


def test_model_explorer_reads_the_graph_back() -> None:
    """The JSON Model Explorer's server sends to the page, read back into its classes (as its
    node data runner reads graphs) is the same graph."""
    graphs = convert_model(hand_built())
    text = json.dumps(convert_adapter_response(graphs))
    (data,) = json.loads(text)["graphs"]
    assert dacite.from_dict(data_class=Graph, data=data) == graphs["graphs"][0]
    ids = {node["id"] for node in data["nodes"]}
    assert all(edge["sourceNodeId"] in ids for node in data["nodes"] for edge in node["incomingEdges"])


# --- a document written by trama's exporter ---------------------------------------------------


def exported(tmp_path: Path) -> Path:
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.act(self.fc(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = Block()
            self.head = nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.head(self.block(self.block(x)) + x)

    torch.manual_seed(0)
    model = trama.export_model(Net().eval(), inputs=["x"], outputs=["y"], example_inputs=(torch.randn(3, 4),))
    path = tmp_path / "net.trama.json"
    trama.dump(model, path)
    return path


def test_an_exported_module(tmp_path: Path) -> None:
    graphs = TramaAdapter().convert(str(exported(tmp_path)), {})
    (graph,) = graphs["graphs"]
    assert graph.id == "net"
    nodes = by_id(graph)
    assert {node_id: (node.label, node.namespace) for node_id, node in nodes.items()} == {
        "%input.x": ("Input", ""),
        "root.block.fc": ("Linear", "root/block"),
        "root.block.act": ("ReLU", "root/block"),
        "root.block_1.fc": ("Linear", "root/block_1"),  # self.block called a second time
        "root.block_1.act": ("ReLU", "root/block_1"),
        "root.add": ("add", "root"),
        "root.head": ("Linear", "root"),
        "%output.0": ("Output", ""),
    }
    assert edges(nodes["root.block_1.fc"]) == [("root.block.act", "0", "0")]
    assert edges(nodes["root.add"]) == [("root.block_1.act", "0", "0"), ("%input.x", "0", "1")]
    assert edges(nodes["%output.0"]) == [("root.head", "0", "0")]
    assert attrs(nodes["root.head"])["weight"] == "f32[2, 4] learnable"
    assert attrs(nodes["root.head"])["#parameters"] == "10"
    assert shapes(nodes["root.head"].outputsMetadata) == {"0": "f32[3, 2]"}
    assert shapes(nodes["%input.x"].outputsMetadata) == {"0": "f32[3, 4]"}
    assert graph.groupNodeAttributes is not None
    assert graph.groupNodeAttributes["root/block"]["class"].endswith("Block")
    assert graph.groupNodeAttributes["root"]["#parameters"] == "30"


def test_external_weights_missing_from_the_folder(tmp_path: Path) -> None:
    """Model Explorer copies an uploaded file alone into a folder of its own: the weights file
    stays behind, and the graph, which shows no tensor data, is drawn all the same."""
    model = trama.load(exported(tmp_path))
    path = tmp_path / "external.trama.json"
    trama.dump(model, path, weights="external")
    for weights in tmp_path.glob("external.*.safetensors"):
        weights.unlink()
    (graph,) = TramaAdapter().convert(str(path), {})["graphs"]
    assert attrs(by_id(graph)["root.head"])["weight"] == "f32[2, 4] learnable"


def test_model_explorer_loads_the_extension(tmp_path: Path) -> None:
    """As ``model-explorer FILE --extensions=trama_model_explorer`` does: the extension manager
    imports ``trama_model_explorer.main``, finds the adapter and runs its ``convert`` command."""
    manager = ExtensionManager(["trama_model_explorer"])
    manager.load_extensions()
    (found,) = [ext for ext in manager.extensions if ext.metadata.id == "trama"]
    assert found.type == "adapter"
    assert found.metadata.fileExts == ["json"]
    command = {
        "extensionId": "trama",
        "cmdId": "convert",
        "modelPath": str(exported(tmp_path)),
        "settings": {},
        "deleteAfterConversion": False,
    }
    response = json.loads(json.dumps(manager.run_cmd(command)))
    (graph,) = response["graphs"]
    assert len(graph["nodes"]) == 8
    assert dataclasses.is_dataclass(dacite.from_dict(data_class=Graph, data=graph))
