"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama_torch.tracing`` moved to ``trama_torch.fx.trace``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama_torch.fx.trace import (
    EXPORT_HINT,
    ForwardBinding,
    Trace,
    binding_from_call,
    binding_from_ports,
    described,
    forward_signature,
    live_nodes,
    trace_forward,
)

__all__ = [
    "EXPORT_HINT",
    "ForwardBinding",
    "Trace",
    "binding_from_call",
    "binding_from_ports",
    "described",
    "forward_signature",
    "live_nodes",
    "trace_forward",
]

moved_module(__name__)
