"""trama-lenses: paraxial optics for trama, and an example of a third-party op pack.

``from trama_lenses import ThinLens, FreeSpace, System, AsphericSurface`` gives the numpy
elements; installing the distribution is all it takes for trama to export and import them.

This file is kept empty of imports on purpose: trama's plugin discovery imports
``trama_lenses.plugin``, and Python imports this package first. Anything imported here would be
paid by every program that uses trama, lenses or not, so the element classes are loaded on first
access instead (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trama_lenses.elements import AsphericSurface, FreeSpace, System, ThinLens

__all__ = ["AsphericSurface", "FreeSpace", "System", "ThinLens"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trama_lenses import elements

        return getattr(elements, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
