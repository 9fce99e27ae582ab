"""Captured aten ops → the catalog's attention ops (see :mod:`trama_torch.capture.aten`).

A non-strict ``torch.export`` on the CPU keeps ``F.scaled_dot_product_attention`` as the one
composite op ``aten.scaled_dot_product_attention.default`` (checked on torch 2.13, for every
combination of mask, ``is_causal``, ``scale`` and ``enable_gqa``): the fused kernels it dispatches
to (``aten._scaled_dot_product_flash_attention_for_cpu`` and the CUDA ones) are chosen below the
level export records, and the capture never decomposes, so those internals do not reach this
table. Were one ever captured, it would be reported as a missing op naming it, rather than
guessed at: their second output (the log-sum-exp) has no catalog op.
"""

from __future__ import annotations

from typing import Any

from trama_torch.capture.aten import Emit, Mapped, Register, _Node, aten

__all__ = ["register"]


def _sdpa(call: _Node) -> Mapped:
    """query, key, value and a given attn_mask are ports; the rest are slots. A positive
    ``dropout_p`` (training mode) is refused here, where it can name the aten op, since the
    catalog has no deterministic meaning for it."""
    ports: dict[str, Any] = {name: call.tensor(name) for name in ("query", "key", "value")}
    if call.arguments.get("attn_mask") is not None:
        ports["attn_mask"] = call.tensor("attn_mask")
    dropout_p = call.constant("dropout_p")
    if dropout_p:
        raise call.missing(
            f"with dropout_p={dropout_p} (dropout, which torch applies in either mode) has no catalog op; "
            "export the model in eval mode, where callers pass 0"
        )
    is_causal = bool(call.constant("is_causal"))
    if is_causal and "attn_mask" in ports:
        raise call.missing("with both attn_mask and is_causal (which torch refuses) has no catalog op")
    parameters = {
        "dropout_p": 0.0,
        "is_causal": is_causal,
        "scale": call.constant("scale"),
        "enable_gqa": bool(call.constant("enable_gqa")),
    }
    return Emit("scaled_dot_product_attention", ports, parameters)


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    each(aten.scaled_dot_product_attention, _sdpa, "default")
