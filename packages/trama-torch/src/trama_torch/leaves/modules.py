"""The few ``torch.nn`` subclasses that import builds where torch's own ``forward`` does not compute
the catalog's result silently.

torch 2.13 departs from its own documented semantics in three places that a document can reach:

* ``TransformerEncoderLayer``'s eval fast path (``torch._transformer_encoder_layer_fwd``), given a
  ``src_key_padding_mask``, reads the float masks (the padding mask, and ``src_mask`` merged with
  it) as if they were boolean: any nonzero entry masks, so an additive ``0.3`` masks instead of
  adding, and a row of nonzero entries comes out NaN. The slow path (the one torch takes in
  training, or for an unbatched input) adds the masks, as the catalog says and as numpy and JAX do.
* One bool and one float mask (``attn_mask`` with ``key_padding_mask``) give the right values, but
  torch warns that mixing them is deprecated. A bool mask is the additive mask with ``-inf`` where
  it is true and ``0`` elsewhere (torch converts it so itself), so converting it first gives the
  same numbers without the warning.
* ``Softmax``/``LogSoftmax`` with ``dim=None`` pick torch's legacy implicit dimension with a
  deprecation warning; the catalog defines that same dimension, so it is computed here instead.

Each class keeps its base's name (so ``repr`` reads as torch's), constructor, state and
``extra_repr``; only ``forward`` changes, and only where torch would go wrong or warn.
:mod:`trama_torch.leaves` counts them as their base's op, so they export as the catalog op again.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "LogSoftmax",
    "MultiheadAttention",
    "Softmax",
    "TransformerEncoderLayer",
    "implicit_softmax_dim",
    "matched_masks",
]


def implicit_softmax_dim(rank: int) -> int:
    """The catalog's (and torch's legacy) dimension of a softmax whose ``dim`` is null, for an input
    of ``rank`` dimensions: 0 for 0, 1 or 3 dimensions, else 1."""
    return 0 if rank in (0, 1, 3) else 1


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask as the additive mask torch would convert it to: ``-inf`` where true, else 0."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, float("-inf"))


def matched_masks(
    first: torch.Tensor | None, second: torch.Tensor | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Two attention masks of one kind: when one is bool and the other float, the bool one becomes
    the float one's additive form (same values, and torch's mismatched-masks warning never fires)."""
    if first is None or second is None or first.dtype == second.dtype:
        return first, second
    if first.dtype == torch.bool and second.is_floating_point():
        return _additive(first, second.dtype), second
    if second.dtype == torch.bool and first.is_floating_point():
        return first, _additive(second, first.dtype)
    return first, second


def _boolean_in_effect(mask: torch.Tensor) -> bool:
    """Whether a mask is bool, or float holding only ``0`` and ``-inf``: the values that mean the
    same read as bool (nonzero masks) and added."""
    return mask.dtype == torch.bool or bool(((mask == 0) | torch.isneginf(mask)).all())


class Softmax(nn.Softmax):
    """``nn.Softmax`` whose null ``dim`` is resolved here, without torch's deprecation warning."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.softmax(input, implicit_softmax_dim(input.dim()) if self.dim is None else self.dim)


class LogSoftmax(nn.LogSoftmax):
    """``nn.LogSoftmax`` whose null ``dim`` is resolved here, without torch's deprecation warning."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(input, implicit_softmax_dim(input.dim()) if self.dim is None else self.dim)


class MultiheadAttention(nn.MultiheadAttention):
    """``nn.MultiheadAttention`` given masks of one kind (see :func:`matched_masks`)."""

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        key_padding_mask, attn_mask = matched_masks(key_padding_mask, attn_mask)
        return super().forward(
            query,
            key,
            value,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )


class TransformerEncoderLayer(nn.TransformerEncoderLayer):
    """``nn.TransformerEncoderLayer`` given masks of one kind, that takes torch's slow path when a
    padding mask is given with a float mask that is not boolean in effect (torch's fast path would
    read it as bool; see the module docstring). Otherwise torch's forward runs, fast path included."""

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        src_mask, src_key_padding_mask = matched_masks(src_mask, src_key_padding_mask)
        if src_key_padding_mask is not None and not (
            _boolean_in_effect(src_key_padding_mask) and (src_mask is None or _boolean_in_effect(src_mask))
        ):
            return self._additive_forward(src, src_mask, src_key_padding_mask, is_causal)
        return super().forward(src, src_mask, src_key_padding_mask, is_causal)

    def _additive_forward(
        self, src: torch.Tensor, src_mask: torch.Tensor | None, padding: torch.Tensor, is_causal: bool
    ) -> torch.Tensor:
        """torch's own slow path (the end of ``TransformerEncoderLayer.forward``), which adds the
        masks: pre- or post-norm self-attention and feed-forward blocks with residuals."""
        x: torch.Tensor = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, padding, is_causal=is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, padding, is_causal=is_causal))
        y: torch.Tensor = self.norm2(x + self._ff_block(x))
        return y
