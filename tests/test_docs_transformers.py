"""docs/torch.md's transformers example runs as written (in a scratch folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from realworld.models import ensure_torchvision_importable

DOC = Path(__file__).resolve().parents[1] / "docs" / "torch.md"


def _example() -> str:
    text = DOC.read_text()
    section = text[text.index("## transformers models") :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, "docs/torch.md's transformers section has no python block"
    return match.group(1)


def test_the_transformers_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # it writes llama.trama.json and its weights there
    ensure_torchvision_importable()  # this machine's torchvision needs it before transformers
    import torch

    torch.manual_seed(0)
    namespace: dict[str, object] = {}
    exec(compile(_example(), str(DOC), "exec"), namespace)  # the asserts in it are the checks
    assert (tmp_path / "llama.trama.json").exists()
    assert list(tmp_path.glob("llama.*.safetensors"))
    document = namespace["document"]
    classes = {(node.metadata or {}).get("class") for node in document.nodes}  # type: ignore[attr-defined]
    assert "transformers.models.llama.modeling_llama.LlamaDecoderLayer" in classes


def test_a_model_with_its_cache_on_gets_the_advice() -> None:
    ensure_torchvision_importable()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import trama

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=16,
        use_cache=True,
    )
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 4))
    with pytest.raises(trama.ExportError, match="use_cache = False"):
        trama.export_model(model, inputs=["input_ids"], outputs=["logits"], example_inputs={"input_ids": ids})
