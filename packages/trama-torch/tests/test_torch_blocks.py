"""A torch model whose layers repeat: written once as a block in format 1.3, imported back as one
real module per layer, each with its own parameters and the original ``state_dict`` keys."""

from __future__ import annotations

import json

import numpy as np
import torch
from torch import nn

import trama


class Layer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + torch.relu(self.fc(x)))


class Stack(nn.Module):
    def __init__(self, layers: int, width: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(width) for _ in range(layers))
        self.head = nn.Linear(width, 2)
        self.shared = self.layers[0]  # the same module under a second name: one block, not two

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _export(layers: int) -> tuple[Stack, trama.Model]:
    torch.manual_seed(0)
    module = Stack(layers).eval()
    example = (torch.randn(3, 8),)
    return module, trama.export_model(module, inputs=["x"], outputs=["y"], example_inputs=example)


def test_repeated_layers_are_one_block_and_import_as_separate_modules() -> None:
    module, document = _export(4)
    text = trama.dumps(document)
    doc = json.loads(text)
    assert "Layer" in doc["blocks"]
    assert text.count('"use":"Layer"') == 4
    back = trama.import_model(trama.loads(text), registry=trama.registry("torch"))
    assert back.state_dict().keys() == module.state_dict().keys()
    for key, value in module.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    fc_weights = [back.get_submodule(f"layers.{k}.fc").weight for k in range(4)]
    assert len({id(weight) for weight in fc_weights}) == 4  # each layer its own parameter
    x = torch.randn(5, 8)
    with torch.no_grad():
        assert torch.equal(back(x), module(x))


def test_every_runtime_runs_a_document_with_blocks() -> None:
    module, document = _export(3)
    again = trama.loads(trama.dumps(document))
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    for name in ("numpy", "torch:cpu", "jax:cpu"):
        runnable = trama.runtime_for_name(name).prepare(again)
        (y,) = runnable.run({"x": x})
        np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-5, err_msg=name)


def test_more_layers_cost_one_line_each() -> None:
    lines = {n: trama.dumps(_export(n)[1]).count("\n") for n in (2, 6)}
    assert lines[6] - lines[2] == 4
