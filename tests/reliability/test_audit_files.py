"""Files an audit found trama mishandling: names a weights file must not inherit, and weights
files named many ways in one document.

**A dump that destroyed the good copy.** An external dump names its weights file after the
document (``model.trama.json`` -> ``model.<16 hex digits>.safetensors``). A document whose name
held a tab, a newline, a backslash, DEL, a no-break or zero-width space, a line separator, a
bidirectional override or a byte that is not UTF-8 gave its weights file that character too,
which the reader refuses in an external path: the dump succeeded and replaced the good copy with
a document that could not be loaded. The writer now leaves out what the reader refuses (one
predicate, ``trama.format._files.refused_in_path``, for both), and refuses, before replacing
anything, to commit a reference the reader would refuse.

**Amplification.** Weights files were cached by the path as spelled, so ``w.safetensors``,
``./w.safetensors``, ``././w.safetensors``... each opened the file again, read and parsed its
header again and held a descriptor: a 23 KB document naming one 12 MB file a thousand ways ran
``trama validate`` out of memory (a raw ``MemoryError``). Each file is now opened once per
document, however it is named (the same file through a link or a hard link too).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

import trama
from trama.format import _commit, _external
from trama.format._external import check_reference

from .isolation import run_cli
from .models import linear_model

# --- names a weights file must not inherit -----------------------------------------------------

#: Document names (before ``.trama.json``) holding each kind of character the reader refuses in
#: an external path; the last leaves nothing of its own.
HOSTILE_STEMS = {
    "tab": "a\tb",
    "newline": "a\nb",
    "backslash": "a\\b",
    "del": "a\x7fb",
    "no-break-space": "a\xa0b",
    "zero-width-space": "a\u200bb",
    "line-separator": "a\u2028b",
    "bidi-override": "a\u202eb",
    "not-utf8": os.fsdecode(b"a\xffb"),
    "nothing-left": "\t\u200b\u202e",
}

OLD = np.arange(6, dtype=np.float32).reshape(2, 3)
NEW = -np.arange(6, dtype=np.float32).reshape(2, 3) / 4


def weights_of(model: trama.Model) -> np.ndarray:
    value = model.parameters["lin.weight"].value
    assert isinstance(value, trama.Tensor)
    return value.numpy()


def external_paths(document: Path) -> list[str]:
    """The weights files a document names, sorted: format 1.3 (what ``dump`` writes) names its
    weights file once, in the top-level ``weights``; an ``external`` reference anywhere (a 1.2
    table entry, or a 1.3 tensor kept elsewhere) names one too."""
    data = json.loads(document.read_bytes())
    named: set[str] = set()
    if isinstance(data.get("weights"), str):
        named.add(data["weights"])
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            external = value.get("external")
            if isinstance(external, dict) and isinstance(external.get("path"), str):
                named.add(external["path"])
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return sorted(named)


@pytest.mark.parametrize("stem", HOSTILE_STEMS.values(), ids=HOSTILE_STEMS.keys())
@pytest.mark.parametrize("previous", ["inline", "external"])
def test_an_external_dump_writes_a_loadable_pair_or_keeps_the_good_copy(
    stem: str, previous: str, tmp_path: Path
) -> None:
    document = tmp_path / f"{stem}.trama.json"
    trama.dump(linear_model(OLD), document, weights=previous)  # type: ignore[arg-type]
    good = document.read_bytes()
    np.testing.assert_array_equal(weights_of(trama.load(document)), OLD)  # a good copy indeed

    try:
        trama.dump(linear_model(NEW), document, weights="external")
    except trama.WriteError:
        assert document.read_bytes() == good  # refused: the good copy is untouched
        np.testing.assert_array_equal(weights_of(trama.load(document)), OLD)
        return
    loaded = trama.load(document)
    np.testing.assert_array_equal(weights_of(loaded), NEW)
    assert trama.dumps(loaded) == trama.dumps(linear_model(NEW))  # equal, as the model dumped
    (path,) = external_paths(document)
    check_reference({"path": path, "key": "k", "checksum": "c"}, "/")  # the reader's own check
    # Dumped again, the superseded weights file (of the sanitized name) is collected.
    trama.dump(linear_model(OLD), document, weights="external")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".safetensors")) == external_paths(document)
    np.testing.assert_array_equal(weights_of(trama.load(document)), OLD)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_weights_stem_keeps_what_the_reader_accepts() -> None:
    assert _commit.weights_stem("model.trama.json") == "model"
    assert _commit.weights_stem("my model (v2).trama.json") == "my model (v2)"
    assert _commit.weights_stem("ré\tsumé.json") == "résumé"
    assert _commit.weights_stem("\u200b\u2028.trama.json") == _commit.FALLBACK_STEM
    long = _commit.weights_stem("é" * 300 + ".trama.json")
    assert len(long.encode()) <= _commit.MAX_STEM_BYTES
    assert long == "é" * (_commit.MAX_STEM_BYTES // 2)


def test_a_reference_the_reader_would_refuse_is_never_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the writer to name a weights file the reader refuses (as it did), the dump refuses
    before replacing anything: the good copy stays byte for byte, and nothing is left behind."""
    document = tmp_path / "a\tb.trama.json"
    trama.dump(linear_model(OLD), document)
    good = document.read_bytes()
    monkeypatch.setattr(_commit, "weights_stem", _commit.document_stem)  # the old naming
    with pytest.raises(trama.WriteError, match=r"which a reader refuses"):
        trama.dump(linear_model(NEW), document, weights="external")
    assert document.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [document.name]


# --- one weights file named many ways ----------------------------------------------------------


def weights_file(path: Path, *, padding: int) -> tuple[str, int]:
    """A safetensors file holding tensor ``w`` (two float32) and ``padding`` empty tensors, whose
    header is what makes it expensive to parse; the checksum of ``w`` and the file's size."""
    header: dict[str, Any] = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    for i in range(padding):
        header[f"pad{i:07d}"] = {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    data = np.array([1.5, -2.0], dtype="<f4").tobytes()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return "xxh3-64:" + xxhash.xxh3_64(data).hexdigest(), path.stat().st_size


def many_spellings_document(folder: Path, spellings: list[str], checksum: str) -> Path:
    """A valid document whose node reads one tensor entry per spelling of the weights path."""
    parameters = {
        f"p{i}": {
            "value": {
                "dtype": "float32",
                "shape": [2],
                "external": {"path": spelled, "key": "w", "checksum": checksum},
            },
            "learnable": True,
        }
        for i, spelled in enumerate(spellings)
    }
    node = {
        "id": "n",
        "parent": None,
        "op": "Identity",
        "inputs": {"x": {"node": "%input", "output": "x"}},
        "outputs": ["y"],
        "parameters": {f"p{i}": {"name": f"p{i}"} for i in range(len(spellings))},
        "output_bindings": None,
    }
    document = {
        "format_version": "1.2",
        "inputs": ["x"],
        "outputs": [{"node": "n", "output": "y"}],
        "nodes": [node],
        "parameters": parameters,
    }
    path = folder / "m.trama.json"
    path.write_text(json.dumps(document))
    return path


def spellings(count: int) -> list[str]:
    """``w.safetensors``, ``./w.safetensors``, ``././w.safetensors``... and through a symbolic
    link and a hard link to the same file."""
    return ["./" * i + "w.safetensors" for i in range(count)] + ["link.safetensors", "./hard.safetensors"]


def test_each_weights_file_is_opened_once_however_it_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checksum, _ = weights_file(tmp_path / "w.safetensors", padding=10)
    (tmp_path / "link.safetensors").symlink_to("w.safetensors")
    os.link(tmp_path / "w.safetensors", tmp_path / "hard.safetensors")
    document = many_spellings_document(tmp_path, spellings(200), checksum)
    opened: list[Path] = []
    real_open = _external.open_regular

    def counting_open(path: Path) -> tuple[int, int]:
        opened.append(path)
        return real_open(path)

    monkeypatch.setattr(_external, "open_regular", counting_open)
    model = trama.load(document, validate=False)
    assert len(opened) == 1, opened
    sources = {id(entry.value.source) for entry in model.parameters.values()}  # type: ignore[union-attr]
    assert len(sources) == len(model.parameters) == 202
    files = {id(entry.value.source.file) for entry in model.parameters.values()}  # type: ignore[union-attr]
    assert len(files) == 1
    for entry in model.parameters.values():
        np.testing.assert_array_equal(entry.value.numpy(), [1.5, -2.0])  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_validate_of_a_weights_file_named_many_ways_ends_cleanly(tmp_path: Path) -> None:
    """The audit's case, smaller: a 3.7 MB file whose header takes some 35 MB parsed, named 152
    ways, was some 5 GB of headers: under a 1.5 GB limit ``trama validate`` died of a raw
    ``MemoryError``."""
    checksum, size = weights_file(tmp_path / "w.safetensors", padding=60_000)
    (tmp_path / "link.safetensors").symlink_to("w.safetensors")
    os.link(tmp_path / "w.safetensors", tmp_path / "hard.safetensors")
    document = many_spellings_document(tmp_path, spellings(150), checksum)
    assert document.stat().st_size < 60_000
    assert size > 3_000_000
    outcome = run_cli("validate", str(document), memory_mb=1_500, timeout_s=60)
    assert not outcome.crashed, outcome.describe()
    assert not outcome.traceback, outcome.describe()
    assert outcome.returncode in (0, 1), outcome.describe()
    assert "MemoryError" not in outcome.stdout + outcome.stderr, outcome.describe()
    lines = outcome.stdout.splitlines()
    assert lines, outcome.describe()
    assert all(line.startswith(str(document)) for line in lines), outcome.describe()
