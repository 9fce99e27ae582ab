"""Export → dump → load → import, with nothing but discovery: no registry is built by hand.

``trama.export_model`` without ``registry`` uses the discovered one (every installed plugin's
specs and exporters) and ``trama.import_model`` without ``registry`` uses
``trama.registry("numpy")``; both find the ``lenses`` ops only because this distribution is
installed with its ``trama`` entry point.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trama
from trama import ImportModelError, Parameter, Tensor
from trama_lenses import AsphericSurface, FreeSpace, System, ThinLens


def imaging_system() -> System:
    """Object at 3, lens f = 1, image at 1.5 (magnification -0.5), then a relay to a second lens."""
    return System(FreeSpace(3.0), ThinLens(1.0), FreeSpace(1.5), FreeSpace(0.5), ThinLens(-2.0))


def round_trip(model: trama.Model, path: Path) -> trama.Model:
    trama.dump(model, path)
    return trama.load(path)


def test_a_lens_system_survives_the_round_trip(tmp_path: Path) -> None:
    system = imaging_system()
    model = trama.export_model(system, inputs=["rays"], outputs=["rays"])
    assert model.opsets == {"lenses": 1}  # recorded from the pack's trama_opsets
    assert [node.op for node in model.nodes] == [
        "lenses.System",
        "lenses.FreeSpace",
        "lenses.ThinLens",
        "lenses.FreeSpace",
        "lenses.FreeSpace",
        "lenses.ThinLens",
    ]

    loaded = round_trip(model, tmp_path / "system.trama.json")
    trama.validate(loaded, trama.registry("numpy"))
    rebuilt = trama.import_model(loaded)

    assert isinstance(rebuilt, System)
    assert [type(element) for element in rebuilt.elements] == [type(element) for element in system.elements]
    rays = np.random.default_rng(0).standard_normal((64, 2))
    np.testing.assert_array_equal(rebuilt(rays), system(rays))
    np.testing.assert_array_equal(rebuilt.matrix, system.matrix)


def test_import_through_the_numpy_registry_named_explicitly(tmp_path: Path) -> None:
    system = imaging_system()
    loaded = round_trip(trama.export_model(system, inputs=["rays"], outputs=["rays"]), tmp_path / "s.json")
    rebuilt = trama.import_model(loaded, registry=trama.registry("numpy"))
    rays = np.array([[1.0, 0.1]], np.float32)
    out = rebuilt(rays)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, system(rays))


def test_an_aspheric_surface_keeps_its_learnable_float32_coefficients(tmp_path: Path) -> None:
    surface = AsphericSurface(curvature=0.02, conic=-0.6, coefficients=[1e-5, -3e-8, 2e-11])
    model = trama.export_model(surface, inputs=["r"], outputs=["sag"])
    loaded = round_trip(model, tmp_path / "asphere.trama.json")

    entry = loaded.parameters[loaded.nodes[0].parameters["coefficients"]]
    assert entry.learnable
    assert isinstance(entry.value, Tensor)
    assert entry.value.dtype == "float32"
    assert entry.value.shape == (3,)

    rebuilt = trama.import_model(loaded)
    assert isinstance(rebuilt, AsphericSurface)
    np.testing.assert_array_equal(rebuilt.coefficients, surface.coefficients)
    r = np.linspace(0.0, 20.0, 41)
    np.testing.assert_array_equal(rebuilt(r), surface(r))


def test_a_document_that_breaks_the_spec_is_refused_with_the_node_named(tmp_path: Path) -> None:
    model = trama.export_model(AsphericSurface(0.5, 0.0, [0.125]), inputs=["r"], outputs=["sag"])
    key = model.nodes[0].parameters["coefficients"]
    model.parameters[key] = Parameter(Tensor.from_array(np.array([0.125])), learnable=True)  # float64
    with pytest.raises(ImportModelError, match="float32 vector") as caught:
        trama.import_model(round_trip(model, tmp_path / "bad.json"))
    assert caught.value.node_id == "root"


def test_a_lens_system_runs_on_the_numpy_runtime(tmp_path: Path) -> None:
    """The factories return elements (``import_model`` hands them to the user); the runtime runs
    each element's ``trama_kernel()``, so the same file also runs there, element by element."""
    system = imaging_system()
    model = round_trip(trama.export_model(system, inputs=["rays"], outputs=["rays"]), tmp_path / "s.trama.json")
    rays = np.array([[1.0, 0.0], [0.5, 0.1], [-0.2, 0.3]])
    (out,) = trama.runtime_for_name("numpy").prepare(model).run([rays])
    np.testing.assert_allclose(out, system(rays), rtol=1e-12)


def test_an_aspheric_surface_runs_on_the_numpy_runtime() -> None:
    surface = AsphericSurface(0.5, -1.0, np.array([0.01, -0.002], dtype=np.float32))
    model = trama.export_model(surface, inputs=["r"], outputs=["sag"])
    r = np.linspace(0.0, 1.0, 5)
    (sag,) = trama.runtime_for_name("numpy").prepare(model).run([r])
    np.testing.assert_allclose(sag, surface(r), rtol=1e-12)
