"""Bounds before any framework sees a document, and every failure while running a trama error.

Issue 14's cases, and their variants:

* a ~300-byte document whose ``input_facts`` declare ``[10**12, 10**12]`` made XLA abort the
  whole process (SIGABRT) when ``jax:cpu`` compiled for it: facts are checked against
  ``MAX_TENSOR_BYTES`` (2**48 bytes) in the core, before any runtime builds anything, and the
  error names the input;
* settings that drive allocations are checked by the catalog against the same bound (created
  tensors, expand/repeat/tile, resampling sizes and scales, adaptive pool outputs, every int
  list), and what the document has (a GRU's weights for ``num_layers``) is checked before any
  framework builds a layer;
* what a framework raises while a model runs (``MemoryError``, torch's ``RuntimeError``, JAX's
  ``JaxRuntimeError``) reaches the caller as an :class:`~trama.ExecutionError` naming the node
  and op, and ``jax:*`` refuses a traced value beyond the bound before XLA compiles it (one
  whose byte size overflows 64 bits aborts XLA);
* ``trama run`` on each ends in one line and exit status 1.

The catalog's checks run here, in the test process (they build nothing). Everything that makes a
framework allocate, or could abort it, runs in child processes bounded in memory and time
(:mod:`reliability.isolation`, :mod:`reliability.forkrun`): one child per runtime runs every
case and reports each as a JSON line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from reliability.forkrun import CLI_PRELOAD, FRAMEWORK_PRELOAD, CliJob, run_cli_batch
from reliability.isolation import case_outcomes
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama.catalog._checkers import checker_for
from trama.catalog._limits import MAX_ELEMENTS, MAX_TENSOR_BYTES
from trama.errors import ExecutionError, RegistryError
from trama.execution import check_facts

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")

# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------


def one_leaf(
    op: str, settings: Mapping[str, Any], *, fact: list[int | str] | None = None, inputs: bool = True
) -> Model:
    """A model of one leaf ``r`` (op ``op``, these settings, reading the model input ``x``
    unless ``inputs`` is false), with an input fact of shape ``fact`` when given."""
    return Model(
        inputs=["x"] if inputs else [],
        outputs=[Ref("r", "y")],
        nodes=[Node("r", op, {"x": Ref(INPUT, "x")} if inputs else {}, ["y"], {k: f"r.{k}" for k in settings})],
        parameters={f"r.{k}": Parameter(v) for k, v in settings.items()},
        input_facts=[ValueFact("float32", tuple(fact))] if fact is not None else None,
    )


def gru(num_layers: int) -> Model:
    """A one-layer GRU's weights under a ``num_layers`` the document does not back."""
    rng = np.random.default_rng(0)
    weights = {
        "weight_ih_l0": rng.standard_normal((12, 3)),
        "weight_hh_l0": rng.standard_normal((12, 4)),
        "bias_ih_l0": rng.standard_normal(12),
        "bias_hh_l0": rng.standard_normal(12),
    }
    settings: dict[str, Any] = {"input_size": 3, "hidden_size": 4, "num_layers": num_layers}
    parameters = {f"r.{k}": Parameter(v) for k, v in settings.items()}
    parameters |= {f"r.{k}": Parameter(Tensor.from_array(v.astype(np.float32)), True) for k, v in weights.items()}
    slots = {k: f"r.{k}" for k in [*settings, *weights]}
    node = Node("r", "GRU", {"x": Ref(INPUT, "x")}, ["y", "h_n"], slots)
    return Model(["x"], [Ref("r", "y")], [node], parameters)


def check(op: str, settings: Mapping[str, Any], tensors: Mapping[str, np.ndarray] | None = None) -> None:
    """The catalog's settings check of one node (nothing is built)."""
    values = {**settings, **{k: Tensor.from_array(v) for k, v in (tensors or {}).items()}}
    node = Node("r", op, {"x": Ref(INPUT, "x")}, ["y"], {k: f"r.{k}" for k in values})
    checker_for(op).check(node, {k: Parameter(v) for k, v in values.items()})


# --------------------------------------------------------------------------------------------
# Facts: checked in the core, before any runtime builds anything
# --------------------------------------------------------------------------------------------


def test_the_audits_300_byte_document_declares_an_impossible_input() -> None:
    text = trama.dumps(one_leaf("ReLU", {}, fact=[10**12, 10**12]))
    assert len(text) < 600
    with pytest.raises(
        ExecutionError, match=r"input 'x' is declared with a shape of \[1000000000000, 1000000000000\]"
    ) as info:
        check_facts(trama.loads(text))
    assert info.value.location == "/input_facts/0"
    assert "2**48 bytes" in info.value.message


@pytest.mark.parametrize(
    ("shape", "dtype", "refused"),
    [
        ([2**46], "float32", False),  # exactly 2**48 bytes
        ([2**46 + 1], "float32", True),
        ([2**48], "int8", False),
        ([2**48], "int16", True),
        ([2**62], "float32", True),  # its byte size overflows 64 bits
        ([0, 2**40, 2**40], "float32", True),  # empty, yet its strides overflow: a 0 counts as 1
        (["batch", 2**48], "uint8", False),  # a named dimension counts as 1
        (["batch", 2**48, 2], "uint8", True),
        ([2**24] * 3, None, True),  # no dtype: one byte per element
    ],
)
def test_a_fact_holds_at_most_2_48_bytes(shape: list[int | str], dtype: str | None, refused: bool) -> None:
    model = one_leaf("ReLU", {})
    model.input_facts = [ValueFact(dtype, tuple(shape))]
    if refused:
        with pytest.raises(ExecutionError, match="input 'x' is declared"):
            check_facts(model)
    else:
        check_facts(model)


def test_output_facts_are_bounded_too() -> None:
    model = one_leaf("ReLU", {})
    model.output_facts = [ValueFact("float64", (2**46,))]
    with pytest.raises(ExecutionError, match=r"output 'r\.y' is declared") as info:
        check_facts(model)
    assert info.value.location == "/output_facts/0"


def test_the_limit_is_what_the_docs_call_it() -> None:
    assert MAX_TENSOR_BYTES == MAX_ELEMENTS == 2**48


# --------------------------------------------------------------------------------------------
# Settings: checked by the catalog, for every framework, before any factory runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "settings", "message"),
    [
        (
            "zeros",
            {"size": [2**24, 2**24]},
            r"size: a shape of \[16777216, 16777216\], which holds more than 2\*\*48 bytes",
        ),
        ("ones", {"size": [2**47 + 1], "dtype": "int16"}, "more than 2\\*\\*48 bytes"),
        ("full", {"size": [2**45, 2], "fill_value": 1.0, "dtype": "float64"}, "more than 2\\*\\*48 bytes"),
        ("zeros", {"size": [2**62, 4]}, r"size holds 4611686018427387904, beyond 2\*\*48"),
        ("arange", {"end": 1e18}, r"make 1000000000000000000 float32 values, more than 2\*\*48 bytes"),
        ("arange", {"start": -1e308, "end": 1e308, "step": 1e-300}, "make too many float32 values"),
        ("arange", {"end": 10**400}, "make too many int64 values"),
        ("expand", {"size": [2**20, 2**20, 2**20]}, "more than 2\\*\\*48 elements"),
        ("repeat", {"repeats": [2**25, 2**25]}, "repeats: a shape of"),
        ("tile", {"dims": [2**30, 2**30]}, "dims: a shape of"),
        ("repeat_interleave", {"repeats": 2**48 + 1}, r"repeats 281474976710657 is beyond 2\*\*48"),
        ("repeat_interleave", {"repeats": [2**47] * 3}, r"repeats sum to 422212465065984, which is beyond 2\*\*48"),
        ("interpolate", {"size": [2**20, 2**20, 2**20], "mode": "nearest"}, "size: a shape of"),
        ("interpolate", {"scale_factor": 1e15, "mode": "nearest"}, "scale_factor 1000000000000000.0 multiplies"),
        ("Upsample", {"scale_factor": [2**20, 2**20, 2**20], "mode": "nearest"}, "multiplies the input's size"),
        ("adaptive_avg_pool3d", {"output_size": [2**20, 2**20, 2**20]}, "output_size: a shape of"),
        ("AdaptiveAvgPool2d", {"output_size": [2**30, 2**30]}, "output_size: a shape of"),
        ("pad", {"pad": [2**50, 0]}, r"pad holds 1125899906842624, beyond 2\*\*48"),
        ("pad", {"pad": [-(2**50), 0]}, r"pad holds -1125899906842624, beyond 2\*\*48"),
        ("max_pool2d", {"kernel_size": [2**50, 1]}, "kernel_size holds"),
        ("conv_transpose2d", {"stride": [2**60, 1]}, "stride holds"),
        ("permute", {"dims": [2**60]}, "dims holds"),
    ],
)
def test_settings_that_ask_for_too_much_are_refused_by_the_catalog(
    op: str, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(RegistryError, match=message) as info:
        check(op, settings)
    assert info.value.node_id == "r"
    assert info.value.message.startswith(f"{op}: ")


@pytest.mark.parametrize(
    ("op", "settings"),
    [
        ("zeros", {"size": [2**23, 2**23]}),  # exactly 2**48 bytes of float32
        ("zeros", {"size": [0, 2**48], "dtype": "uint8"}),  # a 0 counts as 1
        ("arange", {"end": 2**45, "dtype": "float32"}),
        ("expand", {"size": [-1, 2**48]}),
        ("repeat", {"repeats": [2**24, 2**24]}),
        ("repeat_interleave", {"repeats": [2**47, 2**47]}),
        ("interpolate", {"scale_factor": 2.0**48, "mode": "nearest"}),
        ("pad", {"pad": [2**48, -(2**48)]}),
    ],
)
def test_settings_up_to_the_bound_are_accepted(op: str, settings: dict[str, Any]) -> None:
    check(op, settings)


def test_a_recurrent_layer_is_only_as_deep_as_its_weights() -> None:
    model = gru(10**9)
    node = model.nodes[0]
    with pytest.raises(RegistryError, match="num_layers must be 1 … 8"):
        checker_for("GRU").check(node, {slot: model.parameters[key] for slot, key in node.parameters.items()})
    model = gru(2)  # within the catalog's slots, but layer 1 has no weights
    node = model.nodes[0]
    with pytest.raises(RegistryError, match="needs the tensor 'weight_ih_l1'"):
        checker_for("GRU").check(node, {slot: model.parameters[key] for slot, key in node.parameters.items()})


# --------------------------------------------------------------------------------------------
# The runtimes, each in a bounded child process
# --------------------------------------------------------------------------------------------

#: Each case: (model, inputs to run with, or None to prepare only). ``inputs`` are
#: ``(shape, dtype)`` of arrays of ones, made in the child.
CASES: dict[str, tuple[Model, list[tuple[list[int], str]] | None]] = {
    "facts": (one_leaf("ReLU", {}, fact=[10**12, 10**12]), None),
    "facts_overflow": (one_leaf("ReLU", {}, fact=[2**62, 2**62, 2**62]), None),
    "facts_at_the_bound": (one_leaf("ReLU", {}, fact=[2**46]), None),  # prepared (and compiled) only
    "gru_layers": (gru(10**9), None),
    "allocation": (one_leaf("repeat", {"repeats": [2**20, 2**20]}), [([2], "float32")]),  # 8 TiB
    "overflow": (one_leaf("tile", {"dims": [2**24, 2**24]}), [([2**20], "float32")]),  # 2**70 bytes
    "created": (one_leaf("zeros", {"size": [2**36]}, inputs=False), []),  # 256 GiB, below the bound
}

CHILD = """
import json, sys, time
import numpy as np
import trama

runtime = trama.runtime_for_name({runtime!r})
cases = json.loads({cases!r})
for name, (text, inputs) in cases.items():
    started = time.perf_counter()
    try:
        runnable = runtime.prepare(trama.loads(text))
        stage = "prepare"
        if inputs is not None:
            runnable.run([np.ones(shape, dtype) for shape, dtype in inputs])
            stage = "run"
        result = {{"outcome": "ok", "stage": stage}}
    except trama.TramaError as exc:
        result = {{"outcome": "trama", "type": type(exc).__name__, "message": exc.message,
                  "node_id": exc.node_id, "location": exc.location}}
    except BaseException as exc:
        result = {{"outcome": "raw", "type": type(exc).__name__, "message": str(exc)[:500]}}
    result["seconds"] = time.perf_counter() - started
    print("CASE " + json.dumps([name, result]), flush=True)
"""


@cache
def outcomes(runtime: str) -> dict[str, dict[str, Any]]:
    """Every case's outcome on ``runtime``, from one bounded child process."""
    cases = {name: (trama.dumps(model), inputs) for name, (model, inputs) in CASES.items()}
    return case_outcomes(CHILD.format(runtime=runtime, cases=json.dumps(cases)), CASES, timeout_s=180)


def outcome(runtime: str, case: str) -> dict[str, Any]:
    result = outcomes(runtime)[case]
    assert result["outcome"] != "raw", f"{runtime} raised a raw {result['type']}: {result['message']}"
    return result


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", ["facts", "facts_overflow"])
def test_an_impossible_input_fact_is_refused_naming_the_input(runtime: str, case: str) -> None:
    result = outcome(runtime, case)
    assert (result["outcome"], result["type"]) == ("trama", "ExecutionError")
    assert result["location"] == "/input_facts/0"
    assert result["message"].startswith("input 'x' is declared with a shape of")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_fact_at_the_bound_prepares(runtime: str) -> None:
    """2**48 bytes is allowed: ``jax:cpu`` compiles for it (compiling allocates nothing)."""
    result = outcome(runtime, "facts_at_the_bound")
    assert (result["outcome"], result["stage"]) == ("ok", "prepare")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_gru_of_a_billion_layers_is_refused_at_once(runtime: str) -> None:
    result = outcome(runtime, "gru_layers")
    assert (result["outcome"], result["type"], result["node_id"]) == ("trama", "RegistryError", "r")
    assert "num_layers must be 1 … 8" in result["message"]
    assert result["seconds"] < 10


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(("case", "op"), [("allocation", "repeat"), ("overflow", "tile")])
def test_a_failure_while_running_is_an_execution_error_naming_the_node(runtime: str, case: str, op: str) -> None:
    """8 TiB (``repeat``) fails to allocate in every framework; 2**70 bytes (``tile``) overflows
    numpy's and torch's size arithmetic, and ``jax:cpu`` refuses it before XLA sees it."""
    result = outcome(runtime, case)
    assert (result["outcome"], result["type"], result["node_id"]) == ("trama", "ExecutionError", "r")
    assert result["message"].startswith(op)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_created_tensor_too_large_for_the_machine_is_a_trama_error(runtime: str) -> None:
    """256 GiB of zeros is within trama's bound, and more than the child may have: numpy and JAX
    make it when the kernel is built (an ImportModelError), torch when it runs."""
    result = outcome(runtime, "created")
    assert result["outcome"] == "trama"
    assert result["type"] in ("ImportModelError", "ExecutionError")
    assert result["node_id"] == "r"
    assert "zeros" in result["message"]


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def test_trama_run_ends_each_in_one_line_and_exit_status_1(tmp_path: Path) -> None:
    np.save(tmp_path / "x2.npy", np.ones(2, np.float32))
    np.save(tmp_path / "x_big.npy", np.ones(2**20, np.float32))
    files = {}
    for name in ("facts", "gru_layers", "allocation", "overflow"):
        files[name] = tmp_path / f"{name}.trama.json"
        trama.dump(CASES[name][0], files[name], weights="inline")
    inputs = {"allocation": "x2.npy", "overflow": "x_big.npy"}
    jobs = [
        CliJob(
            [
                "run",
                "--runtime",
                runtime,
                str(files[name]),
                *(["--input", f"x={inputs[name]}"] if name in inputs else []),
            ],
            cwd=str(tmp_path),
            memory_mb=4_000,
            timeout_s=60,
        )
        for runtime in ("jax:cpu", "torch:cpu")
        for name in files
    ]
    for job, result in zip(jobs, run_cli_batch(jobs, preload=(*CLI_PRELOAD, *FRAMEWORK_PRELOAD)), strict=True):
        shown = " ".join(job.argv)
        assert not result.crashed, f"{shown}\n{result.describe()}"
        assert not result.traceback, f"{shown}\n{result.describe()}"
        assert result.returncode == 1, f"{shown}\n{result.describe()}"
        lines = result.stderr.splitlines()
        assert len(lines) == 1, f"{shown}\n{result.describe()}"
        assert lines[0].startswith(job.argv[3]), f"{shown}\n{result.describe()}"
