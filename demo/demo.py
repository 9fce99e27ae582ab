"""The main job end to end: export an ordinary torch model, review it, and run the same file in
numpy, torch and JAX.

Run with ``make demo`` (which sets up .venv first). The model is a small convolutional network
with batch normalisation and a residual block, written as any torch user would write it; nothing
in it knows about trama. The demo

1. exports it with ``trama.export_model`` and an example input (no registry passed: trama-torch
   is discovered and captures the model with ``torch.export``, the batch size left symbolic),
2. saves it as ``.trama.json`` and prints its size, its SSA text and a summary,
3. loads it back, validates it against every installed catalog and imports it as torch modules,
4. runs the file on every installed CPU runtime (numpy, torch:cpu, jax:cpu, onnxruntime) and
   compares each result with the original torch module,
5. ships it: lowers the file to ONNX (``trama lower``: the tree as ONNX functions) and to a
   ``torch.export`` program, and runs both at a batch size other than the example's.

It exits non-zero if any result differs from the original by more than 1e-5.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

import trama
from trama.tools import render_summary, summarize, to_ssa

TOLERANCE = 1e-5


class Residual(nn.Module):
    """``x + body(x)``: a custom block, exported by tracing its forward."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


class SmallNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.block = Residual(16)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block(self.stem(x))
        return self.head(self.pool(x).flatten(1))


def trained_looking(model: nn.Module) -> nn.Module:
    """Give the batch-norm layers non-trivial running statistics, as training would."""
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(8, 3, 16, 16))
    return model.eval()


def main() -> int:
    torch.manual_seed(0)
    original = trained_looking(SmallNet())
    x = torch.randn(2, 3, 16, 16)
    with torch.inference_mode():
        expected = original(x).numpy()

    model = trama.export_model(
        original, inputs=["x"], outputs=["y"], example_inputs=(x,), dynamic_shapes={"x": {0: "batch"}}
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "smallnet.trama.json"
        trama.dump(model, path)
        print(f"wrote {path.name}: {path.stat().st_size:,} bytes\n")

        loaded = trama.load(path)
        print(to_ssa(loaded))
        trama.validate(loaded, registry=trama.registry())
        print("validated against every installed catalog: ok\n")
        print(render_summary(summarize(loaded)))

        imported = trama.import_model(loaded)  # the file names torch as its framework
        print(f"\nimported as torch modules: {type(imported).__name__} with {len(imported.state_dict())} tensors")

        worst = 0.0
        batches = [x, torch.randn(1, 3, 16, 16), torch.randn(5, 3, 16, 16)]  # exported at 2: any batch runs
        with torch.inference_mode():
            wanted = [expected] + [original(batch).numpy() for batch in batches[1:]]
        print("\nthe same file on every CPU runtime, at batch 2, 1 and 5, against the original torch module:")
        for info in trama.runtimes():
            if info.device != "cpu" or not info.available:
                continue
            runnable = trama.runtime_for_name(info.name).prepare(loaded)
            error = 0.0
            for batch, want in zip(batches, wanted, strict=True):
                (y,) = runnable.run([batch.numpy()])
                result = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
                error = max(error, float(np.max(np.abs(result - want))))
            worst = max(worst, error)
            print(f"  {info.name:<12} max |difference| = {error:.2e}")

        worst = max(worst, ship(path, batches[2].numpy(), wanted[2]))
    ok = worst <= TOLERANCE
    print(f"\nevery runtime agrees with torch within {TOLERANCE:g}: {ok}")
    return 0 if ok else 1


def ship(path: Path, x: np.ndarray, want: np.ndarray) -> float:
    """``trama lower`` to ONNX and to a torch.export program, each run at ``x``'s batch; the
    largest difference from ``want``."""
    import onnx
    import onnxruntime

    from trama.tools import main as trama_cli

    print("\nshipped with trama lower, and run at batch 5:")
    error = 0.0
    for suffix in (".onnx", ".pt2"):
        target = path.parent / (path.name.removesuffix(".trama.json") + suffix)
        if trama_cli(["lower", str(path), "-o", str(target)]) != 0:
            return float("inf")
        if suffix == ".onnx":
            proto = onnx.load(str(target))
            print(f"  functions: {', '.join(function.name for function in proto.functions)}")
            session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
            (y,) = session.run(None, {"x": x})
        else:
            with torch.inference_mode():
                y = torch.export.load(target).module()(torch.from_numpy(x)).numpy()
        difference = float(np.max(np.abs(y - want)))
        print(f"  {target.name:<12} max |difference| = {difference:.2e}")
        error = max(error, difference)
    return error


if __name__ == "__main__":
    sys.exit(main())
