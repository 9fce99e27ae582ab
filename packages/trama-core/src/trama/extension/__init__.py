"""The extension layer: how installed packages extend trama, through pluggy hooks found by
entry points, and the tools a framework package builds its op implementations with.

Depends on the format layer only; the standard catalog (:mod:`trama.catalog`) is a plugin like
any other, loaded by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.extension._deferred import DeferredFactory, deferred_factories
from trama.extension._framework import implementation_hooks, lazy_exports
from trama.extension._plugins import (
    ENTRY_POINT_GROUP,
    SELECTION_VARIABLE,
    PluginHost,
    PluginInfo,
    PluginLoadWarning,
    PluginSelection,
    implementation_coverage,
    plugin_host,
    registry,
    reset_plugins,
)
from trama.extension.hookspecs import PROJECT, hookimpl, hookspec
from trama.format._lazy import lazy_face

if TYPE_CHECKING:
    from trama.extension._factorytable import Factory, FactoryTable, setting
    from trama.extension._kernels import Kernel, KernelProvider, StatefulKernel, as_kernel

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROJECT",
    "SELECTION_VARIABLE",
    "DeferredFactory",
    "Factory",
    "FactoryTable",
    "Kernel",
    "KernelProvider",
    "PluginHost",
    "PluginInfo",
    "PluginLoadWarning",
    "PluginSelection",
    "StatefulKernel",
    "as_kernel",
    "deferred_factories",
    "hookimpl",
    "hookspec",
    "implementation_coverage",
    "implementation_hooks",
    "lazy_exports",
    "plugin_host",
    "registry",
    "reset_plugins",
    "setting",
]

#: What kernels and their factories are made with, imported on first use: discovery needs none.
_HOMES = {
    **dict.fromkeys(("Factory", "FactoryTable", "setting"), "_factorytable"),
    **dict.fromkeys(("Kernel", "KernelProvider", "StatefulKernel", "as_kernel"), "_kernels"),
}

if not TYPE_CHECKING:  # mypy reads the imports above; at run time, each name on first use
    __getattr__, __dir__ = lazy_face(__name__, _HOMES)
