"""``F.scaled_dot_product_attention`` captured by ``trama.export_model`` and back, and on every runtime.

A small module calls the function the way models do (timm's ``dropout_p=0.``, a causal decoder,
grouped heads, a broadcast bool or float mask, an explicit scale); the document must hold one
``scaled_dot_product_attention`` node with those settings, import back into torch with
bit-identical outputs (the module calls the same function with the same arguments), and run on
numpy, torch and JAX within 1e-5. A transformers BERT with ``attn_implementation="sdpa"`` shows
the masks real models pass (bool, ``[N, 1, L, S]``). A positive ``dropout_p`` at export (the
exporter runs in eval mode, so a model that ignores the mode) is refused, naming the aten op.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama
from trama import ExportError

OP = "scaled_dot_product_attention"


class Attention(nn.Module):
    """``F.scaled_dot_product_attention`` with fixed keyword arguments; ``p`` is used in training
    only, as models write it."""

    def __init__(self, p: float = 0.0, **kwargs: Any) -> None:
        super().__init__()
        self.p = p
        self.kwargs = kwargs

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> Any:
        p = self.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, **self.kwargs)


def _settings(doc: trama.Model) -> tuple[trama.Node, dict[str, Any]]:
    """The document's one attention node and its slot values."""
    nodes = [node for node in doc.nodes if node.op == OP]
    assert len(nodes) == 1, [node.op for node in doc.nodes]
    node = nodes[0]
    return node, {slot: doc.parameters[key].value for slot, key in node.parameters.items()}


def _round_trip(module: nn.Module, example: tuple[torch.Tensor, ...]) -> tuple[trama.Node, dict[str, Any]]:
    """Export, check the round trip and the three runtimes, and return the node and its slots."""
    names = ["q", "k", "v", "mask"][: len(example)]
    module.eval()
    doc = trama.export_model(module, inputs=names, outputs=["y"], example_inputs=example)
    expected = module(*example)
    back = trama.import_model(doc, registry=trama.registry("torch"))
    assert torch.equal(back(*example), expected)
    arrays = [tensor.numpy() for tensor in example]
    for name in ("numpy", "torch:cpu", "jax:cpu"):
        (y,) = trama.runtime_for_name(name).prepare(doc).run(arrays)
        actual = y.detach().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        np.testing.assert_allclose(actual, expected.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)
    return _settings(doc)


def data(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_plain_call_as_timm_writes_it() -> None:
    node, slots = _round_trip(Attention(), (data(2, 3, 4, 8), data(2, 3, 4, 8, seed=1), data(2, 3, 4, 8, seed=2)))
    assert set(node.inputs) == {"query", "key", "value"}
    assert slots == {"dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def test_bool_mask_broadcast_with_a_scale_and_a_masked_row() -> None:
    mask = torch.from_numpy(np.random.default_rng(3).random((2, 1, 4, 6)) < 0.6)
    mask[0, 0, 1] = False  # a query that sees no key: a row of zeros everywhere
    example = (data(2, 3, 4, 5), data(2, 3, 6, 5, seed=1), data(2, 3, 6, 7, seed=2), mask)
    node, slots = _round_trip(Attention(scale=0.4), example)
    assert set(node.inputs) == {"query", "key", "value", "attn_mask"}
    assert slots["scale"] == pytest.approx(0.4)
    assert not Attention(scale=0.4)(*example)[0, :, 1].any()


def test_float_mask() -> None:
    mask = data(4, 6, seed=3)
    mask[2, :3] = float("-inf")
    _round_trip(Attention(), (data(3, 4, 5), data(3, 6, 5, seed=1), data(3, 6, 2, seed=2), mask))


def test_causal_with_fewer_keys_than_queries() -> None:
    _, slots = _round_trip(Attention(is_causal=True), (data(2, 2, 5, 4), data(2, 2, 3, 4, seed=1), data(2, 2, 3, 4)))
    assert slots["is_causal"] is True


def test_grouped_query_heads() -> None:
    example = (data(2, 6, 4, 8), data(2, 2, 4, 8, seed=1), data(2, 2, 4, 8, seed=2))
    _, slots = _round_trip(Attention(enable_gqa=True), example)
    assert slots["enable_gqa"] is True


def test_dropout_in_eval_mode_too_is_refused() -> None:
    """The exporter runs the model in eval mode, where a well-written model passes 0; one that
    passes its probability whatever the mode gets random outputs from torch, and is refused."""

    class AlwaysDropout(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)

    example = (data(1, 2, 3, 4), data(1, 2, 3, 4), data(1, 2, 3, 4))
    with pytest.raises(ExportError, match=r"aten\.scaled_dot_product_attention\.default with dropout_p=0\.1"):
        trama.export_model(AlwaysDropout(), inputs=["q", "k", "v"], outputs=["y"], example_inputs=example)


def test_a_module_in_training_mode_exports_its_eval_call() -> None:
    """``p if self.training else 0``: the exporter switches to eval, so the document holds 0."""
    module = Attention(p=0.5).train()
    example = (data(1, 2, 3, 4), data(1, 2, 3, 4, seed=1), data(1, 2, 3, 4, seed=2))
    doc = trama.export_model(module, inputs=["q", "k", "v"], outputs=["y"], example_inputs=example)
    assert _settings(doc)[1]["dropout_p"] == 0.0
    assert module.training  # restored


def _transformers() -> Any:
    """transformers, after the zoo's fix that lets torchvision import next to the CPU torch
    (tests/realworld/models.py, loaded by path: the zoo is not a package of this repository)."""
    path = Path(__file__).resolve().parents[3] / "tests" / "realworld" / "models.py"
    spec = importlib.util.spec_from_file_location("_trama_zoo_models", path)
    assert spec is not None
    assert spec.loader is not None
    zoo = sys.modules.get(spec.name)
    if zoo is None:
        zoo = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = zoo  # before running it: its dataclasses look their module up
        spec.loader.exec_module(zoo)
    zoo.ensure_torchvision_importable()
    return pytest.importorskip("transformers")


def test_transformers_bert_with_sdpa_attention() -> None:
    hf = _transformers()
    torch.manual_seed(0)
    config = hf.BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        attn_implementation="sdpa",
    )
    model = hf.BertModel(config, add_pooling_layer=False).eval()
    ids = torch.randint(0, 64, (2, 6))
    attention = torch.ones(2, 6, dtype=torch.long)
    attention[1, 4:] = 0
    kwargs = {"input_ids": ids, "attention_mask": attention}
    doc = trama.export_model(
        model, inputs=["input_ids", "attention_mask"], outputs=["last_hidden_state"], example_inputs=kwargs
    )
    nodes = [node for node in doc.nodes if node.op == OP]  # ids are dotted paths: the list is flat
    assert len(nodes) == 1, "one attention node, in the encoder layer's self-attention"
    mask = nodes[0].inputs["attn_mask"]
    assert mask is not None
    expected = model(**kwargs).last_hidden_state
    back = trama.import_model(doc, registry=trama.registry("torch"))
    assert torch.equal(back(ids, attention), expected)
    (y,) = trama.runtime_for_name("numpy").prepare(doc).run([ids.numpy(), attention.numpy()])
    np.testing.assert_allclose(np.asarray(y), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
