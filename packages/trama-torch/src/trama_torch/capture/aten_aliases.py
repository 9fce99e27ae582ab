"""aten's other names for ops the capture maps: each alias gets its original's handler.

torch keeps some operators under two names: ``torch.multiply`` is ``torch.mul``, ``torch.greater``
``torch.gt``, ``torch.absolute`` ``torch.abs``, ``torch.special.expit`` ``torch.sigmoid``. ATen
declares each alias as an operator of its own (``native_functions.yaml``: "multiply, alias for
mul"), implemented by calling the original, and a non-strict ``torch.export`` records the name the
model called (``aten.multiply.Tensor``), not the original's. An alias has its original's schema
(its overloads' argument names and defaults) and means the same, so its handler is the
original's, overload by overload, and the document says ``mul`` whichever name the model used.

:data:`ALIASES` lists the aliases of torch 2.13 whose original the capture maps, read from that
``native_functions.yaml`` ("alias for" and the ``special_*`` functions that call a plain op);
``sgn`` is ``sign`` extended to complex numbers, which the format has none of. An alias of an op
the catalog lacks stays missing under its own name: ``arccos``, ``arcsin``, ``arctan``,
``arctan2`` and their hyperbolic kin (the catalog has no ``acos``…), ``fix`` (no ``trunc``),
``moveaxis`` (no ``movedim``). Neither are the in-place comparisons (``greater_``…), as their
originals (``gt_``…) are not: they store a bool result in the dtype of ``self``. ``clip``
(of ``clamp``) and ``swapaxes``/``swapdims`` (of ``transpose``, under other argument names)
have handlers of their own in their families.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from trama_torch.capture.aten import Handler

__all__ = ["ALIASES", "aliased", "pairs"]

aten = torch.ops.aten

#: ``(alias, original)`` packet names; each overload of the alias takes the handler of the
#: original's overload of the same name, or of the one named in :data:`_RENAMED`.
ALIASES: tuple[tuple[str, str], ...] = (
    ("absolute", "abs"),
    ("absolute_", "abs_"),
    ("negative", "neg"),
    ("negative_", "neg_"),
    ("multiply", "mul"),
    ("multiply_", "mul_"),
    ("subtract", "sub"),
    ("subtract_", "sub_"),
    ("divide", "div"),
    ("divide_", "div_"),
    ("true_divide", "div"),
    ("true_divide_", "div_"),
    ("greater", "gt"),
    ("greater_equal", "ge"),
    ("less", "lt"),
    ("less_equal", "le"),
    ("not_equal", "ne"),
    ("concat", "cat"),
    ("concatenate", "cat"),
    ("linalg_matmul", "matmul"),
    ("sgn", "sign"),
    ("sgn_", "sign_"),
    ("special_expit", "sigmoid"),
    ("special_erf", "erf"),
    ("special_expm1", "expm1"),
    ("special_log1p", "log1p"),
    ("special_logsumexp", "logsumexp"),
    ("special_round", "round"),
    ("special_softmax", "softmax"),
    ("special_log_softmax", "log_softmax"),
)

#: Overloads whose name differs between an alias and its original: ``(alias, overload)`` → the
#: original's overload (``torch.special.softmax`` has one overload, ``default``, that is
#: ``softmax.int``; ``special_round`` takes ``decimals`` as ``round.decimals`` does).
_RENAMED: dict[tuple[str, str], str] = {
    ("special_softmax", "default"): "int",
    ("special_log_softmax", "default"): "int",
    ("special_round", "default"): "decimals",
}


def pairs() -> list[tuple[Any, Any]]:
    """Every ``(alias overload, original overload)`` of :data:`ALIASES` that this torch has
    (``out=`` forms never reach a captured graph, so those are left out)."""
    found = []
    for alias, original in ALIASES:
        alias_packet, original_packet = getattr(aten, alias, None), getattr(aten, original, None)
        if alias_packet is None or original_packet is None:
            continue
        for overload in alias_packet.overloads():
            if "out" in overload.split("_"):
                continue
            target = _RENAMED.get((alias, overload), overload)
            if target in original_packet.overloads():
                found.append((getattr(alias_packet, overload), getattr(original_packet, target)))
    return found


def aliased(table: Mapping[Any, Handler]) -> dict[Any, Handler]:
    """The handlers of the aliases whose original has one in ``table`` (by aten overload)."""
    return {alias: table[original] for alias, original in pairs() if original in table}
