"""The torch:cpu runtime against calling the torch module it came from: a 24-layer MLP.

The model is an ``nn.Sequential`` of 24 ``Linear(512, 512)``, each but the last followed by a
``ReLU``, run on a batch of 64 float32 rows. The reference calls that module; trama exports it,
prepares the document on ``torch:cpu`` and calls ``runnable.run([x])``. Both loops run under
``torch.inference_mode()`` with the same number of threads, and the runtime's output is checked
against the module's before timing. What the runtime adds is its work around one call of the
imported module: checking and converting the inputs, entering inference mode, collecting the
outputs, and whatever the imported module's own ``forward`` does beyond the original's. Target:
≤ 1.05× the module's time. The same comparison on a tiny MLP (width 8, batch 1), where the
arithmetic is negligible, shows that overhead in microseconds.

Each case runs in a fresh process (``--repeat`` processes per case, interleaved); a process
reports its best mean over ``--inner`` batches of ``--number`` calls, and the table shows the
best process. On a machine whose load comes and goes (other jobs on few cores), processes that
run at different moments see different machines, and the big MLP's ratio then swings by tens of
percent either way. So the ratio is measured a second way too, *paired*: each fresh process
holds both the module and the runnable and alternates batches of the two, so that both see the
same moments; the best batch of each, over all processes, gives the paired ratio. The target
is judged on it. Nothing is asserted.

    .venv/bin/python benchmarks/bench_torch_runtime.py [--layers 24] [--width 512] [--batch 64] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import sys
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

TARGET = 1.05
CASES = {
    "module": "torch module (reference)",
    "trama": "trama torch:cpu run(), tensor input",
    "trama-numpy": "trama torch:cpu run(), numpy input",
}


def build(layers: int, width: int, batch: int) -> tuple[Any, Any, Any]:
    """The MLP (eval mode), its runnable on torch:cpu, and the input; the runnable's output is
    checked against the module's."""
    import torch

    import trama

    torch.manual_seed(0)
    parts: list[torch.nn.Module] = []
    for k in range(layers):
        parts.append(torch.nn.Linear(width, width))
        if k < layers - 1:
            parts.append(torch.nn.ReLU())
    module = torch.nn.Sequential(*parts).eval()
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
    model = trama.export_model(module, inputs=["x"], outputs=["y"])
    runnable = trama.runtime_for_name("torch:cpu").prepare(model)
    with torch.inference_mode():
        torch.testing.assert_close(runnable.run([x])[0], module(x))
    return module, runnable, x


def worker(case: str, layers: int, width: int, batch: int, threads: int, inner: int, number: int) -> None:
    """One case in this fresh process: time its calls, print one result line (``paired``: both
    the module and ``run()``, alternating batches)."""
    import torch
    from bench_runtime import best_time  # here, not at the top: it imports trama and numpy

    torch.set_num_threads(threads)
    module, runnable, x = build(layers, width, batch)
    given = x.numpy() if case == "trama-numpy" else x
    calls: dict[str, Callable[[], Any]] = {
        "module": lambda: module(x),
        "trama": lambda: runnable.run([given]),
        "trama-numpy": lambda: runnable.run([given]),
    }
    timed = ["module", "trama"] if case == "paired" else [case]
    seconds = dict.fromkeys(timed, float("inf"))
    with torch.inference_mode():
        for name in timed:
            for _ in range(3):  # warm-up: first calls allocate and pick kernels
                calls[name]()
        for _ in range(inner):
            for name in timed:
                seconds[name] = min(seconds[name], best_time(calls[name], 1, number))
    sys.stdout.write(RESULT_MARK + json.dumps({"seconds": seconds, "threads": torch.get_num_threads()}) + "\n")


def measure(args: argparse.Namespace, width: int, batch: int, number: int) -> tuple[dict[str, float], dict[str, float]]:
    """Best per-call seconds of every case, each in fresh processes, cases interleaved; and the
    same from the paired processes."""
    best: dict[str, float] = {}
    paired: dict[str, float] = {}
    for _ in range(args.repeat):
        for case in (*CASES, "paired"):
            argv = [sys.executable, __file__, "--worker", case]
            argv += [str(v) for v in (args.layers, width, batch, args.threads, args.inner, number)]
            into = paired if case == "paired" else best
            for name, seconds in run_worker(argv)["seconds"].items():
                into[name] = min(into.get(name, float("inf")), seconds)
    return best, paired


def rows(best: dict[str, float], unit: float, label: str, suffix: str = "") -> list[list[str]]:
    return per_call_rows(best, "module", CASES, unit, label, suffix)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's default)")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per case")
    parser.add_argument("--inner", type=int, default=20, help="timed batches per process")
    parser.add_argument("--number", type=int, default=5, help="calls per timed batch (x25 on the tiny MLP)")
    parser.add_argument("--out", default="torch-runtime.json")
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        case, *numbers = args.worker
        worker(case, *(int(n) for n in numbers))
        return 0
    if args.threads <= 0:
        import os

        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    main_best, main_paired = measure(args, args.width, args.batch, args.number)
    tiny_best, tiny_paired = measure(args, 8, 1, args.number * 25)
    headers = ["", "per call", "/ module", "difference (us)"]
    print(
        f"{args.layers}-layer MLP (Linear+ReLU), width {args.width}, batch {args.batch}, float32, torch:cpu, "
        f"{args.threads} threads; best of {args.repeat} processes x {args.inner} x {args.number} calls\n"
    )
    print(table(headers, rows(main_best, 1e-3, "ms") + rows(main_paired, 1e-3, "ms", " (paired)")))
    value = main_paired["trama"] / main_paired["module"]
    print(f"\ntarget: run() <= {TARGET}x the module (paired): {value:.3f}x, {verdict(value, TARGET)}")
    print("\nper-call overhead: the same MLP at width 8, batch 1 (arithmetic negligible)\n")
    print(table(headers, rows(tiny_best, 1e-6, "us") + rows(tiny_paired, 1e-6, "us", " (paired)")))
    info = machine_info()
    print()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "config": {key: value for key, value in vars(args).items() if key != "worker"},
            "summary": {
                "seconds": main_best,
                "paired_seconds": main_paired,
                "ratio": value,
                "tiny_seconds": tiny_best,
                "tiny_paired_seconds": tiny_paired,
                "overhead_us": 1e6 * (tiny_paired["trama"] - tiny_paired["module"]),
            },
            "targets": {"ratio": TARGET},
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
