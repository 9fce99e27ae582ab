"""The distributions follow the packaging conventions users know: what a built wheel and sdist hold.

Every distribution of the repository (the four packages and the example op pack) is built once,
offline, the way a release is (see ``distbuild``), and the files themselves are checked: the
license, the metadata PyPI shows (license expression, classifiers, project URLs, the README as
the long description), entry points, ``py.typed``, consistent dependency bounds, and what each
sdist promises about tests: ``trama-lenses`` ships its tests and they run from the unpacked sdist;
the others ship none, because theirs lean on the monorepo. The READMEs are read as PyPI shows
them, outside the repository: no relative links, and their examples run.
"""

from __future__ import annotations

import ast
import configparser
import email.parser
import email.policy
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from pathlib import Path, PurePosixPath

import pytest
from distbuild import PACKAGE_DIRS, REPO, Built, build_distribution
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

BASE_URL = "https://github.com/trama-format/trama"
DISTRIBUTIONS = list(PACKAGE_DIRS)
# The distributions that make up trama itself, released together at one version.
TRAMA = ["trama", "trama-numpy", "trama-torch", "trama-jax", "trama-onnx", "trama-model-explorer"]

# What each wheel must declare, group -> {name: "module:attr" or "module"}.
ENTRY_POINTS: dict[str, dict[str, dict[str, str]]] = {
    "trama": {
        "console_scripts": {
            "trama": "trama.tools.cli:main",
            "tramaschema": "trama.tools.cli:schema_main",
            "tramassa": "trama.tools.cli:ssa_main",
        }
    },
    "trama-numpy": {"trama": {"numpy": "trama_numpy.plugin"}},
    "trama-torch": {"trama": {"torch": "trama_torch.plugin"}},
    "trama-jax": {"trama": {"jax": "trama_jax.plugin"}},
    "trama-onnx": {"trama": {"onnx": "trama_onnx.plugin"}},
    "trama-lenses": {"trama": {"lenses": "trama_lenses.plugin"}},
    "trama-model-explorer": {},  # Model Explorer imports it by name (--extensions=trama_model_explorer)
}
IMPORT_NAMES = {name: canonicalize_name(name).replace("-", "_") for name in DISTRIBUTIONS}

# Whether the sdist carries its tests (and they run from it) or carries none.
SDIST_HAS_TESTS = {
    "trama": False,
    "trama-numpy": False,
    "trama-torch": False,
    "trama-jax": False,
    "trama-onnx": False,
    "trama-model-explorer": False,
    "trama-lenses": True,
}

REQUIRED_CLASSIFIERS = [
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.11",
    "Typing :: Typed",
]

# A document with one input ``x`` of four features, for the README examples that start from a file.
MAKE_MODEL = """
import torch, trama
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
trama.dump(trama.export_model(model, inputs=["x"], outputs=["y"]), "model.trama.json")
"""
README_NEEDS_A_MODEL = {"trama-numpy", "trama-jax", "trama-onnx", "trama-model-explorer"}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Every distribution, built once for the session."""
    destination = tmp_path_factory.mktemp("dist")
    return {
        name: build_distribution(name, destination, tmp_path_factory.mktemp(f"build-{name}")) for name in DISTRIBUTIONS
    }


# --- reading built files ---------------------------------------------------------------------


def _wheel_names(built: Built) -> list[str]:
    with zipfile.ZipFile(built.wheel) as wheel:
        return wheel.namelist()


def _wheel_text(built: Built, suffix: str) -> str:
    """The one file of the wheel whose path ends with ``suffix``."""
    with zipfile.ZipFile(built.wheel) as wheel:
        (member,) = [name for name in wheel.namelist() if name.endswith(suffix)]
        return wheel.read(member).decode("utf-8")


def _sdist_members(built: Built) -> dict[str, tarfile.TarInfo]:
    """The sdist's files by path below its top folder (``{name}-{version}/``)."""
    with tarfile.open(built.sdist) as archive:
        members = archive.getmembers()
    return {str(PurePosixPath(*PurePosixPath(m.name).parts[1:])): m for m in members if m.isfile()}


def _sdist_text(built: Built, path: str) -> str:
    with tarfile.open(built.sdist) as archive:
        (member,) = [m for m in archive.getmembers() if str(PurePosixPath(*PurePosixPath(m.name).parts[1:])) == path]
        handle = archive.extractfile(member)
        assert handle is not None
        return handle.read().decode("utf-8")


def _parse_metadata(text: str) -> Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def _metadata(built: Built) -> Message:
    return _parse_metadata(_wheel_text(built, ".dist-info/METADATA"))


def _urls(message: Message) -> dict[str, str]:
    pairs = (value.split(",", 1) for value in message.get_all("Project-URL", []))
    return {label.strip(): url.strip() for label, url in pairs}


def _requirements(built: Built) -> list[Requirement]:
    return [Requirement(value) for value in _metadata(built).get_all("Requires-Dist", [])]


# --- license ---------------------------------------------------------------------------------


def test_the_root_license_is_mit_by_the_trama_authors_and_every_package_has_the_same_text() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the trama authors" in text
    for name, folder in PACKAGE_DIRS.items():
        assert (folder / "LICENSE").read_text() == text, f"{name}'s LICENSE differs from the repository's"


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_wheel_and_the_sdist_carry_the_license(built: dict[str, Built], name: str) -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert _wheel_text(built[name], ".dist-info/licenses/LICENSE") == license_text
    assert _sdist_text(built[name], "LICENSE") == license_text
    assert _metadata(built[name]).get_all("License-File") == ["LICENSE"]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_license_is_the_mit_expression_in_the_wheel_and_the_sdist(built: dict[str, Built], name: str) -> None:
    for message in (_metadata(built[name]), _parse_metadata(_sdist_text(built[name], "PKG-INFO"))):
        assert message["License-Expression"] == "MIT"
        # A license classifier next to an expression is refused by PyPI (PEP 639).
        assert not [c for c in message.get_all("Classifier", []) if c.startswith("License ::")]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_build_backend_is_setuptools_recent_enough_for_license_expressions(name: str) -> None:
    """``license = "MIT"`` and ``license-files`` need setuptools 77; the offline builds above use
    this environment's setuptools, so it must satisfy what the package declares."""
    config = tomllib.loads((PACKAGE_DIRS[name] / "pyproject.toml").read_text())
    assert config["build-system"]["build-backend"] == "setuptools.build_meta"
    (requirement,) = [Requirement(r) for r in config["build-system"]["requires"]]
    assert requirement.name == "setuptools"
    assert not requirement.specifier.contains("76.9"), "setuptools older than 77 cannot read the license fields"
    assert requirement.specifier.contains(importlib.metadata.version("setuptools"))


# --- metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_classifiers_say_python_3_11_up_os_independent_typed_and_a_topic(built: dict[str, Built], name: str) -> None:
    message = _metadata(built[name])
    classifiers = message.get_all("Classifier", [])
    for classifier in REQUIRED_CLASSIFIERS:
        assert classifier in classifiers, f"{name} lacks the classifier {classifier!r}"
    assert [c for c in classifiers if c.startswith("Topic :: ")], f"{name} names no topic"
    assert message["Requires-Python"] == ">=3.11"
    versions = [
        c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert all(Version(v) >= Version("3.11") for v in versions), versions
    assert len(classifiers) == len(set(classifiers))


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_project_urls_point_into_the_project(built: dict[str, Built], name: str) -> None:
    urls = _urls(_metadata(built[name]))
    assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues"}
    assert urls["Repository"] == BASE_URL
    assert urls["Issues"] == f"{BASE_URL}/issues"
    for url in (urls["Homepage"], urls["Documentation"]):
        assert url == BASE_URL or _repository_path(url) is not None, url
        _assert_exists_in_repository(url)


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_long_description_is_the_readme_as_markdown(built: dict[str, Built], name: str) -> None:
    readme = (PACKAGE_DIRS[name] / "README.md").read_text()
    for message in (_metadata(built[name]), _parse_metadata(_sdist_text(built[name], "PKG-INFO"))):
        assert message["Description-Content-Type"] == "text/markdown"
        body = message.get_payload()
        assert isinstance(body, str)
        assert body.strip() == readme.strip()
    assert _sdist_text(built[name], "README.md") == readme


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_summary_and_version_are_set(built: dict[str, Built], name: str) -> None:
    message = _metadata(built[name])
    assert message["Name"] == name
    assert message["Summary"]
    version = tomllib.loads((PACKAGE_DIRS[name] / "pyproject.toml").read_text())["project"]["version"]
    assert message["Version"] == version
    assert built[name].wheel.name == f"{IMPORT_NAMES[name]}-{version}-py3-none-any.whl"


def test_trama_is_released_at_one_version_with_one_lower_bound_per_dependency(built: dict[str, Built]) -> None:
    versions = {name: Version(_metadata(built[name])["Version"]) for name in TRAMA}
    assert len(set(versions.values())) == 1, versions
    (version,) = set(versions.values())
    bounds: dict[str, set[str]] = {}
    for name in DISTRIBUTIONS:
        for requirement in _requirements(built[name]):
            bounds.setdefault(canonicalize_name(requirement.name), set()).add(str(requirement.specifier))
    inconsistent = {dep: specs for dep, specs in bounds.items() if len(specs) > 1}
    assert not inconsistent, f"one dependency, several bounds: {inconsistent}"
    for dep in TRAMA:
        for spec in bounds.get(dep, set()):
            assert Requirement(f"{dep}{spec}").specifier.contains(version), f"{dep}{spec} refuses {version}"


def test_trama_torch_brings_the_numpy_reference_runtime(built: dict[str, Built]) -> None:
    """``pip install trama-torch`` alone gives ``"default"`` as trama-numpy's reference runtime."""
    names = {canonicalize_name(r.name) for r in _requirements(built["trama-torch"])}
    assert {"trama", "trama-numpy"} <= names


def test_trama_jax_does_not_depend_on_trama_numpy(built: dict[str, Built]) -> None:
    """trama-jax shares nothing with trama-numpy (the rules both need live in the core); alone,
    its ``jax:cpu`` answers ``"default"`` (tests/test_plugin_contracts.py)."""
    names = {canonicalize_name(r.name) for r in _requirements(built["trama-jax"])}
    assert "trama" in names
    assert "trama-numpy" not in names


# --- contents --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_entry_points_are_declared_and_their_targets_are_in_the_wheel(built: dict[str, Built], name: str) -> None:
    if not ENTRY_POINTS[name]:
        assert not any(n.endswith(".dist-info/entry_points.txt") for n in _wheel_names(built[name]))
        return
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names as written
    parser.read_string(_wheel_text(built[name], ".dist-info/entry_points.txt"))
    declared = {group: dict(parser[group]) for group in parser.sections()}
    assert declared == ENTRY_POINTS[name]
    with zipfile.ZipFile(built[name].wheel) as wheel:
        for targets in declared.values():
            for target in targets.values():
                module, _, attr = target.partition(":")
                source = wheel.read(module.replace(".", "/") + ".py").decode("utf-8")
                if attr:
                    functions = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
                    assert attr in functions, f"{target}: no function {attr} in {module}"


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_wheel_and_the_sdist_are_typed(built: dict[str, Built], name: str) -> None:
    package = IMPORT_NAMES[name]
    assert f"{package}/py.typed" in _wheel_names(built[name])
    assert f"src/{package}/py.typed" in _sdist_members(built[name])


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_wheel_holds_the_package_and_nothing_else(built: dict[str, Built], name: str) -> None:
    package = IMPORT_NAMES[name]
    tops = {PurePosixPath(n).parts[0] for n in _wheel_names(built[name])}
    assert tops == {package, f"{package}-{_metadata(built[name])['Version']}.dist-info"}
    src = PACKAGE_DIRS[name] / "src"
    sources = {p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file() and _kept(p)}
    missing = sources - set(_wheel_names(built[name]))
    assert not missing, f"files of {name}'s source tree (modules or package data) missing from its wheel: {missing}"


@pytest.mark.parametrize("name", [n for n in DISTRIBUTIONS if not SDIST_HAS_TESTS[n]])
def test_sdists_without_runnable_tests_ship_none(built: dict[str, Built], name: str) -> None:
    tests = [p for p in _sdist_members(built[name]) if _is_test_file(p)]
    assert tests == [], f"{name}'s sdist ships tests that cannot run outside the repository: {tests}"


def test_the_lenses_sdist_ships_every_test_file(built: dict[str, Built]) -> None:
    folder = PACKAGE_DIRS["trama-lenses"] / "tests"
    expected = {f"tests/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*") if p.is_file() and _kept(p)}
    shipped = {p for p in _sdist_members(built["trama-lenses"]) if p.startswith("tests/")}
    assert "tests/conftest.py" in shipped
    assert shipped == expected


def test_the_lenses_sdist_tests_run_from_the_unpacked_sdist(built: dict[str, Built], tmp_path: Path) -> None:
    """Unpack the sdist, install it from there into an empty folder (ahead of everything else on
    the path), and run its own pytest configuration and tests against that installation."""
    with tarfile.open(built["trama-lenses"].sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (source,) = (tmp_path / "unpacked").iterdir()
    target = tmp_path / "site"
    pip_install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    pip = subprocess.run(
        [*pip_install, "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert pip.returncode == 0, f"pip install of the unpacked sdist failed:\n{pip.stdout}\n{pip.stderr}"
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONNOUSERSITE": "1"}
    where = subprocess.run(
        [sys.executable, "-c", "import trama_lenses.plugin as p; print(p.__file__)"],
        cwd=source,  # where pytest runs below, with the same sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(target), "the tests would not exercise the sdist's code"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.match(r"\d+ passed", run.stdout.splitlines()[-1]), run.stdout[-2000:]


# --- READMEs as PyPI shows them ----------------------------------------------------------------


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_readme_has_no_relative_links_and_its_repository_links_resolve(name: str) -> None:
    readme = (PACKAGE_DIRS[name] / "README.md").read_text()
    targets = [
        *re.findall(r"\]\(\s*<?([^)\s>]+)", readme),  # [text](target)
        *re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", readme, flags=re.M),  # [label]: target
        *re.findall(r"(?:href|src)\s*=\s*[\"']([^\"']+)", readme),  # HTML
    ]
    relative = [t for t in targets if not t.startswith("https://")]
    assert relative == [], f"{name}'s README has links that break outside the repository: {relative}"
    for url in re.findall(re.escape(BASE_URL) + r"[^\s)>\]\"'`]*", readme):
        _assert_exists_in_repository(url)


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_readme_says_what_how_to_install_an_example_and_where_the_docs_are(name: str) -> None:
    readme = (PACKAGE_DIRS[name] / "README.md").read_text()
    assert readme.startswith(f"# {name}\n")
    assert re.search(rf"pip install {re.escape(name)}(?![\w-])", readme), (
        f"{name}'s README does not say how to install it"
    )
    assert "```python\n" in readme, f"{name}'s README has no example"
    assert f"{BASE_URL}/blob/main/docs/" in readme, f"{name}'s README links to no documentation"


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_readme_examples_run(name: str, tmp_path: Path) -> None:
    """Each README's python blocks, run in order in a fresh process; those that start from "a
    document any exporter wrote" get one with the input the README describes."""
    readme = PACKAGE_DIRS[name] / "README.md"
    code = "\n".join(re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S))
    if name in README_NEEDS_A_MODEL:
        code = MAKE_MODEL + code
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONNOUSERSITE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{readme}'s example failed:\n{done.stderr[-4000:]}"


# --- helpers ---------------------------------------------------------------------------------


def _is_test_file(path: str) -> bool:
    """A test folder at the sdist's top, or a module pytest would collect or configure itself with,
    anywhere (package data such as templates under a ``tests/`` folder of a package is not one)."""
    pure = PurePosixPath(path)
    if pure.parts[0] in {"tests", "test"}:
        return True
    return pure.suffix == ".py" and (pure.name.startswith("test_") or pure.name == "conftest.py")


def _kept(path: Path) -> bool:
    """Whether a file in the checkout is source, not what Python or setuptools left there."""
    litter = any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts)
    return not litter and path.suffix not in {".pyc", ".pyo"}


def _repository_path(url: str) -> str | None:
    """The path inside the repository that a ``/blob/main/`` or ``/tree/main/`` URL names."""
    match = re.fullmatch(re.escape(BASE_URL) + r"/(?:blob|tree)/main/([^#?]+)(?:#.*)?", url)
    return match.group(1).rstrip("/") if match else None


def _assert_exists_in_repository(url: str) -> None:
    path = _repository_path(url)
    if path is not None:
        assert (REPO / path).exists(), f"{url} names {path}, which is not in the repository"
    else:
        assert re.fullmatch(re.escape(BASE_URL) + r"(/issues)?/?(#readme)?", url), f"unexpected project URL {url}"
