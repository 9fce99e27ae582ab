"""Discovery: how long ``trama.registry(framework)`` takes in a fresh process.

Each run is a new interpreter that imports trama, then discovers the registry of one framework
(every installed plugin's specs plus that framework's implementations), and reports both times
and whether any framework (torch, jax, tensorflow) got imported on the way. Target: discovering
the numpy registry well under 300 ms. Nothing is asserted; the figures are printed.

    .venv/bin/python benchmarks/bench_discovery.py [--framework numpy] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from _common import describe_machine, machine_info, table, write_json

TARGET_MS = 300.0
_WORKER = """
import json, sys, time
start = time.perf_counter()
import trama
imported = time.perf_counter()
registry = trama.registry(sys.argv[1])
done = time.perf_counter()
print(json.dumps({
    "import_ms": 1000 * (imported - start),
    "discover_ms": 1000 * (done - imported),
    "ops": len(registry),
    "implemented": sum(1 for spec in registry if spec.factory is not None),
    "plugins": [f"{p.distribution} {p.version}" for p in trama.extension._plugins.plugin_host().plugins()],
    "frameworks_imported": sorted({m.split(".")[0] for m in sys.modules} & {"torch", "jax", "jaxlib", "tensorflow"}),
}))
"""


def run_once(framework: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _WORKER, framework], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", default="numpy")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", default="discovery.json")
    args = parser.parse_args(argv)

    runs = [run_once(args.framework) for _ in range(args.repeat)]
    best_import = min(r["import_ms"] for r in runs)
    best_discover = min(r["discover_ms"] for r in runs)
    median_discover = sorted(r["discover_ms"] for r in runs)[len(runs) // 2]
    last = runs[-1]
    print(f"Discovery of the {args.framework!r} registry, fresh process each run, best of {args.repeat}\n")
    print(
        table(
            ["", "ms"],
            [
                ["import trama", f"{best_import:.1f}"],
                [f"trama.registry({args.framework!r})", f"{best_discover:.1f}"],
                [f"trama.registry({args.framework!r}), median", f"{median_discover:.1f}"],
            ],
        )
    )
    verdict = "met" if best_discover < TARGET_MS else "MISSED"
    print(f"\ntarget: discovery < {TARGET_MS:.0f} ms: {best_discover:.1f} ms, {verdict}")
    print(f"ops: {last['ops']} ({last['implemented']} implemented for {args.framework})")
    print(f"plugins: {', '.join(last['plugins'])}")
    print(f"frameworks imported by discovery: {last['frameworks_imported'] or 'none'}\n")
    info = machine_info()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "framework": args.framework,
            "runs": runs,
            "summary": {"import_ms": best_import, "discover_ms": best_discover, "median_discover_ms": median_discover},
            "targets": {"discover_ms": TARGET_MS},
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
