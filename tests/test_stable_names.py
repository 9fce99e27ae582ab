"""Node names from the source, counted within their scope (issue 24's naming case).

An op node's id was its module path plus torch.export's program-wide node name (``pow_5``): going
from 2 to 3 layers renamed the final norm's nodes (``pow_5`` -> ``pow_7``), and the layers of
one stack had different local names. Each scope now counts its own, so a layer's nodes are named
alike in every layer, and adding a layer renames nothing that was there. The ports of a stack
(a ``ModuleList``) are named after its layers' ``forward`` parameters, not after the program's
op names (``to_19``), which moved with every layer added.

What a reviewer sees is checked on ``trama ssa``'s text: a change of ``intermediate_size``
changes only the lines that carry that size, and one more layer only the line of that layer
(its body is the definition the other layers share) and the line that says where the stack's
result comes from (besides the header's count of tensors).
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import Any

import pytest
from realworld.models import ensure_torchvision_importable


@cache
def _llama(layers: int, intermediate: int = 128) -> Any:
    ensure_torchvision_importable()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import trama

    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (2, 8))
    examples = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return trama.export_model(
        model, inputs=["input_ids", "attention_mask"], outputs=["logits"], example_inputs=examples
    )


def _llama_ids(layers: int) -> tuple[str, ...]:
    return tuple(node.id for node in _llama(layers).nodes)


def _changed_lines(before: Any, after: Any) -> list[str]:
    """The SSA lines only one of two documents has (blank lines and the header's count of
    tensors aside)."""
    from trama.tools import to_ssa

    old, new = (to_ssa(document).splitlines() for document in (before, after))
    changed = [line for line in difflib.ndiff(old, new) if line[:2] in ("- ", "+ ") and line[2:].strip()]
    return [line for line in changed if not line[2:].startswith("# tensors: ")]


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


def test_a_wider_feed_forward_changes_only_the_lines_that_carry_its_size() -> None:
    changed = _changed_lines(_llama(2, 128), _llama(2, 256))
    assert changed
    for line in changed:
        assert re.search(r"\b(128|256)\b", line), line
        assert re.match(r"[-+] +%(gate_proj|up_proj|down_proj) = Linear\(", line), line


def test_one_more_layer_changes_only_that_layer_and_where_the_stack_result_comes_from() -> None:
    changed = _changed_lines(_llama(2), _llama(3))
    assert changed == [
        "+       %2 = LlamaDecoderLayer#1(hidden_states=%1, attention_mask, position_embeddings_0,",
        "+           position_embeddings_1)",
        "-       return %1",
        "+       return %2",
    ], changed
