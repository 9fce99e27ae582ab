"""The main job end to end: export a model, save it, print its SSA, load it back and validate it.

Run with ``make demo`` (which sets up .venv first). Uses the toy numpy layers in
``toylayers.py``, the stand-in for a real modeling library.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import toylayers

import trama
from trama.ssa import to_ssa
from trama.summary import render_summary, summarize


def main() -> int:
    registry = toylayers.registry()
    module = toylayers.mlp([4, 16, 16, 3], seed=7)

    model = trama.export_model(module, inputs=["x"], outputs=["y"], registry=registry)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "my_model.trama.json"
        trama.dump(model, path)
        print(f"wrote {path.name}: {path.stat().st_size} bytes\n")

        loaded = trama.load(path)
        print(to_ssa(loaded))
        trama.validate(loaded, registry=registry)
        print("validated against the registry: ok\n")
        print(render_summary(summarize(loaded)))

        instance = trama.import_model(loaded, registry=registry)
        x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
        same = np.array_equal(instance(x), module(x))
        print(f"\nimported model reproduces the original outputs exactly: {same}")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
