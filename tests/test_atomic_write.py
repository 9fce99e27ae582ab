"""dump() is atomic: when writing fails at any point, the previous file (and, with external
weights, the previous weights file) is left byte for byte as it was, and no temporary file
remains beside it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
import trama.format._serialization
from trama import Model, Node, Parameter, Ref, Tensor


class Exploding:
    """A tensor source whose bytes cannot be read (a corrupt file, a failing disk...)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def load(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        raise self.error

    def describe(self) -> str:
        return "exploding"


def model_with(values: dict[str, Any]) -> Model:
    """One leaf whose slots hold ``values`` (Tensors or scalars), in order."""
    names = {slot: f"bag.{slot}" for slot in values}
    return Model(
        inputs=["x"],
        outputs=[Ref("bag", "y")],
        nodes=[Node("bag", "Bag", {"x": Ref("%input", "x")}, ["y"], names)],
        parameters={names[slot]: Parameter(value, learnable=True) for slot, value in values.items()},
    )


def good_model(seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    return model_with(
        {
            "a": Tensor.from_array(rng.standard_normal((64, 64)).astype(np.float32)),
            "b": Tensor.from_array(rng.standard_normal(300).astype(np.float64)),
            "n": seed,
        }
    )


def failing_model(error: BaseException | None = None) -> Model:
    """Writes some of its text, then fails on its second tensor."""
    bad = Tensor("float32", (4,), source=Exploding(error or RuntimeError("disk on fire")))
    return model_with(
        {
            "a": Tensor.from_array(np.arange(4096, dtype=np.float32)),
            "bad": bad,
            "c": Tensor.from_array(np.ones(3, dtype=np.int8)),
        }
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def inline_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.trama.json"
    trama.dump(good_model(), path)
    return path


@pytest.fixture
def external_files(tmp_path: Path) -> Path:
    path = tmp_path / "model.trama.json"
    trama.dump(good_model(), path, weights="external")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "model.trama.json"]
    return path


# --------------------------------------------------------------------------------------------
# Inline
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [RuntimeError("disk on fire"), trama.TensorDataError("bad bytes"), KeyboardInterrupt()]
)
def test_inline_failure_midway_keeps_the_old_file(inline_file: Path, error: BaseException) -> None:
    before = snapshot(inline_file.parent)
    with pytest.raises(type(error)):
        trama.dump(failing_model(error), inline_file)
    assert snapshot(inline_file.parent) == before
    assert trama.load(inline_file).parameters == good_model().parameters


def test_inline_failure_really_happens_midway(inline_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Watch the temporary file: part of the new text was written when the failure struck.
    written: list[int] = []
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".tmp"):
            written.append(self.stat().st_size)
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    before = snapshot(inline_file.parent)
    with pytest.raises(RuntimeError):
        trama.dump(failing_model(), inline_file)
    assert written
    assert written[0] > 4096  # the first tensor's base64 was already on disk
    assert snapshot(inline_file.parent) == before


def fail_on_call(number: int, real: Callable[..., Any], error: BaseException) -> Callable[..., Any]:
    """A stand-in for ``real`` that raises ``error`` on its ``number``-th call (1-based)."""
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == number:
            raise error
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    ("target", "call"),
    [
        ("encode_base64", 2),  # while streaming the second tensor
        ("format_json", 1),  # before anything is written
        ("os.fsync", 1),  # everything written, not yet on disk
        ("os.replace", 1),  # the final rename
    ],
)
def test_inline_writer_failures_keep_the_old_file(
    inline_file: Path, monkeypatch: pytest.MonkeyPatch, target: str, call: int
) -> None:
    if target.startswith("os."):
        name = target.split(".")[1]
        monkeypatch.setattr(os, name, fail_on_call(call, getattr(os, name), OSError(28, "No space left on device")))
    else:
        real = getattr(trama.format._serialization, target)
        monkeypatch.setattr(trama.format._serialization, target, fail_on_call(call, real, OSError(28, "No space left")))
    before = snapshot(inline_file.parent)
    with pytest.raises(OSError, match="No space left"):
        trama.dump(good_model(seed=1), inline_file)
    assert snapshot(inline_file.parent) == before


def test_inline_failure_on_a_new_path_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        trama.dump(failing_model(), tmp_path / "new.trama.json")
    assert list(tmp_path.iterdir()) == []


def test_invalid_model_is_refused_before_writing(inline_file: Path) -> None:
    before = snapshot(inline_file.parent)
    broken = good_model(seed=1)
    broken.parameters["unused"] = Parameter(1)
    for weights in ("inline", "external"):
        with pytest.raises(trama.ValidationError, match="not referenced"):
            trama.dump(broken, inline_file, weights=weights)  # type: ignore[arg-type]
    assert snapshot(inline_file.parent) == before


def test_successful_dump_replaces_the_file_and_leaves_no_temporary(inline_file: Path) -> None:
    trama.dump(good_model(seed=1), inline_file)
    assert [p.name for p in inline_file.parent.iterdir()] == [inline_file.name]
    assert trama.load(inline_file).parameters == good_model(seed=1).parameters


def test_unwritable_folder_is_a_trama_error(tmp_path: Path) -> None:
    with pytest.raises(trama.TramaError, match="cannot write"):
        trama.dump(good_model(), tmp_path / "missing" / "model.trama.json")


# --------------------------------------------------------------------------------------------
# External weights: both files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_external_failure_reading_a_tensor_keeps_both_files(external_files: Path, error: BaseException) -> None:
    before = snapshot(external_files.parent)
    with pytest.raises(type(error)):
        trama.dump(failing_model(error), external_files, weights="external")
    assert snapshot(external_files.parent) == before


def partial_safetensors(file: Any, arrays: dict[str, np.ndarray]) -> dict[str, str]:
    file.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{")  # the start of a header, then the failure
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    "inject",
    [
        "write_safetensors",  # while writing the weights
        "format_json",  # weights written to their temporary file, document not started
        "fsync-document",  # both written, the document not yet on disk
        "replace-weights",  # both complete, the first rename fails
    ],
)
def test_external_writer_failures_keep_both_files(
    external_files: Path, monkeypatch: pytest.MonkeyPatch, inject: str
) -> None:
    error = OSError(28, "No space left on device")
    if inject == "write_safetensors":
        monkeypatch.setattr(trama.format._serialization, "write_safetensors", partial_safetensors)
    elif inject == "format_json":
        serialization = trama.format._serialization
        monkeypatch.setattr(serialization, "format_json", fail_on_call(1, serialization.format_json, error))
    elif inject == "fsync-document":
        monkeypatch.setattr(os, "fsync", fail_on_call(2, os.fsync, error))
    else:
        monkeypatch.setattr(os, "replace", fail_on_call(1, os.replace, error))
    before = snapshot(external_files.parent)
    with pytest.raises(OSError, match="No space left"):
        trama.dump(good_model(seed=1), external_files, weights="external")
    assert snapshot(external_files.parent) == before
    assert trama.load(external_files).parameters == good_model().parameters


def test_external_document_rename_failure_is_detected_not_misread(
    external_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # If the last step (renaming the document) fails, the new weights are already in place.
    # The old document must then refuse them (checksums) rather than hand out wrong numbers.
    monkeypatch.setattr(os, "replace", fail_on_call(2, os.replace, OSError(5, "I/O error")))
    old_document = external_files.read_bytes()
    with pytest.raises(OSError, match="I/O error"):
        trama.dump(good_model(seed=1), external_files, weights="external")
    monkeypatch.undo()
    assert external_files.read_bytes() == old_document
    assert not [p for p in external_files.parent.iterdir() if p.name.endswith(".tmp")]
    model = trama.load(external_files)
    with pytest.raises(trama.WeightsFileError, match="checksum"):
        np.asarray(model.parameters["bag.a"].value)


def test_successful_external_dump_replaces_both_and_leaves_no_temporary(external_files: Path) -> None:
    trama.dump(good_model(seed=1), external_files, weights="external")
    assert sorted(p.name for p in external_files.parent.iterdir()) == ["model.safetensors", "model.trama.json"]
    assert trama.load(external_files).parameters == good_model(seed=1).parameters


def test_external_failure_on_new_paths_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        trama.dump(failing_model(), tmp_path / "new.trama.json", weights="external")
    assert list(tmp_path.iterdir()) == []
