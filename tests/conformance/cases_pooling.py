"""Conformance cases of the catalog's pooling ops (merged into ``conformance_cases.CASES``).

The pools draw windows, strides (``null``: the window), paddings up to half the window,
dilations (max pools) and ceil mode, with spatial sizes from the smallest that leaves one window
upwards, batched or not; 3-d inputs stay small, since every distinct shape is a program for a
compiling runtime. Adaptive pools draw output sizes below, at and above the input's (overlapping
windows), ``null`` entries where torch allows them. Resampling draws every mode with the
dimensionality it needs, a size or a scale factor (an int or a number for every dimension, or
one per dimension; scales that are exact in binary and not, shrinking and growing, with
``recompute_scale_factor``), and ``align_corners`` where it applies. Padding draws every mode with
amounts its rules admit (negative ones, which crop, in constant mode).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from conformance_support import Case, Tolerance
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

__all__ = ["CASES", "TOLERANCES"]

Draw: TypeAlias = DrawFn


def _values(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values, normal or quantized to multiples of 0.5 (ties for the maxima)."""
    gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        return np.asarray(gen.integers(-4, 5, size=shape) / 2, dtype=np.float32)
    return np.asarray(gen.standard_normal(shape), dtype=np.float32)


def _ints(draw: Draw, count: int, low: int, high: int) -> list[int]:
    return [draw(st.integers(low, high)) for _ in range(count)]


def _batch(draw: Draw, *, unbatched: bool = True) -> tuple[int, ...]:
    return draw(st.sampled_from([(), (1,), (2,)] if unbatched else [(1,), (2,)]))


def _pool(op: str, dims: int, *, maximum: bool) -> st.SearchStrategy[Case]:
    """A max or average pool of ``dims`` spatial dimensions (see the module docstring)."""
    big = 3 if dims == 3 else 4

    @st.composite
    def strategy(draw: Draw) -> Case:
        kernel = _ints(draw, dims, 1, 3)
        stride = draw(st.none() | st.lists(st.integers(1, 3), min_size=dims, max_size=dims))
        padding = [draw(st.integers(0, k // 2)) for k in kernel]
        dilation = _ints(draw, dims, 1, 2) if maximum else [1] * dims
        whole = dims == 3 and not maximum  # torch's 3-d average pool needs the whole kernel inside x
        sizes = [
            draw(st.integers(k if whole else max(d * (k - 1) + 1 - 2 * p, 1), d * (k - 1) + big))
            for k, p, d in zip(kernel, padding, dilation, strict=True)
        ]
        slots: dict[str, Any] = {"kernel_size": kernel}
        if stride is not None or draw(st.booleans()):
            slots["stride"] = stride
        if padding != [0] * dims or draw(st.booleans()):
            slots["padding"] = padding
        if draw(st.booleans()):
            slots["ceil_mode"] = draw(st.booleans())
        if maximum:
            if dilation != [1] * dims or draw(st.booleans()):
                slots["dilation"] = dilation
        else:
            if draw(st.booleans()):
                slots["count_include_pad"] = draw(st.booleans())
            if dims > 1 and draw(st.booleans()):
                slots["divisor_override"] = draw(st.none() | st.integers(1, 5))
        shape = (*_batch(draw), draw(st.integers(1, 3)), *sizes)
        return Case(op, {"x": _values(draw, shape)}, slots)

    return strategy()


def _adaptive(op: str, dims: int, *, nullable: bool) -> st.SearchStrategy[Case]:
    big = 4 if dims == 3 else 7

    @st.composite
    def strategy(draw: Draw) -> Case:
        entry = st.integers(1, 5)
        output_size = [draw(st.none() | entry) if nullable else draw(entry) for _ in range(dims)]
        shape = (*_batch(draw), draw(st.integers(1, 3)), *_ints(draw, dims, 1, big))
        return Case(op, {"x": _values(draw, shape)}, {"output_size": output_size})

    return strategy()


#: Scale factors: exact in binary or not, shrinking and growing.
_SCALES = (0.5, 0.75, 1.0, 1.25, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0)
_MODE_DIMS = {
    "nearest": (1, 2, 3),
    "nearest-exact": (1, 2, 3),
    "area": (1, 2, 3),
    "linear": (1,),
    "bilinear": (2,),
    "bicubic": (2,),
    "trilinear": (3,),
}


def _resample(op: str) -> st.SearchStrategy[Case]:
    @st.composite
    def strategy(draw: Draw) -> Case:
        mode = draw(st.sampled_from(sorted(_MODE_DIMS)))
        dims = draw(st.sampled_from(_MODE_DIMS[mode]))
        big = 4 if dims == 3 else 6
        sizes = _ints(draw, dims, 2, big)
        slots: dict[str, Any] = {}
        if mode != "nearest" or draw(st.booleans()):
            slots["mode"] = mode
        if draw(st.booleans()):
            size: Any = draw(st.integers(1, 8)) if draw(st.booleans()) else _ints(draw, dims, 1, 8)
            slots["size"] = size
        else:
            if draw(st.booleans()):
                slots["scale_factor"] = draw(st.sampled_from(_SCALES))
            else:
                slots["scale_factor"] = [draw(st.sampled_from(_SCALES)) for _ in range(dims)]
            if draw(st.booleans()):
                slots["recompute_scale_factor"] = draw(st.booleans())
        if mode in ("linear", "bilinear", "bicubic", "trilinear") and draw(st.booleans()):
            slots["align_corners"] = draw(st.booleans())
        shape = (*_batch(draw, unbatched=False), draw(st.integers(1, 2)), *sizes)
        return Case(op, {"x": _values(draw, shape)}, slots)

    return strategy()


@st.composite
def _pad(draw: Draw) -> Case:
    mode = draw(st.sampled_from(["constant", "constant", "reflect", "replicate", "circular"]))
    if mode == "constant":
        rank = draw(st.integers(1, 4))
        shape = tuple(_ints(draw, rank, 2, 4))
        m = draw(st.integers(1, rank))
        pad = _ints(draw, 2 * m, -1, 2)
    else:
        m = draw(st.integers(1, 3))
        rank = draw(st.sampled_from([m + 1, m + 2]))
        shape = tuple(_ints(draw, rank, 1, 3 if m == 3 else 4))
        pad = []
        for k in range(m):  # the last dimension first
            size = shape[rank - 1 - k]
            widest = size - 1 if mode == "reflect" else size if mode == "circular" else 2
            pad += _ints(draw, 2, 0, min(widest, 2))
    slots: dict[str, Any] = {"pad": pad}
    if mode != "constant" or draw(st.booleans()):
        slots["mode"] = mode
    if mode == "constant" and draw(st.booleans()):
        slots["value"] = draw(st.sampled_from([None, 0.0, 1.5, -2.0]))
    return Case("pad", {"x": _values(draw, shape)}, slots)


#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    **{f"max_pool{d}d": _pool(f"max_pool{d}d", d, maximum=True) for d in (1, 2, 3)},
    **{f"avg_pool{d}d": _pool(f"avg_pool{d}d", d, maximum=False) for d in (1, 2, 3)},
    "MaxPool1d": _pool("MaxPool1d", 1, maximum=True),
    "MaxPool3d": _pool("MaxPool3d", 3, maximum=True),
    "AvgPool1d": _pool("AvgPool1d", 1, maximum=False),
    "AvgPool3d": _pool("AvgPool3d", 3, maximum=False),
    **{f"adaptive_avg_pool{d}d": _adaptive(f"adaptive_avg_pool{d}d", d, nullable=d > 1) for d in (1, 2, 3)},
    **{f"adaptive_max_pool{d}d": _adaptive(f"adaptive_max_pool{d}d", d, nullable=d > 1) for d in (1, 2)},
    "AdaptiveAvgPool1d": _adaptive("AdaptiveAvgPool1d", 1, nullable=False),
    "AdaptiveAvgPool3d": _adaptive("AdaptiveAvgPool3d", 3, nullable=True),
    "AdaptiveMaxPool1d": _adaptive("AdaptiveMaxPool1d", 1, nullable=False),
    "AdaptiveMaxPool2d": _adaptive("AdaptiveMaxPool2d", 2, nullable=True),
    "interpolate": _resample("interpolate"),
    "Upsample": _resample("Upsample"),
    "pad": _pad(),
}

#: Documented tolerance exceptions of the family's ops (each says why).
TOLERANCES: dict[str, Tolerance] = {}
