"""The conversion layer: framework objects to documents (:func:`export_model`) and back
(:func:`import_model`), through the exporters and factories plugins provide.

Each name is imported from its module when first read (:mod:`trama.format._lazy`): an op pack's
plugin module builds its :class:`NodeFragment` and :class:`Param` at discovery, which must not
import numpy the way exporting and importing do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.format._lazy import lazy_face

if TYPE_CHECKING:
    from trama.conversion._export import ExportContext, export_model
    from trama.conversion._importer import Children, build_node, import_model
    from trama.conversion._protocols import ExportableOp, ImportableOp, NodeFragment, Param
    from trama.conversion._sized import SizedNode

__all__ = [
    "Children",
    "ExportContext",
    "ExportableOp",
    "ImportableOp",
    "NodeFragment",
    "Param",
    "SizedNode",
    "build_node",
    "export_model",
    "import_model",
]

#: The module (within this package) of each public name.
_HOMES = {
    **dict.fromkeys(("ExportContext", "export_model"), "_export"),
    **dict.fromkeys(("Children", "build_node", "import_model"), "_importer"),
    **dict.fromkeys(("ExportableOp", "ImportableOp", "NodeFragment", "Param"), "_protocols"),
    "SizedNode": "_sized",
}

if not TYPE_CHECKING:  # mypy reads the imports above; at run time, each name on first use
    __getattr__, __dir__ = lazy_face(__name__, _HOMES)
