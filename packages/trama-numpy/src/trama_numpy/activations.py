"""numpy kernels for the catalog's activations (``docs/ops.md``, section *Activations*).

Each activation has one factory, registered under both of its names (the module ``ReLU`` and the
function ``relu`` mean the same), so the two forms cannot drift apart.

These kernels are the reference other frameworks are tested against, so they favour exactness:
a floating input narrower than float64 is widened to float64, the formula is evaluated there in a
form that neither overflows nor cancels (a stable sigmoid, ``erfc`` for the exact GELU), and the
result is rounded once to the input's dtype. The result is therefore within an ulp of the true
value, where torch's float32 kernels may be a few ulps off; comparisons use a tolerance anyway.
IEEE special values follow the formula (``exp`` of a large number is ``inf``, never a warning):
kernels silence numpy's floating-point warnings because torch raises none either.

numpy has no ``erf``, and scipy is not a dependency, so :func:`erf` and :func:`erfc` are
W. J. Cody's rational Chebyshev approximations, vectorised, accurate to a few float64 ulps.

Settings come checked from the core (:func:`trama.catalog.check_settings`): a bad value raises
:class:`trama.RegistryError` naming the node, in every framework alike. An input the op does not
accept (an integer tensor for ``GELU``) raises ``TypeError`` naming the op and the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from trama import Node, Parameter
from trama.catalog import check_settings
from trama.extension import Kernel
from trama_numpy._precision import compute_dtype, is_floating
from trama_numpy._registry import implements, required_array

__all__ = [
    "celu",
    "elu",
    "erf",
    "erfc",
    "gelu",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "log_softmax",
    "logsigmoid",
    "mish",
    "prelu",
    "prelu_module",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
]

Array = npt.NDArray[Any]
Float64Array = npt.NDArray[np.float64]


# --- The error function ---------------------------------------------------------------------
#
# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969),
# 631-638, with the coefficients of his SPECFUN routine CALERF (netlib.org/specfun/erf). Three
# ranges of |x|, each with its own rational function:
#
#   |x| ≤ 0.46875      erf(x)  = x · A(x²) / B(x²)
#   0.46875 < |x| ≤ 4  erfc(x) = exp(−x²) · C(|x|) / D(|x|)
#   |x| > 4            erfc(x) = exp(−x²) / |x| · (1/√π − P(1/x²) / Q(1/x²) / x²)
#
# Each is accurate to about 1e-16 relative in its range. The first gives erf without
# cancellation near 0, the others give erfc without cancellation in the tails, and the other
# function follows as 1 − the one computed.

_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03)
_ERF_A_TOP = 1.85777706184603153e-1
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERFC_C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
)
_ERFC_C_TOP = 2.15311535474403846e-8
_ERFC_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
_ERFC_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
)
_ERFC_P_TOP = 1.63153871373020978e-2
_ERFC_Q = (
    2.56852019228982242e00,
    1.87295284992346047e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
_SMALL = 0.46875
_ONE_OVER_SQRT_PI = 5.6418958354775628695e-1


def _rational(
    t: Float64Array, top: float, numerator: tuple[float, ...], denominator: tuple[float, ...]
) -> Float64Array:
    """Cody's evaluation of ``N(t) / D(t)``: ``N`` has the leading coefficient ``top`` and then
    ``numerator``, ``D`` is monic with the further coefficients ``denominator`` (Horner's rule,
    in the order CALERF uses, so that the published accuracy holds)."""
    num = top * t
    den = t.copy()
    for a, b in zip(numerator[:-1], denominator[:-1], strict=True):
        num = (num + a) * t
        den = (den + b) * t
    return (num + numerator[-1]) / (den + denominator[-1])


def _erf_near_zero(x: Float64Array) -> Float64Array:
    """erf(x) for |x| ≤ 0.46875 (odd in x, so the sign comes with x)."""
    return x * _rational(x * x, _ERF_A_TOP, _ERF_A, _ERF_B)


def _exp_minus_square(y: Float64Array) -> Float64Array:
    """exp(−y²) without the rounding error of y² (which exp would magnify by y² ≈ 700): y² is
    split into a part exact in float64, (⌊16y⌋/16)², and a small remainder. y is capped at 40,
    where exp(−y²) is 0 already, so that y = inf gives 0 rather than inf − inf."""
    y = np.minimum(y, 40.0)
    head = np.trunc(y * 16.0) / 16.0
    return np.exp(-head * head) * np.exp(-(y - head) * (y + head))


def _erfc_positive(y: Float64Array) -> Float64Array:
    """erfc(y) for y > 0.46875 (and +inf); both tail ranges."""
    result = np.empty_like(y)
    middle = y <= 4.0
    ym = y[middle]
    result[middle] = _rational(ym, _ERFC_C_TOP, _ERFC_C, _ERFC_D)
    yt = y[~middle]
    inverse_square = 1.0 / (yt * yt)
    correction = inverse_square * _rational(inverse_square, _ERFC_P_TOP, _ERFC_P, _ERFC_Q)
    result[~middle] = (_ONE_OVER_SQRT_PI - correction) / yt
    return _exp_minus_square(y) * result


def erf(x: npt.ArrayLike) -> Float64Array:
    """The error function, elementwise in float64, to within a few ulps (W. J. Cody's CALERF).

    NaN gives NaN and ±inf gives ±1; the result is float64 whatever the input's dtype.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.abs(x)
    result = np.full_like(x, np.nan)  # NaN stays NaN: it falls in neither range below
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        near = y <= _SMALL
        result[near] = _erf_near_zero(x[near])
        far = y > _SMALL
        result[far] = np.copysign(1.0 - _erfc_positive(y[far]), x[far])
    return result


def erfc(x: npt.ArrayLike) -> Float64Array:
    """The complementary error function 1 − erf(x), elementwise in float64, to within a few ulps
    also where it is tiny (x ≫ 1, down to its underflow near x = 26.5), which ``1 − erf(x)``
    cannot give. NaN gives NaN, −inf gives 2 and +inf gives 0."""
    x = np.asarray(x, dtype=np.float64)
    y = np.abs(x)
    result = np.full_like(x, np.nan)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        near = y <= _SMALL
        result[near] = 1.0 - _erf_near_zero(x[near])
        far = y > _SMALL
        tail = _erfc_positive(y[far])
        result[far] = np.where(x[far] > 0, tail, 2.0 - tail)  # erfc(−y) = 2 − erfc(y)
    return result


# --- The shared machinery -------------------------------------------------------------------


def _sigmoid64(z: Float64Array) -> Float64Array:
    """σ(z) = 1 / (1 + exp(−z)) without overflow: with e = exp(−|z|) ≤ 1 it is 1 / (1 + e) for
    z ≥ 0 and e / (1 + e) for z < 0, both exact to rounding for every z (NaN stays NaN)."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _where(node: Node) -> str:
    """How messages name a node: its op and its id."""
    return f"{node.op} (node {node.id!r})"


def _floating_input(inputs: Mapping[str, Any], where: str) -> Array:
    """The value on ``x``, which must be a floating tensor: torch refuses integer inputs to these
    activations (or, for a few, makes them float32, against the catalog's "dtype of `x`")."""
    x = np.asarray(inputs["x"])
    if not is_floating(x.dtype):
        raise TypeError(f"{where}: x must be a floating-point tensor, got dtype {x.dtype}")
    return x


def _widened(x: Array, formula: Callable[[Float64Array], Float64Array]) -> Array:
    """``formula`` (written for float64) applied to a floating ``x``, rounded once to its dtype."""
    with np.errstate(all="ignore"):
        y = formula(x.astype(np.float64, copy=False))
        return np.asarray(y).astype(x.dtype, copy=False)


def _elementwise(node: Node, formula: Callable[[Float64Array], Float64Array]) -> Kernel:
    """A kernel applying ``formula`` to a floating ``x`` (see :func:`_widened`)."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"y": _widened(_floating_input(inputs, where), formula)}

    return kernel


# --- The activations ------------------------------------------------------------------------


@implements("ReLU", "relu")
def relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``max(x, 0)``. Integer tensors are accepted and keep their dtype, as in torch; the maximum
    is exact, so no widening is needed. ``x < 0`` selects 0, so a NaN (never < 0) stays NaN."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = np.asarray(inputs["x"])
        if x.dtype.kind not in "iu" and not is_floating(x.dtype):  # bools too: torch refuses them
            raise TypeError(f"{where}: x must be a numeric tensor, got dtype {x.dtype}")
        # np.maximum propagates NaN (maximum(NaN, 0) is NaN) and is 4x faster than np.where here.
        return {"y": np.maximum(x, np.zeros((), dtype=x.dtype))}

    return kernel


@implements("LeakyReLU", "leaky_relu")
def leaky_relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` where ``x ≥ 0``, else ``negative_slope · x``."""
    slope = check_settings(node, parameters).number("negative_slope")
    return _elementwise(node, lambda x: np.where(x >= 0, x, slope * x))


_SQRT_HALF = math.sqrt(0.5)
_SQRT_TWO_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_exact(x: Float64Array) -> Float64Array:
    """x · Φ(x), with Φ(x) = ½(1 + erf(x/√2)) written as ½ erfc(−x/√2): the same function, but
    without the cancellation of 1 + erf that loses every digit for x ≪ 0."""
    return 0.5 * x * erfc(-x * _SQRT_HALF)


def _gelu_tanh(x: Float64Array) -> Float64Array:
    """½x(1 + tanh(u)) with u = √(2/π)(x + 0.044715x³), written as x · σ(2u), which is the same
    function (½(1 + tanh u) = σ(2u)) without the cancellation of 1 + tanh for x ≪ 0."""
    u = _SQRT_TWO_OVER_PI * (x + 0.044715 * x**3)
    return x * _sigmoid64(2.0 * u)


@implements("GELU", "gelu")
def gelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The Gaussian error linear unit, exact (erf) or with torch's tanh approximation."""
    approximate = check_settings(node, parameters).text("approximate")
    return _elementwise(node, {"none": _gelu_exact, "tanh": _gelu_tanh}[approximate])


@implements("SiLU", "silu")
def silu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x · σ(x)``, with the overflow-free sigmoid."""
    return _elementwise(node, lambda x: x * _sigmoid64(x))


@implements("Sigmoid", "sigmoid")
def sigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``1 / (1 + exp(−x))``, without overflow for large ``|x|`` (see :func:`_sigmoid64`)."""
    return _elementwise(node, _sigmoid64)


@implements("Tanh", "tanh")
def tanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``tanh(x)``."""
    return _elementwise(node, np.tanh)


def _softmax_kernel(node: Node, parameters: Mapping[str, Parameter], *, log: bool) -> Kernel:
    """Softmax or log-softmax along ``dim``, the maximum subtracted first so that ``exp`` never
    overflows; a row holding NaN or +inf gives NaN, as in torch."""
    where = _where(node)
    dim = check_settings(node, parameters).optional_integer("dim")

    def normalized(x: Float64Array, axis: int) -> Float64Array:
        if x.ndim == 0:  # torch allows dim 0 or −1 on a 0-d tensor: a row of one element
            return normalized(x.reshape(1), 0).reshape(())
        if x.size == 0:
            return x.copy()  # no row to normalize (and numpy's max of nothing would raise)
        m: Float64Array = np.max(x, axis=axis, keepdims=True)
        shifted = x - m
        total: Float64Array = np.sum(np.exp(shifted), axis=axis, keepdims=True)
        return shifted - np.log(total) if log else np.exp(shifted) / total

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, where)
        axis = _softmax_axis(dim, x.ndim, where)
        return {"y": _widened(x, lambda x64: normalized(x64, axis))}

    return kernel


def _softmax_axis(dim: int | None, ndim: int, where: str) -> int:
    """The dimension normalized: ``dim`` wrapped, or torch's legacy choice when it is null
    (0 for 0, 1 or 3 dimensions, else 1)."""
    if dim is None:
        return 0 if ndim in (0, 1, 3) else 1
    size = max(ndim, 1)  # a 0-d tensor has the dimensions 0 and −1, as in torch
    if not -size <= dim < size:
        raise IndexError(f"{where}: dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % size


@implements("Softmax", "softmax")
def softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``exp(x − m) / Σ exp(x − m)`` along ``dim``."""
    return _softmax_kernel(node, parameters, log=False)


@implements("LogSoftmax", "log_softmax")
def log_softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x − m − log Σ exp(x − m)`` along ``dim``: never the log of a rounded-to-0 softmax."""
    return _softmax_kernel(node, parameters, log=True)


@implements("Softplus", "softplus")
def softplus(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``log(1 + exp(βx)) / β``, or ``x`` where ``βx > threshold``. ``log(1 + exp(z))`` is
    evaluated as ``max(z, 0) + log1p(exp(−|z|))``, equal but free of overflow, so a large
    ``threshold`` is no problem (torch overflows to inf there)."""
    settings = check_settings(node, parameters)
    beta, threshold = settings.number("beta"), settings.number("threshold")

    def formula(x: Float64Array) -> Float64Array:
        z = beta * x
        smooth = (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta
        return np.where(z > threshold, x, smooth)

    return _elementwise(node, formula)


@implements("ELU", "elu")
def elu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` where ``x > 0``, else ``α(exp(x) − 1)``, with ``expm1`` for accuracy near 0."""
    alpha = check_settings(node, parameters).number("alpha")
    return _elementwise(node, lambda x: np.where(x > 0, x, alpha * np.expm1(x)))


@implements("Hardswish", "hardswish")
def hardswish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x · min(max(x + 3, 0), 6) / 6``."""
    return _elementwise(node, lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0)


# --- Opset 2 ----------------------------------------------------------------------------------


def _rounded(value: float, x: Array, *, own: bool = False) -> float:
    """A setting as torch's kernel holds it: a number of the dtype ``x`` is computed in (float32
    for a 16-bit ``x``, torch's "opmath" type), or with ``own`` of ``x``'s own dtype (widened back
    to float64 for the formula). Comparing with the unrounded float64 would move the boundary:
    ``0.1`` in float64 is not float32's ``0.1``, and torch compares ``x`` with the latter."""
    return float(np.asarray(value, dtype=np.float64).astype(x.dtype if own else compute_dtype(x.dtype)))


def _with_dtype(node: Node, make: Callable[[Array], Callable[[Float64Array], Float64Array]]) -> Kernel:
    """A kernel like :func:`_elementwise` whose formula depends on ``x``'s dtype (``make`` gets
    ``x`` and returns the float64 formula): settings rounded to it, see :func:`_rounded`."""
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, where)
        return {"y": _widened(x, make(x))}

    return kernel


def _clamp(node: Node, low: float, high: float) -> Kernel:
    """``min(max(x, low), high)`` with the bounds in ``x``'s dtype; ``np.clip`` keeps NaN."""
    return _with_dtype(node, lambda x: lambda x64: np.clip(x64, _rounded(low, x), _rounded(high, x)))


@implements("ReLU6", "relu6")
def relu6(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``min(max(x, 0), 6)``."""
    check_settings(node, parameters)
    return _clamp(node, 0.0, 6.0)


@implements("Hardtanh", "hardtanh")
def hardtanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``min(max(x, min_val), max_val)`` (the order of the bounds is checked by the core)."""
    settings = check_settings(node, parameters)
    return _clamp(node, settings.number("min_val"), settings.number("max_val"))


@implements("Hardsigmoid", "hardsigmoid")
def hardsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``min(max(x + 3, 0), 6) / 6``."""
    return _elementwise(node, lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0)


def _softplus64(x: Float64Array) -> Float64Array:
    """``log(1 + exp(x))`` without overflow: ``max(x, 0) + log1p(exp(−|x|))``."""
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


@implements("Mish", "mish")
def mish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x · tanh(softplus(x))``; ``−inf`` gives ``−inf · 0``, NaN, as in torch."""
    return _elementwise(node, lambda x: x * np.tanh(_softplus64(x)))


def _prelu(x: Array, slopes: Array, where: str) -> Array:
    """``x`` where ``x > 0``, else ``w · x`` with ``w`` the slope of the element's channel (dimension
    1; one channel below 2 dimensions): one slope for all, or one per channel."""
    channels = x.shape[1] if x.ndim >= 2 else 1
    if slopes.ndim > 1 or slopes.size not in (1, channels):
        raise ValueError(
            f"{where}: weight has shape {list(slopes.shape)}; it must hold 1 value or one per channel "
            f"({channels}, x.shape[1] of x {list(x.shape)})"
        )
    shape = () if slopes.size == 1 else (-1, *[1] * (x.ndim - 2))
    w = slopes.astype(np.float64).reshape(shape)
    return _widened(x, lambda x64: np.where(x64 > 0, x64, w * x64))


@implements("PReLU")
def prelu_module(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The module: its ``weight`` slot ``[num_parameters]``, used in ``x``'s dtype."""
    check_settings(node, parameters)
    where = _where(node)
    weight = required_array(parameters, "weight")

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, where)
        return {"y": _prelu(x, weight.astype(x.dtype, copy=False), where)}

    return kernel


@implements("prelu")
def prelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The function: the weight on its port, 0-d or 1-d, of ``x``'s dtype (torch does not promote)."""
    check_settings(node, parameters)
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, where)
        weight = np.asarray(inputs["weight"])
        if weight.dtype != x.dtype:
            raise TypeError(f"{where}: weight has dtype {weight.dtype}, but x has {x.dtype}; they must be the same")
        return {"y": _prelu(x, weight, where)}

    return kernel


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@implements("SELU", "selu")
def selu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``scale · x`` where ``x > 0``, else ``scale · α · (exp(x) − 1)`` (``expm1``: exact near 0)."""
    return _elementwise(node, lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)))


@implements("CELU", "celu")
def celu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x`` where ``x > 0``, else ``α · (exp(x / α) − 1)`` (α ≠ 0 is checked by the core)."""
    alpha = check_settings(node, parameters).number("alpha")
    return _elementwise(node, lambda x: np.where(x > 0, x, alpha * np.expm1(x / alpha)))


@implements("GLU", "glu")
def glu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``a · σ(b)``, ``a`` and ``b`` the halves of ``x`` along ``dim``."""
    dim = check_settings(node, parameters).integer("dim")
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, where)
        if x.ndim == 0:
            raise ValueError(f"{where}: x is 0-d, which has no dimension to halve")
        if not -x.ndim <= dim < x.ndim:
            raise IndexError(f"{where}: dim {dim} is out of range for a tensor of {x.ndim} dimensions")
        axis = dim % x.ndim
        size = x.shape[axis]
        if size % 2:
            raise ValueError(f"{where}: x has size {size} along dim {dim}, which must be even")
        a, b = np.split(x, 2, axis=axis)
        return {"y": _widened(a, lambda a64: a64 * _sigmoid64(b.astype(np.float64)))}

    return kernel


@implements("LogSigmoid", "logsigmoid")
def logsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``log σ(x) = min(x, 0) − log1p(exp(−|x|))``: no overflow, no ``log`` of a rounded 0."""
    return _elementwise(node, lambda x: np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x))))


@implements("Softsign", "softsign")
def softsign(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x / (1 + |x|)``."""
    return _elementwise(node, lambda x: x / (1.0 + np.abs(x)))


@implements("Tanhshrink", "tanhshrink")
def tanhshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x − tanh(x)``, in float64: the difference cancels for small ``x`` and float64 keeps the
    digits that a float32 evaluation loses."""
    return _elementwise(node, lambda x: x - np.tanh(x))


@implements("Hardshrink", "hardshrink")
def hardshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """0 where ``−lambd ≤ x ≤ lambd``, else ``x`` (NaN fails both tests, so it stays NaN);
    ``lambd`` is rounded to ``x``'s own dtype, also a 16-bit one, as torch's kernel rounds it."""
    lambd = check_settings(node, parameters).number("lambd")

    def make(x: Array) -> Callable[[Float64Array], Float64Array]:
        bound = _rounded(lambd, x, own=True)
        return lambda x64: np.where((x64 >= -bound) & (x64 <= bound), 0.0, x64)

    return _with_dtype(node, make)


@implements("Softshrink", "softshrink")
def softshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x ∓ lambd`` beyond ``±lambd``, else ``x · 0`` (a signed zero; NaN stays NaN)."""
    lambd = check_settings(node, parameters).number("lambd")

    def make(x: Array) -> Callable[[Float64Array], Float64Array]:
        bound = _rounded(lambd, x)
        return lambda x64: np.where(x64 > bound, x64 - bound, np.where(x64 < -bound, x64 + bound, x64 * 0.0))

    return _with_dtype(node, make)


@implements("Threshold", "threshold")
def threshold(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``value`` where ``x ≤ threshold``, else ``x``, both settings in ``x``'s dtype."""
    settings = check_settings(node, parameters)
    limit, value = settings.number("threshold"), settings.number("value")

    def make(x: Array) -> Callable[[Float64Array], Float64Array]:
        bound, replacement = _rounded(limit, x), _rounded(value, x)
        return lambda x64: np.where(x64 <= bound, replacement, x64)

    return _with_dtype(node, make)


@implements("Softmin", "softmin")
def softmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``softmax(−x)`` along ``dim``."""
    softmax_of = _softmax_kernel(node, parameters, log=False)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        x = _floating_input(inputs, _where(node))
        return softmax_of({**inputs, "x": -x})

    return kernel
