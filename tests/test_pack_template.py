"""``trama pack new``: the generated op pack installs, passes its own tests, and uses public names only.

The template (:mod:`trama.tools.packtemplate`) is what op-pack authors start from, so what it generates
is held to what docs/plugins.md promises a pack gets:

* it is a real distribution: ``pip install --target`` builds and installs it offline, and in a new
  interpreter with nothing but that folder added, discovery finds it (the plugin module is imported
  from the target folder: the name is new, so no other copy can exist);
* its own test suite (hooks, import cost, numpy / torch / JAX against the spec's math, the ONNX
  lowering against numpy on onnxruntime, the round trip, exporter priority) passes as generated,
  run against that installed copy;
* it imports no private name of trama or of the framework packages (modules starting with ``_``,
  names outside the ``__all__`` they come from; for trama-torch, trama-jax and trama-onnx, only
  their top-level package's ``__all__``), so that it keeps working as those packages change inside;
* its torch exporter wins over trama-torch's catch-all tracer for its class whichever of the two
  is discovered first: once with the install folder first on ``sys.path`` (``PYTHONPATH``), once
  with it last (appended after site-packages by the probe itself).
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from trama.tools import PackError, main, new_pack, render_pack, validate_name

NAME = "packcheck"
PACKAGE = f"trama_{NAME}"
DISTRIBUTION = f"trama-{NAME}"
OP = f"{NAME}.Scale"

#: Every file of a generated pack, by path in its folder.
FILES = {
    "LICENSE",
    "MANIFEST.in",
    "README.md",
    "pyproject.toml",
    f"src/{PACKAGE}/__init__.py",
    f"src/{PACKAGE}/checks.py",
    f"src/{PACKAGE}/jax_kernels.py",
    f"src/{PACKAGE}/numpy_kernels.py",
    f"src/{PACKAGE}/onnx_lowering.py",
    f"src/{PACKAGE}/plugin.py",
    f"src/{PACKAGE}/py.typed",
    f"src/{PACKAGE}/torch_modules.py",
    "tests/conftest.py",
    f"tests/{PACKAGE}_support.py",
    "tests/test_exporter_priority.py",
    "tests/test_hooks.py",
    "tests/test_import_cost.py",
    "tests/test_jax.py",
    "tests/test_numpy.py",
    "tests/test_onnx.py",
    "tests/test_roundtrip.py",
    "tests/test_torch.py",
}

#: Whose names the generated code may use, and how: trama by any public module's ``__all__``,
#: the framework packages by their top-level ``__all__`` alone.
TRAMA_ROOT = "trama"
FRAMEWORK_ROOTS = ("trama_numpy", "trama_torch", "trama_jax", "trama_onnx")


# --- names and folders ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "Optics", "9lives", "_optics", "my-pack", "acme.optics", "op tics", "optique\u0301", "x" * 41]
)
def test_names_that_cannot_name_a_namespace_package_and_distribution_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(PackError, match="cannot name a pack"):
        new_pack(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["trama", "core", "numpy", "torch", "jax"])
def test_names_of_trama_itself_are_refused(name: str) -> None:
    with pytest.raises(PackError, match="belong to trama itself"):
        validate_name(name)


@pytest.mark.parametrize("name", ["optics", "x", "acme_optics2", "class"])
def test_lower_case_identifiers_are_accepted(name: str) -> None:
    assert validate_name(name) == name


def test_an_existing_folder_is_used_only_while_empty(tmp_path: Path) -> None:
    taken = tmp_path / DISTRIBUTION
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(PackError, match="already exists and is not empty"):
        new_pack(NAME, tmp_path)
    assert [path.name for path in taken.iterdir()] == ["notes.txt"]
    assert (taken / "notes.txt").read_text() == "mine"

    empty = tmp_path / "elsewhere" / DISTRIBUTION
    empty.mkdir(parents=True)
    assert new_pack(NAME, tmp_path / "elsewhere") == empty
    assert (empty / "pyproject.toml").is_file()


def test_the_pack_has_every_file_with_every_token_filled_in(tmp_path: Path) -> None:
    root = new_pack(NAME, tmp_path / "new" / "folders")  # the destination is created
    written = {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}
    assert written == FILES
    assert {path.as_posix() for path in render_pack(NAME)} == FILES
    for relative in FILES:
        text = (root / relative).read_text(encoding="utf-8")
        assert "{{" not in text, relative
        assert "PACKAGE" not in text, relative
    pyproject = (root / "pyproject.toml").read_text()
    assert f'name = "{DISTRIBUTION}"' in pyproject
    assert f'{NAME} = "{PACKAGE}.plugin"' in pyproject  # the entry point
    assert 'license = "MIT"' in pyproject
    assert '"setuptools>=77"' in pyproject
    assert (root / "LICENSE").read_text().startswith("MIT License")


def test_the_command_writes_the_pack_and_reports_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pack", "new", NAME, "--directory", str(tmp_path)]) == 0
    assert str(tmp_path / DISTRIBUTION) in capsys.readouterr().out
    assert (tmp_path / DISTRIBUTION / "src" / PACKAGE / "plugin.py").is_file()

    assert main(["pack", "new", NAME, "--directory", str(tmp_path)]) == 1
    assert "already exists and is not empty" in capsys.readouterr().err

    assert main(["pack", "new", "Not-A-Name", "--directory", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trama pack new: 'Not-A-Name' cannot name a pack")
    assert not (tmp_path / "trama-Not-A-Name").exists()


# --- public names only ----------------------------------------------------------------------


def _public_names(module: types.ModuleType) -> set[str]:
    return set(getattr(module, "__all__", ()))


def _check_trama_path(parts: list[str], where: str) -> list[str]:
    """Problems with using ``parts`` (``["trama", "plugins", "plugin_host"]``, module then name)."""
    if any(part.startswith("_") for part in parts[1:]):
        return [f"{where}: {'.'.join(parts)} is private"]
    module = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if part in _public_names(module):
            return []  # a public name of this module: what it is used for from here on is its own business
        submodule = f"{module.__name__}.{part}"
        if parts[0] == TRAMA_ROOT and hasattr(module, "__path__") and importlib.util.find_spec(submodule) is not None:
            module = importlib.import_module(submodule)  # a public module of trama: its own __all__ decides
            continue
        return [f"{where}: {'.'.join(parts[: index + 1])} is not in {module.__name__}.__all__"]
    return []


def _check_framework_path(parts: list[str], where: str) -> list[str]:
    if len(parts) == 1:
        return []
    module = importlib.import_module(parts[0])
    if parts[1] not in _public_names(module):
        return [f"{where}: {parts[0]}.{parts[1]} is not in {parts[0]}.__all__ (use the package's public names only)"]
    return []


def _uses(tree: ast.AST, where: str) -> Iterator[tuple[list[str], str]]:
    """Every use of a trama or framework-package name: imports, and attributes of imported modules."""
    bound: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield [*node.module.split("."), alias.name], f"{where}:{node.lineno}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                path = alias.name.split(".")
                yield path, f"{where}:{node.lineno}"
                bound[alias.asname or path[0]] = path if alias.asname else path[:1]
    inner_attributes = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner_attributes:  # whole chains only
            chain: list[str] = []
            inner: ast.expr = node
            while isinstance(inner, ast.Attribute):
                chain.insert(0, inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in bound:
                yield [*bound[inner.id], *chain], f"{where}:{node.lineno}"


def test_the_generated_code_uses_only_public_names_of_trama_and_the_framework_packages() -> None:
    problems: list[str] = []
    checked = 0
    for relative, text in render_pack(NAME).items():
        if relative.suffix != ".py":
            continue
        for parts, where in _uses(ast.parse(text, filename=str(relative)), str(relative)):
            if parts[0] == TRAMA_ROOT:
                problems += _check_trama_path(parts, where)
                checked += 1
            elif parts[0] in FRAMEWORK_ROOTS:
                problems += _check_framework_path(parts, where)
                checked += 1
    assert problems == []
    assert checked > 50  # the walk really saw the pack's uses of trama


def test_the_public_name_check_catches_private_and_internal_names() -> None:
    """The check above must be able to fail: each of these is a use a pack must not make."""
    source = (
        "import trama\n"
        "from trama.tools._cli_json import PLUGINS_HELP\n"
        "from trama.conversion._importer import nonexistent\n"
        "from trama_jax.model import bind_kernel\n"
        "from trama_torch.tensors import tied_parameter\n"
        "import trama_jax\n"
        "trama_jax.model.bind_kernel\n"
        "trama.not_public\n"
    )
    problems: list[str] = []
    for parts, where in _uses(ast.parse(source), "probe.py"):
        check = _check_trama_path if parts[0] == TRAMA_ROOT else _check_framework_path
        problems += check(parts, where)
    assert len(problems) == 6, problems


# --- installed: its own tests, and exporter priority ----------------------------------------


def _can_build_offline() -> bool:
    """The generated pyproject needs setuptools 77 (``license = "MIT"``), which builds wheels on
    its own; without it here, pip would have to download one."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2]) >= (77, 0)


def _child_env(**extra: str) -> dict[str, str]:
    """This environment, without what would change how a child trama or pytest behaves."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTEST_") and key not in ("TRAMA_PLUGINS", "PYTHONPATH")
    }
    env["PYTHONNOUSERSITE"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The generated pack's folder, and the folder it is installed into with pip."""
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed in this interpreter, so the pack cannot be installed")
    if not _can_build_offline():
        pytest.skip("building the pack offline needs setuptools >= 77 in this interpreter")
    work = tmp_path_factory.mktemp("pack")
    root = new_pack(NAME, work)
    target = work / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    pip = subprocess.run(
        [*command, "--target", str(target), str(root)], capture_output=True, text=True, timeout=300, cwd=work
    )
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"
    return root, target


def test_the_generated_pack_passes_its_own_tests_installed(installed: tuple[Path, Path]) -> None:
    root, target = installed
    # cwd=root: the pack's own pytest settings apply (filterwarnings = error), and its source
    # folder (src/) is not importable from there, so the tests run against the installed copy.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests"],
        cwd=root,
        env=_child_env(PYTHONPATH=str(target)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in [\d.]+s(?: \(\S+\))?", summary), summary  # nothing skipped or failed


#: Another op pack, broken: its plugin module raises when discovery imports it, as a pack built
#: for another trama version may. Installed beside the generated one, it must cost the generated
#: pack's tests nothing: its load warning is shown, not turned into their failures.
BROKEN_PACK = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "trama-brokenpack"\nversion = "0.0.1"\n'
        '[project.entry-points.trama]\nbrokenpack = "trama_brokenpack.plugin"\n'
    ),
    "src/trama_brokenpack/__init__.py": "",
    "src/trama_brokenpack/plugin.py": "raise ImportError(\"No module named 'trama.plugins'\")\n",
}


def test_another_broken_pack_installed_costs_the_generated_pack_s_tests_nothing(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    root, target = installed
    source, other = tmp_path / "brokenpack", tmp_path / "site"
    for name, text in BROKEN_PACK.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    pip = subprocess.run(
        [*command, "--target", str(other), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests"],
        cwd=root,
        env=_child_env(PYTHONPATH=os.pathsep.join([str(target), str(other)])),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "trama-brokenpack" in result.stdout  # its warning is shown...
    assert re.search(r"\d+ passed", result.stdout.strip().splitlines()[-1])  # ...and nothing failed


PRIORITY_PROBE = """
import json, sys
if sys.argv[1] == "last":
    sys.path.append(sys.argv[2])  # after site-packages, where trama-torch is installed
import torch
from torch import nn
import trama
from trama.extension import plugin_host
from PACKAGE.torch_modules import Scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.scale = Scale(3)

    def forward(self, x):
        return torch.tanh(self.scale(self.linear(x)))


model = trama.export_model(Net(), inputs=["x"], outputs=["y"])
imported = trama.import_model(trama.loads(trama.dumps(model)))
module = imported.get_submodule("scale")
print(json.dumps({
    "order": [info.distribution for info in plugin_host().plugins()],
    "root_op": model.node("root").op,
    "op": model.node("root.scale").op,
    "class": type(module).__module__ + "." + type(module).__qualname__,
    "graph_module": isinstance(module, torch.fx.GraphModule),
    "plugin_file": sys.modules["PACKAGE.plugin"].__file__,
}))
""".replace("PACKAGE", PACKAGE)


@pytest.mark.parametrize("place", ["first", "last"])
def test_the_packs_exporter_wins_over_the_torch_tracer_in_either_discovery_order(
    installed: tuple[Path, Path], place: str
) -> None:
    for needed in ("torch", "trama_torch"):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"{needed} is not installed")
    _, target = installed
    env = _child_env(PYTHONPATH=str(target)) if place == "first" else _child_env()
    result = subprocess.run(
        [sys.executable, "-c", PRIORITY_PROBE, place, str(target)],
        cwd=target.parent,  # `python -c` puts the working folder on sys.path: keep the checkout off it
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    facts = json.loads(result.stdout)
    order = facts["order"]
    assert order.count(DISTRIBUTION) == 1
    # The two runs really discover the plugins in opposite orders...
    assert (order.index(DISTRIBUTION) < order.index("trama-torch")) is (place == "first")
    assert Path(facts["plugin_file"]).is_relative_to(target)  # ...and load the fresh install.
    # ...and in both, the pack's exporter takes its module inside the model trama-torch traces.
    assert facts["root_op"] == "Graph"
    assert facts["op"] == OP
    assert facts["class"] == f"{PACKAGE}.torch_modules.Scale"
    assert facts["graph_module"] is False
