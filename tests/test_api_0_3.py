"""Every public name of trama 0.3.0 still works in 0.4, or warns naming its new home.

``tests/fixtures/api_0_3_0.json`` lists the public names of trama, trama-numpy, trama-torch and
trama-jax at commit cca74cd (0.3.0), module by module (``tests/fixtures/api_snapshot.py``
produced it). The deprecation rule (docs/plugins.md, "Migrating from 0.3 to 0.4"): a name that
moved keeps working at its old path for one minor version, with a ``DeprecationWarning`` that
says where it went. Here each module of that list is imported and each of its names read:

* a module that moved is a shim (``trama._deprecated.MOVED_MODULES``): importing it warns once,
  naming its new home, and each old name is the very object found there;
* a module that is still there imports without a warning, and each old name is there too,
  without a warning, unless it is listed in ``MOVED_NAMES`` (it warns, naming its new home) or
  ``ADAPTED`` (it exists, and warns when used).

``GONE`` lists the names that could not be kept, with the reason: none.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trama._deprecated import MOVED_MODULES

HERE = Path(__file__).resolve().parent
API = json.loads((HERE / "fixtures" / "api_0_3_0.json").read_text())
MODULES: dict[str, list[str]] = {module: entry["names"] for module, entry in API["modules"].items()}

#: Names that moved out of a module that still exists: reading one warns, naming its new home.
MOVED_NAMES = {"trama_numpy.functions.promote_types": "trama.catalog.promote_types"}
#: Names that exist with a changed contract: an adapter that keeps the old behaviour and warns
#: when used (the test calls it in ``test_bind_kernel_still_builds_a_callable_module``).
ADAPTED = {"trama_jax.model.bind_kernel"}
#: Names of 0.3.0 that are gone, with the reason.
GONE: dict[str, str] = {}

FRAMEWORKS = {"trama_torch": "torch", "trama_jax": "jax"}


def test_the_snapshot_is_trama_0_3_0() -> None:
    assert API["version"] == "0.3.0"
    assert API["commit"].startswith("cca74cd")
    assert len(MODULES) > 70
    assert "hookimpl" in MODULES["trama.hookspecs"]


def _needs_framework(module: str) -> None:
    framework = FRAMEWORKS.get(module.split(".")[0])
    if framework is not None and importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")


def _fresh_import(module: str) -> tuple[ModuleType, list[warnings.WarningMessage]]:
    """Import ``module`` as for the first time in this process, recording every warning."""
    parent, _, child = module.rpartition(".")
    sys.modules.pop(module, None)
    if parent and parent in sys.modules and child in vars(sys.modules[parent]):
        delattr(sys.modules[parent], child)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = importlib.import_module(module)
    return imported, caught


def _deprecations(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("module", sorted(MOVED_MODULES))
def test_a_moved_module_warns_once_naming_its_new_home_and_keeps_every_name(module: str) -> None:
    _needs_framework(module)
    homes = MOVED_MODULES[module]
    shim, caught = _fresh_import(module)
    (message,) = _deprecations(caught)
    assert message.startswith(f"{module} is deprecated since trama 0.4.0 and will be removed in 0.5.0: it moved to")
    assert all(home in message for home in homes)
    assert "Migrating from 0.3 to 0.4" in message
    (warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    # Attributed to the line that imported the shim (here, importlib), not to trama.
    assert "trama/_deprecated.py" not in warning.filename
    assert f"{module.replace('.', '/')}.py" not in warning.filename

    assert sorted(shim.__all__) == sorted(MODULES[module])
    for name in MODULES[module]:
        value = getattr(shim, name)
        assert any(value is getattr(importlib.import_module(home), name, None) for home in homes), (module, name)

    with warnings.catch_warnings(record=True) as again:  # once per process: a module runs once
        warnings.simplefilter("always")
        importlib.import_module(module)
    assert _deprecations(again) == []


@pytest.mark.parametrize("module", sorted(set(MODULES) - set(MOVED_MODULES)))
def test_a_module_still_there_has_every_0_3_name(module: str) -> None:
    _needs_framework(module)
    imported = importlib.import_module(module)  # filterwarnings = error: any warning fails here
    for name in MODULES[module]:
        dotted = f"{module}.{name}"
        if dotted in GONE:
            assert not hasattr(imported, name), f"{dotted} is listed as gone but exists"
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(imported, name)
        messages = _deprecations(caught)
        if dotted in MOVED_NAMES:
            (message,) = messages
            assert message.startswith(f"{dotted} is deprecated since trama 0.4.0")
            assert MOVED_NAMES[dotted] in message
            home, _, attribute = MOVED_NAMES[dotted].rpartition(".")
            assert value is getattr(importlib.import_module(home), attribute)
        else:
            assert messages == [], dotted


def test_the_lists_of_exceptions_name_real_0_3_names() -> None:
    for dotted in [*MOVED_NAMES, *ADAPTED, *GONE]:
        module, _, name = dotted.rpartition(".")
        assert name in MODULES[module], dotted
        assert module not in MOVED_MODULES, dotted


def test_bind_kernel_still_builds_a_callable_module() -> None:
    """0.3 packs wrapped their JAX factories in ``bind_kernel`` and called what it built; the
    registry wraps every factory itself now, and ``bind_kernel`` keeps working, with a warning."""
    pytest.importorskip("jax")
    import numpy as np

    import trama
    from trama_jax.kernel import JaxKernel
    from trama_jax.model import JaxLeaf, bind_kernel

    def build_double(node: trama.Node, *, children: Any, parameters: Any) -> JaxKernel:
        return JaxKernel(lambda tensors, inputs: {"y": inputs["x"] * 2})

    with pytest.warns(DeprecationWarning, match=r"^trama_jax\.model\.bind_kernel is deprecated since trama 0\.4\.0"):
        factory = bind_kernel(build_double)
    assert factory.__name__ == "build_double"
    node = trama.Node(id="double", op="Identity", inputs={"x": trama.Ref("%input", "x")}, outputs=["y"])
    module = factory(node, children={}, parameters={})
    assert isinstance(module, JaxLeaf)
    np.testing.assert_allclose(np.asarray(module(np.ones(3, dtype=np.float32))), [2.0, 2.0, 2.0])


def test_trama_itself_never_imports_a_deprecated_path() -> None:
    """Importing every module of the four packages but the shims warns about no old path, and
    leaves no shim imported: only user code that names an old path sees the warning."""
    probe = """
import importlib, json, pkgutil, sys, warnings
from trama._deprecated import MOVED_MODULES
shims = set(MOVED_MODULES)
found = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for top in ("trama", "trama_numpy", "trama_torch", "trama_jax"):
        try:
            package = importlib.import_module(top)
        except ImportError:
            continue
        names = [info.name for info in pkgutil.walk_packages(package.__path__, top + ".")]
        for name in names:
            if name not in shims:
                try:
                    importlib.import_module(name)
                except ImportError as exc:
                    if exc.name not in ("torch", "jax", "jaxlib"):
                        raise
    import trama
    trama.registry("numpy"), trama.registry("torch"), trama.registry("jax")
print(json.dumps({
    "warnings": [str(w.message) for w in caught if "since trama 0.4.0" in str(w.message)],
    "shims": sorted(shims & set(sys.modules)),
}))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"warnings": [], "shims": []}
