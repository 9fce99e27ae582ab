"""An inline-weights document changed under a loaded model: a clean error or no change, never a crash.

``trama.load`` reads a large document (1 MiB or more) with positional reads. By default it
decodes each long base64 ``data`` string as it reads it, so nothing that happens to the file
after ``load`` changes the model. With ``lazy_inline=True`` it leaves each string in the file,
recording where it is and the hash of its text, and the tensor reads it again on first use into
an array of its own. So, for format 1.3 (what ``dump`` writes: nested, the checksum in the
node's tensor), 1.2 (flat, entry checksums) and 1.1 (none) alike:

* by default, truncating or rewriting the file after ``load`` changes nothing;
* with ``lazy_inline``, truncating the file in place after ``load`` and before a tensor's first
  use is a ``TensorDataError`` at that use, naming the entry, never a SIGBUS (the process died
  when the text was a view of a memory map of the file);
* with ``lazy_inline``, rewriting it in place with other content of the same size is a
  ``TensorDataError`` too, never other values (a 1.1 document has no checksum, the hash taken
  at load stands in for it);
* after first use nothing that happens to the file changes the model's values, and a newer dump
  replacing the document does not disturb a model loaded from the old one;
* a file truncated while it is being loaded is a clean ``JSONError``, in either mode.

``mmap_weights=True`` is for external weights only: an inline document is never mapped. Anything
that could crash runs in a child process bounded in memory and time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from reliability.isolation import run_isolated
from reliability.models import linear_model

WEIGHT = (np.arange(512 * 600, dtype=np.float32).reshape(600, 512) / 7).astype(np.float32)  # 1.6 MB of base64
OTHER = np.linspace(-1, 1, 512 * 600, dtype=np.float32).reshape(600, 512)
X = np.ones((2, 512), dtype=np.float32)
#: The formats read: 1.3 as ``dump`` writes it, 1.2 as ``dump(format_version="1.2")`` writes it,
#: 1.1 as that with no checksums.
VERSIONS = ["1.3", "1.2", "1.1"]
#: Where each format holds the weight: the location a tensor's error names.
WEIGHT_AT = {"1.3": "/nodes/0/set/weight", "1.2": "/parameters/lin.weight/value", "1.1": "/parameters/lin.weight/value"}
_DATA = re.compile(rb'"data": ?"')


def linear(weight: np.ndarray = WEIGHT) -> trama.Model:
    return linear_model(weight)


def write_document(path: Path, version: str, weight: np.ndarray = WEIGHT) -> Path:
    """A large inline document of ``linear(weight)``: in format 1.3 as dumped, in 1.2 as dumped
    in the flat form, or as 1.1 (that with no checksums, the only difference between the two
    for this model)."""
    if version == "1.3":
        trama.dump(linear(weight), path)
    else:
        trama.dump(linear(weight), path, format_version="1.2")
    assert json.loads(path.read_text())["format_version"] == ("1.3" if version == "1.3" else "1.2")
    if version == "1.1":
        doc = json.loads(path.read_text())
        doc["format_version"] = "1.1"
        for entry in doc["parameters"].values():
            entry.pop("checksum", None)
        path.write_text(json.dumps(doc, indent=1))
    assert path.stat().st_size > 1 << 20  # read in blocks, the base64 left in the file
    return path


def data_span(path: Path) -> tuple[int, int]:
    """Where the weight's base64 text is in the file: (offset, length)."""
    raw = path.read_bytes()
    found = _DATA.search(raw)  # '"data":"' as 1.3 writes it (compact), '"data": "' otherwise
    assert found is not None
    start = found.end()
    assert _DATA.search(raw, start) is None  # the one tensor's
    return start, raw.index(b'"', start) - start


def rewrite_in_place(path: Path, weight: np.ndarray) -> None:
    """Overwrite the weight's base64 with that of other values (same length): the file's inode,
    size and layout stay, as after ``cp new old`` or ``rsync --inplace``."""
    start, length = data_span(path)
    text = trama.format.encode_base64(weight)
    assert len(text) == length
    with open(path, "r+b") as handle:
        handle.seek(start)
        handle.write(text)


#: In a child: load the document, change the file, then use the tensor; print what happened.
CHANGE = """
import json, os, sys
import numpy as np
import trama
path, action, cut = sys.argv[1], sys.argv[2], int(sys.argv[3])
mmap_weights, lazy = sys.argv[4] == "1", sys.argv[8] == "1"
model = trama.load(path, mmap_weights=mmap_weights, lazy_inline=lazy)
if action == "truncate":
    os.truncate(path, cut)
else:
    start, length = [int(v) for v in sys.argv[5:7]]
    with open(path, "r+b") as handle:
        handle.seek(start)
        handle.write(bytes.fromhex(sys.argv[7]) * (length // 4))
try:
    value = np.asarray(model.parameters["lin.weight"].value)
    print(json.dumps(["read", float(value.sum())]))
except trama.TramaError as exc:
    print(json.dumps([type(exc).__name__, exc.location, exc.message]))
"""


def changed_in_child(
    path: Path, action: str, cut: int = 0, *, mmap_weights: bool = False, lazy: bool = True
) -> list[Any]:
    start, length = data_span(path)
    args = [
        str(path),
        action,
        str(cut),
        "1" if mmap_weights else "0",
        str(start),
        str(length),
        b"QUFB".hex(),
        "1" if lazy else "0",
    ]
    code = f"import sys\nsys.argv[1:] = {args!r}\n" + CHANGE
    outcome = run_isolated(code, timeout_s=60, memory_mb=3_000)
    assert not outcome.crashed, outcome.describe()  # a SIGBUS, before
    assert outcome.returncode == 0, outcome.describe()
    result: list[Any] = json.loads(outcome.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("where", ["empty", "in the data", "one byte short"])
def test_truncation_before_first_use_is_a_clean_error(tmp_path: Path, version: str, where: str) -> None:
    path = write_document(tmp_path / "lin.trama.json", version)
    start, length = data_span(path)
    cut = {"empty": 0, "in the data": start + length // 2, "one byte short": start + length - 1}[where]
    result = changed_in_child(path, "truncate", cut)
    assert result[:2] == ["TensorDataError", WEIGHT_AT[version]]
    assert "truncated after the document was loaded" in result[2]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("action", ["truncate", "rewrite"])
def test_by_default_changing_the_file_after_load_changes_nothing(tmp_path: Path, version: str, action: str) -> None:
    # The tensors were decoded while the file was read: neither a truncation nor a rewrite in
    # place (valid base64 of the right length) reaches them.
    path = write_document(tmp_path / "lin.trama.json", version)
    result = changed_in_child(path, action, 0, lazy=False)
    assert result == ["read", float(WEIGHT.sum())]


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_mmap_weights_does_not_map_an_inline_document(tmp_path: Path, version: str) -> None:
    path = write_document(tmp_path / "lin.trama.json", version)
    result = changed_in_child(path, "truncate", 0, mmap_weights=True)
    assert result[0] == "TensorDataError"
    assert "truncated" in result[2]


@pytest.mark.parametrize("version", VERSIONS)
def test_rewriting_in_place_before_first_use_is_a_clean_error(tmp_path: Path, version: str) -> None:
    # Valid base64 of the right length ("AAA" throughout): without the hash taken at load a 1.1
    # document would silently read these other values.
    path = write_document(tmp_path / "lin.trama.json", version)
    result = changed_in_child(path, "rewrite")
    assert result[:2] == ["TensorDataError", WEIGHT_AT[version]]
    assert "changed after the document was loaded" in result[2]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_same_size_rewrite_with_other_values_is_refused_in_process(tmp_path: Path, version: str) -> None:
    path = write_document(tmp_path / "lin.trama.json", version)
    model = trama.load(path, lazy_inline=True)
    eager = trama.load(path)
    rewrite_in_place(path, OTHER)
    np.testing.assert_array_equal(np.asarray(eager.parameters["lin.weight"].value), WEIGHT)
    with pytest.raises(trama.TensorDataError, match="changed after the document was loaded") as caught:
        np.asarray(model.parameters["lin.weight"].value)
    assert caught.value.location == WEIGHT_AT[version]
    # The rewrite was real, and whole: a fresh load reads the new values (1.2 and 1.3: it is
    # refused, its checksum being that of the old ones).
    fresh = trama.load(path).parameters["lin.weight"].value
    if version == "1.1":
        np.testing.assert_array_equal(np.asarray(fresh), OTHER)
    else:
        with pytest.raises(trama.TensorDataError, match="does not match the checksum"):
            np.asarray(fresh)


@pytest.mark.parametrize("version", ["1.3", "1.1"])
@pytest.mark.parametrize("change", ["rewrite", "truncate"])
def test_after_first_use_changing_the_file_changes_nothing(tmp_path: Path, change: str, version: str) -> None:
    path = write_document(tmp_path / "lin.trama.json", version)
    runnable = trama.runtime_for_name("numpy").prepare(trama.load(path, lazy_inline=True))
    before = runnable.run({"x": X})[0]
    np.testing.assert_allclose(before, X @ WEIGHT.T, rtol=1e-5)
    if change == "rewrite":
        rewrite_in_place(path, OTHER)
    else:
        path.write_bytes(b"")
    np.testing.assert_array_equal(runnable.run({"x": X})[0], before)


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_a_newer_dump_does_not_disturb_a_loaded_model(tmp_path: Path, version: str) -> None:
    # The dump renames a new file over the document; the loaded model keeps reading the old one.
    path = write_document(tmp_path / "lin.trama.json", version)
    model = trama.load(path, lazy_inline=True)
    trama.dump(linear(OTHER), path)
    np.testing.assert_array_equal(np.asarray(model.parameters["lin.weight"].value), WEIGHT)
    np.testing.assert_array_equal(np.asarray(trama.load(path).parameters["lin.weight"].value), OTHER)


#: In a child: truncate the document while ``load`` reads it (after its first read).
TRUNCATE_WHILE_LOADING = """
import json, os, sys
import trama
from trama.format import _jsontext
path, cut, lazy = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
real_read, real_read_into = _jsontext.DocumentFile.read, _jsontext.DocumentFile.read_into
calls = []

def truncating(real):
    def read(self, *args):
        calls.append(1)
        if len(calls) == 2:
            os.truncate(path, cut)
        return real(self, *args)
    return read

_jsontext.DocumentFile.read = truncating(real_read)
_jsontext.DocumentFile.read_into = truncating(real_read_into)
try:
    trama.load(path, lazy_inline=lazy)
    print(json.dumps(["loaded"]))
except trama.TramaError as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
"""


@pytest.mark.parametrize("version", ["1.3", "1.2"])
@pytest.mark.parametrize("lazy", [False, True], ids=["decoded", "lazy"])
@pytest.mark.parametrize("where", ["empty", "in the data"])
def test_truncation_while_loading_is_a_clean_error(tmp_path: Path, where: str, lazy: bool, version: str) -> None:
    path = write_document(tmp_path / "lin.trama.json", version)
    start, length = data_span(path)
    cut = 0 if where == "empty" else start + length // 2
    code = f"import sys\nsys.argv[1:] = {[str(path), str(cut), '1' if lazy else '0']!r}\n" + TRUNCATE_WHILE_LOADING
    outcome = run_isolated(code, timeout_s=60, memory_mb=3_000)
    assert not outcome.crashed, outcome.describe()
    assert outcome.returncode == 0, outcome.describe()
    result = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert result[0] == "JSONError", result
