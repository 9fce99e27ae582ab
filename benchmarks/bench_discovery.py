"""Discovery: what ``import trama; trama.registry("numpy")`` costs a fresh process, next to
``import numpy`` alone.

Each run is a new interpreter. The reference case imports numpy and nothing else; the trama case
imports trama, then discovers the registry of one framework (every installed plugin's specs
plus that framework's implementations), and reports both times and which of numpy, ml_dtypes,
jsonschema and the frameworks (torch, jax, tensorflow) got imported on the way. The two cases
alternate, so that drift in the machine hits both alike; each reports its best and median run.

Both run with their bytecode cached, as in an installed package: the workers write it to a
private folder (``PYTHONPYCACHEPREFIX``, whatever ``PYTHONDONTWRITEBYTECODE`` says), filled by
one warm-up run of each case and removed at the end, so the checkout is left as it was.

Target: discovering the numpy registry, import included, costs at most ``import numpy`` alone
(ratio <= 1.0, on the medians), and imports neither numpy nor ml_dtypes. Nothing is asserted;
the figures are printed with ``met`` / ``MISSED``.

    .venv/bin/python benchmarks/bench_discovery.py [--framework numpy] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from _common import describe_machine, machine_info, ratio, table, verdict, write_json

#: ``import trama`` + ``trama.registry(framework)`` over ``import numpy``, both in a fresh process.
TARGET_RATIO = 1.0
#: The earlier target, kept in the JSON because ``run_all.py`` reads it (``targets.discover_ms``).
LEGACY_TARGET_MS = 300.0
#: The modules discovery must not import: the array stack, the schema checker, the frameworks.
WATCHED = ("numpy", "ml_dtypes", "jsonschema", "torch", "jax", "jaxlib", "tensorflow")
#: Of those, the ones whose import the target rules out.
MUST_NOT_IMPORT = ("numpy", "ml_dtypes")

_NUMPY_WORKER = """
import json, time
start = time.perf_counter()
import numpy
done = time.perf_counter()
print(json.dumps({"total_ms": 1000 * (done - start), "numpy": numpy.__version__}))
"""

_TRAMA_WORKER = """
import json, sys, time
start = time.perf_counter()
import trama
imported = time.perf_counter()
registry = trama.registry(sys.argv[1])
done = time.perf_counter()
loaded = sorted(name for name in sys.argv[2].split(",") if name in sys.modules)
plugins = trama.extension.plugin_host()._plugins  # read after timing: versions are read lazily
print(json.dumps({
    "import_ms": 1000 * (imported - start),
    "discover_ms": 1000 * (done - imported),
    "total_ms": 1000 * (done - start),
    "ops": len(registry),
    "implemented": sum(1 for spec in registry if spec.factory is not None),
    "plugins": [f"{p.distribution} {p.version}" for p in plugins],
    "imported": loaded,
}))
"""


def worker_env(pycache: str) -> dict[str, str]:
    """The workers' environment: bytecode written to and read from ``pycache``, as an installed
    package reads its own; ``TRAMA_PLUGINS`` left as the caller set it."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def run_once(code: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def stats(runs: list[dict[str, Any]], key: str) -> tuple[float, float]:
    """Best and median of ``key`` over the runs."""
    values = [run[key] for run in runs]
    return min(values), statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", default="numpy")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", default="discovery.json")
    args = parser.parse_args(argv)

    pycache = tempfile.mkdtemp(prefix="trama-bench-pyc-")
    try:
        env = worker_env(pycache)
        trama_args = [args.framework, ",".join(WATCHED)]
        run_once(_NUMPY_WORKER, [], env)  # warm-up: compiles and caches the bytecode of both
        run_once(_TRAMA_WORKER, trama_args, env)
        numpy_runs: list[dict[str, Any]] = []
        trama_runs: list[dict[str, Any]] = []
        for _ in range(args.repeat):
            numpy_runs.append(run_once(_NUMPY_WORKER, [], env))
            trama_runs.append(run_once(_TRAMA_WORKER, trama_args, env))
    finally:
        shutil.rmtree(pycache, ignore_errors=True)

    numpy_best, numpy_median = stats(numpy_runs, "total_ms")
    total_best, total_median = stats(trama_runs, "total_ms")
    import_best, import_median = stats(trama_runs, "import_ms")
    discover_best, discover_median = stats(trama_runs, "discover_ms")
    ratio_best, ratio_median = total_best / numpy_best, total_median / numpy_median
    imported = sorted({name for run in trama_runs for name in run["imported"]})
    forbidden = [name for name in MUST_NOT_IMPORT if name in imported]
    met = verdict(ratio_median, TARGET_RATIO) == "met" and not forbidden
    call = f"trama.registry({args.framework!r})"
    last = trama_runs[-1]

    print(
        f"Discovery in a fresh process, best and median of {args.repeat} (cases alternating; "
        "bytecode cached as in an installed package)\n"
    )
    print(
        table(
            ["", "best ms", "median ms"],
            [
                ["import numpy (the reference)", f"{numpy_best:.1f}", f"{numpy_median:.1f}"],
                [f"import trama; {call}", f"{total_best:.1f}", f"{total_median:.1f}"],
                ["  of which import trama", f"{import_best:.1f}", f"{import_median:.1f}"],
                [f"  of which {call}", f"{discover_best:.1f}", f"{discover_median:.1f}"],
            ],
        )
    )
    print(
        f"\ntarget: import trama + {call} <= {TARGET_RATIO:g}x import numpy, importing neither "
        f"{' nor '.join(MUST_NOT_IMPORT)}: median {ratio(ratio_median)} (best {ratio(ratio_best)}), "
        f"imported: {', '.join(imported) or 'none of ' + ', '.join(WATCHED)}: {'met' if met else 'MISSED'}"
    )
    print(f"ops: {last['ops']} ({last['implemented']} implemented for {args.framework})")
    print(f"plugins: {', '.join(last['plugins'])}\n")
    info = machine_info()
    print(describe_machine(info))
    out = write_json(
        args.out,
        {
            "machine": info,
            "framework": args.framework,
            "bytecode": "cached (private PYTHONPYCACHEPREFIX, one warm-up run per case)",
            "runs": {"numpy": numpy_runs, "trama": trama_runs},
            "summary": {
                "numpy_ms": numpy_best,
                "median_numpy_ms": numpy_median,
                "total_ms": total_best,
                "median_total_ms": total_median,
                "import_ms": import_best,
                "median_import_ms": import_median,
                "discover_ms": discover_best,
                "median_discover_ms": discover_median,
                "ratio": ratio_median,
                "best_ratio": ratio_best,
                "imported": imported,
                "met": met,
            },
            "targets": {
                "ratio": TARGET_RATIO,
                "must_not_import": list(MUST_NOT_IMPORT),
                "discover_ms": LEGACY_TARGET_MS,
            },
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
