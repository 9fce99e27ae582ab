"""The few ``torch.nn`` subclasses that import builds, and the functions that the function ops
call, where torch's own ``forward`` does not compute the catalog's result silently.

torch 2.13 departs from its own documented semantics in six places that a document can reach:

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
* ``AvgPool3d`` has no CPU kernel for float16 and bfloat16 (``"avg_pool3d_out_frame" not
  implemented``); the catalog's half-precision rule (compute in float32, round once) is what
  torch's CUDA kernel does, so a 16-bit input is pooled in float32 here (:func:`half_in_float32`).
* ``Conv3d`` in bfloat16 on the CPU gives wrong values for some grouped, strided convolutions
  (groups 2, stride 2 along a dimension of 3 or 4 whose output is one wide: errors of the order of
  the values themselves; float16 and float32 are right). A bfloat16 convolution on the CPU is
  computed in float32 and rounded once here (:func:`conv3d`), the catalog's half-precision rule.
* ``F.batch_norm`` by the batch's statistics in bfloat16 rounds the batch mean to bfloat16 before
  it subtracts it, so a channel whose spread is small against its mean comes out 10% off
  (``[-1.5134, -1.5854]`` normalizes to ``[0.887, -1.109]`` instead of ``±0.996``). The function
  op ``batch_norm`` with ``training`` true computes a 16-bit input in float32 and rounds once
  (:func:`batch_norm`), the catalog's rule. The ``BatchNorm`` modules stay torch's own classes
  (a module without running statistics keeps torch's rounding): they are in every CNN, and an
  imported model holds ``nn.BatchNorm2d`` itself.

Each class keeps its base's name (so ``repr`` reads as torch's), constructor, state and
``extra_repr``; only ``forward`` changes, and only where torch would go wrong or warn.
:mod:`trama_torch.leaves` counts them as their base's op, so they export as the catalog op again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "AvgPool3d",
    "Conv3d",
    "LogSoftmax",
    "MultiheadAttention",
    "Softmax",
    "TransformerEncoderLayer",
    "batch_norm",
    "conv3d",
    "half_in_float32",
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


#: The 16-bit floating dtypes, which the catalog computes in float32 (``docs/ops.md``, "Half precision").
_HALF = (torch.float16, torch.bfloat16)


def half_in_float32(function: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``function(x)``, computed in float32 and rounded once to ``x``'s dtype when that is float16
    or bfloat16: for the few torch kernels that have no 16-bit CPU implementation."""
    if x.dtype in _HALF:
        return function(x.float()).to(x.dtype)
    return function(x)


class AvgPool3d(nn.AvgPool3d):
    """``nn.AvgPool3d`` that pools a 16-bit input in float32 (see :func:`half_in_float32`)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return half_in_float32(super().forward, input)


def _bfloat16_on_cpu(x: torch.Tensor) -> bool:
    return x.dtype == torch.bfloat16 and x.device.type == "cpu"


def conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> torch.Tensor:
    """``F.conv3d``, in float32 and rounded once for bfloat16 on the CPU (see the module docstring)."""
    if _bfloat16_on_cpu(x):
        wide = None if bias is None else bias.float()
        return F.conv3d(x.float(), weight.float(), wide, stride, padding, dilation, groups).to(x.dtype)
    return F.conv3d(x, weight, bias, stride, padding, dilation, groups)


class Conv3d(nn.Conv3d):
    """``nn.Conv3d`` that convolves a bfloat16 input on the CPU in float32 (see :func:`conv3d`)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if _bfloat16_on_cpu(input):
            bias = None if self.bias is None else self.bias.float()
            y: torch.Tensor = self._conv_forward(input.float(), self.weight.float(), bias)
            return y.to(input.dtype)
        return super().forward(input)


def batch_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> torch.Tensor:
    """``F.batch_norm`` by the batch's statistics (no running statistics: the catalog's
    ``batch_norm`` with ``training`` true), of a 16-bit ``x`` in float32 and rounded once (see the
    module docstring)."""
    if x.dtype not in _HALF:
        return F.batch_norm(x, None, None, weight, bias, True, 0.0, eps)
    wide = [None if value is None else value.float() for value in (weight, bias)]
    return F.batch_norm(x.float(), None, None, wide[0], wide[1], True, 0.0, eps).to(x.dtype)


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
