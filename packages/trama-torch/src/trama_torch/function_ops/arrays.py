"""torch modules of the catalog's arrays function ops (:mod:`trama.catalog.arrays`).

Each op calls the torch function a model calls for it (``Tensor.expand``, ``torch.gather``,
``torch.einsum``, ``torch.var``, ``torch.arange``…) with the catalog's settings as its arguments,
so that an exported call imported back gives torch's own result, bit for bit. Settings are read
from the core's check (:func:`trama.catalog.check_settings`, which the importer has already run
for the node): ``einsum``'s equation comes in explicit form and a created tensor's dtype decided.

The creation ops without an input (``arange``, ``full``, ``zeros``, ``ones``) have no tensor to
take a device from, so their computation is a small module holding an empty, non-persistent
buffer: ``.to(device)`` moves it with the rest of the model, and the tensor is created there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from trama.catalog import Settings, check_settings
from trama.catalog._arrays_checks import interleaved, top_k_axis
from trama_torch.functions import Builder, Compute, _Slots
from trama_torch.tensors import TORCH_DTYPES

__all__ = ["OPS"]


def _checked(slots: _Slots) -> Settings:
    """The node's checked settings; every slot is remembered for the module's ``repr``."""
    for name in slots.parameters:
        slots.get(name)
    return check_settings(slots.node, slots.parameters)


def _dtype(name: str | None) -> torch.dtype | None:
    """A format dtype name as torch's dtype (every name of the format is one of torch's)."""
    return None if name is None else TORCH_DTYPES[name]


def _unary(make: Callable[[Settings], Callable[[torch.Tensor], Any]]) -> Builder:
    """A builder of an op on the port ``x``: ``make(settings)`` gives the function of ``x``."""

    def build(slots: _Slots) -> Compute:
        function = make(_checked(slots))
        return lambda values: function(values["x"])

    return build


def _int_slot(function: Callable[[torch.Tensor, int], torch.Tensor], slot: str) -> Builder:
    """``function(x, value)`` for an int slot (``cumsum``'s ``dim``, ``triu``'s ``diagonal``)."""

    def make(settings: Settings) -> Callable[[torch.Tensor], Any]:
        value = settings.integer(slot)
        return lambda x: function(x, value)

    return _unary(make)


def _list_slot(function: Callable[[torch.Tensor, list[int]], torch.Tensor], slot: str) -> Builder:
    """``function(x, values)`` for a list slot (``expand``'s ``size``, ``flip``'s ``dims``)."""

    def make(settings: Settings) -> Callable[[torch.Tensor], Any]:
        values = list(settings.integers(slot))
        return lambda x: function(x, values)

    return _unary(make)


def _indexed(function: Callable[..., torch.Tensor]) -> Builder:
    """``gather``/``index_select``: ``function(x, dim, index)``."""

    def build(slots: _Slots) -> Compute:
        dim = _checked(slots).integer("dim")
        return lambda values: function(values["x"], dim, values["index"])

    return build


def _slice_scatter(slots: _Slots) -> Compute:
    s = _checked(slots)
    dim, start, end, step = s.integer("dim"), s.optional_integer("start"), s.optional_integer("end"), s.integer("step")
    return lambda values: torch.slice_scatter(values["x"], values["src"], dim, start, end, step)


def _repeat_interleave(settings: Settings) -> Callable[[torch.Tensor], Any]:
    """``torch.repeat_interleave`` with an int where one count serves every slice, else the
    counts as a tensor on ``x``'s device, with their sum as ``output_size`` (which spares torch
    a device synchronization to read it). The counts' fit to ``x`` is the core's rule
    (:func:`interleaved`), so that every runtime refuses a misfit alike."""
    counts, dim = settings.integers("repeats"), settings.optional_integer("dim")

    def compute(x: torch.Tensor) -> torch.Tensor:
        _, length = interleaved(tuple(x.shape), dim, counts)
        if len(counts) == 1:
            return torch.repeat_interleave(x, counts[0], dim)
        repeats = torch.tensor(counts, dtype=torch.int64, device=x.device)
        return torch.repeat_interleave(x, repeats, dim, output_size=length)

    return compute


def _topk(settings: Settings) -> Callable[[torch.Tensor], Any]:
    """The first ``k`` of ``torch.sort(..., stable=True)``, not ``torch.topk``: the catalog's tie
    rule (the lower position first), which ``torch.topk``'s kernels do not keep. The values are
    the same elements either way; only the order of equal ones' indices can differ."""
    k, dim, largest = settings.integer("k"), settings.integer("dim"), settings.flag("largest")

    def compute(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dtype == torch.bool:
            raise TypeError("topk of bools is not defined (torch refuses it too)")
        axis = top_k_axis(tuple(x.shape), dim, k)
        if x.dim() == 0:  # one element: x itself and the index 0 (k is 0 or 1), as torch.topk gives
            return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
        values, indices = torch.sort(x, dim=axis, descending=largest, stable=True)
        return values.narrow(axis, 0, k), indices.narrow(axis, 0, k)

    return compute


def _einsum(slots: _Slots) -> Compute:
    settings = _checked(slots)
    equation = settings.text("equation")
    names = [f"x{k}" for k in range(len(slots.node.inputs))]
    return lambda values: torch.einsum(equation, *(values[name] for name in names))


def _reduction(function: Callable[..., torch.Tensor], *, all_dims: Any = None, correction: bool = False) -> Builder:
    """A reduction over ``dim`` (null: all, which ``torch.amin`` spells ``()``) with ``keepdim``
    (and ``correction`` for ``var``/``std``)."""

    def build(slots: _Slots) -> Compute:
        settings = _checked(slots)
        dims, keepdim = settings["dim"], settings.flag("keepdim")
        kwargs: dict[str, Any] = {"dim": all_dims if dims is None else dims, "keepdim": keepdim}
        if correction:
            kwargs["correction"] = settings.number("correction")
        return lambda values: function(values["x"], **kwargs)

    return build


def _single(function: Callable[..., torch.Tensor]) -> Builder:
    """``argmin``/``prod``: one dimension, or (``dim`` null) every element."""

    def build(slots: _Slots) -> Compute:
        settings = _checked(slots)
        dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")
        if dim is not None or function is torch.argmin:
            return lambda values: function(values["x"], dim=dim, keepdim=keepdim)

        def whole(values: Mapping[str, Any]) -> Any:
            x = values["x"]
            result = function(x)
            return result.reshape((1,) * x.dim()) if keepdim else result

        return whole

    return build


def _logsumexp(settings: Settings) -> Callable[[torch.Tensor], Any]:
    dims, keepdim = settings.integers("dim"), settings.flag("keepdim")
    return lambda x: torch.logsumexp(x, dims, keepdim=keepdim)


def _vector_norm(settings: Settings) -> Callable[[torch.Tensor], Any]:
    dims, order, keepdim = settings["dim"], settings.number("ord"), settings.flag("keepdim")
    dim = None if dims is None else list(dims)
    return lambda x: torch.linalg.vector_norm(x, order, dim, keepdim)


def _roll(settings: Settings) -> Callable[[torch.Tensor], Any]:
    shifts, dims = list(settings.integers("shifts")), settings["dims"]
    return lambda x: torch.roll(x, shifts, [] if dims is None else list(dims))


class _Created(nn.Module):
    """A created tensor's computation, made on the device of an empty buffer that moves with
    the model (the op has no input to take a device from)."""

    anchor: torch.Tensor

    def __init__(self, make: Callable[[torch.device], torch.Tensor]) -> None:
        super().__init__()
        self.make = make
        self.register_buffer("anchor", torch.empty(0), persistent=False)

    def forward(self, values: Mapping[str, Any]) -> torch.Tensor:
        return self.make(self.anchor.device)


def _arange(slots: _Slots) -> Compute:
    s = _checked(slots)
    start, end, step, dtype = s["start"], s["end"], s["step"], _dtype(s["dtype"])
    return _Created(lambda device: torch.arange(start, end, step, dtype=dtype, device=device))


def _full(slots: _Slots) -> Compute:
    s = _checked(slots)
    size, fill, dtype = list(s.integers("size")), s["fill_value"], _dtype(s["dtype"])
    return _Created(lambda device: torch.full(size, fill, dtype=dtype, device=device))


def _constant_fill(function: Callable[..., torch.Tensor]) -> Builder:
    """``zeros``/``ones``."""

    def build(slots: _Slots) -> Compute:
        s = _checked(slots)
        size, dtype = list(s.integers("size")), _dtype(s["dtype"])
        return _Created(lambda device: function(size, dtype=dtype, device=device))

    return build


def _full_like(settings: Settings) -> Callable[[torch.Tensor], Any]:
    fill, dtype = settings["fill_value"], _dtype(settings["dtype"])
    return lambda x: torch.full_like(x, fill, dtype=dtype)


def _like(function: Callable[..., torch.Tensor]) -> Callable[[Settings], Callable[[torch.Tensor], Any]]:
    """``zeros_like``/``ones_like``."""

    def make(settings: Settings) -> Callable[[torch.Tensor], Any]:
        dtype = _dtype(settings["dtype"])
        return lambda x: function(x, dtype=dtype)

    return make


#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Any, tuple[str, ...]]] = {
    "expand": (_list_slot(torch.Tensor.expand, "size"), ()),
    "gather": (_indexed(torch.gather), ()),
    "index_select": (_indexed(torch.index_select), ()),
    "cumsum": (_int_slot(torch.cumsum, "dim"), ()),
    "cumprod": (_int_slot(torch.cumprod, "dim"), ()),
    "triu": (_int_slot(torch.triu, "diagonal"), ()),
    "tril": (_int_slot(torch.tril, "diagonal"), ()),
    "roll": (_unary(_roll), ()),
    "flip": (_list_slot(torch.flip, "dims"), ()),
    "slice_scatter": (_slice_scatter, ()),
    "contiguous": (_unary(lambda settings: torch.Tensor.contiguous), ()),
    "repeat": (_list_slot(torch.Tensor.repeat, "repeats"), ()),
    "tile": (_list_slot(torch.tile, "dims"), ()),
    "repeat_interleave": (_unary(_repeat_interleave), ()),
    "einsum": (_einsum, ()),
    "min": (_reduction(torch.amin, all_dims=()), ()),
    "argmin": (_single(torch.argmin), ()),
    "prod": (_single(torch.prod), ()),
    "var": (_reduction(torch.var, correction=True), ()),
    "std": (_reduction(torch.std, correction=True), ()),
    "any": (_reduction(torch.any), ()),
    "all": (_reduction(torch.all), ()),
    "logsumexp": (_unary(_logsumexp), ()),
    "linalg_vector_norm": (_unary(_vector_norm), ()),
    "topk": (_unary(_topk), ()),
    "arange": (_arange, ()),
    "full": (_full, ()),
    "zeros": (_constant_fill(torch.zeros), ()),
    "ones": (_constant_fill(torch.ones), ()),
    "full_like": (_unary(_full_like), ()),
    "zeros_like": (_unary(_like(torch.zeros_like)), ()),
    "ones_like": (_unary(_like(torch.ones_like)), ()),
}
