"""Exports are deterministic: every zoo model gives the same bytes in two processes.

``digests.py`` exports the whole zoo and prints a digest of each model's bytes, inline and with
external weights (document and weights file). It runs twice, side by side, with the hash seeds
1 and 2 (a set's or a dict-of-ids' order would show up as other bytes), and every model's
digests must be equal. One test for the zoo, not one per model: each process builds every model
once, which is what makes two extra processes affordable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from realworld.models import ZOO

SCRIPT = Path(__file__).with_name("digests.py")


def _digests(outputs: list[str]) -> dict[str, dict[str, str]]:
    found = {}
    for line in outputs:
        record = json.loads(line)
        found[record.pop("model")] = record
    return found


def test_every_zoo_model_exports_the_same_bytes_in_two_processes_with_other_hash_seeds() -> None:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONHASHSEED"}
    runs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT)],
            env={**environment, "PYTHONHASHSEED": seed},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in ("1", "2")
    ]
    results = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=1800)
        assert run.returncode == 0, stderr[-3000:]
        results.append(_digests(stdout.splitlines()))
    first, second = results
    assert sorted(first) == sorted(entry.name for entry in ZOO)
    errors = {name: record["error"] for name, record in first.items() if "error" in record}
    differing = sorted(name for name in first if first[name] != second[name])
    assert not differing, f"exported other bytes in the second process: {differing}"
    assert not errors, errors
