"""Importing documents as torch modules: the composites' classes, the generated wiring of a
``Graph``, documents written by hand, and the whole-document module the runtimes run."""

from __future__ import annotations

import json

import pytest
import torch
from export_support import assert_same_outputs, round_trip
from torch import fx, nn

import trama
from trama_torch.composites import graph
from trama_torch.importing import DocumentModule, call_node, import_document


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def load(document: dict[str, object]) -> trama.Model:
    return trama.loads(json.dumps(document))


def ref(node: str, output: str) -> dict[str, str]:
    return {"node": node, "output": output}


def test_a_hand_written_graph_with_a_pass_through_output_imports_as_a_graph_module() -> None:
    """Documents need not come from torch: the wiring alone defines the module."""
    document = load(
        {
            "format_version": "1.0",
            "inputs": ["x"],
            "outputs": [ref("net", "y"), ref("net", "skip")],
            "nodes": [
                {
                    "id": "net",
                    "parent": None,
                    "op": "Graph",
                    "inputs": {"x": ref("%input", "x")},
                    "outputs": ["y", "skip"],
                    "parameters": {},
                    "output_bindings": {"y": ref("net.scale", "y"), "skip": ref("%input", "x")},
                },
                {
                    "id": "net.act",
                    "parent": "net",
                    "op": "ReLU",
                    "inputs": {"x": ref("%input", "x")},
                    "outputs": ["y"],
                    "parameters": {},
                    "output_bindings": None,
                },
                {
                    "id": "net.scale",
                    "parent": "net",
                    "op": "mul",
                    "inputs": {"x": ref("net.act", "y")},
                    "outputs": ["y"],
                    "parameters": {"other": {"name": "net.scale.other"}},
                    "output_bindings": None,
                },
            ],
            "parameters": {"net.scale.other": {"value": 2.0, "learnable": False}},
        }
    )
    module = trama.import_model(document, registry=trama.registry("torch"))
    assert isinstance(module, fx.GraphModule)
    assert type(module.act) is nn.ReLU
    assert "self.act(x)" in module.code
    x = torch.tensor([[-1.0, 0.5, 2.0]])
    y, skip = module(x)
    assert torch.equal(y, torch.relu(x) * 2.0)
    assert skip is x


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, 4, batch_first=True)
        self.gate = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, h = self.gru(x)
        return torch.sigmoid(self.gate(out)) * out, h


def test_the_generated_code_calls_each_child_by_its_name() -> None:
    model = Gated().eval()
    back = round_trip(model, ["x"], ["y", "h"]).module
    code = back.code
    assert "self.gru(x)" in code
    assert "self.gate(" in code
    assert "getitem" in code  # the GRU's (y, h_n) taken apart
    assert_same_outputs(model, back, torch.randn(2, 5, 3))


def test_transformer_encoder_holds_the_imported_layers_and_keeps_its_settings() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    model = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8), enable_nested_tensor=False).eval()
    with torch.no_grad():
        model.layers[2].linear2.bias.fill_(0.25)
    back = round_trip(model, ["src"], ["y"]).module
    assert type(back) is nn.TransformerEncoder
    assert len(back.layers) == back.num_layers == 3
    assert torch.equal(back.layers[2].linear2.bias, model.layers[2].linear2.bias)
    assert back.use_nested_tensor is False
    assert back.enable_nested_tensor is False
    assert type(back.norm) is nn.LayerNorm
    mask = torch.triu(torch.full((4, 4), float("-inf")), diagonal=1)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        assert torch.equal(back(x, mask=mask), model(x, mask=mask))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        layer = nn.TransformerEncoderLayer(6, 2, 12, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.block = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, tokens: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.block(self.block(self.encoder(self.embed(tokens))))
        return self.out(h) + bias, h


def test_import_document_runs_the_model_inputs_to_its_outputs() -> None:
    model = Net().eval()
    document = trama.export_model(model, inputs=["tokens", "bias"], outputs=["logits", "hidden"])
    module = import_document(document)
    assert isinstance(module, DocumentModule)
    assert set(module.state_dict()) == {f"root.{key}" for key in model.state_dict()}
    tokens, bias = torch.randint(0, 10, (2, 5)), torch.randn(2)[:, None, None]
    with torch.no_grad():
        logits, hidden = module(tokens, bias)
        expected = model(tokens, bias)
    assert torch.equal(logits, expected[0])
    assert torch.equal(hidden, expected[1])


def test_node_modules_finds_every_node_with_a_module() -> None:
    model = Net().eval()
    document = trama.export_model(model, inputs=["tokens", "bias"], outputs=["logits", "hidden"])
    module = import_document(document)
    found = module.node_modules
    assert found["root"] == "root"
    assert found["root.encoder"] == "root.encoder"
    assert found["root.encoder.layers_1"] == "root.encoder.layers.1"
    assert found["root.block_1"] == found["root.block"] == "root.block"
    assert found["root.add"] == "root.add"
    for node_id, name in found.items():
        assert module.get_submodule(name) is not None, node_id
    assert set(found) == {node.id for node in document.nodes}


def test_call_node_calls_leaves_composites_and_functions_alike() -> None:
    model = Net().eval()
    document = trama.export_model(model, inputs=["tokens", "bias"], outputs=["logits", "hidden"])
    module = import_document(document)
    by_id = {node.id: node for node in document.nodes}
    x = torch.randn(2, 5, 6)

    def call(node_id: str, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return call_node(by_id[node_id], module.get_submodule(module.node_modules[node_id]), values)

    with torch.no_grad():
        assert torch.equal(call("root.block", {"x": x})["y"], model.block(x))
        assert torch.equal(call("root.encoder", {"src": x})["y"], model.encoder(x))
        assert torch.equal(call("root.add", {"x": x, "other": x})["y"], x + x)
        outputs = call("root", {"tokens": torch.randint(0, 10, (2, 5)), "bias": torch.zeros(1)})
    assert list(outputs) == ["logits", "hidden"]


def test_a_document_with_two_top_level_nodes() -> None:
    first, second = nn.Linear(3, 2), nn.Linear(3, 2)
    document = trama.loads(
        trama.dumps(
            trama.Model(
                inputs=["x"],
                outputs=[trama.Ref("a", "y"), trama.Ref("b", "y")],
                nodes=[
                    *_only_nodes(first, "a"),
                    *_only_nodes(second, "b"),
                ],
                parameters={
                    **trama.export_model(first, inputs=["x"], outputs=["y"], root="a").parameters,
                    **trama.export_model(second, inputs=["x"], outputs=["y"], root="b").parameters,
                },
            )
        )
    )
    module = import_document(document)
    x = torch.randn(4, 3)
    with torch.no_grad():
        a, b = module(x)
    assert torch.equal(a, first(x))
    assert torch.equal(b, second(x))
    assert module.node_modules == {"a": "a", "b": "b"}


def _only_nodes(linear: nn.Linear, root: str) -> list[trama.Node]:
    return trama.export_model(linear, inputs=["x"], outputs=["y"], root=root).nodes


def test_a_graph_built_outside_an_import_says_what_it_needs() -> None:
    node = trama.Node("g", "Graph", {}, ["y"], {}, {"y": trama.Ref("g.c", "y")})
    with pytest.raises(trama.ImportModelError, match="children's nodes"):
        graph(node, children={"c": nn.Identity()}, parameters={})


def test_children_whose_names_python_or_graph_module_reserve_are_held_under_other_names() -> None:
    layer = {"op": "Tanh", "outputs": ["y"], "parameters": {}, "output_bindings": None}
    document = load(
        {
            "format_version": "1.0",
            "inputs": ["a", "b"],
            "outputs": [ref("net", "y0"), ref("net", "y1")],
            "nodes": [
                {
                    "id": "net",
                    "parent": None,
                    "op": "Graph",
                    "inputs": {"0": ref("%input", "a"), "self": ref("%input", "b")},
                    "outputs": ["y0", "y1"],
                    "parameters": {},
                    "output_bindings": {"y0": ref("net.if", "y"), "y1": ref("net.code", "y")},
                },
                {"id": "net.if", "parent": "net", "inputs": {"x": ref("%input", "0")}, **layer},
                {"id": "net.code", "parent": "net", "inputs": {"x": ref("%input", "self")}, **layer},
            ],
            "parameters": {},
        }
    )
    module = import_document(document)
    assert module.get_submodule("net").child_attributes == {"if": "if_", "code": "code_"}
    assert module.node_modules == {"net": "net", "net.if": "net.if_", "net.code": "net.code_"}
    a, b = torch.randn(3), torch.randn(3)
    y0, y1 = module(a, b)
    assert torch.equal(y0, torch.tanh(a))
    assert torch.equal(y1, torch.tanh(b))


def test_imported_composites_are_in_eval_mode() -> None:
    model = Net().eval()
    back = round_trip(model, ["tokens", "bias"], ["logits", "hidden"]).module
    assert not any(module.training for module in back.modules())


class _Mix(nn.Module):
    """A pack's torch module with two ports and an optional third: ``a - 2 b (+ c)``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        return a - 2 * b + (c if c is not None else 0)


def _mix_pack() -> object:
    from collections.abc import Mapping, Sequence
    from types import SimpleNamespace
    from typing import Any

    from trama import OpSpec
    from trama.extension import hookimpl

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [OpSpec("mixpack.Mix", inputs=("a", "b"), outputs=("y",), optional_inputs=("c",))]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {"mixpack.Mix": lambda node, **_: _Mix()} if framework == "torch" else None

    module = SimpleNamespace(trama_op_specs=trama_op_specs, trama_op_implementations=trama_op_implementations)
    return SimpleNamespace(name="mix", dist=SimpleNamespace(name="trama-mixpack", version="1"), load=lambda: module)


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        (["b", "a"], lambda a, b, c: a - 2 * b),  # the document's order is not the call's
        (["a", "c", "b"], lambda a, b, c: a - 2 * b + c),
        (["c", "a"], None),  # b is required: validation refuses it
    ],
)
def test_a_packs_module_gets_its_ports_in_its_specs_order(ports: list[str], expected: object) -> None:
    import importlib_metadata

    from trama.extension import ENTRY_POINT_GROUP, PluginHost, reset_plugins

    installed = list(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    reset_plugins(PluginHost([*installed, _mix_pack()]))
    try:
        model = trama.Model(
            inputs=ports,
            outputs=[trama.Ref("root", "y")],
            nodes=[
                trama.Node(
                    "root",
                    "Graph",
                    {p: trama.Ref("%input", p) for p in ports},
                    ["y"],
                    {},
                    {"y": trama.Ref("root.mix", "y")},
                ),
                trama.Node("root.mix", "mixpack.Mix", {p: trama.Ref("%input", p) for p in ports}, ["y"], {}),
            ],
            parameters={},
        )
        a, b, c = torch.tensor([1.0]), torch.tensor([10.0]), torch.tensor([100.0])
        values = {"a": a, "b": b, "c": c}
        if expected is None:
            with pytest.raises(trama.TramaError):
                trama.import_model(model, registry=trama.registry("torch"))
            return
        module = trama.import_model(model, registry=trama.registry("torch"))
        assert callable(expected)
        assert torch.equal(module(*(values[p] for p in ports)), expected(a, b, c))
    finally:
        reset_plugins()


def test_a_packs_factory_ties_an_entry_shared_with_another_node_through_the_public_helpers() -> None:
    """``trama_torch.tied_parameter`` gives a pack's module the very ``nn.Parameter`` that a
    catalog ``Linear`` elsewhere in the document holds for the same entry."""
    from collections.abc import Mapping, Sequence
    from types import SimpleNamespace
    from typing import Any

    import importlib_metadata
    import numpy as np

    import trama_torch
    from trama import OpSpec, ParameterSchema
    from trama.extension import ENTRY_POINT_GROUP, PluginHost, hookimpl, reset_plugins

    class Gain(nn.Module):
        def __init__(self, weight: nn.Parameter) -> None:
            super().__init__()
            self.weight = weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.weight

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return [
            OpSpec("gain.Gain", inputs=("x",), outputs=("y",), parameters=(ParameterSchema("weight", ("tensor",)),))
        ]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        def build(node: Any, *, children: Any, parameters: Any) -> Gain:
            return Gain(trama_torch.tied_parameter(parameters["weight"], what="gain weight"))

        return {"gain.Gain": build} if framework == "torch" else None

    module = SimpleNamespace(trama_op_specs=trama_op_specs, trama_op_implementations=trama_op_implementations)
    pack = SimpleNamespace(name="gain", dist=SimpleNamespace(name="trama-gain", version="1"), load=lambda: module)
    installed = list(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    reset_plugins(PluginHost([*installed, pack]))
    try:
        weight = trama.Parameter(trama.Tensor.from_array(np.eye(3, dtype=np.float32) * 2), learnable=True)
        ref = trama.Ref
        model = trama.Model(
            inputs=["x"],
            outputs=[ref("root", "y")],
            nodes=[
                trama.Node("root", "Graph", {"x": ref("%input", "x")}, ["y"], {}, {"y": ref("root.gain", "y")}),
                trama.Node(
                    "root.linear",
                    "Linear",
                    {"x": ref("%input", "x")},
                    ["y"],
                    {"weight": "w", "in_features": "n", "out_features": "n"},
                ),
                trama.Node("root.gain", "gain.Gain", {"x": ref("root.linear", "y")}, ["y"], {"weight": "w"}),
            ],
            parameters={"w": weight, "n": trama.Parameter(3, learnable=False)},
        )
        imported = trama.import_model(model, registry=trama.registry("torch"))
        assert imported.gain.weight is imported.linear.weight
        x = torch.ones(1, 3)
        assert torch.equal(imported(x), (x @ (2 * torch.eye(3)).T) @ (2 * torch.eye(3)))
    finally:
        reset_plugins()


def test_a_leaf_factory_checks_the_catalogs_settings_before_torch_builds_anything() -> None:
    """A GRU of 10**9 layers would make torch's constructor loop (on the meta device, a layer at
    a time): the factory runs the catalog's checks first, even when called on its own."""
    import time

    import numpy as np

    from trama_torch.leaves import leaf_factories

    rng = np.random.default_rng(0)
    weights = {"weight_ih_l0": (12, 3), "weight_hh_l0": (12, 4), "bias_ih_l0": (12,), "bias_hh_l0": (12,)}
    parameters = {"input_size": trama.Parameter(3), "hidden_size": trama.Parameter(4)}
    parameters["num_layers"] = trama.Parameter(10**9)
    for slot, shape in weights.items():
        parameters[slot] = trama.Parameter(trama.Tensor.from_array(rng.standard_normal(shape).astype(np.float32)), True)
    node = trama.Node("rnn", "GRU", {"x": trama.Ref(trama.INPUT, "x")}, ["y", "h_n"], {s: s for s in parameters})
    started = time.perf_counter()
    with pytest.raises(trama.RegistryError, match="num_layers must be 1 … 8") as info:
        leaf_factories()["GRU"](node, children={}, parameters=parameters)
    assert info.value.node_id == "rnn"
    assert time.perf_counter() - started < 1
