"""Conformance cases of the catalog's attention ops (merged into ``conformance_cases.CASES``).

``scaled_dot_product_attention`` is drawn over its whole settings space: ranks 2 to 4, batch
dimensions that broadcast between query, key and value (sizes of 1, missing leading dimensions),
grouped heads, bool and float masks of every rank that broadcasts to the scores, causal masks
with L ≠ S, explicit, null and default scales, and the empty sizes (L, S, E or Ev of 0).

Masks that exclude every key of a row are generated on purpose (a bool row of false, a float row
of −∞), because the catalog fixes that result (a row of zeros, torch's CPU behaviour), so the
suite asserts it. Values are standard normal: softmax of scores of order 1 is well conditioned,
and float32 agrees to the default 1e-5.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from conformance_support import Case, Tolerance
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

__all__ = ["CASES", "TOLERANCES"]

Shape = tuple[int, ...]


def _rng(draw: DrawFn) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _floats(gen: np.random.Generator, shape: Shape) -> np.ndarray:
    return np.asarray(gen.standard_normal(shape), dtype=np.float32)


def _sizes(draw: DrawFn) -> list[int]:
    """L, S, E and Ev: 1 to 4, and in one case in six one of them 0 (the empty edges: torch's
    early return for L, S or Ev, an empty sum for E)."""
    sizes = [draw(st.integers(1, 4)) for _ in range(4)]
    if draw(st.integers(0, 5)) == 0:
        sizes[draw(st.integers(0, 3))] = 0
    return sizes


def _partner(draw: DrawFn, batch: Shape) -> Shape:
    """Batch dimensions that broadcast with ``batch`` without changing it: a suffix of it (missing
    leading dimensions), some sizes replaced by 1."""
    keep = draw(st.integers(0, len(batch)))
    return tuple(1 if draw(st.booleans()) else size for size in batch[len(batch) - keep :])


def _mask(draw: DrawFn, gen: np.random.Generator, scores: Shape) -> np.ndarray:
    """A bool mask (true: takes part) or a float mask, of a shape that broadcasts to ``scores``
    (at least two dimensions, as torch requires); sometimes with rows that exclude every key."""
    mask_batch = _partner(draw, scores[:-2])
    rows = 1 if draw(st.integers(0, 3)) == 0 else scores[-2]
    columns = 1 if draw(st.integers(0, 3)) == 0 else scores[-1]
    shape = (*mask_batch, rows, columns)
    whole_rows = draw(st.integers(0, 3)) == 0
    if draw(st.booleans()):
        mask = gen.random(shape) < 0.7
        if whole_rows and mask.size:
            mask[..., gen.integers(0, rows), :] = False
        return np.asarray(mask)
    additive = _floats(gen, shape)
    if draw(st.booleans()):
        additive[gen.random(shape) < 0.3] = -np.inf
    if whole_rows and additive.size:
        additive[..., gen.integers(0, rows), :] = -np.inf
    return additive


@st.composite
def scaled_dot_product_attention(draw: DrawFn) -> Case:
    """Broadcast batch dimensions, grouped heads, masks, causal, scale and empty sizes."""
    gen = _rng(draw)
    gqa = draw(st.booleans())
    length, source, width, value_width = _sizes(draw)
    if gqa:
        key_heads = draw(st.integers(1, 2))
        value_heads = draw(st.sampled_from([key_heads, 1, 2]))
        heads = key_heads * value_heads * draw(st.integers(1, 2))
        outer = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
        q_batch: Shape = (*outer, heads)
        k_batch: Shape = (*_partner(draw, outer), key_heads)
        v_batch: Shape = (*_partner(draw, outer), value_heads)
        scores_batch: Shape = tuple(np.broadcast_shapes(q_batch, (*k_batch[:-1], heads)))
    else:
        batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        q_batch, k_batch, v_batch = (_partner(draw, batch) for _ in range(3))
        if draw(st.booleans()):
            q_batch = batch  # the common case: query carries every batch dimension
        scores_batch = tuple(np.broadcast_shapes(q_batch, k_batch))
    inputs: dict[str, Any] = {
        "query": _floats(gen, (*q_batch, length, width)),
        "key": _floats(gen, (*k_batch, source, width)),
        "value": _floats(gen, (*v_batch, source, value_width)),
    }
    slots: dict[str, Any] = {}
    if gqa or draw(st.booleans()):
        slots["enable_gqa"] = gqa
    kind = draw(st.sampled_from(["none", "mask", "causal"]))
    if kind == "mask":
        inputs["attn_mask"] = _mask(draw, gen, (*scores_batch, length, source))
    if kind == "causal" or draw(st.booleans()):
        slots["is_causal"] = kind == "causal"
    scale = draw(st.sampled_from(["absent", None, 0.125, 0.5, 1.0, 2.0, -0.75, 0.0]))
    if scale != "absent":
        slots["scale"] = scale
    if draw(st.booleans()):
        slots["dropout_p"] = 0.0
    return Case("scaled_dot_product_attention", inputs, slots)


#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    "scaled_dot_product_attention": scaled_dot_product_attention(),
}

#: Documented tolerance exceptions of the family's ops (each says why): none, float32 agrees to 1e-5.
TOLERANCES: dict[str, Tolerance] = {}
