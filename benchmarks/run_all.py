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
    "validate": ("bench_validate.py", [], ["--sizes", "1.6", "--repeat", "1"]),
}


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per figure: what it is, our measurement, the reference measured in the same run,
    the target, and met / MISSED."""
    rows: list[list[str]] = []
    for name in ("weights", "weights-tmpfs"):
        weights = results.get(name)
        if not weights:
            continue
        s, t, r = weights["summary"], weights["targets"], weights["results"]
        st = r.get("safetensors", {}).get("round_trip")
        for key, case, label in (
            ("inline/safetensors", "trama-inline", "trama inline round trip / safetensors"),
            ("external/safetensors", "trama-external", "trama external round trip / safetensors"),
        ):
            if s.get(key) is None:
                continue
            ours = r[case]["round_trip"]
            rows.append(
                [
                    f"{name}: {label}",
                    f"{ratio(s[key])} ({_s(ours)})",
                    f"safetensors {_s(st)}",
                    f"<= {t[key]}x",
                    verdict(s[key], t[key]),
                ]
            )
        if s.get("inline memory") is not None:
            value, target = s["inline memory"], t["inline memory"]
            peak = value * weights["weight_bytes"] / 2**20
            reference = f"weights {weights['weight_bytes'] / 2**20:.0f} MB"
            rows.append(
                [
                    f"{name}: inline load+materialise peak / weight bytes",
                    f"{ratio(value)} ({peak:.0f} MB)",
                    reference,
                    f"<= {target}x",
                    verdict(value, target),
                ]
            )
        for case, vs in s.get("vs 0.2.0", {}).items():
            rows.append(
                [
                    f"{name}: {case} round trip, speedup over 0.2.0",
                    ratio(vs["round trip speedup"], 1),
                    f"0.2.0 {_s(r['trama-0.2.0']['round_trip'])}",
                    "",
                    "",
                ]
            )
    graph = results.get("graph")
    if graph:
        s, t = graph["summary"], graph["targets"]
        sizes = graph.get("sizes", {})
        for count, ratios in s.get("load vs json.loads", {}).items():
            times = sizes.get(str(count), {}).get("results", {}).get("trama", {}).get("times", {})
            value, target = ratios["json.loads"], t["load vs json.loads"]
            rows.append(
                [
                    f"graph: {int(count):,} nodes, our load / json.loads (same process)",
                    f"{ratio(value)} ({_s(times.get('load, same process'))})",
                    f"json.loads {_s(times.get('json.loads'))}",
                    f"<= {target:g}x",
                    verdict(value, target),
                ]
            )
            paused = ratios["json.loads, gc paused"]
            rows.append(
                [
                    "  (information: against json.loads with the collector paused)",
                    ratio(paused),
                    f"json.loads {_s(times.get('json.loads, gc paused'))}",
                    "",
                    "",
                ]
            )
        for count, speedups in s["speedup over 0.2.0"].items():
            res = sizes.get(str(count), {}).get("results", {})
            value = speedups["trama"]
            target = t["speedup over 0.2.0"]
            rows.append(
                [
                    f"graph: {int(count):,} nodes, load speedup over 0.2.0",
                    f"{ratio(value, 1)} ({_s(res.get('trama', {}).get('times', {}).get('load'))})",
                    f"0.2.0 {_s(res.get('trama 0.2.0', {}).get('times', {}).get('load'))}",
                    f">= {target:g}x",
                    verdict(value, target, at_most=False),
                ]
            )
        for key, scaling in s["scaling"].items():
            value = scaling.get("trama")
            ref = scaling.get("trama 0.2.0")
            rows.append(
                [
                    f"graph: our load time {key}",
                    ratio(value),
                    f"0.2.0 {ratio(ref)}" if ref else "",
                    f"<= {t['200k/100k']}x",
                    verdict(value, t["200k/100k"]),
                ]
            )
        for count, value in s.get("dump vs 0.2.0", {}).items():
            files = sizes.get(str(count), {}).get("files", {})
            target = t["dump vs 0.2.0"]
            rows.append(
                [
                    f"graph: {int(count):,} nodes, our dump / 0.2.0's",
                    f"{ratio(value)} ({_s(files.get('trama', {}).get('dump'))})",
                    f"0.2.0 {_s(files.get('0.2', {}).get('dump'))}",
                    f"<= {target:g}x",
                    verdict(value, target),
                ]
            )
    discovery = results.get("discovery")
    if discovery:
        s, t = discovery["summary"], discovery["targets"]
        value = s.get("ratio")
        if value is not None:
            imported = ", ".join(s.get("imported") or []) or "nothing watched"
            rows.append(
                [
                    f"discovery: import trama + trama.registry({discovery['framework']!r}) / import numpy",
                    f"{ratio(value)} ({s['median_total_ms']:.0f} ms)",
                    f"import numpy {s['median_numpy_ms']:.0f} ms",
                    f"<= {t['ratio']:g}x",
                    verdict(value, t["ratio"]),
                ]
            )
            rows.append(
                [
                    "discovery: imported on the way",
                    imported,
                    "",
                    f"none of {', '.join(t['must_not_import'])}",
                    "met" if not set(s.get("imported") or []) & set(t["must_not_import"]) else "MISSED",
                ]
            )
    runtime = results.get("runtime")
    if runtime:
        value, target = runtime["summary"]["ratio"], runtime["targets"]["ratio"]
        rows.append(
            [
                "runtime: numpy run() / hand-written numpy, 12-layer MLP",
                ratio(value),
                "in the same process",
                f"<= {target}x",
                verdict(value, target),
            ]
        )
        rows.append(["runtime: graph walk per call", f"{1e6 * runtime['summary']['walk_s']:.1f} us", "", "", ""])
    for name, label in (
        ("torch-runtime", "torch:cpu run() / the original module, 24-layer MLP (paired)"),
        ("jax-runtime", "jax:cpu run() / hand-written jax.jit, 12-layer MLP"),
    ):
        result = results.get(name)
        if result:
            value, target = result["summary"]["ratio"], result["targets"]["ratio"]
            rows.append(
                [f"{name}: {label}", ratio(value), "in the same process", f"<= {target}x", verdict(value, target)]
            )
    structure = results.get("structure")
    if structure:
        ours, onnx = structure["summary"]["trama"], structure["summary"]["onnx"]
        rows.append(
            [
                "structure: 2-layer TransformerEncoder, trama JSON / ONNX (no weights)",
                f"{ours['bytes']:,} / {onnx['bytes']:,} B",
                "ONNX",
                "",
                f"{ours['nodes']} / {onnx['nodes']} nodes",
            ]
        )
    validate = results.get("validate")
    if validate:
        t = validate["targets"]
        for label, s in validate["summary"].items():
            value = s["validate vs load time"]
            rows.append(
                [
                    f"validate: {label} schema-heavy document, validate / load time",
                    f"{ratio(value)} ({_s(s['validate seconds'])})",
                    f"load {_s(s['load seconds'])}",
                    f"<= {t['validate vs load time']:g}x",
                    verdict(value, t["validate vs load time"]),
                ]
            )
            value = s["validate peak vs file"]
            rows.append(
                [
                    f"validate: {label} schema-heavy document, validate peak / file size",
                    ratio(value, 1),
                    f"load {ratio(s['load peak vs file'], 1)}",
                    f"<= {t['validate peak vs file']:g}x",
                    verdict(value, t["validate peak vs file"]),
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
        print(table(["", "measured", "reference (same run)", "target", ""], rows))
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
            "rows": [
                dict(zip(["figure", "measured", "reference", "target", "verdict"], row, strict=True)) for row in rows
            ],
        },
    )
    print(f"summary written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
