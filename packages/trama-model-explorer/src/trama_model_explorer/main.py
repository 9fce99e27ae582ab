"""The module Model Explorer loads: ``--extensions=trama_model_explorer`` imports
``trama_model_explorer.main`` and registers the adapters defined *in* it.

Model Explorer finds an extension's classes by the module that defines them (or by what its
import registered), so :class:`TramaAdapter` lives here rather than in a module of another name:
defined elsewhere, it would go unnoticed whenever that module was imported before the server
started (``from trama_model_explorer import TramaAdapter`` first, then ``model_explorer.visualize``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs

import trama
from trama_model_explorer.convert import convert_model

__all__ = ["TramaAdapter"]


class TramaAdapter(Adapter):
    """Model Explorer's adapter for ``.trama.json`` documents."""

    metadata = AdapterMetadata(
        id="trama",
        name="trama JSON",
        description="Reads a .trama.json document (trama's format): its composites become layers, its leaves ops.",
        source_repo="https://github.com/trama-format/trama/tree/main/packages/trama-model-explorer",
        fileExts=["json"],
    )

    def convert(self, model_path: str, settings: dict[str, Any]) -> ModelExplorerGraphs:
        """The graph of the document at ``model_path``; ``settings`` (from the web page) are not used."""
        return convert_model(read_structure(model_path), graph_id=_graph_name(model_path))


def read_structure(path: str | Path) -> trama.Model:
    """The document at ``path``, validated, for its structure only: inline tensors stay in the
    file (``lazy_inline``) and no tensor is ever read. A document whose external weights file is
    not beside it (Model Explorer copies an uploaded file alone into a folder of its own) is read
    without it: its tensors keep their dtype and shape, which is all a graph shows."""
    try:
        return trama.load(path, lazy_inline=True, progress=False)
    except trama.WeightsFileError:
        return trama.loads(Path(path).read_bytes())


def _graph_name(path: str) -> str:
    name = Path(path).name
    for suffix in (".trama.json", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
