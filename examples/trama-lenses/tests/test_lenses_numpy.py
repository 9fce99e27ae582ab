"""The numpy implementations against values computed by hand.

Each element is built by its factory from a node and table entries, exactly as
``trama.import_model`` builds it, so these tests cover the factories as well as the optics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from trama import Node, Parameter, Tensor
from trama_lenses import AsphericSurface, FreeSpace, System, ThinLens, plugin


def build(op: str, children: dict[str, Any] | None = None, **slots: Parameter) -> Any:
    factories = plugin.trama_op_implementations("numpy")
    assert factories is not None
    node = Node(id="n", op=op, inputs={}, outputs=["rays"])
    return factories[op](node, children=children or {}, parameters=slots)


def test_thin_lens_bends_each_ray_by_minus_height_over_f() -> None:
    lens = build("lenses.ThinLens", focal_length=Parameter(2.0))
    rays = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [-4.0, 0.25]])
    # θ_out = θ - y/f; y unchanged.
    np.testing.assert_array_equal(lens(rays), [[1.0, -0.5], [0.0, 1.0], [2.0, -0.5], [-4.0, 2.25]])


def test_a_diverging_lens_and_an_integer_focal_length() -> None:
    lens = build("lenses.ThinLens", focal_length=Parameter(-4))  # ints are accepted where float is declared
    np.testing.assert_array_equal(lens(np.array([[2.0, 0.0]])), [[2.0, 0.5]])


def test_free_space_moves_each_ray_by_distance_times_angle() -> None:
    space = build("lenses.FreeSpace", distance=Parameter(3.0))
    np.testing.assert_array_equal(space(np.array([[1.0, 0.5], [0.0, -1.0]])), [[2.5, 0.5], [-3.0, -1.0]])


def test_an_imaging_system_maps_every_ray_from_a_point_to_one_image_point() -> None:
    """1/3 + 1/1.5 = 1/1: an object 3 before a lens of f = 1 images 1.5 behind it at -1.5/3 = -0.5x.

    M = [[1, 1.5], [0, 1]] @ [[1, 0], [-1, 1]] @ [[1, 3], [0, 1]] = [[-0.5, 0], [-1, -2]]."""
    parts = {
        "element_0": build("lenses.FreeSpace", distance=Parameter(3.0)),
        "element_1": build("lenses.ThinLens", focal_length=Parameter(1.0)),
        "element_2": build("lenses.FreeSpace", distance=Parameter(1.5)),
    }
    system = build("lenses.System", children=parts)
    np.testing.assert_allclose(system.matrix, [[-0.5, 0.0], [-1.0, -2.0]], atol=1e-15)
    angles = np.array([-0.2, 0.0, 0.1, 0.3])
    out = system(np.stack([np.ones_like(angles), angles], axis=1))
    np.testing.assert_allclose(out[:, 0], -0.5, atol=1e-15)  # same height whatever the angle
    np.testing.assert_allclose(out[:, 1], -1.0 - 2.0 * angles, atol=1e-15)


def test_an_empty_system_passes_rays_through() -> None:
    np.testing.assert_array_equal(System()(np.array([[1, 2]])), [[1.0, 2.0]])


def test_precision_follows_the_rays() -> None:
    lens = ThinLens(3.0)
    assert lens(np.zeros((2, 2), np.float32)).dtype == np.float32
    assert lens(np.zeros((2, 2), np.float64)).dtype == np.float64
    assert lens(np.zeros((2, 2), np.int64)).dtype == np.float64


@pytest.mark.parametrize("shape", [(2,), (3, 3), (1, 2, 2)])
def test_rays_must_be_n_by_2(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        FreeSpace(1.0)(np.zeros(shape))


def test_elements_refuse_impossible_values() -> None:
    with pytest.raises(ValueError, match="non-zero"):
        ThinLens(0.0)
    with pytest.raises(ValueError, match="finite"):
        FreeSpace(math.inf)
    with pytest.raises(TypeError, match="ray transfer"):
        System(AsphericSurface(1.0))  # type: ignore[arg-type]


def asphere(curvature: float, conic: float, coefficients: list[float]) -> Any:
    return build(
        "lenses.AsphericSurface",
        curvature=Parameter(curvature),
        conic=Parameter(conic),
        coefficients=Parameter(Tensor.from_array(np.array(coefficients, np.float32)), learnable=True),
    )


def test_a_sphere_has_the_sag_of_a_circle() -> None:
    """k = 0, c = 1/R: z = R - sqrt(R² - r²). R = 2 at r = 1: 2 - sqrt(3)."""
    r = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    np.testing.assert_allclose(asphere(0.5, 0.0, [])(r), 2.0 - np.sqrt(4.0 - r**2), rtol=1e-14, atol=1e-15)
    assert asphere(0.5, 0.0, [])(np.array([1.0]))[0] == pytest.approx(0.2679491924311228, rel=1e-14)


def test_a_paraboloid_is_c_r_squared_over_two() -> None:
    r = np.array([0.0, 1.0, 3.0, 10.0])  # k = -1: defined for every r
    np.testing.assert_allclose(asphere(0.25, -1.0, [])(r), 0.125 * r**2, rtol=1e-15)


def test_polynomial_terms_start_at_r_to_the_fourth() -> None:
    """a = [1/8, 1/64] (exact in float32) at r = 2: 16/8 + 64/64 = 3."""
    assert asphere(0.0, 0.0, [0.125, 0.015625])(np.array([2.0]))[0] == 3.0
    # Conic plus polynomial: paraboloid c = 0.5 at r = 2 is 1, plus 3.
    assert asphere(0.5, -1.0, [0.125, 0.015625])(np.array([2.0]))[0] == 4.0


def test_beyond_the_conic_the_sag_is_nan_without_a_warning() -> None:
    sag = asphere(0.5, 0.0, [0.125])(np.array([1.0, 3.0]))  # R = 2: no sphere at r = 3
    assert not np.isnan(sag[0])
    assert np.isnan(sag[1])


def test_the_sag_keeps_float32_and_any_shape() -> None:
    sag = asphere(0.5, 0.0, [0.125])(np.zeros((2, 3), np.float32))
    assert sag.dtype == np.float32
    assert sag.shape == (2, 3)


def test_coefficients_must_be_a_float32_vector() -> None:
    factories = plugin.trama_op_implementations("numpy")
    assert factories is not None
    node = Node(id="n", op="lenses.AsphericSurface", inputs={}, outputs=["sag"])
    for wrong in (np.zeros(2, np.float64), np.zeros((2, 2), np.float32)):
        parameters = {
            "curvature": Parameter(0.5),
            "conic": Parameter(0.0),
            "coefficients": Parameter(Tensor.from_array(wrong), learnable=True),
        }
        with pytest.raises(ValueError, match="float32 vector"):
            factories["lenses.AsphericSurface"](node, children={}, parameters=parameters)
