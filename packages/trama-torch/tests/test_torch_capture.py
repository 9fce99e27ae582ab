"""Capture with example inputs: ``trama.export_model(..., example_inputs=...)`` runs the model
through ``torch.export`` and writes the tree the user wrote, module by module.

Every rule of ``docs/torch.md`` ("Capture with example inputs") has a model here: the tree and
its names, leaves with their settings, a module called twice, tied weights, containers, keyword
example inputs, dynamic sizes run at other sizes on every runtime, escaped names restored on
import, unused state kept, and the errors (a missing catalog op, data-dependent control flow).
Round trips go the way a user goes: export, JSON text, load, import with the torch registry,
and the outputs are compared exactly (``torch.equal``) where the ops are torch's own, and within
1e-5 on numpy, torch:cpu and jax:cpu.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama

RUNTIMES = ["numpy", "torch:cpu", "jax:cpu"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def capture(
    model: nn.Module,
    inputs: list[str],
    outputs: list[str],
    examples: Any,
    dynamic: dict[str, dict[int, str]] | None = None,
) -> trama.Model:
    """Export with example inputs, and read the document back from its JSON text."""
    document = trama.export_model(
        model.eval(), inputs=inputs, outputs=outputs, example_inputs=examples, dynamic_shapes=dynamic
    )
    return trama.loads(trama.dumps(document))


def imported(document: trama.Model) -> Any:
    return trama.import_model(document, registry=trama.registry("torch"))


def node(document: trama.Model, node_id: str) -> trama.Node:
    return next(each for each in document.nodes if each.id == node_id)


def slots(document: trama.Model, node_id: str) -> dict[str, Any]:
    return {slot: document.parameters[entry].value for slot, entry in node(document, node_id).parameters.items()}


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_exact(model: nn.Module, back: nn.Module, *args: Any) -> None:
    with torch.no_grad():
        expected, got = as_tuple(model(*args)), as_tuple(back(*args))
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)


def runtime_available(name: str) -> bool:
    package = {"numpy": "trama_numpy", "torch:cpu": "trama_torch", "jax:cpu": "trama_jax"}[name]
    return importlib.util.find_spec(package) is not None


def assert_runtimes_agree(
    document: trama.Model, model: nn.Module, *args: torch.Tensor, tolerance: float = 1e-5
) -> None:
    """numpy, torch:cpu and jax:cpu give the original's outputs within ``tolerance`` (relative
    to the output's largest magnitude, at least 1)."""
    with torch.no_grad():
        expected = [value.numpy() for value in as_tuple(model(*args))]
    for name in RUNTIMES:
        if not runtime_available(name):
            continue
        got = trama.runtime_for_name(name).prepare(document).run([arg.numpy() for arg in args])
        assert len(got) == len(expected), name
        for want, have in zip(expected, got, strict=True):
            have = np.asarray(have)
            assert have.shape == want.shape, name
            scale = max(1.0, float(np.abs(want).max()))
            assert float(np.abs(have - want).max()) <= tolerance * scale, name


# --- The tree, its names and its leaves ----------------------------------------------------------


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(4)
        self.block = Block(16)
        self.ln = nn.LayerNorm(16, eps=1e-3)
        self.scale = nn.Parameter(torch.full((16,), 0.5))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        b, _c, h, w = image.shape
        x = torch.relu(self.norm(self.conv(image)))
        x = x.reshape(b, 4 * (h // 2) * (w // 2))
        return self.ln(self.block(x)) * self.scale


def test_the_tree_is_the_module_tree_with_its_names() -> None:
    model = Net()
    image = torch.randn(2, 3, 4, 4)
    document = capture(model, ["image"], ["y"], (image,))
    ops = {each.id: each.op for each in document.nodes}
    assert ops["root"] == "Graph"
    assert ops["root.conv"] == "Conv2d"
    assert ops["root.norm"] == "BatchNorm2d"
    assert ops["root.block"] == "Graph"
    assert ops["root.block.fc"] == "Linear"
    assert ops["root.block.act"] == "GELU"
    assert ops["root.ln"] == "LayerNorm"
    assert node(document, "root.block").metadata == {"class": f"{__name__}.Block"}
    assert node(document, "root").metadata == {"class": f"{__name__}.Net"}
    # the module's own ops are function nodes of its scope: relu, the reshape, add, the mul by scale
    assert {ops[f"root.{name}"] for name in ("relu", "mul")} == {"relu", "mul"}
    assert "reshape" in {ops[each] for each in ops if each.startswith("root.view") or each.startswith("root.reshape")}
    assert node(document, "root.block.add").inputs["other"] == trama.Ref(trama.INPUT, "x")


def test_leaves_keep_their_constructor_settings() -> None:
    model = Net()
    document = capture(model, ["image"], ["y"], (torch.randn(2, 3, 4, 4),))
    conv = slots(document, "root.conv")
    assert conv["stride"] == [2, 2]
    assert conv["padding"] == [1, 1]
    assert conv["kernel_size"] == [3, 3]
    assert "bias" not in conv  # Conv2d(bias=False)
    assert slots(document, "root.ln")["eps"] == 1e-3
    assert slots(document, "root.block.fc")["in_features"] == 16


def test_round_trip_is_exact_and_the_runtimes_agree() -> None:
    model = Net()
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, 4, 4))  # running statistics other than zeros and ones
    model.eval()
    image = torch.randn(2, 3, 4, 4)
    document = capture(model, ["image"], ["y"], (image,))
    back = imported(document)
    assert type(back.conv) is nn.Conv2d
    assert type(back.block.fc) is nn.Linear
    assert set(back.state_dict()) == set(model.state_dict())
    assert torch.equal(back.norm.running_var, model.norm.running_var)
    assert_exact(model, back, image)
    assert_runtimes_agree(document, model, image)


def test_a_chain_sequential_is_the_catalog_sequential() -> None:
    model = nn.Sequential(OrderedDict(first=nn.Linear(4, 8), act=nn.ReLU(), last=nn.Linear(8, 2)))
    wrapper = nn.Sequential(nn.Flatten(), model)
    x = torch.randn(3, 2, 2)
    document = capture(wrapper, ["x"], ["y"], (x,))
    assert node(document, "root.1").op == "Sequential"
    assert [each.id for each in document.nodes if each.parent == "root.1"] == [
        "root.1.first",
        "root.1.act",
        "root.1.last",
    ]
    back = imported(document)
    assert type(back[1]) is nn.Sequential
    assert_exact(wrapper, back, x)


# --- Modules used twice, tied weights -----------------------------------------------------------


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block(4)
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.out_input(self.block(self.block(x))))

    def out_input(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_module_called_twice_is_one_node_and_a_calling_node() -> None:
    model = Twice()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    again = node(document, "root.block_1")
    assert again.calls == "root.block"
    assert again.inputs == {"x": trama.Ref("root.block", "y")}
    assert [each.id for each in document.nodes if each.parent == "root.block_1"] == []
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())
    assert_exact(model, back, x)
    assert_runtimes_agree(document, model, x)


class ByRank(nn.Module):
    """Computes something else for a 2-d and a 3-d input: resolved at capture, per call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            return self.fc(x).mean(1)
        return self.fc(x)


class CalledOnTwoRanks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = ByRank()

    def forward(self, sequence: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
        return self.shared(sequence) + self.shared(vector)


def test_a_second_call_that_computes_otherwise_is_a_node_of_its_own_sharing_the_weights() -> None:
    model = CalledOnTwoRanks()
    sequence, vector = torch.randn(2, 5, 4), torch.randn(2, 4)
    document = capture(model, ["sequence", "vector"], ["y"], (sequence, vector))
    first, second = node(document, "root.shared"), node(document, "root.shared_1")
    assert second.calls is None
    assert first.op == second.op == "Graph"
    # inside, the same Linear on the same port: one module, called again
    assert node(document, "root.shared_1.fc").calls == "root.shared.fc"
    back = imported(document)
    assert back.shared_1.fc is back.shared.fc
    assert_exact(model, back, sequence, vector)


class Scaled(nn.Module):
    """A module of its own op: its ``to_node`` says what it is (here the catalog's ``relu``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    def to_node(self, ctx: trama.ExportContext) -> trama.NodeFragment:
        return trama.NodeFragment("relu", outputs=["y"])


class Holder(nn.Module):
    def __init__(self, shared: nn.Module) -> None:
        super().__init__()
        self.shared = shared
        self.act = Scaled()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.shared(x))


class TwoHolders(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        shared = nn.Linear(4, 4)
        self.first = Holder(shared)
        self.second = Holder(shared)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def test_a_module_held_by_two_parents_is_called_from_the_second_and_to_node_is_asked() -> None:
    model = TwoHolders()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert node(document, "root.second.shared").calls == "root.first.shared"
    assert node(document, "root.first.act").op == "relu"
    back = imported(document)
    assert back.second.shared is back.first.shared
    assert set(back.state_dict()) == set(model.state_dict())
    assert_exact(model, back, x)


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(tokens)))


def test_tied_weights_are_one_entry_and_one_parameter_again() -> None:
    model = TiedLM()
    tokens = torch.randint(0, 11, (2, 5))
    document = capture(model, ["tokens"], ["logits"], (tokens,))
    assert node(document, "root.embed").parameters["weight"] == node(document, "root.head").parameters["weight"]
    back = imported(document)
    assert back.head.weight is back.embed.weight
    assert_exact(model, back, tokens)


# --- Containers and unused state ----------------------------------------------------------------


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1)})

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.layers[:2]:  # the third layer is never called
            x = torch.relu(layer(x)) + x
        return self.heads["cls"](x), self.heads["reg"](x)


def test_containers_are_graph_nodes_of_their_items_and_unused_layers_keep_their_state() -> None:
    model = Stack()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["cls", "reg"], (x,))
    layers = node(document, "root.layers")
    assert layers.op == "Graph"
    assert layers.metadata == {"class": "torch.nn.modules.container.ModuleList"}
    assert node(document, "root.layers.0").op == "Linear"
    assert node(document, "root.heads.cls").op == "Linear"
    # the sliced-off layer: its tensors as constants, inside a node named after it
    assert node(document, "root.layers.2").op == "Graph"
    assert {each.id for each in document.nodes if each.parent == "root.layers.2"} == {
        "root.layers.2.weight",
        "root.layers.2.bias",
    }
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())
    assert torch.equal(back.state_dict()["layers.2.weight"], model.layers[2].weight)
    assert_exact(model, back, x)
    assert_runtimes_agree(document, model, x)


class Interleaved(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.ff = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attn, ff in zip(self.attn, self.ff, strict=True):
            x = ff(attn(x))
        return x


def test_interleaved_containers_are_flattened() -> None:
    model = Interleaved()
    x = torch.randn(2, 4)
    document = capture(model, ["x"], ["y"], (x,))
    children = [each.id for each in document.nodes if each.parent == "root"]
    assert children == ["root.attn_0", "root.ff_0", "root.attn_1", "root.ff_1"]
    assert_exact(model, imported(document), x)


class WithBuffers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("offset", torch.arange(4.0), persistent=False)
        self.register_buffer("unused_stat", torch.ones(4))
        self.spare = nn.Parameter(torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + self.offset


def test_state_dict_keys_survive_non_persistent_buffers_and_unread_state() -> None:
    model = WithBuffers()
    x = torch.randn(2, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert node(document, "root.offset").metadata == {"torch_persistent": False}
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())  # no 'offset', with 'unused_stat' and 'spare'
    assert isinstance(back.spare, nn.Parameter)
    assert_exact(model, back, x)


# --- Names torch allows and node ids do not --------------------------------------------------


class OddNames(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        body = nn.Sequential()
        body.add_module("block1-0", nn.Linear(4, 4))
        body.add_module("block1_0", nn.ReLU())  # what the escaped name would be: taken
        self.body = body
        self.heads = nn.ModuleDict({"head one": nn.Linear(4, 2)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads["head one"](self.body(x))


def test_odd_attribute_names_are_escaped_and_restored_on_import() -> None:
    model = OddNames()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    children = {each.name: each for each in document.nodes if each.parent == "root.body"}
    assert set(children) == {"block1_0", "block1_0_1"}
    escaped = next(each for each in children.values() if each.op == "Linear")
    assert escaped.name == "block1_0_1"
    assert escaped.metadata == {"torch_name": "block1-0"}
    assert children["block1_0"].op == "ReLU"
    assert children["block1_0"].metadata is None
    assert node(document, "root.heads.head_one").metadata == {"torch_name": "head one"}
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())
    assert type(back.body) is nn.Sequential
    assert list(back.body._modules) == ["block1-0", "block1_0"]
    assert_exact(model, back, x)
    assert_runtimes_agree(document, model, x)


# --- Example inputs: keywords, structures, dynamic sizes ----------------------------------------


class KeywordModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.proj(self.embed(input_ids))
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        return hidden


def test_a_dict_of_example_inputs_goes_in_as_keyword_arguments() -> None:
    model = KeywordModel()
    ids = torch.randint(0, 20, (2, 5))
    mask = torch.ones(2, 5)
    mask[1, 3:] = 0
    document = capture(model, ["input_ids", "attention_mask"], ["hidden"], {"input_ids": ids, "attention_mask": mask})
    assert document.inputs == ["input_ids", "attention_mask"]
    assert node(document, "root.embed").inputs == {"x": trama.Ref(trama.INPUT, "input_ids")}
    back = imported(document)
    assert_exact(model, back, ids, mask)
    assert_runtimes_agree(document, model, ids, mask)


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        out, _ = self.lstm(x, state)
        return out


def test_a_tuple_input_is_taken_apart_by_tuple_get() -> None:
    model = Recurrent()
    x, h0, c0 = torch.randn(2, 3, 4), torch.randn(1, 2, 6), torch.randn(1, 2, 6)
    document = capture(model, ["x", "state"], ["y"], (x, (h0, c0)))
    assert node(document, "root.state_0").op == "tuple_get"
    assert node(document, "root.lstm").inputs == {
        "x": trama.Ref(trama.INPUT, "x"),
        "h0": trama.Ref("root.state_0", "y"),
        "c0": trama.Ref("root.state_1", "y"),
    }
    back = imported(document)
    with torch.no_grad():
        assert torch.equal(back(x, (h0, c0)), model(x, (h0, c0)))


class Nested(nn.Module):
    def forward(self, x: torch.Tensor, pair: tuple[tuple[torch.Tensor, torch.Tensor], list[torch.Tensor]]) -> Any:
        (a, b), c = pair
        return x + a * b - c[0] + c[1]


def test_nested_tuples_and_lists_in_one_input_are_taken_apart_and_run_as_tuples() -> None:
    model = Nested()
    x = torch.randn(3)
    pair = ((torch.randn(3), torch.randn(3)), [torch.randn(3), torch.randn(3)])
    document = capture(model, ["x", "pair"], ["y"], (x, pair))
    assert node(document, "root.pair_1_0").op == "tuple_get"
    assert node(document, "root.pair_1_0").inputs == {"x": trama.Ref("root.pair_1", "y")}
    with torch.no_grad():
        expected = model(x, pair)
        assert torch.equal(imported(document)(x, pair), expected)
    as_arrays = ((pair[0][0].numpy(), pair[0][1].numpy()), (pair[1][0].numpy(), pair[1][1].numpy()))
    for name in RUNTIMES:
        if runtime_available(name):
            (got,) = trama.runtime_for_name(name).prepare(document).run([x.numpy(), as_arrays])
            assert np.allclose(np.asarray(got), expected.numpy(), atol=1e-6), name


class Batched(nn.Module):
    """A transformers-style model: one ``batch`` dict, with a nested dict and a tuple in it."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, scale: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        hidden = self.embed(batch["input_ids"]) * batch["mask"].unsqueeze(-1)
        extra = batch["extra"]
        shift = extra["shift"] + extra["pair"][0] * extra["pair"][1]
        return self.head(hidden * scale + shift)


def batch_examples() -> dict[str, Any]:
    return {
        "input_ids": torch.randint(0, 20, (2, 5)),
        "mask": (torch.rand(2, 5) > 0.3).float(),
        "extra": {"shift": torch.randn(8), "pair": (torch.randn(8), torch.randn(8)), "note": None},
    }


@pytest.mark.parametrize("by_name", [False, True])
def test_a_dict_input_becomes_one_model_input_per_tensor_in_key_order(by_name: bool) -> None:
    model = Batched().eval()
    scale, batch = torch.randn(8), batch_examples()
    examples = {"scale": scale, "batch": batch} if by_name else (scale, batch)
    document = capture(model, ["scale", "batch"], ["y"], examples)
    flat = ["batch_input_ids", "batch_mask", "batch_extra_shift", "batch_extra_pair_0", "batch_extra_pair_1"]
    assert document.inputs == ["scale", *flat]
    assert list(node(document, "root").inputs) == document.inputs
    assert document.input_facts is not None
    tensors = [scale, batch["input_ids"], batch["mask"], batch["extra"]["shift"], *batch["extra"]["pair"]]
    assert [(fact.dtype, fact.shape) for fact in document.input_facts if fact is not None] == [
        (str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape)) for tensor in tensors
    ]
    with torch.no_grad():
        expected = model(scale, batch)
        back = imported(document)
        assert torch.allclose(back(*tensors), expected, atol=1e-6)
        assert torch.allclose(back(**dict(zip(document.inputs, tensors, strict=True))), expected, atol=1e-6)
    feeds = {name: tensor.numpy() for name, tensor in zip(document.inputs, tensors, strict=True)}
    ran = 0
    for name in RUNTIMES:
        if runtime_available(name):
            (got,) = trama.runtime_for_name(name).prepare(document).run(feeds)
            assert np.allclose(np.asarray(got), expected.numpy(), atol=1e-5), name
            ran += 1
    assert ran >= 1


class Keyed(nn.Module):
    def forward(self, batch: dict[str, torch.Tensor], batch_a_b: torch.Tensor) -> torch.Tensor:
        return batch["a-b"] * batch["a_b"] + batch_a_b


def test_flattened_names_are_escaped_and_kept_apart_from_the_other_inputs() -> None:
    model = Keyed().eval()
    batch, other = {"a-b": torch.randn(3), "a_b": torch.randn(3)}, torch.randn(3)
    document = capture(model, ["batch", "batch_a_b"], ["y"], (batch, other))
    assert document.inputs == ["batch_a_b_1", "batch_a_b_2", "batch_a_b"]
    with torch.no_grad():
        got = imported(document)(batch["a-b"], batch["a_b"], other)
    assert torch.allclose(got, model(batch, other))
    with pytest.raises(trama.ExportError, match=r"dynamic_shapes names 'batch', whose example input is not a tensor"):
        capture(model, ["batch", "batch_a_b"], ["y"], (batch, other), {"batch": {0: "n"}})


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.layer(self.embed(tokens))
        batch, length, width = hidden.shape
        flat = hidden.reshape(batch * length, width)  # one symbolic size: written as -1
        merged = hidden.unsqueeze(2).reshape(batch, length, width)  # two: merging dims is a flatten
        return self.head(flat).sum(0), merged.mean(1)


def test_dynamic_shapes_keep_sizes_symbolic_and_run_at_other_sizes() -> None:
    model = Tokens()
    document = capture(
        model,
        ["tokens"],
        ["total", "pooled"],
        (torch.randint(0, 50, (2, 16)),),
        dynamic={"tokens": {0: "batch", 1: "seq"}},
    )
    assert document.input_facts == [trama.ValueFact("int64", ("batch", "seq"))]
    assert document.output_facts == [trama.ValueFact("float32", (4,)), trama.ValueFact("float32", ("batch", 16))]
    reshape = next(each for each in document.nodes if each.op == "reshape")
    assert slots(document, reshape.id)["shape"] == [-1, 16]
    flatten = next(each for each in document.nodes if each.op == "flatten")
    assert slots(document, flatten.id) == {"start_dim": 2, "end_dim": -1}
    other = torch.randint(0, 50, (3, 24))
    assert_exact(model, imported(document), other)
    assert_runtimes_agree(document, model, other)


class Encoded(nn.Module):
    """An ``nn.TransformerEncoder`` called with both masks, between modules of the model."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, causal: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        # is_causal=False: left None, torch compares the mask with a causal one, a branch on values
        hidden: torch.Tensor = self.encoder(self.embed(x), mask=causal, src_key_padding_mask=padding, is_causal=False)
        return hidden


def test_a_transformer_encoder_is_the_catalog_composite_of_its_layers() -> None:
    model = Encoded()
    x = torch.randn(2, 5, 8)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # of the padding mask's type, as torch asks
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    document = capture(model, ["x", "causal", "padding"], ["y"], (x, causal, padding))
    encoder = node(document, "root.encoder")
    assert encoder.op == "TransformerEncoder"
    assert encoder.inputs == {
        "src": trama.Ref("root.embed", "y"),
        "mask": trama.Ref(trama.INPUT, "causal"),
        "src_key_padding_mask": trama.Ref(trama.INPUT, "padding"),
    }
    assert slots(document, "root.encoder") == {"enable_nested_tensor": False, "mask_check": True}
    children = [each for each in document.nodes if each.id.startswith("root.encoder.")]
    assert [(each.id, each.op) for each in children] == [
        ("root.encoder.layers_0", "TransformerEncoderLayer"),
        ("root.encoder.layers_1", "TransformerEncoderLayer"),
        ("root.encoder.norm", "LayerNorm"),
    ]
    assert children[1].inputs == {
        "src": trama.Ref("root.encoder.layers_0", "y"),
        "src_mask": trama.Ref(trama.INPUT, "mask"),
        "src_key_padding_mask": trama.Ref(trama.INPUT, "src_key_padding_mask"),
    }
    back = imported(document)
    assert type(back.encoder) is nn.TransformerEncoder
    assert list(back.state_dict()) == list(model.state_dict())
    assert_exact(model, back, x, causal, padding)
    assert_runtimes_agree(document, model, x, causal, padding)


def test_a_transformer_encoder_model_is_the_composite_and_keeps_its_sizes_symbolic() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=True)
    model = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
    document = capture(model, ["src"], ["y"], (torch.randn(2, 6, 16),), dynamic={"src": {0: "batch", 1: "seq"}})
    assert node(document, "root").op == "TransformerEncoder"
    assert [each.id for each in document.nodes] == ["root", "root.layers_0", "root.layers_1", "root.layers_2"]
    assert document.input_facts == [trama.ValueFact("float32", ("batch", "seq", 16))]
    other = torch.randn(3, 9, 16)
    back = imported(document)
    assert list(back.state_dict()) == list(model.state_dict())
    assert_exact(model, back, other)
    assert_runtimes_agree(document, model, other)


class OwnEncoder(nn.TransformerEncoder):
    def forward(self, src: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:  # type: ignore[override]
        return super().forward(src) * 2.0


def test_a_transformer_encoder_with_a_forward_of_its_own_is_captured_by_that_forward() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.Linear(16, 16), OwnEncoder(layer, 2, enable_nested_tensor=False))
    x = torch.randn(2, 5, 16)
    document = capture(model, ["x"], ["y"], (x,))
    assert node(document, "root.1").op == "Graph"
    assert node(document, "root.1.layers").op == "Graph"
    assert_exact(model, imported(document), x)


def test_an_axis_the_model_fixes_cannot_be_dynamic() -> None:
    model = nn.Linear(16, 4)
    wrapper = nn.Sequential(nn.Flatten(), model)
    with pytest.raises(trama.ExportError, match=r"axis 1 of 'x' \('width'\) at its example size 16"):
        capture(wrapper, ["x"], ["y"], (torch.randn(2, 16),), dynamic={"x": {1: "width"}})


def test_without_dynamic_shapes_the_facts_say_the_example_sizes() -> None:
    model = Tokens()
    document = capture(model, ["tokens"], ["total", "pooled"], (torch.randint(0, 50, (2, 16)),))
    assert document.input_facts == [trama.ValueFact("int64", (2, 16))]
    assert document.output_facts == [trama.ValueFact("float32", (4,)), trama.ValueFact("float32", (2, 16))]


# --- What capture cannot do: one line, with the module, the op and the source line -------------


@torch.library.custom_op("trama_test_capture::running_total", mutates_args=())
def running_total(x: torch.Tensor) -> torch.Tensor:
    """An op of the user's own library: no catalog op, and no decomposition torch knows."""
    return torch.cumsum(x, dim=1)


@running_total.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Cumulative(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return running_total(self.fc(x))


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Cumulative()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_an_op_without_catalog_op_is_named_with_the_module_and_the_source_line() -> None:
    with pytest.raises(trama.ExportError) as caught:
        capture(Outer(), ["x"], ["y"], (torch.randn(2, 4),))
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert f"'inner' ({__name__}.Cumulative)" in message
    assert "trama_test_capture.running_total.default has no catalog op for it yet" in message
    assert "test_torch_capture.py" in message
    assert "running_total(self.fc(x))" in message
    assert caught.value.node_id == "root.inner"


class CastsDown(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float().half()  # the first cast changes nothing, the second is a real cast


def test_a_cast_to_the_same_dtype_is_nothing_and_a_real_cast_is_a_to_node() -> None:
    x = torch.randn(2, 3)
    document = capture(CastsDown(), ["x"], ["y"], (x,))
    casts = [each for each in document.nodes if each.op == "to"]
    assert len(casts) == 1
    assert slots(document, casts[0].id) == {"dtype": "float16"}
    assert [each.op for each in document.nodes if each.parent == "root"] == ["to"]
    assert torch.equal(imported(document)(x), x.half())
    for name in RUNTIMES:
        (y,) = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        assert np.asarray(y).dtype == np.float16, name
        np.testing.assert_array_equal(np.asarray(y), x.half().numpy(), err_msg=name)


class ZeroesACopy(nn.Module):
    """Writes into a slice of a tensor it reads again afterwards (as Swin V2 does to its bias)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.clone()
        b[:, 1:3].zero_()
        b[1:].mul_(2)[:, :1].fill_(7.0)
        return b * 2


class WritesThroughARow(nn.Module):
    """Writes through ``select`` (a row), which the capture does not write back: refused."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.clone()
        b[0].zero_()
        return b * 2


class InPlaceChain(nn.Module):
    """In-place ops as models use them: only their own results are read afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(x)
        out += x
        return self.act(out).mul_(3)


def test_an_in_place_write_into_slices_read_again_is_written_as_slice_scatter() -> None:
    model = ZeroesACopy().eval()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    ops = [each.op for each in document.nodes if each.parent == "root"]
    # b[:, 1:3] into b; b[1:] into b; [:, :1] into b[1:], which then goes into b again
    assert ops.count("slice_scatter") == 4
    assert "zero_" not in ops
    with torch.no_grad():
        expected = model(x)
        assert torch.equal(imported(document)(x), expected)
    for name in RUNTIMES:
        (y,) = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        np.testing.assert_allclose(np.asarray(y), expected.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


def test_an_in_place_write_that_cannot_be_written_back_is_refused_never_written_as_its_pure_form() -> None:
    with pytest.raises(trama.ExportError) as caught:
        capture(WritesThroughARow(), ["x"], ["y"], (torch.randn(2, 4),))
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert "aten.zero_.default writes into select, and mul reads clone afterwards (clone shares its storage)" in message
    assert "b[0].zero_()" in message


def test_in_place_ops_read_only_through_their_results_are_their_pure_forms() -> None:
    model = InPlaceChain().eval()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert [each.op for each in document.nodes if each.parent == "root"] == ["Linear", "add", "ReLU", "mul"]
    with torch.no_grad():
        expected = model(x.clone())
        assert torch.equal(imported(document)(x), expected)
    for name in RUNTIMES:
        (y,) = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        np.testing.assert_allclose(np.asarray(y), expected.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


class SubclassedLinear(nn.Linear):
    """A subclass of a catalog class with a forward of its own: not the catalog's Linear."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input.flip(-1), self.weight, self.bias)


def test_a_subclass_with_its_own_forward_is_exported_by_its_forward_never_as_the_base_op() -> None:
    model = nn.Sequential(SubclassedLinear(4, 2))
    x = torch.randn(3, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert "Linear" not in {each.op for each in document.nodes}
    subclass = next(
        each
        for each in document.nodes
        if each.metadata and str(each.metadata.get("class", "")).endswith("SubclassedLinear")
    )
    assert subclass.op == "Graph"
    inside = {each.op for each in document.nodes if each.parent == subclass.id}
    assert {"flip", "linear"} <= inside
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())
    with torch.no_grad():
        assert torch.equal(back(x), model.eval()(x))


class Regions(nn.Module):
    """``forward`` switches gradients off for a part (transformers' rotary embeddings do), which
    torch.export wraps in a submodule of its graph; optionally it switches autocast on."""

    def __init__(self, autocast: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.autocast = autocast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            scale = torch.sigmoid(x) * 2
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            y = self.fc(x)
        return y * scale


def test_a_region_without_gradients_is_part_of_its_module_and_autocast_is_a_named_missing_cast() -> None:
    model = Regions(autocast=False)
    x = torch.randn(2, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert {each.op for each in document.nodes if each.parent == "root"} == {"sigmoid", "mul", "Linear"}
    assert_exact(model, imported(document), x)
    with pytest.raises(trama.ExportError, match=r"switches torch\.autocast on, which casts dtypes"):
        capture(Regions(autocast=True), ["x"], ["y"], (x,))


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


class HoldsDataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = DataDependent()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(x) + 1


def test_data_dependent_control_flow_names_the_module_the_line_and_what_to_do() -> None:
    with pytest.raises(trama.ExportError) as caught:
        capture(HoldsDataDependent(), ["x"], ["y"], (torch.randn(2, 3),))
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert f"'gate' ({__name__}.DataDependent)" in message
    assert "test_torch_capture.py" in message
    assert "if x.sum() > 0:" in message
    assert "branches on a tensor's values" in message
    assert "shapes, dtypes or settings" in message


class ReadsShape(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).view(x.size(0), -1)


def test_without_example_inputs_the_fx_path_is_unchanged_and_its_errors_point_to_capture() -> None:
    model = ReadsShape()
    with pytest.raises(trama.ExportError, match="pass example_inputs="):
        trama.export_model(model, inputs=["x"], outputs=["y"])
    document = capture(model, ["x"], ["y"], (torch.randn(2, 4),))  # the same model, captured
    assert_exact(model, imported(document), torch.randn(2, 4))


def test_a_leaf_refusal_gets_no_hint_that_cannot_apply() -> None:
    model = nn.Sequential(nn.Linear(4, 4))
    model[0].register_forward_hook(lambda module, args, result: None)
    with pytest.raises(trama.ExportError) as caught:
        trama.export_model(model, inputs=["x"], outputs=["y"])
    assert "forward hooks" in str(caught.value)
    assert "example_inputs" not in str(caught.value)


class Strided(nn.Module):
    """``contiguous`` before a matrix product: its float result depends on the layout."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.contiguous().transpose(1, 2).contiguous())


def test_contiguous_is_kept_only_where_the_tensor_was_strided() -> None:
    model = Strided().eval()
    x = torch.randn(2, 5, 4)
    document = capture(model, ["x"], ["y"], (x,))
    assert [each.op for each in document.nodes if each.parent == "root"] == ["transpose", "contiguous", "Linear"]
    with torch.no_grad():
        assert torch.equal(imported(document)(x), model(x))
    for name in RUNTIMES:
        (y,) = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        np.testing.assert_allclose(np.asarray(y), model(x).detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


class ReadsSubmoduleState(nn.Module):
    """Reads a submodule's weights without calling it, as Swin's attention reads ``self.qkv``."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.qkv.weight, self.qkv.bias)


class SharedTable(nn.Module):
    """The encoder's own table read by each item of its ModuleList, as DeBERTa's rel_embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(4))
        self.layer = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x) * self.table
        return x


class ScaledEmbedding(nn.Embedding):
    """An embedding subclass with a forward of its own (Gemma's), its weight tied to a head."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.embedding(input, self.weight) * 2.0


class TiedHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = ScaledEmbedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))


class SelfNamed(nn.Module):
    """transformers' BERT names a submodule ``self`` (``attention.self``)."""

    def __init__(self) -> None:
        super().__init__()
        self.self = nn.Linear(4, 4)
        self.output = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x)) + 1


@pytest.mark.parametrize(
    ("model", "example"),
    [
        (ReadsSubmoduleState(), torch.randn(2, 4)),
        (SharedTable(), torch.randn(2, 4)),
        (TiedHead(), torch.tensor([[1, 2, 3], [4, 5, 9]])),
        (nn.Sequential(SelfNamed()), torch.randn(2, 4)),
    ],
    ids=["submodule-state-read-directly", "module-state-read-by-list-items", "tied-weight-in-subclass", "self"],
)
def test_state_keeps_its_state_dict_keys_wherever_it_is_read(model: nn.Module, example: torch.Tensor) -> None:
    model.eval()
    document = capture(model, ["x"], ["y"], (example,))
    back = imported(document)
    assert set(back.state_dict()) == set(model.state_dict())
    with torch.no_grad():
        assert torch.equal(back(example), model(example))


class Normalized(nn.Module):
    """``F.normalize`` (Swin V2's cosine attention): the norm is its own op, so the import is exact."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) + torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True)


def test_vector_norms_are_their_op_and_import_exactly() -> None:
    model = Normalized().eval()
    x = torch.randn(3, 5)
    document = capture(model, ["x"], ["y"], (x,))
    norms = [each for each in document.nodes if each.op == "linalg_vector_norm"]
    assert [slots(document, each.id)["ord"] for each in norms] == [2.0, "inf"]
    assert not [each for each in document.nodes if each.metadata and "decomposed" in each.metadata]
    with torch.no_grad():
        assert torch.equal(imported(document)(x), model(x))
    for name in RUNTIMES:
        (y,) = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        np.testing.assert_allclose(np.asarray(y), model(x).numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


class _Banded(nn.Module):
    """Masks its input with a band the program computes once per call, from sizes alone."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(x.shape[-1]).unsqueeze(0)
        band = (rows - torch.arange(x.shape[-1]).unsqueeze(1)).abs() <= 1
        return x.masked_fill(~band, 0.0) + x


def test_constants_of_the_same_value_are_one_table_entry() -> None:
    model = nn.Sequential(_Banded(), nn.Linear(4, 4), _Banded())
    document = capture(model, ["x"], ["y"], (torch.randn(4, 4),))
    computed = [each for each in document.nodes if each.op == "constant"]
    assert {each.parent for each in computed} == {"root.0", "root.2"}  # each layer keeps its node
    assert len({each.parameters["value"] for each in computed}) == len(computed) // 2  # one entry per value
    back = imported(document)
    x = torch.randn(4, 4)
    with torch.no_grad():
        assert torch.equal(back(x), model(x))
    assert_runtimes_agree(document, model, x)


class _Optional(nn.Module):
    """A block with its optional parts switched off, as timm writes them (``nn.Identity``)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.Identity()
        self.proj = nn.Sequential(nn.Linear(4, 4), nn.Identity(), nn.Linear(4, 4))
        self.drop = nn.Dropout(0.1)
        self.drop_path = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop_path(self.drop(self.proj(self.norm(x))))


def test_an_identity_attribute_is_no_node_and_the_rest_of_the_tree_stays() -> None:
    model = _Optional()
    document = capture(model, ["x"], ["y"], (torch.randn(2, 4),))
    ids = {each.id: each.op for each in document.nodes}
    assert "root.norm" not in ids
    assert "root.drop_path" not in ids
    assert ids["root.proj"] == "Sequential"
    assert ids["root.proj.1"] == "Identity"  # its place in the chain holds the keys after it
    assert ids["root.drop"] == "Dropout"  # a module of the tree, class and all
    back = imported(document)
    assert list(back.state_dict()) == list(model.state_dict())
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(back(x), model.eval()(x))
