"""jax kernels of the catalog's attention ops (:mod:`trama.catalog.attention`).

``scaled_dot_product_attention`` is written in plain ``jnp`` rather than with
``jax.nn.dot_product_attention``: the catalog fixes details that function does not promise
(a row whose every key is masked gives 0, the scores' broadcasting over batch dimensions of
different ranks, torch's top-left causal alignment for L ≠ S), and every one of them is a line
here. Products run at ``Precision.HIGHEST`` and 16-bit inputs are computed in float32 and rounded
once (:mod:`trama_jax._numerics`), as torch's CPU kernels do. Shapes are static under ``jax.jit``,
so every shape rule is checked while tracing and a violation is an
:class:`trama.ExecutionError` naming the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node, Parameter
from trama.catalog import check_settings
from trama_jax._numerics import HIGHEST, accumulation
from trama_jax._registry import implements
from trama_jax._slots import Inputs, Outputs, Site, Tensors
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []


def _batch(site: Site, shapes: Sequence[tuple[int, ...]], what: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise site.fail(f"the batch dimensions of {what} do not broadcast: {[list(s) for s in shapes]}") from None


def _grouped(site: Site, array: jax.Array, heads: int, port: str) -> jax.Array:
    """Heads (dimension −3) repeated to the query's, each serving consecutive query heads."""
    own = array.shape[-3]
    if own == 0 or heads % own:
        raise site.fail(f"with enable_gqa the heads of {port} ({own}) must divide the query's ({heads})")
    return jnp.repeat(array, heads // own, axis=-3)


def _safe_softmax(scores: jax.Array) -> jax.Array:
    """Softmax over the last axis; a row that is −∞ everywhere (or empty) gives zeros, as torch's
    ``_safe_softmax``. The maximum of such a row is replaced by 0 before it is subtracted, so no
    ``−∞ − (−∞)`` is ever computed (its NaN would reach a gradient through ``where``)."""
    excluded = jnp.all(scores == -jnp.inf, axis=-1, keepdims=True)
    peak = jnp.max(scores, axis=-1, keepdims=True, initial=-jnp.inf)
    shifted = jnp.exp(scores - jax.lax.stop_gradient(jnp.where(excluded, 0.0, peak)))
    total = jnp.sum(shifted, axis=-1, keepdims=True)
    return jnp.where(excluded, 0.0, shifted / jnp.where(excluded, 1.0, total))


@implements("scaled_dot_product_attention")
def scaled_dot_product_attention(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> JaxKernel:
    """``softmax(q · kᵀ · scale + mask) · v``, rows without any key giving 0."""
    settings, site = check_settings(node, parameters), Site(node)
    causal, gqa = settings.flag("is_causal"), settings.flag("enable_gqa")
    scale_setting = settings.optional_number("scale")

    def apply(tensors: Tensors, inputs: Inputs) -> Outputs:
        q, k, v = (site.floating(inputs, port) for port in ("query", "key", "value"))
        for port, array in (("query", q), ("key", k), ("value", v)):
            if array.ndim < 2:
                raise site.fail(f"{port} must have at least two dimensions, got shape {list(array.shape)}")
        if not q.dtype == k.dtype == v.dtype:
            raise site.fail(f"query, key and value must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
        mask = inputs.get("attn_mask")
        mask = None if mask is None else jnp.asarray(mask)
        if mask is not None and mask.dtype != jnp.bool_ and mask.dtype != q.dtype:
            raise site.fail(f"attn_mask must be bool or of the query's dtype {q.dtype}, got {mask.dtype}")
        if q.shape[-2] == 0 or k.shape[-2] == 0 or v.size == 0:  # torch's early return (see the spec)
            return {"y": jnp.zeros((*q.shape[:-1], v.shape[-1]), q.dtype)}
        if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
            raise site.fail(
                "query [..., L, E], key [..., S, E] and value [..., S, Ev] do not fit: "
                f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
            )
        if gqa:
            for port, array in (("query", q), ("key", k), ("value", v)):
                if array.ndim < 3:
                    raise site.fail(f"with enable_gqa, {port} must have at least three dimensions")
            k, v = _grouped(site, k, q.shape[-3], "key"), _grouped(site, v, q.shape[-3], "value")
        length, source, width = q.shape[-2], k.shape[-2], q.shape[-1]
        batch = _batch(site, [q.shape[:-2], k.shape[:-2]], "query and key")
        _batch(site, [batch, v.shape[:-2]], "the scores and value")
        acc = accumulation(q.dtype)
        if width == 0:  # an empty sum: 0 whatever the scale (even the default 1/√0)
            scores = jnp.zeros((*batch, length, source), acc)
        else:
            scale = 1.0 / math.sqrt(width) if scale_setting is None else scale_setting
            product = jnp.matmul(q, jnp.swapaxes(k, -1, -2), precision=HIGHEST, preferred_element_type=acc)
            scores = product * jnp.asarray(scale, acc)
        if causal:
            scores = jnp.where(jnp.tri(length, source, dtype=bool), scores, -jnp.inf)
        if mask is not None:
            scores = scores + _additive(site, mask, scores.shape, acc)
        weights = _safe_softmax(scores)
        y = jnp.matmul(weights, v.astype(acc), precision=HIGHEST)
        return {"y": y.astype(q.dtype)}

    return JaxKernel(apply, settings.tensors)


def _additive(site: Site, mask: jax.Array, scores: tuple[int, ...], acc: Any) -> jax.Array:
    """``attn_mask`` (bool, or of the query's dtype) as addends in ``acc``: −∞ where a bool mask
    is false, a float mask as it is; it must broadcast to the scores without changing their shape
    (torch adds it in place)."""
    if mask.ndim < 2:
        raise site.fail(f"attn_mask must have at least two dimensions, got shape {list(mask.shape)}")
    try:
        fits = tuple(np.broadcast_shapes(mask.shape, scores)) == tuple(scores)
    except ValueError:
        fits = False
    if not fits:
        raise site.fail(f"attn_mask of shape {list(mask.shape)} does not broadcast to the scores {list(scores)}")
    if mask.dtype == jnp.bool_:
        return jnp.where(mask, jnp.asarray(0.0, acc), jnp.asarray(-jnp.inf, acc))
    return mask.astype(acc)
