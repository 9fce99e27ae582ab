"""The plugin module on its own: what each hook returns, and that importing it is cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trama import OpSpec
from trama_lenses import plugin

OPS = {"lenses.AsphericSurface", "lenses.FreeSpace", "lenses.System", "lenses.ThinLens"}


def test_specs_are_namespaced_documented_and_framework_neutral() -> None:
    specs = list(plugin.trama_op_specs())
    assert {spec.name for spec in specs} == OPS
    for spec in specs:
        assert isinstance(spec, OpSpec)
        assert spec.name.rpartition(".")[0] in plugin.trama_opsets()
        assert spec.factory is None  # factories come from trama_op_implementations, per framework
        assert spec.doc, f"{spec.name} has no doc"
        assert all(slot.doc for slot in spec.parameters), f"{spec.name} has an undocumented slot"


def test_signatures() -> None:
    specs = {spec.name: spec for spec in plugin.trama_op_specs()}
    for name in ("lenses.ThinLens", "lenses.FreeSpace", "lenses.System"):
        assert (specs[name].inputs, specs[name].outputs) == (("rays",), ("rays",))
    assert specs["lenses.System"].composite
    assert not any(specs[name].composite for name in OPS - {"lenses.System"})
    asphere = specs["lenses.AsphericSurface"]
    assert (asphere.inputs, asphere.outputs) == (("r",), ("sag",))
    assert [(s.name, s.types, s.learnable) for s in asphere.parameters] == [
        ("curvature", ("float",), None),
        ("conic", ("float",), None),
        ("coefficients", ("tensor",), True),
    ]


def test_opsets_and_frameworks() -> None:
    assert plugin.trama_opsets() == {"lenses": 1}
    assert list(plugin.trama_frameworks()) == ["numpy", "onnx"]


def test_numpy_implements_every_op_and_nothing_else() -> None:
    implementations = plugin.trama_op_implementations("numpy")
    assert implementations is not None
    assert set(implementations) == OPS
    assert all(callable(factory) for factory in implementations.values())


def test_onnx_lowers_every_leaf_and_leaves_the_composite_to_trama_onnx() -> None:
    lowerings = plugin.trama_op_implementations("onnx")
    assert lowerings is not None
    assert set(lowerings) == OPS - {"lenses.System"}
    assert all(callable(factory) for factory in lowerings.values())
    assert plugin.trama_exporters("onnx") is None


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_other_frameworks_get_nothing(framework: str) -> None:
    assert plugin.trama_op_implementations(framework) is None
    assert plugin.trama_exporters(framework) is None


def test_the_exporter_declines_foreign_objects_without_looking_at_the_context() -> None:
    import numpy as np

    # ctx=None: declining must not touch the context (trama offers every object to every exporter).
    for foreign in (object(), np.zeros(2), 3.0, plugin):
        assert plugin.export_element(foreign, None) is None  # type: ignore[arg-type]


def test_importing_the_plugin_loads_no_implementation_and_no_framework() -> None:
    """Discovery imports the plugin in every program that uses trama, so it must not pull in the
    element classes (numpy code, in a real pack perhaps torch), the ONNX lowerings (onnx) nor any
    framework, even when every registry is built."""
    probe = (
        "import json, sys; import trama_lenses.plugin; import trama; "
        "[trama.registry(framework) for framework in ('numpy', 'onnx')]; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('trama_lenses', 'torch', 'jax', 'tensorflow', 'onnx', 'onnxruntime'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(result.stdout) == ["trama_lenses", "trama_lenses.plugin"]
