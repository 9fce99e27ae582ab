"""The same model, weights and example inputs give the same bytes in any process (issue 24's
first case, found on timm's ``convnext_atto``: its ``Identity`` calls compute nothing, so they
share a position in the program, and the planner broke such ties by the objects' addresses,
which differ from one process to the next)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

EXPORT = """
import sys
sys.path.insert(0, {tests!r})
from realworld.models import ensure_torchvision_importable
ensure_torchvision_importable()
import timm, torch, trama
torch.manual_seed(0)
model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).eval()
document = trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(torch.randn(1, 3, 32, 32),))
trama.dump(document, sys.argv[1], weights=sys.argv[2])
"""


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_two_processes_with_other_hash_seeds_write_the_same_bytes(weights: str, tmp_path: Path) -> None:
    script = EXPORT.format(tests=str(REPO / "tests"))
    folders = []
    for seed in ("1", "2"):
        folder = tmp_path / f"run{seed}"
        folder.mkdir()
        result = subprocess.run(
            [sys.executable, "-c", script, str(folder / "model.trama.json"), weights],
            env={**_environment(), "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        folders.append(folder)
    first, second = ({path.name: path.read_bytes() for path in folder.iterdir()} for folder in folders)
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], f"{name} differs between the two processes"


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "PYTHONHASHSEED"}
