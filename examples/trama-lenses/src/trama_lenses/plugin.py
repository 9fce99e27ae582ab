"""The trama plugin of trama-lenses: the module named by the ``trama`` entry point.

trama imports this module whenever it discovers plugins — for ``trama.registry(...)``, for
``trama plugins``, for any export or import that uses discovery — whether or not the user ever
touches a lens. So it imports only trama and the standard library at the top. numpy and the
element classes are imported inside the factories, when a document that uses these ops is
actually imported (the exporter does not need to import them: the objects it handles already
are). The ONNX lowerings (:mod:`trama_lenses.onnx_lowering`, for trama-onnx) import onnx, so they
too are imported only inside their factories, when a node is lowered.

The ops, in the namespace ``lenses`` (opset 1). Rays are ``[N, 2]`` arrays of rows
``(height, angle)``, paraxial, in one length unit; an element with ray transfer matrix ``M``
computes ``rays @ M.T``:

* ``lenses.ThinLens``        ``M = [[1, 0], [-1/f, 1]]``
* ``lenses.FreeSpace``       ``M = [[1, d], [0, 1]]``
* ``lenses.System``          a composite: its children in order, rays chained through them
* ``lenses.AsphericSurface`` ``z(r) = c r² / (1 + sqrt(1 − (1+k) c² r²)) + Σ a_i r^(2i+4)``
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trama import NodeFragment, OpSpec, Param, ParameterSchema
from trama.extension import hookimpl

if TYPE_CHECKING:  # for annotations only: importing them for real is the factories' job
    from trama import ExportContext, Node, Parameter
    from trama_lenses.elements import AsphericSurface, FreeSpace, System, ThinLens
    from trama_onnx import Lowering

__all__ = [
    "FRAMEWORKS",
    "NAMESPACE",
    "OPSET",
    "SPECS",
    "build_aspheric_surface",
    "build_free_space",
    "build_system",
    "build_thin_lens",
    "export_element",
    "lower_aspheric_surface",
    "lower_free_space",
    "lower_thin_lens",
    "trama_exporters",
    "trama_frameworks",
    "trama_op_implementations",
    "trama_op_specs",
    "trama_opsets",
]

#: The op namespace this pack owns: every op name starts with ``lenses.``.
NAMESPACE = "lenses"
#: Bump when an op's meaning, ports or slots change incompatibly; documents record it.
OPSET = 1
#: The frameworks this pack implements its ops for: numpy (the elements), and ONNX (lowerings for
#: trama-onnx, which lowers the composite lenses.System itself, from its wiring).
FRAMEWORKS = ("numpy", "onnx")
#: The module whose classes :func:`export_element` handles; compared as a string, so declining
#: a foreign object costs one attribute lookup and imports nothing.
_ELEMENTS_MODULE = "trama_lenses.elements"

_RAYS_DOC = (
    "Rays are a [N, 2] array of rows (height y, paraxial angle θ), y and all lengths in one unit; "
    "float32 rays give float32 results, float64 (or integer) rays float64."
)

SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "lenses.ThinLens",
        inputs=("rays",),
        outputs=("rays",),
        parameters=(
            ParameterSchema("focal_length", ("float",), doc="f: finite, non-zero; > 0 converges, < 0 diverges."),
        ),
        doc=(
            "An ideal thin lens. rays_out = rays @ M.T with M = [[1, 0], [-1/f, 1]]: "
            "y_out = y, θ_out = θ - y/f. " + _RAYS_DOC
        ),
    ),
    OpSpec(
        "lenses.FreeSpace",
        inputs=("rays",),
        outputs=("rays",),
        parameters=(ParameterSchema("distance", ("float",), doc="d: finite; the medium has refractive index 1."),),
        doc=(
            "Propagation over a distance d. rays_out = rays @ M.T with M = [[1, d], [0, 1]]: "
            "y_out = y + d·θ, θ_out = θ. " + _RAYS_DOC
        ),
    ),
    OpSpec(
        "lenses.System",
        inputs=("rays",),
        outputs=("rays",),
        composite=True,
        doc=(
            "An optical system: its children, each with a 'rays' input and a 'rays' output, in the order "
            "light meets them; each child reads the previous child's rays (the first reads the system's), "
            "and the output is bound to the last child's rays (to the input when there are none). "
            "Its matrix is M_n @ … @ M_1. " + _RAYS_DOC
        ),
    ),
    OpSpec(
        "lenses.AsphericSurface",
        inputs=("r",),
        outputs=("sag",),
        parameters=(
            ParameterSchema("curvature", ("float",), doc="c = 1/R, R the vertex radius of curvature; 0 is flat."),
            ParameterSchema("conic", ("float",), doc="k: 0 sphere, -1 paraboloid, < -1 hyperboloid."),
            ParameterSchema(
                "coefficients",
                ("tensor",),
                learnable=True,
                doc="float32 [m]: a_0, a_1, … multiply r^4, r^6, …; m may be 0.",
            ),
        ),
        doc=(
            "The sag (surface height along the axis) of an even asphere at radial distance r, any shape: "
            "sag = c r² / (1 + sqrt(1 - (1 + k) c² r²)) + Σ_{i=0}^{m-1} a_i r^(2i+4). "
            "Where (1 + k) c² r² > 1 the conic is undefined and sag is NaN. float32 r gives float32 "
            "(computed in float32), float64 or integer r float64."
        ),
    ),
)


@hookimpl
def trama_op_specs() -> Sequence[OpSpec]:
    """The four ``lenses.*`` specifications (framework-neutral: no factories)."""
    return SPECS


@hookimpl
def trama_opsets() -> Mapping[str, int]:
    return {NAMESPACE: OPSET}


@hookimpl
def trama_frameworks() -> Sequence[str]:
    """numpy and onnx, by name only: nothing is imported here (torch or jax would mean a factory
    per op that imports them)."""
    return FRAMEWORKS


@hookimpl
def trama_op_implementations(framework: str) -> Mapping[str, Callable[..., Any]] | None:
    """numpy factories, or ONNX lowering factories; ``None`` for every other framework (no error:
    another pack may have them). Returning a table imports nothing: each factory imports its
    implementation (numpy, or onnx) when it is called."""
    if framework == "numpy":
        return {
            "lenses.ThinLens": build_thin_lens,
            "lenses.FreeSpace": build_free_space,
            "lenses.System": build_system,
            "lenses.AsphericSurface": build_aspheric_surface,
        }
    if framework == "onnx":  # leaves only: trama-onnx lowers composites as ONNX local functions
        return {
            "lenses.ThinLens": lower_thin_lens,
            "lenses.FreeSpace": lower_free_space,
            "lenses.AsphericSurface": lower_aspheric_surface,
        }
    return None


@hookimpl
def trama_exporters(framework: str) -> Sequence[Callable[[Any, ExportContext], NodeFragment | None]] | None:
    return [export_element] if framework == "numpy" else None


# --- import: node -> element ----------------------------------------------------------------


def _number(parameters: Mapping[str, Parameter], slot: str) -> float:
    """A float slot's value. Validation already checked the type; this narrows it for mypy and
    refuses a bool, which Python would otherwise accept as a number."""
    value = parameters[slot].value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"slot {slot!r} must hold a number, got {type(value).__name__}")
    return float(value)


def build_thin_lens(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> ThinLens:
    from trama_lenses.elements import ThinLens

    return ThinLens(_number(parameters, "focal_length"))


def build_free_space(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> FreeSpace:
    from trama_lenses.elements import FreeSpace

    return FreeSpace(_number(parameters, "distance"))


def build_system(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> System:
    """Children arrive built, in document order — the order light meets them."""
    from trama_lenses.elements import System

    return System(*children.values())


def build_aspheric_surface(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> AsphericSurface:
    import numpy as np

    from trama_lenses.elements import AsphericSurface

    coefficients = np.asarray(parameters["coefficients"].value)
    if coefficients.dtype != np.float32 or coefficients.ndim != 1:
        # The spec says float32 [m]; converting float64 silently would change the document's values.
        raise ValueError(
            f"coefficients must be a float32 vector [m], got {coefficients.dtype} {list(coefficients.shape)}"
        )
    return AsphericSurface(_number(parameters, "curvature"), _number(parameters, "conic"), coefficients)


# --- lowering to ONNX: node -> ONNX nodes (trama-onnx) -----------------------------------------


def lower_thin_lens(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The ONNX lowering of a ``lenses.ThinLens`` node (imports onnx, now that a node is lowered)."""
    from trama_lenses.onnx_lowering import lower_thin_lens

    return lower_thin_lens(node, children=children, parameters=parameters)


def lower_free_space(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The ONNX lowering of a ``lenses.FreeSpace`` node."""
    from trama_lenses.onnx_lowering import lower_free_space

    return lower_free_space(node, children=children, parameters=parameters)


def lower_aspheric_surface(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The ONNX lowering of a ``lenses.AsphericSurface`` node."""
    from trama_lenses.onnx_lowering import lower_aspheric_surface

    return lower_aspheric_surface(node, children=children, parameters=parameters)


# --- export: element -> node ----------------------------------------------------------------


def export_element(obj: Any, ctx: ExportContext) -> NodeFragment | None:
    """The node of a :mod:`trama_lenses.elements` object; ``None`` for anything else.

    trama offers every object without a ``to_node`` method to every exporter, so the first line
    declines foreign objects by module name alone — no isinstance against classes that would
    have to be imported first.
    """
    if type(obj).__module__ != _ELEMENTS_MODULE:
        return None
    from trama_lenses.elements import AsphericSurface, FreeSpace, System, ThinLens  # already imported

    if isinstance(obj, ThinLens):
        return NodeFragment(op="lenses.ThinLens", outputs=["rays"], parameters={"focal_length": obj.focal_length})
    if isinstance(obj, FreeSpace):
        return NodeFragment(op="lenses.FreeSpace", outputs=["rays"], parameters={"distance": obj.distance})
    if isinstance(obj, System):
        rays = ctx.input("rays")
        for index, element in enumerate(obj.elements):
            rays = ctx.child(f"element_{index}", element, inputs={"rays": rays}, outputs=["rays"])["rays"]
        return NodeFragment(op="lenses.System", outputs=["rays"], output_bindings={"rays": rays})
    if isinstance(obj, AsphericSurface):
        return NodeFragment(
            op="lenses.AsphericSurface",
            outputs=["sag"],
            parameters={
                "curvature": obj.curvature,
                "conic": obj.conic,
                "coefficients": Param(obj.coefficients, learnable=True),
            },
        )
    return None  # a helper of the module (RayTransferElement...) is not an op
