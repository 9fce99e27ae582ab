"""Node names from the source, counted within their scope (issue 24's naming case).

An op node's id was its module path plus torch.export's program-wide node name (``pow_5``): going
from 2 to 3 layers renamed the final norm's nodes (``pow_5`` -> ``pow_7``), and the layers of
one stack had different local names. Each scope now counts its own, so a layer's nodes are named
alike in every layer, and adding a layer renames nothing that was there.
"""

from __future__ import annotations

import re
from functools import cache

import pytest
from realworld.models import ensure_torchvision_importable


@cache
def _llama_ids(layers: int) -> tuple[str, ...]:
    ensure_torchvision_importable()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import trama

    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (2, 8))
    document = trama.export_model(model, inputs=["input_ids"], outputs=["logits"], example_inputs={"input_ids": ids})
    return tuple(node.id for node in document.nodes)


def _inside(ids: tuple[str, ...], layer: int) -> list[str]:
    """The ids inside one decoder layer, relative to it."""
    prefix = re.compile(rf"^root\.model\.layers\.{layer}\.")
    return sorted(prefix.sub("", node_id) for node_id in ids if prefix.match(node_id))


def test_adding_a_layer_renames_nothing_that_was_there() -> None:
    two, three = _llama_ids(2), _llama_ids(3)
    assert set(two) <= set(three)
    added = sorted(set(three) - set(two))
    assert added
    assert all(node_id.startswith("root.model.layers.2") for node_id in added), added[:5]


@pytest.mark.parametrize("layer", [1, 2])
def test_every_layer_names_its_nodes_alike(layer: int) -> None:
    three = _llama_ids(3)
    assert _inside(three, layer) == _inside(three, 0)
    assert "self_attn.view_1" in _inside(three, 0)  # the attention's second view, counted in its scope
