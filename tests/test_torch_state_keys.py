"""Captured with example inputs, a model imports with exactly its ``state_dict`` keys and ties.

Two ways the keys used to come back otherwise (found on T5, BART, Marian and Pegasus, and on
Res2Net and the diffusers U-Net and VAE):

* A tensor or a module with several names kept only the name it was called under. T5 and its
  kin hold an ``nn.Embedding`` as ``shared`` that is never called: the encoder calls
  ``encoder.embed_tokens``, which is either the very same module (a module under two names) or
  one whose weight is the same ``Parameter`` (a tied tensor); ``shared.weight`` was lost.
* The items of two ``ModuleList``\\ s whose calls interleave (Res2Net's ``convs[i]`` and
  ``bns[i]``, the diffusers middle block's ``resnets`` and ``attentions``) are children of the
  scope itself, ``convs_0``; their keys came back as ``convs_0.weight``.

Each model here is exported, written to JSON and read back, and imported with the torch
registry: its keys are the original's, ties are one object again, ``load_state_dict`` reads
the keys back strictly, and the outputs are exact.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import trama

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def round_trip(model: nn.Module, *examples: torch.Tensor) -> tuple[trama.Model, Any]:
    """Export with example inputs, through JSON text, and import with the torch registry."""
    document = trama.export_model(model.eval(), inputs=["x"], outputs=["y"], example_inputs=examples)
    document = trama.loads(trama.dumps(document))
    return document, trama.import_model(document, registry=trama.registry("torch"))


def node(document: trama.Model, node_id: str) -> trama.Node:
    return next(each for each in document.nodes if each.id == node_id)


def assert_same_keys_and_outputs(
    model: nn.Module, back: nn.Module, *examples: torch.Tensor, lost: frozenset[str] = frozenset()
) -> None:
    """``back`` has ``model``'s keys (less ``lost``) and outputs, and reads its keys back
    strictly (last: loading writes into the tensors, which the document shares)."""
    assert sorted(back.state_dict()) == sorted(set(model.state_dict()) - lost)
    with torch.no_grad():
        assert torch.equal(back(*examples), model(*examples))
    zeros = {key: torch.zeros_like(value) for key, value in back.state_dict().items()}
    back.load_state_dict(zeros, strict=True)  # every key is read back into its tensor
    assert all(not value.any() for value in back.state_dict().values())


# --- a module or a tensor under several names -------------------------------------------------


class Stack(nn.Module):
    def __init__(self, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.embed_tokens = embed_tokens
        self.proj = nn.Linear(6, 6)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.proj(self.embed_tokens(ids))
        return out


class SharedModule(nn.Module):
    """T5 as transformers 4 builds it: ``T5Stack(config, self.shared)`` holds the very module."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Embedding(11, 6)
        self.encoder = Stack(self.shared)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.encoder(ids)
        return out


class SharedWeight(nn.Module):
    """T5, BART, Marian, Pegasus as transformers 5 builds them: two modules, one ``Parameter``."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Embedding(11, 6)
        self.encoder = Stack(nn.Embedding(11, 6))
        self.encoder.embed_tokens.weight = self.shared.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.encoder(ids)
        return out


def tokens() -> torch.Tensor:
    return torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(0))


def test_a_module_under_two_names_is_one_node_and_both_names_on_import() -> None:
    model = SharedModule()
    document, back = round_trip(model, tokens())
    assert node(document, "root").metadata == {
        "class": f"{__name__}.SharedModule",
        "torch_aliases": {"shared": "encoder.embed_tokens"},
    }
    assert node(document, "root.encoder.embed_tokens").op == "Embedding"
    assert not any(each.id.startswith("root.shared") for each in document.nodes)
    assert back.shared is back.encoder.embed_tokens  # one module, as in the original
    assert_same_keys_and_outputs(model, back, tokens())


def test_a_tied_tensor_of_a_module_never_called_keeps_its_key_and_its_tie() -> None:
    model = SharedWeight()
    document, back = round_trip(model, tokens())
    weight = node(document, "root.shared.weight")
    assert weight.op == "constant"
    assert weight.parameters["value"] == node(document, "root.encoder.embed_tokens").parameters["weight"]
    assert back.shared.weight is back.encoder.embed_tokens.weight  # one Parameter, as in the original
    assert_same_keys_and_outputs(model, back, tokens())


class Renamed(nn.Module):
    """A module under two names in one scope, and one item twice in a ``ModuleList``."""

    def __init__(self) -> None:
        super().__init__()
        twice = nn.Linear(4, 4)
        self.layers = nn.ModuleList([twice, twice, nn.Linear(4, 4)])
        self.norm = nn.LayerNorm(4)
        self.final_norm = self.norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        out: torch.Tensor = self.final_norm(x)
        return out


def test_other_names_in_one_scope_and_in_a_container_are_aliases() -> None:
    model = Renamed()
    x = torch.randn(3, 4)
    document, back = round_trip(model, x)
    assert node(document, "root").metadata["torch_aliases"] == {"final_norm": "norm"}
    assert node(document, "root.layers").metadata["torch_aliases"] == {"1": "0"}
    assert back.final_norm is back.norm
    assert back.layers.get_submodule("1") is back.layers.get_submodule("0")
    assert_same_keys_and_outputs(model, back, x)


# --- items of interleaved containers ------------------------------------------------------------


class Interleaved(nn.Module):
    """Res2Net's pattern: ``convs[i]`` then ``bns[i]``, in turn; the items of one list are
    ``nn.Sequential``\\ s, themselves the catalog's ``Sequential``."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(2)])
        self.bns = nn.ModuleList([nn.LayerNorm(4) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv, bn in zip(self.convs, self.bns, strict=True):
            x = bn(conv(x)) + x
        return x


def test_items_of_interleaved_containers_keep_their_keys() -> None:
    model = Interleaved()
    x = torch.randn(3, 4)
    document, back = round_trip(model, x)
    children = [each.id for each in document.nodes if each.parent == "root" and each.op != "add"]
    assert children == ["root.convs_0", "root.bns_0", "root.convs_1", "root.bns_1"]
    assert node(document, "root.convs_0").op == "Sequential"
    assert node(document, "root.convs_0").metadata["torch_name"] == "convs.0"
    assert node(document, "root.bns_1").metadata == {"torch_name": "bns.1"}
    assert "convs.0.0.weight" in back.state_dict()
    assert back.get_submodule("convs_0") is not None  # held under its node name, as ever
    for name in RUNTIMES:
        got = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        with torch.no_grad():
            assert torch.allclose(torch.as_tensor(got[0]), model(x), atol=1e-5), name
    assert_same_keys_and_outputs(model, back, x)


# --- what the import does with such metadata, whatever a file says ----------------------------


def _with_metadata(document: trama.Model, metadata: dict[str, dict[str, Any]]) -> trama.Model:
    text = trama.dumps(document)
    model = trama.loads(text)
    for each in model.nodes:
        if each.id in metadata:
            each.metadata = {**(each.metadata or {}), **metadata[each.id]}
    return trama.loads(trama.dumps(model))


@pytest.mark.parametrize(
    "aliases",
    [
        {"encoder": "encoder.embed_tokens"},  # taken by a child
        {"forward": "encoder.embed_tokens", "training": "encoder", "graph": "encoder"},  # attributes
        {"encoder.proj.extra": "encoder.embed_tokens"},  # into a module a node built
        {"encoder.extra": "encoder"},  # a cycle: a module inside itself
        {"copy": ""},  # the scope itself
        {"copy": "nothing.here"},  # no such module
        {"copy": "encoder.embed_tokens.weight"},  # a tensor, not a module
    ],
)
def test_an_alias_never_replaces_anything_nor_makes_a_cycle(aliases: dict[str, str]) -> None:
    model = SharedModule()
    document, _ = round_trip(model, tokens())
    changed = _with_metadata(document, {"root": {"torch_aliases": aliases}})
    back = trama.import_model(changed, registry=trama.registry("torch"))
    assert back.encoder.embed_tokens.weight.shape == (11, 6)
    assert_same_keys_and_outputs(model, back, tokens(), lost=frozenset({"shared.weight"}))


def test_an_alias_may_make_plain_modules_for_its_path() -> None:
    model = SharedModule()
    document, _ = round_trip(model, tokens())
    changed = _with_metadata(document, {"root": {"torch_aliases": {'odd "name".inner': "encoder.proj"}}})
    back = trama.import_model(changed, registry=trama.registry("torch"))
    assert back.get_submodule('odd "name"').inner is back.encoder.proj
    assert 'odd "name".inner.weight' in back.state_dict()
    assert 'odd "name"' not in back.code  # data, never code


def test_a_dotted_torch_name_that_another_child_starts_is_not_used() -> None:
    model = Interleaved()
    x = torch.randn(3, 4)
    document, _ = round_trip(model, x)
    changed = _with_metadata(document, {"root.convs_0": {"torch_name": "bns_1.x"}, "root.bns_0": {"torch_name": "a"}})
    changed = _with_metadata(changed, {"root.bns_1": {"torch_name": "a.b"}})  # 'a' starts 'a.b': neither
    back = trama.import_model(changed, registry=trama.registry("torch"))
    keys = set(back.state_dict())
    assert {"convs_0.0.weight", "bns_0.weight", "bns_1.weight", "convs.1.0.weight"} <= keys
    zeros = {key: torch.zeros_like(value) for key, value in back.state_dict().items()}
    back.load_state_dict(zeros, strict=True)
