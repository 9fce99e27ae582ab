"""The architecture as docs/architecture.md states it, checked on the source: trama-core's layers
import only downwards, no package has an import cycle, and every module the document names exists.

Imports are read from the source (``ast``), not by importing it: an import inside a function
counts (it runs too, only later); one under ``if TYPE_CHECKING:`` does not (it never runs).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from trama._deprecated import MOVED_MODULES

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {
    "trama": REPO / "packages/trama-core/src/trama",
    "trama_numpy": REPO / "packages/trama-numpy/src/trama_numpy",
    "trama_torch": REPO / "packages/trama-torch/src/trama_torch",
    "trama_jax": REPO / "packages/trama-jax/src/trama_jax",
}
#: trama-core's layers, lowest first: a module may import its own layer and the ones below.
LAYERS = ("base", "format", "extension", "catalog", "conversion", "execution", "tools")
BASE_MODULES = {"trama.errors", "trama.version", "trama._deprecated"}
#: The module paths of trama 0.3 kept as deprecated shims for one minor version (docs/plugins.md,
#: "Migrating from 0.3 to 0.4"). They sit above every layer, like ``trama`` itself: each re-exports
#: names from its new home, wherever that is. No layer may import them (the tests below say so),
#: so they add no edge a cycle could use.
SHIMS = frozenset(MOVED_MODULES)


def module_name(package: str, path: Path) -> str:
    parts = path.relative_to(PACKAGES[package].parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(package, path): path for path in sorted(PACKAGES[package].rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, name: str, *, module_level_only: bool) -> Iterator[str]:
    """The modules ``path`` (the module ``name``) imports; ``from a import b`` counts as ``a.b``
    when that is a module, else ``a``."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST, top: bool) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                yield from (item for stmt in child.orelse for item in visit_one(stmt, top))
                continue
            yield from visit_one(child, top)

    def visit_one(node: ast.AST, top: bool) -> Iterator[str]:
        if isinstance(node, ast.Import):
            if top or not module_level_only:
                yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if top or not module_level_only:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    yield f"{base}.{alias.name}"  # the submodule, or (if it is a name) the module
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield from visit(node, False)
        else:
            yield from visit(node, top)

    yield from visit(tree, True)


def internal_imports(package: str, *, module_level_only: bool) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of the four packages it imports."""
    known = {name for each in PACKAGES for name in modules(each)}
    graph: dict[str, set[str]] = {}
    for name, path in modules(package).items():
        found = set()
        for target in imports(path, name, module_level_only=module_level_only):
            # ``from trama.format import Model``: the module trama.format, not trama.format.Model.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
        graph[name] = found
    return graph


def layer_of(module: str) -> str:
    if module in BASE_MODULES:
        return "base"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in LAYERS:
        return parts[1]
    raise AssertionError(f"{module} belongs to no layer: put it in one of {LAYERS[1:]}")


def test_every_core_module_belongs_to_a_layer() -> None:
    for module in modules("trama"):
        if module == "trama" or module in SHIMS:
            continue  # the public face of the whole library, and the old paths kept for 0.4
        layer_of(module)


def test_core_layers_import_only_downwards() -> None:
    rank = {layer: index for index, layer in enumerate(LAYERS)}
    wrong = []
    for module, targets in internal_imports("trama", module_level_only=False).items():
        if module == "trama" or module in SHIMS:
            continue
        for target in sorted(targets):
            if target == "trama" or not target.startswith("trama."):
                wrong.append(f"{module} imports {target}") if target.startswith("trama") else None
                continue
            if rank[layer_of(target)] > rank[layer_of(module)]:
                wrong.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert wrong == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_package_has_an_import_cycle(package: str) -> None:
    graph = internal_imports(package, module_level_only=True)
    # A package's face (__init__) imports its modules; a module never imports its own face.
    assert _cycles(graph) == []


def test_no_module_imports_a_deprecated_path() -> None:
    """The shims warn when imported: trama's own code never does, so only old user code sees it."""
    wrong = [
        f"{module} imports {target}"
        for package in PACKAGES
        for module, targets in internal_imports(package, module_level_only=False).items()
        if module not in SHIMS
        for target in sorted(targets & SHIMS)
    ]
    assert wrong == []


def test_each_deprecated_path_is_a_shim_that_imports_only_its_new_home() -> None:
    known = {name: path for package in PACKAGES for name, path in modules(package).items()}
    wrong = []
    for shim, homes in sorted(MOVED_MODULES.items()):
        if shim not in known:
            wrong.append(f"{shim}: no such module")
            continue
        found = set(imports(known[shim], shim, module_level_only=False))
        expected = {"__future__.annotations", "trama._deprecated.moved_module"}
        allowed = {f"{home}.{name}" for home in homes for name in _imported_names(known[shim], home)}
        if found - expected - allowed:
            wrong.append(f"{shim} imports {sorted(found - expected - allowed)}")
        if "moved_module(__name__)" not in known[shim].read_text():
            wrong.append(f"{shim} does not call moved_module(__name__)")
    assert wrong == []


def _imported_names(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
    ]


def test_the_cycle_check_can_fail() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_and_path_docs_architecture_names_exists() -> None:
    # The last section lists the paths modules had before the layers: those no longer exist.
    text = (REPO / "docs" / "architecture.md").read_text().split("## Where the old module paths went")[0]
    known = {name for each in PACKAGES for name in modules(each)}
    named = set(re.findall(r"`((?:trama|trama_numpy|trama_torch|trama_jax)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", text))
    missing = []
    for dotted in sorted(named):
        parts = dotted.split(".")
        # A module, or a name in a module (trama.format.Model): the longest module prefix must exist
        # and, for a name, the module must define or re-export it.
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in known:
                rest = parts[cut:]
                if rest:
                    source = modules(module.split(".")[0])[module].read_text()
                    if not re.search(rf"\b{re.escape(rest[0])}\b", source):
                        missing.append(dotted)
                break
        else:
            missing.append(dotted)
    paths = set(re.findall(r"`((?:packages|docs|tests|examples|benchmarks|demo)/[^`\s]+)`", text))
    missing += [path for path in sorted(paths) if not (REPO / path.rstrip("/")).exists()]
    assert named, "docs/architecture.md names no module"
    assert missing == []
