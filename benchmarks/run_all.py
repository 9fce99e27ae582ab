"""Run every benchmark, one after the other, and print the figures against their targets.

    make bench                                  # = .venv/bin/python benchmarks/run_all.py
    .venv/bin/python benchmarks/run_all.py --quick   # small sizes, one run each: a smoke test

Each benchmark is also runnable alone (``bench_weights.py``, ``bench_graph.py``); each prints its
own tables and writes benchmarks/out/<name>.json. This script adds benchmarks/out/summary.json
(with --quick, every file is named <name>-quick.json, so a smoke test never replaces real figures).
Nothing here asserts on timings: targets are printed as met / MISSED.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH_DIR,
    OUT_DIR,
    describe_machine,
    machine_info,
    ratio,
    reference_missing_message,
    table,
    verdict,
    write_json,
)

SHM = "/dev/shm"
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    # name (its results are out/<name>.json, or out/<name>-quick.json with --quick):
    # (script, arguments, extra arguments with --quick)
    "weights": ("bench_weights.py", [], ["--side", "512", "--repeat", "1"]),
    # The same in a memory filesystem: no disk, so no page-cache write-back and a no-op fsync. On
    # machines whose disk writes are erratic this shows the CPU and memory cost steadily.
    "weights-tmpfs": ("bench_weights.py", ["--tmp", SHM, "--no-base64"], ["--side", "512", "--repeat", "1"]),
    "graph": ("bench_graph.py", [], ["--sizes", "10000", "20000", "--repeat", "1"]),
    "discovery": ("bench_discovery.py", [], ["--repeat", "1"]),
    "runtime": ("bench_runtime.py", [], ["--repeat", "1", "--number", "5"]),
    "torch-runtime": ("bench_torch_runtime.py", [], ["--repeat", "1", "--inner", "3", "--number", "2"]),
    "jax-runtime": ("bench_jax_runtime.py", [], ["--repeat", "1", "--inner", "3", "--number", "2"]),
    "structure": ("bench_structure.py", [], []),
}


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for name in ("weights", "weights-tmpfs"):
        weights = results.get(name)
        if not weights:
            continue
        s, t = weights["summary"], weights["targets"]
        for key, label in (
            ("inline/safetensors", "trama inline / safetensors, round trip"),
            ("external/safetensors", "trama external / safetensors, round trip"),
            ("inline memory", "inline load+materialise peak / weight bytes"),
        ):
            rows.append([f"{name}: {label}", ratio(s[key]), f"<= {t[key]}x", verdict(s[key], t[key])])
        for case, vs in s.get("vs 0.2.0", {}).items():
            rows.append([f"{name}: {case} round trip, speedup over 0.2.0", ratio(vs["round trip speedup"], 1), "", ""])
    graph = results.get("graph")
    if graph:
        s, t = graph["summary"], graph["targets"]
        for count, speedups in s["speedup over 0.2.0"].items():
            value = speedups["trama"]
            target = t["speedup over 0.2.0"]
            met = verdict(value, target, at_most=False)
            rows.append(
                [f"graph: {int(count):,} nodes, load speedup over 0.2.0", ratio(value, 1), f">= {target:g}x", met]
            )
        for key, scaling in s["scaling"].items():
            value = scaling.get("trama")
            rows.append(
                [f"graph: our load time {key}", ratio(value), f"<= {t['200k/100k']}x", verdict(value, t["200k/100k"])]
            )
        for count, value in s.get("dump vs 0.2.0", {}).items():
            target = t["dump vs 0.2.0"]
            label = f"graph: {int(count):,} nodes, our dump / 0.2.0's"
            rows.append([label, ratio(value), f"<= {target:g}x", verdict(value, target)])
    discovery = results.get("discovery")
    if discovery:
        value, target = discovery["summary"]["discover_ms"], discovery["targets"]["discover_ms"]
        rows.append(
            [
                f"discovery: trama.registry({discovery['framework']!r})",
                f"{value:.1f} ms",
                f"< {target:g} ms",
                "met" if value < target else "MISSED",
            ]
        )
    runtime = results.get("runtime")
    if runtime:
        value, target = runtime["summary"]["ratio"], runtime["targets"]["ratio"]
        rows.append(
            [
                "runtime: numpy run() / hand-written numpy, 12-layer MLP",
                ratio(value),
                f"<= {target}x",
                verdict(value, target),
            ]
        )
        rows.append(["runtime: graph walk per call", f"{1e6 * runtime['summary']['walk_s']:.1f} us", "", ""])
    for name, label in (
        ("torch-runtime", "torch:cpu run() / the original module, 24-layer MLP (paired)"),
        ("jax-runtime", "jax:cpu run() / hand-written jax.jit, 12-layer MLP"),
    ):
        result = results.get(name)
        if result:
            value, target = result["summary"]["ratio"], result["targets"]["ratio"]
            rows.append([f"{name}: {label}", ratio(value), f"<= {target}x", verdict(value, target)])
    structure = results.get("structure")
    if structure:
        ours, onnx = structure["summary"]["trama"], structure["summary"]["onnx"]
        rows.append(
            [
                "structure: 2-layer TransformerEncoder, trama JSON / ONNX (no weights)",
                f"{ours['bytes']:,} / {onnx['bytes']:,} B",
                "",
                f"{ours['nodes']} / {onnx['nodes']} nodes",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and one run each (a smoke test)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    results: dict[str, Any] = {}
    elapsed: dict[str, float] = {}
    failed: list[str] = []
    for name, (script, normal, quick) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        if SHM in normal and not Path(SHM).is_dir():
            print(f"\n(skipping {name}: no {SHM} here)")
            continue
        print(f"\n===== {name} ({script}) =====\n", flush=True)
        start = time.perf_counter()
        out_name = f"{name}-quick.json" if args.quick else f"{name}.json"
        argv = [*normal, *(quick if args.quick else []), "--out", out_name]
        proc = subprocess.run([sys.executable, str(BENCH_DIR / script), *argv], check=False)
        elapsed[name] = time.perf_counter() - start
        if proc.returncode != 0:
            failed.append(name)
            continue
        results[name] = json.loads((OUT_DIR / out_name).read_text())

    print("\n===== summary =====\n")
    rows = summary_rows(results)
    if rows:
        print(table(["", "measured", "target", ""], rows))
    if any(result.get("reference_skipped") for result in results.values()):
        print(f"\n{reference_missing_message()}")
    print()
    print(describe_machine(machine_info()))
    total = time.perf_counter() - started
    print(f"\nran in {total:.0f}s ({', '.join(f'{name} {t:.0f}s' for name, t in elapsed.items())})")
    if failed:
        print(f"FAILED to run: {', '.join(failed)}")
    out = write_json(
        "summary-quick.json" if args.quick else "summary.json",
        {
            "quick": args.quick,
            "elapsed_seconds": elapsed,
            "failed": failed,
            "rows": [dict(zip(["figure", "measured", "target", "verdict"], row, strict=True)) for row in rows],
        },
    )
    print(f"summary written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
