"""Shared helpers of the benchmark scripts.

Standard library only: the reference interpreter (``.venv-ref``, with the old trama 0.2.0) imports
this module too, and the orchestrating process must stay small so that it cannot distort the
memory figures of the workers it starts.

Every measured case runs in a fresh worker process. A worker takes its memory baseline after its
imports (and after building its input, for writers), times each phase, and prints one result line
(``RESULT_MARK`` + JSON) that the orchestrator collects. ``ru_maxrss`` is a high-water mark, so the
peak recorded after a phase covers everything since the process started.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"
REF_PYTHON = REPO / ".venv-ref" / "bin" / "python"
REF_SCRIPT = BENCH_DIR / "_ref_v02.py"
RESULT_MARK = "@@bench-result@@ "
MB = 1_000_000


# --------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------


def maxrss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports kilobytes, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class Probe:
    """Times named phases and records the peak memory above a baseline after each one."""

    def __init__(self) -> None:
        self.baseline = maxrss_bytes()
        self.times: dict[str, float] = {}
        self.peaks: dict[str, int] = {}
        self.extra: dict[str, Any] = {}

    def rebase(self) -> None:
        """Take the baseline again (after building a writer's input)."""
        self.baseline = maxrss_bytes()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.times[name] = time.perf_counter() - start
        self.peaks[name] = maxrss_bytes() - self.baseline

    def emit(self) -> None:
        result = {"times": self.times, "peaks": self.peaks, "baseline": self.baseline, **self.extra}
        sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
        sys.stdout.flush()


@contextmanager
def maybe_phase(probe: Probe | None, name: str) -> Iterator[None]:
    """``probe.phase(name)``, or nothing when there is no probe (under the profiler)."""
    if probe is None:
        yield
    else:
        with probe.phase(name):
            yield


def fingerprint(arrays: Sequence[Any]) -> list[list[float]]:
    """A cheap check that arrays read back hold the numbers written (numpy arrays, duck-typed):
    a strided sample's sum and the last element of each."""
    return [[float(a[::61, ::67].astype("float64").sum()), float(a[-1, -1])] for a in arrays]


# --------------------------------------------------------------------------------------------
# Orchestrator side
# --------------------------------------------------------------------------------------------


class WorkerError(RuntimeError):
    pass


def run_worker(argv: Sequence[str], *, timeout: float = 600) -> dict[str, Any]:
    """Run one worker process and return its result."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK) and proc.returncode == 0:
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    tail = (proc.stdout + proc.stderr)[-3000:]
    raise WorkerError(f"worker {' '.join(map(str, argv))} failed (exit {proc.returncode}):\n{tail}")


def best_of(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fastest time of each phase over the repeats; the largest peak (memory is steady, and the
    largest is the honest figure)."""
    first = results[0]
    merged: dict[str, Any] = {key: value for key, value in first.items() if key not in ("times", "peaks")}
    merged["times"] = {phase: min(r["times"][phase] for r in results) for phase in first["times"]}
    merged["peaks"] = {phase: max(r["peaks"][phase] for r in results) for phase in first["peaks"]}
    merged["all_times"] = {phase: [r["times"][phase] for r in results] for phase in first["times"]}
    return merged


_TOUCH_CODE = """
import mmap, sys, time
size, chunk = int(sys.argv[1]), 16 * 1024 * 1024
block = b"\\1" * chunk
start = time.perf_counter()
area = mmap.mmap(-1, size)
for offset in range(0, size - chunk + 1, chunk):
    area.write(block)
print(time.perf_counter() - start)
"""


def first_touch_rate(nbytes: int = 512 * 1024 * 1024) -> float | None:
    """GB/s at which a fresh process can write memory it has never touched (page faults included).

    On an ordinary machine this is several GB/s. Virtual machines whose memory the host backs
    lazily (Firecracker, some clouds) can be 10x slower, and erratically so: which pages a process
    gets is luck, and a run can then swing several-fold. Recorded so the figures can be judged.
    """
    proc = subprocess.run([sys.executable, "-c", _TOUCH_CODE, str(nbytes)], capture_output=True, text=True, check=False)
    return nbytes / 1e9 / float(proc.stdout) if proc.returncode == 0 else None


def reference_available() -> bool:
    return REF_PYTHON.exists()


def reference_missing_message() -> str:
    return (
        f"trama 0.2.0 reference skipped: {REF_PYTHON.relative_to(REPO)} is absent. "
        "Create it with `sh benchmarks/setup_reference.sh` (python3 -m venv .venv-ref && "
        ".venv-ref/bin/pip install trama==0.2.0 numpy)."
    )


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine_info() -> dict[str, Any]:
    """The machine and the versions the figures were measured with (nothing imported)."""
    info: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_total_bytes": _memory_total(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "first_touch_gb_per_s": [first_touch_rate() for _ in range(3)],
        "versions": {name: _version(name) for name in ("trama", "numpy", "pybase64", "xxhash", "safetensors")},
    }
    if reference_available():
        probe = subprocess.run(
            [
                str(REF_PYTHON),
                "-c",
                "import json, platform, numpy, trama; print(json.dumps({'python': platform.python_version(), "
                "'trama': trama.__version__, 'numpy': numpy.__version__}))",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        info["reference"] = json.loads(probe.stdout) if probe.returncode == 0 else {"error": probe.stderr[-500:]}
    else:
        info["reference"] = None
    return info


def describe_machine(info: dict[str, Any]) -> str:
    versions = info["versions"]
    memory = info["memory_total_bytes"]
    parts = [
        f"{info['date']}",
        f"{info['cpu_model']}, {info['cpu_count']} CPUs ({info['cpus_usable']} usable)",
        f"{memory / 2**30:.1f} GiB RAM" if memory else "RAM unknown",
        info["platform"],
        "first write to fresh memory: "
        + ", ".join(f"{rate:.1f}" for rate in info["first_touch_gb_per_s"] if rate)
        + " GB/s (3 fresh processes; see README on noisy machines)",
        f"Python {info['python']}",
        ", ".join(f"{name} {version}" for name, version in versions.items() if version),
    ]
    ref = info.get("reference")
    if ref and "trama" in ref:
        parts.append(f"reference: trama {ref['trama']} (Python {ref['python']}, numpy {ref['numpy']})")
    return "machine: " + "\n         ".join(parts)


def write_json(name: str, data: dict[str, Any]) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def write_text(name: str, text: str) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    path.write_text(text + "\n")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table; the first column is left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


def per_call_rows(
    seconds: dict[str, float], reference: str, names: dict[str, str], unit: float, label: str, suffix: str = ""
) -> list[list[str]]:
    """Table rows of per-call times against the ``reference`` case: name, time in ``label``
    units, ratio, and the difference in microseconds."""
    base = seconds[reference]
    return [
        [names[case] + suffix, f"{value / unit:.3f} {label}", ratio(value / base, 3), f"{1e6 * (value - base):+.1f}"]
        for case, value in seconds.items()
    ]


def ratio(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def verdict(value: float | None, target: float, *, at_most: bool = True) -> str:
    """``met`` / ``MISSED`` against a target (printed, never asserted)."""
    if value is None:
        return "n/a"
    ok = value <= target if at_most else value >= target
    return "met" if ok else "MISSED"


def profile_call(fn: Callable[[], Any], *, limit: int = 25) -> tuple[Any, str]:
    """Run ``fn`` under cProfile; return its result and the top functions by own time and by
    cumulative time (paths shortened to the repository and site-packages)."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    result = profiler.runcall(fn)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    for order in ("tottime", "cumulative"):
        text.write(f"--- top {limit} by {order} ---\n")
        stats.sort_stats(order).print_stats(limit)
    report = text.getvalue().replace(str(REPO) + "/", "")
    for folder in sorted({p for p in sys.path if p.endswith("site-packages")}, key=len, reverse=True):
        report = report.replace(folder + "/", "site-packages/")
    report = report.replace(str(Path(os.__file__).parent) + "/", "stdlib/")
    return result, report
