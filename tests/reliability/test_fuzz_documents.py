"""The structural fuzz of documents (:mod:`reliability.fuzz_documents`) in CI: a fixed seed,
a bounded number of cases, and not one that ends other than accepted or refused with a trama
error. Then the fuzzer's own parts: a mutation is the same on every run, the text renderer
writes what ``json`` cannot, the harness turns a crash and a hang into ``other``, and the
silent-corruption check does catch a value that changed under an intact checksum.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from reliability import fuzz_documents
from reliability.fuzz_documents import Seed, classify, mutate
from reliability.fuzzing import Pairs, Raw, describe_others, fuzz_cases, render
from reliability.isolation import run_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the fuzz forks its cases (POSIX)")

TESTS = Path(__file__).resolve().parents[1]
#: Cases run in CI: about 15 s of cases on two cores, after some 8 s building the seeds.
CASES = 1_000


def test_fuzzed_documents_are_accepted_or_refused(fuzz_report: Callable[..., dict[str, Any]]) -> None:
    report = fuzz_report("fuzz_documents", cases=fuzz_cases(CASES))
    assert report["other"] == 0, describe_others("fuzz_documents", report)
    assert report["accepted"] + report["refused"] == report["cases"]
    # The fuzz reaches every stage: it is not refusing everything at the first bracket. (Too
    # few cases, from TRAMA_FUZZ_CASES, may not reach them all.)
    stages = report["stages"]
    if report["cases"] < CASES:
        return
    assert report["accepted"] > report["cases"] // 20, stages
    assert stages.get("refused@load", 0) > report["cases"] // 4, stages
    for stage in ("refused@tensors", "refused@registry", "refused@prepare:numpy", "accepted@ran"):
        assert stages.get(stage, 0) > 0, stages
    assert any(key.startswith("refused@run:") for key in stages), stages


# --- the fuzzer's parts ----------------------------------------------------------------------------


#: The forms a seed is written in: flat (format 1.2), and nested as ``dump`` writes it (1.3).
FORMATS = ("1.2", "1.3")


def _seed(
    tmp_path: Path, model: trama.Model, examples: dict[str, Any] | None = None, *, format_version: str = "1.3"
) -> Seed:
    path = tmp_path / "seed" / "model.trama.json"
    path.parent.mkdir()
    trama.dump(model, path, format_version=format_version)
    return fuzz_documents._seed("test", path, examples)


def _int64_model() -> trama.Model:
    table = trama.Tensor.from_array(np.arange(6, dtype=np.int64).reshape(2, 3))
    node = trama.Node("t", "Tag", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {"table": "t.table"})
    return trama.Model(["x"], [trama.Ref("t", "y")], [node], {"t.table": trama.Parameter(table)})


@pytest.mark.parametrize("format_version", FORMATS)
def test_a_case_is_the_same_mutation_every_time(tmp_path: Path, format_version: str) -> None:
    seed = _seed(tmp_path, _int64_model(), format_version=format_version)
    texts = {index: mutate(seed, random.Random(f"7/{index}")) for index in range(40)}
    again = {index: mutate(seed, random.Random(f"7/{index}")) for index in range(40)}
    assert texts == again
    assert len({text for text, _ in texts.values()}) > 30  # and different cases differ


def test_the_renderer_writes_what_json_cannot() -> None:
    tree = {"a": Pairs([("k", 1), ("k", 2)]), "deep": Raw("[" * 100_000 + "]" * 100_000), "big": 10**5000}
    text = render(tree)
    assert text.startswith(b'{"a": {"k": 1, "k": 2}, "deep": [[[')
    assert text.endswith(b"0" * 5000 + b"}")
    assert len(text) > 205_000
    assert render("\ud800", ascii_only=True) == b'"\\ud800"'
    assert render("\ud800", ascii_only=False) == b'"\xed\xa0\x80"'  # not UTF-8: a hostile byte sequence
    assert json.loads(render({"x": [1.5, None, True, "é"]}, ascii_only=False)) == {"x": [1.5, None, True, "é"]}


@pytest.mark.parametrize("format_version", FORMATS)
def test_silent_corruption_is_reported_as_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format_version: str
) -> None:
    """The int64 tensor relabelled float64 under its intact checksum: refused by trama; and
    were trama to skip the check, the fuzz would say so (this is what makes its 'no other'
    worth something)."""
    seed = _seed(tmp_path, _int64_model(), format_version=format_version)
    doc = json.loads(seed.text)
    if format_version == "1.2":
        doc["parameters"]["t.table"]["value"]["dtype"] = "float64"
    else:  # written in its node, the checksum beside it
        assert doc["nodes"][0]["set"]["table"]["dtype"] == "int64"
        doc["nodes"][0]["set"]["table"]["dtype"] = "float64"
    swapped = json.dumps(doc).encode()
    verdict = classify(swapped, seed, random.Random(0))
    assert (verdict.outcome, verdict.stage) == ("refused", "tensors"), verdict
    assert "checksum" in verdict.detail

    from trama.format import _tensor

    monkeypatch.setattr(_tensor.Base64Source, "_verify", lambda self, raw, dtype, shape: None)
    monkeypatch.setattr(fuzz_documents, "VALIDATE_SHARE", 0.0)
    verdict = classify(swapped, seed, random.Random(0))
    assert (verdict.outcome, verdict.stage) == ("other", "tensors"), verdict
    assert "silent corruption" in verdict.detail


def test_the_seeds_are_in_both_forms(tmp_path: Path) -> None:
    """Every model seed is there flat (1.2) and nested (1.3), and the nested mutations reach
    what only 1.3 has: blocks, instances, the weights file named once."""
    seeds = fuzz_documents.build_seeds(tmp_path, with_torch=False)
    versions = {seed.name: seed.tree.get("format_version") for seed in seeds}
    for name in ("calls", "settings", "blocks", "external"):
        assert (versions[name], versions[f"{name}_13"]) == ("1.2", "1.3"), versions
    by_name = {seed.name: seed for seed in seeds}
    assert "blocks" in by_name["blocks_13"].tree
    assert "weights" in by_name["external_13"].tree
    done = [
        what
        for name in ("blocks_13", "external_13", "calls_13")
        for k in range(300)
        for what in mutate(by_name[name], random.Random(f"5/{name}/{k}"))[1]
    ]
    for expected in ("block", "instance", "weights ->", "expansion bomb", "relative class", "reference ->"):
        assert any(expected in what for what in done), expected


def test_a_raw_exception_is_other_and_a_trama_error_is_refused(tmp_path: Path) -> None:
    from reliability.fuzzing import verdict_of

    assert verdict_of(trama.ValidationError("bad"), "load").outcome == "refused"
    assert verdict_of(trama.ValidationError(""), "load").outcome == "other"
    try:
        [][1]
    except IndexError as error:
        found = verdict_of(error, "run")
    assert (found.outcome, found.stage) == ("other", "run")
    assert found.detail.startswith("IndexError at test_fuzz_documents.py:")


def test_the_harness_turns_a_crash_and_a_hang_into_other() -> None:
    """Cases run in forked children: one that kills its process and one that never returns
    are each recorded, and every other case still runs."""
    code = f"""
        import json, os, signal, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        from reliability.forkrun import run_cases

        def case(index):
            if index == 5:
                os.kill(os.getpid(), signal.SIGSEGV)
            if index == 12:
                time.sleep(60)
            return {{"outcome": "accepted", "stage": "ran"}}

        print(json.dumps(run_cases(case, range(20), case_timeout_s=2, batch=8)))
    """
    outcome = run_isolated(code, timeout_s=60)
    assert outcome.returncode == 0, outcome.describe()
    results = {int(k): v for k, v in json.loads(outcome.stdout).items()}
    assert sorted(results) == list(range(20))
    assert results[5] == {"outcome": "other", "stage": "crash", "detail": "the process died of SIGSEGV"}
    assert (results[12]["outcome"], results[12]["stage"]) == ("other", "hang")
    assert all(results[k]["outcome"] == "accepted" for k in results if k not in (5, 12))
