"""The onnxruntime runtime: found by name, runs documents with and without facts, returns Python
values where the document computes them, refuses wrong inputs as every runtime does, and profiles
per trama node."""

from __future__ import annotations

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama_onnx import OnnxRuntime
from trama_onnx.runtime import OnnxRunnable

RNG = np.random.default_rng(1)


def mlp(facts: bool = True) -> Model:
    table = {
        "root.fc.in_features": Parameter(4),
        "root.fc.out_features": Parameter(3),
        "root.fc.weight": Parameter(Tensor.from_array(RNG.standard_normal((3, 4)).astype(np.float32)), True),
        "root.fc.bias": Parameter(Tensor.from_array(RNG.standard_normal(3).astype(np.float32)), True),
    }
    nodes = [
        Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref("root.act", "y")}),
        Node("root.fc", "Linear", {"x": Ref(INPUT, "x")}, ["y"], {k.rpartition(".")[2]: k for k in table}),
        Node("root.act", "ReLU", {"x": Ref("root.fc", "y")}, ["y"]),
    ]
    input_facts = [ValueFact("float32", ("batch", 4))] if facts else None
    return Model(["x"], [Ref("root", "y")], nodes, table, input_facts=input_facts)


def test_it_is_found_by_name_and_alias() -> None:
    for name in ("onnxruntime", "onnxruntime:cpu"):
        found = trama.runtime_for_name(name)
        assert isinstance(found, OnnxRuntime)
        assert found.name() == "onnxruntime"
    listed = {info.name: info for info in trama.runtimes()}
    assert listed["onnxruntime"].available
    assert listed["onnxruntime"].aliases == ("onnxruntime:cpu",)
    assert "onnxruntime:cuda" in listed


def test_a_document_runs_as_on_numpy_with_inputs_by_position_or_name() -> None:
    model = mlp()
    runnable = trama.runtime_for_name("onnxruntime").prepare(model)
    reference = trama.runtime_for_name("numpy").prepare(model)
    for batch in (1, 6):
        x = RNG.standard_normal((batch, 4)).astype(np.float32)
        (expected,) = reference.run([x])
        np.testing.assert_allclose(runnable.run([x])[0], expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(runnable.run({"x": x.tolist()})[0], expected, rtol=1e-6, atol=1e-6)
    (streamed,) = runnable.spawn_state().run([x])
    np.testing.assert_allclose(streamed, expected, rtol=1e-6, atol=1e-6)


def test_a_document_without_facts_is_lowered_for_each_input_signature() -> None:
    model = mlp(facts=False)
    runnable = trama.runtime_for_name("onnxruntime").prepare(model)
    assert isinstance(runnable, OnnxRunnable)
    for shape in ((2, 4), (5, 4), (2, 4), (3, 2, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        (expected,) = trama.runtime_for_name("numpy").prepare(model).run([x])
        np.testing.assert_allclose(runnable.run([x])[0], expected, rtol=1e-6, atol=1e-6)
    assert len(runnable._sessions) == 3
    dims = runnable.onnx_model([np.zeros((7, 4), np.float32)]).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [7, 4]


def test_wrong_inputs_are_execution_errors() -> None:
    runnable = trama.runtime_for_name("onnxruntime").prepare(mlp())
    with pytest.raises(trama.ExecutionError, match="rank 2"):
        runnable.run([np.zeros((2, 3, 4), np.float32)])
    with pytest.raises(trama.ExecutionError, match="dtype float32"):
        runnable.run([np.zeros((2, 4), np.float64)])
    with pytest.raises(trama.ExecutionError, match="1 input"):
        runnable.run([np.zeros((2, 4), np.float32)] * 2)
    factless = trama.runtime_for_name("onnxruntime").prepare(mlp(facts=False))
    with pytest.raises(trama.ExecutionError) as caught:  # the reference says why, naming the node
        factless.run([np.zeros((2, 5), np.float32)])
    assert caught.value.node_id == "root.fc"


def test_python_values_come_back_as_they_are() -> None:
    table = {"c.value": Parameter("same"), "n.value": Parameter(3), "s.other": Parameter(2.5)}
    nodes = [
        Node("c", "constant", {}, ["y"], {"value": "c.value"}),
        Node("n", "constant", {}, ["y"], {"value": "n.value"}),
        Node("s", "mul", {"x": Ref(INPUT, "x")}, ["y"], {"other": "s.other"}),
    ]
    model = Model(["x"], [Ref("c", "y"), Ref("s", "y"), Ref("n", "y")], nodes, table)
    x = np.arange(3, dtype=np.int32)
    text, scaled, number = trama.runtime_for_name("onnxruntime").prepare(model).run([x])
    assert text == "same"
    assert number == 3
    assert type(number) is int
    np.testing.assert_array_equal(scaled, x * np.float32(2.5))
    assert scaled.dtype == np.float32  # int32 · 2.5 is float32, as in torch


def test_a_placement_can_only_keep_everything_on_the_cpu() -> None:
    runtime = trama.runtime_for_name("onnxruntime")
    runtime.prepare(mlp(), {"root.fc": "cpu"})
    with pytest.raises(trama.ExecutionError, match="whole model"):
        runtime.prepare(mlp(), {"root.fc": "cuda"})


def test_profile_json_times_every_leaf_by_its_id() -> None:
    model = mlp()
    x = RNG.standard_normal((8, 4)).astype(np.float32)
    profile = trama.runtime_for_name("onnxruntime").prepare(model).profile_json([x])
    assert profile["runtime"] == "onnxruntime"
    rows = {row["id"]: row for row in profile["nodes"]}
    assert set(rows) == {"root", "root.fc", "root.act"}
    assert rows["root.fc"]["calls"] == 1
    assert rows["root.fc"]["seconds"] > 0
    # onnxruntime fuses the ReLU into the matrix product's kernel (FusedGemm, named after root.fc):
    # a leaf without a kernel of its own is timed in the row of the one it was fused into.
    assert rows["root.act"]["calls"] in (0, 1)
    assert rows["root"]["seconds"] == pytest.approx(rows["root.fc"]["seconds"] + rows["root.act"]["seconds"])
    assert rows["root.fc"]["macs"] == 8 * 3 * 4
    assert profile["total"]["parameters"] == 15
