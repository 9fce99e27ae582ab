"""JAX kernels for the catalog's activations (``docs/ops.md``, section *Activations*).

Each activation has one factory, registered under both of its names (the module ``ReLU`` and the
function ``relu`` mean the same), so the two forms cannot drift apart.

The formulas are ``jax.nn``'s where it has them, because those are written for differentiation:
``relu``'s derivative at 0 is 0 (torch's choice), ``elu`` and ``softplus`` never evaluate an
``exp`` that overflows in the branch ``where`` discards (which would turn the gradient into NaN),
and ``softmax`` subtracts the maximum without differentiating through it. Every activation keeps
its input's dtype; 16-bit inputs are computed in float32 and rounded once
(:func:`trama_jax._numerics.opmath`), as torch does on the CPU: the catalog's half-precision rule.

Settings come checked from the core (:func:`trama.catalog.check_settings`: a bad one raises
:class:`trama.RegistryError`, the same in every framework); an input the op does not accept (an
integer tensor for ``GELU``: torch refuses it) raises :class:`trama.ExecutionError` naming the op
and the node, while ``jax.jit`` traces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from trama import Node, Parameter
from trama.catalog import check_settings
from trama_jax._numerics import accumulation, opmath
from trama_jax._registry import implements
from trama_jax._slots import Site
from trama_jax.functions import wrap_dim
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

_Formula = Callable[[jax.Array], jax.Array]


def _elementwise(node: Node, formula: _Formula) -> JaxKernel:
    """A kernel applying ``formula`` to a floating ``x`` (see :meth:`Site.floating`), in float32
    for a 16-bit ``x`` and rounded once (:func:`~trama_jax._numerics.opmath`)."""
    site = Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": opmath(formula, site.floating(inputs))}

    return JaxKernel(apply)


@implements("ReLU", "relu")
def relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``max(x, 0)``. Integer tensors are accepted and keep their dtype, as in torch; bools are
    refused, as torch refuses them. NaN stays NaN."""
    site = Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = jnp.asarray(inputs["x"])
        if x.dtype == jnp.bool_:
            raise site.fail(f"x must be a numeric tensor, got dtype {x.dtype}")
        return {"y": jax.nn.relu(x)}

    return JaxKernel(apply)


@implements("LeakyReLU", "leaky_relu")
def leaky_relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` where ``x ≥ 0``, else ``negative_slope · x``. Written with ``x > 0``, which gives the
    same values (both branches are 0 at 0) and torch's derivative at 0, ``negative_slope``
    (``jax.nn.leaky_relu`` gives 1 there)."""
    slope = check_settings(node, parameters).number("negative_slope")
    return _elementwise(node, lambda x: jnp.where(x > 0, x, x * slope))


@implements("GELU", "gelu")
def gelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The Gaussian error linear unit, exact (``erf``) or with torch's tanh approximation, whose
    constants ``jax.nn.gelu(approximate=True)`` shares."""
    approximate = check_settings(node, parameters).text("approximate")
    return _elementwise(node, lambda x: jax.nn.gelu(x, approximate=approximate == "tanh"))


@implements("SiLU", "silu")
def silu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x · σ(x)``."""
    return _elementwise(node, jax.nn.silu)


@implements("Sigmoid", "sigmoid")
def sigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``1 / (1 + exp(−x))``, without overflow for large ``|x|``."""
    return _elementwise(node, jax.nn.sigmoid)


@implements("Tanh", "tanh")
def tanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``tanh(x)``."""
    return _elementwise(node, jnp.tanh)


def _softmax_axis(dim: int | None, ndim: int, site: Site) -> int:
    """The dimension normalized: ``dim`` wrapped, or torch's legacy choice when it is null
    (0 for 0, 1 or 3 dimensions, else 1)."""
    if dim is None:
        return 0 if ndim in (0, 1, 3) else 1
    return wrap_dim(dim, ndim, site)


def _softmax_kernel(node: Node, parameters: Mapping[str, Parameter], normalize: Callable[..., jax.Array]) -> JaxKernel:
    """Softmax or log-softmax along ``dim`` (a 0-d ``x`` is a row of one element, as in torch),
    computed in float32 for 16-bit inputs and rounded once."""
    dim, site = check_settings(node, parameters).optional_integer("dim"), Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = site.floating(inputs)
        axis = _softmax_axis(dim, x.ndim, site)
        row = x.reshape(1) if x.ndim == 0 else x
        y = normalize(row.astype(accumulation(x.dtype)), axis=axis)
        return {"y": y.reshape(x.shape).astype(x.dtype)}

    return JaxKernel(apply)


@implements("Softmax", "softmax")
def softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``exp(x − m) / Σ exp(x − m)`` along ``dim``."""
    return _softmax_kernel(node, parameters, jax.nn.softmax)


@implements("LogSoftmax", "log_softmax")
def log_softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x − m − log Σ exp(x − m)`` along ``dim``: never the log of a rounded-to-0 softmax."""
    return _softmax_kernel(node, parameters, jax.nn.log_softmax)


@implements("Softplus", "softplus")
def softplus(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``log(1 + exp(βx)) / β``, or ``x`` where ``βx > threshold``. ``jax.nn.softplus`` is the
    overflow-free ``logaddexp(βx, 0)``, so a large ``threshold`` is no problem."""
    settings = check_settings(node, parameters)
    beta, threshold = settings.number("beta"), settings.number("threshold")

    def formula(x: jax.Array) -> jax.Array:
        z = x * jnp.asarray(beta, x.dtype)
        return jnp.where(z > threshold, x, jax.nn.softplus(z) / jnp.asarray(beta, x.dtype))

    return _elementwise(node, formula)


@implements("ELU", "elu")
def elu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` where ``x > 0``, else ``α(exp(x) − 1)``, with ``expm1`` for accuracy near 0."""
    alpha = check_settings(node, parameters).number("alpha")
    return _elementwise(node, lambda x: jax.nn.elu(x, alpha))


@implements("Hardswish", "hardswish")
def hardswish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x · min(max(x + 3, 0), 6) / 6``."""
    return _elementwise(node, jax.nn.hard_swish)


# --- Opset 2 ----------------------------------------------------------------------------------
#
# A setting compared with ``x`` (a clamp's bounds, a threshold, ``lambd``) is a Python float,
# which JAX's weak typing converts to the dtype the formula computes in before comparing: the same
# number torch's kernels compare with (float32's ``0.1``, not float64's; float32's for a 16-bit
# ``x`` too, which :func:`_elementwise` computes in float32). ``Hardshrink`` is the exception: torch
# rounds its ``lambd`` to ``x``'s own dtype.


def _clamp(node: Node, low: float, high: float) -> JaxKernel:
    """``min(max(x, low), high)``; ``jnp.clip`` keeps NaN."""
    return _elementwise(node, lambda x: jnp.clip(x, low, high))


@implements("ReLU6", "relu6")
def relu6(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``min(max(x, 0), 6)``."""
    check_settings(node, parameters)
    return _clamp(node, 0.0, 6.0)


@implements("Hardtanh", "hardtanh")
def hardtanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``min(max(x, min_val), max_val)`` (the order of the bounds is checked by the core)."""
    settings = check_settings(node, parameters)
    return _clamp(node, settings.number("min_val"), settings.number("max_val"))


@implements("Hardsigmoid", "hardsigmoid")
def hardsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``min(max(x + 3, 0), 6) / 6``, which ``jax.nn.hard_sigmoid`` computes as ``relu6(x + 3) / 6``."""
    return _elementwise(node, jax.nn.hard_sigmoid)


@implements("Mish", "mish")
def mish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x · tanh(softplus(x))`` (``jax.nn.mish``; ``−inf`` gives NaN, as in torch)."""
    return _elementwise(node, jax.nn.mish)


def _prelu(x: jax.Array, slopes: jax.Array, site: Site) -> jax.Array:
    """``x`` where ``x > 0``, else ``w · x`` with ``w`` the slope of the element's channel
    (dimension 1; one channel below 2 dimensions): one slope for all, or one per channel."""
    channels = x.shape[1] if x.ndim >= 2 else 1
    if slopes.ndim > 1 or slopes.size not in (1, channels):
        raise site.fail(
            f"weight has shape {list(slopes.shape)}; it must hold 1 value or one per channel "
            f"({channels}, x.shape[1] of x {list(x.shape)})"
        )
    w = slopes.reshape(() if slopes.size == 1 else (-1, *[1] * (x.ndim - 2))).astype(accumulation(x.dtype))
    return opmath(lambda wide: jnp.where(wide > 0, wide, w * wide), x)


@implements("PReLU")
def prelu_module(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The module: its ``weight`` slot ``[num_parameters]`` (an argument of ``apply``, so that it
    can be trained), used in ``x``'s dtype."""
    settings, site = check_settings(node, parameters), Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = site.floating(inputs)
        return {"y": _prelu(x, jnp.asarray(tensors["weight"]).astype(x.dtype), site)}

    return JaxKernel(apply, settings.tensors)


@implements("prelu")
def prelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The function: the weight on its port, 0-d or 1-d, of ``x``'s dtype (torch does not promote)."""
    check_settings(node, parameters)
    site = Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = site.floating(inputs)
        weight = jnp.asarray(inputs["weight"])
        if weight.dtype != x.dtype:
            raise site.fail(f"weight has dtype {weight.dtype}, but x has {x.dtype}; they must be the same")
        return {"y": _prelu(x, weight, site)}

    return JaxKernel(apply)


@implements("SELU", "selu")
def selu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``scale · x`` where ``x > 0``, else ``scale · α · (exp(x) − 1)``: ``jax.nn.selu``, whose
    constants are torch's."""
    return _elementwise(node, jax.nn.selu)


@implements("CELU", "celu")
def celu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` where ``x > 0``, else ``α · (exp(x / α) − 1)`` (α ≠ 0 is checked by the core)."""
    alpha = check_settings(node, parameters).number("alpha")
    return _elementwise(node, lambda x: jnp.where(x > 0, x, alpha * jnp.expm1(jnp.minimum(x, 0) / alpha)))


@implements("GLU", "glu")
def glu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``a · σ(b)``, ``a`` and ``b`` the halves of ``x`` along ``dim``."""
    dim, site = check_settings(node, parameters).integer("dim"), Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = site.floating(inputs)
        if x.ndim == 0:
            raise site.fail("x is 0-d, which has no dimension to halve")
        axis = wrap_dim(dim, x.ndim, site)
        if x.shape[axis] % 2:
            raise site.fail(f"x has size {x.shape[axis]} along dim {dim}, which must be even")
        a, b = jnp.split(x, 2, axis=axis)
        return {"y": opmath(lambda wide: wide * jax.nn.sigmoid(b.astype(wide.dtype)), a)}

    return JaxKernel(apply)


@implements("LogSigmoid", "logsigmoid")
def logsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``log σ(x) = −softplus(−x)`` (``jax.nn.log_sigmoid``: no overflow)."""
    return _elementwise(node, jax.nn.log_sigmoid)


@implements("Softsign", "softsign")
def softsign(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x / (1 + |x|)``."""
    return _elementwise(node, jax.nn.soft_sign)


@implements("Tanhshrink", "tanhshrink")
def tanhshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x − tanh(x)``."""
    return _elementwise(node, lambda x: x - jnp.tanh(x))


@implements("Hardshrink", "hardshrink")
def hardshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """0 where ``−lambd ≤ x ≤ lambd``, else ``x`` (NaN fails both tests, so it stays NaN);
    ``lambd`` is rounded to ``x``'s dtype, also a 16-bit one, as torch's kernel rounds it."""
    lambd = check_settings(node, parameters).number("lambd")
    site = Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = site.floating(inputs)
        bound = jnp.asarray(lambd, x.dtype)
        return {"y": jnp.where((x >= -bound) & (x <= bound), jnp.zeros_like(x), x)}

    return JaxKernel(apply)


@implements("Softshrink", "softshrink")
def softshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x ∓ lambd`` beyond ``±lambd``, else ``x · 0`` (a signed zero; NaN stays NaN)."""
    lambd = check_settings(node, parameters).number("lambd")
    return _elementwise(node, lambda x: jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0)))


@implements("Threshold", "threshold")
def threshold(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``value`` where ``x ≤ threshold``, else ``x``."""
    settings = check_settings(node, parameters)
    limit, value = settings.number("threshold"), settings.number("value")
    return _elementwise(node, lambda x: jnp.where(x <= limit, jnp.asarray(value, x.dtype), x))


@implements("Softmin", "softmin")
def softmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``softmax(−x)`` along ``dim``."""
    return _softmax_kernel(node, parameters, lambda row, axis: jax.nn.softmax(-row, axis=axis))
