"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama.legacy`` moved to ``trama.format._legacy``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama.format._legacy import upgrade_legacy

__all__ = [
    "upgrade_legacy",
]

moved_module(__name__)
