"""Deprecated since trama 0.4.0, removed in 0.5.0: ``trama.cli`` moved to ``trama.tools.cli``.

Importing this module warns once (:func:`trama._deprecated.moved_module`), naming the new
home; docs/plugins.md, "Migrating from 0.3 to 0.4", lists every move. Nothing in trama imports
this module.
"""

from __future__ import annotations

from trama._deprecated import moved_module
from trama.tools.cli import (
    COMMANDS,
    Command,
    build_parser,
    find_problems,
    main,
    register,
    schema_main,
    schema_problems,
    ssa_main,
)

__all__ = [
    "COMMANDS",
    "Command",
    "build_parser",
    "find_problems",
    "main",
    "register",
    "schema_main",
    "schema_problems",
    "ssa_main",
]

moved_module(__name__)
