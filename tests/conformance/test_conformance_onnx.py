"""Op by op, the onnxruntime runtime computes what the numpy reference computes: every catalog leaf
that trama-onnx lowers (``trama.registry("onnx")`` has a lowering factory for it), applied once in
a one-node model with the op suite's generated settings, shapes and values
(:mod:`conformance_cases`), gives the same outputs on ``"onnxruntime"`` as on ``"numpy"`` (float32
within 1e-5 relative and absolute unless README.md lists a documented exception; integers and
bools exactly; same dtypes and shapes).

In half precision, the lowered ops among :mod:`test_conformance_half`'s families give, for float16
and bfloat16 inputs, the float32 computation of the same values within the catalog's tolerance, as
numpy, torch and JAX do there (the reference built by that module's ``_reference_case``).

Only the ops lowered so far are collected: the file grows with the lowerings, and
:func:`test_the_compared_ops_are_exactly_the_lowered_ones` says which they are. The one-node models
have no input facts, so the runtime lowers each for the dtypes and shapes it is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from conformance_cases import CASES, case_for
from conformance_support import (
    DEFAULT_TOLERANCE,
    HALF_DTYPES,
    TOLERANCES,
    Case,
    ErrorLog,
    assert_agree,
    assert_within_half_tolerance,
    catalog_leaves,
    in_half,
    one_node_model,
    runtime,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_conformance_half import HALF_OPS, _reference_case

import trama
from trama.catalog import half_tolerance

#: The reference and the runtime under test.
REFERENCE = "numpy"
ONNX = "onnxruntime"

#: Examples per op, as the op suite has them (``TRAMA_CONFORMANCE_EXAMPLES`` searches deeper).
EXAMPLES = 12
OVERRIDES = {"constant": 32}
#: Examples per op and dtype in half precision, as :mod:`test_conformance_half` has them.
HALF_EXAMPLES = 5
_DEEPER = int(os.environ.get("TRAMA_CONFORMANCE_EXAMPLES", "0"))

ERRORS = ErrorLog()


def lowered_ops() -> list[str]:
    """The catalog leaves the installed onnx registry has a lowering factory for (none when no
    plugin implements the framework ``onnx``: then the installation test below fails)."""
    try:
        registry = trama.registry("onnx")
    except trama.RegistryError:
        return []
    return sorted(spec.name for spec in registry if spec.factory is not None and spec.name in catalog_leaves())


LOWERED = lowered_ops()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    """Print the largest difference from numpy per op (``pytest -s``)."""
    yield
    print("\n" + ERRORS.report("largest absolute difference between onnxruntime and numpy, per op"))


def _settings(op: str, examples: int | None = None) -> settings:
    return settings(
        max_examples=_DEEPER or examples or OVERRIDES.get(op, EXAMPLES),
        deadline=None,
        derandomize=not _DEEPER,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def check_case(case: Case) -> None:
    """Run ``case`` on numpy and on onnxruntime and assert that they agree."""
    model = one_node_model(case)
    results = {name: runtime(name).prepare(model).run(dict(case.inputs)) for name in (REFERENCE, ONNX)}
    tolerance = TOLERANCES.get(case.op, DEFAULT_TOLERANCE)
    assert_agree(results, case.output_names(), tolerance=tolerance, log=ERRORS, key=case.op)


@pytest.mark.parametrize("op", LOWERED)
def test_op_agrees_with_numpy_on_onnxruntime(op: str) -> None:
    @_settings(op)
    @given(data=st.data())
    def agree(data: st.DataObject) -> None:
        check_case(data.draw(case_for(op), label=op))

    agree()


HALF_ERRORS = ErrorLog()


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("op", [op for op in HALF_OPS if op in LOWERED])
def test_op_in_half_precision_is_its_float32_computation_on_onnxruntime(op: str, dtype: str) -> None:
    t = half_tolerance(dtype, op)

    @_settings(op, HALF_EXAMPLES)
    @given(data=st.data())
    def within(data: st.DataObject) -> None:
        half = in_half(data.draw(case_for(op), label=op), dtype)
        assume(half is not None)
        assert half is not None
        model = one_node_model(half)
        try:
            runtime(REFERENCE).prepare(model).run(dict(half.inputs))
        except trama.TramaError:
            assume(False)  # refused by the reference too (a value the dtype cannot hold)
        results = {ONNX: runtime(ONNX).prepare(model).run(dict(half.inputs))}
        widened = _reference_case(half, dtype)  # Hardshrink's lambd rounded as the catalog rounds it
        reference = runtime(REFERENCE).prepare(one_node_model(widened)).run(dict(widened.inputs))
        assert_within_half_tolerance(results, reference, half.output_names(), dtype, t, log=HALF_ERRORS, key=op)

    within()


def test_the_onnxruntime_runtime_is_installed() -> None:
    """A missing runtime is a failure, never a skip (as for the op suite's three)."""
    assert runtime(ONNX).is_available()


def test_the_compared_ops_are_exactly_the_lowered_ones() -> None:
    """The ops compared here are every catalog leaf with an ONNX lowering and nothing else; each
    has a conformance case (every catalog leaf has one); trama-onnx's own table is what its plugin
    lists."""
    from trama_onnx._registry import implementations
    from trama_onnx.plugin import lowered_op_names

    registry = trama.registry("onnx")
    lowered = {spec.name for spec in registry if spec.factory is not None}
    assert set(LOWERED) == lowered & catalog_leaves()
    assert set(LOWERED) <= set(CASES)
    assert set(implementations()) == set(lowered_op_names())
    assert set(lowered_op_names()) <= lowered
