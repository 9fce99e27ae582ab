"""The example op pack (examples/trama-lenses) works as a real, freshly installed distribution.

Its own tests (examples/trama-lenses/tests) check the ops; this one checks the path a user
takes: ``pip install`` into an empty place, then a new Python process in which nothing but
discovery (the ``trama`` entry-point group) can make trama know the ``lenses.*`` ops.

Proving that the fresh install is what discovery found, and not a copy already installed in this
environment (``make setup`` installs the example editable into .venv, to run its own tests):

* The child process must still import trama, numpy and pluggy from this environment, so the
  pre-installed copy cannot simply be hidden from it; ``python -S`` would drop trama's own
  editable install too, and a new virtual environment would cost far more than this test may.
* Instead the installed copy is made distinguishable: the example is copied to a temporary
  folder and its version stamped with a unique local label (``0.1.0+fresh.<random>``) before
  ``pip install --target``. That version exists nowhere else, so finding it in what discovery
  reports (``PluginInfo.version``, the ``trama plugins`` listing) shows the fresh install was
  the one loaded. The child also reports where the entry point's distribution lives and which
  file the plugin module was imported from; both must be inside the target folder.
* The target folder goes first on ``PYTHONPATH``, so it precedes site-packages; importlib's
  entry-point discovery keeps only the first distribution of a name on ``sys.path``, which the
  child checks by finding exactly one ``trama-lenses`` plugin.

Copying first also keeps setuptools' in-tree ``build/`` and ``*.egg-info`` out of the checkout.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "trama-lenses"
OPS = ["lenses.AsphericSurface", "lenses.FreeSpace", "lenses.System", "lenses.ThinLens"]
HOOKS = ["trama_exporters", "trama_frameworks", "trama_op_implementations", "trama_op_specs", "trama_opsets"]

# Run in the child: everything it learns from discovery, as JSON on stdout.
PROBE = """
import json, sys
import importlib_metadata
import trama
from trama.extension import ENTRY_POINT_GROUP, plugin_host

registry = trama.registry("numpy")
ops = [name for name in registry.names() if name.startswith("lenses.")]
lowerings = trama.registry("onnx")  # the pack names "onnx" among its frameworks: this exists without trama-onnx
entry_points = [ep for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.dist.name == "trama-lenses"]
print(json.dumps({
    "ops": ops,
    "implemented": [name for name in ops if registry[name].factory is not None],
    "lowered": [name for name in ops if lowerings[name].factory is not None],
    "plugins": [
        {"version": info.version, "hooks": list(info.hooks), "errors": list(info.errors)}
        for info in plugin_host().plugins() if info.distribution == "trama-lenses"
    ],
    "entry_point_dists": [str(ep.dist.locate_file("")) for ep in entry_points],
    "plugin_file": sys.modules["trama_lenses.plugin"].__file__,
    "frameworks_imported": [
        name for name in ("torch", "jax", "tensorflow", "onnx", "onnxruntime", "trama_lenses.onnx_lowering")
        if name in sys.modules
    ],
}))
"""

CLI = "import sys; from trama.tools.cli import main; sys.exit(main(sys.argv[1:]))"


def _can_build_offline() -> bool:
    """Whether this interpreter can build the example's wheel itself (``--no-build-isolation``).

    The example declares ``setuptools>=77`` (the first that reads an SPDX ``license``), which
    builds wheels on its own. With an older one pip must set up an isolated build environment,
    which downloads setuptools from the configured index.
    """
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major_minor = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    return major_minor >= (77, 0)


def _install_stamped_copy(tmp_path: Path) -> tuple[Path, str]:
    """Copy the example, give it a version no other copy has, install it into an empty folder."""
    source = tmp_path / "trama-lenses"
    shutil.copytree(
        EXAMPLE,
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "tests"),
    )
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text()
    declared = re.findall(r'^version = "([^"]+)"$', text, flags=re.M)
    assert len(declared) == 1, 'the example\'s pyproject.toml should have one `version = "..."` line'
    version = f"{declared[0]}+fresh.{uuid.uuid4().hex[:12]}"
    pyproject.write_text(text.replace(f'version = "{declared[0]}"', f'version = "{version}"', 1))

    target = tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(source)]
    if _can_build_offline():
        command.insert(4, "--no-build-isolation")
    pip = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"
    return target, version


def _child_env(target: Path) -> dict[str, str]:
    """This environment's Python, with the fresh install ahead of site-packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONNOUSERSITE"] = "1"  # a copy in the user's site-packages must not interfere either
    return env


def test_a_fresh_install_is_found_through_discovery_alone(tmp_path: Path) -> None:
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed in this interpreter, so the example cannot be installed")
    target, version = _install_stamped_copy(tmp_path)
    env = _child_env(target)
    # cwd=tmp_path: `python -c` puts the working directory first on sys.path; keep the checkout off it.
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert probe.returncode == 0, probe.stderr
    facts = json.loads(probe.stdout)

    assert facts["ops"] == OPS
    assert facts["implemented"] == OPS
    assert facts["lowered"] == [name for name in OPS if name != "lenses.System"]  # composites: trama-onnx's job
    assert facts["plugins"] == [{"version": version, "hooks": HOOKS, "errors": []}]
    assert facts["entry_point_dists"] == [str(target)]
    assert Path(facts["plugin_file"]).is_relative_to(target)
    assert facts["frameworks_imported"] == []

    listing = subprocess.run(
        [sys.executable, "-c", CLI, "plugins"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    lines = listing.stdout.splitlines()
    assert f"trama-lenses {version}  (entry point 'lenses')" in lines, listing.stdout + listing.stderr
    assert f"  hooks: {', '.join(HOOKS)}" in lines
    assert listing.returncode == 0, listing.stdout + listing.stderr  # no plugin reported an error
