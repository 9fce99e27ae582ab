"""Many bounded child processes for the price of one interpreter start.

A hostile case has to run in a process of its own (it may abort, hang or allocate without
bound), but starting Python, trama and the frameworks takes about a second, and the suites here
run hundreds of cases. So one worker process imports everything once, and each case runs in a
*fork* of it: a child with its own address-space limit (on what it may add to the worker's),
file-size limit and timeout, whose exit status, signal and output the worker records. A crash
or a hang costs one child, never the worker or the other cases.

Two uses:

* :func:`run_cli_batch`: each job is a ``trama ARGS...`` command line, run as the installed
  command runs it (``sys.exit(main(argv))``, an uncaught exception printed as a traceback and
  exit status 1), with its standard streams redirected to files. The result is an
  :class:`~reliability.isolation.Outcome` per job, as :func:`~reliability.isolation.run_cli`
  gives for one.
* :func:`run_cases`: each case is ``function(index)`` returning a JSON-able dict. The children
  run cases in batches (a fork per batch, not per case, to keep forks rare) and report each
  result on a pipe as soon as it is known; a child that dies or falls silent for
  ``case_timeout_s`` is killed, its case recorded as crashed or hung, and a new child takes
  up the next case.

POSIX only (``os.fork``). The worker is started by the caller (the fuzz modules' ``main``,
or :func:`run_cli_batch` through :func:`~reliability.isolation.run_isolated`), never inside
the pytest process, which may hold threads of its own.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import resource
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reliability.isolation import Outcome, run_isolated

__all__ = ["CliJob", "run_cases", "run_cli_batch", "run_jobs", "serve_cli"]

TESTS = Path(__file__).resolve().parents[1]
#: How many jobs run at once: the machines that run the suite have two cores.
PARALLEL = 2
#: What one job may write to each of its output files; more is an EFBIG error in the job.
OUTPUT_LIMIT = 16 << 20


@dataclass(frozen=True)
class CliJob:
    """``trama ARGV...`` with standard input from ``stdin`` (a path; ``/dev/null`` when None),
    run in ``cwd``, allowed ``memory_mb`` more address space than the worker and ``timeout_s``
    seconds."""

    argv: list[str]
    stdin: str | None = None
    cwd: str | None = None
    memory_mb: int = 1_500
    timeout_s: float = 60.0


def _vm_size() -> int:
    """The address space this process uses now, in bytes."""
    match = re.search(r"VmSize:\s+(\d+) kB", Path("/proc/self/status").read_text())
    if match is None:  # not Linux: no base to add to, so the limit is the budget alone
        return 0
    return int(match.group(1)) * 1024


def _limit_child(memory_mb: int) -> None:
    """In a fresh fork: bound what it may add to the address space it inherited, what it may
    write to a file, and leave no core file behind."""
    os.setpgid(0, 0)
    limit = _vm_size() + memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _own_group(pid: int) -> None:
    """Put a new child in a process group of its own from the parent's side too, so that a
    kill of the group cannot come before the child made it (the usual double call)."""
    with contextlib.suppress(OSError):  # the child did it first, or already exited
        os.setpgid(pid, pid)


def _status(status: int) -> int:
    """A wait status as subprocess reports it: the exit code, or minus the killing signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _run_cli_child(job: CliJob, out: int, err: int) -> None:
    """The body of a forked child: become ``trama ARGV`` and exit as the command would."""
    code: Any = 1
    try:
        _limit_child(job.memory_mb)
        stdin = os.open(job.stdin or os.devnull, os.O_RDONLY | os.O_NONBLOCK if job.stdin is None else os.O_RDONLY)
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        if job.cwd is not None:
            os.chdir(job.cwd)
        encoding = sys.__stdout__.encoding if sys.__stdout__ is not None else "utf-8"
        sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115 - lives as long as the child
        sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.argv = ["trama", *job.argv]
        from trama.tools.cli import main

        code = main(job.argv)
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # what the interpreter's final flush would report
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 120
    os._exit(code or 0)


@dataclass
class _Running:
    """A job's child while it runs: its pid, deadline and output files."""

    index: int
    pid: int
    deadline: float
    out: Path
    err: Path


def _start(index: int, job: CliJob, scratch: Path) -> _Running:
    out_path, err_path = scratch / f"{index}.out", scratch / f"{index}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            _run_cli_child(job, out.fileno(), err.fileno())
    _own_group(pid)
    return _Running(index, pid, time.monotonic() + job.timeout_s, out_path, err_path)


def _finish(running: _Running, returncode: int, timed_out: bool) -> Outcome:
    outcome = Outcome(
        returncode,
        running.out.read_bytes().decode("utf-8", "replace"),
        running.err.read_bytes().decode("utf-8", "replace"),
        timed_out,
    )
    running.out.unlink()
    running.err.unlink()
    return outcome


def run_jobs(jobs: Sequence[CliJob], scratch: Path, parallel: int = PARALLEL) -> list[Outcome]:
    """Every job in a fork of this process, at most ``parallel`` at a time; a child past its
    deadline is killed (its whole process group) and recorded as timed out."""
    outcomes: dict[int, Outcome] = {}
    queue = list(enumerate(jobs))
    running: dict[int, _Running] = {}
    pause = 0.0005
    while queue or running:
        while queue and len(running) < parallel:
            index, job = queue.pop(0)
            child = _start(index, job, scratch)
            running[child.pid] = child
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid in running:
            child = running.pop(pid)
            outcomes[child.index] = _finish(child, _status(status), False)
            pause = 0.0005
            continue
        now = time.monotonic()
        for child in [c for c in running.values() if now > c.deadline]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            _, status = os.waitpid(child.pid, 0)
            del running[child.pid]
            outcomes[child.index] = _finish(child, _status(status), True)
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
    return [outcomes[index] for index in range(len(jobs))]


def serve_cli(jobs_path: str, results_path: str, preload: Sequence[str] = ()) -> None:
    """The worker: import ``preload`` (module names), then run each job of the JSON file
    ``jobs_path`` in a fork, writing the outcomes to ``results_path``."""
    for module in preload:
        importlib.import_module(module)
    _warm_up()
    jobs = [CliJob(**job) for job in json.loads(Path(jobs_path).read_text())]
    with tempfile.TemporaryDirectory(prefix="forkrun-") as scratch:
        outcomes = run_jobs(jobs, Path(scratch))
    Path(results_path).write_text(json.dumps([asdict(outcome) for outcome in outcomes]))


def _warm_up() -> None:
    """Do once, in the worker, what every command does the first time: load the plugins,
    build the JSON Schema validator, import the numpy kernels (by running each reading command
    on a tiny model, output thrown away). A child then starts where a command would be after
    its first document; without this, each spends a twentieth of a second or more on it. JAX
    is not warmed: starting its backend starts threads, which a fork must not inherit."""
    import contextlib

    import numpy as np

    import trama
    from trama.tools.cli import main

    x = trama.Ref(trama.INPUT, "x")
    model = trama.Model(
        ["x"],
        [trama.Ref("net", "y")],
        [
            trama.Node("net", "Sequential", {"x": x}, ["y"], output_bindings={"y": trama.Ref("net.act", "y")}),
            trama.Node("net.fc", "Linear", {"x": x}, ["y"], {"in_features": "n", "out_features": "n", "weight": "w"}),
            trama.Node("net.act", "relu", {"x": trama.Ref("net.fc", "y")}, ["y"]),
        ],
        {"n": trama.Parameter(2), "w": trama.Parameter(trama.Tensor.from_array(np.eye(2, dtype=np.float32)))},
    )
    with tempfile.TemporaryDirectory(prefix="forkrun-warm-") as folder:
        document, inputs = Path(folder) / "m.trama.json", Path(folder) / "x.npy"
        trama.dump(model, document)
        np.save(inputs, np.ones((1, 2), np.float32))
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            for argv in (["validate"], ["ssa"], ["info"], ["run"], ["profile"]):
                extra = ["--input", f"x={inputs}"] if argv[0] in ("run", "profile") else []
                main([*argv, str(document), *extra])


#: What the CLI imports, and the frameworks its runtimes use: imported once, by the worker.
CLI_PRELOAD = ("trama.tools.cli", "trama_numpy", "numpy")
FRAMEWORK_PRELOAD = ("torch", "trama_torch", "jax", "trama_jax")


def run_cli_batch(jobs: Sequence[CliJob], *, preload: Sequence[str] = CLI_PRELOAD) -> list[Outcome]:
    """Run every job in its own fork of one worker; the outcomes, in order. The worker itself
    runs bounded (:func:`~reliability.isolation.run_isolated`), its time the sum of the jobs'."""
    with tempfile.TemporaryDirectory(prefix="forkrun-") as folder:
        jobs_path, results_path = Path(folder) / "jobs.json", Path(folder) / "results.json"
        jobs_path.write_text(json.dumps([asdict(job) for job in jobs]))
        code = (
            "import sys\n"
            f"sys.path.insert(0, {str(TESTS)!r})\n"
            "from reliability.forkrun import serve_cli\n"
            f"serve_cli({str(jobs_path)!r}, {str(results_path)!r}, {list(preload)!r})\n"
        )
        # The jobs bound themselves; the worker's own limits are a net under the whole batch.
        worker = run_isolated(code, memory_mb=16_000, timeout_s=60 + sum(job.timeout_s for job in jobs))
        if worker.returncode != 0 or not results_path.exists():
            raise RuntimeError(f"the fork worker failed:\n{worker.describe()}")
        return [Outcome(**result) for result in json.loads(results_path.read_text())]


# --- cases reported on a pipe ---------------------------------------------------------------------


def _case_child(function: Callable[[int], dict[str, Any]], indices: Sequence[int], write: int, memory_mb: int) -> None:
    """A forked child: run the cases in order, one JSON line each on ``write``."""
    code = 0
    try:
        _limit_child(memory_mb)
        with open(write, "w", encoding="utf-8", errors="backslashreplace") as pipe:
            for index in indices:
                result = function(index)
                pipe.write(json.dumps({"index": index, **result}, ensure_ascii=True) + "\n")
                pipe.flush()
    except BaseException:
        traceback.print_exc()
        code = 1
    os._exit(code)


@dataclass
class _Batch:
    """A child running a batch of cases: its pid, the read end of its pipe, the cases, how
    many it reported, and when it last did."""

    pid: int
    pipe: Any
    cases: list[int]
    reported: int
    last: float
    buffer: bytes = b""


def _spawn(function: Callable[[int], dict[str, Any]], cases: list[int], memory_mb: int) -> _Batch:
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        _case_child(function, cases, write, memory_mb)
    os.close(write)
    _own_group(pid)
    return _Batch(pid, os.fdopen(read, "rb", buffering=0), cases, 0, time.monotonic())


def run_cases(
    function: Callable[[int], dict[str, Any]],
    indices: Iterable[int],
    *,
    case_timeout_s: float = 10.0,
    memory_mb: int = 2_000,
    batch: int = 100,
    parallel: int = PARALLEL,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """``function(index)`` for every index, in forked children (``parallel`` at a time, each
    running ``batch`` cases in a row), returning each case's result by index.

    A child that dies mid-batch (a signal, ``os._exit``, an exception outside ``function``)
    or reports nothing for ``case_timeout_s`` is killed; the case it was on is recorded as
    ``{"outcome": "other", "stage": "crash"|"hang", "detail": ...}`` and the rest of its batch
    goes to a new child. ``on_result`` sees each result as it arrives (for progress)."""
    todo = list(indices)
    queue = [todo[k : k + batch] for k in range(0, len(todo), batch)]
    results: dict[int, dict[str, Any]] = {}
    active: list[_Batch] = []

    def settle(child: _Batch, *, hung: bool) -> None:
        """The child ended or stalled: record the case it was on, queue the rest."""
        if hung:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        _, status = os.waitpid(child.pid, 0)
        child.pipe.close()
        active.remove(child)
        if child.reported == len(child.cases):
            return
        index = child.cases[child.reported]
        if hung:
            stage, detail = "hang", f"no result after {case_timeout_s:.0f} s: killed"
        elif os.WIFSIGNALED(status):
            stage, detail = "crash", f"the process died of {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            stage, detail = (
                "crash",
                f"the process exited with status {os.WEXITSTATUS(status)} in the middle of the case",
            )
        results[index] = {"outcome": "other", "stage": stage, "detail": detail}
        if on_result is not None:
            on_result(index, results[index])
        rest = child.cases[child.reported + 1 :]
        if rest:
            queue.insert(0, rest)

    while queue or active:
        while queue and len(active) < parallel:
            active.append(_spawn(function, queue.pop(0), memory_mb))
        wait = max(0.0, min(child.last + case_timeout_s for child in active) - time.monotonic())
        ready, _, _ = select.select([child.pipe for child in active], [], [], wait)
        for child in [c for c in active if c.pipe in ready]:
            piece = child.pipe.read(1 << 16)
            if not piece:
                settle(child, hung=False)
                continue
            child.last = time.monotonic()
            *lines, child.buffer = (child.buffer + piece).split(b"\n")
            for line in lines:
                result = json.loads(line)
                index = result.pop("index")
                results[index] = result
                child.reported += 1
                if on_result is not None:
                    on_result(index, result)
        now = time.monotonic()
        for child in [c for c in active if now - c.last > case_timeout_s]:
            settle(child, hung=True)
    return results
