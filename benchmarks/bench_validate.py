"""``trama validate`` against ``trama.load`` on the same file: time and peak memory.

The document is the shape of the hostile ``schema_heavy`` case (``tests/reliability``): a
``Graph`` of thousands of small leaves, each with two ports, two outputs and two slots, and a
parameter table of two scalar entries per leaf, written at about 1.6 MB and 16 MB. It is valid,
so ``validate`` proves it by the typed reader that ``load`` uses and never runs the JSON Schema
pass; a second document, the same with one slot naming a missing entry, makes it explain a
failure (the JSON Schema pass over the whole document, then the decoding stages).

Each case runs in a fresh interpreter that imports trama's command line first and takes its
memory baseline after the imports; a case's peak is the process's high-water mark (``ru_maxrss``)
above it. Cases alternate per repeat; times are the best of the repeats, peaks the largest.

* ``load``: ``trama.load(path)``, the reference measured in the same run;
* ``validate``: what ``trama validate FILE`` does (``find_problems``);
* ``validate --no-schema``;
* ``stages in full``: the stages as ``validate`` ran them before the fast path (parse, the
  JSON Schema part by part, decode, rules, tensors): what it still runs to explain a failure.

Targets (printed, never asserted): validate time / load time <= 1.5x, and validate's peak /
file size <= 5x. The second is the audit's; the peak of ``load`` itself is printed beside it.

    .venv/bin/python benchmarks/bench_validate.py [--sizes 1.6 16] [--repeat 3] [--full-upto 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import MB, best_of, describe_machine, machine_info, ratio, run_worker, seconds, table, verdict, write_json

TARGET_TIME_RATIO = 1.5
TARGET_MEMORY_RATIO = 5.0

_WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
from _common import Probe
from pathlib import Path
import trama
from trama.tools.cli import find_problems
from trama.format._problems import _explained_problems
case, path = sys.argv[2], Path(sys.argv[3])
probe = Probe()
with probe.phase(case):
    if case == "load":
        try:
            trama.load(path)
            problems = []
        except trama.TramaError as error:
            problems = [str(error)]
    elif case == "validate":
        problems = find_problems(path)
    elif case == "validate --no-schema":
        problems = find_problems(path, schema=False)
    else:
        problems = [str(p) for p in _explained_problems(path.read_bytes(), path.parent, schema=True)]
probe.extra["problems"] = len(problems)
probe.extra["first"] = problems[0] if problems else None
probe.emit()
"""

CASES = ("load", "validate", "validate --no-schema", "stages in full")


def document(target: int, *, broken: bool) -> bytes:
    """The schema-heavy document, about ``target`` bytes; ``broken``: one slot names no entry."""
    x = {"node": "%input", "output": "x"}
    nodes: list[dict[str, Any]] = [
        {
            "id": "g",
            "parent": None,
            "op": "Graph",
            "inputs": {"x": x},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": {"y": {"node": "g.l0", "output": "y"}},
        }
    ]
    parameters: dict[str, Any] = {}
    size = 0
    k = 0
    while size < target:
        node = {
            "id": f"g.l{k}",
            "parent": "g",
            "op": "Tag",
            "inputs": {"x": x, "z": x},
            "outputs": ["y", "z"],
            "parameters": {"a": {"name": f"p{k}.a"}, "b": {"name": f"p{k}.b"}},
            "output_bindings": None,
        }
        parameters[f"p{k}.a"] = {"value": k, "learnable": False}
        parameters[f"p{k}.b"] = {"value": f"label {k}", "learnable": False}
        nodes.append(node)
        size += len(json.dumps(node)) + 80
        k += 1
    if broken:
        nodes[k // 2 + 1]["parameters"]["a"]["name"] = "missing"
        del parameters[f"p{k // 2}.a"]
    doc = {
        "format_version": "1.2",
        "inputs": ["x"],
        "outputs": [{"node": "g", "output": "y"}],
        "nodes": nodes,
        "parameters": parameters,
    }
    return json.dumps(doc).encode()


def write_document(path: Path, target: int, *, broken: bool) -> None:
    """Write the document from a child process: this one must stay small, since a worker's
    ``ru_maxrss`` starts from the size of the process that started it (Linux keeps it across
    ``exec``), and building a 16 MB document takes a few hundred megabytes."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from pathlib import Path\nfrom bench_validate import document\n"
        f"Path({str(path)!r}).write_bytes(document({target}, broken={broken}))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def measure(path: Path, cases: list[str], repeat: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    for _ in range(repeat):
        for case in cases:
            argv = [sys.executable, "-c", _WORKER, str(Path(__file__).resolve().parent), case, str(path)]
            runs[case].append(run_worker(argv))
    return {case: best_of(results) for case, results in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="+", default=[1.6, 16.0], help="document sizes in MB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--full-upto",
        type=float,
        default=2.0,
        help="run 'stages in full' (about a second per MB) on documents up to this many MB",
    )
    parser.add_argument("--out", default="validate.json")
    args = parser.parse_args(argv)

    sizes: dict[str, Any] = {}
    rows = []
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for megabytes in args.sizes:
            for broken in (False, True):
                label = f"{megabytes:g} MB" + (", one error" if broken else "")
                path = Path(folder) / f"{megabytes:g}{'-broken' if broken else ''}.trama.json"
                write_document(path, int(megabytes * MB), broken=broken)
                size = path.stat().st_size
                cases = [c for c in CASES if c != "stages in full" or megabytes <= args.full_upto]
                results = measure(path, cases, args.repeat)
                load_time = results["load"]["times"]["load"]
                figures: dict[str, Any] = {}
                for case, result in results.items():
                    time_s, peak = result["times"][case], result["peaks"][case]
                    figures[case] = {
                        "seconds": time_s,
                        "peak_bytes": peak,
                        "time_vs_load": time_s / load_time,
                        "peak_vs_file": peak / size,
                        "problems": result["problems"],
                        "first": result["first"],
                    }
                    rows.append(
                        [
                            f"{label}: {case}",
                            seconds(time_s),
                            ratio(time_s / load_time),
                            f"{peak / MB:.1f}",
                            ratio(peak / size, 1),
                            result["problems"],
                        ]
                    )
                sizes[label] = {"bytes": size, "broken": broken, "cases": figures}
                if not broken:
                    summary[f"{megabytes:g} MB"] = {
                        "bytes": size,
                        "validate vs load time": figures["validate"]["time_vs_load"],
                        "validate peak vs file": figures["validate"]["peak_vs_file"],
                        "load peak vs file": figures["load"]["peak_vs_file"],
                        "validate seconds": figures["validate"]["seconds"],
                        "load seconds": figures["load"]["seconds"],
                    }

    print(f"trama validate and trama.load on the same file (best of {args.repeat}; fresh process per case)\n")
    print(table(["", "seconds", "/ load", "peak MB", "peak / file", "problems"], rows))
    print()
    for label, s in summary.items():
        print(
            f"{label} valid: validate / load time {ratio(s['validate vs load time'])} "
            f"(target <= {TARGET_TIME_RATIO:g}x: {verdict(s['validate vs load time'], TARGET_TIME_RATIO)}); "
            f"validate peak / file {ratio(s['validate peak vs file'], 1)} "
            f"(target <= {TARGET_MEMORY_RATIO:g}x: {verdict(s['validate peak vs file'], TARGET_MEMORY_RATIO)}; "
            f"load's own {ratio(s['load peak vs file'], 1)})"
        )
    info = machine_info()
    print()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "repeat": args.repeat,
            "sizes": sizes,
            "summary": summary,
            "targets": {"validate vs load time": TARGET_TIME_RATIO, "validate peak vs file": TARGET_MEMORY_RATIO},
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
