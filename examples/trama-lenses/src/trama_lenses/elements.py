"""Paraxial optical elements in plain numpy.

This is the "optics library" half of the pack: it imports nothing of trama. The plugin
(:mod:`trama_lenses.plugin`) teaches trama to export these objects and to build them back. The
one trama convention here is ``trama_kernel()``: how trama's graph runtimes (``numpy``) call an
element, with its input ports by name, so that an imported document also runs there.

Rays follow the ray transfer (ABCD) matrix convention: an array of shape ``[N, 2]`` whose rows
are ``(height, angle)`` — the distance ``y`` from the optical axis and the paraxial slope
``θ ≈ tan θ`` — in one consistent length unit. An element with matrix ``M`` maps each row ``v``
to ``M @ v``, i.e. the whole batch to ``rays @ M.T``. Elements are listed in the order light
meets them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["AsphericSurface", "FreeSpace", "RayTransferElement", "System", "ThinLens", "apply_matrix"]


def _float_dtype(array: np.ndarray) -> np.dtype[Any]:
    """float32 input stays float32 and float64 stays float64; integers are computed in float64."""
    return np.result_type(array.dtype, np.float32)


def apply_matrix(matrix: npt.ArrayLike, rays: npt.ArrayLike) -> np.ndarray:
    """``rays @ matrix.T`` for a ``[N, 2]`` batch of ``(height, angle)`` rows, in the rays' precision."""
    rays = np.asarray(rays)
    if rays.ndim != 2 or rays.shape[1] != 2:
        raise ValueError(f"rays must have shape [N, 2] (height, angle), got {list(rays.shape)}")
    dtype = _float_dtype(rays)
    result: np.ndarray = rays.astype(dtype, copy=False) @ np.asarray(matrix, dtype=dtype).T
    return result


@runtime_checkable
class RayTransferElement(Protocol):
    """Anything with a 2x2 ray transfer matrix; :class:`System` chains these."""

    @property
    def matrix(self) -> np.ndarray: ...

    def __call__(self, rays: npt.ArrayLike) -> np.ndarray: ...


class ThinLens:
    """An ideal thin lens of focal length ``f`` (converging if ``f > 0``).

    Matrix ``[[1, 0], [-1/f, 1]]``: the height is unchanged and the angle bends by ``-y/f``.
    """

    def __init__(self, focal_length: float) -> None:
        if focal_length == 0 or not math.isfinite(focal_length):
            raise ValueError(f"focal_length must be finite and non-zero, got {focal_length}")
        self.focal_length = float(focal_length)

    @property
    def matrix(self) -> np.ndarray:
        return np.array([[1.0, 0.0], [-1.0 / self.focal_length, 1.0]])

    def __call__(self, rays: npt.ArrayLike) -> np.ndarray:
        return apply_matrix(self.matrix, rays)

    def trama_kernel(self) -> Callable[[Mapping[str, Any]], dict[str, np.ndarray]]:
        """This element as trama's runtimes call a leaf: ``{"rays": rays} -> {"rays": rays}``."""
        return lambda inputs: {"rays": self(inputs["rays"])}

    def __repr__(self) -> str:
        return f"ThinLens(focal_length={self.focal_length!r})"


class FreeSpace:
    """Propagation over a distance ``d`` in a medium of refractive index 1.

    Matrix ``[[1, d], [0, 1]]``: the angle is unchanged and the height grows by ``d·θ``.
    """

    def __init__(self, distance: float) -> None:
        if not math.isfinite(distance):
            raise ValueError(f"distance must be finite, got {distance}")
        self.distance = float(distance)

    @property
    def matrix(self) -> np.ndarray:
        return np.array([[1.0, self.distance], [0.0, 1.0]])

    def __call__(self, rays: npt.ArrayLike) -> np.ndarray:
        return apply_matrix(self.matrix, rays)

    def trama_kernel(self) -> Callable[[Mapping[str, Any]], dict[str, np.ndarray]]:
        """This element as trama's runtimes call a leaf: ``{"rays": rays} -> {"rays": rays}``."""
        return lambda inputs: {"rays": self(inputs["rays"])}

    def __repr__(self) -> str:
        return f"FreeSpace(distance={self.distance!r})"


class System:
    """Elements traversed in order. Its matrix is ``M_n @ … @ M_2 @ M_1``."""

    def __init__(self, *elements: RayTransferElement) -> None:
        for element in elements:
            if not isinstance(element, RayTransferElement):
                raise TypeError(f"a System holds ray transfer elements, not {type(element).__name__}")
        self.elements = list(elements)

    @property
    def matrix(self) -> np.ndarray:
        total = np.eye(2)
        for element in self.elements:
            total = element.matrix @ total
        return total

    def __call__(self, rays: npt.ArrayLike) -> np.ndarray:
        """Trace element by element (not through :attr:`matrix`), as an importer's graph would."""
        out = np.asarray(rays)
        for element in self.elements:
            out = element(out)
        return apply_matrix(np.eye(2), out) if not self.elements else out

    def __repr__(self) -> str:
        return f"System({', '.join(map(repr, self.elements))})"


class AsphericSurface:
    """The sag of a rotationally symmetric even asphere, as a function of the radial distance.

    ``z(r) = c·r² / (1 + sqrt(1 − (1 + k)·c²·r²)) + Σ_{i=0}^{m-1} a_i · r^(2i+4)``

    with curvature ``c = 1/R`` (``R`` the vertex radius), conic constant ``k`` (0 sphere, −1
    paraboloid, < −1 hyperboloid, between −1 and 0 prolate ellipsoid, > 0 oblate ellipsoid) and
    polynomial coefficients ``a_0, a_1, …`` of ``r⁴, r⁶, …``. Where ``(1 + k)·c²·r² > 1`` the
    conic is not defined and the sag is NaN.
    """

    def __init__(self, curvature: float, conic: float = 0.0, coefficients: npt.ArrayLike = ()) -> None:
        self.curvature = float(curvature)
        self.conic = float(conic)
        coefficients = np.asarray(coefficients, dtype=np.float32)
        if coefficients.ndim != 1:
            raise ValueError(f"coefficients must be a vector [m], got shape {list(coefficients.shape)}")
        self.coefficients = coefficients

    def __call__(self, r: npt.ArrayLike) -> np.ndarray:
        r = np.asarray(r)
        r = r.astype(_float_dtype(r), copy=False)
        c, k = self.curvature, self.conic
        r2 = r * r
        with np.errstate(invalid="ignore"):  # outside the conic's domain: NaN, documented above
            conic = c * r2 / (1.0 + np.sqrt(1.0 - (1.0 + k) * c * c * r2))
        polynomial = np.zeros_like(r2)
        for a in self.coefficients[::-1].astype(r.dtype):  # Horner's rule in r²
            polynomial = polynomial * r2 + a
        result: np.ndarray = (conic + polynomial * r2 * r2).astype(r.dtype, copy=False)
        return result

    def trama_kernel(self) -> Callable[[Mapping[str, Any]], dict[str, np.ndarray]]:
        """This surface as trama's runtimes call a leaf: ``{"r": r} -> {"sag": sag}``."""
        return lambda inputs: {"sag": self(inputs["r"])}

    def __repr__(self) -> str:
        return (
            f"AsphericSurface(curvature={self.curvature!r}, conic={self.conic!r}, "
            f"coefficients={self.coefficients.tolist()!r})"
        )
