"""Captured aten ops → the catalog's opset-2 activations (see :mod:`trama_torch.capture.aten`).

Each aten op maps to the function op of the ``torch.nn.functional`` call that produces it, so an
exported call comes back as that same call: ``F.relu6`` (``aten.relu6``) is ``relu6``, and
``F.hardtanh(x, 0, 6)`` (``aten.hardtanh``) stays ``hardtanh`` with those bounds, because that is
how the source reads (``nn.ReLU6`` itself is a leaf module and never reaches this table). An
in-place form (``hardtanh_``, what ``inplace=True`` runs) is its functional op: values in a
document are immutable, and the capture has already given the mutated value its own name.

Not here, because torch's Python API decomposes them before aten: ``F.softsign`` (``abs``,
``add``, ``div``), ``F.tanhshrink`` (``tanh``, ``sub``) and ``F.softmin`` (``neg``, ``softmax``)
are captured as those ops. ``aten._prelu_kernel`` is what ``aten.prelu`` runs after its shape
checks; it is mapped too, in case a program holds it, since it computes the same thing.
``aten.log_sigmoid_forward`` (the pair of the value and a buffer for the backward pass) is left
out: ``F.logsigmoid`` is captured as ``aten.log_sigmoid``, and a program holding the pair would
need the buffer to have a value of its own.
"""

from __future__ import annotations

import torch

from trama_torch.capture.aten import Emit, Register, _Node, _unary

__all__ = ["register"]

aten = torch.ops.aten


def _prelu(call: _Node) -> Emit:
    """``prelu(self, weight)``: the weight (a parameter, usually) is a port fed by a ``constant``."""
    return Emit("prelu", {"x": call.tensor(), "weight": call.tensor("weight")})


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    for name in ("relu6", "hardsigmoid", "mish", "selu"):
        each(getattr(aten, name), _unary(name), "default")
        each(getattr(aten, f"{name}_"), _unary(name), "default")
    for packet in (aten.hardtanh, aten.hardtanh_):
        each(packet, _unary("hardtanh", min_val="min_val", max_val="max_val"), "default")
    for packet in (aten.celu, aten.celu_):
        each(packet, _unary("celu", alpha="alpha"), "default")
    for packet in (aten.threshold, aten.threshold_):
        each(packet, _unary("threshold", threshold="threshold", value="value"), "default")
    each(aten.glu, _unary("glu", dim="dim"), "default")
    each(aten.hardshrink, _unary("hardshrink", lambd="lambd"), "default")
    each(aten.softshrink, _unary("softshrink", lambd="lambd"), "default")
    each(aten.log_sigmoid, _unary("logsigmoid"), "default")
    each(aten.prelu, _prelu, "default")
    each(aten._prelu_kernel, _prelu, "default")
