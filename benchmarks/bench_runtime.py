"""The numpy runtime against hand-written numpy: a 12-layer MLP, width 512, batch 64.

Both compute the same thing with the same arrays: ``x @ W.T + b`` then ReLU, twelve times. The
runtime's extra cost is its graph walk (resolving nothing at run time: one loop over prepared
steps). Reported: the time per call of each, their ratio (target ≤ 1.1×), and the overhead per
call in microseconds, also measured directly on a model whose kernels do nothing, so that the
walk is isolated from the arithmetic. Nothing is asserted.

    .venv/bin/python benchmarks/bench_runtime.py [--layers 12] [--width 512] [--batch 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demo"))

import toylayers
from _common import describe_machine, machine_info, table, write_json

import trama

TARGET = 1.1


def best_time(function: Any, repeat: int, number: int) -> float:
    """Best mean seconds per call over ``repeat`` batches of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--out", default="runtime.json")
    args = parser.parse_args(argv)

    module = toylayers.mlp([args.width] * (args.layers + 1), seed=0)
    model = trama.export_model(module, inputs=["x"], outputs=["y"])
    runnable = trama.runtime_for_name("numpy").prepare(model)
    layers = [(np.asarray(layer.weight), np.asarray(layer.bias)) for layer in module.layers if hasattr(layer, "weight")]
    x = np.random.default_rng(1).standard_normal((args.batch, args.width)).astype(np.float32)

    def by_hand() -> np.ndarray:
        h = x
        for k, (weight, bias) in enumerate(layers):
            h = h @ weight.T + bias
            if k < len(layers) - 1:
                h = np.maximum(h, 0)
        return h

    (ours,) = runnable.run([x])
    np.testing.assert_allclose(ours, by_hand(), rtol=1e-5, atol=1e-5)
    hand = best_time(by_hand, args.repeat, args.number)
    runtime = best_time(lambda: runnable.run([x]), args.repeat, args.number)

    # The walk alone: the same graph with kernels that return their input.
    steps = runnable.plan.steps
    kernels = [step.kernel for step in steps]
    try:
        for step in steps:
            output = step.outputs[0][0]
            port = step.inputs[0][0]
            step.kernel = lambda inputs, port=port, output=output: {output: inputs[port]}
        walk = best_time(lambda: runnable.run([x]), args.repeat, args.number * 20)
    finally:
        for step, kernel in zip(steps, kernels, strict=True):
            step.kernel = kernel

    ratio = runtime / hand
    print(
        f"{args.layers}-layer MLP, width {args.width}, batch {args.batch}, float32; "
        f"best of {args.repeat}x{args.number}\n"
    )
    print(
        table(
            ["", "per call"],
            [
                ["hand-written numpy", f"{1e3 * hand:.3f} ms"],
                ["trama numpy runtime", f"{1e3 * runtime:.3f} ms"],
                [
                    "runtime / hand-written",
                    f"{ratio:.3f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'})",
                ],
                ["difference per call", f"{1e6 * (runtime - hand):.1f} us"],
                [
                    f"graph walk alone ({len(steps)} leaves)",
                    f"{1e6 * walk:.1f} us ({1e6 * walk / len(steps):.2f} us a leaf)",
                ],
            ],
        )
    )
    info = machine_info()
    print()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "config": vars(args),
            "summary": {"hand_s": hand, "runtime_s": runtime, "ratio": ratio, "walk_s": walk, "leaves": len(steps)},
            "targets": {"ratio": TARGET},
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
