"""Run a risky piece of Python in a child process, bounded in time and memory.

A hostile document may make a framework allocate without limit, abort the process (XLA's
SIGABRT) or spin. Such a case runs here, never in the test process: the child gets an address
space limit (``RLIMIT_AS``) and a wall-clock timeout, and the test reads back what happened, as
an :class:`Outcome`, whatever the child did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "case_outcomes", "run_cli", "run_isolated"]

REPO = Path(__file__).resolve().parents[2]

#: Address space granted to a child. The frameworks reserve much virtual memory at import
#: (JAX and torch several GiB), so the limit is on the address space a child may *add*.
DEFAULT_MEMORY_MB = 6_000
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Outcome:
    """What a child process did: its exit status (negative: killed by that signal) and output."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def crashed(self) -> bool:
        """Killed by a signal (SIGABRT, SIGSEGV, SIGBUS, SIGKILL) or by the timeout."""
        return self.timed_out or self.returncode < 0

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr

    def describe(self) -> str:
        return (
            f"rc={self.returncode} timed_out={self.timed_out}\n"
            f"stdout:\n{self.stdout[-2000:]}\nstderr:\n{self.stderr[-4000:]}"
        )


#: The child's first act: bound its own address space, then run the payload. The limit is set in
#: the child rather than by a ``preexec_fn``: a ``preexec_fn`` makes ``subprocess`` call the
#: interpreter's fork hooks, and JAX, once imported in the test process, warns from them (an
#: error under ``filterwarnings = error``).
_BOOT = """
import resource, sys
limit = int(sys.argv[1]) * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
mode, payload = sys.argv[2], sys.argv[3]
del sys.argv[1:4]
if mode == "code":
    exec(compile(payload, "<isolated>", "exec"), {"__name__": "__main__"})
else:
    from trama.tools.cli import main
    sys.exit(main(sys.argv[1:]))
"""


def _run(
    mode: str,
    payload: str,
    args: tuple[str, ...],
    *,
    memory_mb: int,
    timeout_s: float,
    cwd: Path | None,
    env: dict[str, str] | None,
) -> Outcome:
    argv = [sys.executable, "-c", _BOOT, str(memory_mb), mode, payload, *args]
    child_env = dict(os.environ)
    child_env.setdefault("JAX_PLATFORMS", "cpu")
    # Frameworks fan out to every core; the machines running the suite have two.
    child_env.setdefault("OMP_NUM_THREADS", "1")
    child_env.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    if env:
        child_env.update(env)
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=child_env,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        timed_out = True
    return Outcome(process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)


def run_isolated(
    code: str,
    *,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``code`` (dedented) with this interpreter in a child process under the given bounds."""
    return _run("code", textwrap.dedent(code), (), memory_mb=memory_mb, timeout_s=timeout_s, cwd=cwd, env=env)


def run_cli(
    *args: str,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``trama ARGS...`` (the installed command line) in a bounded child process."""
    return _run("cli", "", args, memory_mb=memory_mb, timeout_s=timeout_s, cwd=cwd, env=env)


def case_outcomes(code: str, names: Iterable[str], *, timeout_s: float) -> dict[str, Any]:
    """Run ``code`` in one bounded child that reports each case on a line ``CASE [name, result]``
    (a JSON pair), and return the results by name: the child must not crash, and must report
    every one of ``names``."""
    child = run_isolated(code, timeout_s=timeout_s)
    assert not child.crashed, child.describe()
    found = dict(json.loads(line[5:]) for line in child.stdout.splitlines() if line.startswith("CASE "))
    assert set(found) == set(names), child.describe()
    return found
