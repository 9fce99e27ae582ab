"""Valid documents that crashed or stalled a framework inside the bounds of :mod:`test_bounds`.

A later audit's cases, and their variants:

* a ``getitem`` slice of step ``2**63 − 1`` aborted ``jax:cpu`` (XLA computes a strided slice's
  length in 64 bits) and made torch return nothing: the catalog bounds a slice's step by 2**48
  (a step of at least a dimension's length takes its first element only, so nothing larger is
  needed), an int index by 2**48 (beyond, it is out of range of any dimension), a slice's start
  and stop by the signed 64-bit range (they are clamped to the dimension, and ``2**63 − 1`` is
  torch's "to the end"); ``slice_scatter``'s slice alike. ``jax:*`` also clamps every slice to
  its dimension before XLA sees it;
* ``conv_transpose1d`` with a stride of 2**36 made XLA compile for minutes (its CPU compiler
  works in proportion to an input-dilated convolution's spread input), and torch, which computes
  a convolution's or a pool's geometry in 32-bit ints, truncated it to 0 (2**32 + 1 to 1, a
  wrong result): the catalog bounds every kernel size, stride, padding, output padding and
  dilation by 2**31 − 1, and ``jax:*`` spreads a large input-dilated input itself, so that a
  stride of 2**26 compiles at once (and ``jax:*`` waits for a run, so that an allocation failing
  while it runs is a trama error, not an abort when the result is read);
* ``AdaptiveMaxPool1d`` with 200,000 bins built one JAX operation per bin and aborted XLA with
  ``std::bad_alloc``: the adaptive pools of ``jax:*`` and ``numpy`` gather every window at once,
  so a pool costs in proportion to its output, whatever the number of bins.

The catalog's checks run in the test process; the runtimes and ``trama run`` run in bounded
child processes (:mod:`reliability.isolation`, :mod:`reliability.forkrun`).
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
from reliability.test_bounds import check, one_leaf
from trama import INPUT, Model, Node, Parameter, Ref
from trama.catalog._indexing import clamped_slice
from trama.errors import RegistryError

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")
BIG = 2**63 - 1

# --------------------------------------------------------------------------------------------
# The catalog's checks
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "settings", "message"),
    [
        ("getitem", {"index": [[0, None, BIG]]}, r"step 9223372036854775807 is beyond 2\*\*48"),
        ("getitem", {"index": [[None, None, 2**48 + 1]]}, r"step 281474976710657 is beyond 2\*\*48"),
        ("getitem", {"index": [0, [None, None, 2**62]]}, r"the slice \[None, None, 4611686018427387904\]"),
        ("getitem", {"index": [2**48 + 1]}, r"index 281474976710657, beyond 2\*\*48.*out of range"),
        ("getitem", {"index": [-(2**60)]}, r"index -1152921504606846976, beyond 2\*\*48"),
        ("getitem", {"index": [[2**63, None, None]]}, r"start 9223372036854775808 is beyond the signed 64-bit"),
        ("getitem", {"index": [[None, -(2**63) - 1, 1]]}, r"stop -9223372036854775809 is beyond the signed 64-bit"),
        ("slice_scatter", {"step": BIG}, r"step 9223372036854775807 is beyond 2\*\*48"),
        ("slice_scatter", {"end": 2**64}, r"end 18446744073709551616 is beyond the signed 64-bit"),
        ("conv_transpose1d", {"stride": [2**36]}, r"stride holds 68719476736, beyond 2\*\*31 - 1"),
        ("conv1d", {"dilation": [2**31]}, r"dilation holds 2147483648, beyond 2\*\*31 - 1"),
        ("conv2d", {"padding": [2**32, 0]}, r"padding holds 4294967296, beyond 2\*\*31 - 1"),
        ("conv_transpose2d", {"output_padding": [0, 2**40]}, r"output_padding holds 1099511627776"),
        ("max_pool1d", {"kernel_size": [2**32 + 1]}, r"kernel_size holds 4294967297, beyond 2\*\*31 - 1"),
        ("avg_pool3d", {"kernel_size": [1, 1, 1], "stride": [1, 2**33, 1]}, r"stride holds 8589934592"),
        ("MaxPool3d", {"kernel_size": [1, 1, 1], "dilation": [2**31, 1, 1]}, r"dilation holds 2147483648"),
    ],
)
def test_positions_beyond_any_dimension_are_refused_by_the_catalog(
    op: str, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(RegistryError, match=message) as info:
        check(op, settings)
    assert info.value.node_id == "r"
    assert info.value.message.startswith(f"{op}: ")
    assert "docs/format.md, section 7" in info.value.message


@pytest.mark.parametrize(
    ("op", "settings"),
    [
        ("getitem", {"index": [[None, None, 2**48]]}),
        ("getitem", {"index": [[-(2**63), BIG, 1]]}),  # torch's "from the start to the end"
        ("getitem", {"index": [2**48, -(2**48)]}),
        ("slice_scatter", {"start": -(2**63), "end": BIG, "step": 2**48}),
        ("conv_transpose1d", {"stride": [2**31 - 1], "dilation": [2**31 - 1], "output_padding": [2**31 - 2]}),
        ("max_pool2d", {"kernel_size": [2**31 - 1, 1], "padding": [2**30 - 1, 0]}),
    ],
)
def test_positions_up_to_the_bounds_are_accepted(op: str, settings: dict[str, Any]) -> None:
    check(op, settings)


@pytest.mark.parametrize("size", [0, 1, 5, 7])
@pytest.mark.parametrize(
    "part", [slice(None, None, 2**48), slice(-(2**63), BIG, 3), slice(BIG, None, 1), slice(2, -1, 6), slice(1, 3, None)]
)
def test_a_clamped_slice_means_the_same(size: int, part: slice) -> None:
    clamped = clamped_slice(part, size)
    assert list(range(size))[clamped] == list(range(size))[part]
    assert max(abs(clamped.start), abs(clamped.stop), clamped.step) <= max(size, 1)


# --------------------------------------------------------------------------------------------
# The runtimes, each in a bounded child process
# --------------------------------------------------------------------------------------------


def convolution(op: str, settings: Mapping[str, Any]) -> Model:
    """A model of one function-form convolution ``r`` of ``x`` by the weight port ``w``."""
    node = Node("r", op, {"x": Ref(INPUT, "x"), "weight": Ref(INPUT, "w")}, ["y"], {k: f"r.{k}" for k in settings})
    return Model(["x", "w"], [Ref("r", "y")], [node], {f"r.{k}": Parameter(v) for k, v in settings.items()})


#: A transposed convolution's inputs: two elements of ``x``, a weight of one.
TWO_BY_ONE = [([1, 1, 2], "float32"), ([1, 1, 1], "float32")]

#: Each case: (model, inputs as ``(shape, dtype)``: arrays of 0, 1, 2… made in the child).
CASES: dict[str, tuple[Model, list[tuple[list[int], str]]]] = {
    # Refused by the catalog, before any framework.
    "step": (one_leaf("getitem", {"index": [[0, None, BIG]]}), [([10], "float32")]),
    "index": (one_leaf("getitem", {"index": [2**62]}), [([10], "float32")]),
    "scatter_step": (
        Model(
            ["x", "src"],
            [Ref("r", "y")],
            [Node("r", "slice_scatter", {"x": Ref(INPUT, "x"), "src": Ref(INPUT, "src")}, ["y"], {"step": "r.step"})],
            {"r.step": Parameter(BIG)},
        ),
        [([10], "float32"), ([1], "float32")],
    ),
    "stride_2_36": (convolution("conv_transpose1d", {"stride": [2**36]}), TWO_BY_ONE),
    # Within the bounds: each framework runs them, quickly.
    "stride_2_26": (convolution("conv_transpose1d", {"stride": [2**26]}), TWO_BY_ONE),
    "stride_2_31_one_input": (
        convolution("conv_transpose1d", {"stride": [2**31 - 1]}),
        [([1, 1, 1], "float32"), ([1, 1, 3], "float32")],
    ),
    "stride_past_the_input": (
        convolution("conv1d", {"stride": [2**31 - 1], "dilation": [3]}),
        [([2, 1, 9], "float32"), ([2, 1, 2], "float32")],
    ),
    "bins_200000": (one_leaf("AdaptiveMaxPool1d", {"output_size": [200_000]}), [([1, 2, 10], "float32")]),
    "avg_bins_200000": (one_leaf("adaptive_avg_pool1d", {"output_size": [200_000]}), [([1, 2, 10], "float32")]),
    "bins_uneven": (one_leaf("adaptive_max_pool2d", {"output_size": [5, None]}), [([2, 3, 11, 4], "float32")]),
    "step_of_the_axis": (one_leaf("getitem", {"index": [[1, None, 9]]}), [([10], "float32")]),
    "step_2_48": (one_leaf("getitem", {"index": [[None, None, 2**48], [-(2**63), BIG, 3]]}), [([4, 7], "float32")]),
}

CHILD = """
import json, sys, time, zlib
import numpy as np
import trama

runtime = trama.runtime_for_name({runtime!r})
cases = json.loads({cases!r})
for name, (text, inputs) in cases.items():
    started = time.perf_counter()
    try:
        runnable = runtime.prepare(trama.loads(text))
        arrays = [np.arange(np.prod(shape, dtype=np.int64)).reshape(shape).astype(dtype) % 13
                  for shape, dtype in inputs]
        y = np.asarray(runnable.run(arrays)[0])
        result = {{"outcome": "ok", "shape": list(y.shape),
                  "values": y.ravel()[:50].tolist(), "crc": zlib.crc32(np.ascontiguousarray(y).tobytes())}}
    except trama.TramaError as exc:
        result = {{"outcome": "trama", "type": type(exc).__name__, "message": exc.message, "node_id": exc.node_id}}
    except BaseException as exc:
        result = {{"outcome": "raw", "type": type(exc).__name__, "message": str(exc)[:500]}}
    result["seconds"] = time.perf_counter() - started
    print("CASE " + json.dumps([name, result]), flush=True)
"""


@cache
def outcomes(runtime: str) -> dict[str, dict[str, Any]]:
    """Every case's outcome on ``runtime``, from one bounded child process."""
    cases = {name: (trama.dumps(model), inputs) for name, (model, inputs) in CASES.items()}
    return case_outcomes(CHILD.format(runtime=runtime, cases=json.dumps(cases)), CASES, timeout_s=120)


def outcome(runtime: str, case: str) -> dict[str, Any]:
    result = outcomes(runtime)[case]
    assert result["outcome"] != "raw", f"{runtime} raised a raw {result['type']}: {result['message']}"
    assert result["seconds"] < 30, f"{runtime} took {result['seconds']:.0f} s on {case}"
    return result


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("step", "getitem: index has the slice [0, None, 9223372036854775807], whose step"),
        ("index", "getitem: index has the index 4611686018427387904, beyond 2**48"),
        ("scatter_step", "slice_scatter: step 9223372036854775807 is beyond 2**48"),
        ("stride_2_36", "conv_transpose1d: stride holds 68719476736, beyond 2**31 - 1"),
    ],
)
def test_every_runtime_refuses_a_position_beyond_the_bounds_alike(runtime: str, case: str, message: str) -> None:
    result = outcome(runtime, case)
    assert (result["outcome"], result["type"], result["node_id"]) == ("trama", "RegistryError", "r")
    assert result["message"].startswith(message)


@pytest.mark.parametrize(
    "case",
    [
        "stride_2_26",
        "stride_2_31_one_input",
        "stride_past_the_input",
        "bins_200000",
        "avg_bins_200000",
        "bins_uneven",
        "step_of_the_axis",
        "step_2_48",
    ],
)
def test_extreme_valid_settings_run_and_agree(case: str) -> None:
    results = {runtime: outcome(runtime, case) for runtime in RUNTIMES}
    for runtime, result in results.items():
        assert result["outcome"] == "ok", f"{runtime}: {result}"
    reference = results["numpy"]
    for runtime in ("torch:cpu", "jax:cpu"):
        assert results[runtime]["shape"] == reference["shape"], runtime
        np.testing.assert_allclose(results[runtime]["values"], reference["values"], rtol=1e-6, err_msg=runtime)
    if case.startswith(("bins", "step", "stride_2")):  # maxima, copies, products by ones: exact
        assert len({result["crc"] for result in results.values()}) == 1, results


def test_the_audits_reproductions_are_what_they_were() -> None:
    assert outcome("numpy", "bins_200000")["shape"] == [1, 2, 200_000]
    assert outcome("numpy", "step_of_the_axis")["values"] == [1.0]
    assert outcome("numpy", "stride_2_31_one_input")["shape"] == [1, 1, 3]
    assert outcome("numpy", "stride_2_26")["shape"] == [1, 1, 2**26 + 1]


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def test_trama_run_refuses_each_in_one_line_and_exit_status_1(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.ones(10, np.float32))
    np.save(tmp_path / "src.npy", np.ones(1, np.float32))
    np.save(tmp_path / "x2.npy", np.ones((1, 1, 2), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1), np.float32))
    inputs = {
        "step": ["--input", "x=x.npy"],
        "scatter_step": ["--input", "x=x.npy", "--input", "src=src.npy"],
        "stride_2_36": ["--input", "x=x2.npy", "--input", "w=w.npy"],
    }
    files = {}
    for name in inputs:
        files[name] = tmp_path / f"{name}.trama.json"
        trama.dump(CASES[name][0], files[name], weights="inline")
    jobs = [
        CliJob(
            ["run", "--runtime", runtime, str(files[name]), *inputs[name]],
            cwd=str(tmp_path),
            memory_mb=4_000,
            timeout_s=60,
        )
        for runtime in RUNTIMES
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
