"""Acceptance: ``pip install trama-torch`` alone, in a fresh virtual environment, gives a working setup.

The wheels of ``trama``, ``trama-numpy`` and ``trama-torch`` are built from the repository (see
``distbuild``) into a folder; a new virtual environment (``python -m venv``, nothing of this one
visible) gets exactly ``pip install --find-links <wheels> trama-torch``. Everything else comes
from where pip finds it as configured on this machine: torch from its local wheel, numpy, pluggy,
jsonschema and the rest from the package registry. In that environment a torch model with a
module of its own is exported, dumped, loaded, imported back without naming a registry (the
document says it came from torch), compared with the original, and run again with the ``trama``
command on the ``"default"`` runtime, which only trama-numpy provides.

This is slow (about a minute on a 2-core machine, nearly all of it ``pip install``, torch's wheel
being 190 MB), so the environment is built once per session and shared by the tests below. Nothing is skipped: without
the registry the install fails, and the test says so.

torch is held to 2.13.0 with a constraints file (not a requirement: trama-torch's own dependency
is what must bring torch in). Any other version would pull several GB of CUDA packages where this
machine has a CPU wheel of 2.13.0 at hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distbuild import build_distribution

WHEELS = ["trama", "trama-numpy", "trama-torch"]
TORCH = "torch==2.13.0"
INSTALL_TIMEOUT_S = 1500

# Run in the fresh environment, in a scratch folder given as argv[1]: the user's path from a torch
# model to a file and back. Prints what it found out as JSON on its last line.
ROUND_TRIP = '''
import json
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

import trama


class Residual(nn.Module):
    """x + body(x): a module of the user's own, which export keeps as a node of the tree."""

    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.ReLU())

    def forward(self, x):
        return x + self.body(x)


here = Path(sys.argv[1])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), Residual(8), nn.ReLU(), nn.Linear(8, 3)).eval()
doc = trama.export_model(model, inputs=["x"], outputs=["y"])
trama.dump(doc, here / "model.trama.json")
loaded = trama.load(here / "model.trama.json")
back = trama.import_model(loaded)  # no registry: the document names its framework

x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
with torch.inference_mode():
    expected = model(x).numpy()
    got = back(x).numpy() if isinstance(back, nn.Module) else None
np.save(here / "x.npy", x.numpy())
np.save(here / "expected.npy", expected)
if got is not None:
    np.save(here / "imported.npy", got)
print(json.dumps({
    "trama_file": trama.__file__,
    "torch_version": torch.__version__,
    "framework": loaded.metadata.get("framework"),
    "imported_type": f"{type(back).__module__}.{type(back).__qualname__}",
    "imported_is_module": isinstance(back, nn.Module),
    "imported_linears": sum(isinstance(m, nn.Linear) for m in back.modules()) if isinstance(back, nn.Module) else 0,
    "same_document": trama.dumps(loaded) == trama.dumps(doc),
}))
'''

DEFAULT_RUNTIME = """
import json, trama
runtime = trama.runtime_for_name("default")
print(json.dumps({"module": type(runtime).__module__, "available": [r.name for r in trama.runtimes()]}))
"""


@dataclass(frozen=True)
class FreshEnv:
    root: Path
    python: Path
    scripts: Path
    wheels: dict[str, Path]
    install_log: str
    seconds: dict[str, float]


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that would point Python at this checkout or
    at the repository's .venv; pip's own settings (find-links, indexes, certificates) stay."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _run(command: Sequence[str | Path], *, cwd: Path, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}):\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    )
    return done


@pytest.fixture(scope="session")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> FreshEnv:
    """The wheels, a new virtual environment, and ``pip install trama-torch`` in it: once."""
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    wheels = {
        name: build_distribution(name, wheelhouse, tmp_path_factory.mktemp(f"build-{name}")).wheel for name in WHEELS
    }
    for sdist in wheelhouse.glob("*.tar.gz"):
        sdist.unlink()  # only wheels: pip must not prefer building an sdist of ours
    seconds["build wheels"] = time.perf_counter() - start

    root = tmp_path_factory.mktemp("fresh-venv")
    venv = root / "venv"
    start = time.perf_counter()
    _run([sys.executable, "-m", "venv", venv], cwd=root, timeout=300, what="python -m venv")
    seconds["create venv"] = time.perf_counter() - start
    python = venv / "bin" / "python"

    constraints = root / "constraints.txt"
    constraints.write_text(f"{TORCH}\n")
    pip_install = [str(python), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
    start = time.perf_counter()
    install = subprocess.run(
        [*pip_install, "--find-links", str(wheelhouse), "--constraint", str(constraints), "trama-torch"],
        cwd=root,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    seconds["pip install trama-torch"] = time.perf_counter() - start
    log = install.stdout + install.stderr
    assert install.returncode == 0, (
        "`pip install trama-torch` into a fresh virtual environment failed. Its dependencies (numpy, "
        "pluggy, jsonschema, ...) come from the package registry, which must be reachable; torch "
        f"({TORCH}) from this machine's wheels as pip is configured (pip config list).\n{log[-8000:]}"
    )
    return FreshEnv(root, python, venv / "bin", wheels, log, seconds)


@pytest.fixture(scope="session")
def round_trip(fresh_env: FreshEnv) -> tuple[Path, dict[str, Any]]:
    """ROUND_TRIP run once in the fresh environment: its scratch folder and its findings."""
    here = fresh_env.root / "round-trip"
    here.mkdir()
    script = here / "round_trip.py"
    script.write_text(ROUND_TRIP)
    done = _run([fresh_env.python, script, here], cwd=here, timeout=300, what="the round trip in the fresh environment")
    return here, json.loads(done.stdout.splitlines()[-1])


def _installed_record(fresh_env: FreshEnv, name: str) -> set[str]:
    """``path,hash`` lines of the installed distribution's files that came from its wheel."""
    code = (
        "import sys, importlib.metadata as m\n"
        "for f in m.distribution(sys.argv[1]).files or []:\n"
        "    if f.hash: print(f'{f},{f.hash.mode}={f.hash.value}')\n"
    )
    done = _run([fresh_env.python, "-c", code, name], cwd=fresh_env.root, timeout=60, what=f"reading {name}'s RECORD")
    return set(done.stdout.split())


def _wheel_record(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        lines = archive.read(record).decode("utf-8").split()
    return {line.rsplit(",", 1)[0] for line in lines if line.split(",")[1]}


def test_pip_installs_the_repository_wheels_and_a_consistent_environment(fresh_env: FreshEnv) -> None:
    for name, wheel in fresh_env.wheels.items():
        installed = _installed_record(fresh_env, name)
        # Every file of our wheel is installed with its hash: pip took this wheel, and no
        # distribution of the same name from the registry.
        record = _wheel_record(wheel)
        assert any(line.startswith(f"{name.replace('-', '_')}/__init__.py,sha256=") for line in record), record
        assert record <= installed, f"{name} in the fresh environment is not the wheel built here"
    _run([fresh_env.python, "-m", "pip", "check"], cwd=fresh_env.root, timeout=120, what="pip check")
    listing = _run(
        [fresh_env.python, "-m", "pip", "list", "--format", "json"], cwd=fresh_env.root, timeout=120, what="pip list"
    )
    names = {row["name"].lower() for row in json.loads(listing.stdout)}
    assert {"trama", "trama-numpy", "trama-torch", "torch", "numpy"} <= names
    assert not names & {"trama-jax", "jax", "trama-lenses"}, "only what trama-torch depends on was asked for"


def test_export_dump_load_and_import_without_a_registry_give_torch_modules_back(
    fresh_env: FreshEnv, round_trip: tuple[Path, dict[str, Any]]
) -> None:
    here, facts = round_trip
    assert Path(facts["trama_file"]).is_relative_to(fresh_env.root), "trama was not imported from the fresh environment"
    assert facts["torch_version"].startswith("2.13.0")
    assert facts["same_document"]
    assert facts["framework"] == {"name": "torch", "version": facts["torch_version"]}, (
        "torch exports must name their framework in metadata.framework, so that import_model(doc) "
        f"without a registry imports with torch; the document has {facts['framework']!r}"
    )
    assert facts["imported_is_module"], f"import_model(doc) gave a {facts['imported_type']}, not a torch module"
    assert facts["imported_linears"] == 3
    np.testing.assert_allclose(np.load(here / "imported.npy"), np.load(here / "expected.npy"), rtol=1e-6, atol=1e-6)


def test_trama_run_on_the_default_runtime_matches_the_torch_model(
    fresh_env: FreshEnv, round_trip: tuple[Path, dict[str, Any]]
) -> None:
    here, _ = round_trip
    trama = fresh_env.scripts / "trama"
    assert trama.is_file(), "the trama console script was not installed"
    command: list[str | Path] = [trama, "run", "model.trama.json", "--input", "x=x.npy", "--output", "y.npz"]
    done = _run(command, cwd=here, timeout=300, what="`trama run` in the fresh environment")
    assert "wrote 1 output(s) to y.npz" in done.stdout
    with np.load(here / "y.npz") as outputs:
        (key,) = outputs.files
        y = outputs[key]
    np.testing.assert_allclose(y, np.load(here / "expected.npy"), rtol=1e-5, atol=1e-6)


def test_the_default_runtime_is_there_with_trama_torch_alone(fresh_env: FreshEnv) -> None:
    done = _run(
        [fresh_env.python, "-c", DEFAULT_RUNTIME], cwd=fresh_env.root, timeout=120, what="trama.runtime_for_name"
    )
    facts = json.loads(done.stdout.splitlines()[-1])
    assert facts["module"].startswith("trama_numpy.")
    assert "torch:cpu" in facts["available"]


def test_trama_plugins_finds_numpy_and_torch_with_no_load_errors(fresh_env: FreshEnv) -> None:
    done = _run([fresh_env.scripts / "trama", "plugins"], cwd=fresh_env.root, timeout=120, what="`trama plugins`")
    lines = done.stdout.splitlines()
    for name, entry_point in [("trama-numpy", "numpy"), ("trama-torch", "torch")]:
        assert f"{name} 0.4.0  (entry point '{entry_point}')" in lines, done.stdout
