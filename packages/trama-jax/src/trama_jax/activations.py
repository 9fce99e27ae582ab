"""JAX kernels for the catalog's activations (``docs/ops.md``, section *Activations*).

Each activation has one factory, registered under both of its names (the module ``ReLU`` and the
function ``relu`` mean the same), so the two forms cannot drift apart.

The formulas are ``jax.nn``'s where it has them, because those are written for differentiation:
``relu``'s derivative at 0 is 0 (torch's choice), ``elu`` and ``softplus`` never evaluate an
``exp`` that overflows in the branch ``where`` discards (which would turn the gradient into NaN),
and ``softmax`` subtracts the maximum without differentiating through it. Every activation keeps
its input's dtype and computes in it, as torch's kernels do for float32; 16-bit inputs of the
exponential ones (softmax, log-softmax) are computed in float32 and rounded once, as torch does on
the CPU.

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
from trama_jax._numerics import accumulation
from trama_jax._registry import implements
from trama_jax._slots import Site
from trama_jax.functions import wrap_dim
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

_Formula = Callable[[jax.Array], jax.Array]


def _elementwise(node: Node, formula: _Formula) -> JaxKernel:
    """A kernel applying ``formula`` to a floating ``x`` (see :meth:`Site.floating`)."""
    site = Site(node)

    def apply(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": formula(site.floating(inputs))}

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
