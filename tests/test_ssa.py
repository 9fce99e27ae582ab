"""The SSA text view: what a reviewer reads, so its exact lines matter."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import toylayers  # lives in demo/, which tests/conftest.py puts on sys.path

import trama
from trama import INPUT, Model, Node, Parameter, ParameterValue, Ref, Tensor, ValueFact
from trama.tools import format_ref, format_value_type, to_ssa

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "tests" / "fixtures" / "legacy"


def toy_mlp() -> Model:
    """Linear(4->8), ReLU, Linear(8->3) under a Sequential named ``root``."""
    return trama.export_model(
        toylayers.mlp([4, 8, 3], seed=1), inputs=["x"], outputs=["y"], registry=toylayers.registry()
    )


def scope_lines(text: str, header: str) -> list[str]:
    """The body lines of the section that starts with ``header`` (up to the blank line)."""
    section = text.split(header + "\n", 1)[1]
    return section.split("\n\n", 1)[0].rstrip("\n").split("\n")


def test_toy_mlp_assignments() -> None:
    text = to_ssa(toy_mlp())
    body = scope_lines(text, "scope root = Sequential(x) -> (y):")
    assert [re.sub(r" +", " ", line.strip()) for line in body] == [
        "%root.layers_0.y = Linear(x=x) {in_features, out_features, weight, bias}",
        "%root.layers_1.y = ReLU(x=%root.layers_0.y)",
        "%root.layers_2.y = Linear(x=%root.layers_1.y) {in_features, out_features, weight, bias}",
        "return y=%root.layers_2.y",
    ]
    assert scope_lines(text, "model(x):") == ["  %root.y  = Sequential(x=x)  # scope root", "  return %root.y"]


def test_toy_mlp_header_and_parameter_table() -> None:
    text = to_ssa(toy_mlp())
    lines = text.splitlines()
    assert lines[0] == f"# trama format {trama.FORMAT_VERSION}"
    assert "# producer: trama " + trama.__version__ in lines
    assert "model(x) -> %root.y" in lines
    table = scope_lines(text, "parameters: 8 entries, 4 learnable")
    assert table[0].split() == ["name", "type", "value", "learnable"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert rows["root.layers_0.weight"] == ["f32[8,", "4]", "learnable"]
    assert rows["root.layers_0.bias"] == ["f32[8]", "learnable"]
    assert rows["root.layers_0.in_features"] == ["int", "4"]
    assert rows["root.layers_2.out_features"] == ["int", "3"]
    assert list(rows) == list(toy_mlp().parameters)  # document order


def test_columns_are_aligned() -> None:
    body = scope_lines(to_ssa(toy_mlp()), "scope root = Sequential(x) -> (y):")[:-1]
    assert len({line.index(" = ") for line in body}) == 1
    linears = [line for line in body if "Linear" in line]
    assert len({line.index("{") for line in linears}) == 1
    table = scope_lines(to_ssa(toy_mlp()), "parameters: 8 entries, 4 learnable")
    assert len({line.index("learnable") for line in table if line.rstrip().endswith("learnable")}) == 1
    assert all(line == line.rstrip() for line in to_ssa(toy_mlp()).splitlines())


def test_same_text_after_a_round_trip_and_no_tensor_decoded() -> None:
    model = toy_mlp()
    loaded = trama.loads(trama.dumps(model))
    assert to_ssa(loaded) == to_ssa(model) == to_ssa(model)
    assert not any(entry.value.is_decoded for entry in loaded.parameters.values() if isinstance(entry.value, Tensor))


def edge_case_model() -> Model:
    """Multi-output leaf, composite bound to its input, parameterless and output-less nodes,
    a shared entry, node metadata, facts, opsets and every kind of scalar value."""
    nodes = [
        Node(
            "net",
            "Net",
            {"a": Ref(INPUT, "a"), "b": Ref(INPUT, "b")},
            ["lo", "passthrough"],
            {"scale": "net.scale"},
            {"lo": Ref("net.split", "lo"), "passthrough": Ref(INPUT, "b")},
        ),
        Node("net.split", "Split2", {"x": Ref(INPUT, "a")}, ["lo", "hi"], {"dim": "net.split.dim"}),
        Node("net.log", "Print", {"x": Ref("net.split", "hi")}, [], {}, metadata={"source": "x.py:3", "doc": "d"}),
        Node("net.tied", "Scale", {"x": Ref("net.split", "lo")}, ["y"], {"factor": "net.scale"}),
    ]
    parameters = {
        "net.scale": Parameter(0.5, learnable=True),
        "net.split.dim": Parameter(-1),
    }
    return Model(
        inputs=["a", "b"],
        outputs=[Ref("net", "lo"), Ref("net", "passthrough")],
        nodes=nodes,
        parameters=parameters,
        metadata={"producer": "handmade", "framework": {"name": "numpy", "version": "2.0"}, "notes": "long"},
        opsets={"trama": 1, "custom": 3},
        input_facts=[ValueFact("float32", ("batch", 4)), None],
        output_facts=None,
    )


def test_edge_cases_render() -> None:
    text = to_ssa(edge_case_model())
    lines = text.splitlines()
    assert lines[:5] == [
        f"# trama format {trama.FORMAT_VERSION}",
        "# producer: handmade",
        "# framework: numpy 2.0",
        "# metadata: notes",
        "# opsets: custom=3, trama=1",
    ]
    assert "model(a: f32[batch, 4], b) -> (%net.lo, %net.passthrough)" in lines
    body = [
        re.sub(r" +", " ", line.strip()) for line in scope_lines(text, "scope net = Net(a, b) -> (lo, passthrough):")
    ]
    assert body == [
        "%net.split.lo, %net.split.hi = Split2(x=a) {dim}",
        "() = Print(x=%net.split.hi) # node net.log; meta: doc, source",
        "%net.tied.y = Scale(x=%net.split.lo) {factor=@net.scale}",
        "return lo=%net.split.lo, passthrough=b",
    ]
    model_scope = [re.sub(r" +", " ", line.strip()) for line in scope_lines(text, "model(a, b):")]
    assert model_scope == [
        "%net.lo, %net.passthrough = Net(a=a, b=b) {scale} # scope net",
        "return %net.lo, %net.passthrough",
    ]


def test_parameter_values_by_type() -> None:
    values: dict[str, ParameterValue] = {
        "p.tensor": Tensor.from_array(np.zeros((2, 3), dtype=np.int64)),
        "p.scalar_tensor": Tensor.from_array(np.float32(1.0)),
        "p.flag": True,
        "p.count": 3,
        "p.rate": 1e-07,
        "p.name": "relu",
        "p.short": [3, 3],
        "p.long": list(range(20)),
        "p.nothing": None,
        "p.text": "x" * 100,
    }
    node = Node("p", "Bag", {"x": Ref(INPUT, "x")}, ["y"], {name.split(".")[1]: name for name in values})
    model = Model(["x"], [Ref("p", "y")], [node], {k: Parameter(v) for k, v in values.items()})
    rows = {
        line.split()[0]: line.split(None, 2)[1:]
        for line in scope_lines(to_ssa(model), "parameters: 10 entries, 0 learnable")[1:]
    }
    assert rows["p.tensor"] == ["i64[2,", "3]"]
    assert rows["p.scalar_tensor"] == ["f32[]"]
    assert rows["p.flag"] == ["bool", "true"]
    assert rows["p.count"] == ["int", "3"]
    assert rows["p.rate"] == ["float", "1e-07"]
    assert rows["p.name"] == ["string", '"relu"']
    assert rows["p.short"] == ["list", "[3, 3]"]
    assert rows["p.long"] == ["list", "<20 items>"]
    assert rows["p.nothing"] == ["null", "null"]
    kind, shown = rows["p.text"]
    assert kind == "string"
    assert shown == '"' + "x" * 36 + "..."


def test_invalid_models_still_render_every_node() -> None:
    orphan = Node("a.b", "Op", {"x": Ref(INPUT, "x")}, ["y"], {"w": "missing"})
    model = Model(["x"], [Ref("ghost", "y")], [orphan], {})
    text = to_ssa(model)
    assert "model(x) -> %ghost.y\n" in text
    assert text.endswith("scope a (not a composite of this model):\n  %a.b.y  = Op(x=x)  {w=@missing}\n")


def test_empty_table_and_leaf_root() -> None:
    model = Model(["x"], [Ref(INPUT, "x")], [], {})
    assert to_ssa(model) == (
        f"# trama format {trama.FORMAT_VERSION}\nmodel(x) -> x\n\nparameters: none\n\nmodel(x):\n  return x\n"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Tensor.from_array(np.zeros((16, 8), dtype=np.float32)), "f32[16, 8]"),
        (Tensor.from_array(np.zeros(2, dtype=np.bool_)), "bool[2]"),
        (1, "int"),
        (1.5, "float"),
        (False, "bool"),
        ("s", "string"),
        ([1], "list"),
        (None, "null"),
    ],
)
def test_format_value_type(value: object, expected: str) -> None:
    assert format_value_type(value) == expected


def test_format_ref() -> None:
    assert format_ref(Ref(INPUT, "x")) == "x"
    assert format_ref(Ref("a.b", "y")) == "%a.b.y"


def test_legacy_nested_fixture() -> None:
    text = to_ssa(trama.load(LEGACY / "v0_2" / "nested.trama.json"))
    assert text.startswith(
        f"# trama format 0.2 (read as {trama.FORMAT_VERSION})\n"
        "model(a, b) -> (%root.y_lo, %root.y_hi, %root.skip, %root.b_out)\n"
    )
    assert "  return h=%root.enc.block.y, skip=x\n" in text
    assert re.search(r"\n  %root\.split\.lo, %root\.split\.hi +=\ Split2\(x=%root\.head\.y\) +\{dim\}\n", text)
    assert re.search(r"\n  %root\.add\.y += Add\(a=%root\.enc\.h, b=b\)\n", text)
    assert [line for line in text.splitlines() if line.startswith("scope ")] == [
        "scope root = TwoInputNet(a, b) -> (y_lo, y_hi, skip, b_out):",
        "scope root.enc = Encoder(x) -> (h, skip):",
        "scope root.enc.block = Block(x) -> (y):",
    ]


def test_legacy_tied_and_shared_entries_stand_out() -> None:
    tied = to_ssa(trama.load(LEGACY / "v0_2" / "tied.trama.json"))
    assert "{in_features, out_features, weight=@root.embed.weight, bias}" in tied
    mlp = to_ssa(trama.load(LEGACY / "v0_2" / "mlp.trama.json"))
    assert "{in_features, out_features=@dims.hidden, weight, bias}" in mlp
    assert "{in_features=@dims.hidden, out_features, weight, bias}" in mlp


def test_names_a_document_holds_cannot_forge_lines_or_drive_the_terminal() -> None:
    """An op name with a newline would print an SSA line for a node that does not exist, and an
    ANSI escape would reach the terminal: both are printed escaped, in ssa and info."""
    from trama.tools._summary import render_summary, summarize

    forged = "Linear\n%evil.y = Exfiltrate(x=x)\x1b[2J"
    node = trama.Node("n", forged, {"x": trama.Ref(trama.INPUT, "x")}, ["y"], metadata={"k\x1b[31m": "v\ud800"})
    model = trama.Model(["x"], [trama.Ref("n", "y")], [node], {}, metadata={"producer": "evil\nline"})
    for text in (to_ssa(model), render_summary(summarize(model))):
        assert "\x1b" not in text
        assert "\ud800" not in text
        assert not any(line.startswith("%evil") for line in text.splitlines())
        assert "Linear\\n%evil.y = Exfiltrate(x=x)\\x1b[2J" in text
