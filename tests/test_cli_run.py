"""``trama run`` and ``trama profile``, on a runtime whose kernels are defined in the tests."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_runtime import FakeRuntime, mlp_model

import trama
from trama.extension import PluginHost, hookimpl, reset_plugins
from trama.tools import main


class FakeEntryPoint:
    name = "fake"
    dist = SimpleNamespace(name="trama-fake", version="1.0")

    @staticmethod
    def load() -> Any:
        @hookimpl
        def trama_runtimes() -> Sequence[Any]:
            return [FakeRuntime()]

        return SimpleNamespace(trama_runtimes=trama_runtimes)


@pytest.fixture
def model_file(tmp_path: Path) -> Iterator[Path]:
    reset_plugins(PluginHost([FakeEntryPoint()]))
    path = tmp_path / "fc.trama.json"
    trama.dump(mlp_model(), path)
    np.save(tmp_path / "x.npy", np.ones((5, 3)))
    yield path
    reset_plugins()


def test_run_prints_output_shapes(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = model_file.parent / "x.npy"
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={x}"]) == 0
    assert capsys.readouterr().out == "fc.y: float64[5, 4]\n"


def test_run_writes_outputs_to_npz(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x, out = model_file.parent / "x.npy", model_file.parent / "out.npz"
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={x}", "--output", str(out)]) == 0
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["fc.y"], np.full((5, 4), 3.0))


def test_run_reports_bad_inputs_in_one_line(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", "x"]) == 1
    assert "--input takes NAME=FILE.npy, got 'x'" in capsys.readouterr().err
    assert main(["run", str(model_file), "--runtime", "test:cpu"]) == 1
    assert "missing ['x']" in capsys.readouterr().err
    assert main(["run", str(model_file), "--runtime", "nope", "--input", "x=x.npy"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_run_refuses_pickled_inputs(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pickled = model_file.parent / "p.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={pickled}"]) == 1
    assert "cannot read input 'x'" in capsys.readouterr().err


def test_run_refuses_an_input_whose_header_claims_more_than_the_file_holds(
    model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 200-byte .npy may claim a [10^6, 10^6] array: refused before anything is allocated."""
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
    bomb = model_file.parent / "bomb.npy"
    with open(bomb, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    assert bomb.stat().st_size < 300
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={bomb}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "its header claims 8000000000000 bytes of data, but the file holds 64" in err


@pytest.mark.parametrize("what", ["text", "folder"])
def test_run_refuses_an_input_that_is_no_npy_file(
    model_file: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    path = model_file.parent / "notes.txt"
    if what == "text":
        path.write_text("hello")
    else:
        path.mkdir()
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={path}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ("not a .npy file" if what == "text" else "it is a folder, not a regular file") in err


@pytest.mark.parametrize("target", ["folder", "missing/out.npz"])
def test_run_reports_an_output_it_cannot_write_in_one_line(
    model_file: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    x = model_file.parent / "x.npy"
    output = model_file.parent / target
    if target == "folder":
        output.mkdir()
    assert main(["run", str(model_file), "--runtime", "test:cpu", "--input", f"x={x}", "--output", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"cannot write the outputs to {str(output)!r}" in err
    assert "Traceback" not in err


def test_profile_table_and_json(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = model_file.parent / "x.npy"
    assert main(["profile", str(model_file), "--runtime", "test:cpu", "--input", f"x={x}"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["node", "op", "calls", "ms", "parameters", "multiply-adds"]
    assert "fc    Linear  1" in out
    assert "12 parameters (96 bytes), 60 multiply-adds; runtime test:cpu" in out
    assert main(["profile", str(model_file), "--runtime", "test:cpu", "--input", f"x={x}", "--json"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["total"]["macs"] == 60
