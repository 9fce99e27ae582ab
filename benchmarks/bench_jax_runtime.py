"""The jax:cpu runtime against a hand-written ``jax.jit`` function: a 12-layer MLP.

The model is 12 ``Linear(512, 512)`` layers, each but the last followed by a ReLU, on a batch of
64 float32 rows. The reference is the function a JAX user would write, ``x @ w.T + b`` then
``relu``, twelve times, under ``jax.jit``, with the weights as its arguments. trama exports the
same weights (an ``nn.Sequential`` built from them), prepares the document on ``jax:cpu`` and calls
``runnable.run([x])``. Both results are checked against each other before timing, and every timed
call waits for its result (``block_until_ready``): JAX dispatches asynchronously. What the runtime
adds is its work around one call of its compiled program (checking and binding the inputs,
finding the compiled program for their shapes) and whatever its program does beyond the
hand-written one. Target: ≤ 1.1× the hand-written function. The same comparison on a tiny MLP
(width 8, batch 1), where the arithmetic is negligible, shows that overhead in microseconds.

Compile time is reported too: the seconds ``jax.jit(...).lower(...).compile()`` takes for the
hand-written function, and those the runtime reports (``runnable.compile_seconds``), plus the
whole ``prepare`` (validation, building the modules, placing the weights).

Each case runs in a fresh process (``--repeat`` processes per case, interleaved); a process
reports its best mean over ``--inner`` batches of ``--number`` calls, and the table shows the
best process. Nothing is asserted.

    .venv/bin/python benchmarks/bench_jax_runtime.py [--layers 12] [--width 512] [--batch 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import (
    RESULT_MARK,
    describe_machine,
    machine_info,
    per_call_rows,
    run_worker,
    table,
    verdict,
    write_json,
)

TARGET = 1.1
CASES = {
    "jit": "hand-written jax.jit (reference)",
    "trama": "trama jax:cpu run(), JAX array input",
    "trama-numpy": "trama jax:cpu run(), numpy input",
}


def worker(case: str, layers: int, width: int, batch: int, inner: int, number: int) -> None:
    """One case in this fresh process: build the model, time its calls, print one result line."""
    import jax
    import numpy as np
    import torch
    from bench_runtime import best_time  # here, not at the top: it imports trama and numpy

    import trama

    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(width)
    weights = [
        (
            rng.uniform(-scale, scale, (width, width)).astype(np.float32),
            rng.uniform(-scale, scale, width).astype(np.float32),
        )
        for _ in range(layers)
    ]
    x_numpy = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
    x = jax.device_put(x_numpy)
    params = [(jax.device_put(w), jax.device_put(b)) for w, b in weights]

    def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
        for k, (w, b) in enumerate(params):
            x = x @ w.T + b
            if k < len(params) - 1:
                x = jax.nn.relu(x)
        return x

    def reference() -> Any:
        """The hand-written function, compiled; the seconds that took."""
        started = time.perf_counter()
        compiled = jax.jit(mlp).lower(params, x).compile()
        return compiled, time.perf_counter() - started

    # Each case compiles its own program first: the first compilation in a process also pays
    # for setting XLA up, and both cases must pay it alike.
    call: Callable[[], Any]
    if case == "jit":
        compiled, seconds = reference()
        extra: dict[str, float] = {"compile_seconds": seconds}
        call = lambda: jax.block_until_ready(compiled(params, x))  # noqa: E731
    else:
        parts: list[torch.nn.Module] = []
        for k, (w, b) in enumerate(weights):
            linear = torch.nn.Linear(width, width)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(w))
                linear.bias.copy_(torch.from_numpy(b))
            parts.append(linear)
            if k < layers - 1:
                parts.append(torch.nn.ReLU())
        model = trama.export_model(torch.nn.Sequential(*parts).eval(), inputs=["x"], outputs=["y"])
        started = time.perf_counter()
        runnable = trama.runtime_for_name("jax:cpu").prepare(model)
        prepare = time.perf_counter() - started
        given = x_numpy if case == "trama-numpy" else x
        started = time.perf_counter()
        (ours,) = runnable.run([given])
        first = time.perf_counter() - started
        extra = {"compile_seconds": runnable.compile_seconds, "prepare_seconds": prepare, "first_run_seconds": first}
        compiled, _ = reference()
        np.testing.assert_allclose(np.asarray(ours), np.asarray(compiled(params, x)), rtol=1e-5, atol=1e-5)
        call = lambda: jax.block_until_ready(runnable.run([given]))  # noqa: E731
    for _ in range(3):  # warm-up
        call()
    seconds = best_time(call, inner, number)
    sys.stdout.write(RESULT_MARK + json.dumps({"seconds": seconds, **extra}) + "\n")


def measure(args: argparse.Namespace, width: int, batch: int, number: int) -> dict[str, dict[str, float]]:
    """Best per-call seconds (and the compile figures of that process) of every case, each
    process fresh, cases interleaved."""
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for case in CASES:
            argv = [sys.executable, __file__, "--worker", case]
            argv += [str(v) for v in (args.layers, width, batch, args.inner, number)]
            result = run_worker(argv)
            if result["seconds"] < best.get(case, {"seconds": float("inf")})["seconds"]:
                best[case] = result
    return best


def rows(best: dict[str, dict[str, float]], unit: float, label: str) -> list[list[str]]:
    seconds = {case: result["seconds"] for case, result in best.items()}
    return per_call_rows(seconds, "jit", CASES, unit, label)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per case")
    parser.add_argument("--inner", type=int, default=20, help="timed batches per process")
    parser.add_argument("--number", type=int, default=10, help="calls per timed batch (x20 on the tiny MLP)")
    parser.add_argument("--out", default="jax-runtime.json")
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        case, *numbers = args.worker
        worker(case, *(int(n) for n in numbers))
        return 0

    main_best = measure(args, args.width, args.batch, args.number)
    tiny_best = measure(args, 8, 1, args.number * 20)
    headers = ["", "per call", "/ jax.jit", "difference (us)"]
    print(
        f"{args.layers}-layer MLP (Linear+ReLU), width {args.width}, batch {args.batch}, float32, jax:cpu; "
        f"best of {args.repeat} processes x {args.inner} x {args.number} calls\n"
    )
    print(table(headers, rows(main_best, 1e-3, "ms")))
    value = main_best["trama"]["seconds"] / main_best["jit"]["seconds"]
    print(f"\ntarget: run() <= {TARGET}x the hand-written jax.jit: {value:.3f}x, {verdict(value, TARGET)}")
    trama_case = main_best["trama"]
    print("\ncompile time (the best process of each case)\n")
    print(
        table(
            ["", "seconds"],
            [
                ["jax.jit(...).lower().compile(), hand-written", f"{main_best['jit']['compile_seconds']:.3f}"],
                ["trama: runnable.compile_seconds", f"{trama_case['compile_seconds']:.3f}"],
                ["trama: prepare() (validate, build, place)", f"{trama_case['prepare_seconds']:.3f}"],
                ["trama: first run() (trace, compile, run)", f"{trama_case['first_run_seconds']:.3f}"],
            ],
        )
    )
    print("\nper-call overhead: the same MLP at width 8, batch 1 (arithmetic negligible)\n")
    print(table(headers, rows(tiny_best, 1e-6, "us")))
    info = machine_info()
    print()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "config": {key: value for key, value in vars(args).items() if key != "worker"},
            "summary": {
                "cases": main_best,
                "ratio": value,
                "tiny_cases": tiny_best,
                "overhead_us": 1e6 * (tiny_best["trama"]["seconds"] - tiny_best["jit"]["seconds"]),
            },
            "targets": {"ratio": TARGET},
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
