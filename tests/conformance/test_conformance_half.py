"""Half precision, op by op: float16 and bfloat16 inputs give, on numpy, torch:cpu and jax:cpu, the
float32 computation of the same values within the catalog's tolerance (``docs/ops.md``, "Half
precision"; the numbers are :data:`trama.catalog.HALF_PRECISION`).

The cases are the op suite's (:mod:`conformance_cases`): each generated case has its float32
tensors (inputs, weights, constants) rounded to the 16-bit dtype, and the reference is numpy's
float32 run of those rounded values, which every 16-bit value is exactly. Each runtime must give
the 16-bit dtype where the reference is float32, within ``t · (1 + |y₃₂|)`` of it (``t`` = 2ε for
one op, 8ε for the ops torch computes in several rounded steps), and everything else exactly.
A case with a value beyond the 16-bit dtype's range (a ``masked_fill`` value of ``-1e9`` in
float16) is skipped, and so is one that every runtime refuses; one that only some refuse fails.
``Hardshrink``'s ``lambd`` is rounded to the 16-bit dtype for the reference too, as the catalog
rounds it; a ``clamp`` of an integer ``x`` is left to the op suite (its result dtype is a matter of
promotion, see README.md's findings).

The ops are the families the rule is about: dense maps and convolutions, normalizations, softmax
and the activations torch upcasts, reductions and scans, matrix products and attention, averaging
pools and resampling, elementwise math, the sequence layers; both forms where the catalog has
two.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from conformance_cases import case_for
from conformance_support import (
    HALF_DTYPES,
    RUNTIMES,
    Case,
    ErrorLog,
    assert_within_half_tolerance,
    catalog_leaves,
    in_float32,
    in_half,
    one_node_model,
    runtime,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import trama
from trama.catalog import STEPPED_OPS, half_tolerance
from trama.format import numpy_dtype

#: The ops checked in float16 and bfloat16, by family.
HALF_OPS: tuple[str, ...] = (
    # dense maps and convolutions
    *("Linear", "linear", "addmm", "Embedding"),
    *("Conv1d", "Conv2d", "conv2d", "Conv3d", "ConvTranspose2d", "conv_transpose1d"),
    # normalizations
    *("LayerNorm", "layer_norm", "GroupNorm", "group_norm", "BatchNorm2d", "batch_norm"),
    *("RMSNorm", "rms_norm", "weight_norm"),
    # softmax and the activations torch computes in float32
    *("Softmax", "softmax", "LogSoftmax", "log_softmax", "GELU", "gelu", "SiLU", "silu", "Sigmoid"),
    *("Softplus", "Mish", "SELU", "GLU", "Tanhshrink", "Hardshrink", "Softshrink", "Threshold"),
    # reductions and scans
    *("sum", "mean", "var", "std", "prod", "max", "logsumexp", "linalg_vector_norm", "cumsum"),
    # matrix products and attention
    *("matmul", "einsum", "scaled_dot_product_attention"),
    # averaging pools and resampling (and a maximum, exact in any dtype)
    *("AvgPool2d", "avg_pool1d", "AvgPool3d", "AdaptiveAvgPool2d", "adaptive_avg_pool1d"),
    *("interpolate", "Upsample", "MaxPool2d"),
    # elementwise math
    *("add", "sub", "mul", "div", "pow", "square", "exp", "log", "sqrt", "rsqrt", "erf", "tanh", "sin"),
    *("reciprocal", "clamp", "where", "masked_fill"),
    # the ops torch computes in several rounded steps: a bilinear map, the sequence layers
    *STEPPED_OPS,
)

#: The sequence layers, each a new program per example for a compiling runtime.
_SEQUENCE = frozenset(("MultiheadAttention", "TransformerEncoderLayer", "GRU", "LSTM"))

#: Examples per op and dtype; the sequence layers get fewer. ``TRAMA_CONFORMANCE_EXAMPLES`` raises
#: both (and turns randomization on), as for the op suite.
EXAMPLES = 5
LAYER_EXAMPLES = 3
_DEEPER = int(os.environ.get("TRAMA_CONFORMANCE_EXAMPLES", "0"))

ERRORS = ErrorLog()


@pytest.fixture(scope="module", autouse=True)
def report_errors() -> Iterator[None]:
    """Print the largest ``|y − y₃₂| / (1 + |y₃₂|)`` per op, dtype and runtime (``pytest -s``):
    README.md's figures."""
    yield
    print("\n" + ERRORS.report("largest |y − y32| / (1 + |y32|) in half precision, per op, dtype and runtime"))


def _settings(op: str) -> settings:
    return settings(
        max_examples=_DEEPER or (LAYER_EXAMPLES if op in _SEQUENCE else EXAMPLES),
        deadline=None,
        derandomize=not _DEEPER,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def test_the_half_precision_ops_are_catalog_leaves_named_once() -> None:
    assert set(HALF_OPS) <= catalog_leaves(), sorted(set(HALF_OPS) - catalog_leaves())
    assert len(set(HALF_OPS)) == len(HALF_OPS), "an op named twice would run twice"


#: torch warns, once per process, that it copies the input for an even kernel with padding "same".
_SAME_PADDING_COPIES = "ignore:Using padding='same':UserWarning"
#: torch's CPU LSTM with ``proj_size > 0`` says, once per process, that oneDNN cannot run it.
_LSTM_PROJECTION_NOTICE = "ignore:LSTM with projections is not supported with oneDNN:UserWarning"


def _reference_case(half: Case, dtype: str) -> Case:
    """The float32 case whose computation the 16-bit results are compared with: the same values,
    and ``Hardshrink``'s ``lambd`` rounded to the 16-bit dtype, as the catalog has the op round it
    (every other setting is a float32 number in half precision too)."""
    widened = in_float32(half, dtype)
    if half.op in ("Hardshrink", "hardshrink") and "lambd" in half.slots:
        lambd = float(np.asarray(half.slots["lambd"], dtype=np.float64).astype(numpy_dtype(dtype)))
        widened = Case(
            widened.op, widened.inputs, {**widened.slots, "lambd": lambd}, widened.outputs, widened.constants
        )
    return widened


def _only_promotion(case: Case) -> bool:
    """A ``clamp`` of an integer ``x``: its result dtype comes from promotion with the bounds, which
    torch computes by another rule than the catalog's when one bound is a number and the other a
    0-d 16-bit tensor (README.md, "Findings"); nothing about precision."""
    x = case.inputs.get("x")
    return case.op == "clamp" and isinstance(x, np.ndarray) and x.dtype.kind in "biu"


@pytest.mark.filterwarnings(_SAME_PADDING_COPIES)
@pytest.mark.filterwarnings(_LSTM_PROJECTION_NOTICE)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("op", HALF_OPS)
def test_an_op_in_half_precision_is_its_float32_computation_within_the_tolerance(op: str, dtype: str) -> None:
    t = half_tolerance(dtype, op)

    @_settings(op)
    @given(data=st.data())
    def within(data: st.DataObject) -> None:
        case = data.draw(case_for(op), label=op)
        assume(not _only_promotion(case))
        half = in_half(case, dtype)
        assume(half is not None)
        assert half is not None
        model = one_node_model(half)
        results, refusals = {}, {}
        for name in RUNTIMES:
            try:
                results[name] = runtime(name).prepare(model).run(dict(half.inputs))
            except trama.TramaError as error:
                refusals[name] = error
        if refusals:
            assert not results, f"{sorted(refusals)} refuse the {dtype} case and {sorted(results)} run it: {refusals}"
            assume(False)  # refused everywhere: a value the dtype cannot hold, as in torch
        widened = _reference_case(half, dtype)
        reference = runtime("numpy").prepare(one_node_model(widened)).run(dict(widened.inputs))
        assert_within_half_tolerance(results, reference, half.output_names(), dtype, t, log=ERRORS, key=op)

    within()
