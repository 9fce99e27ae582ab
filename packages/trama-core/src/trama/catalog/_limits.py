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
  (``expand``'s size, ``repeat`` and ``repeat_interleave`` counts, ``interpolate``'s size, an
  adaptive pool's output, a padding amount, a stride): no tensor of at most 2**48 bytes has more
  elements, so a larger setting can only ask for more than the bound.

* A convolution's or a pool's window settings (kernel size, stride, padding, output padding,
  dilation) are at most :data:`MAX_WINDOW` (2**31 − 1), the range torch computes them in.
* Positions are bounded by what any tensor within the bound can have: an integer index beyond
  2**48 in magnitude is out of range of every dimension, and a slice's or a strided window's
  step beyond 2**48 takes one element of any dimension, as the dimension's own length would
  (:func:`slice_problem`). A slice's start and stop are clamped to the dimension, as in torch,
  and only need to be signed 64-bit integers (``2**63 - 1`` is the usual "to the end"); a larger
  one fits no framework's index type (torch silently truncates it, XLA aborts on a step of
  ``2**63 - 1``).

Sizes are Python integers, so products never overflow here; they are computed with an early
stop, so a long list of huge sizes costs no more than a short one. A dimension of 0 counts as 1
in a product: a framework computes strides and byte offsets from the other dimensions all the
same (``[0, 2**62, 2**62]`` holds nothing, and still overflows a 64-bit stride).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_ELEMENTS",
    "MAX_TENSOR_BYTES",
    "MAX_WINDOW",
    "bounded_extent",
    "extent_problem",
    "shown_limit",
    "slice_problem",
]

#: The most bytes one tensor may have (see the module doc): 2**48, 256 TiB.
MAX_TENSOR_BYTES = 2**48
#: The most elements a shape given by settings alone may hold, and the largest size, count,
#: padding, stride or scale one setting may give.
MAX_ELEMENTS = MAX_TENSOR_BYTES
#: The largest window setting (kernel size, stride, padding, output padding, dilation) of a
#: convolution or a pool: torch computes their geometry in 32-bit ints, truncating a stride of
#: 2**32 + 1 to 1 (a wrong result) and one of 2**36 to 0 (an error), and no real input is that
#: long along one dimension (a stride past it takes one window, as a stride of its length does).
MAX_WINDOW = 2**31 - 1
#: The range of a slice's start and stop: torch's (and XLA's) signed 64-bit index type.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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


def slice_problem(start: int | None, stop: int | None, step: int | None, *, stop_name: str = "stop") -> str | None:
    """Why a slice ``start:stop:step`` (``None``: absent) is refused, or ``None`` if it is within
    trama's bounds: a step of at most :data:`MAX_ELEMENTS` (a larger one takes the first element
    of any dimension within the bound, as a step of that dimension's length does), and a start
    and stop within the signed 64-bit range (they are clamped to the dimension). ``stop_name``:
    what the op calls the stop (``slice_scatter``'s ``end``)."""
    if step is not None and step > MAX_ELEMENTS:
        return (
            f"step {step} is beyond {shown_limit(MAX_ELEMENTS)}, the longest dimension trama accepts "
            "(a step of at least a dimension's length takes its first element only; "
            "docs/format.md, section 7)"
        )
    for name, bound in (("start", start), (stop_name, stop)):
        if bound is not None and not INT64_MIN <= bound <= INT64_MAX:
            return f"{name} {bound} is beyond the signed 64-bit range [-2**63, 2**63 - 1] (docs/format.md, section 7)"
    return None
