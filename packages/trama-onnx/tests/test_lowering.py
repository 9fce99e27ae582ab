"""Lowering to ONNX keeps the hierarchy: a hand-built document with nested composites, a repeated
block, a size computed from the inputs and a calling node becomes a valid ONNX model (the
checker's full check) with one local function per block structure and every instance a call of
it, node names that are trama ids and symbolic axes as ``dim_param``; it runs on onnxruntime as it
runs on numpy, functions or inlined; and what cannot be lowered is one error naming the node and
its op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, SizeExpr, SymbolRange, Tensor, ValueFact
from trama_onnx import FUNCTION_DOMAIN, LoweringError, lower

RNG = np.random.default_rng(0)


def _tensor(*shape: int, scale: float = 0.3) -> Parameter:
    return Parameter(Tensor.from_array((RNG.standard_normal(shape) * scale).astype(np.float32)), learnable=True)


def _block(prefix: str, table: dict[str, Parameter], x: Ref) -> list[Node]:
    """A residual block ``x + mlp(norm(x))`` reshaped to ``[batch, 8]``, with its own weights; the
    MLP is a composite of its own (two Linears and a GELU)."""

    def entry(name: str, value: Parameter) -> str:
        table[f"{prefix}.{name}"] = value
        return f"{prefix}.{name}"

    nodes = [
        Node(prefix, "Graph", {"x": x}, ["y"], output_bindings={"y": Ref(f"{prefix}.shaped", "y")}),
        Node(
            f"{prefix}.norm",
            "LayerNorm",
            {"x": Ref(INPUT, "x")},
            ["y"],
            {
                "normalized_shape": entry("norm.normalized_shape", Parameter([8])),
                "weight": entry("norm.weight", _tensor(8)),
                "bias": entry("norm.bias", _tensor(8)),
            },
        ),
        Node(
            f"{prefix}.mlp",
            "Graph",
            {"x": Ref(f"{prefix}.norm", "y")},
            ["y"],
            output_bindings={"y": Ref(f"{prefix}.mlp.fc2", "y")},
            metadata={"class": "tests.Mlp"},
        ),
    ]
    for name, (n_in, n_out) in (("fc1", (8, 16)), ("fc2", (16, 8))):
        source = Ref(INPUT, "x") if name == "fc1" else Ref(f"{prefix}.mlp.act", "y")
        nodes.append(
            Node(
                f"{prefix}.mlp.{name}",
                "Linear",
                {"x": source},
                ["y"],
                {
                    "in_features": entry(f"mlp.{name}.in_features", Parameter(n_in)),
                    "out_features": entry(f"mlp.{name}.out_features", Parameter(n_out)),
                    "weight": entry(f"mlp.{name}.weight", _tensor(n_out, n_in)),
                    "bias": entry(f"mlp.{name}.bias", _tensor(n_out)),
                },
            )
        )
        if name == "fc1":
            nodes.append(Node(f"{prefix}.mlp.act", "GELU", {"x": Ref(f"{prefix}.mlp.fc1", "y")}, ["y"]))
    nodes += [
        Node(f"{prefix}.add", "add", {"x": Ref(INPUT, "x"), "other": Ref(f"{prefix}.mlp", "y")}, ["y"]),
        Node(
            f"{prefix}.shaped",
            "reshape",
            {"x": Ref(f"{prefix}.add", "y")},
            ["y"],
            {"shape": entry("shaped.shape", Parameter([SizeExpr.parse("batch"), 8]))},
        ),
    ]
    for node in nodes[1:]:
        node.metadata = node.metadata  # leaves as they are
    nodes[0].metadata = {"class": "tests.Block"}
    return nodes


def hierarchical_model() -> Model:
    """``root``: a Linear, a Sequential of two blocks, a call of the second block, a head, a softmax."""
    table: dict[str, Parameter] = {
        "root.embed.in_features": Parameter(4),
        "root.embed.out_features": Parameter(8),
        "root.embed.weight": _tensor(8, 4),
        "root.embed.bias": _tensor(8),
        "root.head.in_features": Parameter(8),
        "root.head.out_features": Parameter(3),
        "root.head.weight": _tensor(3, 8),
        "root.softmax.dim": Parameter(-1),
    }
    nodes = [
        Node("root", "Graph", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref("root.softmax", "y")}),
        Node(
            "root.embed",
            "Linear",
            {"x": Ref(INPUT, "x")},
            ["y"],
            {slot: f"root.embed.{slot}" for slot in ("in_features", "out_features", "weight", "bias")},
        ),
        Node(
            "root.blocks",
            "Sequential",
            {"x": Ref("root.embed", "y")},
            ["y"],
            output_bindings={"y": Ref("root.blocks.1", "y")},
        ),
        *_block("root.blocks.0", table, Ref(INPUT, "x")),
        *_block("root.blocks.1", table, Ref("root.blocks.0", "y")),
        Node("root.again", "Graph", {"x": Ref("root.blocks", "y")}, ["y"], calls="root.blocks.1"),
        Node(
            "root.head",
            "Linear",
            {"x": Ref("root.again", "y")},
            ["y"],
            {slot: f"root.head.{slot}" for slot in ("in_features", "out_features", "weight")},
        ),
        Node("root.softmax", "softmax", {"x": Ref("root.head", "y")}, ["y"], {"dim": "root.softmax.dim"}),
    ]
    return Model(
        inputs=["x"],
        outputs=[Ref("root", "y")],
        nodes=nodes,
        parameters=table,
        input_facts=[ValueFact("float32", ("batch", 4))],
        output_facts=[ValueFact("float32", ("batch", 3))],
        symbols={"batch": SymbolRange(min=1)},
    )


@pytest.fixture(scope="module")
def model() -> Model:
    model = hierarchical_model()
    trama.validate(model, trama.registry("onnx"))
    return model


@pytest.fixture(scope="module")
def proto(model: Model) -> onnx.ModelProto:
    return lower(model)


def test_the_lowered_model_passes_the_full_check(proto: onnx.ModelProto) -> None:
    onnx.checker.check_model(proto, full_check=True)


def test_each_block_structure_is_one_function_and_every_instance_calls_it(proto: onnx.ModelProto) -> None:
    functions = {function.name: function for function in proto.functions}
    assert sorted(functions) == ["Block", "Graph", "Mlp", "Sequential"]
    assert all(function.domain == FUNCTION_DOMAIN for function in proto.functions)
    calls = {
        (owner, node.name): node.op_type
        for owner, nodes in [("main", proto.graph.node), *((f.name, f.node) for f in proto.functions)]
        for node in nodes
        if node.domain == FUNCTION_DOMAIN
    }
    assert calls == {
        ("main", "root"): "Graph",
        ("Graph", "blocks"): "Sequential",
        ("Graph", "again"): "Block",  # the calling node: one more call of the block's function
        ("Sequential", "0"): "Block",
        ("Sequential", "1"): "Block",
        ("Block", "mlp"): "Mlp",
    }
    block = functions["Block"]
    # its port, then the tensors its leaves hold (the MLP's among them), then the size it reads
    assert list(block.input) == [
        "x",
        "norm.weight",
        "norm.bias",
        "mlp.fc1.weight",
        "mlp.fc1.bias",
        "mlp.fc2.weight",
        "mlp.fc2.bias",
        "size.batch",
    ]


def test_node_names_are_trama_ids_and_weights_are_the_entries(proto: onnx.ModelProto) -> None:
    functions = {function.name: function for function in proto.functions}
    assert [node.name for node in proto.graph.node if not node.name.startswith("%")] == ["root"]
    assert {node.name.split("#")[0] for node in functions["Mlp"].node} == {"fc1", "act", "fc2"}
    assert {"embed", "head", "softmax"} <= {node.name for node in functions["Graph"].node}
    initializers = {tensor.name for tensor in proto.graph.initializer}
    assert "root.blocks.0.mlp.fc1.weight" in initializers
    assert "root.blocks.1.mlp.fc1.weight" in initializers
    (call,) = [node for node in functions["Graph"].node if node.name == "again"]
    assert "again.mlp.fc1.weight" in list(call.input)
    (root,) = [node for node in proto.graph.node if node.name == "root"]
    assert list(root.input).count("root.blocks.1.mlp.fc1.weight") == 2  # the call passes its target's weights


def test_symbolic_axes_are_dim_params(proto: onnx.ModelProto) -> None:
    (graph_input,) = proto.graph.input
    dims = graph_input.type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 4]
    (graph_output,) = proto.graph.output
    assert [d.dim_param or d.dim_value for d in graph_output.type.tensor_type.shape.dim] == ["batch", 3]


@pytest.mark.parametrize("batch", [1, 2, 5])
@pytest.mark.parametrize("functions", [True, False])
def test_it_runs_on_onnxruntime_as_on_numpy(model: Model, batch: int, functions: bool) -> None:
    x = RNG.standard_normal((batch, 4)).astype(np.float32)
    (expected,) = trama.runtime_for_name("numpy").prepare(model).run([x])
    session = onnxruntime.InferenceSession(
        lower(model, functions=functions).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_inlined_the_leaves_are_named_by_their_ids(model: Model) -> None:
    proto = lower(model, functions=False)
    assert not proto.functions
    names = {node.name.split("#")[0] for node in proto.graph.node}
    assert {"root.blocks.0.mlp.fc1", "root.blocks.1.mlp.fc1", "root.again.mlp.fc1", "root.head"} <= names
    onnx.checker.check_model(proto, full_check=True)


def test_the_runtime_runs_it(model: Model) -> None:
    runnable = trama.runtime_for_name("onnxruntime").prepare(model)
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 4)).astype(np.float32)
        (expected,) = trama.runtime_for_name("numpy").prepare(model).run([x])
        (got,) = runnable.run({"x": x})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_two_structures_that_differ_in_a_setting_are_two_functions() -> None:
    model = hierarchical_model()
    model.parameters["root.blocks.1.norm.normalized_shape"] = Parameter([8])  # same value: still one
    assert len(lower(model).functions) == 4
    eps = "root.blocks.1.norm.eps"
    model.parameters[eps] = Parameter(1e-3)
    model.node("root.blocks.1.norm").parameters["eps"] = eps
    names = sorted(function.name for function in lower(model).functions)
    assert names == ["Block", "Block_2", "Graph", "Mlp", "Sequential"]


# --- what cannot be lowered -------------------------------------------------------------------


def _with_leaf(op: str, node_id: str, slots: dict[str, Any]) -> Model:
    table = {f"{node_id}.{slot}": Parameter(value) for slot, value in slots.items()}
    nodes = [
        Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref(node_id, "y")}),
        Node(node_id, op, {"x": Ref(INPUT, "x")}, ["y"], {slot: f"{node_id}.{slot}" for slot in slots}),
    ]
    return Model(["x"], [Ref("root", "y")], nodes, table, input_facts=[ValueFact("float32", ("n", 3, 4, 4))])


def test_an_op_without_a_lowering_is_one_error_naming_the_node_and_the_op() -> None:
    # tuple_get is the one catalog op trama-onnx does not lower (ONNX has no tuples).
    model = _with_leaf("tuple_get", "root.odd", {"index": 0})
    model.nodes.append(Node("root.other", "tuple_get", {"x": Ref(INPUT, "x")}, ["y"], {"index": "root.odd.index"}))
    with pytest.raises(LoweringError, match=r"'tuple_get' has no ONNX lowering \(nor does 1 other node") as caught:
        lower(model)
    assert caught.value.node_id == "root.odd"
    assert isinstance(caught.value, trama.ExportError)
    with pytest.raises(LoweringError, match="tuple_get"):
        trama.runtime_for_name("onnxruntime").prepare(model)


def test_a_lowering_that_refuses_a_node_names_it_and_its_op() -> None:
    model = _with_leaf("AdaptiveAvgPool2d", "root.pool", {"output_size": [3, 3]})
    model.input_facts = [ValueFact("float32", ("n", 3, "h", "w"))]
    with pytest.raises(LoweringError, match=r"AdaptiveAvgPool2d.*fixed") as caught:
        lower(model)
    assert caught.value.node_id == "root.pool"


def test_a_document_without_shapes_needs_example_inputs() -> None:
    model = _with_leaf("ReLU", "root.act", {})
    model.input_facts = None
    with pytest.raises(LoweringError, match="example inputs"):
        lower(model)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    proto = lower(model, inputs={"x": x})
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [2, 3]


# --- the weights in a file ----------------------------------------------------------------------


def test_external_data_puts_the_weights_in_one_file(tmp_path: Path) -> None:
    model = _with_leaf("Linear", "root.fc", {"in_features": 64, "out_features": 64})
    weight = RNG.standard_normal((64, 64)).astype(np.float32)
    model.parameters["root.fc.weight"] = Parameter(Tensor.from_array(weight), learnable=True)
    model.node("root.fc").parameters["weight"] = "root.fc.weight"
    model.input_facts = [ValueFact("float32", ("batch", 64))]
    proto = lower(model, external_data="model.weights")
    path = tmp_path / "model.onnx"
    onnx.save_model(proto, str(path))
    assert (tmp_path / "model.weights").stat().st_size == weight.nbytes
    assert path.stat().st_size < weight.nbytes
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    (got,) = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, x @ weight.T, rtol=1e-5, atol=1e-5)


# --- discovery stays cheap ----------------------------------------------------------------------


def test_discovery_imports_neither_onnx_nor_onnxruntime() -> None:
    """Building the onnx registry imports neither; listing the runtimes asks onnxruntime which
    providers it has, and still imports no onnx and no lowering."""
    code = (
        "import sys, trama\n"
        "seen = lambda: sorted(m for m in ('onnx', 'onnxruntime', 'trama_onnx.lowering') if m in sys.modules)\n"
        "trama.registry('onnx'); print(seen())\n"
        "[r.name for r in trama.runtimes()]; print(seen())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "['onnxruntime']"]
