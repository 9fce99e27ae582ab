"""The sizes a document may ask a framework for, checked before any framework sees them.

A document is small, but what it asks for need not be: a 300-byte file whose input facts
declare a shape of ``[10**12, 10**12]`` makes XLA abort the whole process when it compiles for
it (the byte size overflows its 64-bit arithmetic), and a ``zeros`` node of that size makes
every framework fail inside, each with its own exception. Such requests are refused here, with
a trama error that names the input or the node, whatever runtime was going to run them.

One bound serves every tensor a document can make a framework build:

* :data:`MAX_TENSOR_BYTES` (2**48 bytes, 256 TiB): the most bytes of one tensor a document may
  declare (input and output facts), create from its settings alone (``zeros``, ``full``,
  ``arange``…) or, on ``jax:*``, make while it runs (every value is checked when the program is
  traced, before XLA compiles it). It is far above any real model's largest tensor and far below
  what overflows a signed 64-bit byte count (2**63), even multiplied by a few more settings.
* The same number bounds, in elements, the shapes that settings give without a dtype
  (``expand``'s size, ``repeat`` counts, ``interpolate``'s size, an adaptive pool's output, a
  padding amount, a stride): no tensor of at most 2**48 bytes has more elements, so a larger
  setting can only ask for more than the bound.

Sizes are Python integers, so products never overflow here; they are computed with an early
stop, so a long list of huge sizes costs no more than a short one. A dimension of 0 counts as 1
in a product: a framework computes strides and byte offsets from the other dimensions all the
same (``[0, 2**62, 2**62]`` holds nothing, and still overflows a 64-bit stride).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_ELEMENTS", "MAX_TENSOR_BYTES", "bounded_extent", "extent_problem", "shown_limit"]

#: The most bytes one tensor may have (see the module doc): 2**48, 256 TiB.
MAX_TENSOR_BYTES = 2**48
#: The most elements a shape given by settings alone may hold, and the largest size, count,
#: padding, stride or scale one setting may give.
MAX_ELEMENTS = MAX_TENSOR_BYTES


def bounded_extent(sizes: Iterable[int], limit: int) -> int | None:
    """The product of ``sizes`` (each counted as at least 1), or ``None`` once it exceeds
    ``limit``: the product is never formed past the bound, whatever the sizes."""
    product = 1
    for size in sizes:
        product *= max(int(size), 1)
        if product > limit:
            return None
    return product


def extent_problem(sizes: Iterable[int], itemsize: int = 1, *, limit: int = MAX_TENSOR_BYTES) -> str | None:
    """Why a tensor of these sizes (and bytes per element) is refused, or ``None`` if it fits
    within ``limit`` bytes (:data:`MAX_TENSOR_BYTES`)."""
    items = list(sizes)
    if bounded_extent(items, limit // max(itemsize, 1)) is not None:
        return None
    unit = "bytes" if itemsize > 1 else "elements"
    shown = items if len(items) <= 8 else [*items[:8], "…"]
    bound = f"{shown_limit(limit)} {unit}, trama's limit (docs/format.md, section 7)"
    return f"a shape of {shown}, which holds more than {bound}"


def shown_limit(limit: int) -> str:
    """A limit as messages write it: ``2**48`` for a large power of two, else the number."""
    if limit >= 2**16 and limit & (limit - 1) == 0:
        return f"2**{limit.bit_length() - 1}"
    return str(limit)
