"""The numpy activations against torch 2.x, the catalog's reference semantics.

Every activation is checked in both forms (``ReLU`` and ``relu``) over generated float32 inputs,
within 1e-5 (relative and absolute), plus IEEE special values, other floating dtypes, integer
inputs and the slots' checks. The float64 error functions behind the exact GELU are checked
against Python's ``math.erf`` / ``math.erfc`` to a few ulps.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trama import INPUT, Node, Parameter, Ref, RegistryError
from trama.catalog import CATALOG_CATEGORIES
from trama.format import numpy_dtype
from trama_numpy._registry import implementations
from trama_numpy.activations import erf, erfc

FACTORIES = implementations()
BFLOAT16 = numpy_dtype("bfloat16")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(op: str, x: Any, **slots: Any) -> Any:
    """Build ``op``'s kernel from its registered factory, with ``slots`` as parameters, and run it
    on ``x``."""
    node = Node(id="act", op=op, inputs={"x": Ref(INPUT, "x")}, outputs=["y"], parameters={k: k for k in slots})
    kernel = FACTORIES[op](node, children={}, parameters={k: Parameter(v) for k, v in slots.items()})
    return kernel({"x": x})["y"]


def to_torch(x: np.ndarray) -> torch.Tensor:
    """numpy → torch; torch cannot read ml_dtypes' bfloat16, so it goes through float32 (exactly)."""
    if x.dtype == BFLOAT16:
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(x, order="C"))  # a copy; ascontiguousarray makes 0-d 1-d


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(BFLOAT16)
    return t.numpy()


# (module op, function op, slots, the torch computation)
Reference = Callable[[torch.Tensor], torch.Tensor]
ELEMENTWISE: list[tuple[str, str, dict[str, Any], Reference]] = [
    ("ReLU", "relu", {}, F.relu),
    ("LeakyReLU", "leaky_relu", {}, F.leaky_relu),
    ("LeakyReLU", "leaky_relu", {"negative_slope": 0.2}, lambda t: F.leaky_relu(t, 0.2)),
    ("GELU", "gelu", {}, F.gelu),
    ("GELU", "gelu", {"approximate": "none"}, F.gelu),
    ("GELU", "gelu", {"approximate": "tanh"}, lambda t: F.gelu(t, approximate="tanh")),
    ("SiLU", "silu", {}, F.silu),
    ("Sigmoid", "sigmoid", {}, torch.sigmoid),
    ("Tanh", "tanh", {}, torch.tanh),
    ("Softplus", "softplus", {}, F.softplus),
    ("Softplus", "softplus", {"beta": 2.0, "threshold": 5.0}, lambda t: F.softplus(t, beta=2.0, threshold=5.0)),
    ("Softplus", "softplus", {"beta": 0.5, "threshold": 3}, lambda t: F.softplus(t, beta=0.5, threshold=3)),
    ("ELU", "elu", {}, F.elu),
    ("ELU", "elu", {"alpha": 0.5}, lambda t: F.elu(t, alpha=0.5)),
    ("Hardswish", "hardswish", {}, F.hardswish),
]
FORMS = [
    pytest.param(op, slots, reference, id=f"{op}{slots or ''}")
    for module, function, slots, reference in ELEMENTWISE
    for op in (module, function)
]

float32_arrays = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
    elements=st.floats(-30, 30, width=32),
)


@pytest.mark.parametrize(("op", "slots", "reference"), FORMS)
@SETTINGS
@given(x=float32_arrays)
def test_elementwise_matches_torch(op: str, slots: dict[str, Any], reference: Reference, x: np.ndarray) -> None:
    y = run(op, x, **slots)
    expected = reference(torch.from_numpy(x)).numpy()
    assert y.dtype == np.float32
    assert y.shape == x.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


SPECIALS = np.array(
    [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        1e-8,
        -1e-8,
        3.0,
        -3.0,
        88.0,
        -88.0,
        100.0,
        -104.0,
        1e30,
        -1e30,
    ],
    dtype=np.float32,
)


def catalog_values_where_torch_depends_on_the_cpu(op: str, slots: dict[str, Any]) -> dict[float, float]:
    """The special inputs at which torch's result depends on the CPU it runs on, each with the
    catalog's value there: the test asserts those values and compares the rest with torch.

    Only the exact GELU has any. torch hands a float32 GELU of more than one element to oneDNN,
    whose AVX-512 kernel gives NaN at +inf where its AVX2 and SSE4.1 kernels give +inf (the
    kernel is the best one the CPU has, or the one ``ONEDNN_MAX_CPU_ISA`` caps it at). The
    catalog's formula says +inf: 0.5 · inf · (1 + erf(inf)) = 0.5 · inf · 2. Its other
    differences between kernels, the sign of a zero result (at −0 and in the far negative tail)
    and a few float32 ulps, are below what the comparison looks at.
    ``test_special_values_match_torch_under_other_cpu_kernels`` runs the comparison under those
    other kernels, whatever CPU runs the suite.
    """
    if op.lower() == "gelu" and slots.get("approximate", "none") == "none":
        return {np.inf: np.inf}
    return {}


@pytest.mark.parametrize(("op", "slots", "reference"), FORMS)
def test_special_values_match_torch(op: str, slots: dict[str, Any], reference: Reference) -> None:
    """NaN, infinities, signed zeros, subnormals and values where exp overflows: the same as
    torch wherever torch gives one answer on every CPU, the catalog's value where it does not,
    and never a numpy warning (the test suite turns warnings into errors)."""
    y = run(op, SPECIALS, **slots)
    own = catalog_values_where_torch_depends_on_the_cpu(op, slots)
    for x, value in own.items():
        np.testing.assert_array_equal(y[np.isin(SPECIALS, [x])], value, err_msg=f"{op}({x})")
    compared = ~np.isin(SPECIALS, list(own))
    expected = reference(torch.from_numpy(SPECIALS)).numpy()  # on all of them: torch's kernel depends on the size
    np.testing.assert_allclose(y[compared], expected[compared], rtol=1e-5, atol=1e-5, equal_nan=True)


#: Kernels of other CPUs than this one, chosen by environment variables that can only lower what
#: the machine has: torch's own kernels by ``ATEN_CPU_CAPABILITY``, oneDNN's (torch's GELU, among
#: others) by ``ONEDNN_MAX_CPU_ISA``. By the name oneDNN reports for the ISA it then uses.
OTHER_CPUS = {
    "Intel AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "Intel SSE4.1": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}

#: Runs test_special_values_match_torch for every form in a fresh process (the variables are read
#: once per process) and prints the ATen capability in use and the failures, as JSON.
_SPECIALS_ELSEWHERE = """
import json, sys, traceback, warnings
sys.path.insert(0, sys.argv[1])
import torch
import test_activations as here
warnings.simplefilter("error")  # as the suite does: a numpy warning fails
failures = []
for form in here.FORMS:
    try:
        here.test_special_values_match_torch(*form.values)
    except AssertionError:
        failures.append(f"{form.id}: {traceback.format_exc(limit=-1)}")
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "failures": failures}))
"""


@pytest.mark.parametrize("isa", list(OTHER_CPUS))
def test_special_values_match_torch_under_other_cpu_kernels(isa: str) -> None:
    """The special values hold on a CPU without AVX-512 (or without AVX2) too, checked on this
    one through torch's and oneDNN's own switches; oneDNN's verbose mode shows which kernels ran."""
    env = {**os.environ, **OTHER_CPUS[isa], "ONEDNN_VERBOSE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", _SPECIALS_ELSEWHERE, str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    report = json.loads(next(line for line in lines if line.startswith("{")))
    assert report["capability"] == OTHER_CPUS[isa]["ATEN_CPU_CAPABILITY"].upper()
    reported = [line.partition(",isa:")[2] for line in lines if ",info,cpu,isa:" in line]
    if torch.backends.mkldnn.is_available():
        assert reported, "oneDNN ran no kernel: torch no longer uses it for these ops"
        assert all(name.startswith(isa) for name in reported), reported
    assert not report["failures"], "\n".join(report["failures"])


@pytest.mark.parametrize(("module", "function", "slots", "reference"), ELEMENTWISE)
@pytest.mark.parametrize(("dtype", "tolerance"), [("float64", 1e-12), ("float16", 2e-3), ("bfloat16", 1.6e-2)])
def test_other_floating_dtypes(
    module: str, function: str, slots: dict[str, Any], reference: Reference, dtype: str, tolerance: float
) -> None:
    """The input's dtype is kept; float64 agrees with torch to float64 rounding, half precisions
    to their ulp (torch computes them in float32, these kernels in float64)."""
    x = np.linspace(-8, 8, 161).astype(numpy_dtype(dtype))
    y = run(module, x, **slots)
    assert y.dtype == x.dtype
    expected = to_numpy(reference(to_torch(x)))
    np.testing.assert_allclose(y.astype(np.float64), expected.astype(np.float64), rtol=tolerance, atol=tolerance)


def test_module_and_function_forms_share_one_factory() -> None:
    for module, function, _, _ in ELEMENTWISE:
        assert FACTORIES[module] is FACTORIES[function]
    assert FACTORIES["Softmax"] is FACTORIES["softmax"]
    assert FACTORIES["LogSoftmax"] is FACTORIES["log_softmax"]


def test_every_catalog_activation_is_implemented_here() -> None:
    (category,) = [c for c in CATALOG_CATEGORIES if c.key == "activations"]
    for name in category.names:
        assert FACTORIES[name].__module__ == "trama_numpy.activations", name


def test_relu_keeps_integer_dtypes() -> None:
    x = np.array([-3, 0, 5], dtype=np.int32)
    y = run("relu", x)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [0, 0, 5])


@pytest.mark.parametrize("op", ["GELU", "sigmoid", "softmax", "Softplus", "elu", "LeakyReLU"])
def test_integer_inputs_are_refused(op: str) -> None:
    with pytest.raises(TypeError, match="floating-point"):
        run(op, np.array([1, 2, 3]))


def test_relu_refuses_bools() -> None:
    with pytest.raises(TypeError):
        run("ReLU", np.array([True, False]))


def test_sigmoid_is_stable_at_the_extremes() -> None:
    """exp(−x) overflows float64 beyond 709; the stable form gives exactly 0 and 1 there."""
    x = np.array([-1000.0, -745.0, -40.0, 0.0, 40.0, 1000.0])
    y = run("sigmoid", x)
    np.testing.assert_array_equal(y[[0, 3, 5]], [0.0, 0.5, 1.0])
    # atol: σ(−745) is the smallest subnormal, e^−745, where torch flushes to 0
    np.testing.assert_allclose(y, torch.sigmoid(torch.from_numpy(x)).numpy(), rtol=1e-15, atol=1e-320)
    np.testing.assert_allclose(run("silu", x), x * y, rtol=1e-15)


def test_gelu_exact_keeps_digits_in_the_negative_tail() -> None:
    """x·Φ(x) is tiny but nonzero for x ≪ 0; computing Φ through erfc keeps its digits, where
    ½(1 + erf(x/√2)) loses them all (torch's float32 gives 0 there). The tolerance is erfc's
    conditioning: at x = −30 a rounding of x/√2 (1e-16) moves erfc by 2(x/√2)² · 1e-16 ≈ 1e-13."""
    x = np.array([-10.0, -20.0, -30.0])
    expected = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x])
    np.testing.assert_allclose(run("gelu", x), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("slots", "message"),
    [
        ({"approximate": "fast"}, "approximate"),
        ({"approximate": None}, "approximate"),
    ],
)
def test_gelu_checks_its_slot(slots: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        run("GELU", np.zeros(2), **slots)


@pytest.mark.parametrize(
    ("op", "slots"),
    [
        ("LeakyReLU", {"negative_slope": "steep"}),
        ("ELU", {"alpha": True}),
        ("Softplus", {"beta": None}),
        ("Softmax", {"dim": 1.5}),
        ("log_softmax", {"dim": True}),
    ],
)
def test_bad_slots_are_refused_at_build_time(op: str, slots: dict[str, Any]) -> None:
    node = Node(id="bad", op=op, inputs={"x": Ref(INPUT, "x")}, outputs=["y"], parameters={k: k for k in slots})
    with pytest.raises(RegistryError, match="bad"):
        FACTORIES[op](node, children={}, parameters={k: Parameter(v) for k, v in slots.items()})


# --- Softmax and LogSoftmax ------------------------------------------------------------------


def legacy_dim(ndim: int) -> int:
    """torch's implicit softmax dimension (calling torch without dim warns, and warnings fail)."""
    return 0 if ndim in (0, 1, 3) else 1


@st.composite
def arrays_and_dims(draw: st.DrawFn) -> tuple[np.ndarray, int | None]:
    x = draw(
        hnp.arrays(
            np.float32,
            hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5),
            elements=st.floats(-1e4, 1e4, width=32),
        )
    )
    size = max(x.ndim, 1)
    dim = draw(st.none() | st.integers(-size, size - 1))
    return x, dim


@pytest.mark.parametrize("op", ["Softmax", "softmax", "LogSoftmax", "log_softmax"])
@SETTINGS
@given(case=arrays_and_dims())
def test_softmax_matches_torch(op: str, case: tuple[np.ndarray, int | None]) -> None:
    x, dim = case
    y = run(op, x, dim=dim)
    torch_dim = legacy_dim(x.ndim) if dim is None else dim
    function = F.log_softmax if op in ("LogSoftmax", "log_softmax") else F.softmax
    expected = function(torch.from_numpy(x), dim=torch_dim).numpy()
    assert y.dtype == np.float32
    assert y.shape == x.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_masked_and_special_rows(op: str) -> None:
    """−inf entries (attention masks) get probability 0; a row of only −inf, or holding NaN or
    +inf, is NaN, as in torch."""
    inf, nan = np.inf, np.nan
    x = np.array(
        [[0.0, -inf, 1.0, -inf], [-inf, -inf, -inf, -inf], [1.0, nan, 2.0, 3.0], [1.0, inf, 2.0, 3.0]],
        dtype=np.float32,
    )
    y = run(op, x, dim=-1)
    function = F.log_softmax if op == "log_softmax" else F.softmax
    expected = function(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7, equal_nan=True)


def test_softmax_of_a_0d_tensor_and_of_an_empty_one() -> None:
    assert run("softmax", np.float32(3.5), dim=0) == np.float32(1.0)
    assert run("log_softmax", np.array(3.5), dim=-1) == 0.0
    assert run("softmax", np.zeros((0, 3), np.float32), dim=0).shape == (0, 3)
    with pytest.raises(IndexError, match="out of range"):
        run("softmax", np.zeros((2, 3)), dim=2)


# --- The error functions ---------------------------------------------------------------------

ERF_ARGUMENTS = np.concatenate(
    [
        np.linspace(-30.0, 30.0, 60001),
        np.random.default_rng(0).standard_normal(20000) * 4,
        np.geomspace(1e-300, 30.0, 3000),
        -np.geomspace(1e-300, 30.0, 3000),
        [0.46875, np.nextafter(0.46875, 1.0), 4.0, np.nextafter(4.0, 5.0), 26.0, 26.5, 1e300, -1e300],
    ]
)


def ulps(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    distance: np.ndarray = np.abs(actual - expected) / np.spacing(np.abs(expected))
    return distance


def test_erf_is_within_a_few_ulps_of_math_erf() -> None:
    expected = np.array([math.erf(v) for v in ERF_ARGUMENTS])
    assert ulps(erf(ERF_ARGUMENTS), expected).max() <= 4


def test_erfc_is_within_a_few_ulps_of_math_erfc() -> None:
    """Also in the far tail, where erfc is tiny (subnormal results excepted: their ulp is fixed,
    so relative accuracy ends there by design)."""
    expected = np.array([math.erfc(v) for v in ERF_ARGUMENTS])
    normal = expected >= np.finfo(np.float64).tiny
    assert ulps(erfc(ERF_ARGUMENTS)[normal], expected[normal]).max() <= 8
    assert np.all(np.abs(erfc(ERF_ARGUMENTS)[~normal]) < 1e-300)


def test_erf_special_values_and_dtypes() -> None:
    np.testing.assert_array_equal(erf([np.inf, -np.inf, 0.0]), [1.0, -1.0, 0.0])
    np.testing.assert_array_equal(erfc([np.inf, -np.inf, 0.0]), [0.0, 2.0, 1.0])
    assert np.isnan(erf([np.nan])).all()
    assert np.isnan(erfc([np.nan])).all()
    assert np.signbit(erf(-0.0))
    assert erf(np.float32(0.5)).dtype == np.float64
    assert erf(np.zeros((2, 0, 3))).shape == (2, 0, 3)
    assert erf(1.0).shape == ()
