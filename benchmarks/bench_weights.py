"""Weights: saving and loading 16 tensors of 2048x2048 float32 (268 MB), side by side.

Cases (each timing export, dump, load, and materialising every tensor as a numpy array):

* ``trama-inline``    trama.export_model + trama.dump(model, path) / trama.load + np.asarray each
* ``trama-external``  the same with dump(..., weights="external") (safetensors beside the JSON)
* ``safetensors``     reference: safetensors.numpy.save_file / load_file + np.asarray each
* ``safetensors+fsync`` the same, with the file flushed to disk after writing, as trama.dump does
                      (writes are atomic and durable); shown for information, not a target
* ``trama-0.2.0``     reference: the old PyPI release, in .venv-ref (see setup_reference.sh); it
                      base64-encodes at export (into its TensorValue) and decodes on import
                      (import_model with factories that turn the base64 into arrays)

Every dump and every load+materialise runs in a fresh process, repeated (best of
``--repeat``). Before its baseline a worker runs its case once on a tiny model (2 tensors of
8x8), so that what happens once per process (imports on first use, plugin discovery) is not
counted in the phases; that warm-up's time is reported beside them. Peak memory is the rise of
the process's resident high-water mark (``VmHWM``) over its resident size (``VmRSS``) at the
baseline, so it is that case's alone. A micro-table compares base64 in the standard library with
pybase64.

    .venv/bin/python benchmarks/bench_weights.py                  # everything (~3 minutes)
    .venv/bin/python benchmarks/bench_weights.py --tmp /dev/shm   # files in memory: no disk
    .venv/bin/python benchmarks/bench_weights.py --side 256       # a quick smoke run
    .venv/bin/python benchmarks/bench_weights.py --profile trama-inline   # cProfile our phases

Results: a table on stdout, and benchmarks/out/weights.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import (
    MB,
    REF_PYTHON,
    REF_SCRIPT,
    RESULT_MARK,
    Probe,
    WorkerError,
    best_of,
    describe_machine,
    fingerprint,
    machine_info,
    maxrss_bytes,
    maybe_phase,
    profile_call,
    ratio,
    reference_available,
    reference_missing_message,
    run_worker,
    seconds,
    table,
    verdict,
    write_json,
    write_text,
)

COUNT = 16
SIDE = 2048
SEED = 20240611
CASES = ("trama-inline", "trama-external", "safetensors", "safetensors+fsync", "trama-0.2.0")
OURS = ("trama-inline", "trama-external")
#: Issue 15: round trips against safetensors' (the inline one judged on tmpfs, ``--tmp /dev/shm``),
#: and the inline load + materialise peak against the weight bytes.
TARGETS = {"inline/safetensors": 1.5, "external/safetensors": 1.0, "inline memory": 1.1}
#: The warm-up model a worker runs its case on before its baseline (see the module's notes).
WARM_COUNT, WARM_SIDE = 2, 8


# --------------------------------------------------------------------------------------------
# Workers (fresh processes)
# --------------------------------------------------------------------------------------------


def _status_bytes(field: str) -> int | None:
    """A memory figure of this process from ``/proc/self/status`` (``VmRSS``, ``VmHWM``), in
    bytes; ``None`` where the system has no such file."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class ResidentProbe(Probe):
    """A :class:`Probe` whose peak is the rise of the resident high-water mark (``VmHWM``)
    over the resident size (``VmRSS``) at the baseline: the memory a phase added, whatever the
    process held, or briefly held, before. (``ru_maxrss`` is the same high-water mark but can
    also carry the parent's from before ``exec``; a high-water mark as the baseline would hide
    a rise back to an earlier peak.) At the baseline the high-water mark is reset to the
    resident size where Linux allows (``/proc/self/clear_refs``), so that a peak before it (the
    warm-up's, the imports') cannot show in a phase. Where ``/proc`` is missing, :class:`Probe`'s
    ``ru_maxrss``."""

    def __init__(self) -> None:
        super().__init__()
        self.rebase()

    def rebase(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")  # VmHWM := VmRSS (Linux 4.0+)
        except OSError:
            pass
        resident = _status_bytes("VmRSS")
        self.baseline = resident if resident is not None else maxrss_bytes()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.times[name] = time.perf_counter() - start
        peak = _status_bytes("VmHWM")
        self.peaks[name] = (peak if peak is not None else maxrss_bytes()) - self.baseline


def warm_up(case: str, folder: Path) -> float:
    """Run ``case`` once on a tiny model in a scratch folder: dump, load, materialise. What a
    process does once (imports on first use, ``export_model`` discovering plugins) then falls
    before the baseline, not in the first phase that happens to need it. Returns its seconds."""
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="warm-", dir=folder))
    try:
        _dump_model(case, scratch, make_arrays(WARM_COUNT, WARM_SIDE), None)
        _load_arrays(case, scratch, None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.perf_counter() - start


def make_arrays(count: int, side: int) -> list[Any]:
    """Deterministic float32 weights, generated in place (no float64 temporaries that would
    raise the memory high-water mark before the baseline)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    return [rng.standard_normal((side, side), dtype=np.float32) for _ in range(count)]


class Weights:
    """A toy leaf module with tensors (trama.ExportableOp)."""

    def __init__(self, arrays: list[Any]) -> None:
        self.arrays = arrays

    def to_node(self, ctx: Any) -> Any:
        from trama import NodeFragment, Param

        parameters = {f"w{k:02d}": Param(a, learnable=True) for k, a in enumerate(self.arrays)}
        return NodeFragment(op="Weights", outputs=["y"], parameters=parameters)


def _doc_path(folder: Path, case: str) -> Path:
    return folder / ("model.safetensors" if case.startswith("safetensors") else "model.trama.json")


def _dump_model(case: str, folder: Path, arrays: list[Any], probe: Probe | None) -> None:
    path = _doc_path(folder, case)
    if case.startswith("safetensors"):
        from safetensors.numpy import save_file

        tensors = {f"w{k:02d}": a for k, a in enumerate(arrays)}
        with maybe_phase(probe, "dump"):
            save_file(tensors, str(path))
            if case == "safetensors+fsync":
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return
    import trama

    with maybe_phase(probe, "export"):
        model = trama.export_model(Weights(arrays), inputs=["x"], outputs=["y"], registry=None)
    with maybe_phase(probe, "dump"):
        trama.dump(model, path, weights="external" if case == "trama-external" else "inline")


def _load_arrays(case: str, folder: Path, probe: Probe | None) -> list[Any]:
    import numpy as np

    path = _doc_path(folder, case)
    if case.startswith("safetensors"):
        from safetensors.numpy import load_file

        with maybe_phase(probe, "load"):
            tensors = load_file(str(path))
        with maybe_phase(probe, "materialise"):
            return [np.asarray(tensors[key]) for key in sorted(tensors)]
    import trama

    with maybe_phase(probe, "load"):
        model = trama.load(path)
    with maybe_phase(probe, "materialise"):
        return [np.asarray(model.parameters[name].value) for name in sorted(model.parameters)]


def worker_dump(case: str, folder: Path, count: int, side: int) -> None:
    import numpy  # noqa: F401 - imported before the baseline, like the library itself

    if case.startswith("safetensors"):
        import safetensors.numpy  # noqa: F401
    else:
        import trama  # noqa: F401
    warm = warm_up(case, folder)
    arrays = make_arrays(count, side)
    (folder / "fingerprint.json").write_text(json.dumps(fingerprint(arrays)))
    probe = ResidentProbe()  # baseline after building the input: the arrays are not the cost
    probe.extra["warm_up"] = warm
    _dump_model(case, folder, arrays, probe)
    probe.extra["file_bytes"] = sum(p.stat().st_size for p in folder.iterdir() if p.name != "fingerprint.json")
    probe.emit()


def worker_load(case: str, folder: Path) -> None:
    import numpy  # noqa: F401

    if case.startswith("safetensors"):
        import safetensors.numpy  # noqa: F401
    else:
        import trama  # noqa: F401
    expected = json.loads((folder / "fingerprint.json").read_text())
    warm = warm_up(case, folder)
    probe = ResidentProbe()
    probe.extra["warm_up"] = warm
    arrays = _load_arrays(case, folder, probe)
    probe.extra["verified"] = fingerprint(arrays) == expected
    probe.extra["weight_bytes"] = sum(a.nbytes for a in arrays)
    probe.emit()


def worker_profile(case: str, folder: Path, count: int, side: int) -> None:
    import numpy  # noqa: F401 - imports are not what we profile
    import safetensors.numpy  # noqa: F401

    import trama  # noqa: F401

    warm_up(case, folder)  # as the measured workers do: once-per-process costs are not profiled
    inputs = [make_arrays(count, side)]  # popped by the dump, so that the load runs without them
    _, dump_report = profile_call(lambda: _dump_model(case, folder, inputs.pop(), None))
    _, load_report = profile_call(lambda: _load_arrays(case, folder, None))
    print(f"=== {case}: export + dump ===\n{dump_report}\n=== {case}: load + materialise ===\n{load_report}")
    Probe().emit()


def worker_base64(nbytes: int, repeat: int) -> None:
    """Throughput of base64 encode/decode, stdlib vs pybase64, in MB of binary data per second."""
    import base64
    import time

    import numpy as np
    import pybase64

    raw = np.random.default_rng(SEED).bytes(nbytes)
    encoded = base64.b64encode(raw)
    ops: dict[tuple[str, str], Callable[[], bytes]] = {
        ("stdlib", "encode"): lambda: base64.b64encode(raw),
        ("stdlib", "decode"): lambda: base64.b64decode(encoded),
        ("stdlib", "decode validate=True"): lambda: base64.b64decode(encoded, validate=True),
        ("pybase64", "encode"): lambda: pybase64.b64encode(raw),
        ("pybase64", "decode"): lambda: pybase64.b64decode(encoded),
        ("pybase64", "decode validate=True"): lambda: pybase64.b64decode(encoded, validate=True),
    }
    rates: dict[str, dict[str, float]] = {}
    for (lib, op), fn in ops.items():
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - start)
            del out
        rates.setdefault(lib, {})[op] = nbytes / MB / best
    probe = Probe()
    probe.extra["rates"] = rates
    probe.extra["nbytes"] = nbytes
    probe.emit()


# --------------------------------------------------------------------------------------------
# Orchestrator
# --------------------------------------------------------------------------------------------


def _argv(case: str, mode: str, folder: Path, count: int, side: int) -> list[str]:
    sizes = ["--count", str(count), "--side", str(side)]
    if case == "trama-0.2.0":
        return [str(REF_PYTHON), str(REF_SCRIPT), f"weights-{mode}", str(folder), *(sizes if mode == "dump" else [])]
    return [sys.executable, __file__, "--worker", mode, case, str(folder), *sizes]


def measure(cases: list[str], count: int, side: int, repeat: int, tmp: str | None) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    for r in range(repeat):
        for case in cases:  # interleaved, so drift in the machine hits every case alike
            folder = Path(tempfile.mkdtemp(prefix="trama-bench-weights-", dir=tmp))
            try:
                print(f"  .. run {r + 1}/{repeat}: {case}", file=sys.stderr, flush=True)
                os.sync()
                dumped = run_worker(_argv(case, "dump", folder, count, side))
                loaded = run_worker(_argv(case, "load", folder, count, side))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                os.sync()  # so that one case's write-back does not land in the next case's time
            if not loaded.get("verified"):
                raise WorkerError(f"{case}: the arrays read back differ from those written")
            runs[case].append(
                {
                    "times": {**dumped["times"], **loaded["times"]},
                    "peaks": {
                        **dumped["peaks"],
                        "load": loaded["peaks"]["load"],
                        "materialise": loaded["peaks"]["materialise"],
                    },
                    "file_bytes": dumped["file_bytes"],
                    "weight_bytes": loaded["weight_bytes"],
                    "warm_up": {"dump": dumped.get("warm_up"), "load": loaded.get("warm_up")},
                }
            )
    results = {}
    for case, case_runs in runs.items():
        best = best_of(case_runs)
        best["round_trip"] = sum(best["times"].values())  # the sum of each phase's best
        trips = sorted(sum(run["times"].values()) for run in case_runs)
        best["round_trip_runs"] = trips
        best["round_trip_median"] = trips[len(trips) // 2]
        results[case] = best
    return results


def summarise(results: dict[str, Any], weight_bytes: int) -> dict[str, Any]:
    def trip(case: str) -> float | None:
        return results[case]["round_trip"] if case in results else None

    def over(a: str, b: str) -> float | None:
        if a not in results or b not in results:
            return None
        return float(results[a]["round_trip"] / results[b]["round_trip"])

    def memory(case: str) -> float | None:
        return results[case]["peaks"]["materialise"] / weight_bytes if case in results else None

    summary: dict[str, Any] = {
        "inline/safetensors": over("trama-inline", "safetensors"),
        "external/safetensors": over("trama-external", "safetensors"),
        "inline memory": memory("trama-inline"),
        "inline/safetensors+fsync": over("trama-inline", "safetensors+fsync"),
        "external/safetensors+fsync": over("trama-external", "safetensors+fsync"),
        "memory (x weight bytes)": {case: memory(case) for case in results},
    }
    if "trama-0.2.0" in results:
        summary["vs 0.2.0"] = {
            case: {
                "round trip speedup": trip("trama-0.2.0") / trip(case),  # type: ignore[operator]
                "load+materialise speedup": (
                    results["trama-0.2.0"]["times"]["load"] + results["trama-0.2.0"]["times"]["materialise"]
                )
                / (results[case]["times"]["load"] + results[case]["times"]["materialise"]),
                "memory ratio": memory(case) / memory("trama-0.2.0"),  # type: ignore[operator]
            }
            for case in OURS
            if case in results
        }
    return summary


def _warm_text(result: dict[str, Any]) -> str:
    warm = result.get("warm_up") or {}
    if warm.get("dump") is None or warm.get("load") is None:
        return "-"
    return f"{warm['dump']:.3f}/{warm['load']:.3f}"


def report(
    info: dict[str, Any],
    config: dict[str, Any],
    results: dict[str, Any],
    summary: dict[str, Any],
    b64: dict[str, Any] | None,
) -> str:
    weight_bytes = next(iter(results.values()))["weight_bytes"]
    lines = [
        f"Weights: {config['count']} tensors of {config['side']}x{config['side']} float32 = "
        f"{weight_bytes / MB:.0f} MB, files in {config['tmp']}. Seconds, best of {config['repeat']} runs for "
        "each phase (each a fresh "
        "process); round trip = the sum of the best phases, and the median run's total for comparison;",
        "peak = rise of the resident high-water mark (VmHWM) over the resident size (VmRSS) at the baseline, taken",
        "after imports and a warm-up run on a tiny model (for dump, also after building the arrays); warm-up = that",
        "run's seconds in the dump and the load process (once per process: imports on first use, plugin discovery)",
        "",
    ]
    rows = []
    for case, res in results.items():
        t = res["times"]
        rows.append(
            [
                case,
                seconds(t.get("export")),
                seconds(t["dump"]),
                seconds(t["load"]),
                seconds(t["materialise"]),
                seconds(res["round_trip"]),
                seconds(res["round_trip_median"]),
                f"{res['file_bytes'] / MB:.0f}",
                f"{res['peaks']['dump'] / MB:.0f}",
                f"{res['peaks']['load'] / MB:.0f}",
                f"{res['peaks']['materialise'] / MB:.0f} ({res['peaks']['materialise'] / weight_bytes:.2f}x)",
                _warm_text(res),
            ]
        )
    lines.append(
        table(
            [
                "case",
                "export",
                "dump",
                "load",
                "materialise",
                "round trip",
                "(median run)",
                "file MB",
                "dump peak MB",
                "load peak MB",
                "load+materialise peak MB",
                "warm-up dump/load",
            ],
            rows,
        )
    )
    lines += [
        "",
        "Targets (issue 15; round trip = export + dump + load + materialise; the inline round trip's target is",
        "judged with the files in tmpfs, --tmp /dev/shm, where the disk's erratic write-back cannot swing it):",
    ]
    target_rows = [
        [label, ratio(summary[name]), f"<= {TARGETS[name]}x", verdict(summary[name], TARGETS[name])]
        for name, label in (
            ("inline/safetensors", "trama inline / safetensors, round trip"),
            ("external/safetensors", "trama external / safetensors, round trip"),
            ("inline memory", "trama inline load+materialise peak / weight bytes"),
        )
    ]
    for name, label in (
        ("inline/safetensors+fsync", "(for information) trama inline / safetensors+fsync"),
        ("external/safetensors+fsync", "(for information) trama external / safetensors+fsync"),
    ):
        if summary[name] is not None:
            target_rows.append([label, ratio(summary[name]), "", ""])
    lines.append(table(["", "measured", "target", ""], target_rows))
    if "safetensors" in results:
        ref = results["safetensors"]
        lines += ["", "Time relative to safetensors, by phase (1.00x = as fast; lower is better):"]
        phase_rows = []
        for case in results:
            if case == "safetensors":
                continue
            t = results[case]["times"]
            phase_rows.append(
                [
                    case,
                    ratio(t["dump"] / ref["times"]["dump"]),
                    ratio((t["load"] + t["materialise"]) / (ref["times"]["load"] + ref["times"]["materialise"])),
                    ratio(results[case]["round_trip"] / ref["round_trip"]),
                ]
            )
        lines.append(table(["case", "dump", "load+materialise", "round trip"], phase_rows))
    if "vs 0.2.0" in summary:
        lines += ["", "Against trama 0.2.0 (speedup = 0.2.0's time / ours; memory = our peak / 0.2.0's peak):"]
        vs_rows = [
            [
                case,
                ratio(vs["round trip speedup"], 1),
                ratio(vs["load+materialise speedup"], 1),
                ratio(vs["memory ratio"]),
            ]
            for case, vs in summary["vs 0.2.0"].items()
        ]
        lines.append(table(["case", "round trip speedup", "load+materialise speedup", "load+mat. memory"], vs_rows))
    if "trama-0.2.0" not in results:
        lines += ["", reference_missing_message()]
    if b64:
        lines += ["", f"base64 throughput on {b64['nbytes'] / MB:.0f} MB (MB of binary data per second, best of 3):"]
        rates = b64["rates"]
        b64_rows = []
        for op in ("encode", "decode", "decode validate=True"):
            std, fast = rates["stdlib"][op], rates["pybase64"][op]
            b64_rows.append([op, f"{std:.0f}", f"{fast:.0f}", f"{fast / std:.1f}x"])
        lines.append(table(["operation", "stdlib MB/s", "pybase64 MB/s", "pybase64 speedup"], b64_rows))
    lines += ["", describe_machine(info)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the best is reported (default 5)")
    parser.add_argument("--count", type=int, default=COUNT, help=f"number of tensors (default {COUNT})")
    parser.add_argument("--side", type=int, default=SIDE, help=f"tensors are side x side float32 (default {SIDE})")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--no-base64", action="store_true", help="skip the base64 micro-table")
    parser.add_argument("--tmp", help="folder for the temporary files (default: the system's; /dev/shm: no disk)")
    parser.add_argument("--out", default="weights.json", help="results file name in benchmarks/out/")
    parser.add_argument("--profile", choices=("trama-inline", "trama-external"), help="cProfile one of our cases")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        mode, *rest = args.worker
        if mode == "dump":
            worker_dump(rest[0], Path(rest[1]), args.count, args.side)
        elif mode == "load":
            worker_load(rest[0], Path(rest[1]))
        elif mode == "profile":
            worker_profile(rest[0], Path(rest[1]), args.count, args.side)
        elif mode == "base64":
            worker_base64(args.count * args.side * args.side * 4, args.repeat)
        return 0

    if args.profile:
        folder = Path(tempfile.mkdtemp(prefix="trama-bench-weights-", dir=args.tmp))
        try:
            sizes = ["--count", str(args.count), "--side", str(args.side)]
            proc = subprocess.run(
                [sys.executable, __file__, *sizes, "--worker", "profile", args.profile, str(folder)],
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        text = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith(RESULT_MARK))
        print(text + proc.stderr[-3000:])
        print(f"(also in {write_text(f'profile-weights-{args.profile}.txt', text)})")
        return proc.returncode

    cases = list(args.cases)
    if "trama-0.2.0" in cases and not reference_available():
        print(reference_missing_message(), file=sys.stderr)
        cases.remove("trama-0.2.0")
    info = machine_info()
    results = measure(cases, args.count, args.side, args.repeat, args.tmp)
    weight_bytes = next(iter(results.values()))["weight_bytes"]
    summary = summarise(results, weight_bytes)
    b64 = None
    if not args.no_base64:
        print("  .. base64 micro-benchmark", file=sys.stderr, flush=True)
        b64 = run_worker(
            [
                sys.executable,
                __file__,
                "--worker",
                "base64",
                *("--count", str(args.count), "--side", str(args.side)),
                *("--repeat", "3"),
            ]
        )
    config = {
        "count": args.count,
        "side": args.side,
        "dtype": "float32",
        "repeat": args.repeat,
        "tmp": args.tmp or tempfile.gettempdir(),
    }
    print(report(info, config, results, summary, b64))
    out = write_json(
        args.out,
        {
            "benchmark": "weights",
            "machine": info,
            "config": config,
            "weight_bytes": weight_bytes,
            "results": results,
            "summary": summary,
            "targets": TARGETS,
            "base64": b64,
            "reference_skipped": "trama-0.2.0" not in results,
        },
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
