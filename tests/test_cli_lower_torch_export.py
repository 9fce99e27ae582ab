"""``trama lower DOC --to torch-export -o model.pt2``: a torch.export program that takes any size
the document allows, written whole; what it cannot do, said in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Ref, ValueFact
from trama.tools import main

torch = pytest.importorskip("torch")
pytest.importorskip("trama_torch")

from trama_torch.program import EXAMPLE_SIZE, example_inputs, export_program  # noqa: E402


class Positions(torch.nn.Module):
    """Reads its input's sizes: positions ``arange(seq)``, a reshape to ``[batch, seq * 2, 2]``
    and a slice from ``seq``."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq = x.shape[0], x.shape[1]
        positions = torch.arange(seq, dtype=x.dtype)[:, None] / 8
        y = self.proj(x + positions)
        return y.reshape(batch, seq * 2, 2)[:, seq:]


def _exported(tmp_path: Path) -> tuple[torch.nn.Module, Path]:
    torch.manual_seed(0)
    module = Positions().eval()
    document = trama.export_model(
        module,
        inputs=["x"],
        outputs=["y"],
        example_inputs=(torch.randn(2, 8, 4),),
        dynamic_shapes={"x": {0: "batch", 1: "seq"}},
    )
    path = tmp_path / "positions.trama.json"
    trama.dump(document, path)
    return module, path


def test_the_program_computes_the_sizes_from_its_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module, document = _exported(tmp_path)
    assert any(isinstance(value, trama.SizeExpr) for value in _leaves(trama.load(document)))
    output = tmp_path / "positions.pt2"
    assert main(["lower", str(document), "-o", str(output)]) == 0  # the suffix says torch-export
    said = capsys.readouterr().out
    assert said.startswith("wrote positions.pt2 (torch.export program, ")
    assert said.endswith("; dynamic sizes: batch, seq)\n")
    loaded = torch.export.load(output)
    assert loaded.graph_signature.user_inputs == ("x",)  # the document's input names
    program = loaded.module()
    for batch, seq in ((1, 3), (3, 20), (2, 64)):
        x = torch.randn(batch, seq, 4)
        with torch.no_grad():
            assert torch.equal(program(x), module(x)), (batch, seq)


def test_the_example_sizes_and_the_ranges(tmp_path: Path) -> None:
    _, path = _exported(tmp_path)
    document = trama.load(path)
    (x,) = example_inputs(document)
    assert tuple(x.shape) == (EXAMPLE_SIZE, EXAMPLE_SIZE, 4)
    (x,) = example_inputs(document, {"seq": 16, "batch": 3})
    assert tuple(x.shape) == (3, 16, 4)
    with pytest.raises(trama.ExportError, match="no input fact has the symbol 'length'"):
        example_inputs(document, {"length": 3})
    program = export_program(document, sizes={"seq": 16})
    # the program still takes other sizes: the trace at 16 fixed nothing
    assert program.module()(torch.randn(1, 5, 4)).shape == (1, 5, 2)


def test_a_size_outside_the_symbol_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = Model(
        ["x"],
        [Ref("root", "y")],
        [Node("root", "ReLU", {"x": Ref(INPUT, "x")}, ["y"])],
        {},
        input_facts=[ValueFact("float32", ("batch", 4))],
        symbols={"batch": trama.SymbolRange(max=8)},
    )
    path = tmp_path / "relu.trama.json"
    trama.dump(model, path)
    output = tmp_path / "relu.pt2"
    assert main(["lower", str(path), "-o", str(output), "--size", "batch=9"]) == 1
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("relu.trama.json: size 9 for 'batch' is outside its range in the document (size <= 8)")
    )
    assert not output.exists()
    assert main(["lower", str(path), "-o", str(output), "--size", "batch"]) == 1
    assert "--size takes SYMBOL=N" in capsys.readouterr().err
    assert main(["lower", str(path), "-o", str(output), "--to", "torch-export", "--inline"]) == 1
    assert "are for --to onnx" in capsys.readouterr().err
    assert main(["lower", str(path), "-o", str(output)]) == 0
    program = torch.export.load(output).module()
    x = torch.randn(8, 4)
    assert torch.equal(program(x), torch.relu(x))


def test_what_torch_export_cannot_take_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    relu = Node("a", "ReLU", {"x": Ref(INPUT, "x")}, ["y"])
    two_tops = Model(
        ["x"], [Ref("a", "y"), Ref("b", "y")], [relu, Node("b", "ReLU", {"x": Ref(INPUT, "x")}, ["y"])], {}
    )
    with pytest.raises(trama.ExportError, match="this document has 2 top-level nodes"):
        export_program(two_tops)
    no_facts = Model(["x"], [Ref("a", "y")], [relu], {})
    with pytest.raises(trama.ExportError, match="input 'x' has no dtype and shape"):
        export_program(no_facts)
    # given example inputs, it traces without facts (every size then fixed)
    program = export_program(no_facts, inputs=[np.ones((2, 3), np.float32)])
    assert torch.equal(program.module()(torch.full((2, 3), -1.0)), torch.zeros(2, 3))
    # the CLI: one line, and the file that was there stays
    path, output = tmp_path / "two.trama.json", tmp_path / "two.pt2"
    trama.dump(two_tops, path)
    output.write_bytes(b"the previous program")
    assert main(["lower", str(path), "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "2 top-level nodes" in err
    assert output.read_bytes() == b"the previous program"


def _leaves(model: Model) -> list[object]:
    values: list[object] = []
    for entry in model.parameters.values():
        stack = [entry.value]
        while stack:
            value = stack.pop()
            if isinstance(value, list):
                stack.extend(value)
            else:
                values.append(value)
    return values


class Clipped(torch.nn.Module):
    """Sizes through ``min`` and ``max``: ``max(seq, 3)`` columns, each the sum of the first
    ``min(seq, 4)`` integers, plus the row's mean."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]
        counted = torch.arange(torch.sym_min(seq, 4), dtype=x.dtype).sum()
        return torch.zeros(x.shape[0], torch.sym_max(seq, 3)) + counted + x.mean(dim=1, keepdim=True)


def test_min_and_max_of_sizes_stay_symbolic(tmp_path: Path) -> None:
    module = Clipped().eval()
    document = trama.export_model(
        module,
        inputs=["x"],
        outputs=["y"],
        example_inputs=(torch.randn(2, 8),),
        dynamic_shapes={"x": {0: "batch", 1: "seq"}},
    )
    texts = {str(value) for value in _leaves(document) if isinstance(value, trama.SizeExpr)}
    assert {"min(4, seq)", "max(3, seq)"} <= texts, texts
    program = export_program(trama.loads(trama.dumps(document))).module()
    for batch, seq in ((1, 2), (3, 5), (2, 9)):
        x = torch.randn(batch, seq)
        assert torch.equal(program(x), module(x)), (batch, seq)
