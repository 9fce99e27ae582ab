"""numpy kernels of the catalog's attention ops (:mod:`trama.catalog.attention`).

``scaled_dot_product_attention`` is the reference the other frameworks are held to, so it favours
exactness: every floating input is widened to float64, scores, softmax and the weighted sum are
computed there, and the result is rounded once to the query's dtype (within an ulp of the true
value, where torch's float32 kernels are a few ulps off). The shape rules torch applies (batch
dimensions broadcast, a mask that may not enlarge the scores, grouped heads that divide the
query's) are checked when the kernel runs, and a violation is a ``ValueError`` or ``TypeError``
naming the op and the node, never numpy's own message from deep inside.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from trama import Node, Parameter
from trama.catalog import check_settings
from trama.extension import Kernel
from trama_numpy._precision import is_floating
from trama_numpy._registry import implements

__all__ = ["scaled_dot_product_attention"]

Array = npt.NDArray[Any]


def _where(node: Node) -> str:
    return f"{node.op} (node {node.id!r})"


def _batch(shapes: list[tuple[int, ...]], what: str, where: str) -> tuple[int, ...]:
    """The broadcast of batch shapes, or a ``ValueError`` saying which ones clash."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"{where}: the batch dimensions of {what} do not broadcast: {[list(s) for s in shapes]}"
        ) from None


def _grouped(array: Array, heads: int, port: str, where: str) -> Array:
    """``array``'s heads (dimension −3) repeated to ``heads``, each head serving a run of
    consecutive query heads (torch's ``repeat_interleave``)."""
    own = array.shape[-3]
    if own == 0 or heads % own:
        raise ValueError(f"{where}: with enable_gqa the heads of {port} ({own}) must divide the query's ({heads})")
    return np.repeat(array, heads // own, axis=-3)


def safe_softmax(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Softmax over the last axis where a row that is −∞ everywhere (or empty) gives zeros, as
    torch's ``_safe_softmax`` does; a NaN or +∞ still makes its row NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        peak = np.max(scores, axis=-1, keepdims=True, initial=-np.inf)
        excluded = np.all(scores == -np.inf, axis=-1, keepdims=True)
        shifted = np.exp(scores - np.where(excluded, 0.0, peak))
        weights = shifted / np.sum(shifted, axis=-1, keepdims=True)
    return np.where(excluded, 0.0, weights)


@implements("scaled_dot_product_attention")
def scaled_dot_product_attention(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> Kernel:
    """``softmax(q · kᵀ · scale + mask) · v`` in float64, rows without any key giving 0."""
    settings = check_settings(node, parameters)
    causal, gqa = settings.flag("is_causal"), settings.flag("enable_gqa")
    scale_setting = settings.optional_number("scale")
    where = _where(node)

    def kernel(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        q, k, v = (np.asarray(inputs[port]) for port in ("query", "key", "value"))
        for port, array in (("query", q), ("key", k), ("value", v)):
            if not is_floating(array.dtype):
                raise TypeError(f"{where}: {port} must be a floating-point tensor, got dtype {array.dtype}")
            if array.ndim < 2:
                raise ValueError(f"{where}: {port} must have at least two dimensions, got shape {list(array.shape)}")
        if not q.dtype == k.dtype == v.dtype:
            raise TypeError(f"{where}: query, key and value must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
        mask = inputs.get("attn_mask")
        mask = None if mask is None else np.asarray(mask)
        if mask is not None and mask.dtype != np.bool_ and mask.dtype != q.dtype:
            raise TypeError(f"{where}: attn_mask must be bool or of the query's dtype {q.dtype}, got {mask.dtype}")
        if q.shape[-2] == 0 or k.shape[-2] == 0 or v.size == 0:  # torch's early return (see the spec)
            return {"y": np.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)}
        if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"{where}: query [..., L, E], key [..., S, E] and value [..., S, Ev] do not fit: "
                f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
            )
        if gqa:
            for port, array in (("query", q), ("key", k), ("value", v)):
                if array.ndim < 3:
                    raise ValueError(f"{where}: with enable_gqa, {port} must have at least three dimensions")
            k, v = _grouped(k, q.shape[-3], "key", where), _grouped(v, q.shape[-3], "value", where)
        length, source, width = q.shape[-2], k.shape[-2], q.shape[-1]
        batch = _batch([q.shape[:-2], k.shape[:-2]], "query and key", where)
        _batch([batch, v.shape[:-2]], "the scores and value", where)
        q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
        if width == 0:  # an empty sum: 0 whatever the scale (even the default 1/√0)
            scores = np.zeros((*batch, length, source))
        else:
            scale = 1.0 / math.sqrt(width) if scale_setting is None else scale_setting
            scores = np.matmul(q64, np.swapaxes(k64, -1, -2)) * scale
        if causal:
            scores = np.where(np.tri(length, source, dtype=bool), scores, -np.inf)
        if mask is not None:
            scores = scores + _additive(mask, scores.shape, where)
        y = np.matmul(safe_softmax(scores), v64)
        return {"y": y.astype(q.dtype)}

    return kernel


def _additive(mask: Array, scores: tuple[int, ...], where: str) -> npt.NDArray[np.float64]:
    """``attn_mask`` (bool, or of the query's dtype) as float64 addends: −∞ where a bool mask is
    false, a float mask as it is. It must broadcast to the scores' shape without changing it, as
    torch adds it in place."""
    if mask.ndim < 2:
        raise ValueError(f"{where}: attn_mask must have at least two dimensions, got shape {list(mask.shape)}")
    try:
        fits = tuple(np.broadcast_shapes(mask.shape, scores)) == tuple(scores)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{where}: attn_mask of shape {list(mask.shape)} does not broadcast to the scores {list(scores)}"
        )
    if mask.dtype == np.bool_:
        return np.where(mask, 0.0, -np.inf)
    return mask.astype(np.float64)
