"""torch's indexing (``getitem``) as two indexings that numpy's rules, which JAX follows too, get
right: the catalog's placement of advanced dimensions is torch's, not numpy's.

numpy counts an integer item as an advanced index, so ``x[:, [0], :, 0]`` of a ``[5, 6, 7, 8]``
array is ``[1, 5, 7]`` there and ``[5, 1, 7]`` in torch, which removes integer dimensions first.
:func:`torch_index` splits an index accordingly: a first, basic indexing (ints, slices, ``None``;
every tensor item a whole slice over the dimensions it covers) and a second one by the tensor
items alone, at the positions they landed in. With the integers gone, numpy's placement (in
place when the tensor items are adjacent, in front otherwise) is torch's.

Tensor items are arrays of any framework (anything with ``ndim`` and ``dtype``): bools are masks
over as many dimensions as they have, other integers advanced indices; a 0-d integer tensor is a
plain position, as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TorchIndex", "clamped_slice", "index_width", "torch_index"]

_BOOL = np.dtype(np.bool_)


def _is_tensor(item: Any) -> bool:
    return hasattr(item, "ndim") and hasattr(item, "dtype")


def index_width(item: Any) -> int:
    """How many dimensions of ``x`` an index item consumes: a bool mask as many as it has, an
    int, a slice or an integer tensor one, ``None`` and ``...`` none of their own."""
    if _is_tensor(item):
        return int(item.ndim) if item.dtype == _BOOL else 1
    return 1 if isinstance(item, (int, slice)) else 0


def clamped_slice(part: slice, size: int) -> slice:
    """``part`` (a positive step) with the same meaning along a dimension of ``size``, and every
    bound at most ``size``: start and stop clamped as Python and torch clamp them, a step of more
    than ``size`` made ``size`` (either takes the first element only). XLA computes a strided
    slice's length in 64-bit arithmetic and aborts on a step near 2**63: a kernel hands it this."""
    start, stop, step = part.indices(size)
    return slice(start, stop, min(step, max(size, 1)))


@dataclass(frozen=True, slots=True)
class TorchIndex:
    """An index split for numpy's rules: ``x[basic]``, then :meth:`second` of that.

    ``expanded`` is the index with ``...`` replaced by whole slices and whole slices appended for
    the dimensions no item reaches: one entry per dimension of ``x`` (a mask per as many), for
    kernels that check positions against ``x``'s sizes.
    """

    basic: tuple[Any, ...]
    advanced: dict[int, Any]
    expanded: tuple[Any, ...]

    def clamped(self, shape: Sequence[int]) -> tuple[Any, ...]:
        """:attr:`basic` for ``x`` of ``shape``, every slice :func:`clamped_slice` to its
        dimension (the same indexing, with bounds no larger than the dimensions)."""
        items: list[Any] = []
        dim = 0
        for item in self.basic:
            if item is None:
                items.append(item)
                continue
            items.append(clamped_slice(item, int(shape[dim])) if isinstance(item, slice) else item)
            dim += 1
        return tuple(items)

    def second(self, ndim: int) -> tuple[Any, ...] | None:
        """The index of the first result (of ``ndim`` dimensions) by the tensor items alone, or
        ``None`` when there is none (the first result is the answer)."""
        if not self.advanced:
            return None
        index: list[Any] = []
        position = 0
        while position < ndim:
            item = self.advanced.get(position)
            index.append(slice(None) if item is None else item)
            position += 1 if item is None or item.dtype != _BOOL else item.ndim
        return tuple(index)


def torch_index(items: Sequence[Any], ndim: int) -> TorchIndex:
    """Split ``items`` (ints, slices, ``None``, ``...`` and tensors) for an ``ndim``-d tensor.

    A 0-d bool becomes a new dimension indexed by ``[0]`` (true) or ``[]`` (false), as torch
    does. Raises ``IndexError`` when the items need more dimensions than ``x`` has.
    """
    consumed = sum(index_width(item) for item in items)
    if consumed > ndim:
        raise IndexError(f"too many indices for a tensor of {ndim} dimensions")
    at = next((k for k, item in enumerate(items) if item is Ellipsis), len(items))
    expanded = (*items[:at], *[slice(None)] * (ndim - consumed), *items[at + 1 :])
    basic: list[Any] = []
    advanced: dict[int, Any] = {}  # position in the first result -> index tensor
    position = 0
    for item in expanded:
        if _is_tensor(item) and item.ndim == 0 and item.dtype == _BOOL:
            basic.append(None)
            advanced[position] = np.zeros(1 if bool(item) else 0, dtype=np.int64)
            position += 1
        elif _is_tensor(item) and item.ndim:
            width = index_width(item)
            basic.extend([slice(None)] * width)
            advanced[position] = item
            position += width
        else:  # an int, a 0-d integer tensor (both remove their dimension), a slice or None
            basic.append(item)
            position += 0 if isinstance(item, int) or _is_tensor(item) else 1
    return TorchIndex(tuple(basic), advanced, expanded)
