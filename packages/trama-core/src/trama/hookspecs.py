"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama.hookspecs`` moved to
``trama.extension`` and ``trama.extension.hookspecs``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama.extension import PROJECT, hookimpl, hookspec
from trama.extension.hookspecs import (
    trama_exporters,
    trama_frameworks,
    trama_op_implementations,
    trama_op_specs,
    trama_opsets,
    trama_runtimes,
)

__all__ = [
    "PROJECT",
    "hookimpl",
    "hookspec",
    "trama_exporters",
    "trama_frameworks",
    "trama_op_implementations",
    "trama_op_specs",
    "trama_opsets",
    "trama_runtimes",
]

moved_module(__name__)
