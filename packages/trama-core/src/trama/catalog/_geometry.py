"""The catalog's shape rules that every framework's kernels share: which layouts an input may have,
how far padding may reflect or wrap, where a pool's windows lie and what its divisors are, how an
attention's masks line up with its scores.

These depend on the input's shape, so they run when a kernel is called, not when a node is
checked; they are here, once, because they are the catalog's rules rather than any framework's
(``docs/ops.md`` states them). Everything is plain Python and numpy on shapes: a JAX kernel calls
it while tracing, where shapes are static. A shape that does not fit raises ``ValueError`` with a
message about the input alone; kernels re-raise it as their framework's error naming the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from trama.catalog._promotion import is_floating
from trama.catalog._reader import Settings

__all__ = [
    "PAD_MODES",
    "PoolWindows",
    "adaptive_windows",
    "channels_first",
    "check_pad_room",
    "flattened_shape",
    "merged_attention_mask",
    "pool_output_size",
]

#: Each ``padding_mode`` of the catalog's convolutions and the ``numpy.pad`` mode (which
#: ``jax.numpy.pad`` shares) that computes the same values.
PAD_MODES: Mapping[str, Literal["constant", "reflect", "edge", "wrap"]] = {
    "zeros": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}


def channels_first(shape: Sequence[int], dims: int, channels: int) -> bool:
    """Whether ``x`` of ``shape`` is batched, ``[N, C, *S]`` with ``dims`` spatial dimensions,
    rather than ``[C, *S]``; either way ``C`` must be ``channels``."""
    if len(shape) not in (dims + 1, dims + 2):
        raise ValueError(f"x should have {dims + 1} or {dims + 2} dimensions, got shape {list(shape)}")
    batched = len(shape) == dims + 2
    found = shape[1] if batched else shape[0]
    if found != channels:
        raise ValueError(f"x has {found} channels (shape {list(shape)}), expected {channels}")
    return batched


def flattened_shape(shape: Sequence[int], start_dim: int, end_dim: int) -> tuple[int, ...]:
    """``shape`` with dimensions ``start_dim`` … ``end_dim`` (inclusive, negative counting from
    the end) merged into one, as the ``Flatten`` module does; torch treats a 0-d tensor as 1-d
    here, so flattening it gives ``[1]``."""
    rank = max(len(shape), 1)
    start = start_dim + rank if start_dim < 0 else start_dim
    end = end_dim + rank if end_dim < 0 else end_dim
    if not (0 <= start < rank and 0 <= end < rank):
        raise ValueError(f"start_dim {start_dim} or end_dim {end_dim} is out of range for shape {list(shape)}")
    if start > end:
        raise ValueError(f"start_dim {start_dim} comes after end_dim {end_dim} for shape {list(shape)}")
    sizes = tuple(shape) or (1,)
    return (*sizes[:start], math.prod(sizes[start : end + 1]), *sizes[end + 1 :])


def check_pad_room(mode: str, pads: Sequence[tuple[int, int]], sizes: Sequence[int]) -> None:
    """torch refuses a reflection as wide as the dimension and a wrap wider than it (``numpy.pad``
    would reflect or wrap more than once instead): so does the catalog."""
    for size, (before, after) in zip(sizes, pads, strict=True):
        widest = max(before, after)
        if mode == "reflect" and widest >= size:
            raise ValueError(f"reflect padding of {widest} needs more than that many elements, got {size}")
        if mode == "circular" and widest > size:
            raise ValueError(f"circular padding of {widest} needs at least that many elements, got {size}")


def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """The catalog's (and torch's) output size of a pooled dimension; ≤ 0 when no window fits."""
    room = size + 2 * padding - (dilation * (kernel - 1) + 1)
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:  # the last window starts in the padding
        out -= 1
    return out


@dataclass(frozen=True, slots=True)
class PoolWindows:
    """The windows of a 2-d pool (``MaxPool2d``, ``AvgPool2d``), from its checked settings."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool

    @classmethod
    def of(cls, settings: Settings) -> PoolWindows:
        """The windows a pool's settings describe (``AvgPool2d`` has no dilation: 1)."""
        dilation = settings.integers("dilation") if "dilation" in settings else (1, 1)
        return cls(
            settings.integers("kernel_size"),
            settings.integers("stride"),  # null in the document: the kernel size
            settings.integers("padding"),
            dilation,
            settings.flag("ceil_mode"),
        )

    @property
    def spans(self) -> tuple[int, ...]:
        """How many input positions a window covers per dimension, dilation included."""
        return tuple(d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation, strict=True))

    def fit(self, shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """For ``x`` ``[N, C, H, W]`` or ``[C, H, W]``: the output sizes of H and W, and how much
        to pad each of them before and after. The end is padded as far as the last window reaches
        (in ceil mode it may pass the catalog's padding), with the value the pool ignores."""
        if len(shape) not in (3, 4):
            raise ValueError(f"x should be [N, C, H, W] or [C, H, W], got shape {list(shape)}")
        sizes = shape[-2:]
        geometry = zip(sizes, self.kernel, self.stride, self.padding, self.dilation, strict=True)
        out = tuple(pool_output_size(*g, self.ceil_mode) for g in geometry)
        if min(out) <= 0:
            raise ValueError(f"x of shape {list(shape)} is too small for the window: output size {list(out)}")
        ends = (
            max((o - 1) * s + span - size - p, 0)
            for o, s, span, size, p in zip(out, self.stride, self.spans, sizes, self.padding, strict=True)
        )
        return out, tuple(zip(self.padding, ends, strict=True))

    def divisors(self, sizes: Sequence[int], out: Sequence[int], count_include_pad: bool) -> npt.NDArray[np.int64]:
        """``AvgPool2d``'s divisor of each output, ``[out_h, out_w]``: the product over both
        dimensions of the window clipped to the end padding (``e − s``) with
        ``count_include_pad``, else of the number of its positions inside ``x``."""
        counts = []
        for d in range(2):
            start = np.arange(out[d], dtype=np.int64) * self.stride[d] - self.padding[d]
            end = np.minimum(start + self.kernel[d], sizes[d] + self.padding[d])
            counts.append(end - start if count_include_pad else np.minimum(end, sizes[d]) - np.maximum(start, 0))
        return np.outer(counts[0], counts[1])


def adaptive_windows(size: int, out: int | None) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """``AdaptiveAvgPool2d``'s windows along a dimension of ``size`` with ``out`` outputs
    (``None``: as many as inputs): ``M[i, j]`` true when input position j lies in output i's
    window ``⌊i·S/O⌋ … ⌈(i+1)·S/O⌉ − 1``, and each window's size. ``M · x`` sums every window in
    one matrix product, overlapping and uneven windows alike."""
    out = size if out is None else out
    index = np.arange(out)
    start = index * size // out
    end = -(-(index + 1) * size // out)
    position = np.arange(size)
    member: npt.NDArray[np.bool_] = (position >= start[:, np.newaxis]) & (position < end[:, np.newaxis])
    counts: npt.NDArray[np.int64] = (end - start).astype(np.int64)
    return member, counts


def merged_attention_mask(
    xp: Any,
    attn_mask: Any,
    key_padding_mask: Any,
    scores: tuple[int, int, int, int],
    dtype: Any,
    *,
    batched: bool,
    extra_keys: int,
) -> Any:
    """An attention's two optional masks as one additive mask broadcastable to the scores
    ``[N, H, L, S + extra_keys]``, or ``None`` when neither is given (``docs/ops.md``, steps 2,
    4 and 5 of ``MultiheadAttention``); ``scores`` is ``(N, H, L, S)``.

    ``xp`` is the array namespace the kernel computes with (``numpy`` or ``jax.numpy``, which
    share these functions). A bool mask is −∞ where true ("may not attend") and 0 where false; a
    floating one is added as it is, in ``dtype``. ``attn_mask`` is ``[L, S]``, or ``[N·H, L, S]``
    indexed by ``n·H + h``; ``key_padding_mask`` is ``[N, S]`` (``[S]`` unbatched). The two are
    added, as torch merges them, and the ``extra_keys`` appended key positions get 0 columns.
    Raises ``ValueError`` for a mask of another shape or dtype.
    """
    n, heads, length, source = scores
    merged = None
    if attn_mask is not None:
        if tuple(xp.shape(attn_mask)) == (length, source):
            layout: tuple[int, ...] = (1, 1, length, source)
        elif tuple(xp.shape(attn_mask)) == (n * heads, length, source):
            layout = (n, heads, length, source)
        else:
            expected = f"{[length, source]} or {[n * heads, length, source]}"
            raise ValueError(f"attn_mask has shape {list(xp.shape(attn_mask))}, expected {expected}")
        merged = _additive(xp, attn_mask, "attn_mask", dtype).reshape(layout)
    if key_padding_mask is not None:
        expected_shape = (n, source) if batched else (source,)
        if tuple(xp.shape(key_padding_mask)) != expected_shape:
            shape = list(xp.shape(key_padding_mask))
            raise ValueError(f"key_padding_mask has shape {shape}, expected {list(expected_shape)}")
        mask = _additive(xp, key_padding_mask, "key_padding_mask", dtype).reshape(n, 1, 1, source)
        merged = mask if merged is None else merged + mask
    if merged is not None and extra_keys:
        merged = xp.pad(merged, [(0, 0)] * (merged.ndim - 1) + [(0, extra_keys)])
    return merged


def _additive(xp: Any, mask: Any, name: str, dtype: Any) -> Any:
    array = xp.asarray(mask)
    if array.dtype == np.bool_:
        return xp.where(array, xp.asarray(-np.inf, dtype=dtype), xp.asarray(0, dtype=dtype))
    if xp.issubdtype(array.dtype, xp.floating) or is_floating(array.dtype):  # numpy's bfloat16 is no xp.floating
        return array.astype(dtype)
    raise ValueError(f"{name} must be bool or floating point (as in torch), got {array.dtype}")
