"""Every zoo document opens in Model Explorer: the trama adapter draws the tree it was captured as.

Each captured document is written to a file and converted by ``TramaAdapter().convert``, as
``model-explorer FILE --extensions=trama_model_explorer`` does. The graph has one op node per
leaf of the document (calls expanded, as the model runs), in the namespace of its parent path,
one Input node per model input and one Output node per model output; every edge comes from a
node of the graph, out of an output that node has; and the graph survives the JSON that Model
Explorer's server sends to the page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("model_explorer")

from model_explorer.utils import convert_adapter_response

import trama
from realworld.captures import ZooCapture
from trama.format._calls import expand_calls

adapter = pytest.importorskip("trama_model_explorer")


def test_zoo_model_explorer(zoo_capture: ZooCapture, tmp_path: Path) -> None:
    document = zoo_capture.document
    if document is None:
        pytest.skip(f"{zoo_capture.entry.name} does not export: {zoo_capture.error}")
    path = tmp_path / f"{zoo_capture.entry.name}.trama.json"
    trama.dump(document, path)

    graphs = adapter.TramaAdapter().convert(str(path), {})
    (graph,) = graphs["graphs"]
    assert graph.id == zoo_capture.entry.name

    nodes, _ = expand_calls(document)
    leaves = {node.id: node for node in nodes if node.output_bindings is None}
    inputs = {f"%input.{name}" for name in document.inputs}
    outputs = {f"%output.{k}" for k in range(len(document.outputs))}
    drawn = {node.id: node for node in graph.nodes}
    assert len(drawn) == len(graph.nodes), "node ids are unique"
    assert set(drawn) == set(leaves) | inputs | outputs
    for node_id, leaf in leaves.items():
        node = drawn[node_id]
        assert node.label == leaf.op
        assert node.namespace == (leaf.parent or "").replace(".", "/")
        assert len(node.incomingEdges) == len(leaf.inputs)
        assert len(node.outputsMetadata) == len(leaf.outputs)

    for node in graph.nodes:
        for edge in node.incomingEdges:
            source = drawn.get(edge.sourceNodeId)
            assert source is not None, f"{node.id} reads {edge.sourceNodeId}, which is not drawn"
            assert edge.sourceNodeId not in outputs
            if edge.sourceNodeId in inputs:
                assert edge.sourceNodeOutputId == "0"
            else:
                assert 0 <= int(edge.sourceNodeOutputId) < len(leaves[edge.sourceNodeId].outputs)
    assert all(len(drawn[node_id].incomingEdges) == 1 for node_id in outputs)

    layers = {node.namespace for node in graph.nodes} - {""}
    assert graph.groupNodeAttributes is not None
    assert layers <= set(graph.groupNodeAttributes)

    (sent,) = json.loads(json.dumps(convert_adapter_response(graphs)))["graphs"]
    assert len(sent["nodes"]) == len(graph.nodes)
