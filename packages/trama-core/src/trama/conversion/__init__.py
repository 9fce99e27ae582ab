"""The conversion layer: framework objects to documents (:func:`export_model`) and back
(:func:`import_model`), through the exporters and factories plugins provide.
"""

from __future__ import annotations

from trama.conversion._export import ExportContext, export_model
from trama.conversion._importer import Children, build_node, import_model
from trama.conversion._protocols import ExportableOp, ImportableOp, NodeFragment, Param

__all__ = [
    "Children",
    "ExportContext",
    "ExportableOp",
    "ImportableOp",
    "NodeFragment",
    "Param",
    "build_node",
    "export_model",
    "import_model",
]
