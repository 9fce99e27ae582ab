"""torch modules of the catalog's opset-2 activation function ops (:mod:`trama.catalog.activations`).

Each op calls the ``torch.nn.functional`` function of its name with the slots as keyword arguments,
so that a model exported from torch and imported back computes bit for bit what it computed
(``torch.equal`` on real models). The only additions are refusals where torch would compute
something the catalog does not define, so that the torch runtime refuses what numpy and JAX
refuse: an integer ``x`` for the clamps (``hardtanh``, ``relu6``, ``threshold``), which torch
computes with truncated bounds, and for ``softsign``/``tanhshrink``, which torch turns into float32
against the catalog's "the dtype of `x`". The other activations are refused by torch itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from trama_torch.functions import Builder, Compute, _elementwise, _Slots, _softmax

__all__ = ["OPS"]


def _floating(function: Callable[..., torch.Tensor], **defaults: Any) -> Builder:
    """:func:`trama_torch.functions._elementwise`, refusing an ``x`` that is not floating-point."""
    build = _elementwise(function, **defaults)

    def floating_build(slots: _Slots) -> Compute:
        compute = build(slots)
        where = f"{slots.node.op} (node {slots.node.id!r})"

        def checked(values: Mapping[str, Any]) -> Any:
            x = values["x"]
            if isinstance(x, torch.Tensor) and not x.is_floating_point():
                raise TypeError(f"{where}: x must be a floating-point tensor, got dtype {x.dtype}")
            return compute(values)

        return checked

    return floating_build


def _prelu(slots: _Slots) -> Compute:
    """``F.prelu(x, weight)``, both from ports (torch checks the weight's shape and dtype)."""
    return lambda values: F.prelu(values["x"], values["weight"])


#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Builder, tuple[str, ...]]] = {
    "relu6": (_floating(F.relu6), ()),
    "hardtanh": (_floating(F.hardtanh, min_val=-1.0, max_val=1.0), ()),
    "hardsigmoid": (_elementwise(F.hardsigmoid), ()),
    "mish": (_elementwise(F.mish), ()),
    "prelu": (_prelu, ()),
    "selu": (_elementwise(F.selu), ()),
    "celu": (_elementwise(F.celu, alpha=1.0), ()),
    "glu": (_elementwise(F.glu, dim=-1), ()),
    "logsigmoid": (_elementwise(F.logsigmoid), ()),
    "softsign": (_floating(F.softsign), ()),
    "tanhshrink": (_floating(F.tanhshrink), ()),
    "hardshrink": (_elementwise(F.hardshrink, lambd=0.5), ()),
    "softshrink": (_elementwise(F.softshrink, lambd=0.5), ()),
    "threshold": (_floating(F.threshold, threshold=None, value=None), ()),
    "softmin": (_softmax(F.softmin), ()),
}
