"""The fuzz of safetensors weights files (:mod:`reliability.fuzz_safetensors`) in CI: a fixed
seed, a bounded number of cases, none ending other than accepted with the original values or
refused with a trama error. Then its checks themselves: harmless rewrites of a weights file are
accepted with the same values, and a value changed behind trama's back is caught as ``other``.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reliability import fuzz_safetensors
from reliability.fuzz_safetensors import SidecarSeed, build_seeds, classify, join, split
from reliability.fuzzing import describe_others, fuzz_cases

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the fuzz forks its cases (POSIX)")

#: Cases run in CI: about 10 s on two cores.
CASES = 1_000


def test_fuzzed_weights_files_give_the_original_values_or_a_trama_error(
    fuzz_report: Callable[..., dict[str, Any]],
) -> None:
    report = fuzz_report("fuzz_safetensors", cases=fuzz_cases(CASES))
    assert report["other"] == 0, describe_others("fuzz_safetensors", report)
    stages = report["stages"]
    if report["cases"] < CASES:  # too few cases (TRAMA_FUZZ_CASES) may not show both verdicts
        return
    # Both verdicts are common: the fuzz neither breaks every file nor leaves them all intact.
    assert report["accepted"] > report["cases"] // 10, stages
    assert stages.get("refused@load", 0) > report["cases"] // 10, stages
    assert stages.get("refused@tensors", 0) > report["cases"] // 10, stages


@pytest.fixture
def seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[SidecarSeed]:
    built = build_seeds(tmp_path / "seeds")
    (tmp_path / "cases").mkdir()
    monkeypatch.setattr(fuzz_safetensors, "SEEDS", built)
    monkeypatch.setattr(fuzz_safetensors, "SCRATCH", [tmp_path / "cases"])
    return built


def test_seeds_cover_every_dtype(seeds: list[SidecarSeed]) -> None:
    bag = next(seed for seed in seeds if seed.name == "bag")
    codes = {entry["dtype"] for key, entry in bag.header.items() if key != "__metadata__"}
    assert {"F32", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"} <= codes
    assert any(shape == () for _, shape, _ in bag.originals.values())  # 0-d
    assert any(0 in shape for _, shape, _ in bag.originals.values())  # empty


def test_seeds_are_in_both_formats_read(seeds: list[SidecarSeed]) -> None:
    """Each model is a seed as ``dump`` writes it (1.3) and in the flat form (1.2), with the same
    tensors in its weights file."""
    versions = {seed.name: json.loads(seed.document)["format_version"] for seed in seeds}
    assert versions == {"bag": "1.3", "mlp": "1.3", "bag_1_2": "1.2", "mlp_1_2": "1.2"}
    by_name = {seed.name: seed for seed in seeds}
    for name in ("bag", "mlp"):
        assert by_name[name].originals == by_name[f"{name}_1_2"].originals


@pytest.mark.parametrize("rewrite", ["relayout", "reformat"])
def test_harmless_rewrites_are_accepted_with_the_same_values(seeds: list[SidecarSeed], rewrite: str) -> None:
    """Laying the tensors out in another order (offsets to match), or reformatting the header,
    changes no value: trama must accept the file, and the fuzz's check of every value passes."""
    for seed in seeds:
        for k in range(5):
            rng = random.Random(k)
            if rewrite == "relayout":
                weights = fuzz_safetensors._relayout(seed, rng)
            else:
                header, data = split(seed.weights)
                weights = join(json.dumps(header, indent=2).encode(), data)
            verdict = classify(weights, seed, rng)
            assert (verdict.outcome, verdict.detail) == ("accepted", ""), verdict


@pytest.mark.parametrize("name", ["bag", "bag_1_2"])
def test_a_value_changed_behind_tramas_back_is_other(
    seeds: list[SidecarSeed], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A flipped bit in a tensor: refused by its checksum; were trama not to check, the fuzz
    would report silent corruption."""
    seed = next(seed for seed in seeds if seed.name == name)
    header, data = split(seed.weights)
    key = next(key for key, entry in header.items() if key != "__metadata__" and entry["shape"] == [3, 4])
    begin = header[key]["data_offsets"][0]
    flipped = bytearray(data)
    flipped[begin] ^= 0x40
    weights = join(header, bytes(flipped))
    verdict = classify(weights, seed, random.Random(1))
    assert (verdict.outcome, verdict.stage) == ("refused", "tensors"), verdict

    from trama.format import _external

    monkeypatch.setattr(_external, "_verify", lambda expected, raw, location: None)
    monkeypatch.setattr(fuzz_safetensors, "VALIDATE_SHARE", 0.0)
    verdict = classify(weights, seed, random.Random(1))
    assert (verdict.outcome, verdict.stage) == ("other", "tensors"), verdict
    assert "silent corruption" in verdict.detail


def test_a_case_is_the_same_mutation_every_time(seeds: list[SidecarSeed]) -> None:
    first = [fuzz_safetensors.mutate_sidecar(seeds[0], random.Random(f"3/{k}")) for k in range(30)]
    again = [fuzz_safetensors.mutate_sidecar(seeds[0], random.Random(f"3/{k}")) for k in range(30)]
    assert first == again
    assert len({weights for weights, _ in first}) > 20
