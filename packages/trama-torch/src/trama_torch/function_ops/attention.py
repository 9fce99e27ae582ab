"""torch modules of the catalog's attention function ops (:mod:`trama.catalog.attention`).

``scaled_dot_product_attention`` calls ``torch.nn.functional.scaled_dot_product_attention`` with
every argument the document records, so a model exported from that call and imported back runs
the very same torch kernel on the same arguments: bit-identical outputs. ``attn_mask`` is passed
only when its port is wired (``None`` otherwise, as the model passed it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch.nn.functional as F

from trama_torch.functions import Compute, _Slots

__all__ = ["OPS"]


def _sdpa(slots: _Slots) -> Compute:
    """The call with the node's settings (checked by the core: ``dropout_p`` is 0, ``is_causal``
    comes without a mask)."""
    dropout_p = slots.number("dropout_p", 0.0)
    is_causal = slots.flag("is_causal", False)
    scale = slots.get("scale")
    enable_gqa = slots.flag("enable_gqa", False)

    def compute(values: Mapping[str, Any]) -> Any:
        return F.scaled_dot_product_attention(
            values["query"],
            values["key"],
            values["value"],
            attn_mask=values.get("attn_mask"),
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )

    return compute


#: Each function op: its builder, and the slots that may stand for an input port of the same name
#: (the shape of :data:`trama_torch.functions._OPS`).
OPS: Mapping[str, tuple[Any, tuple[str, ...]]] = {
    "scaled_dot_product_attention": (_sdpa, ()),
}
