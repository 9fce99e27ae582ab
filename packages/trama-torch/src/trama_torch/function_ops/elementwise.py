"""torch modules of the catalog's elementwise function ops (:mod:`trama.catalog.elementwise`).

Each op calls the torch function a model calls for it, with the operands as the document holds
them (a number stays a Python number, so that it promotes as one), so that an exported model
imported back gives torch's own result bit for bit. Comparisons and bitwise ops use Python's
operators, which also take a number on the left (``1 & mask`` runs ``Tensor.__rand__``), where
``torch.eq(2, x)`` would not. Settings come checked from the core
(:func:`trama.catalog.check_settings`), which the importer has run before any builder.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import torch

from trama.catalog import check_settings
from trama_torch.functions import Builder, Compute, _elementwise, _Slots
from trama_torch.tensors import TORCH_DTYPES

__all__ = ["OPS"]


def _round(slots: _Slots) -> Compute:
    """``torch.round``; ``decimals`` is passed only when it is not 0 (``round.default``)."""
    decimals = slots.integer("decimals", 0)
    if decimals == 0:
        return lambda values: torch.round(values["x"])
    return lambda values: torch.round(values["x"], decimals=decimals)


def _pair(function: Callable[[Any, Any], Any]) -> Builder:
    """A binary op on ``x`` and ``other``: ports or constant slots for Python's operators, ports
    for ``torch.logical_and`` and ``torch.minimum`` (which take no number)."""

    def build(slots: _Slots) -> Compute:
        return lambda values: function(values["x"], values["other"])

    return build


def _where(slots: _Slots) -> Compute:
    return lambda values: torch.where(values["condition"], values["x"], values["other"])


def _masked_fill(slots: _Slots) -> Compute:
    return lambda values: torch.masked_fill(values["x"], values["mask"], values["value"])


def _clamp(slots: _Slots) -> Compute:
    """``torch.clamp`` with each bound from its port, its slot (a number) or absent (``None``).
    torch takes both bounds as tensors or both as numbers; a node with one of each (which the
    catalog allows) is two calls, ``min`` first: ``max(x, min)`` then ``min(·, max)``, the same
    values and the same promotion as one call."""
    settings = check_settings(slots.node, slots.parameters)
    wired: tuple[str, ...] = settings["wired"]
    numbers = {name: slots.get(name) for name in ("min", "max")}
    mixed = len(wired) == 1 and numbers["max" if wired == ("min",) else "min"] is not None

    def compute(values: Mapping[str, Any]) -> Any:
        low, high = (values[name] if name in wired else numbers[name] for name in ("min", "max"))
        if mixed:
            return torch.clamp(torch.clamp(values["x"], min=low), max=high)
        return torch.clamp(values["x"], min=low, max=high)

    return compute


def _to(slots: _Slots) -> Compute:
    """``Tensor.to(dtype)``: the format's dtype names are torch's attribute names."""
    dtype = TORCH_DTYPES[check_settings(slots.node, slots.parameters).text("dtype")]
    slots.get("dtype")
    return lambda values: values["x"].to(dtype)


_UNARY: dict[str, Callable[..., torch.Tensor]] = {
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "sign": torch.sign,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not,
}

_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor,
}

_TENSOR_OPS: dict[str, Callable[..., torch.Tensor]] = {
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "minimum": torch.minimum,
    "maximum": torch.maximum,
}

#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Any, tuple[str, ...]]] = {
    **{name: (_elementwise(function), ()) for name, function in _UNARY.items()},
    "round": (_round, ()),
    **{name: (_pair(function), ("x", "other")) for name, function in _OPERATORS.items()},
    **{name: (_pair(function), ()) for name, function in _TENSOR_OPS.items()},
    "where": (_where, ("x", "other")),
    "masked_fill": (_masked_fill, ("value",)),
    "clamp": (_clamp, ()),
    "to": (_to, ()),
}
