"""Arithmetic the layer and sequence kernels share: precision, accumulation dtype, dense maps, norms.

**Precision.** Every matrix product and convolution asks for ``Precision.HIGHEST``. On a CPU that
is what XLA does anyway, but on a GPU or TPU the default lets float32 products run in TF32 or
bfloat16 passes, an error of 1e-3 where the catalog promises torch's float32 results within 1e-5.

**Dtypes.** A kernel returns its input's dtype. Parameters are cast to it (a document may store
them in another one; torch would refuse the mix, the catalog asks for the input's dtype). For the
16-bit floats, float16 and bfloat16, the kernels follow torch's CPU arithmetic: matrix products and
convolutions accumulate in float32 and round once (bias included), normalizations and softmax
compute their statistics and result in float32 and round once, and elementwise steps (gates,
residual sums) run in the input dtype, rounding after each op as torch does. Every other dtype
computes in itself (float32 in float32; float64 needs JAX's x64 mode, which trama-jax never turns
on, so without it JAX has already made a float64 input float32). An activation of a 16-bit float
is computed in float32 and rounded once (:func:`opmath`), as torch's CPU kernels compute it: the
catalog's half-precision rule (``docs/ops.md``, "Half precision").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["HIGHEST", "accumulation", "dense", "epsilon", "normalized", "opmath", "product", "softmax"]

HIGHEST = jax.lax.Precision.HIGHEST

_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def accumulation(dtype: np.dtype | jnp.dtype) -> np.dtype:
    """The dtype sums and statistics are computed in: float32 for the 16-bit floats (torch's
    "opmath" type on the CPU), else the dtype itself."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in _HALF else dtype


def opmath(formula: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    """``formula`` of ``x`` computed in :func:`accumulation`'s dtype and rounded once to ``x``'s:
    an elementwise op on a 16-bit float as torch's CPU kernels compute it (a Python-number setting
    inside ``formula`` then meets ``x`` as a float32, as torch's settings do)."""
    return formula(x.astype(accumulation(x.dtype))).astype(x.dtype)


def epsilon(dtype: np.dtype | jnp.dtype) -> float:
    """The machine epsilon of a floating dtype: ``numpy.finfo``'s, and 2⁻⁷ for bfloat16 (7 stored
    mantissa bits), the one format dtype ``numpy.finfo`` does not know."""
    dtype = np.dtype(dtype)
    return 2.0**-7 if dtype == _HALF[1] else float(np.finfo(dtype).eps)


def dense(x: jax.Array, weight: jax.Array, bias: jax.Array | None) -> jax.Array:
    """``x · weightᵀ + bias`` over the last axis (torch's ``[out, in]`` weight layout), accumulated
    in :func:`accumulation`'s dtype and rounded once to ``x``'s."""
    acc = accumulation(x.dtype)
    y = jnp.matmul(x, weight.astype(x.dtype).T, precision=HIGHEST, preferred_element_type=acc)
    if bias is not None:
        y = y + bias.astype(acc)
    return y.astype(x.dtype)


def product(a: jax.Array, b: jax.Array) -> jax.Array:
    """The batched matrix product ``a @ b``, accumulated in :func:`accumulation`'s dtype and rounded
    once to ``a``'s."""
    return jnp.matmul(a, b, precision=HIGHEST, preferred_element_type=accumulation(a.dtype)).astype(a.dtype)


def softmax(s: jax.Array) -> jax.Array:
    """Softmax over the last axis, computed in :func:`accumulation`'s dtype and rounded once. A row
    that is −∞ everywhere gives NaN, as in torch (``exp(−∞ − (−∞))``)."""
    return jax.nn.softmax(s.astype(accumulation(s.dtype)), axis=-1).astype(s.dtype)


def normalized(
    x: jax.Array,
    axes: Sequence[int],
    eps: float,
    weight: jax.Array | None,
    bias: jax.Array | None,
    *,
    centred: bool = True,
) -> jax.Array:
    """``(x − μ) / √(σ² + eps) · weight + bias`` with μ and the biased σ² over ``axes`` (a layer
    or group norm), or with ``centred=False`` ``x / √(mean(x²) + eps) · weight`` (an RMS norm).

    Computed in :func:`accumulation`'s dtype and rounded once; ``weight`` and ``bias`` must already
    broadcast against ``x``. The variance is two-pass (mean of squared deviations), exact where
    a one-pass ``E[x²] − E[x]²`` cancels.
    """
    acc = accumulation(x.dtype)
    wide = x.astype(acc)
    axes = tuple(axes)
    if centred:
        wide = wide - jnp.mean(wide, axis=axes, keepdims=True)
    square = jnp.mean(wide * wide, axis=axes, keepdims=True)
    y = wide * jax.lax.rsqrt(square + jnp.asarray(eps, acc))
    if weight is not None:
        y = y * weight.astype(acc)
    if bias is not None:
        y = y + bias.astype(acc)
    return y.astype(x.dtype)
