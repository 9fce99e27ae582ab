"""Shared fixtures of the reliability suite.

``fuzz_report`` runs a fuzz module's ``main`` in a bounded child process (the fuzzers fork a
child per batch of cases, which the pytest process itself must not do: it may hold threads) and
returns its JSON report. The number of cases is the test's own, unless ``TRAMA_FUZZ_CASES``
asks for more (``TRAMA_FUZZ_CASES=20000 pytest tests/reliability/test_fuzz_documents.py``), and
``TRAMA_FUZZ_SEED`` picks another seed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reliability.fuzzing import fuzz_seed
from reliability.isolation import run_isolated

TESTS = Path(__file__).resolve().parents[1]

#: Seconds a fuzz run may take per case, on top of a fixed allowance for building its seeds.
SECONDS_PER_CASE = 0.2


@pytest.fixture
def fuzz_report() -> Callable[..., dict[str, Any]]:
    """``fuzz_report("fuzz_documents", cases=N, extra=[...])``: the module's JSON report."""

    def run(module: str, *, cases: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
        argv = ["--cases", str(cases), "--seed", str(fuzz_seed()), "--json", *extra]
        code = (
            "import sys\n"
            f"sys.path.insert(0, {str(TESTS)!r})\n"
            f"from reliability.{module} import main\n"
            f"sys.exit(main({argv!r}))\n"
        )
        # The children bound themselves (reliability.forkrun); this is the net under the whole run.
        outcome = run_isolated(code, memory_mb=16_000, timeout_s=60 + SECONDS_PER_CASE * cases, cwd=TESTS)
        assert not outcome.crashed, outcome.describe()
        assert outcome.returncode == 0, outcome.describe()
        report: dict[str, Any] = json.loads(outcome.stdout)
        print(f"{module}: {json.dumps({k: report[k] for k in ('accepted', 'refused', 'other', 'seconds')})}")
        return report

    return run
