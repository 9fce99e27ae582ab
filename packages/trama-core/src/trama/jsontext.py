"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama.jsontext`` moved to
``trama.format._jsontext`` and ``trama.format._layout``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama.format._jsontext import BLOB_MIN_LENGTH, ParsedText, gc_paused, parse_json
from trama.format._layout import format_json

__all__ = [
    "BLOB_MIN_LENGTH",
    "ParsedText",
    "format_json",
    "gc_paused",
    "parse_json",
]

moved_module(__name__)
