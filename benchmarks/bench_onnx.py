"""The ``"onnxruntime"`` runtime (trama-onnx) against onnxruntime on torch's own ONNX export, the numpy
runtime and torch:cpu, on a ResNet, a BERT and a Llama from the zoo.

Each model is the zoo's (``tests/realworld/models.py``: small configs, random seeded weights), at
its example inputs. In one fresh process per model, four ways to run it are prepared:

* ``trama onnxruntime``: ``trama.runtime_for_name("onnxruntime").prepare(doc)``, the document
  exported with ``trama.export_model`` and lowered by trama-onnx (composites as ONNX functions);
* ``torch.onnx + ORT``: ``torch.onnx.export(model, ..., dynamo=True)``'s file in an
  ``onnxruntime.InferenceSession`` with default options (the reference: what a user gets from torch);
* ``numpy`` and ``torch:cpu``: trama's other CPU runtimes on the same document.

They then run *paired*: rounds of ``--number`` calls of each, alternating, ``--rounds`` times; each
way's best round gives its time per call, so that all four see the same moments of a noisy
machine. On a machine of two cores, what ran just before a way weighs on it: the worker threads
of the way before (onnxruntime's thread pools, torch's OpenMP threads) spin on after its last
call, and the numpy runtime leaves the caches full of its own arrays. In a fixed order, the same
onnxruntime session measured up to 1.5x slower in one place than in another; so each round runs
the ways in a new (seeded) random order, each after a pause of :data:`SETTLE` seconds. The two
onnxruntime sessions are opened last, one right after the other, once torch has exported its file
and the other runtimes are prepared: a session opened before that (torch's export allocates much)
measured up to 1.3x slower than the same model's session opened after it. Even then the session
opened second ran 5-15% faster than the first, whichever it was; so each model runs in two
processes, one opening trama's session first and one torch's, and each way's time is its best in
either. Targets (issue 28):
trama's onnxruntime within 1.1× of ORT on torch's export, and at least 3× faster than the numpy
runtime. Nothing is asserted.

    .venv/bin/python benchmarks/bench_onnx.py [--models tv_resnet18 hf_bert hf_llama] [--rounds 7] [--number 20]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import RESULT_MARK, describe_machine, machine_info, run_worker, table, verdict, write_json

MODELS = ("tv_resnet18", "hf_bert", "hf_llama")
PARITY = 1.1  # trama's onnxruntime / ORT on torch.onnx's export, at most
OVER_NUMPY = 3.0  # numpy runtime / trama's onnxruntime, at least
SETTLE = 0.05  # seconds of pause before each round of calls, for the last way's threads to go idle


def worker(name: str, rounds: int, number: int, trama_first: bool) -> dict[str, object]:
    import io
    import random
    import tempfile
    import time
    import warnings
    from contextlib import redirect_stdout

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    warnings.filterwarnings("ignore")
    import numpy as np
    import onnxruntime
    import torch
    from realworld.captures import export
    from realworld.models import by_name

    import trama

    entry = by_name(name)
    model = entry.build()
    document = trama.loads(trama.dumps(export(entry, model)))
    args, kwargs = entry.args_kwargs()
    inputs = [kwargs[n] for n in entry.input_names] if kwargs else list(args)
    arrays = [value.numpy() for value in inputs]
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = expected[0] if isinstance(expected, (tuple, list)) else expected
    if not isinstance(expected, torch.Tensor):
        expected = next(iter(expected.values()))

    ways: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "torch.onnx"
        with redirect_stdout(io.StringIO()):
            program = torch.onnx.export(model, tuple(args), kwargs=kwargs, dynamo=True)
            program.save(str(path))
        # The two onnxruntime sessions are opened last, one right after the other, in the order
        # asked (see the docstring).
        runnables = {runtime: trama.runtime_for_name(runtime).prepare(document) for runtime in ("numpy", "torch:cpu")}
        if trama_first:
            runnables["onnxruntime"] = trama.runtime_for_name("onnxruntime").prepare(document)
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        if not trama_first:
            runnables["onnxruntime"] = trama.runtime_for_name("onnxruntime").prepare(document)
        for runtime in ("onnxruntime", "numpy", "torch:cpu"):
            ways[f"trama {runtime}"] = lambda r=runnables[runtime]: r.run(arrays)
    feeds = {item.name: array for item, array in zip(session.get_inputs(), arrays, strict=True)}
    ways["torch.onnx + ORT"] = lambda: session.run(None, feeds)

    errors = {}
    for label, call in ways.items():
        first = call()  # type: ignore[operator]
        value = first[0]
        got = value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        errors[label] = float(np.max(np.abs(got.astype(np.float64) - expected.double().numpy())))
    best = dict.fromkeys(ways, float("inf"))
    order = list(ways.items())
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(order)  # a new order each round: no way always comes after the same other way
        for label, call in order:
            time.sleep(SETTLE)
            started = time.perf_counter()
            for _ in range(number):
                call()  # type: ignore[operator]
            best[label] = min(best[label], (time.perf_counter() - started) / number)
    return {"model": name, "seconds": best, "max_abs_error": errors, "threads": torch.get_num_threads()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--trama-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(RESULT_MARK + json.dumps(worker(args.worker, args.rounds, args.number, args.trama_first)))
        return 0
    results = []
    for name in args.models:
        command = [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--rounds",
            str(args.rounds),
            "--number",
            str(args.number),
        ]
        # Both orders of opening the two onnxruntime sessions, one process each; each way's best.
        both = [run_worker(command + order, timeout=900) for order in (["--trama-first"], [])]
        result = dict(both[0])
        result["seconds"] = {label: min(run["seconds"][label] for run in both) for label in both[0]["seconds"]}
        results.append(result)
    rows = []
    for result in results:
        seconds = result["seconds"]
        ours, reference, numpy_time = seconds["trama onnxruntime"], seconds["torch.onnx + ORT"], seconds["trama numpy"]
        parity, speedup = ours / reference, numpy_time / ours
        rows.append(
            [
                result["model"],
                *(f"{seconds[label] * 1e3:.3f} ms" for label in seconds),
                f"{parity:.2f}x {verdict(parity, PARITY)}",
                f"{speedup:.1f}x {verdict(speedup, OVER_NUMPY, at_most=False)}",
            ]
        )
    headers = ["model", *results[0]["seconds"], "ours / torch.onnx+ORT", "numpy / ours"]
    print(table(headers, rows))
    print(f"\ntargets: trama onnxruntime <= {PARITY}x ORT on torch.onnx's file; >= {OVER_NUMPY}x the numpy runtime")
    info = machine_info()
    print("\n" + describe_machine(info))
    path = write_json(
        "onnx.json", {"machine": info, "results": results, "targets": {"parity": PARITY, "over_numpy": OVER_NUMPY}}
    )
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
