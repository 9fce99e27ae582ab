"""A weights file changed under a loaded model: what the default promises, what ``mmap_weights`` risks.

By default a tensor is read into memory of its own on first use and verified there, so:

* rewriting the weights file in place (same size, as ``cp`` or ``rsync --inplace`` do) after the
  model ran changes nothing: the prepared runnable computes the same outputs;
* rewriting it before a tensor's first use is a ``WeightsFileError`` (the checksum), and
  truncating it before first use is a ``WeightsFileError`` too, never a SIGBUS;
* a newer dump replacing the pair does not disturb a model loaded from the old pair.

Each holds for a pair as ``dump`` writes it (format 1.3) and in the flat form of 1.2.

With ``mmap_weights=True`` tensors are views of a shared mapping of the file: the rewrite shows
through into the loaded model's values, and truncating the file kills the process with SIGBUS
when a vanished page is touched. Those are the documented risks of that mode, checked here so
that the documentation stays true. Anything that may crash runs in a child process.
"""

from __future__ import annotations

import json
import signal
import struct
from pathlib import Path

import numpy as np
import pytest

import trama
from reliability.isolation import run_isolated
from reliability.models import linear_model

WEIGHT = np.arange(4096 * 3, dtype=np.float32).reshape(4096, 3) / 7  # 48 KiB: several pages


def linear(weight: np.ndarray = WEIGHT) -> trama.Model:
    return linear_model(weight)


X = np.ones((2, 3), dtype=np.float32)
#: Where each format's document gives the weight (the location of its errors): 1.3, as ``dump``
#: writes it, names the weights file once and keeps the tensor in its node; 1.2 is flat.
WEIGHT_AT = {"1.3": "/nodes/0/set/weight", "1.2": "/parameters/lin.weight/value/external"}


@pytest.fixture(params=["1.3", "1.2"])
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    path = tmp_path / "lin.trama.json"
    trama.dump(linear(), path, weights="external", format_version=request.param)
    assert json.loads(path.read_text())["format_version"] == request.param
    return path


def rewrite_in_place(weights: Path) -> None:
    """Overwrite the tensor bytes with other values of the same size, keeping the header: the
    file's inode, size and layout stay, as after ``cp new old`` or ``rsync --inplace``."""
    data = weights.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    with open(weights, "r+b") as handle:
        handle.seek(8 + length)
        handle.write((WEIGHT + 1).tobytes())


def test_default_rewrite_in_place_after_use_changes_nothing(pair: Path) -> None:
    runnable = trama.runtime_for_name("numpy").prepare(trama.load(pair))
    before = runnable.run({"x": X})[0]
    np.testing.assert_allclose(before, X @ WEIGHT.T, rtol=1e-6)
    rewrite_in_place(trama.weights_path(pair))
    after = runnable.run({"x": X})[0]
    np.testing.assert_array_equal(after, before)
    # The rewrite was real: a fresh load refuses the changed bytes.
    with pytest.raises(trama.WeightsFileError, match="checksum"):
        trama.runtime_for_name("numpy").prepare(trama.load(pair)).run({"x": X})


def test_default_rewrite_in_place_before_first_use_is_refused(pair: Path) -> None:
    model = trama.load(pair)
    rewrite_in_place(trama.weights_path(pair))
    with pytest.raises(trama.WeightsFileError, match="checksum") as caught:
        np.asarray(model.parameters["lin.weight"].value)
    assert caught.value.location == WEIGHT_AT[json.loads(pair.read_text())["format_version"]]


TRUNCATE = """
import json, os, sys
import numpy as np
import trama
path, mode = sys.argv[1], sys.argv[2]
model = trama.load(path, mmap_weights=(mode == "mmap"))
os.truncate(trama.weights_path(path), 0)
try:
    value = np.asarray(model.parameters["lin.weight"].value)
    print(json.dumps(["read", float(value.sum())]))
except trama.TramaError as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""


def truncated(pair: Path, mode: str) -> tuple[int, list[str]]:
    code = f"import sys\nsys.argv[1:] = [{str(pair)!r}, {mode!r}]\n" + TRUNCATE
    outcome = run_isolated(code, timeout_s=60, memory_mb=3_000)
    lines = outcome.stdout.strip().splitlines()
    return outcome.returncode, json.loads(lines[-1]) if lines else []


def test_default_truncation_before_first_use_is_a_clean_error(pair: Path) -> None:
    returncode, result = truncated(pair, "default")
    assert returncode == 0, "the reader crashed"
    assert result[0] == "WeightsFileError"
    assert "truncated" in result[1]


def test_mmap_weights_truncation_before_first_use_is_a_sigbus(pair: Path) -> None:
    # The documented risk of the zero-copy mode: the process dies, nothing can be caught.
    returncode, result = truncated(pair, "mmap")
    assert returncode == -signal.SIGBUS, (returncode, result)


def test_default_truncation_after_first_use_changes_nothing(pair: Path) -> None:
    model = trama.load(pair)
    runnable = trama.runtime_for_name("numpy").prepare(model)
    before = runnable.run({"x": X})[0]
    trama.weights_path(pair).write_bytes(b"")
    np.testing.assert_array_equal(runnable.run({"x": X})[0], before)


def test_mmap_weights_rewrite_in_place_shows_through(pair: Path) -> None:
    # The documented risk: values verified once are views of the file as it is now.
    model = trama.load(pair, mmap_weights=True)
    value = np.asarray(model.parameters["lin.weight"].value)
    np.testing.assert_array_equal(value, WEIGHT)
    rewrite_in_place(trama.weights_path(pair))
    np.testing.assert_array_equal(value, WEIGHT + 1)


def test_a_newer_dump_does_not_disturb_a_loaded_model(pair: Path) -> None:
    # The new dump retires the old weights file; the loaded model still reads the one it was
    # loaded from, for tensors it had not used yet too.
    version = json.loads(pair.read_text())["format_version"]
    for mmap_weights in (False, True):
        trama.dump(linear(), pair, weights="external", format_version=version)
        model = trama.load(pair, mmap_weights=mmap_weights)
        old_weights = trama.weights_path(pair)
        trama.dump(linear(WEIGHT * 2), pair, weights="external", format_version=version)
        assert not old_weights.exists()
        np.testing.assert_array_equal(np.asarray(model.parameters["lin.weight"].value), WEIGHT)
        np.testing.assert_array_equal(np.asarray(trama.load(pair).parameters["lin.weight"].value), WEIGHT * 2)


def test_default_copies_are_read_straight_into_place(pair: Path) -> None:
    # No intermediate buffer: the array owns exactly its own bytes, nothing larger behind it.
    value = np.asarray(trama.load(pair).parameters["lin.weight"].value)
    assert value.base is None or (isinstance(value.base, np.ndarray) and value.base.nbytes == value.nbytes)
    assert value.flags.c_contiguous
    assert not value.flags.writeable
