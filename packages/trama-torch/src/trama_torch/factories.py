"""The torch registry's factories, by op name: leaf modules, tensor functions and composites.

Each part of the package owns the ops of one kind; this module only merges their tables (and
refuses an op claimed twice), so that the plugin has one thing to ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["implementations"]


def implementations() -> Mapping[str, Any]:
    """Every torch factory, by op name."""
    from trama_torch.composites import composite_factories
    from trama_torch.functions import function_factories
    from trama_torch.leaves import leaf_factories

    merged: dict[str, Any] = {}
    for table in (leaf_factories(), function_factories(), composite_factories()):
        for name, factory in table.items():
            if name in merged:
                raise RuntimeError(f"torch op {name!r} is implemented twice")
            merged[name] = factory
    return merged
