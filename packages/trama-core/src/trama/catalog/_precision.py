"""The catalog's half-precision rule: how an op computes on float16 and bfloat16 tensors, and how
close a runtime's result must be (``docs/ops.md``, "Half precision", rendered from
:data:`HALF_PRECISION_DOC`).

The rule is torch's CPU arithmetic ("opmath"): a 16-bit float is a storage format, and an op
computes in float32 and rounds its result once. The tolerances are data, :data:`HALF_PRECISION`,
so that the conformance suite (``tests/conformance``) checks exactly the numbers this text states.

They are stated against the float32 computation of the same values (every 16-bit value is a float32
value): ``|y − y₃₂| ≤ t · (1 + |y₃₂|)`` elementwise, ``numpy.testing.assert_allclose`` with
``rtol = atol = t``. An op that rounds once is within ε/2 of it (numpy and JAX measured ≤ 0.5ε);
the allowance of 2ε covers torch's own kernels, a few of which round an intermediate in the 16-bit
dtype (measured ≤ 0.74ε). 8ε covers the ops torch computes in several rounded steps
(:data:`STEPPED_OPS`; measured ≤ 5ε, JAX's and torch's ``TransformerEncoderLayer``) and graphs of a
few layers (measured ≤ 3.4ε for two-layer BERT, Llama and DeiT models, where torch's own eager
result is up to 2.7ε away).

Nothing here imports numpy: the docs and the specs read it at discovery time.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["HALF_PRECISION", "HALF_PRECISION_DOC", "STEPPED_OPS", "HalfTolerance", "half_tolerance"]


@dataclass(frozen=True, slots=True)
class HalfTolerance:
    """How close a runtime's result of the 16-bit dtype ``dtype`` must be to the float32
    computation of the same values: ``|y − y₃₂| ≤ t · (1 + |y₃₂|)``, with ``t = op`` for one op
    and ``t = layer`` for the :data:`STEPPED_OPS` and for graphs of a few layers.

    ``epsilon`` is the dtype's machine epsilon (the distance from 1 to the next value); the
    tolerances are multiples of it.
    """

    dtype: str
    epsilon: float
    op: float
    layer: float


def _tolerance(dtype: str, mantissa_bits: int) -> HalfTolerance:
    epsilon = 2.0**-mantissa_bits
    return HalfTolerance(dtype, epsilon, op=2 * epsilon, layer=8 * epsilon)


#: The tolerances of the two 16-bit float dtypes, by dtype name: float16 (10 stored mantissa bits)
#: and bfloat16 (7).
HALF_PRECISION = MappingProxyType({"float16": _tolerance("float16", 10), "bfloat16": _tolerance("bfloat16", 7)})

#: The ops torch computes in several steps, rounding each step's result in the 16-bit dtype (the two
#: products of a bilinear map; the projections, residual sums and norms of the attention and encoder
#: layers; a recurrent layer's state after every step): a runtime may round between their steps or
#: not, and they get the ``layer`` tolerance.
STEPPED_OPS = ("Bilinear", "bilinear", "MultiheadAttention", "TransformerEncoderLayer", "GRU", "LSTM")


def half_tolerance(dtype: str, op: str | None = None) -> float:
    """The tolerance ``t`` for results of ``dtype`` (``"float16"`` or ``"bfloat16"``) of the op
    ``op``, or of a graph (``None``)."""
    tolerance = HALF_PRECISION[dtype]
    return tolerance.op if op is not None and op not in STEPPED_OPS else tolerance.layer


def _shown(value: float) -> str:
    return f"{value:.3g}"


_F16, _BF16 = HALF_PRECISION["float16"], HALF_PRECISION["bfloat16"]
_LAYERS = ", ".join(f"`{name}`" for name in STEPPED_OPS)

#: The section of ``docs/ops.md``'s conventions that states the rule (rendered by
#: :mod:`trama.catalog.docs` from the numbers above).
HALF_PRECISION_DOC = f"""\
**Half precision.** float16 and bfloat16 are storage dtypes. An op given float16 or bfloat16
tensors computes in float32, torch's CPU "opmath" type, and rounds each result once to the
input's dtype: sums, products and matrix products accumulate in float32, statistics and
normalizations are float32 (a `LayerNorm`'s `eps` of `1e-12` is added in float32, where float16
would lose it), transcendental functions are evaluated in float32, and a number setting that an
op compares with `x` or adds to it is a float32 number (`threshold`, `lambd`, `beta`), unless
the op's text says otherwise (`Hardshrink` rounds `lambd` to `x`'s own dtype, as torch does). A
null `eps` of `RMSNorm` is float32's epsilon. A runtime may compute in a wider dtype (float64)
as long as it rounds once. A result beyond the dtype's range is ±inf (float16's largest value is
65504), as in torch. The ops that torch computes in several steps
({_LAYERS})
may round between their steps, as torch does after each product, projection, residual sum and
recurrent step, or round once; a recurrent layer's state between steps is of the input's dtype,
so that a sequence streamed in chunks gives the results of the whole sequence.

*Tolerance.* A runtime's result `y` for 16-bit inputs is compared with the float32 computation
`y₃₂` of the same values (each 16-bit value is a float32 value): elementwise,
`|y − y₃₂| ≤ t · (1 + |y₃₂|)`, with `t` a multiple of the dtype's machine epsilon ε. For one op
`t = 2ε`; for the ops above that torch computes in steps, and for a graph of a few layers, `t = 8ε`:

| dtype | ε | t, one op | t, the stepped ops and small graphs |
|---|---|---|---|
| float16 | 2⁻¹⁰ | {_shown(_F16.op)} | {_shown(_F16.layer)} |
| bfloat16 | 2⁻⁷ | {_shown(_BF16.op)} | {_shown(_BF16.layer)} |

Rounding once keeps an op within ε/2 of `y₃₂`; the rest of the allowance is for torch's own
kernels, a few of which round an intermediate in the 16-bit dtype. Each op of a graph rounds
its result, so a deep graph's difference from its float32 computation grows with its depth, for
torch as for any runtime; two runtimes then agree about as closely as each agrees with the
float32 computation. `trama.catalog.HALF_PRECISION` holds these numbers.
"""
