"""A document from anywhere names files: only regular files inside its folder are read, and
nothing waits.

A FIFO blocks a plain ``open()`` until a writer comes, and a device (``/dev/zero``) never ends,
so the document and its weights are opened without blocking and refused unless they are regular
files. The weights must stay inside the document's folder on the real path, so a symbolic link
unpacked from an archive cannot make a document read any file of the machine. Every refusal is a
``TramaError`` with one line, whatever the path holds.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability.models import linear_model

import trama
from trama.tools.cli import main

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def _model() -> trama.Model:
    return linear_model(np.arange(6, dtype=np.float32).reshape(2, 3))


def _pair(folder: Path, version: str = trama.FORMAT_VERSION) -> Path:
    """An external-weights document in ``folder``: ``m.trama.json`` and its weights file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.trama.json"
    trama.dump(_model(), path, weights="external", format_version=version)
    return path


def _name_weights(document: dict[str, Any], name: str) -> None:
    """Make ``document`` name ``name`` as its weights file: the document's ``weights`` (format
    1.3), or the path of its external reference (the flat form of 1.2)."""
    if document["format_version"] == "1.2":
        document["parameters"]["lin.weight"]["value"]["external"]["path"] = name
    else:
        document["weights"] = name


#: Both forms name the weights file: each is read the same way.
VERSIONS = pytest.mark.parametrize("version", ["1.2", "1.3"])


def _within(seconds: float, action: Callable[[], Any]) -> BaseException | None:
    """Run ``action`` in a daemon thread; what it raised, or a failure if it is still waiting."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still waiting after {seconds} s: a FIFO was opened as a file")
    return outcome[0]


def test_a_document_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "doc.trama.json"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a device"), (tmp_path, "a folder")):
        error = _within(10, lambda path=path: trama.load(path))
        assert isinstance(error, trama.TramaError), error
        assert str(error) == f"cannot read {str(path)!r}: it is {kind}, not a regular file"


@pytest.mark.parametrize("path", ["fifo", "/dev/zero"])
def test_trama_validate_refuses_a_fifo_or_a_device_with_one_line(
    tmp_path: Path, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if path == "fifo":
        os.mkfifo(tmp_path / "fifo")
        path = str(tmp_path / "fifo")
    outcome: list[int] = []
    error = _within(10, lambda: outcome.append(main(["validate", path])))
    assert error is None, error
    assert outcome == [1]
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    kind = "a device" if path == "/dev/zero" else "a FIFO"
    assert lines == [f"{path}: cannot read the file: it is {kind}, not a regular file"]


def test_weights_that_are_a_fifo_are_refused_at_once(tmp_path: Path) -> None:
    path = _pair(tmp_path)
    weights = trama.weights_path(path)
    weights.unlink()
    os.mkfifo(weights)
    error = _within(10, lambda: trama.load(path))
    assert isinstance(error, trama.WeightsFileError), error
    assert "is a FIFO, not a regular file" in str(error)


def test_weights_behind_a_link_that_leaves_the_folder_are_refused(tmp_path: Path) -> None:
    path = _pair(tmp_path / "doc")
    outside = tmp_path / "elsewhere.safetensors"
    weights = trama.weights_path(path)
    weights.rename(outside)
    weights.symlink_to(outside)
    with pytest.raises(trama.WeightsFileError, match="leads outside the document's folder") as caught:
        trama.load(path)
    assert "elsewhere" not in str(caught.value)  # nothing said about what lies outside
    # The same message when the link points at nothing: no way to probe for files.
    outside.unlink()
    with pytest.raises(trama.WeightsFileError, match="leads outside the document's folder"):
        trama.load(path)


@VERSIONS
def test_a_folder_link_to_the_root_is_refused(tmp_path: Path, version: str) -> None:
    path = _pair(tmp_path / "doc", version)
    (tmp_path / "doc" / "root").symlink_to("/")
    document = json.loads(path.read_text())
    _name_weights(document, "root/etc/hostname")
    path.write_text(json.dumps(document))
    with pytest.raises(trama.WeightsFileError, match="leads outside the document's folder"):
        trama.load(path)


@VERSIONS
def test_a_loop_of_links_is_a_weights_file_error(tmp_path: Path, version: str) -> None:
    path = _pair(tmp_path / "doc", version)
    (tmp_path / "doc" / "a").symlink_to("b")
    (tmp_path / "doc" / "b").symlink_to("a")
    document = json.loads(path.read_text())
    _name_weights(document, "a")
    path.write_text(json.dumps(document))
    with pytest.raises(trama.WeightsFileError, match="'a' cannot be resolved: a loop of symbolic links"):
        trama.load(path)


def test_a_link_that_stays_inside_the_folder_is_followed(tmp_path: Path) -> None:
    path = _pair(tmp_path / "doc")
    weights = trama.weights_path(path)
    weights.rename(tmp_path / "doc" / "real.safetensors")
    weights.symlink_to("real.safetensors")
    np.testing.assert_array_equal(
        np.asarray(trama.load(path).parameters["lin.weight"].value), np.arange(6, dtype=np.float32).reshape(2, 3)
    )


@VERSIONS
@pytest.mark.parametrize("name", ["m\u0000.safetensors", "m\ud800.safetensors", "m\n.safetensors"])
def test_an_external_path_no_file_name_may_hold_is_a_trama_error(tmp_path: Path, name: str, version: str) -> None:
    path = _pair(tmp_path, version)
    document = json.loads(path.read_text())
    _name_weights(document, name)
    text = json.dumps(document)  # ASCII escapes: a lone surrogate survives as \ud800
    with pytest.raises(trama.WeightsFileError, match="holds a character no file name may") as caught:
        trama.loads(text, base_dir=tmp_path)
    assert len(str(caught.value).splitlines()) == 1
