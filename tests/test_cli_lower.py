"""``trama lower DOC --to onnx -o model.onnx``: lowered, checked, written whole, errors in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, ValueFact
from trama.tools import main

onnx = pytest.importorskip("onnx")
pytest.importorskip("trama_onnx")


def _mlp(op: str = "ReLU") -> Model:
    """Two identical blocks (Linear, then an activation) in a Sequential, batch symbolic."""
    rng = np.random.default_rng(0)
    nodes = [Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref("root.b1", "y")})]
    table: dict[str, Parameter] = {}
    for block in ("b0", "b1"):
        prefix = f"root.{block}"
        nodes.append(
            Node(prefix, "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref(f"{prefix}.act", "y")})
        )
        nodes.append(
            Node(
                f"{prefix}.fc",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                {"weight": f"{prefix}.fc.weight", "in_features": f"{prefix}.in", "out_features": f"{prefix}.out"},
            )
        )
        nodes.append(Node(f"{prefix}.act", op, {"x": Ref(f"{prefix}.fc", "y")}, ["y"]))
        table[f"{prefix}.fc.weight"] = Parameter(
            trama.Tensor.from_array(rng.normal(size=(4, 4)).astype(np.float32)), True
        )
        table[f"{prefix}.in"] = Parameter(4)
        table[f"{prefix}.out"] = Parameter(4)
    nodes[2].inputs = {"x": Ref(INPUT, "x")}
    nodes[0].output_bindings = {"y": Ref("root.b1", "y")}
    nodes[4].inputs = {"x": Ref(INPUT, "x")}
    model = Model(["x"], [Ref("root", "y")], nodes, table, input_facts=[ValueFact("float32", ("batch", 4))])
    trama.validate(model, trama.registry("numpy"))
    return model


def test_lower_writes_a_checked_model_with_one_function_per_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document, output = tmp_path / "mlp.trama.json", tmp_path / "mlp.onnx"
    trama.dump(_mlp(), document)
    assert main(["lower", str(document), "-o", str(output)]) == 0
    assert capsys.readouterr().out.startswith("wrote mlp.onnx (opset ")
    proto = onnx.load(str(output))
    onnx.checker.check_model(proto, full_check=True)
    assert [i.type.tensor_type.shape.dim[0].dim_param for i in proto.graph.input] == ["batch"]
    calls = [node.name for function in proto.functions for node in function.node if node.domain == "trama.fn"]
    assert calls.count("b0") == calls.count("b1") == 1  # the two blocks: one function, two calls
    assert (
        len({node.op_type for function in proto.functions for node in function.node if node.name in ("b0", "b1")}) == 1
    )


def test_external_data_goes_beside_the_model(tmp_path: Path) -> None:
    document, output = tmp_path / "mlp.trama.json", tmp_path / "mlp.onnx"
    trama.dump(_mlp(), document)
    for _ in range(2):  # writing again over the previous files works too
        assert main(["lower", str(document), "-o", str(output), "--external-data", "-q"]) == 0
    assert (tmp_path / "mlp.onnx.data").stat().st_size > 0
    onnx.checker.check_model(str(output), full_check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.onnx", "mlp.onnx.data", "mlp.trama.json"]


def test_a_node_that_cannot_be_lowered_is_one_line_and_the_old_file_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document, output = tmp_path / "mlp.trama.json", tmp_path / "mlp.onnx"
    output.write_bytes(b"the previous model")
    model = _mlp()
    act = model.nodes[-1]  # tuple_get: the one catalog op trama-onnx does not lower (ONNX has no tuples)
    act.op, act.parameters = "tuple_get", {"index": "root.b1.act.index"}
    model.parameters["root.b1.act.index"] = Parameter(0)
    trama.dump(model, document)
    assert main(["lower", str(document), "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "node 'root.b1.act': op 'tuple_get' has no ONNX lowering" in err
    assert output.read_bytes() == b"the previous model"
