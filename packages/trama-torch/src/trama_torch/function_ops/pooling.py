"""torch modules of the catalog's pooling function ops (:mod:`trama.catalog.pooling`).

Each op calls the ``torch.nn.functional`` function of its name with the node's slots as that
function's arguments (a list slot as the list, ``null`` as ``None``), which reaches the very aten
op a captured model ran (``F.max_pool2d`` → ``aten.max_pool2d``, ``F.interpolate`` with a scale
→ ``aten.upsample_bilinear2d.vec`` with the same scales), so an exported call gives back torch's
own result, bit for bit. The settings were checked by the core before the builder runs
(:func:`trama.catalog.check_settings`); the builders only read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from trama_torch.functions import Builder, Compute, _Slots
from trama_torch.leaves.modules import half_in_float32

__all__ = ["OPS"]


def _max_pool(function: Callable[..., Any], dims: int) -> Builder:
    def build(slots: _Slots) -> Compute:
        kernel = slots.get("kernel_size")
        stride = slots.get("stride")
        padding = slots.get("padding", [0] * dims)
        dilation = slots.get("dilation", [1] * dims)
        ceil_mode = slots.get("ceil_mode", False)
        return lambda values: function(values["x"], kernel, stride, padding, dilation, ceil_mode)

    return build


def _avg_pool(function: Callable[..., Any], dims: int) -> Builder:
    def build(slots: _Slots) -> Compute:
        kernel = slots.get("kernel_size")
        stride = slots.get("stride")
        padding = slots.get("padding", [0] * dims)
        ceil_mode = slots.get("ceil_mode", False)
        count_include_pad = slots.get("count_include_pad", True)
        if dims == 1:  # torch's 1-d average pool has no divisor_override
            return lambda values: function(values["x"], kernel, stride, padding, ceil_mode, count_include_pad)
        divisor_override = slots.get("divisor_override")

        def pool(x: torch.Tensor) -> torch.Tensor:
            return function(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)  # type: ignore[no-any-return]

        if dims == 3:  # no 16-bit CPU kernel in torch: pooled in float32, rounded once (the catalog's rule)
            return lambda values: half_in_float32(pool, values["x"])
        return lambda values: pool(values["x"])

    return build


def _adaptive(function: Callable[..., Any]) -> Builder:
    def build(slots: _Slots) -> Compute:
        output_size = slots.get("output_size")
        return lambda values: function(values["x"], output_size)

    return build


def _interpolate(slots: _Slots) -> Compute:
    size = slots.get("size")
    scale_factor = slots.get("scale_factor")
    if isinstance(scale_factor, list):
        scale_factor = [float(scale) for scale in scale_factor]
    elif scale_factor is not None:
        scale_factor = float(scale_factor)
    mode = slots.get("mode", "nearest")
    align_corners = slots.get("align_corners")
    recompute = slots.get("recompute_scale_factor")
    return lambda values: F.interpolate(
        values["x"],
        size=size,
        scale_factor=scale_factor,
        mode=mode,
        align_corners=align_corners,
        recompute_scale_factor=recompute,
    )


def _pad(slots: _Slots) -> Compute:
    amounts = slots.get("pad")
    mode = slots.get("mode", "constant")
    value = slots.get("value")
    return lambda values: F.pad(values["x"], amounts, mode=mode, value=value)


#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Builder, tuple[str, ...]]] = {
    "max_pool1d": (_max_pool(F.max_pool1d, 1), ()),
    "max_pool2d": (_max_pool(F.max_pool2d, 2), ()),
    "max_pool3d": (_max_pool(F.max_pool3d, 3), ()),
    "avg_pool1d": (_avg_pool(F.avg_pool1d, 1), ()),
    "avg_pool2d": (_avg_pool(F.avg_pool2d, 2), ()),
    "avg_pool3d": (_avg_pool(F.avg_pool3d, 3), ()),
    "adaptive_avg_pool1d": (_adaptive(F.adaptive_avg_pool1d), ()),
    "adaptive_avg_pool2d": (_adaptive(F.adaptive_avg_pool2d), ()),
    "adaptive_avg_pool3d": (_adaptive(F.adaptive_avg_pool3d), ()),
    "adaptive_max_pool1d": (_adaptive(F.adaptive_max_pool1d), ()),
    "adaptive_max_pool2d": (_adaptive(F.adaptive_max_pool2d), ()),
    "interpolate": (_interpolate, ()),
    "pad": (_pad, ()),
}
