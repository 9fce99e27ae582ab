"""The SSA text view: what a reviewer reads, so its exact lines matter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import toylayers  # lives in demo/, which tests/conftest.py puts on sys.path

import trama
from trama import INPUT, Model, Node, Parameter, ParameterValue, Ref, Tensor, ValueFact
from trama.tools import format_ref, format_value_type, to_ssa

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
LEGACY = FIXTURES / "legacy"
HEAD = f"# trama format {trama.FORMAT_VERSION}"


def toy_mlp() -> Model:
    """Linear(4->8), ReLU, Linear(8->3) under a Sequential named ``root``."""
    return trama.export_model(
        toylayers.mlp([4, 8, 3], seed=1), inputs=["x"], outputs=["y"], registry=toylayers.registry()
    )


def body(text: str) -> list[str]:
    """The lines after the header (everything from the first node on)."""
    return text.split("\n\n", 1)[1].rstrip("\n").split("\n")


def leaf(node_id: str, op: str, inputs: dict[str, Ref], **slots: str) -> Node:
    return Node(node_id, op, inputs, ["y"], dict(slots))


def own(node_id: str, *slots: str) -> dict[str, str]:
    """The usual slot references: ``slot -> <node id>.<slot>``."""
    return {slot: f"{node_id}.{slot}" for slot in slots}


# --- the layout ---------------------------------------------------------------------------


def test_toy_mlp_exact_text() -> None:
    assert to_ssa(toy_mlp()) == "\n".join(
        [
            f"{HEAD}; producer: trama {trama.__version__}; opsets: trama={toy_mlp().opsets['trama']}",
            "# tensors: 4 entries, 4 learnable, 67 values",
            "model(x) -> %root",
            "",
            "%root = Sequential(x):",
            "  %layers_0 = Linear(4, 8, bias)(x)",
            "  %layers_1 = ReLU(%layers_0)",
            "  %layers_2 = Linear(8, 3, bias)(%layers_1)",
            "  return %layers_2",
            "",
        ]
    )


def test_the_graph_starts_within_the_first_lines() -> None:
    lines = to_ssa(toy_mlp()).splitlines()
    assert lines.index("%root = Sequential(x):") < 10


def test_signature_with_facts_and_types_where_known() -> None:
    model = toy_mlp()
    model.input_facts = [ValueFact("float32", ("batch", 4))]
    model.output_facts = [ValueFact("float32", ("batch", 3))]
    lines = body(to_ssa(model))
    assert to_ssa(model).splitlines()[2] == "model(x: f32[batch, 4]) -> %root: f32[batch, 3]"
    assert lines == [
        "%root: f32[batch, 3] = Sequential(x):",
        "  %layers_0 = Linear(4, 8, bias)(x)",  # no shape inference: no type rather than a guess
        "  %layers_1 = ReLU(%layers_0)",
        "  %layers_2: f32[batch, 3] = Linear(8, 3, bias)(%layers_1)",  # the output's fact, down the binding
        "  return %layers_2",
    ]


def test_same_text_after_a_round_trip_and_no_tensor_decoded() -> None:
    model = toy_mlp()
    loaded = trama.loads(trama.dumps(model))
    assert to_ssa(loaded, tensors=True) == to_ssa(model, tensors=True) == to_ssa(model, tensors=True)
    assert not any(entry.value.is_decoded for entry in loaded.parameters.values() if isinstance(entry.value, Tensor))


def edge_case_model() -> Model:
    """Multi-output leaf, composite bound to its input, parameterless and output-less nodes,
    a shared entry, a composite's own setting, node metadata, facts and opsets."""
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
    parameters = {"net.scale": Parameter(0.5, learnable=True), "net.split.dim": Parameter(-1)}
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
    assert to_ssa(edge_case_model()).splitlines() == [
        f"{HEAD}; producer: handmade; framework: numpy 2.0; metadata: notes; opsets: custom=3,",
        "#   trama=1",
        "model(a: f32[batch, 4], b) -> (%net.lo, %net.passthrough)",
        "",
        "%net.lo, %net.passthrough = Net(scale=0.5)(a, b):",
        "  %split.lo, %split.hi = Split2(dim=-1)(x=a)",
        "  () = Print(x=%split.hi)  # node log",
        "  %tied = Scale(factor=@net.scale=0.5)(x=%split.lo)",
        "  return %split.lo, b",
    ]


def test_settings_of_an_op_outside_the_catalog_by_value() -> None:
    values: dict[str, ParameterValue] = {
        "tensor": Tensor.from_array(np.zeros((2, 3), dtype=np.int64)),
        "flag": True,
        "count": 3,
        "rate": 1e-07,
        "whole": 2.0,
        "name": "relu",
        "short": [3, 3],
        "nothing": None,
        "nested": [[None, 8, None], "..."],
    }
    node = Node("p", "Bag", {"x": Ref(INPUT, "x")}, ["y"], own("p", *values))
    model = Model(["x"], [Ref("p", "y")], [node], {f"p.{slot}": Parameter(v) for slot, v in values.items()})
    assert body(to_ssa(model)) == [
        '%p = Bag(tensor, flag=true, count=3, rate=1e-07, whole=2.0, name="relu", short=[3, 3], nothing=null,',
        '    nested=[[null, 8, null], "..."])(x)',
    ]


EMBEDDING_SLOTS = ("num_embeddings", "embedding_dim", "padding_idx", "norm_type", "sparse", "weight")


def catalog_model() -> Model:
    """Catalog ops: settings in slot order, defaults left out, operands in their port's place,
    a subscript, a variadic concat, a constant."""
    x = Ref(INPUT, "x")
    nodes = [
        Node("m", "Graph", {"x": x}, ["y"], {}, {"y": Ref("m.cat", "y")}, metadata={"class": "pkg.mod.Block"}),
        leaf("m.emb", "Embedding", {"x": x}, **own("m.emb", *EMBEDDING_SLOTS)),
        leaf("m.fc", "Linear", {"x": Ref("m.emb", "y")}, **own("m.fc", "in_features", "out_features", "weight")),
        leaf("m.scaled", "mul", {"x": Ref("m.fc", "y")}, other="m.scaled.other"),
        leaf("m.drop", "Dropout", {"x": Ref("m.scaled", "y")}, p="m.drop.p"),
        leaf("m.mean", "mean", {"x": Ref("m.drop", "y")}, **own("m.mean", "dim", "keepdim")),
        leaf("m.const", "constant", {}, value="m.const.value"),
        leaf("m.slice", "getitem", {"x": Ref("m.drop", "y"), "i0": Ref("m.const", "y")}, index="m.slice.index"),
        leaf("m.cat", "concat", {"x0": Ref("m.mean", "y"), "x1": Ref("m.slice", "y")}, dim="m.cat.dim"),
    ]
    values: dict[str, ParameterValue] = {
        "m.emb.num_embeddings": 10,
        "m.emb.embedding_dim": 4,
        "m.emb.padding_idx": 0,
        "m.emb.norm_type": 2,  # the default 2.0, written as an int
        "m.emb.sparse": False,  # the default
        "m.emb.weight": Tensor.from_array(np.zeros((10, 4), dtype=np.float32)),
        "m.fc.in_features": 4,
        "m.fc.out_features": 4,
        "m.fc.weight": Tensor.from_array(np.zeros((4, 4), dtype=np.float32)),
        "m.scaled.other": 0.25,
        "m.drop.p": 0.5,  # the default
        "m.mean.dim": [-1],
        "m.mean.keepdim": True,
        "m.const.value": Tensor.from_array(np.zeros(2, dtype=np.int64)),
        "m.slice.index": [None, [None, None, None], "i0", "...", [1, 8, 2], -1],
        "m.cat.dim": -1,
    }
    return Model(["x"], [Ref("m", "y")], nodes, {name: Parameter(value) for name, value in values.items()})


def test_catalog_ops_read_like_calls() -> None:
    assert body(to_ssa(catalog_model())) == [
        "%m = Block(x):",
        "  %emb = Embedding(10, 4, padding_idx=0)(x)",
        "  %fc = Linear(4, 4)(%emb)",
        "  %scaled = mul(%fc, 0.25)",
        "  %drop = Dropout(%scaled)",
        "  %mean = mean(dim=[-1], keepdim=true)(%drop)",
        "  %const: i64[2] = constant()",
        "  %slice = %drop[None, :, %const, ..., 1:8:2, -1]",
        "  %cat = concat(dim=-1)(%mean, %slice)",
        "  return %cat",
    ]


def test_learned_optional_tensors_by_name_buffers_left_out() -> None:
    slots = ("num_features", "momentum", "weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    values: dict[str, ParameterValue] = {
        "num_features": 3,
        "momentum": None,  # not the default 0.1
        "weight": Tensor.from_array(np.ones(3, dtype=np.float32)),
        "bias": Tensor.from_array(np.zeros(3, dtype=np.float32)),
        "running_mean": Tensor.from_array(np.zeros(3, dtype=np.float32)),
        "running_var": Tensor.from_array(np.ones(3, dtype=np.float32)),
        "num_batches_tracked": Tensor.from_array(np.zeros((), dtype=np.int64)),
    }
    node = leaf("bn", "BatchNorm1d", {"x": Ref(INPUT, "x")}, **own("bn", *slots))
    model = Model(["x"], [Ref("bn", "y")], [node], {f"bn.{slot}": Parameter(values[slot]) for slot in slots})
    assert body(to_ssa(model)) == ["%bn = BatchNorm1d(3, momentum=null, weight, bias)(x)"]
    assert len(to_ssa(model, tensors=True).split("\n\n")[-1].splitlines()) == 1 + 5  # every tensor listed


def test_shared_and_tied_entries_stand_out() -> None:
    tied = to_ssa(trama.load(LEGACY / "v0_2" / "tied.trama.json"))
    assert "  %head = Linear(3, 5, weight=@root.embed.weight, bias)(%act)\n" in tied
    mlp = to_ssa(trama.load(LEGACY / "v0_2" / "mlp.trama.json"))
    assert "  %linear_0 = Linear(4, out_features=@dims.hidden=3, bias)(x)\n" in mlp
    assert "  %linear_2 = Linear(in_features=@dims.hidden=3, out_features=2)(%relu_1)\n" in mlp


def test_legacy_nested_fixture() -> None:
    text = to_ssa(trama.load(LEGACY / "v0_2" / "nested.trama.json"))
    assert text.startswith(
        f"# trama format 0.2 (read as {trama.FORMAT_VERSION})\n# tensors: 3 entries, 3 learnable, 26 values\n"
        "model(a, b) -> (%root.y_lo, %root.y_hi, %root.skip, %root.b_out)\n\n"
    )
    assert body(text) == [
        "%root.y_lo, %root.y_hi, %root.skip, %root.b_out = TwoInputNet(a, b):",
        '  %enc.h, %enc.skip = Encoder(scale=0.5, tag="enc")(x=a):',
        "    %block = Block(x):",
        "      %linear = Linear(4, 4)(x)",
        "      %act = ReLU(%linear)",
        "      return %act",
        "    return %block, x",
        "  %add = Add(a=%enc.h, b)",
        "  %head = Linear(4, 2, bias)(%add)",
        "  %split.lo, %split.hi = Split2(dim=-1)(x=%head)",
        "  return %split.lo, %split.hi, %enc.skip, b",
    ]


def every_fixture() -> list[Path]:
    return sorted(path for path in FIXTURES.rglob("*.trama.json"))


@pytest.mark.parametrize("path", every_fixture(), ids=lambda path: str(path.relative_to(FIXTURES)))
def test_every_fixture_renders_within_the_width(path: Path) -> None:
    model = trama.load(path, lazy_inline=True)
    for depth in (None, 0, 1, 2):
        for tensors in (False, True):
            text = to_ssa(model, depth=depth, tensors=tensors)
            assert text.endswith("\n")
            assert max(len(line) for line in text.splitlines()) <= 100


def test_every_fixture_is_found() -> None:
    assert len(every_fixture()) >= 10
    assert any(path.parent.name == "deep" for path in every_fixture())


def test_a_body_nested_too_deep_to_indent_gets_a_section() -> None:
    text = to_ssa(trama.load(LEGACY / "deep" / "deep.trama.json"))
    sections = [line for line in text.splitlines() if line.startswith("scope ")]
    assert sections  # indentation stops at 16 levels: deeper bodies follow, each in a section
    assert all(len(line) <= 100 for line in text.splitlines())
    assert max(len(line) - len(line.lstrip(" ")) for line in text.splitlines()) <= 48


# --- invalid documents and hostile names ----------------------------------------------------


def test_invalid_models_still_render_every_node() -> None:
    orphan = Node("a.b", "Op", {"x": Ref(INPUT, "x")}, ["y"], {"w": "missing"})
    model = Model(["x"], [Ref("ghost", "y")], [orphan], {})
    text = to_ssa(model)
    assert "model(x) -> %ghost.y\n" in text
    assert text.endswith("scope a (not a composite of this model):\n  %b = Op(w=@missing)(x)\n")


def test_a_reference_out_of_its_scope_is_written_with_its_full_id() -> None:
    nodes = [
        Node("r", "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref("r.a", "y")}),
        Node("r.a", "relu", {"x": Ref("elsewhere.b", "z")}, ["y"]),
    ]
    assert "  %a = relu(%elsewhere.b.z)\n" in to_ssa(Model(["x"], [Ref("r", "y")], nodes, {}))


def test_empty_model_and_leaf_root() -> None:
    assert to_ssa(Model(["x"], [Ref(INPUT, "x")], [], {})) == f"{HEAD}\nmodel(x) -> x\n"


def test_names_a_document_holds_cannot_forge_lines_or_drive_the_terminal() -> None:
    """An op name with a newline would print an SSA line for a node that does not exist, and an
    ANSI escape would reach the terminal: both are printed escaped, in ssa and info."""
    from trama.tools._summary import render_summary, summarize

    forged = "Linear\n%evil.y = Exfiltrate(x=x)\x1b[2J"
    node = trama.Node("n", forged, {"x": trama.Ref(trama.INPUT, "x")}, ["y"], metadata={"k\x1b[31m": "v\ud800"})
    model = trama.Model(["x"], [trama.Ref("n", "y")], [node], {}, metadata={"producer": "evil\nline"})
    for text in (to_ssa(model, tensors=True), render_summary(summarize(model))):
        assert "\x1b" not in text
        assert "\ud800" not in text
        assert not any(line.startswith("%evil") for line in text.splitlines())
        assert "Linear\\n%evil.y = Exfiltrate(x=x)\\x1b[2J" in text


def test_strings_in_settings_are_escaped() -> None:
    node = Node("p", "Bag", {"x": Ref(INPUT, "x")}, ["y"], {"s": "p.s"})
    model = Model(["x"], [Ref("p", "y")], [node], {"p.s": Parameter("a\nb\x1b\x7f")})
    assert '%p = Bag(s="a\\nb\\u001b\\x7f")(x)' in to_ssa(model)


# --- wrapping -----------------------------------------------------------------------------


def test_long_lines_wrap_and_keep_every_value() -> None:
    shape = list(range(40))
    nodes = [
        Node("r", "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref("r.view", "y")}),
        leaf("r.view", "reshape", {"x": Ref(INPUT, "x")}, shape="r.view.shape"),
    ]
    model = Model(["x"], [Ref("r", "y")], nodes, {"r.view.shape": Parameter(shape)})
    model.output_facts = [ValueFact("float32", tuple(range(100, 116)))]
    lines = to_ssa(model).splitlines()
    assert max(len(line) for line in lines) <= 100
    start = next(k for k, line in enumerate(lines) if line.startswith("  %view"))
    wrapped = lines[start : start + 3]
    assert [line[:6] for line in wrapped] == ["  %vie", "      ", "      "]  # continued 4 deeper
    joined = " ".join(line.strip() for line in wrapped)
    assert "reshape([" + ", ".join(map(str, shape)) + "])(x)" in joined
    assert "f32[" + ", ".join(map(str, range(100, 116))) + "]" in lines[start]  # a shape is not broken


def test_a_shape_longer_than_a_line_breaks_after_a_comma() -> None:
    model = Model(["x"], [Ref(INPUT, "x")], [], {}, input_facts=[ValueFact("int8", tuple(range(1000, 1030)))])
    lines = to_ssa(model).splitlines()[1:]
    assert [len(line) <= 100 for line in lines] == [True] * len(lines)
    assert lines[0].endswith(",")
    assert (
        " ".join(line.strip() for line in lines) == "model(x: i8[" + ", ".join(map(str, range(1000, 1030))) + "]) -> x"
    )


def test_a_long_string_is_split_but_not_lost() -> None:
    text_value = "x" * 250
    node = Node("p", "Bag", {"x": Ref(INPUT, "x")}, ["y"], {"text": "p.text"})
    model = Model(["x"], [Ref("p", "y")], [node], {"p.text": Parameter(text_value)})
    lines = body(to_ssa(model))
    assert max(len(line) for line in lines) <= 100
    assert f'Bag(text="{text_value}")(x)' in "".join(line.strip() for line in lines)


# --- depth and the tensor table ------------------------------------------------------------


def test_depth() -> None:
    model = trama.load(LEGACY / "v0_2" / "nested.trama.json")
    assert to_ssa(model, depth=0) == to_ssa(model).split("\n\n")[0] + "\n"  # the signature alone
    top = "%root.y_lo, %root.y_hi, %root.skip, %root.b_out = TwoInputNet(a, b)"
    assert body(to_ssa(model, depth=1)) == [top]
    two = body(to_ssa(model, depth=2))
    assert two[0] == top + ":"
    assert '  %enc.h, %enc.skip = Encoder(scale=0.5, tag="enc")(x=a)' in two  # depth 2: one line, no body
    assert not any(line.startswith("    ") for line in two)
    assert body(to_ssa(model, depth=3))[2] == "    %block = Block(x)"
    assert to_ssa(model, depth=4) == to_ssa(model) == to_ssa(model, depth=99)
    with pytest.raises(ValueError, match="depth must be 0 or more"):
        to_ssa(model, depth=-1)


def test_tensors_only_on_request_after_the_graph() -> None:
    plain, table = to_ssa(toy_mlp()), to_ssa(toy_mlp(), tensors=True)
    assert "learnable  " not in plain
    assert table.startswith(plain)
    assert table[len(plain) :].splitlines() == [
        "",
        "tensors: 4 entries, 4 learnable",
        "  root.layers_0.weight  f32[8, 4]  learnable",
        "  root.layers_0.bias    f32[8]     learnable",
        "  root.layers_2.weight  f32[3, 8]  learnable",
        "  root.layers_2.bias    f32[3]     learnable",
    ]


def test_the_table_lists_shared_and_unused_settings_with_their_values() -> None:
    model = edge_case_model()
    model.parameters["unused"] = Parameter([1, 2])
    model.parameters["net.w"] = Parameter(Tensor.from_array(np.zeros((2, 2), dtype=np.float16)))
    assert to_ssa(model, tensors=True).split("\n\n")[-1].splitlines() == [
        "tensors: 1 entry, 0 learnable; shared or unused settings: 2",
        "  net.scale  float      learnable  0.5",
        "  unused     list                  [1, 2]",
        "  net.w      f16[2, 2]",
    ]


# --- repeated blocks ------------------------------------------------------------------------


def stack(widths: tuple[int, ...] = (4, 4), *, tie: bool = False, seed: int = 0) -> Model:
    """``root`` (a Graph) holding ``layers`` (a ModuleList) of Blocks, each ``Linear`` then
    ``relu``, ``widths`` giving each layer's width, every weight its own random values. ``tie``:
    the second layer uses the first one's weight."""
    rng = np.random.default_rng(seed)
    x = Ref(INPUT, "x")
    last = f"root.layers.{len(widths) - 1}"
    nodes = [
        Node("root", "Graph", {"x": x}, ["y"], {}, {"y": Ref("root.layers", "y")}, metadata={"class": "pkg.Net"}),
        Node("root.layers", "Graph", {"x": x}, ["y"], {}, {"y": Ref(last, "y")}, metadata={"class": "tnn.ModuleList"}),
    ]
    parameters: dict[str, Parameter] = {}
    source = x
    for k, width in enumerate(widths):
        block = f"root.layers.{k}"
        bound = {"y": Ref(f"{block}.act", "y")}
        nodes.append(Node(block, "Graph", {"x": source}, ["y"], {}, bound, metadata={"class": "pkg.Block"}))
        slots = own(f"{block}.fc", "in_features", "out_features", "weight")
        if tie and k == 1:
            slots["weight"] = "root.layers.0.fc.weight"
        nodes.append(Node(f"{block}.fc", "Linear", {"x": x}, ["y"], slots))
        nodes.append(Node(f"{block}.act", "relu", {"x": Ref(f"{block}.fc", "y")}, ["y"]))
        parameters[f"{block}.fc.in_features"] = Parameter(width)
        parameters[f"{block}.fc.out_features"] = Parameter(width)
        weight = rng.standard_normal((width, width)).astype(np.float32)
        parameters[f"{block}.fc.weight"] = Parameter(Tensor.from_array(weight), learnable=True)
        source = Ref(block, "y")
    return Model(["x"], [Ref("root", "y")], nodes, parameters)


def test_two_identical_layers_are_one_definition_and_two_instance_lines() -> None:
    assert body(to_ssa(stack())) == [
        "%root = Net(x):",
        "  %layers = ModuleList(x):",
        "    %0 = Block#1(x):",
        "      %fc = Linear(4, 4)(x)",
        "      %act = relu(%fc)",
        "      return %act",
        "    %1 = Block#1(x=%0)",
        "    return %1",
        "  return %layers",
    ]


def test_layers_that_differ_in_a_setting_are_two_bodies() -> None:
    assert body(to_ssa(stack((4, 8)))) == [
        "%root = Net(x):",
        "  %layers = ModuleList(x):",
        "    %0 = Block(x):",
        "      %fc = Linear(4, 4)(x)",
        "      %act = relu(%fc)",
        "      return %act",
        "    %1 = Block(x=%0):",
        "      %fc = Linear(8, 8)(x)",
        "      %act = relu(%fc)",
        "      return %act",
        "    return %1",
        "  return %layers",
    ]


def test_a_layer_tied_to_another_is_not_hidden_in_an_instance_line() -> None:
    lines = body(to_ssa(stack(tie=True)))
    assert "      %fc = Linear(4, 4, weight=@root.layers.0.fc.weight)(x)" in lines
    assert "    %1 = Block(x=%0):" in lines


def test_blocks_repeat_by_structure_in_every_group() -> None:
    lines = body(to_ssa(stack((4, 4, 8, 8, 8))))
    assert [line.strip() for line in lines if "= Block" in line] == [
        "%0 = Block#1(x):",
        "%1 = Block#1(x=%0)",
        "%2 = Block#2(x=%1):",
        "%3 = Block#2(x=%2)",
        "%4 = Block#2(x=%3)",
    ]
    assert len(lines) == 2 + 2 * 4 + 3 + 2


def test_a_depth_that_hides_the_definition_shows_instance_lines_only() -> None:
    assert body(to_ssa(stack(), depth=3)) == [
        "%root = Net(x):",
        "  %layers = ModuleList(x):",
        "    %0 = Block#1(x)",
        "    %1 = Block#1(x=%0)",
        "    return %1",
        "  return %layers",
    ]


# --- determinism ----------------------------------------------------------------------------


def test_output_is_the_same_in_every_process() -> None:
    """No set or hash order leaks into the text: two interpreters with different hash seeds
    print the same bytes."""
    script = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "from test_ssa import stack, catalog_model, toy_mlp\n"
        "from trama.tools import to_ssa\n"
        "for make in (stack, catalog_model, toy_mlp): print(to_ssa(make(), tensors=True), end='')\n"
    )
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script, str(REPO / "tests"), str(REPO / "demo")],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        outputs.append(done.stdout)
    here = "".join(to_ssa(make(), tensors=True) for make in (stack, catalog_model, toy_mlp))
    assert outputs[0] == outputs[1] == here


# --- the helpers the summary shares ---------------------------------------------------------


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
def test_format_value_type(value: Any, expected: str) -> None:
    assert format_value_type(value) == expected


def test_format_ref() -> None:
    assert format_ref(Ref(INPUT, "x")) == "x"
    assert format_ref(Ref("a.b", "y")) == "%a.b.y"
