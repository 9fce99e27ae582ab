"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama_torch.calling`` moved to ``trama_torch.fx.submodule_calls``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama_torch.fx.submodule_calls import (
    CallSite,
    ExportState,
    Fixed,
    Kind,
    NameTree,
    ValueTree,
    Wire,
    bind_module_call,
    call_child,
    current_state,
    export_state,
    is_wire,
    module_kind,
    names_to_wires,
    sequential_is_chain,
    site_from_ports,
    tree_leaves,
)

__all__ = [
    "CallSite",
    "ExportState",
    "Fixed",
    "Kind",
    "NameTree",
    "ValueTree",
    "Wire",
    "bind_module_call",
    "call_child",
    "current_state",
    "export_state",
    "is_wire",
    "module_kind",
    "names_to_wires",
    "sequential_is_chain",
    "site_from_ports",
    "tree_leaves",
]

moved_module(__name__)
