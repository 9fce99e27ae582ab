"""Op by op, the runtimes compute the same values: every catalog leaf, applied once in a one-node
model with generated settings, shapes and values, gives the same outputs on numpy, torch:cpu and
jax:cpu (float32 within 1e-5 relative and absolute, unless README.md lists a documented
exception; integers and bools exactly; same dtypes and shapes everywhere).

Hypothesis runs derandomized and without a database, so CI sees the same examples on every run
and a failure reproduces locally; ``TRAMA_CONFORMANCE_EXAMPLES`` raises the number of examples
(and turns randomization on) for a deeper search by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conformance_cases import CASES, case_for
from conformance_support import (
    DEFAULT_TOLERANCE,
    DTYPE_EXCEPTIONS,
    RUNTIMES,
    TOLERANCES,
    Case,
    ErrorLog,
    assert_agree,
    catalog_leaves,
    one_node_model,
    prepare_everywhere,
    runtime,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trama
from trama import INPUT, Model, Node, Parameter, Ref

#: Examples per op. Heavy ops (many slots, a new program per example for a compiling runtime)
#: get fewer, ``constant`` (eight kinds of value, nothing to compute) more; the whole suite
#: stays within about three minutes on a 2-core machine.
EXAMPLES = 12
OVERRIDES = {"MultiheadAttention": 8, "TransformerEncoderLayer": 8, "GRU": 8, "LSTM": 8, "constant": 32}
_DEEPER = int(os.environ.get("TRAMA_CONFORMANCE_EXAMPLES", "0"))

ERRORS = ErrorLog()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    """Print the largest difference between two runtimes per op (``pytest -s``): README.md's figures."""
    yield
    print("\n" + ERRORS.report("largest absolute difference between two runtimes, per op"))


def _settings(op: str) -> settings:
    examples = _DEEPER or OVERRIDES.get(op, EXAMPLES)
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not _DEEPER,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def check_case(case: Case) -> None:
    """Run ``case`` on every runtime and assert that all pairs agree."""
    model = one_node_model(case)
    runnables = prepare_everywhere(model)
    results = {name: runnable.run(dict(case.inputs)) for name, runnable in runnables.items()}
    tolerance = TOLERANCES.get(case.op, DEFAULT_TOLERANCE)
    assert_agree(results, case.output_names(), tolerance=tolerance, log=ERRORS, key=case.op)


#: torch's CPU LSTM with ``proj_size > 0`` says, once per process, that oneDNN cannot run it and that
#: it uses its default kernel instead: information about the kernel, not about the values.
_LSTM_PROJECTION_NOTICE = "ignore:LSTM with projections is not supported with oneDNN:UserWarning"


@pytest.mark.filterwarnings(_LSTM_PROJECTION_NOTICE)
@pytest.mark.parametrize("op", sorted(CASES))
def test_op_agrees_across_runtimes(op: str) -> None:
    @_settings(op)
    @given(data=st.data())
    def agree(data: st.DataObject) -> None:
        check_case(data.draw(case_for(op), label=op))

    agree()


def test_every_catalog_leaf_has_a_conformance_case() -> None:
    """A new op without a case here fails CI: the promise covers every op of the catalog."""
    missing = sorted(catalog_leaves() - set(CASES))
    unknown = sorted(set(CASES) - catalog_leaves())
    assert not missing, f"catalog leaf ops without a conformance case: {missing}"
    assert not unknown, f"conformance cases for ops the catalog does not have: {unknown}"


def test_every_documented_exception_names_what_it_covers_and_why() -> None:
    for op, tolerance in TOLERANCES.items():
        assert op in catalog_leaves(), op
        assert tolerance.reason, f"{op}'s looser tolerance has no documented reason"
    for exception in DTYPE_EXCEPTIONS:
        assert exception.runtime in RUNTIMES, exception
        assert exception.catalog.kind in "iu", exception  # a narrowed float would change values
        assert exception.given.kind in "iu", exception
        assert exception.reason, f"{exception.runtime}'s dtype exception has no documented reason"


@pytest.mark.parametrize("name", RUNTIMES)
def test_every_compared_runtime_is_installed(name: str) -> None:
    """The suite compares three runtimes; a missing one fails here by name (and everywhere)."""
    assert runtime(name).is_available()


# --- tuple_get and constant inside a graph ----------------------------------------------------


def test_tuple_get_of_a_constant_list_feeds_arithmetic() -> None:
    """The other way a tuple-like value enters a graph: a ``constant`` holding a list. The element
    taken is a Python number, which must then promote as a number (``int32 · 2`` stays int32,
    ``int32 · 2.5`` gives float32) on every runtime."""
    nodes = [
        Node("c", "constant", {}, ["y"], {"value": "c.value"}),
        Node("k", "tuple_get", {"x": Ref("c", "y")}, ["y"], {"index": "k.index"}),
        Node("i", "tuple_get", {"x": Ref("c", "y")}, ["y"], {"index": "i.index"}),
        Node("scaled", "mul", {"x": Ref(INPUT, "x"), "other": Ref("k", "y")}, ["y"], {}),
        Node("shifted", "add", {"x": Ref(INPUT, "x"), "other": Ref("i", "y")}, ["y"], {}),
    ]
    table = {
        "c.value": Parameter([2, 2.5, -1]),
        "k.index": Parameter(1),
        "i.index": Parameter(-3),
    }
    model = Model(["x"], [Ref("scaled", "y"), Ref("shifted", "y")], nodes, table)
    x = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    results = {name: runnable.run([x]) for name, runnable in prepare_everywhere(model).items()}
    assert_agree(results, ["scaled", "shifted"])
    scaled, shifted = (np.asarray(value) for value in results["numpy"])
    assert scaled.dtype == np.float32
    assert shifted.dtype == np.int32


def test_a_bool_mask_from_a_model_input() -> None:
    """``x[mask]`` with a mask that is a model input: numpy and torch agree, and jax:cpu refuses
    it with a trama error naming the node, because under ``jax.jit`` the result's shape would
    depend on the mask's values. A documented limitation (README.md): the same index from a
    ``constant`` node, as a tracer writes a fixed mask, runs everywhere (the getitem cases)."""
    case = Case(
        "getitem",
        {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "i0": np.array([True, False, True])},
        {"index": ["i0", [None, None, 2]]},
    )
    model = one_node_model(case)
    results = {name: runtime(name).prepare(model).run(dict(case.inputs)) for name in ("numpy", "torch:cpu")}
    assert_agree(results, ["y"])
    np.testing.assert_array_equal(np.asarray(results["numpy"][0]), [[0, 2], [8, 10]])
    with pytest.raises(trama.ExecutionError, match="mask") as caught:
        runtime("jax:cpu").prepare(model).run(dict(case.inputs))
    assert caught.value.node_id == "op"


#: A case that once aborted the whole process in XLA's compiler (a transposed convolution over
#: a dimension of size 1 with a stride along the other and a dilation along it): run in a child
#: process, so that a crash fails this test instead of ending the test session.
_ISOLATED_CASE = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from conformance_support import Case, assert_agree, one_node_model, prepare_everywhere
x = np.arange(6, dtype=np.float32).reshape(2, 1, 3, 1) / 4
slots = {"in_channels": 1, "out_channels": 1, "kernel_size": [2, 2], "stride": [2, 1], "padding": [1, 0],
         "output_padding": [0, 1], "dilation": [1, 2], "weight": np.array([[[[0.5, 1.0], [1.25, -0.5]]]], np.float32)}
case = Case("ConvTranspose2d", {"x": x}, slots)
results = {name: r.run(dict(case.inputs)) for name, r in prepare_everywhere(one_node_model(case)).items()}
assert_agree(results, ["y"])
"""


def test_a_transposed_convolution_of_a_one_wide_input_agrees_without_crashing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ISOLATED_CASE, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    ending = "aborted" if done.returncode < 0 else f"exited with status {done.returncode}"
    message = "\n".join(line for line in done.stderr.splitlines() if not line.lstrip().startswith("@"))
    assert done.returncode == 0, f"the child process {ending}:\n{message[-2000:]}"


# --- Invalid input: trama errors everywhere ---------------------------------------------------


def _linear_model() -> Model:
    case = Case(
        "Linear",
        {"x": np.zeros((2, 3), np.float32)},
        {"in_features": 3, "out_features": 2, "weight": np.ones((2, 3), np.float32)},
    )
    return one_node_model(case)


@pytest.mark.parametrize("name", RUNTIMES)
def test_an_input_of_the_wrong_width_is_a_trama_error_naming_the_node(name: str) -> None:
    runnable = runtime(name).prepare(_linear_model())
    with pytest.raises(trama.ExecutionError, match="Linear") as caught:
        runnable.run([np.zeros((2, 4), np.float32)])
    assert caught.value.node_id == "op"


@pytest.mark.parametrize("name", RUNTIMES)
def test_the_wrong_number_of_inputs_is_an_execution_error(name: str) -> None:
    runnable = runtime(name).prepare(_linear_model())
    with pytest.raises(trama.ExecutionError, match="1 input"):
        runnable.run([np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)])


@pytest.mark.parametrize("name", RUNTIMES)
def test_contradictory_slots_are_a_trama_error_naming_the_node(name: str) -> None:
    """``groups`` that does not divide the channels: refused by every runtime, at preparation
    or at the latest on the first run, as a trama error that names the node."""
    case = Case(
        "Conv2d",
        {"x": np.zeros((1, 4, 5, 5), np.float32)},
        {
            "in_channels": 4,
            "out_channels": 3,
            "kernel_size": [1, 1],
            "groups": 2,
            "weight": np.ones((3, 2, 1, 1), np.float32),
        },
    )
    with pytest.raises(trama.TramaError, match="groups") as caught:
        runtime(name).prepare(one_node_model(case)).run(dict(case.inputs))
    assert caught.value.node_id == "op"
