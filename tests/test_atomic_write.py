"""dump() is atomic: when writing fails at any point, the previous file (and, with external
weights, the previous weights file) is left byte for byte as it was, and no temporary file
remains beside it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
import trama.format._commit
import trama.format._serialization
from trama import Model, Node, Parameter, Ref, Tensor
from trama.errors import WriteError


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
    assert sorted(p.name for p in tmp_path.iterdir()) == [trama.weights_path(path).name, "model.trama.json"]
    return path


# --------------------------------------------------------------------------------------------
# Inline
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize(
    "error", [RuntimeError("disk on fire"), trama.TensorDataError("bad bytes"), KeyboardInterrupt()]
)
def test_inline_failure_midway_keeps_the_old_file(inline_file: Path, error: BaseException, version: str) -> None:
    before = snapshot(inline_file.parent)
    with pytest.raises(type(error)):
        trama.dump(failing_model(error), inline_file, format_version=version)
    assert snapshot(inline_file.parent) == before
    assert trama.load(inline_file).parameters == good_model().parameters


def test_inline_failure_really_happens_midway(inline_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Watch the temporary file: part of the new text was handed to it when the failure struck
    # (while the second tensor's base64 was being encoded).
    written: list[int] = []
    real_write = trama.format._commit.TempFile.write

    def write(self: trama.format._commit.TempFile, data: bytes | memoryview) -> None:
        written.append(len(data))
        real_write(self, data)

    monkeypatch.setattr(trama.format._commit.TempFile, "write", write)
    serialization = trama.format._serialization
    monkeypatch.setattr(serialization, "encode_base64", fail_on_call(2, serialization.encode_base64, RuntimeError()))
    before = snapshot(inline_file.parent)
    with pytest.raises(RuntimeError):
        trama.dump(good_model(seed=1), inline_file)
    assert sum(written) > 64 * 64 * 4  # the first tensor's base64 was already written
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


#: The writer of each format's text: the nested one (1.3, the default), the flat one (1.2).
PIECES = {"1.3": "model_pieces_13", "1.2": "model_pieces"}


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize(
    ("target", "call"),
    [
        ("encode_base64", 2),  # while streaming the second tensor
        ("pieces", 1),  # before anything is written
        ("os.fsync", 1),  # everything written, not yet on disk
        ("os.replace", 1),  # the final rename
    ],
)
def test_inline_writer_failures_keep_the_old_file(
    inline_file: Path, monkeypatch: pytest.MonkeyPatch, target: str, call: int, version: str
) -> None:
    if target.startswith("os."):
        name = target.split(".")[1]
        monkeypatch.setattr(os, name, fail_on_call(call, getattr(os, name), OSError(28, "No space left on device")))
    else:
        target = PIECES[version] if target == "pieces" else target
        real = getattr(trama.format._serialization, target)
        error = OSError(28, "No space left on device")
        monkeypatch.setattr(trama.format._serialization, target, fail_on_call(call, real, error))
    before = snapshot(inline_file.parent)
    with pytest.raises(WriteError, match="No space left") as caught:
        trama.dump(good_model(seed=1), inline_file, format_version=version)
    assert str(caught.value) == f"cannot write {str(inline_file)!r}: No space left on device"
    assert snapshot(inline_file.parent) == before


def test_inline_failure_on_a_new_path_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        trama.dump(failing_model(), tmp_path / "new.trama.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_invalid_model_is_refused_before_writing(inline_file: Path, version: str) -> None:
    before = snapshot(inline_file.parent)
    broken = good_model(seed=1)
    broken.parameters["unused"] = Parameter(1)
    for weights in ("inline", "external"):
        with pytest.raises(trama.ValidationError, match="not referenced"):
            trama.dump(broken, inline_file, weights=weights, format_version=version)  # type: ignore[arg-type]
    assert snapshot(inline_file.parent) == before


def test_successful_dump_replaces_the_file_and_leaves_no_temporary(inline_file: Path) -> None:
    trama.dump(good_model(seed=1), inline_file)
    assert [p.name for p in inline_file.parent.iterdir()] == [inline_file.name]
    assert trama.load(inline_file).parameters == good_model(seed=1).parameters


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_a_missing_folder_is_one_write_error(tmp_path: Path, weights: str) -> None:
    target = tmp_path / "missing" / "model.trama.json"
    with pytest.raises(WriteError) as caught:
        trama.dump(good_model(), target, weights=weights)  # type: ignore[arg-type]
    assert str(caught.value) == f"cannot write {str(target)!r}: No such file or directory"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_a_path_that_is_a_folder_is_one_write_error(tmp_path: Path, weights: str) -> None:
    target = tmp_path / "model.trama.json"
    target.mkdir()
    (target / "inside").write_bytes(b"kept")
    with pytest.raises(WriteError) as caught:
        trama.dump(good_model(), target, weights=weights)  # type: ignore[arg-type]
    assert str(caught.value) == f"cannot write {str(target)!r}: it is a folder"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert (target / "inside").read_bytes() == b"kept"


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_a_fifo_at_the_path_is_not_replaced(tmp_path: Path, weights: str) -> None:
    target = tmp_path / "model.trama.json"
    os.mkfifo(target)
    with pytest.raises(WriteError, match="it is not a regular file") as caught:
        trama.dump(good_model(), target, weights=weights)  # type: ignore[arg-type]
    assert str(target) in str(caught.value)
    assert stat.S_ISFIFO(target.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_a_link_to_a_device_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "model.trama.json"
    target.symlink_to("/dev/null")
    with pytest.raises(WriteError, match="it is not a regular file"):
        trama.dump(good_model(), target)
    assert target.is_symlink()
    assert stat.S_ISCHR(target.stat().st_mode)


def test_a_folder_appearing_at_the_path_while_writing_is_one_write_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check before writing passes; the final rename then meets a folder.
    target = tmp_path / "model.trama.json"
    real_sync = trama.format._commit.TempFile.sync

    def sync(self: trama.format._commit.TempFile) -> None:
        real_sync(self)
        target.mkdir(exist_ok=True)

    monkeypatch.setattr(trama.format._commit.TempFile, "sync", sync)
    with pytest.raises(WriteError, match="cannot write"):
        trama.dump(good_model(), target, weights="external")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # neither weights nor temporaries left
    assert target.is_dir()


def test_a_path_no_file_can_have_is_one_write_error(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match="cannot be encoded"):
        trama.dump(good_model(), tmp_path / "bad\ud800.trama.json")
    with pytest.raises(WriteError, match="cannot be encoded"):
        trama.dump(good_model(), tmp_path / "bad\x00.trama.json", weights="external")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# External weights: both files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_external_failure_reading_a_tensor_keeps_both_files(external_files: Path, error: BaseException) -> None:
    before = snapshot(external_files.parent)
    with pytest.raises(type(error)):
        trama.dump(failing_model(error), external_files, weights="external")
    assert snapshot(external_files.parent) == before


def partial_safetensors(write: Callable[[bytes], object], tensors: Any, **kwargs: Any) -> Any:
    write(b"\x10\x00\x00\x00\x00\x00\x00\x00{")  # the start of a header, then the failure
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize(
    "inject",
    [
        "write_safetensors",  # while writing the weights
        "pieces",  # weights written to their temporary file, document not started
        "fsync-document",  # both written, the document not yet on disk
        "replace-weights",  # both complete, renaming the weights into place fails
        "fsync-folder",  # the weights renamed into place, not yet durable: the document waits
        "replace-document",  # the weights in place, the commit itself fails
    ],
)
def test_external_writer_failures_keep_both_files(
    external_files: Path, monkeypatch: pytest.MonkeyPatch, inject: str, version: str
) -> None:
    error = OSError(28, "No space left on device")
    if inject == "write_safetensors":
        monkeypatch.setattr(trama.format._serialization, "write_safetensors", partial_safetensors)
    elif inject == "pieces":
        serialization = trama.format._serialization
        pieces = PIECES[version]
        monkeypatch.setattr(serialization, pieces, fail_on_call(1, getattr(serialization, pieces), error))
    elif inject in ("fsync-document", "fsync-folder"):
        monkeypatch.setattr(os, "fsync", fail_on_call(2 if inject == "fsync-document" else 3, os.fsync, error))
    else:
        call = 1 if inject == "replace-weights" else 2
        monkeypatch.setattr(os, "replace", fail_on_call(call, os.replace, error))
    before = snapshot(external_files.parent)
    with pytest.raises(WriteError, match="No space left") as caught:
        trama.dump(good_model(seed=1), external_files, weights="external", format_version=version)
    assert str(caught.value) == f"cannot write {str(external_files)!r}: No space left on device"
    monkeypatch.undo()
    assert snapshot(external_files.parent) == before
    assert trama.load(external_files).parameters == good_model().parameters


def test_the_weights_are_durable_before_the_document_names_them(
    external_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Order of what reaches the disk: weights file synced, then renamed and the folder synced,
    # then the document synced and renamed (the commit), then the folder synced again.
    trace: list[str] = []
    monkeypatch.setattr(trama.format._commit, "step_hook", lambda kind: trace.append(kind))
    trama.dump(good_model(seed=1), external_files, weights="external")
    steps = [kind for kind in trace if kind != "write"]
    assert steps[:6] == ["create", "fsync", "create", "fsync", "lock", "rename"]
    assert steps[6:9] == ["fsync-folder", "rename", "fsync-folder"]
    assert "unlink" in steps[9:]  # the previous weights file, collected after the commit


def test_successful_external_dump_replaces_both_and_leaves_no_temporary(external_files: Path) -> None:
    old_weights = trama.weights_path(external_files)
    trama.dump(good_model(seed=1), external_files, weights="external")
    new_weights = trama.weights_path(external_files)
    assert new_weights != old_weights
    assert sorted(p.name for p in external_files.parent.iterdir()) == [new_weights.name, "model.trama.json"]
    assert trama.load(external_files).parameters == good_model(seed=1).parameters


def test_external_failure_on_new_paths_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        trama.dump(failing_model(), tmp_path / "new.trama.json", weights="external")
    assert list(tmp_path.iterdir()) == []


def test_external_to_inline_and_back_collects_the_weights(external_files: Path) -> None:
    folder = external_files.parent
    trama.dump(good_model(seed=1), external_files)
    assert [p.name for p in folder.iterdir()] == ["model.trama.json"]
    trama.dump(good_model(seed=2), external_files, weights="external")
    assert sorted(p.name for p in folder.iterdir()) == [trama.weights_path(external_files).name, "model.trama.json"]
    assert trama.load(external_files).parameters == good_model(seed=2).parameters


def test_the_same_content_gets_the_same_weights_file(external_files: Path) -> None:
    first = trama.weights_path(external_files)
    trama.dump(good_model(), external_files, weights="external")
    assert trama.weights_path(external_files) == first
    assert sorted(p.name for p in external_files.parent.iterdir()) == [first.name, "model.trama.json"]


def test_only_this_documents_weights_files_are_collected(tmp_path: Path) -> None:
    # model.json shares the prefix "model." with model.trama.json, but not its weights files;
    # a file merely named like one, or written by someone else, is never removed.
    ours = tmp_path / "model.trama.json"
    sibling = tmp_path / "model.json"
    trama.dump(good_model(seed=1), sibling, weights="external")
    trama.dump(good_model(seed=2), ours, weights="external")
    lookalike = tmp_path / "model.0123456789abcdef.safetensors"
    lookalike.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    sibling_weights = trama.weights_path(sibling)
    trama.dump(good_model(seed=3), ours, weights="external")
    assert sibling_weights.exists()
    assert lookalike.exists()
    assert trama.load(sibling).parameters == good_model(seed=1).parameters
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [ours.name, sibling.name, lookalike.name, sibling_weights.name, trama.weights_path(ours).name]
    )


def legacy_pair(path: Path, model: Model) -> Path:
    """A document as earlier trama wrote it (flat, format 1.2): its weights in ``model.safetensors``."""
    trama.dump(model, path, weights="external", format_version="1.2")
    current = trama.weights_path(path)
    legacy = path.with_name("model.safetensors")
    current.rename(legacy)
    path.write_text(path.read_text().replace(current.name, legacy.name))
    return legacy


def test_an_old_pair_still_loads_and_a_new_dump_retires_its_weights(tmp_path: Path) -> None:
    path = tmp_path / "model.trama.json"
    legacy = legacy_pair(path, good_model())
    assert trama.weights_path(path) == legacy
    assert trama.load(path).parameters == good_model().parameters
    trama.dump(good_model(seed=1), path, weights="external")
    assert sorted(p.name for p in tmp_path.iterdir()) == [trama.weights_path(path).name, "model.trama.json"]
    assert trama.load(path).parameters == good_model(seed=1).parameters


def test_a_file_of_the_old_name_that_the_document_does_not_name_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(good_model(), path, weights="external")
    unrelated = tmp_path / "model.safetensors"
    unrelated.write_bytes(b"someone else's")
    trama.dump(good_model(seed=1), path, weights="external")
    assert unrelated.read_bytes() == b"someone else's"


def test_weights_path_needs_a_document_that_names_one_file(tmp_path: Path) -> None:
    path = tmp_path / "model.trama.json"
    trama.dump(good_model(), path)
    with pytest.raises(trama.WeightsFileError, match="names 0 weights files"):
        trama.weights_path(path)
    with pytest.raises(trama.TramaError, match="cannot read"):
        trama.weights_path(tmp_path / "absent.trama.json")


# --------------------------------------------------------------------------------------------
# Temporary files left by killed writers
# --------------------------------------------------------------------------------------------


def stale_temporary(folder: Path, target: str, size: int = 1000) -> Path:
    """A temporary file as a killed dump leaves it: no process holds its lock."""
    path = folder / f".{target}.{os.urandom(6).hex()}.tmp"
    path.write_bytes(b"x" * size)
    return path


@pytest.mark.parametrize("weights", ["inline", "external"])
def test_the_next_dump_removes_temporaries_whose_writer_is_gone(external_files: Path, weights: str) -> None:
    folder = external_files.parent
    stale = [stale_temporary(folder, "model.trama.json"), stale_temporary(folder, "model.safetensors")]
    other = stale_temporary(folder, "other.trama.json")  # another document's: not this dump's business
    trama.dump(good_model(seed=1), external_files, weights=weights)  # type: ignore[arg-type]
    assert not any(path.exists() for path in stale)
    assert other.exists()


def test_a_live_writers_temporary_is_never_removed(external_files: Path) -> None:
    import fcntl

    folder = external_files.parent
    live = stale_temporary(folder, "model.trama.json")
    with open(live, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # its writer is still at work
        trama.dump(good_model(seed=1), external_files, weights="external")
        assert live.exists()
    trama.dump(good_model(seed=2), external_files, weights="external")
    assert not live.exists()


def test_a_temporary_removed_before_its_writer_locked_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The instant between creating a temporary file and locking it: a cleaner may remove it.
    # The writer notices and starts again under a new name.
    target = tmp_path / "model.trama.json"
    import fcntl

    real_flock = fcntl.flock
    removed: list[str] = []

    def flock(fd: int, operation: int) -> None:
        if not removed and operation == fcntl.LOCK_EX:
            for path in tmp_path.glob(".model.trama.json.*.tmp"):
                removed.append(path.name)
                path.unlink()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    trama.dump(good_model(), target)
    monkeypatch.undo()
    assert removed
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert trama.load(target).parameters == good_model().parameters


def test_atomic_file_cleans_up_and_reports_write_errors(tmp_path: Path) -> None:
    target = tmp_path / "out.npz"
    stale = stale_temporary(tmp_path, "out.npz")
    with trama.format._serialization.atomic_file(target) as handle:
        handle.write(b"new")
    assert target.read_bytes() == b"new"
    assert not stale.exists()

    def write_then_fail() -> None:
        with trama.format._serialization.atomic_file(target) as handle:
            handle.write(b"newer")
            raise OSError(28, "No space left on device")

    with pytest.raises(WriteError, match="No space left"):
        write_then_fail()
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]
    assert target.read_bytes() == b"new"
