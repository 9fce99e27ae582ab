"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama.validation`` moved to ``trama.format``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama.format import DOTTED_ID, NAME, collect_errors, registry_errors, structural_errors, validate

__all__ = [
    "DOTTED_ID",
    "NAME",
    "collect_errors",
    "registry_errors",
    "structural_errors",
    "validate",
]

moved_module(__name__)
