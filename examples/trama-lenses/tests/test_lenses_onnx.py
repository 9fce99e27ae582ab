"""The ONNX lowerings (trama_lenses.onnx_lowering, through trama-onnx) against the numpy elements.

One document holds a telescope (a ``lenses.System`` of five elements, two of them the same
``Relay`` block, itself a System) and an aspheric surface. Lowered, it must pass onnx's full
check, keep its tree (each System an ONNX local function, the block one function called twice)
and its node ids, and compute on onnxruntime what the numpy runtime computes: in float32 for
float32 rays, in float64 for float64 or integer rays, NaN where the conic is undefined.

Skipped where trama-onnx is not installed: the pack does not depend on it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import trama
from trama_lenses import plugin

pytest.importorskip("trama_onnx", reason="trama-onnx is not installed (pip install trama-onnx)")
import onnx  # only now that trama-onnx, which brings onnx and onnxruntime, is known to be installed
import onnxruntime

import trama_onnx

#: The polynomial of the aspheric surface: a_0 r⁴ + a_1 r⁶ + a_2 r⁸.
COEFFICIENTS = [1e-3, -2e-5, 3e-7]
#: (1 + k) c² = 2.5 · 0.04 = 0.1: the conic is undefined (NaN) where |r| > sqrt(10) ≈ 3.16.
CURVATURE, CONIC = 0.2, 1.5
#: The symbols of the input facts: N rays, and the radial distances r of any shape [points].
RAY_SYMBOL, R_SYMBOL = "n", "points"


def element(name: str, op: str, source: str, **settings: float) -> dict[str, Any]:
    """A ray transfer element of a System, as a 1.3 document writes it."""
    return {"name": name, "op": op, "in": {"rays": source}, "out": ["rays"], "set": settings}


def document(dtype: str = "float32", coefficients: list[float] = COEFFICIENTS, focal_length: float = 4.0) -> Any:
    """The telescope and the surface as a 1.3 document, its inputs of ``dtype``."""
    relay = [
        element("gap", "lenses.FreeSpace", "%rays", distance=2.0),
        element("lens", "lenses.ThinLens", "gap", focal_length=1.0),
    ]
    telescope = [
        element("objective", "lenses.ThinLens", "%rays", focal_length=focal_length),
        {"name": "relay_0", "use": "Relay", "in": {"rays": "objective"}},
        {"name": "relay_1", "use": "Relay", "in": {"rays": "relay_0"}},
        element("tube", "lenses.FreeSpace", "relay_1", distance=5.0),
        element("eyepiece", "lenses.ThinLens", "tube", focal_length=-1.0),
    ]
    data = base64.b64encode(np.asarray(coefficients, np.float32).tobytes()).decode()
    surface = {"curvature": CURVATURE, "conic": CONIC, "coefficients": {"shape": [len(coefficients)], "data": data}}
    text = {
        "format_version": "1.3",
        "opsets": {"lenses": 1},
        "inputs": ["rays", "r"],
        "input_facts": [{"dtype": dtype, "shape": [RAY_SYMBOL, 2]}, {"dtype": dtype, "shape": [R_SYMBOL]}],
        "outputs": ["telescope", "surface"],
        "blocks": {"Relay": {"op": "lenses.System", "in": ["rays"], "nodes": relay, "out": {"rays": "lens"}}},
        "nodes": [
            {"name": "telescope", "op": "lenses.System", "in": {"rays": "%rays"}}
            | {"nodes": telescope, "out": {"rays": "eyepiece"}},
            {"name": "surface", "op": "lenses.AsphericSurface", "in": {"r": "%r"}, "out": ["sag"], "set": surface},
        ],
    }
    return trama.loads(json.dumps(text))


def inputs(dtype: npt.DTypeLike) -> list[np.ndarray]:
    """Seven rays, and radial distances from -4 to 4 (NaN beyond ±3.16)."""
    rng = np.random.default_rng(7)
    rays = rng.uniform(-2, 2, size=(7, 2))
    r = np.linspace(-4.0, 4.0, 33)
    if np.issubdtype(dtype, np.integer):
        rays, r = np.round(rays), np.round(r)
    return [rays.astype(dtype), r.astype(dtype)]


def functions_by_name(proto: onnx.ModelProto) -> dict[str, onnx.FunctionProto]:
    return {function.name: function for function in proto.functions}


def test_onnx_lowers_the_three_leaves_and_trama_onnx_the_composite() -> None:
    lowerings = plugin.trama_op_implementations("onnx")
    assert lowerings is not None
    assert set(lowerings) == {"lenses.ThinLens", "lenses.FreeSpace", "lenses.AsphericSurface"}
    assert "onnx" in plugin.trama_frameworks()
    registry = trama.registry("onnx")  # discovery: the pack's factories beside trama-onnx's own
    for name in lowerings:
        assert registry[name].factory is lowerings[name]


def test_the_document_lowers_with_its_tree_and_ids_and_passes_the_full_check() -> None:
    proto = trama_onnx.lower(document())
    onnx.checker.check_model(proto, full_check=True)  # shape inference into the functions included

    # The main graph: the telescope is one call of its function; the surface's nodes are named
    # after its id (the first one "surface", then "surface#1", ...).
    graph = proto.graph
    telescope, *surface = graph.node
    assert (telescope.name, telescope.domain) == ("telescope", trama_onnx.FUNCTION_DOMAIN)
    assert surface[0].name == "surface"
    assert {node.name.partition("#")[0] for node in surface} == {"surface"}
    assert [value.name for value in graph.input] == ["rays", "r"]
    assert [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [RAY_SYMBOL, 2]
    assert [init.name for init in graph.initializer] == ["surface.coefficients"]  # the tensor, never a constant

    # The telescope's function calls the Relay block's function twice; inside a function, a
    # leaf's nodes are named by its path below the composite.
    functions = functions_by_name(proto)
    body = functions[telescope.op_type]
    assert body.domain == trama_onnx.FUNCTION_DOMAIN
    calls = [node for node in body.node if node.domain == trama_onnx.FUNCTION_DOMAIN]
    assert [node.name for node in calls] == ["relay_0", "relay_1"]
    assert calls[0].op_type == calls[1].op_type  # one function for both instances of the block
    named = {node.name for node in body.node if node.op_type == "MatMul"}
    assert named == {"objective", "tube", "eyepiece"}
    relay = functions[calls[0].op_type]
    assert [node.name for node in relay.node if node.op_type == "MatMul"] == ["gap", "lens"]


def test_without_functions_every_leaf_is_inlined_under_its_full_id() -> None:
    proto = trama_onnx.lower(document(), functions=False)
    onnx.checker.check_model(proto, full_check=True)
    assert not proto.functions
    matmuls = [node.name for node in proto.graph.node if node.op_type == "MatMul"]
    assert matmuls == [
        "telescope.objective",
        "telescope.relay_0.gap",
        "telescope.relay_0.lens",
        "telescope.relay_1.gap",
        "telescope.relay_1.lens",
        "telescope.tube",
        "telescope.eyepiece",
    ]


@pytest.mark.parametrize(
    ("dtype", "result", "rtol"),
    [("float32", np.float32, 1e-6), ("float64", np.float64, 1e-14), ("int64", np.float64, 1e-14)],
)
def test_onnxruntime_computes_what_numpy_computes_in_the_inputs_precision(
    dtype: str, result: type, rtol: float
) -> None:
    doc = document(dtype)
    rays, r = inputs(dtype)
    expected = trama.runtime_for_name("numpy").prepare(doc).run([rays, r])
    got = trama.runtime_for_name("onnxruntime").prepare(doc).run([rays, r])
    for out, ref in zip(got, expected, strict=True):
        assert out.dtype == ref.dtype == result
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol)  # NaN where numpy has NaN
    # By hand: the surface is NaN exactly where (1 + k) c² r² > 1.
    sag = got[1]
    undefined = (1.0 + CONIC) * CURVATURE**2 * r.astype(np.float64) ** 2 > 1.0
    assert 0 < np.count_nonzero(undefined) < undefined.size
    np.testing.assert_array_equal(np.isnan(sag), undefined)


def test_the_proto_runs_in_an_inference_session_of_its_own() -> None:
    """The lowered model needs nothing of trama to run: onnxruntime alone, on the serialized bytes."""
    proto = trama_onnx.lower(document("float32"))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rays, r = inputs(np.float32)
    rays_out, sag = session.run(None, {"rays": rays, "r": r})
    expected = trama.runtime_for_name("numpy").prepare(document("float32")).run([rays, r])
    np.testing.assert_allclose(rays_out, expected[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sag, expected[1], rtol=1e-6, atol=1e-6)
    assert rays_out.dtype == sag.dtype == np.float32
    # Any number of rays: the facts' symbol is the ONNX input's dim_param.
    (more, _) = session.run(None, {"rays": np.tile(rays, (3, 1)), "r": r})
    np.testing.assert_allclose(more, np.tile(expected[0], (3, 1)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("coefficients", [[], [0.5], COEFFICIENTS], ids=["m=0", "m=1", "m=3"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_surface_with_any_number_of_coefficients(coefficients: list[float], dtype: str) -> None:
    doc = document(dtype, coefficients)
    proto = trama_onnx.lower(doc)
    onnx.checker.check_model(proto, full_check=True)
    gathers = [node for node in proto.graph.node if node.op_type == "Gather"]
    assert len(gathers) == len(coefficients)  # one a_i each; none at all when m = 0
    rays, r = inputs(dtype)
    expected = trama.runtime_for_name("numpy").prepare(doc).run([rays, r])[1]
    got = trama.runtime_for_name("onnxruntime").prepare(doc).run([rays, r])[1]
    assert got.dtype == expected.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == "float32" else 1e-14)


def test_a_node_that_cannot_be_lowered_is_one_error_naming_it() -> None:
    text = {
        "format_version": "1.3",
        "inputs": ["rays"],
        "input_facts": [{"dtype": "float32", "shape": [RAY_SYMBOL, 2]}],
        "outputs": ["lens"],
        "nodes": [element("lens", "lenses.ThinLens", "%rays", focal_length=0.0)],
    }
    with pytest.raises(trama_onnx.LoweringError, match="focal_length must be finite and non-zero") as caught:
        trama_onnx.lower(trama.loads(json.dumps(text)))
    assert caught.value.node_id == "lens"
    assert "lenses.ThinLens" in str(caught.value)


def test_a_document_numpy_refuses_is_refused_naming_the_node() -> None:
    """trama-onnx runs the document on numpy first (for the dtypes and ranks): the element's own
    check refuses the lens, and the error says which node it is."""
    with pytest.raises(trama_onnx.LoweringError, match=r"'telescope\.objective'.*focal_length must be finite"):
        trama_onnx.lower(document(focal_length=0.0))
