"""The README's quick start runs as written: torch export, file, torch import, JAX import."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import trama

README = Path(__file__).resolve().parents[3] / "README.md"


class MyNet(nn.Module):
    """Stands for the reader's own model."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x) * 2.0)  # type: ignore[no-any-return]


def _quick_start() -> str:
    text = README.read_text()
    section = text[text.index("## Quick start") :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, "the README's quick start has no python block"
    return match.group(1)


def test_the_readme_quick_start_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # it writes my_model.trama.json to the working directory
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    namespace: dict[str, object] = {"MyNet": MyNet, "x": x}
    exec(compile(_quick_start(), str(README), "exec"), namespace)

    assert (tmp_path / "my_model.trama.json").is_file()
    model = namespace["model"]
    assert isinstance(model, MyNet)
    back = namespace["back"]
    assert isinstance(back, nn.Module)
    with torch.inference_mode():
        expected = model(torch.from_numpy(x)).numpy()
        assert np.array_equal(back(torch.from_numpy(x)).numpy(), expected)
    np.testing.assert_allclose(np.asarray(namespace["y"]), expected, rtol=1e-5, atol=1e-5)
    assert isinstance(namespace["new_doc"], trama.Model)
