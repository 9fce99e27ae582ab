"""Captured aten ops → the catalog's pooling ops (see :mod:`trama_torch.capture.aten`).

Pools map one to one (``aten.max_pool2d`` → ``max_pool2d``, an empty ``stride`` being torch's
"the kernel size", the catalog's ``null``). The upsampling ops map to ``interpolate`` with the
mode their name says: the ``.vec`` overloads that ``F.interpolate`` calls carry either the output
size or the scale factors, as ``interpolate``'s slots do; a plain overload carries the size and,
optionally, the scales torch's index arithmetic then uses, which the catalog can write only as
``scale_factor`` when the size is what that scale gives. The padding ops map to ``pad``.

``aten.adaptive_max_pool1d/2d`` return the values and the indices; the catalog's ops give the
values, so the indices are a placeholder that no op can read: a model that uses them fails
there, naming the op. Symbolic sizes (an output size read from the input at run time) cannot be
recorded and raise :class:`MissingOp`, as the size read they come from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from trama_torch.capture.aten import Emit, Register, _Node, _size_read, _static_shape, as_size
from trama_torch.capture.values import Several, Sym, is_runtime

__all__ = ["register"]

aten = torch.ops.aten
Handler = Callable[[_Node], Any]


def _ints(call: _Node, name: str, dims: int | None = None) -> list[Any]:
    """An int-list argument as the catalog writes it: ``dims`` entries (torch lets one entry
    stand for all, and an int for a list); a symbolic entry (an output size) is its expression."""
    value = call.arguments.get(name)
    if isinstance(value, Sym) or is_runtime(value):
        raise _size_read(call)
    entries: list[Any] = []
    for entry in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(entry, Sym):
            entries.append(as_size(call, entry))
            continue
        if is_runtime(entry):
            raise _size_read(call)
        if not isinstance(entry, int):
            raise call.missing(f"takes {name}={value!r}, which is not a list of ints")
        entries.append(int(entry))
    return entries * dims if dims is not None and len(entries) == 1 else entries


def _max_pool(dims: int) -> Handler:
    def handle(call: _Node) -> Emit:
        stride = _ints(call, "stride", dims)
        parameters = {
            "kernel_size": _ints(call, "kernel_size", dims),
            "stride": stride or None,  # [] is torch's "the kernel size"
            "padding": _ints(call, "padding", dims),
            "dilation": _ints(call, "dilation", dims),
            "ceil_mode": bool(call.constant("ceil_mode")),
        }
        return Emit(f"max_pool{dims}d", {"x": call.tensor()}, parameters)

    return handle


def _avg_pool(dims: int) -> Handler:
    def handle(call: _Node) -> Emit:
        stride = _ints(call, "stride", dims)
        parameters: dict[str, Any] = {
            "kernel_size": _ints(call, "kernel_size", dims),
            "stride": stride or None,
            "padding": _ints(call, "padding", dims),
            "ceil_mode": bool(call.constant("ceil_mode")),
            "count_include_pad": bool(call.constant("count_include_pad")),
        }
        if dims > 1:
            parameters["divisor_override"] = call.constant("divisor_override")
        return Emit(f"avg_pool{dims}d", {"x": call.tensor()}, parameters)

    return handle


def _adaptive(op: str, dims: int) -> Handler:
    def handle(call: _Node) -> Emit:
        return Emit(op, {"x": call.tensor()}, {"output_size": _ints(call, "output_size", dims)})

    return handle


class _Indices:
    """The indices an ``aten.adaptive_max_pool`` returns, which the catalog's op does not give:
    any op that reads them refuses this value, whose text says why."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<the indices of {self.what}, which the catalog's adaptive max pools do not give>"


def _adaptive_max(dims: int) -> Handler:
    adaptive = _adaptive(f"adaptive_max_pool{dims}d", dims)

    def handle(call: _Node) -> Several:
        return Several((adaptive(call), _Indices(call.what)))

    return handle


def _scales(call: _Node, sizes: list[int]) -> list[float] | None:
    """The scales of a plain upsampling overload (``scales_h``…) as ``scale_factor``: ``None``
    when none is given; refused unless all are, and the input's size times each gives ``sizes``
    (what ``interpolate`` computes from a scale factor)."""
    scales = [value for name, value in call.arguments.items() if name.startswith("scales")]
    if all(scale is None for scale in scales):
        return None
    shape = _static_shape(call)[2:]
    if any(scale is None for scale in scales):
        raise call.missing("with scales for some dimensions only has no catalog op")
    if any(isinstance(size, Sym) for size in shape):  # the scales are what the sizes were computed from
        return [float(scale) for scale in scales]
    if [math.floor(size * scale) for size, scale in zip(shape, scales, strict=True)] != sizes:
        raise call.missing(f"with output size {sizes} and scales {scales} that do not give it has no catalog op")
    return [float(scale) for scale in scales]


def _upsample(mode: str) -> Handler:
    """An upsampling op as ``interpolate`` in ``mode``: its output size or its scale factors."""

    def handle(call: _Node) -> Emit:
        x = call.tensor("input" if "input" in call.arguments else "self")
        parameters: dict[str, Any] = {"mode": mode}
        if "align_corners" in call.arguments:
            parameters["align_corners"] = bool(call.constant("align_corners"))
        if "scale_factors" in call.arguments:  # .vec: one of the two is given
            factors = call.arguments["scale_factors"]
            if factors is not None:
                parameters["scale_factor"] = [float(scale) for scale in factors]
            else:
                parameters["size"] = _ints(call, "output_size")
            return Emit("interpolate", {"x": x}, parameters)
        sizes = _ints(call, "output_size")
        scales = _scales(call, sizes)
        if scales is None:
            parameters["size"] = sizes
        else:
            parameters["scale_factor"] = scales
        return Emit("interpolate", {"x": x}, parameters)

    return handle


def _pad(call: _Node) -> Emit:
    parameters: dict[str, Any] = {"pad": _ints(call, "pad"), "mode": call.constant("mode")}
    value = call.constant("value")
    if value is not None:
        parameters["value"] = float(value)
    return Emit("pad", {"x": call.tensor()}, parameters)


def _constant_pad(call: _Node) -> Emit:
    value = call.constant("value")
    return Emit("pad", {"x": call.tensor()}, {"pad": _ints(call, "pad"), "mode": "constant", "value": float(value)})


def _padded(mode: str, argument: str = "padding") -> Handler:
    def handle(call: _Node) -> Emit:
        return Emit("pad", {"x": call.tensor()}, {"pad": _ints(call, argument), "mode": mode})

    return handle


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    for dims in (1, 2, 3):
        each(getattr(aten, f"max_pool{dims}d"), _max_pool(dims), "default")
        each(getattr(aten, f"avg_pool{dims}d"), _avg_pool(dims), "default")
        each(getattr(aten, f"adaptive_avg_pool{dims}d"), _adaptive(f"adaptive_avg_pool{dims}d", dims), "default")
        each(getattr(aten, f"reflection_pad{dims}d"), _padded("reflect"), "default")
        each(getattr(aten, f"replication_pad{dims}d"), _padded("replicate"), "default")
    for dims in (2, 3):
        each(getattr(aten, f"_adaptive_avg_pool{dims}d"), _adaptive(f"adaptive_avg_pool{dims}d", dims), "default")
    for dims in (1, 2):
        each(getattr(aten, f"adaptive_max_pool{dims}d"), _adaptive_max(dims), "default")
    for packet, mode in (
        (aten.upsample_nearest1d, "nearest"),
        (aten.upsample_nearest2d, "nearest"),
        (aten.upsample_nearest3d, "nearest"),
        (aten._upsample_nearest_exact1d, "nearest-exact"),
        (aten._upsample_nearest_exact2d, "nearest-exact"),
        (aten._upsample_nearest_exact3d, "nearest-exact"),
        (aten.upsample_linear1d, "linear"),
        (aten.upsample_bilinear2d, "bilinear"),
        (aten.upsample_trilinear3d, "trilinear"),
        (aten.upsample_bicubic2d, "bicubic"),
    ):
        each(packet, _upsample(mode), "default", "vec")
    each(aten.pad, _pad, "default")
    each(aten.constant_pad_nd, _constant_pad, "default")
    each(aten._pad_circular, _padded("circular", "pad"), "default")
