"""Building the repository's distributions offline, the way a release would, for the packaging tests.

``build_distribution`` does what ``python -m build`` does, with this environment's setuptools and
no network (``--no-isolation``): the sdist from a copy of the package folder, then the wheel from
the unpacked sdist, so a file missing from the sdist shows up as a broken wheel. The package is
copied first because setuptools writes ``build/`` and ``*.egg-info`` next to ``pyproject.toml``,
and the checkout must stay as it is. The PEP 517 hooks are called in a child process, in the
folder being built, as a build frontend calls them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Where each distribution's pyproject.toml lives.
PACKAGE_DIRS: dict[str, Path] = {
    "trama": REPO / "packages" / "trama-core",
    "trama-numpy": REPO / "packages" / "trama-numpy",
    "trama-torch": REPO / "packages" / "trama-torch",
    "trama-jax": REPO / "packages" / "trama-jax",
    "trama-onnx": REPO / "packages" / "trama-onnx",
    "trama-model-explorer": REPO / "packages" / "trama-model-explorer",
    "trama-lenses": REPO / "examples" / "trama-lenses",
}

# Run inside the folder being built: argv = [kind, destination]. The hook's return value (the
# file name it wrote) is printed after a marker, since setuptools logs to stdout as well.
# The arguments are read before the hook runs: setuptools' build_meta rewrites sys.argv.
_HOOK = """
import sys
kind, destination = sys.argv[1], sys.argv[2]
import setuptools.build_meta as backend
hook = backend.build_sdist if kind == "sdist" else backend.build_wheel
name = hook(destination)
print("BUILT:" + name)
"""

_IGNORED = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")


@dataclass(frozen=True)
class Built:
    """One distribution's sdist and the wheel built from it."""

    name: str
    sdist: Path
    wheel: Path


def build_distribution(name: str, destination: Path, scratch: Path) -> Built:
    """Build ``name``'s sdist, then its wheel from the unpacked sdist, both into ``destination``.

    ``scratch`` is an empty folder for the copies. Raises AssertionError with the build's own
    output when a build fails, so the failing test says what setuptools said.
    """
    destination.mkdir(parents=True, exist_ok=True)
    tree = scratch / f"{name}-tree"
    shutil.copytree(PACKAGE_DIRS[name], tree, ignore=_IGNORED)
    sdist = _run_hook("sdist", tree, destination)
    unpacked = scratch / f"{name}-sdist"
    with tarfile.open(sdist) as archive:
        archive.extractall(unpacked, filter="data")
    (root,) = unpacked.iterdir()  # an sdist holds one folder, {name}-{version}
    wheel = _run_hook("wheel", root, destination)
    return Built(name, sdist, wheel)


def _run_hook(kind: str, folder: Path, destination: Path) -> Path:
    env = dict(os.environ)
    # setuptools never downloads the list of trove classifiers itself; this says so to any
    # validator it vendors, so that the build is offline whatever its version.
    env["VALIDATE_PYPROJECT_NO_NETWORK"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _HOOK, kind, str(destination)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    names = [line.removeprefix("BUILT:") for line in done.stdout.splitlines() if line.startswith("BUILT:")]
    output = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"building the {kind} of {folder.name} failed (exit {done.returncode}):\n{output}"
    assert len(names) == 1, f"the {kind} hook for {folder.name} reported no file name:\n{output}"
    built = destination / names[0]
    assert built.is_file(), f"setuptools reported {names[0]!r} but {built} is not there"
    return built
